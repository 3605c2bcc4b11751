// KernelsTest.cpp - CPU kernels against straightforward reference loops.

#include "runtime/backends/cpu/Kernels.h"
#include "runtime/kernels/SharedMath.h"
#include "runtime/support/Half.h"
#include "runtime/support/ThreadPool.h"
#include "test/unit/runtime/backends/cpu/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>

using namespace strata;
using namespace strata::cpu;
using artifact::Kernel;
using artifact::Step;

namespace {

using test::randomFloats;

template <typename T>
TensorRef ref(std::vector<T> &v, std::vector<int64_t> shape, DType dtype) {
  return TensorRef{dtype, std::move(shape), v.data()};
}

bool run(Kernel k, std::vector<TensorRef> in, TensorRef out,
         std::vector<int64_t> ints = {}, std::vector<double> floats = {}) {
  return test::runStep(k, std::move(in), {out}, std::move(ints),
                       std::move(floats));
}

TEST(Kernels, BatchedMatMulWithBroadcastMatchesLoops) {
  // [2,1,3,5] x [4,5,6] -> [2,4,3,6]: batch dims broadcast.
  std::vector<float> a = randomFloats(2 * 3 * 5, 1),
                     b = randomFloats(4 * 5 * 6, 2);
  std::vector<float> c(2 * 4 * 3 * 6);
  run(Kernel::MatMul,
      {ref(a, {2, 1, 3, 5}, DType::F32), ref(b, {4, 5, 6}, DType::F32)},
      ref(c, {2, 4, 3, 6}, DType::F32));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 6; ++n) {
          double want = 0;
          for (int k = 0; k < 5; ++k)
            want += double(a[(i * 3 + m) * 5 + k]) * b[(j * 5 + k) * 6 + n];
          EXPECT_NEAR(c[((i * 4 + j) * 3 + m) * 6 + n], want, 1e-5);
        }
}

TEST(Kernels, MatMulWithAnEmptyBatchWritesNothing) {
  // [0,2,3] x [1,3,4] -> [0,2,4]: the batch of 1 broadcasts to 0, so no
  // product is written (a zero-element result owns no bytes).
  std::vector<float> a(1), b = randomFloats(12, 3), c(8, -7.0f);
  run(Kernel::MatMul,
      {ref(a, {0, 2, 3}, DType::F32), ref(b, {1, 3, 4}, DType::F32)},
      ref(c, {0, 2, 4}, DType::F32));
  for (float x : c)
    EXPECT_EQ(x, -7.0f);
}

TEST(Kernels, IntegerMatMulIsExact) {
  std::vector<int64_t> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9}, c(2);
  run(Kernel::MatMul, {ref(a, {2, 3}, DType::I64), ref(b, {3}, DType::I64)},
      ref(c, {2}, DType::I64));
  EXPECT_EQ(c, (std::vector<int64_t>{50, 122}));
}

TEST(Kernels, MatMulWithRowsTakesTheLaterRowsAsZero) {
  // a's stored rows from `rows` on count as zero: without a transpose the
  // result's rows from there are zero; transposed, they leave the sum.
  std::vector<float> a = randomFloats(5 * 4, 4), b = randomFloats(4 * 3, 5),
                     bt = randomFloats(3 * 4, 6), b5 = randomFloats(5 * 2, 7);
  for (int64_t rows : {-1, 0, 2, 5, 9}) {
    int64_t live = std::clamp<int64_t>(rows, 0, 5);
    std::vector<int64_t> count = {rows};
    std::vector<float> c(5 * 3, 7.0f), ct(5 * 3, 7.0f), cta(4 * 2, 7.0f);
    ASSERT_TRUE(run(Kernel::MatMul,
                    {ref(a, {5, 4}, DType::F32), ref(b, {4, 3}, DType::F32),
                     ref(count, {}, DType::I64)},
                    ref(c, {5, 3}, DType::F32)));
    ASSERT_TRUE(run(Kernel::MatMul,
                    {ref(a, {5, 4}, DType::F32), ref(bt, {3, 4}, DType::F32),
                     ref(count, {}, DType::I64)},
                    ref(ct, {5, 3}, DType::F32), {0, 1}));
    ASSERT_TRUE(run(Kernel::MatMul,
                    {ref(a, {5, 4}, DType::F32), ref(b5, {5, 2}, DType::F32),
                     ref(count, {}, DType::I64)},
                    ref(cta, {4, 2}, DType::F32), {1, 0}));
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t n = 0; n < 3; ++n) {
        double want = 0, wantT = 0;
        for (int64_t k = 0; k < 4 && i < live; ++k) {
          want += double(a[i * 4 + k]) * b[k * 3 + n];
          wantT += double(a[i * 4 + k]) * bt[n * 4 + k];
        }
        EXPECT_NEAR(c[i * 3 + n], want, 1e-5) << rows;
        EXPECT_NEAR(ct[i * 3 + n], wantT, 1e-5) << rows;
      }
    for (int64_t m = 0; m < 4; ++m)
      for (int64_t n = 0; n < 2; ++n) {
        double want = 0;
        for (int64_t p = 0; p < live; ++p)
          want += double(a[p * 4 + m]) * b5[p * 2 + n];
        EXPECT_NEAR(cta[m * 2 + n], want, 1e-5) << rows;
      }
  }
}

