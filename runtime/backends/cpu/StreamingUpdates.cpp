//===- StreamingUpdates.cpp - Vectorised, threaded fp32 updates -----------===//

#include "runtime/backends/cpu/StreamingUpdates.h"

#include "runtime/backends/cpu/StreamingUpdatesIsa.h"
#include "runtime/support/Half.h"
#include "runtime/support/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace strata::cpu {

namespace {

/// Elements per parallel chunk: 64 Ki floats, 256 KiB of each array.
constexpr int64_t kGrain = int64_t(1) << 16;

UpdateIsa detectIsa() {
  UpdateIsa best = cpuSupports(UpdateIsa::Avx512) ? UpdateIsa::Avx512
                   : cpuSupports(UpdateIsa::Avx2) ? UpdateIsa::Avx2
                                                  : UpdateIsa::Scalar;
  const char *want = std::getenv("STRATA_CPU_ISA");
  if (!want || !*want)
    return best;
  for (UpdateIsa isa :
       {UpdateIsa::Scalar, UpdateIsa::Avx2, UpdateIsa::Avx512}) {
    if (std::strcmp(want, updateIsaName(isa)) != 0)
      continue;
    if (cpuSupports(isa))
      return isa;
    std::fprintf(stderr,
                 "strata: STRATA_CPU_ISA=%s: this CPU does not have it; "
                 "using %s\n",
                 want, updateIsaName(best));
    return best;
  }
  std::fprintf(stderr,
               "strata: STRATA_CPU_ISA=%s is not one of scalar, avx2, "
               "avx512; using %s\n",
               want, updateIsaName(best));
  return best;
}

/// The vector loops of `isa`; null for the scalar code.
const detail::UpdateLoops *loopsFor(UpdateIsa isa) {
#ifdef STRATA_HAVE_UPDATE_ISAS
  if (isa == UpdateIsa::Avx512)
    return &detail::kAvx512Loops;
  if (isa == UpdateIsa::Avx2)
    return &detail::kAvx2Loops;
#endif
  (void)isa;
  return nullptr;
}

/// The copy's elements [b, e) from the new weights.
void narrow(const LowCopy &low, const float *w, int64_t b, int64_t e) {
  if (low.data)
    narrowFloats(w + b, low.data + b, e - b, low.brain);
}

} // namespace

bool cpuSupports(UpdateIsa isa) {
  if (isa == UpdateIsa::Scalar)
    return true;
#ifdef STRATA_HAVE_UPDATE_ISAS
  if (isa == UpdateIsa::Avx2)
    return __builtin_cpu_supports("avx2");
  if (isa == UpdateIsa::Avx512)
    return __builtin_cpu_supports("avx512f");
#endif
  return false;
}

const char *updateIsaName(UpdateIsa isa) {
  switch (isa) {
  case UpdateIsa::Scalar:
    return "scalar";
  case UpdateIsa::Avx2:
    return "avx2";
  case UpdateIsa::Avx512:
    return "avx512";
  }
  return "?";
}

UpdateIsa updateIsa() {
  static const UpdateIsa isa = detectIsa();
  return isa;
}

// Each chunk: the vector loop over its whole vectors, then the scalar
// element function (the same operations) over the rest.

void sgdF32(float *w, const float *g, int64_t n,
            const math::UpdateCoefficients<float> &c, LowCopy low,
            UpdateIsa isa) {
  const detail::UpdateLoops *loops = loopsFor(isa);
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    int64_t i = b + (loops ? loops->sgd(w + b, g + b, e - b, c) : 0);
    for (; i < e; ++i)
      w[i] = math::sgdElement<float>(w[i], g[i], c);
    narrow(low, w, b, e);
  });
}

void momentumF32(float *w, const float *g, float *buf, int64_t n,
                 const math::UpdateCoefficients<float> &c, LowCopy low,
                 UpdateIsa isa) {
  const detail::UpdateLoops *loops = loopsFor(isa);
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    int64_t i =
        b + (loops ? loops->momentum(w + b, g + b, buf + b, e - b, c) : 0);
    for (; i < e; ++i)
      math::momentumElement<float>(w[i], g[i], buf[i], c);
    narrow(low, w, b, e);
  });
}

void adamwF32(float *w, const float *g, float *m, float *v, int64_t n,
              const math::UpdateCoefficients<float> &c, LowCopy low,
              UpdateIsa isa) {
  const detail::UpdateLoops *loops = loopsFor(isa);
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    int64_t i =
        b + (loops ? loops->adamw(w + b, g + b, m + b, v + b, e - b, c) : 0);
    for (; i < e; ++i)
      math::adamwElement<float>(w[i], g[i], m[i], v[i], c);
    narrow(low, w, b, e);
  });
}

double measureAdamwGBs(int64_t n) {
  std::vector<float> w(n, 0.5f), g(n, 1e-3f), m(n, 0.0f), v(n, 0.0f);
  double hp[] = {1e-3, 0.9, 0.999, 1e-8, 0.01};
  std::vector<double> times;
  for (int r = 0; r < 4; ++r) {
    math::UpdateCoefficients<float> c;
    math::updateCoefficients<float>(artifact::Kernel::UpdateAdamW, hp, 1.0f, 1,
                                    r + 1, 1.0, c);
    auto t0 = std::chrono::steady_clock::now();
    adamwF32(w.data(), g.data(), m.data(), v.data(), n, c);
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (r > 0)
      times.push_back(s);
  }
  std::sort(times.begin(), times.end());
  return 28.0 * n / std::max(times[1], 1e-9) / 1e9;
}

} // namespace strata::cpu
