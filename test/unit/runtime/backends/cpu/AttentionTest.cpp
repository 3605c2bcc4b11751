// AttentionTest.cpp - Fused attention's CPU kernels against the unfused
// definition: every score materialised, in double.

#include "runtime/backends/cpu/Kernels.h"
#include "runtime/support/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace strata;
using namespace strata::cpu;
using artifact::Kernel;
using artifact::Step;

namespace {

struct Case {
  int64_t b, h, t, s, d, dv;
  bool causal = false;
  int64_t maskKind = 0; // 1 additive [T, S]; 2 keep / 3 drop where true.
  double scale = 0.3, fill = 0;
};

struct Tensors {
  std::vector<double> q, k, v, g, addMask;
  std::vector<uint8_t> boolMask; // [T, S], broadcast over batch and heads.
};

Tensors randomTensors(const Case &c, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0, 1);
  auto fill = [&](int64_t count) {
    std::vector<double> x(count);
    for (double &e : x)
      e = n(rng);
    return x;
  };
  Tensors x;
  int64_t heads = c.b * c.h;
  x.q = fill(heads * c.t * c.d);
  x.k = fill(heads * c.s * c.d);
  x.v = fill(heads * c.s * c.dv);
  x.g = fill(heads * c.t * c.dv);
  x.addMask = fill(c.t * c.s);
  x.boolMask.resize(c.t * c.s);
  for (int64_t i = 0; i < c.t; ++i)
    for (int64_t j = 0; j < c.s; ++j)
      x.boolMask[i * c.s + j] = (i * 7 + j * 3) % 5 != 0 || j == i % c.s;
  return x;
}

/// The unfused forward and backward in double: o, dq, dk, dv.
void reference(const Case &c, const Tensors &x, std::vector<double> &o,
               std::vector<double> &dq, std::vector<double> &dk,
               std::vector<double> &dv) {
  int64_t heads = c.b * c.h;
  o.assign(heads * c.t * c.dv, 0);
  dq.assign(x.q.size(), 0);
  dk.assign(x.k.size(), 0);
  dv.assign(x.v.size(), 0);
  for (int64_t bh = 0; bh < heads; ++bh) {
    const double *q = &x.q[bh * c.t * c.d], *k = &x.k[bh * c.s * c.d],
                 *v = &x.v[bh * c.s * c.dv], *g = &x.g[bh * c.t * c.dv];
    for (int64_t i = 0; i < c.t; ++i) {
      std::vector<double> p(c.s), dp(c.s);
      std::vector<bool> selected(c.s, false);
      double mx = -INFINITY;
      for (int64_t j = 0; j < c.s; ++j) {
        double s = 0;
        for (int64_t e = 0; e < c.d; ++e)
          s += q[i * c.d + e] * k[j * c.d + e];
        s *= c.scale;
        if (c.maskKind == 1)
          s += x.addMask[i * c.s + j];
        bool m = x.boolMask[i * c.s + j];
        if ((c.maskKind == 2 && !m) || (c.maskKind == 3 && m)) {
          s = c.fill;
          selected[j] = true;
        }
        if (c.causal && j > i + c.s - c.t)
          s = -INFINITY;
        p[j] = s;
        mx = std::max(mx, s);
      }
      double sum = 0;
      for (double &e : p)
        sum += (e = std::exp(e - mx));
      for (double &e : p)
        e /= sum;
      double dot = 0;
      for (int64_t j = 0; j < c.s; ++j) {
        for (int64_t e = 0; e < c.dv; ++e) {
          o[(bh * c.t + i) * c.dv + e] += p[j] * v[j * c.dv + e];
          dp[j] += g[i * c.dv + e] * v[j * c.dv + e];
          dv[(bh * c.s + j) * c.dv + e] += p[j] * g[i * c.dv + e];
        }
        dot += p[j] * dp[j];
      }
      for (int64_t j = 0; j < c.s; ++j) {
        double ds = selected[j] ? 0 : p[j] * (dp[j] - dot) * c.scale;
        for (int64_t e = 0; e < c.d; ++e) {
          dq[(bh * c.t + i) * c.d + e] += ds * k[j * c.d + e];
          dk[(bh * c.s + j) * c.d + e] += ds * q[i * c.d + e];
        }
      }
    }
  }
}

template <typename T> std::vector<T> as(const std::vector<double> &x) {
  std::vector<T> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if constexpr (std::is_same_v<T, Half>)
      out[i] = Half{Half::fromFloat(static_cast<float>(x[i]))};
    else
      out[i] = static_cast<T>(x[i]);
  }
  return out;
}

