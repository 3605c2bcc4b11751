// Kernels.cpp - CPU kernels for every plan kernel.
//
// Kernels are templates over the storage type; half-precision types compute
// in float. Elementwise kernels walk rows of the output (the innermost
// dimension) so that the inner loop is a plain strided loop the compiler can
// vectorise, and rows are split across threads when the work is large.
// Matrix products use OpenBLAS when it is available.

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Attention.h"
#include "runtime/cpu/Elementwise.h"
#include "runtime/cpu/ElementTypes.h"
#include "runtime/cpu/RowMath.h"
#include "runtime/artifact/KernelContract.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/cpu/SharedMath.h"
#include "runtime/cpu/StreamingUpdates.h"
#include "runtime/cpu/Half.h"
#include "runtime/cpu/ThreadPool.h"

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

namespace strata::cpu {

using artifact::Kernel;
using Shape = std::vector<int64_t>;

namespace {

/// Rows per parallel task, so that each task handles about `target`
/// elements of rows `rowElements` long (at least one row).
int64_t rowsPerTask(int64_t rowElements, int64_t target) {
  return std::max<int64_t>(1, target / std::max<int64_t>(rowElements, 1));
}

int64_t product(const Shape &s, size_t begin = 0, size_t end = SIZE_MAX) {
  auto last = s.begin() + static_cast<std::ptrdiff_t>(std::min(end, s.size()));
  auto first = s.begin() + static_cast<std::ptrdiff_t>(std::min(begin, s.size()));
  int64_t n = 1;
  for (auto it = first; it < last; ++it)
    n *= *it;
  return n;
}

Shape contiguousStrides(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// Strides (in elements) to read `in` broadcast to `out`: right-aligned,
/// zero where `in` has size 1.
Shape broadcastStrides(const Shape &in, const Shape &out) {
  Shape strides(out.size(), 0);
  Shape own = contiguousStrides(in);
  size_t offset = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    strides[offset + d] = in[d] == 1 ? 0 : own[d];
  return strides;
}

/// Walks the output in rows of its innermost dimension. For each row calls
/// `row(outOffset, length, base, innerStride)` where base[k]/innerStride[k]
/// locate input k (given by its strides over the output's dimensions).
template <size_t N, typename RowFn>
void forEachRow(const Shape &out, const std::array<Shape, N> &strides,
                RowFn row) {
  size_t rank = out.size();
  int64_t inner = rank ? out[rank - 1] : 1;
  int64_t total = product(out);
  if (total == 0)
    return;
  int64_t rows = total / inner;
  std::array<int64_t, N> innerStride{};
  for (size_t k = 0; k < N; ++k)
    innerStride[k] = rank ? strides[k][rank - 1] : 0;
  int64_t grain = rowsPerTask(inner, 32768);
  parallelFor(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::array<int64_t, N> base{};
      int64_t rem = r;
      for (size_t d = rank >= 1 ? rank - 1 : 0; d-- > 0;) {
        int64_t idx = rem % out[d];
        rem /= out[d];
        for (size_t k = 0; k < N; ++k)
          base[k] += idx * strides[k][d];
      }
      row(r * inner, inner, base, innerStride);
    }
  });
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

using math::applyBinary;
using math::applyCompare;
using math::applyUnary;
using math::wrap;

/// ro[i] = ra[i * sa] op rb[i * sb] for a float + - * or / (false for
/// other kernels): the operation chosen outside the loop, and a stride-0
/// (broadcast) operand read once, so that the loop vectorises.
template <typename T>
bool floatArithmetic(Kernel k, const T *ra, int64_t sa, const T *rb,
                     int64_t sb, T *ro, int64_t n) {
  using C = typename Traits<T>::C;
  auto loop = [&](auto op) {
    auto at = [](const T *p, int64_t i) { return Traits<T>::load(p[i]); };
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i)
        ro[i] = Traits<T>::store(op(at(ra, i), at(rb, i)));
    } else if (sa == 0 && sb == 1) {
      C x = at(ra, 0);
      for (int64_t i = 0; i < n; ++i)
        ro[i] = Traits<T>::store(op(x, at(rb, i)));
    } else if (sa == 1 && sb == 0) {
      C y = at(rb, 0);
      for (int64_t i = 0; i < n; ++i)
        ro[i] = Traits<T>::store(op(at(ra, i), y));
    } else {
      for (int64_t i = 0; i < n; ++i)
        ro[i] = Traits<T>::store(op(at(ra, i * sa), at(rb, i * sb)));
    }
    return true;
  };
  switch (k) {
  case Kernel::Add: return loop([](C x, C y) { return x + y; });
  case Kernel::Sub: return loop([](C x, C y) { return x - y; });
  case Kernel::Mul: return loop([](C x, C y) { return x * y; });
  case Kernel::Div: return loop([](C x, C y) { return x / y; });
  default: return false;
  }
}

bool binary(Kernel k, const TensorRef &a, const TensorRef &b,
            const TensorRef &out, std::string &error) {
  bool compare = k == Kernel::Equal || k == Kernel::Less ||
                 k == Kernel::Greater;
  std::array<Shape, 2> strides = {broadcastStrides(a.shape, out.shape),
                                  broadcastStrides(b.shape, out.shape)};
  bool divByZero = false;
  dispatch(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    const T *pa = static_cast<const T *>(a.data);
    const T *pb = static_cast<const T *>(b.data);
    forEachRow(out.shape, strides,
               [&](int64_t o, int64_t n, const std::array<int64_t, 2> &base,
                   const std::array<int64_t, 2> &s) {
                 const T *ra = pa + base[0], *rb = pb + base[1];
                 if (compare) {
                   bool *ro = static_cast<bool *>(out.data) + o;
                   for (int64_t i = 0; i < n; ++i)
                     ro[i] = applyCompare<C>(k, Traits<T>::load(ra[i * s[0]]),
                                             Traits<T>::load(rb[i * s[1]]));
                   return;
                 }
                 T *ro = static_cast<T *>(out.data) + o;
                 bool localDivByZero = false;
                 if constexpr (std::is_floating_point_v<C>) {
                   if (floatArithmetic(k, ra, s[0], rb, s[1], ro, n))
                     return;
                 }
                 if (k == Kernel::Add && s[0] == 1 && s[1] == 1) {
                   for (int64_t i = 0; i < n; ++i)
                     ro[i] = Traits<T>::store(wrap<C>(
                         Traits<T>::load(ra[i]), Traits<T>::load(rb[i]), '+'));
                 } else if (k == Kernel::Mul && s[0] == 1 && s[1] == 1) {
                   for (int64_t i = 0; i < n; ++i)
                     ro[i] = Traits<T>::store(wrap<C>(
                         Traits<T>::load(ra[i]), Traits<T>::load(rb[i]), '*'));
                 } else {
                   for (int64_t i = 0; i < n; ++i)
                     ro[i] = Traits<T>::store(applyBinary<C>(
                         k, Traits<T>::load(ra[i * s[0]]),
                         Traits<T>::load(rb[i * s[1]]), localDivByZero));
                 }
                 if (localDivByZero)
                   divByZero = true;
               });
  });
  if (divByZero) {
    error = "integer division by zero";
    return false;
  }
  return true;
}