TEST(Kernels, CompactRowsListsTheTruePositionsFirst) {
  std::vector<uint8_t> mask = {0, 1, 1, 0, 0, 1, 0};
  std::vector<int64_t> order(7, -1), count = {-1};
  ASSERT_TRUE(test::runStep(
      Kernel::CompactRows, {ref(mask, {7}, DType::Bool)},
      {ref(order, {7}, DType::I64), ref(count, {}, DType::I64)}, {}, {}));
  EXPECT_EQ(order, (std::vector<int64_t>{1, 2, 5, 0, 3, 4, 6}));
  EXPECT_EQ(count[0], 3);
  std::vector<uint8_t> none(4, 0);
  std::vector<int64_t> order2(4, -1);
  ASSERT_TRUE(test::runStep(
      Kernel::CompactRows, {ref(none, {4}, DType::Bool)},
      {ref(order2, {4}, DType::I64), ref(count, {}, DType::I64)}, {}, {}));
  EXPECT_EQ(order2, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(count[0], 0);
}

TEST(Kernels, GroupRowsOrdersMaskByMaskAndRefusesOverlap) {
  std::vector<uint8_t> m0 = {0, 1, 0, 0, 1, 0, 0}, m1 = {1, 0, 0, 0, 0, 0, 1},
                       m2 = {0, 0, 0, 1, 0, 0, 0};
  std::vector<int64_t> order(7, -1), offsets(4, -1), count = {-1};
  auto refs = [&](std::vector<uint8_t> &a, std::vector<uint8_t> &b,
                  std::vector<uint8_t> &c) {
    return std::vector<TensorRef>{ref(a, {7}, DType::Bool),
                                  ref(b, {7}, DType::Bool),
                                  ref(c, {7}, DType::Bool)};
  };
  std::vector<TensorRef> outs = {ref(order, {7}, DType::I64),
                                 ref(offsets, {4}, DType::I64),
                                 ref(count, {}, DType::I64)};
  ASSERT_TRUE(test::runStep(Kernel::GroupRows, refs(m0, m1, m2), outs));
  EXPECT_EQ(order, (std::vector<int64_t>{1, 4, 0, 6, 3, 2, 5}));
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 2, 4, 5}));
  EXPECT_EQ(count[0], 5);
  // Masks that share a position are an error naming it, not a buffer
  // overrun.
  m2[4] = 1;
  artifact::Step step;
  step.kernel = Kernel::GroupRows;
  std::string error;
  EXPECT_FALSE(runKernel(step, refs(m0, m1, m2), outs, error));
  EXPECT_NE(error.find("position 4"), std::string::npos) << error;
}

