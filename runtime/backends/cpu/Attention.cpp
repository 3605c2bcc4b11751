// Attention.cpp - Fused attention on the CPU.
//
// One task per (batch, head) and block of kBlock query rows: the block's
// scores (kBlock x S) are a task-local scratch, multiplied out with BLAS,
// masked, turned into probabilities and multiplied into the output. The
// gradient works per (batch, head) so that the key-side gradients (dk, dv)
// accumulate without sharing: for each query block it recomputes the
// probabilities P, then dP = dO v^T, dS = P * (dP - rowsum(P * dP)),
// dv += P^T dO, dq = scale dS k and dk += scale dS^T q. Under a causal mask
// a block stops at its last row's last visible key, so half the products
// are skipped. Storage types narrower than float compute in float.

#include "runtime/backends/cpu/Attention.h"
#include "runtime/artifact/KernelContract.h"
#include "runtime/backends/cpu/ElementTypes.h"
#include "runtime/backends/cpu/RowMath.h"
#include "runtime/support/ThreadPool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#ifdef STRATA_HAVE_CBLAS
#include <cblas.h>
// OpenBLAS's own (the build links libopenblas whenever it has cblas).
extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);
#endif

namespace strata::cpu {

namespace {

/// Query rows per block.
constexpr int64_t kBlock = 64;

/// c = alpha * op(a) * op(b) + beta * c, row-major, M x N over K.
template <typename C>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, C alpha,
          const C *a, int64_t lda, const C *b, int64_t ldb, C beta, C *c,
          int64_t ldc) {
  if (m == 0 || n == 0)
    return;
#ifdef STRATA_HAVE_CBLAS
  if (k > 0) {
    CBLAS_TRANSPOSE opA = ta ? CblasTrans : CblasNoTrans;
    CBLAS_TRANSPOSE opB = tb ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<C, float>)
      return cblas_sgemm(CblasRowMajor, opA, opB, m, n, k, alpha, a, lda, b,
                         ldb, beta, c, ldc);
    else
      return cblas_dgemm(CblasRowMajor, opA, opB, m, n, k, alpha, a, lda, b,
                         ldb, beta, c, ldc);
  }
#endif
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      C sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += (ta ? a[p * lda + i] : a[i * lda + p]) *
               (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] =
          alpha * sum + (beta == C(0) ? C(0) : beta * c[i * ldc + j]);
    }
}

/// BLAS on one thread for the guard's life: the kernels run their own
/// tasks on every core, and OpenBLAS threading each of several concurrent
/// calls oversubscribes them (measured 20x slower on 2 cores).
class SingleThreadedBlas {
public:
#ifdef STRATA_HAVE_CBLAS
  SingleThreadedBlas() : saved_(openblas_get_num_threads()) {
    openblas_set_num_threads(1);
  }
  ~SingleThreadedBlas() { openblas_set_num_threads(saved_); }

private:
  int saved_;
#endif
};

/// A step's operands and attributes, read once.
struct Problem {
  artifact::AttentionShape shape;
  bool causal = false;
  int64_t maskKind = 0;
  double scale = 1, fill = 0;
  const TensorRef *mask = nullptr;

  /// Keys of query row `i` that can be visible (all but the causal tail).
  int64_t visibleKeys(int64_t i) const {
    if (!causal)
      return shape.s;
    return std::clamp<int64_t>(i + 1 + shape.s - shape.t, 0, shape.s);
  }
};

bool readProblem(const artifact::Step &step, const std::vector<TensorRef> &in,
                 size_t maskAt, Problem &p, std::string &error) {
  p.causal = step.ints.at(0) != 0;
  p.maskKind = step.ints.at(1);
  p.scale = step.floats.at(0);
  p.fill = step.floats.at(1);
  p.mask = in.size() > maskAt ? &in[maskAt] : nullptr;
  return artifact::attentionShape(in[0].shape, in[1].shape, in[2].shape,
                                  p.mask ? &p.mask->shape : nullptr, p.shape,
                                  error);
}

/// `n` values of `p` in the compute type: `p` itself when it already is,
/// else converted into `buffer`.
template <typename T, typename C>
const C *asCompute(const T *p, int64_t n, std::vector<C> &buffer) {
  if constexpr (std::is_same_v<T, C>) {
    return p;
  } else {
    buffer.resize(n);
    for (int64_t i = 0; i < n; ++i)
      buffer[i] = Traits<T>::load(p[i]);
    return buffer.data();
  }
}