bool select(const TensorRef &c, const TensorRef &a, const TensorRef &b,
            const TensorRef &out) {
  std::array<Shape, 3> strides = {broadcastStrides(c.shape, out.shape),
                                  broadcastStrides(a.shape, out.shape),
                                  broadcastStrides(b.shape, out.shape)};
  size_t size = dtypeSize(out.dtype);
  const bool *pc = static_cast<const bool *>(c.data);
  const char *pa = static_cast<const char *>(a.data);
  const char *pb = static_cast<const char *>(b.data);
  char *po = static_cast<char *>(out.data);
  // A copy of the element size known at compile time: a load and a store,
  // several times faster than a memcpy call per element.
  auto rows = [&](auto tag) {
    constexpr size_t kSize = sizeof(tag);
    forEachRow(out.shape, strides,
               [&](int64_t o, int64_t n, const std::array<int64_t, 3> &base,
                   const std::array<int64_t, 3> &s) {
                 for (int64_t i = 0; i < n; ++i) {
                   bool pick = pc[base[0] + i * s[0]];
                   const char *src = pick ? pa + (base[1] + i * s[1]) * kSize
                                          : pb + (base[2] + i * s[2]) * kSize;
                   std::memcpy(po + (o + i) * kSize, src, kSize);
                 }
               });
  };
  switch (size) {
  case 1: rows(uint8_t()); break;
  case 2: rows(uint16_t()); break;
  case 4: rows(uint32_t()); break;
  case 8: rows(uint64_t()); break;
  default:
    forEachRow(out.shape, strides,
               [&](int64_t o, int64_t n, const std::array<int64_t, 3> &base,
                   const std::array<int64_t, 3> &s) {
                 for (int64_t i = 0; i < n; ++i) {
                   bool pick = pc[base[0] + i * s[0]];
                   const char *src = pick ? pa + (base[1] + i * s[1]) * size
                                          : pb + (base[2] + i * s[2]) * size;
                   std::memcpy(po + (o + i) * size, src, size);
                 }
               });
  }
  return true;
}

void unary(Kernel k, const TensorRef &in, const TensorRef &out,
           bool tanhGelu) {
  dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    const T *pi = static_cast<const T *>(in.data);
    T *po = static_cast<T *>(out.data);
    if constexpr (std::is_same_v<T, float>) {
      // Eight at a time without the C library (RowLoops.h).
      if (detail::hasVectorForm(k, tanhGelu)) {
        parallelFor(in.numElements(), 16384, [&](int64_t b, int64_t e) {
          detail::rowLoops().transcendental(k, pi + b, nullptr, po + b,
                                            e - b);
        });
        return;
      }
    }
    parallelFor(in.numElements(), 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        po[i] = Traits<T>::store(applyUnary<C>(k, Traits<T>::load(pi[i]),
                                               tanhGelu));
    });
  });
}

/// Converts one value with ONNX Cast's rules: float to integer truncates,
/// anything to bool tests for non-zero.
template <typename To, typename From> To convert(From v) {
  using CFrom = typename Traits<From>::C;
  using CTo = typename Traits<To>::C;
  CFrom x = Traits<From>::load(v);
  if constexpr (std::is_same_v<CTo, bool>) {
    return Traits<To>::store(x != CFrom(0));
  } else if constexpr (std::is_floating_point_v<CFrom> &&
                       std::is_integral_v<CTo>) {
    if (std::isnan(x))
      return Traits<To>::store(CTo(0));
    return Traits<To>::store(static_cast<CTo>(std::trunc(x)));
  } else {
    return Traits<To>::store(static_cast<CTo>(x));
  }
}

void cast(const TensorRef &in, const TensorRef &out) {
  dispatch(in.dtype, [&](auto fromTag) {
    using From = decltype(fromTag);
    dispatch(out.dtype, [&](auto toTag) {
      using To = decltype(toTag);
      const From *pi = static_cast<const From *>(in.data);
      To *po = static_cast<To *>(out.data);
      parallelFor(in.numElements(), 16384, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          po[i] = convert<To, From>(pi[i]);
      });
    });
  });
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

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
      Acc av = static_cast<Acc>(Traits<T>::load(ta ? a[k * M + i] : a[i * K + k]));
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
  artifact::matmulShape(a.shape, b.shape, {ta ? 1 : 0, tb ? 1 : 0}, s,
                        ignored);
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

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