/// grouped_matmul and segment_matmul against a loop per group, for float
/// and bf16 storage, with offsets as group_rows makes them and as a
/// damaged plan might hold them (clamped, never read past the rows).
TEST(Kernels, GroupedProductsMatchAProductPerGroup) {
  const int64_t R = 9, K = 4, N = 3, E = 3;
  std::vector<float> a = randomFloats(R * K, 11), g = randomFloats(R * N, 12);
  std::vector<std::vector<float>> w(E), wt(E);
  for (int64_t e = 0; e < E; ++e) {
    w[e] = randomFloats(K * N, 20 + e);
    wt[e].resize(N * K);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        wt[e][n * K + k] = w[e][k * N + n];
  }
  for (std::vector<int64_t> offsets :
       {std::vector<int64_t>{0, 3, 3, 7}, {0, 0, 9, 9}, {2, 1, 50, -4}}) {
    std::vector<int64_t> bounds = {0, 0, 0, 0};
    int64_t low = 0;
    for (int64_t e = 0; e <= E; ++e)
      low = bounds[e] = std::clamp<int64_t>(offsets[e], low, R);
    std::vector<float> y(R * N, -7.0f), yt(R * N, -7.0f);
    std::vector<TensorRef> in = {ref(a, {R, K}, DType::F32),
                                 ref(offsets, {E + 1}, DType::I64)},
                           inT = in;
    for (int64_t e = 0; e < E; ++e) {
      in.push_back(ref(w[e], {K, N}, DType::F32));
      inT.push_back(ref(wt[e], {N, K}, DType::F32));
    }
    run(Kernel::GroupedMatMul, in, ref(y, {R, N}, DType::F32), {0});
    run(Kernel::GroupedMatMul, inT, ref(yt, {R, N}, DType::F32), {1});
    for (int64_t r = 0; r < R; ++r) {
      int64_t e = -1;
      for (int64_t k = 0; k < E; ++k)
        if (r >= bounds[k] && r < bounds[k + 1])
          e = k;
      for (int64_t n = 0; n < N; ++n) {
        double want = 0;
        for (int64_t k = 0; k < K && e >= 0; ++k)
          want += double(a[r * K + k]) * w[e][k * N + n];
        EXPECT_NEAR(y[r * N + n], want, 1e-5) << r;
        EXPECT_NEAR(yt[r * N + n], want, 1e-5) << r;
      }
    }
    for (int64_t e = 0; e < E; ++e) {
      std::vector<float> dw(K * N, -7.0f);
      run(Kernel::SegmentMatMul,
          {ref(a, {R, K}, DType::F32), ref(g, {R, N}, DType::F32),
           ref(offsets, {E + 1}, DType::I64)},
          ref(dw, {K, N}, DType::F32), {e});
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) {
          double want = 0;
          for (int64_t r = bounds[e]; r < bounds[e + 1]; ++r)
            want += double(a[r * K + k]) * g[r * N + n];
          EXPECT_NEAR(dw[k * N + n], want, 1e-5) << e;
        }
    }
  }
  // bf16 storage: each group's product in float, rounded once; rows
  // outside the groups zero.
  std::vector<int64_t> offsets = {0, 4, 6, 8};
  std::vector<uint16_t> ab(R * K), yb(R * N);
  std::vector<std::vector<uint16_t>> wb(E, std::vector<uint16_t>(K * N));
  for (int64_t i = 0; i < R * K; ++i)
    ab[i] = BFloat16::fromFloat(a[i]);
  std::vector<TensorRef> in = {ref(ab, {R, K}, DType::BF16),
                               ref(offsets, {E + 1}, DType::I64)};
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t i = 0; i < K * N; ++i)
      wb[e][i] = BFloat16::fromFloat(w[e][i]);
    in.push_back(ref(wb[e], {K, N}, DType::BF16));
  }
  run(Kernel::GroupedMatMul, in, ref(yb, {R, N}, DType::BF16), {0});
  for (int64_t r = 0; r < R; ++r)
    for (int64_t n = 0; n < N; ++n) {
      int64_t e = r < 4 ? 0 : r < 6 ? 1 : r < 8 ? 2 : -1;
      double want = 0;
      for (int64_t k = 0; k < K && e >= 0; ++k)
        want += double(BFloat16::toFloat(ab[r * K + k])) *
                BFloat16::toFloat(wb[e][k * N + n]);
      // One rounding of the float product: within half a bf16 step.
      EXPECT_NEAR(BFloat16::toFloat(yb[r * N + n]), want,
                  std::abs(want) * (1.0 / 256) + 1e-6)
          << r;
    }
}

TEST(Kernels, BroadcastingBinaryAndCompare) {
  std::vector<float> a = randomFloats(3 * 4, 3), b = randomFloats(4, 4);
  std::vector<float> sum(12);
  run(Kernel::Sub, {ref(a, {3, 4}, DType::F32), ref(b, {1, 4}, DType::F32)},
      ref(sum, {3, 4}, DType::F32));
  std::vector<uint8_t> less(12);
  run(Kernel::Less, {ref(a, {3, 4}, DType::F32), ref(b, {4}, DType::F32)},
      TensorRef{DType::Bool, {3, 4}, less.data()});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_FLOAT_EQ(sum[i * 4 + j], a[i * 4 + j] - b[j]);
      EXPECT_EQ(less[i * 4 + j] != 0, a[i * 4 + j] < b[j]);
    }
}

