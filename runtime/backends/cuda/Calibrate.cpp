// Calibrate.cpp - The GPU's figures for the cost model (strata-calibrate
// --backend cuda): matrix-product rates by size and element type through
// the backend's own cuBLASLt path, streaming kernels, the cost of a launch,
// and pinned copies each way and both at once. Each figure is the median
// of timed repetitions (CUDA events) after a warm-up.

#include "runtime/backends/cuda/CudaBackend.h"
#include "runtime/backends/cuda/Kernels.h"
#include "runtime/support/Half.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

namespace strata::runtime {

namespace {

using artifact::Kernel;

struct Device {
  cudaStream_t stream = nullptr, second = nullptr;
  cuda::LaunchContext launch;
  std::vector<void *> buffers;
  ~Device() {
    for (void *p : buffers)
      cudaFree(p);
    if (launch.workspace)
      cudaFree(launch.workspace);
    if (launch.errorFlag)
      cudaFree(launch.errorFlag);
    if (launch.cublasLt)
      cublasLtDestroy(static_cast<cublasLtHandle_t>(launch.cublasLt));
    if (stream)
      cudaStreamDestroy(stream);
    if (second)
      cudaStreamDestroy(second);
  }
  void *alloc(uint64_t bytes) {
    void *p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess)
      return nullptr;
    buffers.push_back(p);
    return p;
  }
};

/// Median seconds of `reps` timed runs of `body` on `stream`.
double timed(cudaStream_t stream, int reps, const std::function<void()> &body) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  body(); // Warm-up (and cuBLASLt's algorithm choice).
  cudaStreamSynchronize(stream);
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a, stream);
    body();
    cudaEventRecord(b, stream);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    samples.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

/// Fills device memory with small random values of `dtype` (zeros would
/// flatter the matrix units).
bool randomFill(void *p, DType dtype, int64_t n) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<char> host(n * dtypeSize(dtype));
  for (int64_t i = 0; i < n; ++i)
    storeFromDouble(dtype, u(rng), host.data() + i * dtypeSize(dtype));
  return cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice) ==
         cudaSuccess;
}

} // namespace