/// The sum of `n` values (squared when `square`) in double over eight
/// lanes, value i in lane i % 8, the lanes combined pairwise at the end:
/// independent additions instead of one chain of dependent ones (which the
/// adder's latency bounds). The bits depend on the values and n alone.
template <typename T>
double laneSum(const T *p, int64_t n, bool square) {
  double lane[8] = {};
  int64_t i = 0;
  if (square)
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l) {
        double v = double(Traits<T>::load(p[i + l]));
        lane[l] += v * v;
      }
  else
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l)
        lane[l] += double(Traits<T>::load(p[i + l]));
  for (int l = 0; i < n; ++i, ++l) {
    double v = double(Traits<T>::load(p[i]));
    lane[l] += square ? v * v : v;
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
         ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

void reduce(Kernel k, const TensorRef &in, const TensorRef &out,
            const std::vector<int64_t> &ints) {
  // ints: the axes, then keepdims.
  std::vector<int64_t> axes(ints.begin(), ints.empty() ? ints.end() : ints.end() - 1);
  const Shape &s = in.shape;
  std::vector<bool> reduced(s.size(), false);
  int64_t count = 1;
  for (int64_t a : axes) {
    reduced[a] = true;
    count *= s[a];
  }
  // Strides of the output over the input's dimensions (0 where reduced).
  Shape keep(s.size());
  for (size_t d = 0; d < s.size(); ++d)
    keep[d] = reduced[d] ? 1 : s[d];
  Shape outStrides = contiguousStrides(keep);
  for (size_t d = 0; d < s.size(); ++d)
    if (reduced[d])
      outStrides[d] = 0;
  int64_t outCount = out.numElements();
  bool trailing = true; // Reduced axes are exactly the trailing ones.
  bool leading = true;  // ... or exactly the leading ones.
  for (size_t d = 0; d < s.size(); ++d) {
    if (reduced[d] != (d >= s.size() - axes.size()))
      trailing = false;
    if (reduced[d] != (d < axes.size()))
      leading = false;
  }

  dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    using Acc = std::conditional_t<std::is_floating_point_v<C>, double,
                                   std::conditional_t<std::is_signed_v<C>,
                                                      int64_t, uint64_t>>;
    const T *pi = static_cast<const T *>(in.data);
    T *po = static_cast<T *>(out.data);
    bool isMax = k == Kernel::ReduceMax;
    bool square = k == Kernel::ReduceSumSquare; // Floats only.
    auto combine = [&](Acc acc, Acc v) -> Acc {
      if (!isMax)
        return acc + v;
      if constexpr (std::is_floating_point_v<Acc>)
        if (std::isnan(v) || std::isnan(acc))
          return std::numeric_limits<Acc>::quiet_NaN();
      return v > acc ? v : acc;
    };
    Acc init = isMax ? (std::is_floating_point_v<Acc>
                            ? -std::numeric_limits<Acc>::infinity()
                            : std::numeric_limits<Acc>::lowest())
                     : Acc(0);
    // Element i as the accumulator type, squared for a sum of squares.
    auto value = [&](const T *p, int64_t i) -> Acc {
      Acc v = static_cast<Acc>(Traits<T>::load(p[i]));
      return square ? v * v : v;
    };
    // Sums of floats over a contiguous range run in lanes (laneSum).
    auto rangeAcc = [&](const T *p, int64_t n) -> Acc {
      if constexpr (std::is_floating_point_v<Acc>)
        if (!isMax)
          return laneSum(p, n, square);
      Acc acc = init;
      for (int64_t i = 0; i < n; ++i)
        acc = combine(acc, value(p, i));
      return acc;
    };
    auto finish = [&](Acc acc) -> T {
      if (k == Kernel::ReduceMean && count > 0)
        acc = acc / static_cast<Acc>(count);
      return Traits<T>::store(static_cast<C>(acc));
    };
    // Few long rows (a sum of squares over a whole gradient): fixed-size
    // chunks of each row on every thread, partials combined in chunk order
    // (the same bits whatever the thread count).
    constexpr int64_t kChunk = 65536;
    if (trailing && count >= 2 * kChunk) {
      int64_t chunks = (count + kChunk - 1) / kChunk;
      std::vector<Acc> partial(outCount * chunks, init);
      parallelFor(outCount * chunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          int64_t o = t / chunks, c0 = (t % chunks) * kChunk;
          partial[t] = rangeAcc(pi + o * count + c0,
                                std::min(kChunk, count - c0));
        }
      });
      for (int64_t o = 0; o < outCount; ++o) {
        Acc acc = init;
        for (int64_t c = 0; c < chunks; ++c)
          acc = combine(acc, partial[o * chunks + c]);
        po[o] = finish(acc);
      }
      return;
    }
    if (trailing) {
      parallelFor(outCount, rowsPerTask(count, 16384),
                  [&](int64_t b, int64_t e) {
                    for (int64_t o = b; o < e; ++o)
                      po[o] = finish(rangeAcc(pi + o * count, count));
                  });
      return;
    }
    if (leading && !isMax && outCount > 0) {
      // Column sums (a bias gradient): tasks take blocks of columns and
      // walk every row over them, each column summed in row order as the
      // general path below does.
      int64_t rows = count;
      constexpr int64_t kColumns = 256;
      int64_t blocks = (outCount + kColumns - 1) / kColumns;
      parallelFor(blocks, 1, [&](int64_t b, int64_t e) {
        std::vector<Acc> acc(kColumns);
        for (int64_t blk = b; blk < e; ++blk) {
          int64_t c0 = blk * kColumns,
                  n = std::min(kColumns, outCount - c0);
          std::fill(acc.begin(), acc.begin() + n, init);
          for (int64_t r = 0; r < rows; ++r) {
            const T *row = pi + r * outCount + c0;
            for (int64_t i = 0; i < n; ++i)
              acc[i] += value(row, i);
          }
          for (int64_t i = 0; i < n; ++i)
            po[c0 + i] = finish(acc[i]);
        }
      });
      return;
    }
    std::vector<Acc> acc(outCount, init);
    // Walk the input in rows; scatter into the accumulators.
    int64_t inner = s.empty() ? 1 : s.back();
    int64_t rows = inner ? in.numElements() / inner : 0;
    int64_t innerStride = s.empty() ? 0 : outStrides.back();
    for (int64_t r = 0; r < rows; ++r) {
      int64_t rem = r, base = 0;
      for (size_t d = s.size() >= 1 ? s.size() - 1 : 0; d-- > 0;) {
        base += (rem % s[d]) * outStrides[d];
        rem /= s[d];
      }
      const T *row = pi + r * inner;
      for (int64_t i = 0; i < inner; ++i) {
        Acc &a = acc[base + i * innerStride];
        a = combine(a, value(row, i));
      }
    }
    for (int64_t o = 0; o < outCount; ++o)
      po[o] = finish(acc[o]);
  });
}