TEST(Kernels, IntegerDivisionByZeroIsAnError) {
  std::vector<int32_t> a = {4, 5}, b = {2, 0}, c(2);
  Step step;
  step.kernel = Kernel::Div;
  std::string error;
  EXPECT_FALSE(runKernel(step,
                         {ref(a, {2}, DType::I32), ref(b, {2}, DType::I32)},
                         {ref(c, {2}, DType::I32)}, error));
  EXPECT_EQ(error, "integer division by zero");
}

TEST(Kernels, ReduceOverMiddleAxisAndTrailingAxes) {
  std::vector<float> x = randomFloats(2 * 3 * 4, 5);
  std::vector<float> mid(2 * 4), last(2), mx(2 * 4);
  run(Kernel::ReduceSum, {ref(x, {2, 3, 4}, DType::F32)},
      ref(mid, {2, 1, 4}, DType::F32), {1, 1});
  run(Kernel::ReduceMean, {ref(x, {2, 3, 4}, DType::F32)},
      ref(last, {2}, DType::F32), {1, 2, 0});
  run(Kernel::ReduceMax, {ref(x, {2, 3, 4}, DType::F32)},
      ref(mx, {2, 4}, DType::F32), {1, 0});
  for (int i = 0; i < 2; ++i) {
    double total = 0;
    for (int k = 0; k < 4; ++k) {
      double s = 0;
      float m = -INFINITY;
      for (int j = 0; j < 3; ++j) {
        s += x[(i * 3 + j) * 4 + k];
        m = std::max(m, x[(i * 3 + j) * 4 + k]);
      }
      EXPECT_NEAR(mid[i * 4 + k], s, 1e-5);
      EXPECT_EQ(mx[i * 4 + k], m);
      total += s;
    }
    EXPECT_NEAR(last[i], total / 12, 1e-6);
  }
}

// Tests the two parallel reductions: rows long enough to be split in
// chunks (a whole gradient's sum, a mean and a max with a NaN in a later
// chunk) and sums over leading axes (a bias gradient): both against a
// sequential double sum, and bit for bit the same on a second run.
TEST(Kernels, LongRowsAndLeadingAxesReduceInParallel) {
  const int64_t rows = 3, n = 300001;
  std::vector<float> x = randomFloats(rows * n, 7);
  std::vector<float> sum(rows), mean(rows), mx(rows), again(rows);
  run(Kernel::ReduceSum, {ref(x, {rows, n}, DType::F32)},
      ref(sum, {rows}, DType::F32), {1, 0});
  run(Kernel::ReduceSum, {ref(x, {rows, n}, DType::F32)},
      ref(again, {rows}, DType::F32), {1, 0});
  run(Kernel::ReduceMean, {ref(x, {rows, n}, DType::F32)},
      ref(mean, {rows}, DType::F32), {1, 0});
  std::vector<float> withNan = x;
  withNan[2 * n + 200000] = NAN;
  run(Kernel::ReduceMax, {ref(withNan, {rows, n}, DType::F32)},
      ref(mx, {rows}, DType::F32), {1, 0});
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    float m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      s += x[r * n + i];
      m = std::max(m, x[r * n + i]);
    }
    EXPECT_NEAR(sum[r], s, 1e-3) << r;
    EXPECT_NEAR(mean[r], s / n, 1e-8) << r;
    EXPECT_EQ(0, std::memcmp(&sum[r], &again[r], sizeof(float)));
    if (r < 2)
      EXPECT_EQ(mx[r], m);
    else
      EXPECT_TRUE(std::isnan(mx[r]));
  }
  // Column sums over the two leading axes of [4, 5, 700].
  std::vector<float> y = randomFloats(4 * 5 * 700, 8), cols(700);
  run(Kernel::ReduceSum, {ref(y, {4, 5, 700}, DType::F32)},
      ref(cols, {700}, DType::F32), {0, 1, 0});
  for (int64_t c = 0; c < 700; ++c) {
    double s = 0;
    for (int64_t r = 0; r < 20; ++r)
      s += y[r * 700 + c];
    EXPECT_FLOAT_EQ(cols[c], static_cast<float>(s)) << c;
  }
}