/// The scores of query rows [i0, i0 + rows) of head `bh` against keys
/// [0, cols) into `s` (rows x cols), scaled and masked, then turned into
/// probabilities in place; `masked` (when the mask selects) is set where
/// the mask replaced the score, whose gradient is then zero.
template <typename T, typename C>
void probabilities(const Problem &p, int64_t bh, int64_t i0, int64_t rows,
                   int64_t cols, const C *q, const C *k, C *s,
                   std::vector<uint8_t> *masked) {
  const artifact::AttentionShape &a = p.shape;
  gemm<C>(false, true, rows, cols, a.d, C(p.scale), q + i0 * a.d, a.d, k, a.d,
          C(0), s, cols);
  const C neg = -std::numeric_limits<C>::infinity();
  std::vector<C> exps(cols);
  if (masked)
    masked->assign(rows * cols, 0);
  int64_t maskBase = 0;
  if (p.mask)
    maskBase = (bh / a.h) * a.maskStrides[0] + (bh % a.h) * a.maskStrides[1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t i = i0 + r;
    C *row = s + r * cols;
    int64_t visible = p.visibleKeys(i);
    for (int64_t j = visible; j < cols; ++j)
      row[j] = neg;
    if (p.mask) {
      int64_t at = maskBase + i * a.maskStrides[2];
      int64_t js = a.maskStrides[3];
      if (p.maskKind == 1) {
        const T *m = static_cast<const T *>(p.mask->data) + at;
        for (int64_t j = 0; j < visible; ++j)
          row[j] += Traits<T>::load(m[j * js]);
      } else {
        const bool *m = static_cast<const bool *>(p.mask->data) + at;
        bool dropWhen = p.maskKind == 3;
        for (int64_t j = 0; j < visible; ++j)
          if (m[j * js] == dropWhen) {
            row[j] = C(p.fill);
            if (masked)
              (*masked)[r * cols + j] = 1;
          }
      }
    }
    // The softmax as the unfused kernel computes it (RowMath.h).
    C mx = rowMax(row, 1, cols);
    if (mx == -std::numeric_limits<C>::infinity())
      mx = 0; // Nothing visible: 0/0 below, NaN as the unfused softmax.
    double inv = 1.0 / expShiftedSum(row, 1, cols, mx, exps.data());
    for (int64_t j = 0; j < cols; ++j)
      row[j] = C(exps[j] * inv);
  }
}

template <typename T>
void forward(const Problem &p, const std::vector<TensorRef> &in,
             const TensorRef &out) {
  using C = typename Traits<T>::C;
  const artifact::AttentionShape &a = p.shape;
  int64_t heads = a.b * a.h, blocks = (a.t + kBlock - 1) / kBlock;
  parallelFor(heads * blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<C> qb, kb, vb, scores, ob;
    int64_t loaded = -1;
    const C *q = nullptr, *k = nullptr, *v = nullptr;
    for (int64_t task = begin; task < end; ++task) {
      int64_t bh = task / blocks, i0 = (task % blocks) * kBlock;
      int64_t rows = std::min(kBlock, a.t - i0);
      if (bh != loaded) {
        q = asCompute(static_cast<const T *>(in[0].data) + bh * a.t * a.d,
                      a.t * a.d, qb);
        k = asCompute(static_cast<const T *>(in[1].data) + bh * a.s * a.d,
                      a.s * a.d, kb);
        v = asCompute(static_cast<const T *>(in[2].data) + bh * a.s * a.dv,
                      a.s * a.dv, vb);
        loaded = bh;
      }
      // The keys the block's last (most-seeing) row sees.
      int64_t cols = p.visibleKeys(i0 + rows - 1);
      T *o = static_cast<T *>(out.data) + (bh * a.t + i0) * a.dv;
      scores.resize(rows * cols);
      probabilities<T, C>(p, bh, i0, rows, cols, q, k, scores.data(), nullptr);
      C *dst;
      if constexpr (std::is_same_v<T, C>) {
        dst = o;
      } else {
        ob.assign(rows * a.dv, C(0));
        dst = ob.data();
      }
      if (cols == 0) // No visible key in the block: NaN, as softmax gives.
        std::fill(dst, dst + rows * a.dv, std::numeric_limits<C>::quiet_NaN());
      gemm<C>(false, false, rows, a.dv, cols, C(1), scores.data(), cols, v,
              a.dv, C(0), dst, a.dv);
      if constexpr (!std::is_same_v<T, C>)
        for (int64_t i = 0; i < rows * a.dv; ++i)
          o[i] = Traits<T>::store(ob[i]);
    }
  });
}