void softmax(Kernel k, const TensorRef &in, const TensorRef &out,
             int64_t axis) {
  const Shape &s = in.shape;
  int64_t outer = product(s, 0, axis), dim = s[axis],
          inner = product(s, axis + 1);
  bool logSoftmax = k == Kernel::LogSoftmax;
  dispatchFloat(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    const T *pi = static_cast<const T *>(in.data);
    T *po = static_cast<T *>(out.data);
    parallelFor(outer * inner, rowsPerTask(dim, 8192),
                [&](int64_t b, int64_t e) {
      std::vector<C> exps(dim);
      for (int64_t r = b; r < e; ++r) {
        int64_t o = r / inner, i = r % inner;
        const T *x = pi + o * dim * inner + i;
        T *y = po + o * dim * inner + i;
        C mx = rowMax(x, inner, dim);
        if (std::isinf(mx) && mx < 0)
          mx = 0; // All -inf: keep exp() finite (result is NaN/-inf).
        double sum = expShiftedSum(x, inner, dim, mx, exps.data());
        if (logSoftmax) {
          C logSum = static_cast<C>(std::log(sum));
          for (int64_t j = 0; j < dim; ++j)
            y[j * inner] =
                Traits<T>::store((Traits<T>::load(x[j * inner]) - mx) - logSum);
        } else {
          double invSum = 1.0 / sum;
          for (int64_t j = 0; j < dim; ++j)
            y[j * inner] = Traits<T>::store(static_cast<C>(exps[j] * invSum));
        }
      }
    });
  });
}

/// Values of `t` broadcast to `shape` (right-aligned), as doubles.
std::vector<double> expandTo(const TensorRef &t, const Shape &shape) {
  std::vector<double> values(product(shape));
  Shape strides = broadcastStrides(t.shape, shape);
  dispatch(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = static_cast<const T *>(t.data);
    for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) {
      int64_t rem = i, src = 0;
      for (size_t d = shape.size(); d-- > 0;) {
        src += (rem % shape[d]) * strides[d];
        rem /= shape[d];
      }
      values[i] = static_cast<double>(Traits<T>::load(p[src]));
    }
  });
  return values;
}

void layerNorm(const std::vector<TensorRef> &inputs, const TensorRef &out,
               int64_t axis, bool hasBias, double epsilon, bool rms) {
  const TensorRef &x = inputs[0];
  Shape normalized(x.shape.begin() + axis, x.shape.end());
  int64_t outer = product(x.shape, 0, axis), inner = product(normalized);
  std::vector<double> scale = expandTo(inputs[1], normalized);
  std::vector<double> bias = hasBias ? expandTo(inputs[2], normalized)
                                     : std::vector<double>(inner, 0.0);
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    const T *px = static_cast<const T *>(x.data);
    T *py = static_cast<T *>(out.data);
    parallelFor(outer, rowsPerTask(inner, 8192),
                [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T *row = px + r * inner;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner && !rms; ++i)
          mean += static_cast<double>(Traits<T>::load(row[i]));
        mean /= static_cast<double>(inner);
        for (int64_t i = 0; i < inner; ++i) {
          double d = static_cast<double>(Traits<T>::load(row[i])) - mean;
          var += d * d;
        }
        var /= static_cast<double>(inner);
        double inv = 1.0 / std::sqrt(var + epsilon);
        T *y = py + r * inner;
        for (int64_t i = 0; i < inner; ++i) {
          double v = (static_cast<double>(Traits<T>::load(row[i])) - mean) *
                     inv;
          y[i] = Traits<T>::store(static_cast<C>(v * scale[i] + bias[i]));
        }
      }
    });
  });
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// out[i] = src[base + sum(index[d] * strides[d])] for every output index;
/// strides are in elements and may be zero or negative.
void stridedCopy(size_t elemSize, const Shape &outShape, const char *src,
                 int64_t base, const Shape &strides, char *dst) {
  std::array<Shape, 1> s = {strides};
  forEachRow(outShape, s,
             [&](int64_t o, int64_t n, const std::array<int64_t, 1> &b,
                 const std::array<int64_t, 1> &st) {
               const char *from = src + (base + b[0]) * int64_t(elemSize);
               char *to = dst + o * int64_t(elemSize);
               if (st[0] == 1) {
                 std::memcpy(to, from, n * elemSize);
                 return;
               }
               int64_t step = st[0] * int64_t(elemSize);
               switch (elemSize) {
               case 4:
                 for (int64_t i = 0; i < n; ++i)
                   std::memcpy(to + i * 4, from + i * step, 4);
                 break;
               case 8:
                 for (int64_t i = 0; i < n; ++i)
                   std::memcpy(to + i * 8, from + i * step, 8);
                 break;
               default:
                 for (int64_t i = 0; i < n; ++i)
                   std::memcpy(to + i * elemSize, from + i * step, elemSize);
               }
             });
}

void transpose(const TensorRef &in, const TensorRef &out,
               const std::vector<int64_t> &perm) {
  Shape inStrides = contiguousStrides(in.shape);
  Shape strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d)
    strides[d] = inStrides[perm[d]];
  stridedCopy(dtypeSize(in.dtype), out.shape,
              static_cast<const char *>(in.data), 0, strides,
              static_cast<char *>(out.data));
}

void slice(const TensorRef &in, const TensorRef &out,
           const std::vector<int64_t> &ints) {
  size_t rank = in.shape.size();
  Shape inStrides = contiguousStrides(in.shape);
  Shape strides(rank);
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) {
    base += ints[d] * inStrides[d];
    strides[d] = ints[rank + d] * inStrides[d];
  }
  stridedCopy(dtypeSize(in.dtype), out.shape,
              static_cast<const char *>(in.data), base, strides,
              static_cast<char *>(out.data));
}

void broadcast(const TensorRef &in, const TensorRef &out) {
  stridedCopy(dtypeSize(in.dtype), out.shape,
              static_cast<const char *>(in.data), 0,
              broadcastStrides(in.shape, out.shape),
              static_cast<char *>(out.data));
}

void concat(const std::vector<TensorRef> &inputs, const TensorRef &out,
            int64_t axis) {
  size_t size = dtypeSize(out.dtype);
  int64_t outer = product(out.shape, 0, axis);
  int64_t inner = product(out.shape, axis + 1);
  int64_t outRow = out.shape[axis] * inner * size;
  int64_t offset = 0;
  for (const TensorRef &t : inputs) {
    int64_t chunk = t.shape[axis] * inner * size;
    const char *src = static_cast<const char *>(t.data);
    char *dst = static_cast<char *>(out.data) + offset;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * outRow, src + o * chunk, chunk);
    offset += chunk;
  }
}