// A sum of squares (the optimizer's global norm) over whole rows, long
// enough for the chunked path and short, and over a middle axis: against
// a sequential double loop.
TEST(Kernels, ReduceSumSquareMatchesSequentialLoop) {
  for (int64_t n : {int64_t(300001), int64_t(13)}) {
    std::vector<float> x = randomFloats(2 * n, 11);
    std::vector<float> sq(2);
    run(Kernel::ReduceSumSquare, {ref(x, {2, n}, DType::F32)},
        ref(sq, {2}, DType::F32), {1, 0});
    for (int64_t r = 0; r < 2; ++r) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i)
        s += double(x[r * n + i]) * x[r * n + i];
      EXPECT_NEAR(sq[r], s, 1e-6 * s) << n << " " << r;
    }
  }
  std::vector<float> y = randomFloats(2 * 3 * 4, 12), mid(8);
  run(Kernel::ReduceSumSquare, {ref(y, {2, 3, 4}, DType::F32)},
      ref(mid, {2, 4}, DType::F32), {1, 0});
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      double s = 0;
      for (int j = 0; j < 3; ++j)
        s += double(y[(i * 3 + j) * 4 + k]) * y[(i * 3 + j) * 4 + k];
      EXPECT_FLOAT_EQ(mid[i * 4 + k], float(s));
    }
}

TEST(Kernels, SoftmaxAlongNonLastAxisSumsToOne) {
  std::vector<float> x = randomFloats(2 * 5 * 3, 6), y(30);
  run(Kernel::Softmax, {ref(x, {2, 5, 3}, DType::F32)},
      ref(y, {2, 5, 3}, DType::F32), {1});
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) {
      double denom = 0;
      for (int j = 0; j < 5; ++j)
        denom += std::exp(double(x[(i * 5 + j) * 3 + k]));
      for (int j = 0; j < 5; ++j)
        EXPECT_NEAR(y[(i * 5 + j) * 3 + k],
                    std::exp(double(x[(i * 5 + j) * 3 + k])) / denom, 1e-6);
    }
}

TEST(Kernels, LayerNormMatchesDefinition) {
  std::vector<float> x = randomFloats(3 * 8, 7), g = randomFloats(8, 8),
                     b = randomFloats(8, 9), y(24);
  run(Kernel::LayerNorm,
      {ref(x, {3, 8}, DType::F32), ref(g, {8}, DType::F32),
       ref(b, {8}, DType::F32)},
      ref(y, {3, 8}, DType::F32), {1, 1}, {1e-5});
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 8; ++i)
      mean += x[r * 8 + i] / 8.0;
    for (int i = 0; i < 8; ++i)
      var += (x[r * 8 + i] - mean) * (x[r * 8 + i] - mean) / 8.0;
    for (int i = 0; i < 8; ++i)
      EXPECT_NEAR(y[r * 8 + i],
                  (x[r * 8 + i] - mean) / std::sqrt(var + 1e-5) * g[i] + b[i],
                  1e-5);
  }
}

