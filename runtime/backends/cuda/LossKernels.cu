// LossKernels.cu - CUDA kernels: cross-entropy and its gradient.

#include "runtime/backends/cuda/KernelFamilies.cuh"

namespace strata::cuda::kernels {

namespace {

template <typename T, typename I>
__global__ void crossEntropyRows(const T *x, const I *labels, double *rowLoss,
                                 double *rowSum, double *rowMax, int64_t v,
                                 int *flag) {
  __shared__ double shared[kThreads];
  int64_t i = blockIdx.x;
  int64_t l = static_cast<int64_t>(labels[i]);
  if (l >= v) {
    if (threadIdx.x == 0)
      atomicOr(flag, static_cast<int>(kLabelOutOfRange));
    l = -1;
  }
  const T *row = x + i * v;
  double mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    double a = double(DT<T>::load(row[j]));
    mx = a > mx ? a : mx;
  }
  mx = blockCombine<double>(mx, true, shared);
  double s = 0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
    s += exp(double(DT<T>::load(row[j])) - mx);
  s = blockCombine<double>(s, false, shared);
  if (threadIdx.x == 0) {
    rowMax[i] = mx;
    rowSum[i] = s;
    rowLoss[i] = l < 0 ? 0.0 : mx + log(s) - double(DT<T>::load(row[l]));
  }
}

/// One float scalar of type `t` at `p`, as a double (0: not a float).
__device__ double loadScalar(const void *p, DType t) {
  switch (t) {
  case DType::F64:
    return *static_cast<const double *>(p);
  case DType::F32:
    return *static_cast<const float *>(p);
  case DType::F16:
    return DT<F16>::load(*static_cast<const F16 *>(p));
  case DType::BF16:
    return DT<BF16>::load(*static_cast<const BF16 *>(p));
  default:
    return 0;
  }
}

/// `v` stored as one float scalar of type `t` at `p` (rounded to nearest
/// even through float, as the CPU's storeFromDouble).
__device__ void storeScalar(void *p, DType t, double v) {
  switch (t) {
  case DType::F64:
    *static_cast<double *>(p) = v;
    break;
  case DType::F32:
    *static_cast<float *>(p) = static_cast<float>(v);
    break;
  case DType::F16:
    *static_cast<F16 *>(p) = DT<F16>::store(static_cast<float>(v));
    break;
  case DType::BF16:
    *static_cast<BF16 *>(p) = DT<BF16>::store(static_cast<float>(v));
    break;
  default:
    break;
  }
}

/// The labelled rows' count (and, for the loss, their mean, stored as
/// `outType`: fp32 for 16-bit logits) in row order.
template <typename T, typename I>
__global__ void crossEntropyMean(const double *rowLoss, const I *labels,
                                 void *out, DType outType, int64_t n,
                                 double *count) {
  if (threadIdx.x != 0 || blockIdx.x != 0)
    return;
  double total = 0;
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (rowLoss)
      total += rowLoss[i];
    c += static_cast<int64_t>(labels[i]) >= 0;
  }
  *count = double(c);
  if (out) {
    double mean = c ? total / double(c) : NAN;
    storeScalar(out, outType, static_cast<typename DT<T>::C>(mean));
  }
}

template <typename T, typename I>
__global__ void crossEntropyGradKernel(const T *x, const I *labels,
                                       const void *grad, DType gradType,
                                       const double *rowSum,
                                       const double *rowMax, T *dx, int64_t n,
                                       int64_t v, const double *count) {
  double g = loadScalar(grad, gradType);
  double scale = *count != 0 ? g / *count : 0.0;
  STRATA_GRID_LOOP(e, n * v) {
    int64_t i = e / v, j = e % v;
    int64_t l = static_cast<int64_t>(labels[i]);
    if (l < 0 || l >= v) {
      dx[e] = DT<T>::store(typename DT<T>::C(0));
      continue;
    }
    double p = exp(double(DT<T>::load(x[e])) - rowMax[i]) * (1.0 / rowSum[i]);
    dx[e] = DT<T>::store(
        static_cast<typename DT<T>::C>((p - (j == l ? 1.0 : 0.0)) * scale));
  }
}

} // namespace

STRATA_KERNEL_FAMILY(launchLoss) {
  [[maybe_unused]] cudaStream_t stream = streamOf(l);
  [[maybe_unused]] const char *name = artifact::kernelName(step.kernel);
  bool typed = true;
  switch (step.kernel) {
  case Kernel::CrossEntropy:
  case Kernel::CrossEntropyGrad: {
    int64_t n = in[0].shape[0], v = in[0].shape[1];
    // Per-row scratch in the workspace: loss, sum, max; then the count.
    uint64_t need = (3 * n + 1) * sizeof(double);
    if (need > l.workspaceBytes) {
      error = "cross-entropy over " + std::to_string(n) +
              " rows needs more scratch than the workspace has";
      return false;
    }
    double *rowLoss = static_cast<double *>(l.workspace);
    double *rowSum = rowLoss + n, *rowMax = rowSum + n, *count = rowMax + n;
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      auto go = [&](auto idx) {
        using I = decltype(idx);
        const T *x = static_cast<const T *>(in[0].data);
        const I *labels = static_cast<const I *>(in[1].data);
        if (n == 0)
          return;
        crossEntropyRows<T, I>
            <<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
                x, labels, rowLoss, rowSum, rowMax, v, l.errorFlag);
        bool loss = step.kernel == Kernel::CrossEntropy;
        crossEntropyMean<T, I><<<1, 1, 0, stream>>>(
            loss ? rowLoss : nullptr, labels, loss ? out[0].data : nullptr,
            out[0].dtype, n, count);
        if (!loss)
          crossEntropyGradKernel<T, I>
              <<<blocksFor(n * v), kThreads, 0, stream>>>(
                  x, labels, in[2].data, in[2].dtype, rowSum, rowMax,
                  static_cast<T *>(out[0].data), n, v, count);
      };
      in[1].dtype == DType::I32 ? go(int32_t{}) : go(int64_t{});
    });
    break;
  }
  default:
    return std::nullopt;
  }
  return finishLaunch(typed, name, in, error);
}

} // namespace strata::cuda::kernels