bool calibrateCuda(MachineProfile &profile, std::string &report,
                   std::string &error) {
  std::unique_ptr<Backend> probe = makeCudaBackend(error);
  if (!probe)
    return false;
  probe.reset();
  Device d;
  cublasLtHandle_t handle;
  if (cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking) !=
          cudaSuccess ||
      cudaStreamCreateWithFlags(&d.second, cudaStreamNonBlocking) !=
          cudaSuccess ||
      cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS ||
      cudaMalloc(&d.launch.workspace, 32 << 20) != cudaSuccess ||
      cudaMalloc(&d.launch.errorFlag, sizeof(int)) != cudaSuccess) {
    error = "cannot set the GPU up for calibration";
    return false;
  }
  cudaMemset(d.launch.errorFlag, 0, sizeof(int));
  d.launch.cublasLt = handle;
  d.launch.stream = d.stream;
  d.launch.workspaceBytes = 32 << 20;
  // Room for the longest line: a device name (up to 256 bytes) and figures.
  char line[640];
  auto say = [&](const char *fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    report += line;
  };
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  say("gpu: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount,
      prop.totalGlobalMem / double(1 << 30));

  // Matrix products: square n, the backend's own path.
  auto gemm = [&](DType t, int64_t n) -> double {
    void *a = d.alloc(n * n * dtypeSize(t)), *b = d.alloc(n * n * dtypeSize(t)),
         *c = d.alloc(n * n * dtypeSize(t));
    if (!a || !b || !c || !randomFill(a, t, n * n) || !randomFill(b, t, n * n))
      return 0;
    artifact::Step s;
    s.kernel = Kernel::MatMul;
    std::vector<TensorRef> in = {{t, {n, n}, a}, {t, {n, n}, b}},
                           out = {{t, {n, n}, c}};
    std::string e;
    bool ok = true;
    double sec = timed(d.stream, n >= 4096 ? 10 : 30, [&] {
      ok = ok && cuda::launchKernel(s, in, out, KernelContext(), d.launch, e);
    });
    return ok ? 2.0 * n * n * n / sec / 1e9 : 0;
  };
  double peakF32 = 0, peakBf16 = 0;
  for (int64_t n : {64, 256, 1024, 4096, 8192}) {
    double f = gemm(DType::F32, n), h = gemm(DType::BF16, n);
    say("matmul %5lld^3: fp32 %9.1f GFLOP/s, bf16 %9.1f GFLOP/s\n",
        static_cast<long long>(n), f, h);
    peakF32 = std::max(peakF32, f);
    peakBf16 = std::max(peakBf16, h);
    if (n == 64)
      profile.matmulSmallGflops = f;
    if (n == 256)
      profile.matmulMediumGflops = f;
  }
  // Plans are fp32 today: their large products run at the fp32 peak.
  profile.matmulLargeGflops = peakF32;
  profile.gemmPeakF32Gflops = peakF32;
  profile.gemmPeakBf16Gflops = peakBf16;

  // Streaming kernels on 64 Mi elements, and the launch cost.
  const int64_t n = int64_t(1) << 26;
  void *x = d.alloc(n * 4), *y = d.alloc(n * 4), *z = d.alloc(n * 4);
  if (!x || !y || !z || !randomFill(x, DType::F32, n) ||
      !randomFill(y, DType::F32, n)) {
    error = "out of GPU memory for calibration";
    return false;
  }
  auto kernelNs = [&](Kernel k, std::vector<int64_t> ints, int64_t count) {
    artifact::Step s;
    s.kernel = k;
    s.ints = std::move(ints);
    std::vector<TensorRef> in = {{DType::F32, {count}, x}};
    if (k == Kernel::Add)
      in.push_back({DType::F32, {count}, y});
    std::vector<TensorRef> out = {{DType::F32, {count}, z}};
    if (k == Kernel::Transpose) {
      int64_t side = static_cast<int64_t>(std::sqrt(double(count)));
      in = {{DType::F32, {side, side}, x}};
      out = {{DType::F32, {side, side}, z}};
      count = side * side;
    }
    std::string e;
    double sec = timed(d.stream, 20, [&] {
      cuda::launchKernel(s, in, out, KernelContext(), d.launch, e);
    });
    return sec / double(count) * 1e9;
  };
  profile.simpleNsPerElement = kernelNs(Kernel::Add, {}, n);
  profile.transcendentalNsPerElement = kernelNs(Kernel::Tanh, {}, n);
  profile.movementNsPerElement = kernelNs(Kernel::Transpose, {1, 0}, n);
  say("streaming: add %.4f, tanh %.4f, transpose %.4f ns/element "
      "(%.0f GB/s for add)\n",
      profile.simpleNsPerElement, profile.transcendentalNsPerElement,
      profile.movementNsPerElement, 12.0 / profile.simpleNsPerElement);
  {
    artifact::Step s;
    s.kernel = Kernel::Add;
    std::vector<TensorRef> in = {{DType::F32, {1}, x}, {DType::F32, {1}, y}},
                           out = {{DType::F32, {1}, z}};
    std::string e;
    double sec = timed(d.stream, 5, [&] {
      for (int i = 0; i < 1000; ++i)
        cuda::launchKernel(s, in, out, KernelContext(), d.launch, e);
    });
    profile.launchUs = sec / 1000 * 1e6;
    // A GPU kernel is not split across host threads: no extra cost, but
    // the profile admits positive numbers only (as strata-calibrate's
    // floor).
    profile.parallelLaunchUs = 0.01;
    say("launch: %.2f us per kernel (1000 back to back)\n", profile.launchUs);
  }

  // Pinned host <-> device, 256 MiB each way and both at once.
  const uint64_t bytes = 256ull << 20;
  void *host = nullptr, *host2 = nullptr;
  void *dev = d.alloc(bytes), *dev2 = d.alloc(bytes);
  if (!dev || !dev2 || cudaHostAlloc(&host, bytes, 0) != cudaSuccess ||
      cudaHostAlloc(&host2, bytes, 0) != cudaSuccess) {
    error = "cannot allocate pinned buffers for calibration";
    return false;
  }
  double h2d = timed(d.stream, 10, [&] {
    cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, d.stream);
  });
  double d2h = timed(d.stream, 10, [&] {
    cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, d.stream);
  });
  cudaEvent_t done;
  cudaEventCreate(&done);
  double both = timed(d.stream, 10, [&] {
    cudaEventRecord(done, d.stream);
    cudaStreamWaitEvent(d.second, done, 0);
    cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, d.stream);
    cudaMemcpyAsync(host2, dev2, bytes, cudaMemcpyDeviceToHost, d.second);
    cudaEventRecord(done, d.second);
    cudaStreamWaitEvent(d.stream, done, 0);
  });
  cudaEventDestroy(done);
  cudaFreeHost(host);
  cudaFreeHost(host2);
  profile.h2dGBs = bytes / h2d / 1e9;
  profile.d2hGBs = bytes / d2h / 1e9;
  profile.duplexGBs = 2.0 * bytes / both / 1e9;
  profile.copyGBs = std::min(profile.h2dGBs, profile.d2hGBs);
  profile.gpu = 1;
  // Kernels and copies run on separate engines; they barely slow each
  // other (HBM is shared, PCIe is not).
  profile.overlapSlowdown = 0.02;
  say("pinned copies: host->device %.1f GB/s, device->host %.1f GB/s, both "
      "at once %.1f GB/s in total\n",
      profile.h2dGBs, profile.d2hGBs, profile.duplexGBs);
  return true;
}

} // namespace strata::runtime