// The tanh, the tanh GELU and its gradient run eight floats at a time
// without the C library (math::fast::tanhCore): within four ulps of the
// library's tanh in double, over every scale of float, at lengths that leave a
// scalar tail, with the special values; and the vector lanes give the scalar
// path's bits.
TEST(Kernels, TanhAndTanhGeluMatchTheLibrary) {
  std::vector<float> x;
  for (float m = 1e-30f; m < 1e30f; m *= 1.37f)
    for (float s : {m, -m, m * 0.999f, -m * 1.001f})
      x.push_back(s);
  for (int i = -2000; i <= 2000; ++i)
    x.push_back(i * 0.0125f);
  x.insert(x.end(), {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 9.5f, -20.5f});
  x.push_back(1.0f); // An odd length: the last three take the scalar path.
  size_t n = x.size();
  ASSERT_NE(n % 4, 0u);
  auto ulps = [](float got, double want) {
    float w = static_cast<float>(want);
    if (std::isnan(w))
      return std::isnan(got) ? 0.0 : 1e30;
    int32_t a, b;
    std::memcpy(&a, &got, 4);
    std::memcpy(&b, &w, 4);
    return std::fabs(static_cast<double>(a) - b);
  };
  std::vector<float> t(n), gelu(n), grad(n), ones(n, 1.0f);
  ASSERT_TRUE(run(Kernel::Tanh, {ref(x, {int64_t(n)}, DType::F32)},
                  ref(t, {int64_t(n)}, DType::F32)));
  ASSERT_TRUE(run(Kernel::Gelu, {ref(x, {int64_t(n)}, DType::F32)},
                  ref(gelu, {int64_t(n)}, DType::F32), {1}));
  ASSERT_TRUE(run(
      Kernel::GeluGrad,
      {ref(x, {int64_t(n)}, DType::F32), ref(ones, {int64_t(n)}, DType::F32)},
      ref(grad, {int64_t(n)}, DType::F32), {1}));
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    worst = std::max(worst, ulps(t[i], std::tanh(double(x[i]))));
    EXPECT_EQ(std::signbit(t[i]), std::signbit(x[i])) << x[i];
    // The GELU and its gradient in float arithmetic around the tanh: within
    // float rounding of the double-precision functions.
    double v = x[i], k0 = 0.7978845608028654, k1 = 0.044715;
    if (!std::isfinite(v) || std::fabs(v) > 1e15)
      continue;
    double th = std::tanh(k0 * (v + k1 * v * v * v));
    double g = 0.5 * v * (1 + th);
    double d =
        0.5 * (1 + th) + 0.5 * v * (1 - th * th) * k0 * (1 + 3 * k1 * v * v);
    EXPECT_NEAR(gelu[i], g, 1e-6 * std::max(1.0, std::fabs(g))) << v;
    EXPECT_NEAR(grad[i], d, 1e-5 * std::max(1.0, std::fabs(d))) << v;
  }
  EXPECT_LE(worst, 4.0);
  // Element i of a shifted copy goes through the other path (vector lanes
  // vs the scalar tail): the same bits.
  std::vector<float> shifted(x.begin() + 1, x.end()), t2(n - 1);
  ASSERT_TRUE(run(Kernel::Tanh, {ref(shifted, {int64_t(n - 1)}, DType::F32)},
                  ref(t2, {int64_t(n - 1)}, DType::F32)));
  for (size_t i = 0; i + 1 < n; ++i)
    EXPECT_EQ(std::memcmp(&t2[i], &t[i + 1], 4), 0) << x[i + 1];
}

// The exp and sigmoid kernels of floats run eight at a time without the C
// library (RowLoops.h): within two ulps of exp and four of the sigmoid in
// double, saturating to 0 and 1 (and inf for exp) at the ends (0 below
// float's normal range), NaN kept.
TEST(Kernels, ExpAndSigmoidMatchTheLibrary) {
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i)
    x.push_back(i * 0.0219f);
  x.insert(x.end(), {-INFINITY, INFINITY, NAN, -100.0f, 100.0f, 0.0f});
  size_t n = x.size();
  std::vector<float> e(n), s(n);
  ASSERT_TRUE(run(Kernel::Exp, {ref(x, {int64_t(n)}, DType::F32)},
                  ref(e, {int64_t(n)}, DType::F32)));
  ASSERT_TRUE(run(Kernel::Sigmoid, {ref(x, {int64_t(n)}, DType::F32)},
                  ref(s, {int64_t(n)}, DType::F32)));
  for (size_t i = 0; i < n; ++i) {
    double v = x[i];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(e[i]) && std::isnan(s[i]));
      continue;
    }
    double want = std::exp(v), sig = 1 / (1 + std::exp(-v));
    if (std::fabs(v) <= 87) {
      EXPECT_NEAR(e[i], want, 2.4e-7 * want) << v;
    }
    // Below float's normal range (1.2e-38) the sigmoid is 0.
    EXPECT_NEAR(s[i], sig, 4.8e-7 * sig + 1.2e-38) << v;
  }
  EXPECT_EQ(e[n - 6], 0.0f);
  EXPECT_EQ(e[n - 5], INFINITY);
  EXPECT_EQ(s[n - 6], 0.0f);
  EXPECT_EQ(s[n - 5], 1.0f);
  EXPECT_EQ(s[n - 2], 1.0f);
}

