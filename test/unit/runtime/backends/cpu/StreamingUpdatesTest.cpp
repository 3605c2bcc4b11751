// StreamingUpdatesTest.cpp - The vectorised fp32 updates give the scalar
// element functions' bits (SharedMath.h, which the CUDA kernels also run),
// on every ISA this CPU has, at every tail length, on hostile values.

#include "runtime/backends/cpu/StreamingUpdates.h"

#include "runtime/support/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace strata;
using namespace strata::cpu;

namespace {

/// Normal values with, every so often, zeros, subnormals, huge values,
/// infinities and NaNs.
std::vector<float> values(size_t n, unsigned seed, bool nonNegative) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 40);
  const float special[] = {0.0f,
                           -0.0f,
                           std::numeric_limits<float>::denorm_min(),
                           1e-30f,
                           3e38f,
                           std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> v(n);
  for (float &x : v) {
    int p = pick(rng);
    x = p < 7 ? special[p] : normal(rng);
    if (nonNegative)
      x = std::fabs(x);
  }
  return v;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b,
              size_t &where) {
  for (where = 0; where < a.size(); ++where)
    if (std::memcmp(&a[where], &b[where], sizeof(float)) != 0 &&
        !(std::isnan(a[where]) && std::isnan(b[where])))
      return false;
  return true;
}

math::UpdateCoefficients<float> coefficients(artifact::Kernel k, int64_t step,
                                             double wd) {
  // lr, then (momentum, wd) / (wd) / (b1, b2, eps, wd).
  std::vector<double> hp = k == artifact::Kernel::UpdateAdamW
                               ? std::vector<double>{1e-3, 0.9, 0.999, 1e-8, wd}
                           : k == artifact::Kernel::UpdateMomentum
                               ? std::vector<double>{0.1, 0.9, wd}
                               : std::vector<double>{0.1, wd};
  math::UpdateCoefficients<float> c;
  EXPECT_TRUE(
      math::updateCoefficients<float>(k, hp.data(), 0.5f, 1, step, 0.7, c));
  return c;
}

std::vector<UpdateIsa> isas() {
  std::vector<UpdateIsa> out;
  for (UpdateIsa isa : {UpdateIsa::Scalar, UpdateIsa::Avx2, UpdateIsa::Avx512})
    if (cpuSupports(isa))
      out.push_back(isa);
  return out;
}

const size_t kSizes[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 1000, 65536 * 3 + 13};

} // namespace

TEST(StreamingUpdates, AdamwMatchesTheElementFunction) {
  for (UpdateIsa isa : isas())
    for (size_t n : kSizes)
      for (int64_t step : {1, 7})
        for (double wd : {0.0, 0.01}) {
          auto c = coefficients(artifact::Kernel::UpdateAdamW, step, wd);
          auto w = values(n, 1, false), g = values(n, 2, false),
               m = values(n, 3, false), v = values(n, 4, true);
          auto rw = w, rm = m, rv = v;
          for (size_t i = 0; i < n; ++i)
            math::adamwElement<float>(rw[i], g[i], rm[i], rv[i], c);
          adamwF32(w.data(), g.data(), m.data(), v.data(), int64_t(n), c, {},
                   isa);
          size_t at;
          EXPECT_TRUE(sameBits(w, rw, at))
              << updateIsaName(isa) << " n=" << n << " w[" << at << "]";
          EXPECT_TRUE(sameBits(m, rm, at))
              << updateIsaName(isa) << " n=" << n << " m[" << at << "]";
          EXPECT_TRUE(sameBits(v, rv, at))
              << updateIsaName(isa) << " n=" << n << " v[" << at << "]";
        }
}