bool gather(const TensorRef &data, const TensorRef &indices,
            const TensorRef &out, int64_t axis, std::string &error) {
  size_t size = dtypeSize(data.dtype);
  int64_t outer = product(data.shape, 0, axis), dim = data.shape[axis];
  int64_t inner = product(data.shape, axis + 1) * size;
  int64_t n = indices.numElements();
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = indices.dtype == DType::I32
                    ? static_cast<const int32_t *>(indices.data)[i]
                    : static_cast<const int64_t *>(indices.data)[i];
    if (v < -dim || v >= dim) {
      error = "gather index " + std::to_string(v) + " out of range [" +
              std::to_string(-dim) + ", " + std::to_string(dim) + ")";
      return false;
    }
    idx[i] = v < 0 ? v + dim : v;
  }
  const char *src = static_cast<const char *>(data.data);
  char *dst = static_cast<char *>(out.data);
  parallelFor(outer * n, rowsPerTask(inner, 65536),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  int64_t o = r / n, i = r % n;
                  std::memcpy(dst + r * inner, src + (o * dim + idx[i]) * inner,
                              inner);
                }
              });
  return true;
}

void trilu(const TensorRef &in, const TensorRef &out, bool upper, int64_t k) {
  size_t size = dtypeSize(in.dtype);
  const Shape &s = in.shape;
  if (s.size() < 2) // The verifier guarantees matrices.
    return;
  int64_t rows = s[s.size() - 2], cols = s.back();
  int64_t matrices = product(s, 0, s.size() - 2);
  const char *src = static_cast<const char *>(in.data);
  char *dst = static_cast<char *>(out.data);
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        int64_t off = ((m * rows + i) * cols + j) * size;
        bool keep = upper ? j >= i + k : j <= i + k;
        if (keep)
          std::memcpy(dst + off, src + off, size);
        else
          std::memset(dst + off, 0, size);
      }
}


//===----------------------------------------------------------------------===//
// Losses and gradient kernels
//===----------------------------------------------------------------------===//

/// Reads label i as int64.
int64_t labelAt(const TensorRef &labels, int64_t i) {
  return labels.dtype == DType::I32
             ? static_cast<const int32_t *>(labels.data)[i]
             : static_cast<const int64_t *>(labels.data)[i];
}

/// Rows whose label is negative (PyTorch's ignore_index -100, or any other
/// negative value) are left out of the mean.
bool checkLabels(const TensorRef &labels, int64_t classes, int64_t &count,
                 std::string &error) {
  count = 0;
  for (int64_t i = 0; i < labels.numElements(); ++i) {
    int64_t l = labelAt(labels, i);
    if (l >= classes) {
      error = "label " + std::to_string(l) + " at row " + std::to_string(i) +
              " is out of range for " + std::to_string(classes) + " classes";
      return false;
    }
    count += l >= 0;
  }
  return true;
}

template <typename T> struct FloatOnly {
  static constexpr bool value = kIsFloat<T>;
};

/// The maximum of a row of logits and the sum of exp(x - max) over it (the
/// pieces of a stable log-sum-exp and softmax), the exps left in `exps`.
template <typename T, typename C = typename Traits<T>::C>
std::pair<C, double> rowMaxAndExpSum(const T *row, int64_t n,
                                     std::vector<C> &exps) {
  C mx = rowMax(row, 1, n);
  if (std::isinf(mx) && mx < 0)
    mx = 0; // All -inf: the exps are 0 (a NaN loss), not exp(NaN).
  exps.resize(n);
  return {mx, expShiftedSum(row, 1, n, mx, exps.data())};
}

bool crossEntropy(const TensorRef &logits, const TensorRef &labels,
                  const TensorRef &out, std::string &error) {
  int64_t n = logits.shape[0], v = logits.shape[1], count;
  if (!checkLabels(labels, v, count, error))
    return false;
  dispatchFloat(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    const T *x = static_cast<const T *>(logits.data);
    std::vector<double> rowLoss(n, 0.0);
    parallelFor(n, rowsPerTask(v, 4096),
                [&](int64_t b, int64_t e) {
                  std::vector<C> exps;
                  for (int64_t i = b; i < e; ++i) {
                    int64_t l = labelAt(labels, i);
                    if (l < 0)
                      continue;
                    const T *row = x + i * v;
                    auto [mx, sum] = rowMaxAndExpSum(row, v, exps);
                    rowLoss[i] = double(mx) + std::log(sum) -
                                 double(Traits<T>::load(row[l]));
                  }
                });
    double total = 0;
    for (double r : rowLoss)
      total += r;
    double mean = count ? total / count : std::nan("");
    // The loss in its own type: fp32 for 16-bit logits (mixed precision).
    storeFromDouble(out.dtype, static_cast<C>(mean),
                    static_cast<char *>(out.data));
  });
  return true;
}

bool crossEntropyGrad(const TensorRef &logits, const TensorRef &labels,
                      const TensorRef &grad, const TensorRef &out,
                      std::string &error) {
  int64_t n = logits.shape[0], v = logits.shape[1], count;
  if (!checkLabels(labels, v, count, error))
    return false;
  dispatchFloat(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    const T *x = static_cast<const T *>(logits.data);
    T *dx = static_cast<T *>(out.data);
    double g = loadAsDouble(grad.dtype, static_cast<const char *>(grad.data));
    double scale = count ? g / count : 0.0;
    parallelFor(n, rowsPerTask(v, 4096),
                [&](int64_t b, int64_t e) {
                  std::vector<C> exps;
                  for (int64_t i = b; i < e; ++i) {
                    int64_t l = labelAt(labels, i);
                    const T *row = x + i * v;
                    T *drow = dx + i * v;
                    if (l < 0) {
                      for (int64_t j = 0; j < v; ++j)
                        drow[j] = Traits<T>::store(C(0));
                      continue;
                    }
                    double sum = rowMaxAndExpSum(row, v, exps).second;
                    // p * scale, with the label's 1 subtracted after.
                    double k = scale / sum;
                    for (int64_t j = 0; j < v; ++j)
                      drow[j] = Traits<T>::store(static_cast<C>(exps[j] * k));
                    drow[l] = Traits<T>::store(
                        static_cast<C>((exps[l] / sum - 1.0) * scale));
                  }
                });
  });
  return true;
}