// Softmax and cross-entropy of doubles take exp(x - max) from
// math::fast::expCore, two at a time: within 1e-14 of the library's exp
// wherever the result is a normal double, 0 below -708, NaN kept; the
// vector lanes give the scalar path's bits.
TEST(FastMath, ExpMatchesTheLibrary) {
  using D2 = double __attribute__((vector_size(16)));
  using I2 = int64_t __attribute__((vector_size(16)));
  double worst = 0;
  for (double y = -708; y <= 709; y += 0.0137) {
    double got = math::fast::expCore<double, int64_t>(y);
    worst = std::max(worst, std::fabs(got - std::exp(y)) / std::exp(y));
    D2 pair = math::fast::expCore<D2, I2>(D2{y, -y * 0.5});
    EXPECT_EQ(pair[0], got) << y;
    EXPECT_EQ(pair[1], (math::fast::expCore<double, int64_t>(-y * 0.5)));
  }
  EXPECT_LE(worst, 1e-14);
  EXPECT_EQ((math::fast::expCore<double, int64_t>(0.0)), 1.0);
  EXPECT_EQ((math::fast::expCore<double, int64_t>(-800.0)), 0.0);
  EXPECT_EQ((math::fast::expCore<double, int64_t>(-INFINITY)), 0.0);
  EXPECT_TRUE(std::isnan(math::fast::expCore<double, int64_t>(NAN)));
}

