// strata-bench-updates - The CPU optimizer updates' rate against the host
// memory's.
//
//   strata-bench-updates [--params N] [--reps R] [--isa scalar|avx2|avx512]
//                        [--json]
//
// Times, on every thread of the pool (STRATA_NUM_THREADS), R times each,
// interleaved, and prints the medians of:
//   triad   STREAM's a = b + s * c over N floats, 16 bytes an element (12
//           read and written plus the write-allocate read of a);
//   stream  AdamW's memory traffic without its arithmetic: w += g, m += g,
//           v += g over N floats, 28 bytes an element, in place as AdamW is;
//   adamw   one fp32 AdamW step over N parameters: w, g, m, v read, w, m, v
//           written, 28 bytes a parameter.
// The memory bound is the better of the two streams' bandwidth: a pass that
// moves 28 bytes a parameter cannot beat it. bench/cpu_adamw.py runs this
// beside torch.optim.AdamW.

#include "runtime/backends/cpu/StreamingUpdates.h"
#include "runtime/support/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace strata;

namespace {

double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// N floats, written once by the pool's threads so that each page sits
/// where the thread that streams it runs.
std::unique_ptr<float[]> array(int64_t n, float value) {
  std::unique_ptr<float[]> a(new float[static_cast<size_t>(n)]);
  parallelFor(n, 1 << 16, [&](int64_t b, int64_t e) {
    std::fill(a.get() + b, a.get() + e, value);
  });
  return a;
}

int usage(const char *why) {
  if (why)
    std::fprintf(stderr, "strata-bench-updates: %s\n", why);
  std::fprintf(stderr, "usage: strata-bench-updates [--params N] [--reps R] "
                       "[--isa scalar|avx2|avx512] [--json]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  int64_t n = 100'000'000;
  int reps = 7;
  bool json = false;
  cpu::UpdateIsa isa = cpu::updateIsa();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    if (a == "--params") {
      const char *v = value();
      char *end = nullptr;
      long long x = v ? std::strtoll(v, &end, 10) : 0;
      if (!v || *end || x < 1 || x > (1ll << 36))
        return usage("--params takes a count from 1 to 2^36");
      n = x;
    } else if (a == "--reps") {
      const char *v = value();
      reps = v ? std::atoi(v) : 0;
      if (reps < 1 || reps > 1000)
        return usage("--reps takes 1 to 1000");
    } else if (a == "--isa") {
      const char *v = value();
      bool found = false;
      for (cpu::UpdateIsa c : {cpu::UpdateIsa::Scalar, cpu::UpdateIsa::Avx2,
                               cpu::UpdateIsa::Avx512})
        if (v && std::strcmp(v, cpu::updateIsaName(c)) == 0) {
          if (!cpu::cpuSupports(c))
            return usage((std::string("this CPU has no ") + v).c_str());
          isa = c;
          found = true;
        }
      if (!found)
        return usage("--isa takes scalar, avx2 or avx512");
    } else if (a == "--json") {
      json = true;
    } else if (a == "-h" || a == "--help") {
      usage(nullptr);
      return 0;
    } else {
      return usage(("unknown argument '" + a + "'").c_str());
    }
  }

  // 7 arrays of n floats; refuse politely rather than die in new.
  auto w = array(n, 0.5f), g = array(n, 1e-3f), m = array(n, 0.0f),
       v = array(n, 0.0f), ta = array(n, 0.0f), tb = array(n, 1.0f),
       tc = array(n, 2.0f);
  double hp[] = {1e-3, 0.9, 0.999, 1e-8, 0.01};
  std::vector<double> triad, stream, adamw;
  // One untimed round of each first (page faults, pool start).
  for (int r = -1; r < reps; ++r) {
    double t0 = seconds();
    const float s = 3.0f;
    float *a = ta.get();
    const float *b = tb.get(), *c = tc.get();
    parallelFor(n, 1 << 16, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        a[i] = b[i] + s * c[i];
    });
    double t1 = seconds();
    float *pw = w.get(), *pm = m.get(), *pv = v.get();
    const float *pg = g.get();
    parallelFor(n, 1 << 16, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        float x = pg[i];
        pw[i] += x;
        pm[i] += x;
        pv[i] += x;
      }
    });
    double t1b = seconds();
    math::UpdateCoefficients<float> co;
    math::updateCoefficients<float>(artifact::Kernel::UpdateAdamW, hp, 1.0f, 1,
                                    r + 2, 1.0, co);
    cpu::adamwF32(w.get(), g.get(), m.get(), v.get(), n, co, {}, isa);
    double t2 = seconds();
    if (r >= 0) {
      triad.push_back(t1 - t0);
      stream.push_back(t1b - t1);
      adamw.push_back(t2 - t1b);
    }
  }
  double triadGBs = 16.0 * n / median(triad) / 1e9;
  double streamGBs = 28.0 * n / median(stream) / 1e9;
  double boundGBs = std::max(triadGBs, streamGBs);
  double adamwS = median(adamw);
  double adamwGBs = 28.0 * n / adamwS / 1e9;
  double params = n / adamwS;
  if (json) {
    std::printf("{\"params\": %lld, \"threads\": %d, \"isa\": \"%s\", "
                "\"triad_gbs\": %.3f, \"stream_gbs\": %.3f, "
                "\"bound_gbs\": %.3f, \"adamw_s\": %.6f, "
                "\"adamw_gbs\": %.3f, \"adamw_params_per_s\": %.4g, "
                "\"share_of_bound\": %.4f}\n",
                static_cast<long long>(n), numThreads(),
                cpu::updateIsaName(isa), triadGBs, streamGBs, boundGBs, adamwS,
                adamwGBs, params, adamwGBs / boundGBs);
  } else {
    std::printf("%lld parameters, %d threads, %s, medians of %d\n",
                static_cast<long long>(n), numThreads(),
                cpu::updateIsaName(isa), reps);
    std::printf("triad  %8.2f GB/s (16 B an element, write-allocate "
                "counted)\n",
                triadGBs);
    std::printf("stream %8.2f GB/s (28 B an element, AdamW's traffic)\n",
                streamGBs);
    std::printf("adamw  %8.2f GB/s (28 B a parameter), %.3g parameters/s, "
                "%.4f s a step: %.0f%% of the memory bound (%.2f GB/s)\n",
                adamwGBs, params, adamwS, 100 * adamwGBs / boundGBs, boundGBs);
  }
  return 0;
}