void geluGrad(const TensorRef &x, const TensorRef &g, const TensorRef &out,
              bool tanhForm) {
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    const T *px = static_cast<const T *>(x.data);
    const T *pg = static_cast<const T *>(g.data);
    T *po = static_cast<T *>(out.data);
    parallelFor(x.numElements(), 8192, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, float>)
        if (tanhForm)
          return detail::rowLoops().transcendental(Kernel::GeluGrad, px + b,
                                                   pg + b, po + b, e - b);
      for (int64_t i = b; i < e; ++i) {
        C d = math::geluDerivative<C>(Traits<T>::load(px[i]), tanhForm);
        po[i] = Traits<T>::store(d * Traits<T>::load(pg[i]));
      }
    });
  });
}

void layerNormGrad(const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, int64_t axis,
                   double epsilon, bool rms) {
  const TensorRef &x = in[0], &dy = in[2];
  Shape normalized(x.shape.begin() + axis, x.shape.end());
  int64_t rows = product(x.shape, 0, axis), inner = product(normalized);
  std::vector<double> scale = expandTo(in[1], normalized);
  std::vector<double> dscale(inner, 0.0), dbias(inner, 0.0);
  std::mutex merge;
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    const T *px = static_cast<const T *>(x.data);
    const T *pdy = static_cast<const T *>(dy.data);
    T *pdx = static_cast<T *>(out[0].data);
    parallelFor(rows, rowsPerTask(inner, 4096),
                [&](int64_t b, int64_t e) {
      std::vector<double> ds(inner, 0.0), db(inner, 0.0), xhat(inner),
          dxhat(inner);
      for (int64_t r = b; r < e; ++r) {
        const T *xr = px + r * inner;
        const T *dyr = pdy + r * inner;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner && !rms; ++i)
          mean += double(Traits<T>::load(xr[i]));
        mean /= inner;
        for (int64_t i = 0; i < inner; ++i) {
          double d = double(Traits<T>::load(xr[i])) - mean;
          var += d * d;
        }
        var /= inner;
        double inv = 1.0 / std::sqrt(var + epsilon);
        double meanDxhat = 0, meanDxhatXhat = 0;
        for (int64_t i = 0; i < inner; ++i) {
          double g = double(Traits<T>::load(dyr[i]));
          xhat[i] = (double(Traits<T>::load(xr[i])) - mean) * inv;
          dxhat[i] = g * scale[i];
          meanDxhat += dxhat[i];
          meanDxhatXhat += dxhat[i] * xhat[i];
          ds[i] += g * xhat[i];
          db[i] += g;
        }
        // Without the mean subtracted, its gradient term is gone.
        meanDxhat = rms ? 0.0 : meanDxhat / inner;
        meanDxhatXhat /= inner;
        T *dxr = pdx + r * inner;
        for (int64_t i = 0; i < inner; ++i)
          dxr[i] = Traits<T>::store(static_cast<C>(
              inv * (dxhat[i] - meanDxhat - xhat[i] * meanDxhatXhat)));
      }
      std::lock_guard<std::mutex> lock(merge);
      for (int64_t i = 0; i < inner; ++i) {
        dscale[i] += ds[i];
        dbias[i] += db[i];
      }
    });
    T *pds = static_cast<T *>(out[1].data);
    T *pdb = static_cast<T *>(out[2].data);
    for (int64_t i = 0; i < inner; ++i) {
      pds[i] = Traits<T>::store(static_cast<C>(dscale[i]));
      pdb[i] = Traits<T>::store(static_cast<C>(dbias[i]));
    }
  });
}

bool gatherGrad(const TensorRef &g, const TensorRef &indices,
                const TensorRef &out, int64_t axis, std::string &error) {
  int64_t outer = product(out.shape, 0, axis), dim = out.shape[axis];
  int64_t inner = product(out.shape, axis + 1);
  int64_t n = indices.numElements();
  std::memset(out.data, 0, out.numElements() * dtypeSize(out.dtype));
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = labelAt(indices, i);
    if (v < -dim || v >= dim) {
      error = "gather index " + std::to_string(v) + " out of range";
      return false;
    }
    idx[i] = v < 0 ? v + dim : v;
  }
  dispatchFloat(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *pg = static_cast<const T *>(g.data);
    T *po = static_cast<T *>(out.data);
    // Parallel over the inner dimension: repeated indices never race.
    parallelFor(inner, 256, [&](int64_t b, int64_t e) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < n; ++i) {
          const T *src = pg + (o * n + i) * inner;
          T *dst = po + (o * dim + idx[i]) * inner;
          for (int64_t k = b; k < e; ++k)
            dst[k] = Traits<T>::store(Traits<T>::load(dst[k]) +
                                      Traits<T>::load(src[k]));
        }
    });
  });
  return true;
}

void sliceGrad(const TensorRef &g, const TensorRef &out,
               const std::vector<int64_t> &ints) {
  size_t size = dtypeSize(out.dtype);
  std::memset(out.data, 0, out.numElements() * size);
  size_t rank = out.shape.size();
  Shape outStrides = contiguousStrides(out.shape);
  Shape strides(rank);
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) {
    base += ints[d] * outStrides[d];
    strides[d] = ints[rank + d] * outStrides[d];
  }
  std::array<Shape, 1> s = {strides};
  const char *src = static_cast<const char *>(g.data);
  char *dst = static_cast<char *>(out.data);
  forEachRow(g.shape, s,
             [&](int64_t o, int64_t n, const std::array<int64_t, 1> &b,
                 const std::array<int64_t, 1> &st) {
               for (int64_t i = 0; i < n; ++i)
                 std::memcpy(dst + (base + b[0] + i * st[0]) * int64_t(size),
                             src + (o + i) * int64_t(size), size);
             });
}

//===----------------------------------------------------------------------===//
// Optimizer updates (in place), with PyTorch's arithmetic order
//===----------------------------------------------------------------------===//

