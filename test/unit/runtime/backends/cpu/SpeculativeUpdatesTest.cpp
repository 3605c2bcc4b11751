// SpeculativeUpdatesTest.cpp - An update run as if its step did not clip
// (artifact::Speculation::Speculate) followed by its redo gives the bits of
// the plain update with the step's scale, whatever the scale: 1 (the
// speculation stands), a clipping factor, 0 or NaN (a skipped step); and a
// step that does not speculate runs the redo as the plain update.

#include "runtime/artifact/KernelTable.h"
#include "runtime/backends/cpu/Kernels.h"
#include "runtime/support/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace strata;
using namespace strata::cpu;
using artifact::Kernel;
using artifact::Speculation;

namespace {

/// The tensors of one AdamW update with a bf16 copy: w, g, m, v (fp32) and
/// the copy, their keeps and the scale.
struct Tensors {
  std::vector<float> w, g, m, v, kw, km, kv, scale{1.0f};
  std::vector<uint16_t> low, klow;

  explicit Tensors(int64_t n) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto *t : {&w, &g, &m, &v}) {
      t->resize(n);
      for (float &x : *t)
        x = normal(rng);
    }
    for (float &x : v)
      x = std::fabs(x);
    low.resize(n);
    for (int64_t i = 0; i < n; ++i)
      low[i] = BFloat16::fromFloat(w[i]);
    kw.assign(n, -1.0f);
    km = kw;
    kv = kw;
    klow.assign(n, 0);
  }

  TensorRef ref(std::vector<float> &t) {
    return {DType::F32, {static_cast<int64_t>(t.size())}, t.data()};
  }
  TensorRef ref(std::vector<uint16_t> &t) {
    return {DType::BF16, {static_cast<int64_t>(t.size())}, t.data()};
  }
  TensorRef scalar() { return {DType::F32, {}, scale.data()}; }

  /// Runs the update in `mode`: the plain one with the scale, the
  /// speculative one (no scale), or the redo.
  void run(Speculation mode, const KernelContext &ctx) {
    artifact::Step step;
    step.kernel = Kernel::UpdateAdamW;
    step.floats = {1e-3, 0.9, 0.999, 1e-8, 0.01};
    step.ints = {1, 1, static_cast<int64_t>(mode)};
    std::vector<TensorRef> in{ref(w), ref(g), ref(m), ref(v)};
    if (mode != Speculation::Speculate)
      in.push_back(scalar());
    in.push_back(ref(low));
    if (mode != Speculation::None)
      for (TensorRef t : {ref(kw), ref(km), ref(kv), ref(klow)})
        in.push_back(t);
    std::string error;
    ASSERT_TRUE(runKernel(step, in, {}, ctx, error)) << error;
  }
};

template <typename T>
bool sameBits(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

void expectSame(const Tensors &got, const Tensors &want, const char *what) {
  EXPECT_TRUE(sameBits(got.w, want.w)) << what;
  EXPECT_TRUE(sameBits(got.m, want.m)) << what;
  EXPECT_TRUE(sameBits(got.v, want.v)) << what;
  EXPECT_TRUE(sameBits(got.low, want.low)) << what;
}

TEST(SpeculativeUpdates, RedoGivesThePlainUpdateForEveryScale) {
  // Several blocks of the blocked copy-then-update, and a ragged end.
  const int64_t n = 3 * 65536 + 123;
  KernelContext ctx;
  ctx.step = 3;
  for (float scale :
       {1.0f, 0.37f, 0.0f, std::numeric_limits<float>::quiet_NaN()}) {
    Tensors plain(n), spec(n);
    plain.scale[0] = scale;
    plain.run(Speculation::None, ctx);
    Tensors before(n);
    spec.run(Speculation::Speculate, ctx);
    // The keeps hold the old values.
    EXPECT_TRUE(sameBits(spec.kw, before.w));
    EXPECT_TRUE(sameBits(spec.kv, before.v));
    EXPECT_TRUE(sameBits(spec.klow, before.low));
    spec.scale[0] = scale;
    artifact::Step redo;
    redo.kernel = Kernel::UpdateAdamW;
    redo.ints = {1, 1, static_cast<int64_t>(Speculation::Redo)};
    std::vector<TensorRef> in{spec.ref(spec.w),  spec.ref(spec.g),
                              spec.ref(spec.m),  spec.ref(spec.v),
                              spec.scalar(),     spec.ref(spec.low),
                              spec.ref(spec.kw), spec.ref(spec.km),
                              spec.ref(spec.kv), spec.ref(spec.klow)};
    EXPECT_EQ(redoNeeded(redo, in), scale != 1.0f) << scale;
    spec.run(Speculation::Redo, ctx);
    expectSame(spec, plain, "speculated");
    if (scale == 0.0f || std::isnan(scale))
      expectSame(spec, before, "skipped");
  }
}

TEST(SpeculativeUpdates, WithoutSpeculationTheRedoIsTheUpdate) {
  const int64_t n = 65536 + 5;
  KernelContext ctx;
  ctx.speculating = false;
  for (float scale : {1.0f, 0.5f}) {
    Tensors plain(n), spec(n);
    plain.scale[0] = scale;
    plain.run(Speculation::None, ctx);
    spec.run(Speculation::Speculate, ctx);
    expectSame(spec, Tensors(n), "the speculative update did not run");
    spec.scale[0] = scale;
    spec.run(Speculation::Redo, ctx);
    expectSame(spec, plain, "not speculating");
  }
}

} // namespace