TEST(StreamingUpdates, SgdAndMomentumMatchTheElementFunctions) {
  for (UpdateIsa isa : isas())
    for (size_t n : kSizes)
      for (double wd : {0.0, 0.05}) {
        auto c = coefficients(artifact::Kernel::UpdateSgd, 3, wd);
        auto w = values(n, 5, false), g = values(n, 6, false);
        auto rw = w;
        for (size_t i = 0; i < n; ++i)
          rw[i] = math::sgdElement<float>(rw[i], g[i], c);
        sgdF32(w.data(), g.data(), int64_t(n), c, {}, isa);
        size_t at;
        EXPECT_TRUE(sameBits(w, rw, at))
            << "sgd " << updateIsaName(isa) << " n=" << n << " at " << at;
        for (int64_t step : {1, 2}) {
          auto mc = coefficients(artifact::Kernel::UpdateMomentum, step, wd);
          auto mw = values(n, 7, false), b = values(n, 8, false);
          auto rmw = mw, rb = b;
          for (size_t i = 0; i < n; ++i)
            math::momentumElement<float>(rmw[i], g[i], rb[i], mc);
          momentumF32(mw.data(), g.data(), b.data(), int64_t(n), mc, {}, isa);
          EXPECT_TRUE(sameBits(mw, rmw, at))
              << "momentum " << updateIsaName(isa) << " n=" << n << " w at "
              << at;
          EXPECT_TRUE(sameBits(b, rb, at)) << "momentum " << updateIsaName(isa)
                                           << " n=" << n << " buf at " << at;
        }
      }
}

// The low-precision copy of mixed precision: every element of it is the
// new weight rounded to nearest even (the runtime's cast), whatever the
// chunking and the ISA, and the update's own bits do not change.
TEST(StreamingUpdates, LowCopyIsTheNewWeightsRounded) {
  for (UpdateIsa isa : isas())
    for (size_t n : kSizes)
      for (bool brain : {true, false}) {
        auto c = coefficients(artifact::Kernel::UpdateAdamW, 2, 0.01);
        auto w = values(n, 11, false), g = values(n, 12, false),
             m = values(n, 13, false), v = values(n, 14, true);
        auto rw = w, rm = m, rv = v;
        adamwF32(rw.data(), g.data(), rm.data(), rv.data(), int64_t(n), c, {},
                 isa);
        std::vector<uint16_t> low(n, 0xdead);
        adamwF32(w.data(), g.data(), m.data(), v.data(), int64_t(n), c,
                 {low.data(), brain}, isa);
        size_t at;
        EXPECT_TRUE(sameBits(w, rw, at)) << updateIsaName(isa) << " n=" << n;
        for (at = 0; at < n; ++at) {
          uint16_t want =
              brain ? BFloat16::fromFloat(rw[at]) : Half::fromFloat(rw[at]);
          if (low[at] != want)
            break;
        }
        EXPECT_EQ(at, n) << updateIsaName(isa) << (brain ? " bf16" : " fp16")
                         << " n=" << n << ": copy differs at " << at;
        // SGD and momentum write it the same way.
        auto sw = values(n, 15, false);
        std::vector<uint16_t> slow(n, 0);
        auto sc = coefficients(artifact::Kernel::UpdateSgd, 1, 0.0);
        sgdF32(sw.data(), g.data(), int64_t(n), sc, {slow.data(), brain}, isa);
        for (at = 0; at < n; ++at)
          if (slow[at] !=
              (brain ? BFloat16::fromFloat(sw[at]) : Half::fromFloat(sw[at])))
            break;
        EXPECT_EQ(at, n) << "sgd " << updateIsaName(isa) << " n=" << n;
        auto mw = values(n, 16, false), b = values(n, 17, false);
        std::vector<uint16_t> mlow(n, 0);
        auto mc = coefficients(artifact::Kernel::UpdateMomentum, 2, 0.0);
        momentumF32(mw.data(), g.data(), b.data(), int64_t(n), mc,
                    {mlow.data(), brain}, isa);
        for (at = 0; at < n; ++at)
          if (mlow[at] !=
              (brain ? BFloat16::fromFloat(mw[at]) : Half::fromFloat(mw[at])))
            break;
        EXPECT_EQ(at, n) << "momentum " << updateIsaName(isa) << " n=" << n;
      }
}

TEST(StreamingUpdates, PicksAnIsaThisCpuHas) {
  EXPECT_TRUE(cpuSupports(updateIsa())) << updateIsaName(updateIsa());
}