void accumulate(const TensorRef &acc, const TensorRef &g) {
  dispatchFloat(acc.dtype, [&](auto tag) {
    using T = decltype(tag);
    T *pa = static_cast<T *>(acc.data);
    const T *pg = static_cast<const T *>(g.data);
    parallelFor(acc.numElements(), 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        pa[i] = Traits<T>::store(Traits<T>::load(pa[i]) +
                                 Traits<T>::load(pg[i]));
    });
  });
}

/// AdaLomo with Adafactor's factored second moment (see TrainOps.td).
void updateAdaLomo(const std::vector<TensorRef> &in,
                   const std::vector<double> &hp, const KernelContext &ctx) {
  if (!ctx.applyUpdates)
    return;
  const TensorRef &w = in[0], &g = in[1];
  int64_t n = w.numElements();
  int64_t cols = w.shape.empty() ? 1 : w.shape.back();
  int64_t rows = n / std::max<int64_t>(cols, 1);
  bool factored = in.size() == 4;
  double lr = hp[0] * ctx.lrFactor, wd = hp[1];
  double beta2 = 1.0 - std::pow(static_cast<double>(ctx.step), -0.8);
  const double eps1 = 1e-30, eps2 = 1e-3, clip = 1.0;
  dispatchFloat(w.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    T *pw = static_cast<T *>(w.data);
    const T *pg = static_cast<const T *>(g.data);
    // The normalised update u is computed twice (for its RMS, then to
    // apply it) instead of being stored: no memory outside the plan.
    std::vector<double> rowFactor, colFactor;
    if (factored) {
      T *row = static_cast<T *>(in[2].data);
      T *col = static_cast<T *>(in[3].data);
      std::vector<double> colMean(cols, 0.0);
      double rowMeanSum = 0;
      for (int64_t i = 0; i < rows; ++i) {
        double s = 0;
        for (int64_t j = 0; j < cols; ++j) {
          double gij = Traits<T>::load(pg[i * cols + j]);
          double g2 = gij * gij + eps1;
          s += g2;
          colMean[j] += g2;
        }
        double r = beta2 * Traits<T>::load(row[i]) +
                   (1 - beta2) * (s / cols);
        row[i] = Traits<T>::store(static_cast<C>(r));
        rowMeanSum += double(Traits<T>::load(row[i]));
      }
      for (int64_t j = 0; j < cols; ++j) {
        double c = beta2 * Traits<T>::load(col[j]) +
                   (1 - beta2) * (colMean[j] / rows);
        col[j] = Traits<T>::store(static_cast<C>(c));
      }
      double rowMean = rowMeanSum / rows;
      rowFactor.resize(rows);
      colFactor.resize(cols);
      for (int64_t i = 0; i < rows; ++i)
        rowFactor[i] = 1.0 / std::sqrt(Traits<T>::load(row[i]) / rowMean);
      for (int64_t j = 0; j < cols; ++j)
        colFactor[j] = 1.0 / std::sqrt(double(Traits<T>::load(col[j])));
    } else {
      T *v = static_cast<T *>(in[2].data);
      for (int64_t i = 0; i < n; ++i) {
        double gi = Traits<T>::load(pg[i]);
        double vi = beta2 * Traits<T>::load(v[i]) +
                    (1 - beta2) * (gi * gi + eps1);
        v[i] = Traits<T>::store(static_cast<C>(vi));
      }
    }
    const T *pv = factored ? nullptr : static_cast<const T *>(in[2].data);
    auto u = [&](int64_t i) {
      double gi = Traits<T>::load(pg[i]);
      if (factored)
        return gi * rowFactor[i / cols] * colFactor[i % cols];
      return gi / std::sqrt(double(Traits<T>::load(pv[i])));
    };
// Grouped update normalisation: per parameter tensor.
    double su = 0, sw = 0;
    for (int64_t i = 0; i < n; ++i) {
      double ui = u(i);
      su += ui * ui;
      double wi = Traits<T>::load(pw[i]);
      sw += wi * wi;
    }
    double rmsU = std::sqrt(su / n), rmsW = std::sqrt(sw / n);
    double step = lr * std::max(eps2, rmsW) / std::max(1.0, rmsU / clip);
    double decay = 1.0 - lr * wd;
    for (int64_t i = 0; i < n; ++i) {
      double wi = double(Traits<T>::load(pw[i])) * decay;
      pw[i] = Traits<T>::store(static_cast<C>(wi - step * u(i)));
    }
  });
}

void update(const artifact::Step &step, const std::vector<TensorRef> &in,
            int64_t micro, const KernelContext &ctx) {
  if (!ctx.applyUpdates)
    return;
  Kernel k = step.kernel;
  const std::vector<double> &hp = step.floats;
  artifact::UpdateOperands at =
      artifact::updateOperands(k, in.size(), step.ints);
  const TensorRef *scaleRef = at.scale >= 0 ? &in[at.scale] : nullptr;
  // The low-precision copy the model reads (validated: of f32 weights).
  LowCopy low;
  if (at.low >= 0) {
    low.data = static_cast<uint16_t *>(in[at.low].data);
    low.brain = in[at.low].dtype == DType::BF16;
  }
  dispatchFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    C scale = scaleRef ? Traits<T>::load(*static_cast<const T *>(scaleRef->data))
                       : C(1);
    math::UpdateCoefficients<C> c;
    if (!math::updateCoefficients<C>(k, hp.data(), scale, micro, ctx.step,
                                     ctx.lrFactor, c))
      return; // An overflowed step under loss scaling, skipped whole.
    T *w = static_cast<T *>(in[0].data);
    const T *g = static_cast<const T *>(in[1].data);
    int64_t n = in[0].numElements();
    if constexpr (std::is_same_v<T, float>) {
      // fp32: the vectorised single pass, same bits as the loops below.
      if (k == Kernel::UpdateSgd)
        sgdF32(w, g, n, c, low);
      else if (k == Kernel::UpdateMomentum)
        momentumF32(w, g, static_cast<float *>(in[2].data), n, c, low);
      else
        adamwF32(w, g, static_cast<float *>(in[2].data),
                 static_cast<float *>(in[3].data), n, c, low);
      return;
    }
    if (k == Kernel::UpdateSgd) {
      parallelFor(n, 16384, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          w[i] = Traits<T>::store(math::sgdElement<C>(
              Traits<T>::load(w[i]), Traits<T>::load(g[i]), c));
      });
    } else if (k == Kernel::UpdateMomentum) {
      T *buf = static_cast<T *>(in[2].data);
      parallelFor(n, 16384, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          C wi = Traits<T>::load(w[i]), bi = Traits<T>::load(buf[i]);
          math::momentumElement<C>(wi, Traits<T>::load(g[i]), bi, c);
          buf[i] = Traits<T>::store(bi);
          w[i] = Traits<T>::store(wi);
        }
      });
    } else {
      T *m = static_cast<T *>(in[2].data);
      T *v = static_cast<T *>(in[3].data);
      parallelFor(n, 16384, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          C wi = Traits<T>::load(w[i]), mi = Traits<T>::load(m[i]),
            vi = Traits<T>::load(v[i]);
          math::adamwElement<C>(wi, Traits<T>::load(g[i]), mi, vi, c);
          m[i] = Traits<T>::store(mi);
          v[i] = Traits<T>::store(vi);
          w[i] = Traits<T>::store(wi);
        }
      });
    }
  });
}

} // namespace