// Softmax, cross-entropy and attention of floats take exp(x - max) from
// math::fast::expfCore, eight at a time: within two ulps of the library's
// exp in double over float's normal range (240,000 points from -87.33 to
// 88.7228, the log of float's largest), 0 below, +inf above, NaN kept; the
// vector lanes give the scalar path's bits.
TEST(FastMath, FloatExpMatchesTheLibrary) {
  using F4 = math::Float4;
  using I4 = int32_t __attribute__((vector_size(16)));
  auto exp1 = [](float y) { return math::fast::expfCore<float, int32_t>(y); };
  double worst = 0;
  int64_t i = 0;
  for (double t = -87.33; t < 88.7228; t += 0.000731, ++i) {
    float y = float(t);
    float got = exp1(y);
    double want = std::exp(double(y));
    float w = float(want);
    worst = std::max(worst,
                     std::fabs(got - want) / (std::nextafter(w, INFINITY) - w));
    if (i % 301 == 0) {
      F4 v = math::fast::expfCore<F4, I4>(F4{y, -y, y * 0.5f, 0.0f});
      float lanes[2] = {v[0], v[1]}, neg = exp1(-y);
      EXPECT_EQ(std::memcmp(&lanes[0], &got, 4), 0) << y;
      EXPECT_EQ(std::memcmp(&lanes[1], &neg, 4), 0) << y;
    }
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(exp1(0.0f), 1.0f);
  EXPECT_EQ(exp1(-100.0f), 0.0f);
  EXPECT_EQ(exp1(-INFINITY), 0.0f);
  EXPECT_EQ(exp1(100.0f), INFINITY);
  EXPECT_NEAR(exp1(88.72f) / std::exp(double(88.72f)), 1.0, 1e-6);
  EXPECT_TRUE(std::isnan(exp1(NAN)));
}

TEST(Kernels, TransposeSliceGatherConcat) {
  std::vector<int32_t> x(24);
  for (int i = 0; i < 24; ++i)
    x[i] = i;
  std::vector<int32_t> t(24);
  run(Kernel::Transpose, {ref(x, {2, 3, 4}, DType::I32)},
      ref(t, {4, 2, 3}, DType::I32), {2, 0, 1});
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(t[(a * 2 + b) * 3 + c], x[(b * 3 + c) * 4 + a]);
  // x[:, 2:0:-1, ::2]
  std::vector<int32_t> s(2 * 2 * 2);
  run(Kernel::Slice, {ref(x, {2, 3, 4}, DType::I32)},
      ref(s, {2, 2, 2}, DType::I32), {0, 2, 0, 1, -1, 2});
  EXPECT_EQ(s, (std::vector<int32_t>{8, 10, 4, 6, 20, 22, 16, 18}));
  std::vector<int64_t> idx = {2, -3};
  std::vector<int32_t> g(2 * 2 * 4);
  run(Kernel::Gather,
      {ref(x, {2, 3, 4}, DType::I32), ref(idx, {2}, DType::I64)},
      ref(g, {2, 2, 4}, DType::I32), {1});
  EXPECT_EQ(g[0], 8);  // x[0, 2, 0]
  EXPECT_EQ(g[4], 0);  // x[0, 0, 0]
  EXPECT_EQ(g[8], 20); // x[1, 2, 0]
  std::vector<int32_t> a = {1, 2, 3, 4}, b = {5, 6}, c(6);
  run(Kernel::Concat, {ref(a, {2, 2}, DType::I32), ref(b, {2, 1}, DType::I32)},
      ref(c, {2, 3}, DType::I32), {1});
  EXPECT_EQ(c, (std::vector<int32_t>{1, 2, 5, 3, 4, 6}));
}

TEST(Kernels, CastFollowsOnnxRules) {
  std::vector<float> x = {-1.7f, 2.9f, 0.0f, 65504.0f};
  std::vector<int32_t> i(4);
  run(Kernel::Cast, {ref(x, {4}, DType::F32)}, ref(i, {4}, DType::I32));
  EXPECT_EQ(i, (std::vector<int32_t>{-1, 2, 0, 65504}));
  std::vector<uint8_t> b(4);
  run(Kernel::Cast, {ref(x, {4}, DType::F32)},
      TensorRef{DType::Bool, {4}, b.data()});
  EXPECT_EQ(b, (std::vector<uint8_t>{1, 1, 0, 1}));
  std::vector<uint16_t> h(4);
  run(Kernel::Cast, {ref(x, {4}, DType::F32)},
      TensorRef{DType::F16, {4}, h.data()});
  for (int k = 0; k < 4; ++k)
    EXPECT_NEAR(Half::toFloat(h[k]), x[k], std::fabs(x[k]) * 1e-3);
}

// Mixed precision: the loss reads bf16 logits as they are, in fp32, and
// gives an fp32 loss (of an fp32 seed) and bf16 logit gradients: those of
// the logits widened, within the last bit of float arithmetic and of bf16.
TEST(Kernels, CrossEntropyOfBf16LogitsComputesInFloat) {
  const int64_t n = 6, v = 37;
  std::vector<float> wide = randomFloats(n * v, 21, 3.0f);
  std::vector<uint16_t> low(n * v);
  for (int64_t i = 0; i < n * v; ++i) {
    low[i] = BFloat16::fromFloat(wide[i]);
    wide[i] = BFloat16::toFloat(low[i]); // Exactly the bf16 values.
  }
  std::vector<int64_t> labels = {0, 36, -100, 5, 17, 2};
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0)
      continue;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < v; ++j)
      mx = std::max(mx, double(wide[i * v + j]));
    for (int64_t j = 0; j < v; ++j)
      sum += std::exp(double(wide[i * v + j]) - mx);
    want += mx + std::log(sum) - wide[i * v + labels[i]];
  }
  want /= 5;
  std::vector<float> loss(1), loss32(1);
  run(Kernel::CrossEntropy,
      {TensorRef{DType::BF16, {n, v}, low.data()},
       ref(labels, {n}, DType::I64)},
      ref(loss, {}, DType::F32));
  run(Kernel::CrossEntropy,
      {ref(wide, {n, v}, DType::F32), ref(labels, {n}, DType::I64)},
      ref(loss32, {}, DType::F32));
  EXPECT_NEAR(loss[0], want, 1e-5 * want);
  EXPECT_NEAR(loss[0], loss32[0], 1e-6 * want);
  std::vector<float> seed = {2.0f};
  std::vector<uint16_t> grad(n * v);
  std::vector<float> grad32(n * v);
  run(Kernel::CrossEntropyGrad,
      {TensorRef{DType::BF16, {n, v}, low.data()}, ref(labels, {n}, DType::I64),
       ref(seed, {}, DType::F32)},
      TensorRef{DType::BF16, {n, v}, grad.data()});
  run(Kernel::CrossEntropyGrad,
      {ref(wide, {n, v}, DType::F32), ref(labels, {n}, DType::I64),
       ref(seed, {}, DType::F32)},
      ref(grad32, {n, v}, DType::F32));
  for (int64_t i = 0; i < n * v; ++i) {
    float got = BFloat16::toFloat(grad[i]);
    EXPECT_NEAR(got, grad32[i], std::fabs(grad32[i]) * (1.0f / 128) + 1e-30f)
        << i;
    if (labels[i / v] < 0) {
      EXPECT_EQ(grad[i], 0) << i;
    }
  }
}

TEST(Half, RoundTripsEveryHalfValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float f = Half::toFloat(static_cast<uint16_t>(bits));
    if (std::isnan(f))
      continue;
    EXPECT_EQ(Half::fromFloat(f), bits) << bits;
  }
  // Rounds to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(Half::fromFloat(1.0f + 0.00048828125f), 0x3c00);
  EXPECT_EQ(BFloat16::toFloat(BFloat16::fromFloat(1.5f)), 1.5f);
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  std::vector<std::atomic<int>> hits(100000);
  parallelFor(100000, 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      hits[i]++;
  });
  for (auto &h : hits)
    ASSERT_EQ(h.load(), 1);
}

} // namespace
