// MatMulKernels.cpp - CPU kernels: matrix products.

#include "runtime/artifact/KernelContract.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/backends/cpu/Attention.h"
#include "runtime/backends/cpu/ElementTypes.h"
#include "runtime/backends/cpu/Elementwise.h"
#include "runtime/backends/cpu/KernelFamilies.h"
#include "runtime/backends/cpu/RowMath.h"
#include "runtime/backends/cpu/StreamingUpdates.h"
#include "runtime/kernels/SharedMath.h"
#include "runtime/support/Half.h"
#include "runtime/support/ThreadPool.h"
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

#ifdef STRATA_HAVE_CBLAS
#include <cblas.h>
#endif

namespace strata::cpu::kernels {

/// C[M,N] = op(A) op(B) where op transposes when asked; A is stored [M,K]
/// (or [K,M] when transposed), B [K,N] (or [N,K]).
template <typename T>
void gemmReference(const T *a, const T *b, T *c, int64_t M, int64_t N,
                   int64_t K, bool ta, bool tb) {
  using C = typename Traits<T>::C;
  using Acc = std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;
  std::vector<Acc> row(N);
  for (int64_t i = 0; i < M; ++i) {
    std::fill(row.begin(), row.end(), Acc(0));
    for (int64_t k = 0; k < K; ++k) {
      Acc av =
          static_cast<Acc>(Traits<T>::load(ta ? a[k * M + i] : a[i * K + k]));
      for (int64_t j = 0; j < N; ++j)
        row[j] += av * static_cast<Acc>(
                           Traits<T>::load(tb ? b[j * K + k] : b[k * N + j]));
    }
    for (int64_t j = 0; j < N; ++j)
      c[i * N + j] = Traits<T>::store(static_cast<C>(row[j]));
  }
}

void matmul(const TensorRef &a, const TensorRef &b, const TensorRef &out,
            bool ta, bool tb) {
#ifdef STRATA_HAVE_CBLAS
  if (a.dtype == DType::F16 || a.dtype == DType::BF16) {
    // Half storage: the operands widened to float (once each, whatever the
    // batching), the float product (BLAS, fp32 accumulation), each result
    // rounded once.
    auto widened = [](const TensorRef &t, std::vector<float> &buffer) {
      buffer.resize(t.numElements());
      return TensorRef{DType::F32, t.shape, buffer.data()};
    };
    std::vector<float> fa, fb, fc;
    TensorRef wa = widened(a, fa), wb = widened(b, fb), wc = widened(out, fc);
    cast(a, wa);
    cast(b, wb);
    matmul(wa, wb, wc, ta, tb);
    cast(wc, out);
    return;
  }
#endif
  // The validator checked the shapes (artifact::matmulShape).
  artifact::MatMulShape s;
  std::string ignored;
  artifact::matmulShape(a.shape, b.shape, {ta ? 1 : 0, tb ? 1 : 0}, s, ignored);
  ta = s.ta;
  tb = s.tb;
  int64_t M = s.m, K = s.k, N = s.n;
  // A batch of row blocks times one shared matrix (a linear layer over
  // [batch, tokens, features]) is one product with the batches folded into
  // M: BLAS runs one large call instead of a small one per batch.
  if (!ta && product(s.batchB) == 1 && product(s.batch) == product(s.batchA)) {
    M *= product(s.batch);
    s.batch.clear();
    s.batchA.clear();
    s.batchB.clear();
  }
  const Shape &batch = s.batch;
  size_t batchRank = batch.size();
  Shape sa = broadcastStrides(s.batchA, batch),
        sb = broadcastStrides(s.batchB, batch);
  int64_t batches = product(batch);
  auto batchOffsets = [&](int64_t index, int64_t &oa, int64_t &ob) {
    oa = ob = 0;
    for (size_t d = batchRank; d-- > 0;) {
      int64_t i = index % batch[d];
      index /= batch[d];
      oa += i * sa[d];
      ob += i * sb[d];
    }
  };
  dispatch(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *pa = static_cast<const T *>(a.data);
    const T *pb = static_cast<const T *>(b.data);
    T *pc = static_cast<T *>(out.data);
    if (M * N == 0)
      return;
    auto one = [&](int64_t i) {
      int64_t oa, ob;
      batchOffsets(i, oa, ob);
      const T *ma = pa + oa * M * K, *mb = pb + ob * K * N;
      T *mc = pc + i * M * N;
#ifdef STRATA_HAVE_CBLAS
      CBLAS_TRANSPOSE opA = ta ? CblasTrans : CblasNoTrans;
      CBLAS_TRANSPOSE opB = tb ? CblasTrans : CblasNoTrans;
      int64_t lda = ta ? M : K, ldb = tb ? K : N;
      if constexpr (std::is_same_v<T, float>) {
        if (K == 0) {
          std::fill(mc, mc + M * N, 0.0f);
          return;
        }
        cblas_sgemm(CblasRowMajor, opA, opB, M, N, K, 1.0f, ma, lda, mb, ldb,
                    0.0f, mc, N);
        return;
      } else if constexpr (std::is_same_v<T, double>) {
        if (K == 0) {
          std::fill(mc, mc + M * N, 0.0);
          return;
        }
        cblas_dgemm(CblasRowMajor, opA, opB, M, N, K, 1.0, ma, lda, mb, ldb,
                    0.0, mc, N);
        return;
      }
#endif
      gemmReference(ma, mb, mc, M, N, K, ta, tb);
    };
    // Large products parallelise inside BLAS; many small ones across batches.
    bool blas = false;
#ifdef STRATA_HAVE_CBLAS
    blas = std::is_same_v<T, float> || std::is_same_v<T, double>;
#endif
    if (batches > 1 && (!blas || M * N * K < (int64_t(1) << 18))) {
      parallelFor(batches, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i)
          one(i);
      });
    } else {
      for (int64_t i = 0; i < batches; ++i)
        one(i);
    }
  });
}