template <typename T>
void backward(const Problem &p, const std::vector<TensorRef> &in,
              const std::vector<TensorRef> &out) {
  using C = typename Traits<T>::C;
  const artifact::AttentionShape &a = p.shape;
  int64_t heads = a.b * a.h;
  bool selects = p.mask && p.maskKind != 1;
  parallelFor(heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<C> qb, kb, vb, gb, scores, dp, dq, dk, dv;
    std::vector<uint8_t> masked;
    for (int64_t bh = begin; bh < end; ++bh) {
      const C *q = asCompute(
          static_cast<const T *>(in[0].data) + bh * a.t * a.d, a.t * a.d, qb);
      const C *k = asCompute(
          static_cast<const T *>(in[1].data) + bh * a.s * a.d, a.s * a.d, kb);
      const C *v = asCompute(
          static_cast<const T *>(in[2].data) + bh * a.s * a.dv, a.s * a.dv, vb);
      const C *g = asCompute(
          static_cast<const T *>(in[3].data) + bh * a.t * a.dv, a.t * a.dv, gb);
      dq.assign(a.t * a.d, C(0));
      dk.assign(a.s * a.d, C(0));
      dv.assign(a.s * a.dv, C(0));
      for (int64_t i0 = 0; i0 < a.t; i0 += kBlock) {
        int64_t rows = std::min(kBlock, a.t - i0);
        int64_t cols = p.visibleKeys(i0 + rows - 1);
        if (cols == 0)
          continue;
        scores.resize(rows * cols);
        dp.resize(rows * cols);
        probabilities<T, C>(p, bh, i0, rows, cols, q, k, scores.data(),
                            selects ? &masked : nullptr);
        const C *gBlock = g + i0 * a.dv;
        // dP = dO v^T; dS = P * (dP - rowsum(P * dP)), into dp.
        gemm<C>(false, true, rows, cols, a.dv, C(1), gBlock, a.dv, v, a.dv,
                C(0), dp.data(), cols);
        for (int64_t r = 0; r < rows; ++r) {
          const C *pr = scores.data() + r * cols;
          C *dr = dp.data() + r * cols;
          double dot = 0;
          for (int64_t j = 0; j < cols; ++j)
            dot += double(pr[j]) * dr[j];
          for (int64_t j = 0; j < cols; ++j)
            dr[j] = C(pr[j] * (dr[j] - dot));
          if (selects)
            for (int64_t j = 0; j < cols; ++j)
              if (masked[r * cols + j])
                dr[j] = 0;
        }
        gemm<C>(true, false, cols, a.dv, rows, C(1), scores.data(), cols,
                gBlock, a.dv, C(1), dv.data(), a.dv);
        gemm<C>(false, false, rows, a.d, cols, C(p.scale), dp.data(), cols, k,
                a.d, C(0), dq.data() + i0 * a.d, a.d);
        gemm<C>(true, false, cols, a.d, rows, C(p.scale), dp.data(), cols,
                q + i0 * a.d, a.d, C(1), dk.data(), a.d);
      }
      auto store = [](const std::vector<C> &from, const TensorRef &to,
                      int64_t offset) {
        T *dst = static_cast<T *>(to.data) + offset;
        for (size_t i = 0; i < from.size(); ++i)
          dst[i] = Traits<T>::store(from[i]);
      };
      store(dq, out[0], bh * a.t * a.d);
      store(dk, out[1], bh * a.s * a.d);
      store(dv, out[2], bh * a.s * a.dv);
    }
  });
}

} // namespace

namespace {

/// Reads the step (its mask after the `grad ? 4 : 3` tensor operands) and
/// runs the forward kernel or the gradient.
bool run(const artifact::Step &step, const std::vector<TensorRef> &in,
         const std::vector<TensorRef> &out, bool grad, std::string &error) {
  Problem p;
  if (!readProblem(step, in, grad ? 4 : 3, p, error))
    return false;
  [[maybe_unused]] SingleThreadedBlas oneThread; // a no-op without BLAS
  dispatchFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (grad)
      backward<T>(p, in, out);
    else
      forward<T>(p, in, out[0]);
  });
  return true;
}

} // namespace

bool attention(const artifact::Step &step, const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out, std::string &error) {
  return run(step, in, out, false, error);
}

bool attentionGrad(const artifact::Step &step, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, std::string &error) {
  return run(step, in, out, true, error);
}

} // namespace strata::cpu
