// ElementwiseTest.cpp - The fused elementwise kernel against the kernels it
// replaces, and its program checks.

#include "runtime/artifact/KernelContract.h"
#include "runtime/backends/cpu/Kernels.h"
#include "runtime/support/Half.h"
#include "test/unit/runtime/backends/cpu/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace strata;
using namespace strata::cpu;
using artifact::Kernel;
using artifact::Step;

namespace {

using test::runStep;

std::vector<float> randomFloats(size_t n, unsigned seed) {
  return test::randomFloats(n, seed, 2.0f);
}

int64_t op(Kernel k) { return static_cast<int64_t>(k); }

// Tests that bias + tanh GELU, times a constant, plus a residual (with the
// bias broadcast over rows, the residual over a middle dimension) equals,
// bit for bit, the four kernels it replaces, and that both the
// pre-activation and the sum come out. The rows are 300 long: blocks of
// 256 and a tail.
TEST(Elementwise, ChainEqualsTheKernelsItReplaces) {
  const int64_t b = 3, r = 5, n = 300;
  std::vector<float> a = randomFloats(b * r * n, 1), bias = randomFloats(n, 2),
                     res = randomFloats(b * n, 3);
  std::vector<int64_t> full{b, r, n}, resShape{b, 1, n}, biasShape{n};
  TensorRef A{DType::F32, full, a.data()},
      B{DType::F32, biasShape, bias.data()},
      R{DType::F32, resShape, res.data()};
  // Unfused.
  std::vector<float> x(a.size()), g(a.size()), m(a.size()), s(a.size());
  float half = 0.5f;
  TensorRef X{DType::F32, full, x.data()}, G{DType::F32, full, g.data()},
      M{DType::F32, full, m.data()}, S{DType::F32, full, s.data()},
      Half_{DType::F32, {}, &half};
  ASSERT_TRUE(runStep(Kernel::Add, {A, B}, {X}));
  ASSERT_TRUE(runStep(Kernel::Gelu, {X}, {G}, {1}));
  ASSERT_TRUE(runStep(Kernel::Mul, {G, Half_}, {M}));
  ASSERT_TRUE(runStep(Kernel::Add, {M, R}, {S}));
  // Fused: registers a=0, bias=1, res=2, 0.5=3, then 4.. per instruction.
  std::vector<float> fx(a.size()), fs(a.size());
  std::vector<int64_t> program{4, op(Kernel::Add),
                               0, 1,
                               0, op(Kernel::Gelu),
                               4, -1,
                               1, op(Kernel::Mul),
                               5, 3,
                               0, op(Kernel::Add),
                               6, 2,
                               0, 4,
                               7};
  ASSERT_TRUE(
      runStep(Kernel::Elementwise, {A, B, R},
              {{DType::F32, full, fx.data()}, {DType::F32, full, fs.data()}},
              program, {0.5}));
  EXPECT_EQ(0, std::memcmp(fx.data(), x.data(), x.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(fs.data(), s.data(), s.size() * sizeof(float)));
}

// Tests half storage: the chain computes in float and rounds once, so it
// matches a float computation of the same half inputs to half precision.
TEST(Elementwise, HalfStorageRoundsOnce) {
  const int64_t n = 1000;
  std::vector<float> a = randomFloats(n, 4), c = randomFloats(n, 5);
  std::vector<Half> ha(n), hc(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    ha[i] = Half{Half::fromFloat(a[i])};
    hc[i] = Half{Half::fromFloat(c[i])};
  }
  // exp(-|a|) * c - a: registers a=0, c=1, then 2.. per instruction.
  std::vector<int64_t> program{5, op(Kernel::Abs),
                               0, -1,
                               0, op(Kernel::Neg),
                               2, -1,
                               0, op(Kernel::Exp),
                               3, -1,
                               0, op(Kernel::Mul),
                               4, 1,
                               0, op(Kernel::Sub),
                               5, 0,
                               0, 6};
  ASSERT_TRUE(
      runStep(Kernel::Elementwise,
              {{DType::F16, {n}, ha.data()}, {DType::F16, {n}, hc.data()}},
              {{DType::F16, {n}, out.data()}}, program));
  for (int64_t i = 0; i < n; ++i) {
    float x = Half::toFloat(ha[i].bits), y = Half::toFloat(hc[i].bits);
    float want = std::exp(-std::fabs(x)) * y - x;
    EXPECT_NEAR(Half::toFloat(out[i].bits), want, std::fabs(want) * 1e-3 + 1e-6)
        << i;
  }
}

// Tests that malformed programs are errors naming the problem, never
// reads outside the registers: a register read before it is written, a
// non-elementwise kernel, a wrong length, an output past the registers.
TEST(Elementwise, MalformedProgramsAreRejected) {
  artifact::ElementwiseProgram p;
  std::string why;
  int64_t add = op(Kernel::Add);
  EXPECT_TRUE(
      artifact::elementwiseProgram({1, add, 0, 1, 0, 2}, {}, 2, 1, p, why))
      << why;
  EXPECT_FALSE(
      artifact::elementwiseProgram({1, add, 0, 2, 0, 2}, {}, 2, 1, p, why));
  EXPECT_NE(why.find("not yet written"), std::string::npos) << why;
  EXPECT_FALSE(artifact::elementwiseProgram({1, op(Kernel::MatMul), 0, 1, 0, 2},
                                            {}, 2, 1, p, why));
  EXPECT_NE(why.find("not an elementwise"), std::string::npos) << why;
  EXPECT_FALSE(
      artifact::elementwiseProgram({1, add, 0, 1, 0}, {}, 2, 1, p, why));
  EXPECT_FALSE(
      artifact::elementwiseProgram({1, add, 0, 1, 0, 3}, {}, 2, 1, p, why));
  EXPECT_FALSE(artifact::elementwiseProgram({1, op(Kernel::Exp), 0, 1, 0, 1},
                                            {}, 1, 1, p, why));
  EXPECT_FALSE(artifact::elementwiseProgram({0, 0}, {}, 1, 1, p, why));
  EXPECT_FALSE(
      artifact::elementwiseProgram({1, 9999, 0, 1, 0, 2}, {}, 2, 1, p, why));
}

} // namespace