template <typename T> double value(T x) {
  if constexpr (std::is_same_v<T, Half>)
    return Half::toFloat(x.bits);
  else
    return x;
}

/// Runs the kernels in storage type T and compares with the reference to
/// `tol` (relative to each output's largest magnitude).
template <typename T>
void check(const Case &c, DType dtype, double tol, unsigned seed = 1) {
  Tensors x = randomTensors(c, seed);
  if constexpr (!std::is_same_v<T, double>) {
    // The reference sees the inputs as the kernels do, rounded to T.
    for (auto *v : {&x.q, &x.k, &x.v, &x.g, &x.addMask})
      for (double &e : *v)
        e = value(as<T>({e})[0]);
  }
  std::vector<double> o, dq, dk, dv;
  reference(c, x, o, dq, dk, dv);
  auto q = as<T>(x.q), k = as<T>(x.k), v = as<T>(x.v), g = as<T>(x.g),
       add = as<T>(x.addMask);
  std::vector<uint8_t> maskBytes = x.boolMask;
  static_assert(sizeof(bool) == 1);
  std::vector<int64_t> sq{c.b, c.h, c.t, c.d}, sk{c.b, c.h, c.s, c.d},
      sv{c.b, c.h, c.s, c.dv}, so{c.b, c.h, c.t, c.dv}, sm{c.t, c.s};
  std::vector<TensorRef> in{
      {dtype, sq, q.data()}, {dtype, sk, k.data()}, {dtype, sv, v.data()}};
  TensorRef mask;
  if (c.maskKind == 1)
    mask = {dtype, sm, add.data()};
  else if (c.maskKind)
    mask = {DType::Bool, sm, maskBytes.data()};
  Step step;
  step.kernel = Kernel::Attention;
  step.ints = {c.causal ? 1 : 0, c.maskKind};
  step.floats = {c.scale, c.fill};
  std::vector<T> out(o.size()), gq(q.size()), gk(k.size()), gv(v.size());
  std::vector<TensorRef> fwdIn = in;
  if (c.maskKind)
    fwdIn.push_back(mask);
  std::string error;
  ASSERT_TRUE(runKernel(step, fwdIn, {{dtype, so, out.data()}}, error))
      << error;
  step.kernel = Kernel::AttentionGrad;
  std::vector<TensorRef> bwdIn = in;
  bwdIn.push_back({dtype, so, g.data()});
  if (c.maskKind)
    bwdIn.push_back(mask);
  ASSERT_TRUE(runKernel(
      step, bwdIn,
      {{dtype, sq, gq.data()}, {dtype, sk, gk.data()}, {dtype, sv, gv.data()}},
      error))
      << error;
  auto compare = [&](const char *what, const std::vector<T> &got,
                     const std::vector<double> &want) {
    double scale = 0;
    for (double w : want)
      scale = std::max(scale, std::fabs(w));
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(value(got[i]), want[i], tol * std::max(scale, 1e-300))
          << what << " element " << i;
  };
  compare("o", out, o);
  compare("dq", gq, dq);
  compare("dk", gk, dk);
  compare("dv", gv, dv);
}

// Tests causal attention over more rows than a block (64) with more keys
// than queries (the causal diagonal offset by S - T) and head sizes that
// differ for k and v, in double to 1e-12.
TEST(Attention, CausalMatchesTheUnfusedDefinition) {
  check<double>({2, 3, 70, 90, 8, 5, true}, DType::F64, 1e-12);
  check<double>({1, 1, 130, 130, 4, 4, true}, DType::F64, 1e-12);
}

// Tests the three mask kinds (an added float mask, keep-where-true and
// drop-where-true with a finite fill) with a mask broadcast over batch and
// heads, in double to 1e-12.
TEST(Attention, MasksMatchTheUnfusedDefinition) {
  check<double>({2, 2, 9, 11, 4, 3, false, 1}, DType::F64, 1e-12);
  check<double>({2, 2, 9, 11, 4, 3, false, 2, 0.5, -1e9}, DType::F64, 1e-12);
  check<double>({1, 2, 66, 66, 4, 3, true, 3, 0.5, -5.0}, DType::F64, 1e-12);
}

// Tests float and half storage (half computes in float) against the
// double reference of the same rounded inputs.
TEST(Attention, FloatAndHalfStorage) {
  check<float>({2, 4, 100, 100, 16, 16, true}, DType::F32, 1e-5);
  check<Half>({1, 2, 20, 20, 8, 8, false, 1}, DType::F16, 4e-3);
}

} // namespace
