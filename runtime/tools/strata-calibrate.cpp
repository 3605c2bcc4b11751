// strata-calibrate.cpp - Measures this machine for the compiler's cost model.
//
//   strata-calibrate -o profile.txt [--backend cpu|cuda] [--ssd-dir DIR ...]
//
// With --backend cuda the device figures are the GPU's (runtime/backends/cuda/
// Calibrate.cpp: matrix rates by size and type, streaming kernels, launch
// cost, pinned copies each way and both at once) and the profile says
// `gpu 1`, so the cost model runs host copies on their own copy queues.
//
// Times the runtime's own kernels (matrix products at three sizes, simple,
// transcendental and data-movement kernels, the fixed costs of a launch and
// of a thread-pool dispatch), the transfer queue's hand-off, host copies,
// and, with --ssd-dir, the SSD store: bulk and single-request read and
// write rates and fixed costs, how much kernels slow down beside busy
// transfer queues, and how much each direction slows down beside the
// other. Writes a profile strata-compile reads with --profile.

#include "runtime/artifact/Artifact.h"
#include "runtime/backends/TransferQueue.h"
#include "runtime/backends/cpu/Kernels.h"
#include "runtime/backends/cpu/StreamingUpdates.h"
#include "runtime/backends/cuda/CudaBackend.h"
#include "runtime/profile/MachineProfile.h"
#include "runtime/support/FileUtil.h"
#include "runtime/tiers/SsdStore.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace strata;
using artifact::Kernel;