void matmulRows(const TensorRef &a, const TensorRef &b, const TensorRef &out,
                bool ta, bool tb, int64_t rows) {
  // The validator checked: matrices, not both transposed.
  int64_t stored = a.shape[0];
  rows = std::clamp<int64_t>(rows, 0, stored);
  size_t size = dtypeSize(a.dtype);
  TensorRef live{a.dtype, {rows, a.shape[1]}, a.data};
  if (!ta) {
    // The result's rows past `rows` are zero; the others a product.
    TensorRef head{out.dtype, {rows, out.shape[1]}, out.data};
    matmul(live, b, head, false, tb);
    std::memset(static_cast<char *>(out.data) + rows * out.shape[1] * size, 0,
                (stored - rows) * out.shape[1] * size);
    return;
  }
  // a^T b over the live rows of both (b is not transposed).
  TensorRef liveB{b.dtype, {rows, b.shape[1]}, b.data};
  matmul(live, liveB, out, true, false);
}

void groupedMatmul(const TensorRef &a, const TensorRef &offsets,
                   const std::vector<TensorRef> &weights, const TensorRef &out,
                   bool tb) {
  int64_t rows = a.shape[0], K = a.shape[1], N = out.shape[1];
  size_t size = dtypeSize(a.dtype);
  std::vector<int64_t> bounds = artifact::groupBounds(
      static_cast<const int64_t *>(offsets.data), weights.size(), rows);
  char *y = static_cast<char *>(out.data);
  const char *x = static_cast<const char *>(a.data);
  // Rows outside every group are zero.
  std::memset(y, 0, bounds.front() * N * size);
  std::memset(y + bounds.back() * N * size, 0,
              (rows - bounds.back()) * N * size);
  for (size_t e = 0; e < weights.size(); ++e) {
    int64_t from = bounds[e], n = bounds[e + 1] - from;
    if (n == 0)
      continue;
    TensorRef seg{a.dtype, {n, K}, const_cast<char *>(x + from * K * size)};
    TensorRef dst{out.dtype, {n, N}, y + from * N * size};
    matmul(seg, weights[e], dst, false, tb);
  }
}

void segmentMatmul(const TensorRef &a, const TensorRef &b,
                   const TensorRef &offsets, int64_t segment,
                   const TensorRef &out) {
  int64_t rows = a.shape[0];
  std::vector<int64_t> bounds = artifact::groupBounds(
      static_cast<const int64_t *>(offsets.data), offsets.shape[0] - 1, rows);
  int64_t from = bounds[segment], n = bounds[segment + 1] - from;
  size_t size = dtypeSize(a.dtype);
  TensorRef sa{a.dtype,
               {n, a.shape[1]},
               static_cast<char *>(a.data) + from * a.shape[1] * size};
  TensorRef sb{b.dtype,
               {n, b.shape[1]},
               static_cast<char *>(b.data) + from * b.shape[1] * size};
  matmul(sa, sb, out, true, false); // K = 0 gives zeros.
}

} // namespace strata::cpu::kernels