bool runKernel(const artifact::Step &step, const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out, const KernelContext &ctx,
               std::string &error) {
  switch (step.kernel) {
  case Kernel::CrossEntropy:
    return crossEntropy(in[0], in[1], out[0], error);
  case Kernel::CrossEntropyGrad:
    return crossEntropyGrad(in[0], in[1], in[2], out[0], error);
  case Kernel::GeluGrad:
    geluGrad(in[0], in[1], out[0], !step.ints.empty() && step.ints[0] != 0);
    return true;
  case Kernel::Attention:
    return attention(step, in, out, error);
  case Kernel::AttentionGrad:
    return attentionGrad(step, in, out, error);
  case Kernel::Elementwise:
    return elementwise(step, in, out, error);
  case Kernel::LayerNormGrad:
    layerNormGrad(in, out, step.ints.at(0), step.floats.at(0),
                  step.ints.size() > 1 && step.ints[1] != 0);
    return true;
  case Kernel::GatherGrad:
    return gatherGrad(in[0], in[1], out[0], step.ints.at(0), error);
  case Kernel::SliceGrad:
    sliceGrad(in[0], out[0], step.ints);
    return true;
  case Kernel::UpdateSgd:
  case Kernel::UpdateMomentum:
  case Kernel::UpdateAdamW: {
    int64_t micro = step.ints.empty() ? 1 : step.ints[0];
    update(step, in, micro, ctx);
    // The accumulator (the gradient input) starts the next step at zero.
    if (micro > 1 && ctx.applyUpdates)
      std::memset(in[1].data, 0, in[1].numElements() * dtypeSize(in[1].dtype));
    return true;
  }
  case Kernel::Accumulate:
    accumulate(in[0], in[1]);
    return true;
  case Kernel::UpdateAdaLomo:
    updateAdaLomo(in, step.floats, ctx);
    return true;
  case Kernel::Assign:
    if (ctx.applyUpdates)
      std::memcpy(in[0].data, in[1].data,
                  in[0].numElements() * dtypeSize(in[0].dtype));
    return true;
  case Kernel::Store: // Swapping an activation out: every micro-batch.
    std::memcpy(in[0].data, in[1].data,
                in[0].numElements() * dtypeSize(in[0].dtype));
    return true;
  default:
    break;
  }
  const TensorRef &o = out[0];
  switch (step.kernel) {
  case Kernel::Add: case Kernel::Sub: case Kernel::Mul: case Kernel::Div:
  case Kernel::Pow: case Kernel::Max: case Kernel::Min: case Kernel::And:
  case Kernel::Or: case Kernel::Equal: case Kernel::Less:
  case Kernel::Greater:
    return binary(step.kernel, in[0], in[1], o, error);
  case Kernel::Select:
    return select(in[0], in[1], in[2], o);
  case Kernel::Neg: case Kernel::Exp: case Kernel::Log: case Kernel::Sqrt:
  case Kernel::Reciprocal: case Kernel::Tanh: case Kernel::Erf:
  case Kernel::Sin: case Kernel::Cos:
  case Kernel::Sigmoid: case Kernel::Relu: case Kernel::Not: case Kernel::Abs:
    unary(step.kernel, in[0], o, false);
    return true;
  case Kernel::Gelu:
    unary(step.kernel, in[0], o, !step.ints.empty() && step.ints[0] != 0);
    return true;
  case Kernel::Cast:
    cast(in[0], o);
    return true;
  case Kernel::MatMul:
    matmul(in[0], in[1], o, step.ints.size() > 0 && step.ints[0] != 0,
           step.ints.size() > 1 && step.ints[1] != 0);
    return true;
  case Kernel::ReduceSum: case Kernel::ReduceMean: case Kernel::ReduceMax:
  case Kernel::ReduceSumSquare:
    reduce(step.kernel, in[0], o, step.ints);
    return true;
  case Kernel::Softmax: case Kernel::LogSoftmax:
    softmax(step.kernel, in[0], o, step.ints.at(0));
    return true;
  case Kernel::LayerNorm:
    layerNorm(in, o, step.ints.at(0), step.ints.at(1) != 0,
              step.floats.at(0), step.ints.size() > 2 && step.ints[2] != 0);
    return true;
  case Kernel::Transpose:
    transpose(in[0], o, step.ints);
    return true;
  case Kernel::Slice:
    slice(in[0], o, step.ints);
    return true;
  case Kernel::Concat:
    concat(in, o, step.ints.at(0));
    return true;
  case Kernel::Broadcast:
    broadcast(in[0], o);
    return true;
  case Kernel::Gather:
    return gather(in[0], in[1], o, step.ints.at(0), error);
  case Kernel::Trilu:
    trilu(in[0], o, step.ints.at(0) != 0, step.ints.at(1));
    return true;
  case Kernel::Copy:
    std::memcpy(o.data, in[0].data, o.numElements() * dtypeSize(o.dtype));
    return true;
  default:
    break;
  }
  error = std::string("unknown kernel ") + artifact::kernelName(step.kernel);
  return false;
}

} // namespace strata::cpu