namespace {

/// Median seconds of `repeat` runs of `body`, each after an untimed run of
/// `before` (when given).
double timeIt(int repeat, const std::function<void()> &body,
              const std::function<void()> &before = nullptr) {
  std::vector<double> t;
  body(); // Warm up.
  for (int i = 0; i < repeat; ++i) {
    if (before)
      before();
    auto start = std::chrono::steady_clock::now();
    body();
    t.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double kernelSeconds(Kernel kernel, std::vector<TensorRef> in, TensorRef out,
                     std::vector<int64_t> ints, int repeat) {
  artifact::Step step;
  step.kernel = kernel;
  step.ints = std::move(ints);
  std::string error;
  return timeIt(repeat, [&] { cpu::runKernel(step, in, {out}, error); });
}

/// How much longer `body` takes while other threads each run one of
/// `backgrounds` in a loop (its argument counts the iterations), as a
/// fraction (0.25: 25% longer). Alone and beside alternate `rounds` times
/// and the median ratio is kept: this machine's speed drifts more between
/// seconds than the effect.
double
slowdownBeside(int rounds, const std::function<void()> &body,
               const std::vector<std::function<void(uint64_t)>> &backgrounds) {
  auto seconds = [&] {
    auto start = std::chrono::steady_clock::now();
    body();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) {
    double alone = seconds();
    std::atomic<bool> stop{false};
    std::vector<std::thread> others;
    for (const auto &background : backgrounds)
      others.emplace_back([&] {
        for (uint64_t i = uint64_t(r) << 20; !stop.load(); ++i)
          background(i);
      });
    double beside = seconds();
    stop = true;
    for (std::thread &other : others)
      other.join();
    ratios.push_back(beside / alone);
  }
  std::sort(ratios.begin(), ratios.end());
  return std::clamp(ratios[ratios.size() / 2] - 1.0, 0.0, 4.0);
}

} // namespace

int main(int argc, char **argv) {
  strata::ignoreFileSizeSignal();
  std::string output;
  std::vector<std::string> ssdDirs;
  std::string backend = "cpu";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "-o" || arg == "--ssd-dir" || arg == "--backend") &&
        i + 1 < argc && argv[i + 1][0] == '\0') {
      std::fprintf(stderr, "strata-calibrate: error: %s: empty value\n",
                   arg.c_str());
      return 2;
    }
    if (arg == "-o" && i + 1 < argc)
      output = argv[++i];
    else if (arg == "--ssd-dir" && i + 1 < argc)
      ssdDirs.push_back(argv[++i]);
    else if (arg == "--backend" && i + 1 < argc)
      backend = argv[++i];
    else {
      std::fprintf(
          stderr,
          "usage: strata-calibrate [-o profile.txt] [--backend cpu|cuda] "
          "[--ssd-dir DIR ...]\n"
          "Measures this machine for the compiler's cost model. Without -o\n"
          "the profile is remembered where strata-compile finds it when it\n"
          "is given no --profile ($STRATA_PROFILE, else\n"
          "$XDG_CONFIG_HOME/strata/machine.profile, else\n"
          "~/.config/strata/machine.profile).\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  bool remembered = output.empty();
  if (remembered) {
    output = rememberedProfilePath();
    if (output.empty()) {
      std::fprintf(stderr, "strata-calibrate: error: no -o FILE, and no "
                           "STRATA_PROFILE, XDG_CONFIG_HOME or HOME to "
                           "remember the profile in\n");
      return 2;
    }
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::path(output).parent_path();
    if (!dir.empty())
      std::filesystem::create_directories(dir, ec);
    if (ec) {
      std::fprintf(stderr, "strata-calibrate: error: %s: %s\n", dir.c_str(),
                   ec.message().c_str());
      return 1;
    }
  }
  MachineProfile p;
  auto matmulRate = [&](int64_t n) {
    std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
    double s = kernelSeconds(
        Kernel::MatMul,
        {{DType::F32, {n, n}, a.data()}, {DType::F32, {n, n}, b.data()}},
        {DType::F32, {n, n}, c.data()}, {}, n >= 1024 ? 3 : 20);
    return 2.0 * n * n * n / s / 1e9;
  };
  const int64_t n = int64_t(1) << 22;
  std::vector<float> x(n, 0.5f), y(n, 0.25f), z(n);
  TensorRef X{DType::F32, {n}, x.data()}, Y{DType::F32, {n}, y.data()},
      Z{DType::F32, {n}, z.data()};
  artifact::Step add, tanh;
  add.kernel = Kernel::Add;
  tanh.kernel = Kernel::Tanh;
  // Mid-sized kernels (in cache, split across threads) pay a dispatch cost
  // on top of their elements. A sample is 64 of them back to back, as a
  // program runs them (a lone kernel sees the pool's threads asleep or
  // spinning by chance); samples at two sizes give a line whose intercept
  // is that cost.
  auto perKernelInBurst = [&](int64_t m) {
    TensorRef Xs{DType::F32, {m}, x.data()}, Ys{DType::F32, {m}, y.data()},
        Zs{DType::F32, {m}, z.data()};
    return timeIt(15,
                  [&] {
                    std::string error;
                    for (int i = 0; i < 32; ++i) {
                      cpu::runKernel(add, {Xs, Ys}, {Zs}, error);
                      cpu::runKernel(tanh, {Xs}, {Zs}, error);
                    }
                  }) /
           64;
  };
  float tiny[16] = {}, tinyOut[16];
  // This machine's speed drifts (a product ran at 165 or 101 GFLOP/s in
  // runs a second apart), so the compute probes run three times and each
  // figure is the median.
  std::vector<MachineProfile> rounds(3);
  for (MachineProfile &r : rounds) {
    r.matmulSmallGflops = matmulRate(64);
    r.matmulMediumGflops = matmulRate(256);
    r.matmulLargeGflops = matmulRate(1024);
    r.simpleNsPerElement =
        kernelSeconds(Kernel::Add, {X, Y}, Z, {}, 10) / n * 1e9;
    r.transcendentalNsPerElement =
        kernelSeconds(Kernel::Tanh, {X}, Z, {}, 10) / n * 1e9;
    r.movementNsPerElement =
        kernelSeconds(Kernel::Transpose, {{DType::F32, {2048, 2048}, x.data()}},
                      {DType::F32, {2048, 2048}, z.data()}, {1, 0}, 10) /
        n * 1e9;
    const int64_t m1 = 32768, m2 = 131072;
    double t1 = perKernelInBurst(m1), t2 = perKernelInBurst(m2);
    double slope = std::max(0.0, (t2 - t1) / double(m2 - m1));
    r.parallelLaunchUs = std::max(0.01, (t1 - slope * m1) * 1e6);
    r.launchUs =
        kernelSeconds(Kernel::Add,
                      {{DType::F32, {16}, tiny}, {DType::F32, {16}, tiny}},
                      {DType::F32, {16}, tinyOut}, {}, 2000) *
        1e6;
  }
  for (double MachineProfile::*field :
       {&MachineProfile::matmulSmallGflops, &MachineProfile::matmulMediumGflops,
        &MachineProfile::matmulLargeGflops, &MachineProfile::simpleNsPerElement,
        &MachineProfile::transcendentalNsPerElement,
        &MachineProfile::movementNsPerElement,
        &MachineProfile::parallelLaunchUs, &MachineProfile::launchUs}) {
    std::vector<double> values;
    for (const MachineProfile &r : rounds)
      values.push_back(r.*field);
    std::sort(values.begin(), values.end());
    p.*field = values[values.size() / 2];
  }
  const int64_t mid = 65536;
  TensorRef Xm{DType::F32, {mid}, x.data()}, Ym{DType::F32, {mid}, y.data()},
      Zm{DType::F32, {mid}, z.data()};
  // A job handed to an idle transfer queue and waited for: the worker's
  // and then the waiter's wake-up, as the runtime pays them (a kernel runs
  // before each, so the worker has gone to sleep).
  {
    runtime::TransferQueue queue;
    std::string error;
    std::vector<double> trips;
    for (int i = 0; i < 101; ++i) {
      cpu::runKernel(add, {Xm, Ym}, {Zm}, error);
      auto start = std::chrono::steady_clock::now();
      uint64_t id = queue.submit([](std::string &) { return true; });
      queue.waitFor(id, error);
      trips.push_back(std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count());
    }
    std::sort(trips.begin(), trips.end());
    p.queueRoundTripUs = std::max(0.1, trips[trips.size() / 2] * 1e6);
  }
  // Optimizer updates on the CPU queue, on every core.
  p.cpuUpdateGBs = cpu::measureAdamwGBs();
  p.copyGBs = n * 4.0 /
              timeIt(10, [&] { std::memcpy(z.data(), x.data(), n * 4); }) / 1e9;
  if (backend == "cuda") {
    // The device figures are the GPU's; the queue hand-off and the SSD
    // stay the host's.
    std::string report, error;
    if (!runtime::calibrateCuda(p, report, error)) {
      std::fprintf(stderr, "strata-calibrate: error: %s\n", error.c_str());
      return 1;
    }
    std::printf("%s", report.c_str());
  }
  if (!ssdDirs.empty()) {
    std::string error;
    const uint64_t bytes = uint64_t(256) << 20, block = uint64_t(1) << 20;
    tiers::SsdOptions options;
    auto store = tiers::SsdStore::open(ssdDirs, bytes, options, error);
    if (!store) {
      std::fprintf(stderr, "strata-calibrate: error: %s\n", error.c_str());
      return 1;
    }
    // Bulk: stripe-sized requests, as many in flight as the engine keeps,
    // from memory registered with the store as the runtime's arena and
    // staging areas are.
    const uint64_t window = block * options.queueDepth;
    artifact::AlignedBuffer bulk(window);
    std::memset(bulk.data(), 1, window);
    tiers::SsdStore::Registration bulkRegistration =
        store->registerMemory(bulk.data(), window);
    std::vector<tiers::IoRequest> req;
    for (uint64_t off = 0; off < bytes; off += block)
      req.push_back({true, off, bulk.data() + off % window, block});
    double w = timeIt(3, [&] { store->transfer(req, error); });
    for (auto &r : req)
      r.write = false;
    double r = timeIt(3, [&] { store->transfer(req, error); });
    p.ssdWriteGBs = bytes / w / 1e9;
    p.ssdReadGBs = bytes / r / 1e9;
    // One request at a time (what a tensor smaller than a stripe costs),
    // into registered memory, as the runtime's arena is; a
    // least-squares line through several sizes gives each direction's
    // latency and rate. Offsets spread over the file, so no read hits a
    // cache the previous one warmed, and a matrix product and streaming
    // kernels run between requests, as in a training step (a drive polled
    // back to back answers faster than one between kernels).
    const uint64_t sizes[] = {4096, 32768, 131072, 524288};
    const uint64_t largest = sizes[3];
    artifact::AlignedBuffer arenaLike(largest);
    void *one = arenaLike.data();
    tiers::SsdStore::Registration oneRegistration =
        store->registerMemory(one, largest);
    const int64_t m = 128;
    std::vector<float> ma(m * m, 0.5f), mb(m * m, 0.25f), mc(m * m);
    artifact::Step matmul;
    matmul.kernel = Kernel::MatMul;
    uint64_t next = 0;
    auto between = [&] {
      cpu::runKernel(
          matmul,
          {{DType::F32, {m, m}, ma.data()}, {DType::F32, {m, m}, mb.data()}},
          {{DType::F32, {m, m}, mc.data()}}, error);
      for (int k = 0; k < 4; ++k)
        cpu::runKernel(add, {Xm, Ym}, {Zm}, error);
      next = (next + (uint64_t(37) << 20) + largest) % (bytes - largest) /
             tiers::kIoAlignment * tiers::kIoAlignment;
    };
    // A step's time is a sum of transfers, so the mean is what adds up;
    // the slowest tenth (a stall of the machine, not of the drive) is
    // left out.
    auto meanSeconds = [&](bool write, uint64_t n) {
      std::vector<double> t;
      for (int i = 0; i < 40; ++i) {
        between();
        auto start = std::chrono::steady_clock::now();
        if (write)
          store->write(next, one, n, error);
        else
          store->read(next, one, n, error);
        t.push_back(std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count());
      }
      std::sort(t.begin(), t.end());
      t.resize(t.size() - t.size() / 10);
      double sum = 0;
      for (double v : t)
        sum += v;
      return sum / t.size();
    };
    // seconds = latency + bytes / rate, fitted by least squares.
    auto fit = [&](bool write, double &latencyUs, double &gbs) {
      double sx = 0, sy = 0, sxx = 0, sxy = 0, count = 0;
      for (uint64_t n : sizes) {
        double x = double(n), y = meanSeconds(write, n);
        sx += x, sy += y, sxx += x * x, sxy += x * y, ++count;
      }
      double slope = (count * sxy - sx * sy) / (count * sxx - sx * sx);
      slope = std::max(slope, 1e-12);
      gbs = 1.0 / slope / 1e9;
      latencyUs = std::max(1.0, (sy - slope * sx) / count * 1e6);
    };
    fit(false, p.ssdReadLatencyUs, p.ssdSmallReadGBs);
    fit(true, p.ssdWriteLatencyUs, p.ssdSmallWriteGBs);
    // Compute beside the transfer queues: a mix of matrix products and
    // streaming kernels, alone and while a reading and a writing thread
    // keep the drive busy, as the runtime's queues do. On a machine with
    // few cores the I/O threads take CPU and memory bandwidth from the
    // kernels.
    const int64_t d = 512;
    std::vector<float> ba(d * d, 0.5f), bb(d * d, 0.25f), bc(d * d);
    auto mix = [&] {
      std::string e;
      for (int i = 0; i < 8; ++i) {
        cpu::runKernel(
            matmul,
            {{DType::F32, {d, d}, ba.data()}, {DType::F32, {d, d}, bb.data()}},
            {{DType::F32, {d, d}, bc.data()}}, e);
        for (int k = 0; k < 4; ++k) {
          cpu::runKernel(add, {Xm, Ym}, {Zm}, e);
          cpu::runKernel(tanh, {Xm}, {Zm}, e);
        }
      }
    };
    // Traffic as a training step makes it: 128 KiB and 1 MiB requests in
    // turn, at spread file offsets, into and out of 16 MiB of ordinary
    // memory at changing addresses (each thread its own).
    const uint64_t span = uint64_t(16) << 20;
    std::unique_ptr<void, decltype(&std::free)> foreground(
        std::aligned_alloc(tiers::kIoAlignment, span), &std::free),
        background(std::aligned_alloc(tiers::kIoAlignment, span), &std::free);
    auto request = [&](void *memory, uint64_t i, bool write) {
      uint64_t n = i % 2 ? uint64_t(1) << 20 : uint64_t(128) << 10;
      uint64_t at = i * (uint64_t(37) << 20) % (bytes - n) /
                    tiers::kIoAlignment * tiers::kIoAlignment;
      char *buffer =
          static_cast<char *>(memory) + i * (uint64_t(3) << 20) % (span - n);
      std::string e;
      if (write)
        store->write(at, buffer, n, e);
      else
        store->read(at, buffer, n, e);
    };
    mix(); // Warm up.
    // Beside both queues, as the runtime runs them.
    p.overlapSlowdown = slowdownBeside(
        11, mix,
        {[&](uint64_t i) { request(background.get(), i, false); },
         [&](uint64_t i) { request(foreground.get(), i + 3, true); }});
    // Each direction alone and while another thread runs the other one.
    auto direction = [&](bool write) {
      return [&, write] {
        for (uint64_t k = 0; k < 16; ++k)
          request(foreground.get(), k + 7, write);
      };
    };
    p.ssdDuplexReadSlowdown = slowdownBeside(
        9, direction(false),
        {[&](uint64_t i) { request(background.get(), i, true); }});
    p.ssdDuplexWriteSlowdown = slowdownBeside(
        9, direction(true),
        {[&](uint64_t i) { request(background.get(), i, false); }});
    if (!error.empty()) {
      std::fprintf(stderr, "strata-calibrate: error: %s\n", error.c_str());
      return 1;
    }
  }
  std::string error;
  if (!p.write(output, error)) {
    std::fprintf(stderr, "strata-calibrate: error: %s\n", error.c_str());
    return 1;
  }
  std::printf("%s", p.text().c_str());
  if (remembered)
    std::fprintf(stderr,
                 "strata-calibrate: remembered in %s: strata-compile plans "
                 "for it when given no --profile\n",
                 output.c_str());
  return 0;
}
