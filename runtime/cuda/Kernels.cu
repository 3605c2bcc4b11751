// Kernels.cu - The CUDA backend's kernels.
//
// One kernel (or cuBLASLt call) per plan step, on the step's stream. Every
// kernel is deterministic: reductions have a fixed order (a block per
// output with a fixed tree, or a thread per output walking its inputs in
// order), and no result depends on atomics. The element arithmetic shared
// with the CPU lives in runtime/cpu/SharedMath.h. This file is built with
// -fmad=false so the updates round like the CPU's.

#include "runtime/cuda/Kernels.h"
#include "runtime/artifact/KernelContract.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/cpu/SharedMath.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace strata::cuda {

namespace {

using artifact::Kernel;
using artifact::Step;
using cpu::TensorRef;
using Shape = std::vector<int64_t>;

constexpr int kMaxRank = 8;
constexpr int kThreads = 256;

//===----------------------------------------------------------------------===//
// Element types: storage T computes in DT<T>::C
//===----------------------------------------------------------------------===//

struct F16 { uint16_t bits; };
struct BF16 { uint16_t bits; };

template <typename T> struct DT {
  using C = T;
  __device__ static C load(T v) { return v; }
  __device__ static T store(C v) { return v; }
};
template <> struct DT<F16> {
  using C = float;
  __device__ static float load(F16 v) {
    return __half2float(__ushort_as_half(v.bits));
  }
  __device__ static F16 store(float v) {
    return F16{__half_as_ushort(__float2half_rn(v))};
  }
};
template <> struct DT<BF16> {
  using C = float;
  __device__ static float load(BF16 v) {
    return __bfloat162float(__ushort_as_bfloat16(v.bits));
  }
  __device__ static BF16 store(float v) {
    return BF16{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
  }
};

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<typename DT<T>::C>;

/// Calls f(T{}) for the element types the backend runs; false for others.
template <typename F> bool dispatch(DType dtype, F &&f) {
  switch (dtype) {
  case DType::F32: f(float{}); return true;
  case DType::F64: f(double{}); return true;
  case DType::F16: f(F16{}); return true;
  case DType::BF16: f(BF16{}); return true;
  case DType::I64: f(int64_t{}); return true;
  case DType::I32: f(int32_t{}); return true;
  case DType::I8: f(int8_t{}); return true;
  case DType::U8: f(uint8_t{}); return true;
  case DType::Bool: f(bool{}); return true;
  default: return false;
  }
}
template <typename F> bool dispatchFloat(DType dtype, F &&f) {
  switch (dtype) {
  case DType::F32: f(float{}); return true;
  case DType::F64: f(double{}); return true;
  case DType::F16: f(F16{}); return true;
  case DType::BF16: f(BF16{}); return true;
  default: return false;
  }
}

//===----------------------------------------------------------------------===//
// Index arithmetic
//===----------------------------------------------------------------------===//

/// Row-major dimensions of an output and, per operand, the element stride
/// of each of them (0 where the operand is broadcast).
template <int N> struct Indexer {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
  __device__ void offsets(int64_t i, int64_t (&out)[N]) const {
    for (int k = 0; k < N; ++k)
      out[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t q = i % dims[d];
      i /= dims[d];
      for (int k = 0; k < N; ++k)
        out[k] += q * strides[k][d];
    }
  }
};

Shape contiguousStrides(const Shape &shape) {
  Shape s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

/// Strides of `in` read as `out` (right-aligned broadcasting).
Shape broadcastStrides(const Shape &in, const Shape &out) {
  Shape contiguous = contiguousStrides(in), s(out.size(), 0);
  size_t offset = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    s[offset + d] = in[d] == 1 ? 0 : contiguous[d];
  return s;
}

int64_t product(const Shape &s, size_t begin = 0, size_t end = SIZE_MAX) {
  int64_t n = 1;
  end = std::min(end, s.size());
  for (auto it = s.begin() + std::min(begin, end); it != s.begin() + end; ++it)
    n *= *it;
  return n;
}

template <int N>
Indexer<N> makeIndexer(const Shape &out, const std::array<Shape, N> &strides) {
  Indexer<N> ix;
  ix.rank = static_cast<int>(out.size());
  for (int d = 0; d < ix.rank; ++d) {
    ix.dims[d] = out[d];
    for (int k = 0; k < N; ++k)
      ix.strides[k][d] = strides[k][d];
  }
  return ix;
}

unsigned blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(b, 1 << 20)));
}

#define STRATA_GRID_LOOP(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void binaryKernel(Kernel k, const T *a, const T *b, T *out,
                             bool *cmp, int64_t n, Indexer<2> ix,
                             int *errorFlag) {
  using C = typename DT<T>::C;
  STRATA_GRID_LOOP(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    C x = DT<T>::load(a[off[0]]), y = DT<T>::load(b[off[1]]);
    if (cmp) {
      cmp[i] = math::applyCompare<C>(k, x, y);
    } else {
      bool divByZero = false;
      out[i] = DT<T>::store(math::applyBinary<C>(k, x, y, divByZero));
      if (divByZero)
        atomicOr(errorFlag, static_cast<int>(kIntegerDivisionByZero));
    }
  }
}

template <typename T>
__global__ void selectKernel(const bool *c, const T *a, const T *b, T *out,
                             int64_t n, Indexer<3> ix) {
  STRATA_GRID_LOOP(i, n) {
    int64_t off[3];
    ix.offsets(i, off);
    out[i] = c[off[0]] ? a[off[1]] : b[off[2]];
  }
}

template <typename T>
__global__ void unaryKernel(Kernel k, const T *in, T *out, int64_t n,
                            bool tanhGelu) {
  using C = typename DT<T>::C;
  STRATA_GRID_LOOP(i, n) {
    out[i] = DT<T>::store(math::applyUnary<C>(k, DT<T>::load(in[i]), tanhGelu));
  }
}

template <typename To, typename From>
__global__ void castKernel(const From *in, To *out, int64_t n) {
  using CFrom = typename DT<From>::C;
  using CTo = typename DT<To>::C;
  STRATA_GRID_LOOP(i, n) {
    CFrom x = DT<From>::load(in[i]);
    if constexpr (std::is_same_v<CTo, bool>) {
      out[i] = DT<To>::store(x != CFrom(0));
    } else if constexpr (std::is_floating_point_v<CFrom> &&
                         std::is_integral_v<CTo>) {
      out[i] = DT<To>::store(x != x ? CTo(0) : static_cast<CTo>(trunc(x)));
    } else {
      out[i] = DT<To>::store(static_cast<CTo>(x));
    }
  }
}

/// out[i] = in[offset(i)] for any strided view (transpose, slice,
/// broadcast); bytes of `size` per element.
template <typename W>
__global__ void gatherView(const W *in, W *out, int64_t n, Indexer<1> ix,
                           int64_t base) {
  STRATA_GRID_LOOP(i, n) {
    int64_t off[1];
    ix.offsets(i, off);
    out[i] = in[base + off[0]];
  }
}

/// out[base + offset(i)] = in[i] (slice_grad, concat).
template <typename W>
__global__ void scatterView(const W *in, W *out, int64_t n, Indexer<1> ix,
                            int64_t base) {
  STRATA_GRID_LOOP(i, n) {
    int64_t off[1];
    ix.offsets(i, off);
    out[base + off[0]] = in[i];
  }
}

template <typename W>
__global__ void triluKernel(const W *in, W *out, int64_t n, int64_t rows,
                            int64_t cols, bool upper, int64_t k) {
  STRATA_GRID_LOOP(i, n) {
    int64_t j = i % cols, r = (i / cols) % rows;
    bool keep = upper ? j >= r + k : j <= r + k;
    out[i] = keep ? in[i] : W{};
  }
}

//===----------------------------------------------------------------------===//
// Reductions, softmax, norms: a block per row, a fixed tree
//===----------------------------------------------------------------------===//

/// Sums (or maxes) `v` over the block in a fixed order; every thread gets
/// the result.
template <typename A> __device__ A blockCombine(A v, bool isMax, A *shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      A o = shared[threadIdx.x + s], m = shared[threadIdx.x];
      shared[threadIdx.x] =
          isMax ? ((o != o || m != m) ? o + m : (o > m ? o : m)) : m + o;
    }
    __syncthreads();
  }
  A r = shared[0];
  __syncthreads();
  return r;
}

template <typename A> __device__ A combine(A acc, A v, bool isMax) {
  return isMax ? ((v != v || acc != acc) ? v + acc : (v > acc ? v : acc))
               : acc + v;
}

/// Block b reduces, for output b / chunks, the reduced elements of chunk
/// b % chunks ([c * chunk, (c + 1) * chunk) of `count`). With one chunk it
/// writes the output itself; else its partial goes to `partial[b]` for
/// reduceFinish. The chunk size follows from the shape alone, never the
/// GPU, so the order of the sum, and its bits, are the same on every card.
template <typename T, typename A>
__global__ void reduceKernel(const T *in, T *out, A *partial,
                             Indexer<1> keptIx, Indexer<1> reducedIx,
                             int64_t count, int64_t chunk, int64_t chunks,
                             bool isMax, bool mean, bool square, A init) {
  __shared__ A shared[kThreads];
  int64_t o = blockIdx.x / chunks, c = blockIdx.x % chunks;
  int64_t base[1];
  keptIx.offsets(o, base);
  int64_t end = c * chunk + chunk < count ? c * chunk + chunk : count;
  A acc = init;
  for (int64_t r = c * chunk + threadIdx.x; r < end; r += blockDim.x) {
    int64_t off[1];
    reducedIx.offsets(r, off);
    A v = static_cast<A>(DT<T>::load(in[base[0] + off[0]]));
    acc = combine(acc, square ? v * v : v, isMax);
  }
  acc = blockCombine<A>(acc, isMax, shared);
  if (threadIdx.x != 0)
    return;
  if (chunks > 1) {
    partial[blockIdx.x] = acc;
    return;
  }
  if (mean && count > 0)
    acc = acc / static_cast<A>(count);
  out[o] = DT<T>::store(static_cast<typename DT<T>::C>(acc));
}

/// Block o combines output o's `chunks` partials in a fixed order.
template <typename T, typename A>
__global__ void reduceFinish(const A *partial, T *out, int64_t count,
                             int64_t chunks, bool isMax, bool mean, A init) {
  __shared__ A shared[kThreads];
  int64_t o = blockIdx.x;
  A acc = init;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x)
    acc = combine(acc, partial[o * chunks + c], isMax);
  acc = blockCombine<A>(acc, isMax, shared);
  if (threadIdx.x == 0) {
    if (mean && count > 0)
      acc = acc / static_cast<A>(count);
    out[o] = DT<T>::store(static_cast<typename DT<T>::C>(acc));
  }
}

template <typename T>
__global__ void softmaxKernel(const T *in, T *out, int64_t dim, int64_t inner,
                              bool logSoftmax) {
  using C = typename DT<T>::C;
  __shared__ double shared[kThreads];
  int64_t row = blockIdx.x, o = row / inner, i = row % inner;
  const T *x = in + o * dim * inner + i;
  T *y = out + o * dim * inner + i;
  double mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    double v = double(DT<T>::load(x[j * inner]));
    mx = v > mx ? v : mx;
  }
  mx = blockCombine<double>(mx, true, shared);
  C m = static_cast<C>(mx);
  if (isinf(double(m)) && m < 0)
    m = 0;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
    sum += exp(double(DT<T>::load(x[j * inner]) - m));
  sum = blockCombine<double>(sum, false, shared);
  C logSum = static_cast<C>(log(sum)), invSum = static_cast<C>(1.0 / sum);
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    C v = DT<T>::load(x[j * inner]) - m;
    y[j * inner] = DT<T>::store(logSoftmax ? v - logSum
                                           : math::exp_(v) * invSum);
  }
}

/// Mean and 1/sqrt(var + eps) of a row, in double.
template <typename T>
__device__ void rowMoments(const T *row, int64_t n, double eps, double *shared,
                           double &mean, double &inv, bool rms) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n && !rms; i += blockDim.x)
    s += double(DT<T>::load(row[i]));
  // RMSNorm: moments about zero (the block-uniform branch skips the mean).
  mean = rms ? 0.0 : blockCombine<double>(s, false, shared) / double(n);
  double v = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    double d = double(DT<T>::load(row[i])) - mean;
    v += d * d;
  }
  double var = blockCombine<double>(v, false, shared) / double(n);
  inv = 1.0 / sqrt(var + eps);
}

template <typename T>
__global__ void layerNormKernel(const T *x, const T *scale, const T *bias,
                                T *y, int64_t inner, Indexer<2> paramIx,
                                double eps, bool rms) {
  __shared__ double shared[kThreads];
  const T *row = x + blockIdx.x * inner;
  double mean, inv;
  rowMoments(row, inner, eps, shared, mean, inv, rms);
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    int64_t off[2];
    paramIx.offsets(i, off);
    double g = double(DT<T>::load(scale[off[0]]));
    double b = bias ? double(DT<T>::load(bias[off[1]])) : 0.0;
    double v = (double(DT<T>::load(row[i])) - mean) * inv;
    y[blockIdx.x * inner + i] =
        DT<T>::store(static_cast<typename DT<T>::C>(v * g + b));
  }
}

template <typename T>
__global__ void layerNormGradRows(const T *x, const T *scale, const T *dy,
                                  T *dx, int64_t inner, Indexer<1> paramIx,
                                  double eps, double *moments, bool rms) {
  __shared__ double shared[kThreads];
  const T *xr = x + blockIdx.x * inner;
  const T *dyr = dy + blockIdx.x * inner;
  double mean, inv;
  rowMoments(xr, inner, eps, shared, mean, inv, rms);
  if (threadIdx.x == 0) {
    moments[2 * blockIdx.x] = mean;
    moments[2 * blockIdx.x + 1] = inv;
  }
  double a = 0, b = 0;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    int64_t off[1];
    paramIx.offsets(i, off);
    double xhat = (double(DT<T>::load(xr[i])) - mean) * inv;
    double dxhat = double(DT<T>::load(dyr[i])) * double(DT<T>::load(scale[off[0]]));
    a += dxhat;
    b += dxhat * xhat;
  }
  double meanDxhat = blockCombine<double>(a, false, shared) / double(inner);
  if (rms)
    meanDxhat = 0; // Without the mean subtracted, its gradient term is gone.
  double meanDxhatXhat = blockCombine<double>(b, false, shared) / double(inner);
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    int64_t off[1];
    paramIx.offsets(i, off);
    double xhat = (double(DT<T>::load(xr[i])) - mean) * inv;
    double dxhat = double(DT<T>::load(dyr[i])) * double(DT<T>::load(scale[off[0]]));
    dx[blockIdx.x * inner + i] = DT<T>::store(static_cast<typename DT<T>::C>(
        inv * (dxhat - meanDxhat - xhat * meanDxhatXhat)));
  }
}

/// dscale and dbias: a thread per column walks the rows in order, with
/// each row's moments from the row kernel.
template <typename T>
__global__ void layerNormGradColumns(const T *x, const T *dy, T *dscale,
                                     T *dbias, int64_t rows, int64_t inner,
                                     const double *moments) {
  STRATA_GRID_LOOP(c, inner) {
    double ds = 0, db = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double mean = moments[2 * r], inv = moments[2 * r + 1];
      double g = double(DT<T>::load(dy[r * inner + c]));
      ds += g * ((double(DT<T>::load(x[r * inner + c])) - mean) * inv);
      db += g;
    }
    dscale[c] = DT<T>::store(static_cast<typename DT<T>::C>(ds));
    dbias[c] = DT<T>::store(static_cast<typename DT<T>::C>(db));
  }
}

//===----------------------------------------------------------------------===//
// Gather, cross-entropy
//===----------------------------------------------------------------------===//

template <typename I>
__device__ int64_t indexAt(const I *idx, int64_t i, int64_t dim, int *flag) {
  int64_t v = static_cast<int64_t>(idx[i]);
  if (v < -dim || v >= dim) {
    atomicOr(flag, static_cast<int>(kIndexOutOfRange));
    return 0;
  }
  return v < 0 ? v + dim : v;
}

template <typename W, typename I>
__global__ void gatherKernel(const W *data, const I *idx, W *out, int64_t n,
                             int64_t count, int64_t dim, int64_t inner,
                             int *flag) {
  STRATA_GRID_LOOP(e, n) {
    int64_t k = e % inner, r = e / inner, i = r % count, o = r / count;
    out[e] = data[(o * dim + indexAt(idx, i, dim, flag)) * inner + k];
  }
}

/// A thread per (outer, inner) column adds the gradient rows in index
/// order: repeated indices never race, and the order is fixed.
template <typename T, typename I>
__global__ void gatherGradKernel(const T *g, const I *idx, T *out,
                                 int64_t outer, int64_t count, int64_t dim,
                                 int64_t inner, int *flag) {
  STRATA_GRID_LOOP(c, outer * inner) {
    int64_t o = c / inner, k = c % inner;
    for (int64_t i = 0; i < count; ++i) {
      T *dst = out + (o * dim + indexAt(idx, i, dim, flag)) * inner + k;
      *dst = DT<T>::store(DT<T>::load(*dst) +
                          DT<T>::load(g[(o * count + i) * inner + k]));
    }
  }
}

template <typename T, typename I>
__global__ void crossEntropyRows(const T *x, const I *labels, double *rowLoss,
                                 double *rowSum, double *rowMax, int64_t v,
                                 int *flag) {
  __shared__ double shared[kThreads];
  int64_t i = blockIdx.x;
  int64_t l = static_cast<int64_t>(labels[i]);
  if (l >= v) {
    if (threadIdx.x == 0)
      atomicOr(flag, static_cast<int>(kLabelOutOfRange));
    l = -1;
  }
  const T *row = x + i * v;
  double mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    double a = double(DT<T>::load(row[j]));
    mx = a > mx ? a : mx;
  }
  mx = blockCombine<double>(mx, true, shared);
  double s = 0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
    s += exp(double(DT<T>::load(row[j])) - mx);
  s = blockCombine<double>(s, false, shared);
  if (threadIdx.x == 0) {
    rowMax[i] = mx;
    rowSum[i] = s;
    rowLoss[i] = l < 0 ? 0.0 : mx + log(s) - double(DT<T>::load(row[l]));
  }
}

/// One float scalar of type `t` at `p`, as a double (0: not a float).
__device__ double loadScalar(const void *p, DType t) {
  switch (t) {
  case DType::F64: return *static_cast<const double *>(p);
  case DType::F32: return *static_cast<const float *>(p);
  case DType::F16: return DT<F16>::load(*static_cast<const F16 *>(p));
  case DType::BF16: return DT<BF16>::load(*static_cast<const BF16 *>(p));
  default: return 0;
  }
}

/// `v` stored as one float scalar of type `t` at `p` (rounded to nearest
/// even through float, as the CPU's storeFromDouble).
__device__ void storeScalar(void *p, DType t, double v) {
  switch (t) {
  case DType::F64: *static_cast<double *>(p) = v; break;
  case DType::F32: *static_cast<float *>(p) = static_cast<float>(v); break;
  case DType::F16:
    *static_cast<F16 *>(p) = DT<F16>::store(static_cast<float>(v));
    break;
  case DType::BF16:
    *static_cast<BF16 *>(p) = DT<BF16>::store(static_cast<float>(v));
    break;
  default: break;
  }
}

/// The labelled rows' count (and, for the loss, their mean, stored as
/// `outType`: fp32 for 16-bit logits) in row order.
template <typename T, typename I>
__global__ void crossEntropyMean(const double *rowLoss, const I *labels,
                                 void *out, DType outType, int64_t n,
                                 double *count) {
  if (threadIdx.x != 0 || blockIdx.x != 0)
    return;
  double total = 0;
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (rowLoss)
      total += rowLoss[i];
    c += static_cast<int64_t>(labels[i]) >= 0;
  }
  *count = double(c);
  if (out) {
    double mean = c ? total / double(c) : NAN;
    storeScalar(out, outType, static_cast<typename DT<T>::C>(mean));
  }
}

template <typename T, typename I>
__global__ void crossEntropyGradKernel(const T *x, const I *labels,
                                       const void *grad, DType gradType,
                                       const double *rowSum,
                                       const double *rowMax, T *dx, int64_t n,
                                       int64_t v, const double *count) {
  double g = loadScalar(grad, gradType);
  double scale = *count != 0 ? g / *count : 0.0;
  STRATA_GRID_LOOP(e, n * v) {
    int64_t i = e / v, j = e % v;
    int64_t l = static_cast<int64_t>(labels[i]);
    if (l < 0 || l >= v) {
      dx[e] = DT<T>::store(typename DT<T>::C(0));
      continue;
    }
    double p = exp(double(DT<T>::load(x[e])) - rowMax[i]) * (1.0 / rowSum[i]);
    dx[e] = DT<T>::store(static_cast<typename DT<T>::C>(
        (p - (j == l ? 1.0 : 0.0)) * scale));
  }
}

template <typename T>
__global__ void geluGradKernel(const T *x, const T *g, T *out, int64_t n,
                               bool tanhForm) {
  using C = typename DT<T>::C;
  STRATA_GRID_LOOP(i, n) {
    C d = math::geluDerivative<C>(DT<T>::load(x[i]), tanhForm);
    out[i] = DT<T>::store(d * DT<T>::load(g[i]));
  }
}

//===----------------------------------------------------------------------===//
// Updates (in place), the CPU's arithmetic (SharedMath.h)
//===----------------------------------------------------------------------===//

/// `low`: the low-precision copy of w the model reads (f32 w only), given
/// the new weights rounded to nearest even, as the CPU's update does.
template <typename T>
__global__ void updateKernel(Kernel k, T *w, T *g, T *s1, T *s2,
                             const T *scalePtr, int64_t micro, int64_t n,
                             math::UpdateCoefficients<typename DT<T>::C> c,
                             bool zeroGradient, BF16 *lowBrain,
                             F16 *lowHalf) {
  using C = typename DT<T>::C;
  C scale = scalePtr ? DT<T>::load(*scalePtr) : C(1);
  // Zero or NaN: an overflowed step under loss scaling, skipped whole.
  if (!(scale > C(0)))
    return;
  if (micro > 1)
    scale = scale / static_cast<C>(micro);
  c.scale = scale;
  STRATA_GRID_LOOP(i, n) {
    C wi = DT<T>::load(w[i]), gi = DT<T>::load(g[i]);
    if (k == Kernel::UpdateSgd) {
      wi = math::sgdElement<C>(wi, gi, c);
    } else if (k == Kernel::UpdateMomentum) {
      C b = DT<T>::load(s1[i]);
      math::momentumElement<C>(wi, gi, b, c);
      s1[i] = DT<T>::store(b);
    } else {
      C m = DT<T>::load(s1[i]), v = DT<T>::load(s2[i]);
      math::adamwElement<C>(wi, gi, m, v, c);
      s1[i] = DT<T>::store(m);
      s2[i] = DT<T>::store(v);
    }
    w[i] = DT<T>::store(wi);
    if constexpr (std::is_same_v<T, float>) {
      if (lowBrain)
        lowBrain[i] = DT<BF16>::store(w[i]);
      if (lowHalf)
        lowHalf[i] = DT<F16>::store(w[i]);
    }
    if (zeroGradient)
      g[i] = DT<T>::store(C(0));
  }
}

//===----------------------------------------------------------------------===//
// AdaLomo: factored (or full) second moments, then a step normalised by the
// update's and the weights' RMS over the tensor. Sums have a fixed order: a
// block per row, a thread per column walking the rows, and the tensor-wide
// sums as fixed per-block partials combined by one block.
//===----------------------------------------------------------------------===//

constexpr int kPartials = 1024;

struct AdaLomoScratch {
  double rowMean;      // Mean of the updated row statistics (factored).
  double step, decay;  // The final step size and weight decay factor.
  double partials[2 * kPartials];
};

template <typename T>
__global__ void adaLomoRows(const T *g, T *row, int64_t cols, double beta2) {
  __shared__ double shared[kThreads];
  int64_t i = blockIdx.x;
  double s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    double gij = double(DT<T>::load(g[i * cols + j]));
    s += gij * gij + 1e-30;
  }
  s = blockCombine<double>(s, false, shared);
  if (threadIdx.x == 0)
    row[i] = DT<T>::store(static_cast<typename DT<T>::C>(
        beta2 * double(DT<T>::load(row[i])) + (1 - beta2) * (s / cols)));
}

template <typename T>
__global__ void adaLomoColumns(const T *g, T *col, int64_t rows, int64_t cols,
                               double beta2) {
  STRATA_GRID_LOOP(j, cols) {
    double s = 0;
    for (int64_t i = 0; i < rows; ++i) {
      double gij = double(DT<T>::load(g[i * cols + j]));
      s += gij * gij + 1e-30;
    }
    col[j] = DT<T>::store(static_cast<typename DT<T>::C>(
        beta2 * double(DT<T>::load(col[j])) + (1 - beta2) * (s / rows)));
  }
}

template <typename T>
__global__ void adaLomoRowMean(const T *row, int64_t rows,
                               AdaLomoScratch *scratch) {
  __shared__ double shared[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x)
    s += double(DT<T>::load(row[i]));
  s = blockCombine<double>(s, false, shared);
  if (threadIdx.x == 0)
    scratch->rowMean = s / rows;
}

template <typename T>
__global__ void adaLomoSecondMoment(const T *g, T *v, int64_t n,
                                    double beta2) {
  STRATA_GRID_LOOP(i, n) {
    double gi = double(DT<T>::load(g[i]));
    v[i] = DT<T>::store(static_cast<typename DT<T>::C>(
        beta2 * double(DT<T>::load(v[i])) + (1 - beta2) * (gi * gi + 1e-30)));
  }
}

/// The normalised update of element i.
template <typename T>
__device__ double adaLomoU(const T *g, const T *v, const T *row, const T *col,
                           int64_t cols, const AdaLomoScratch *scratch,
                           int64_t i) {
  double gi = double(DT<T>::load(g[i]));
  if (v)
    return gi / sqrt(double(DT<T>::load(v[i])));
  double r = 1.0 / sqrt(double(DT<T>::load(row[i / cols])) / scratch->rowMean);
  double c = 1.0 / sqrt(double(DT<T>::load(col[i % cols])));
  return gi * r * c;
}

/// Per-block partial sums of u^2 and w^2 (grid of kPartials blocks).
template <typename T>
__global__ void adaLomoPartials(const T *w, const T *g, const T *v,
                                const T *row, const T *col, int64_t n,
                                int64_t cols, AdaLomoScratch *scratch) {
  __shared__ double shared[kThreads];
  double su = 0, sw = 0;
  STRATA_GRID_LOOP(i, n) {
    double u = adaLomoU(g, v, row, col, cols, scratch, i);
    double wi = double(DT<T>::load(w[i]));
    su += u * u;
    sw += wi * wi;
  }
  su = blockCombine<double>(su, false, shared);
  sw = blockCombine<double>(sw, false, shared);
  if (threadIdx.x == 0) {
    scratch->partials[blockIdx.x] = su;
    scratch->partials[kPartials + blockIdx.x] = sw;
  }
}

__global__ void adaLomoStep(int64_t n, double lr, double wd,
                            AdaLomoScratch *scratch) {
  __shared__ double shared[kThreads];
  double su = 0, sw = 0;
  for (int k = threadIdx.x; k < kPartials; k += blockDim.x) {
    su += scratch->partials[k];
    sw += scratch->partials[kPartials + k];
  }
  su = blockCombine<double>(su, false, shared);
  sw = blockCombine<double>(sw, false, shared);
  if (threadIdx.x == 0) {
    double rmsU = sqrt(su / n), rmsW = sqrt(sw / n);
    double clip = 1.0, eps2 = 1e-3;
    scratch->step = lr * (rmsW > eps2 ? rmsW : eps2) /
                    (rmsU / clip > 1.0 ? rmsU / clip : 1.0);
    scratch->decay = 1.0 - lr * wd;
  }
}

template <typename T>
__global__ void adaLomoApply(T *w, const T *g, const T *v, const T *row,
                             const T *col, int64_t n, int64_t cols,
                             const AdaLomoScratch *scratch) {
  STRATA_GRID_LOOP(i, n) {
    double wi = double(DT<T>::load(w[i])) * scratch->decay;
    w[i] = DT<T>::store(static_cast<typename DT<T>::C>(
        wi - scratch->step * adaLomoU(g, v, row, col, cols, scratch, i)));
  }
}

template <typename T>
__global__ void accumulateKernel(T *acc, const T *g, int64_t n) {
  STRATA_GRID_LOOP(i, n) {
    acc[i] = DT<T>::store(DT<T>::load(acc[i]) + DT<T>::load(g[i]));
  }
}

//===----------------------------------------------------------------------===//
// Fused elementwise chains: a thread per element runs the program
//===----------------------------------------------------------------------===//

using artifact::kMaxElementwiseConstants;
using artifact::kMaxElementwiseInputs;
using artifact::kMaxElementwiseInstructions;
using artifact::kMaxElementwiseOutputs;

/// artifact::ElementwiseProgram and the operands, by value.
struct ElementwiseArgs {
  int numInputs, numConstants, numInstructions, numOutputs;
  int32_t code[kMaxElementwiseInstructions][4];
  int32_t outputs[kMaxElementwiseOutputs];
  double constants[kMaxElementwiseConstants];
  const void *inputs[kMaxElementwiseInputs];
  void *outs[kMaxElementwiseOutputs];
};

template <typename T>
__global__ void elementwiseKernel(ElementwiseArgs a,
                                  Indexer<kMaxElementwiseInputs> ix,
                                  int64_t n) {
  using C = typename DT<T>::C;
  constexpr int kRegisters = kMaxElementwiseInputs +
                             kMaxElementwiseConstants +
                             kMaxElementwiseInstructions;
  int fixed = a.numInputs + a.numConstants;
  STRATA_GRID_LOOP(i, n) {
    C r[kRegisters];
    int64_t off[kMaxElementwiseInputs];
    ix.offsets(i, off);
    for (int k = 0; k < a.numInputs; ++k)
      r[k] = DT<T>::load(static_cast<const T *>(a.inputs[k])[off[k]]);
    for (int c = 0; c < a.numConstants; ++c)
      r[a.numInputs + c] = C(a.constants[c]);
    for (int s = 0; s < a.numInstructions; ++s) {
      Kernel k = static_cast<Kernel>(a.code[s][0]);
      C x = r[a.code[s][1]], y;
      if (k == Kernel::GeluGrad) {
        y = math::geluDerivative<C>(x, a.code[s][3] != 0) * r[a.code[s][2]];
      } else if (a.code[s][2] >= 0) {
        bool divByZero = false;
        y = math::applyBinary<C>(k, x, r[a.code[s][2]], divByZero);
      } else {
        y = math::applyUnary<C>(k, x, a.code[s][3] != 0);
      }
      r[fixed + s] = y;
    }
    for (int o = 0; o < a.numOutputs; ++o)
      static_cast<T *>(a.outs[o])[i] = DT<T>::store(r[a.outputs[o]]);
  }
}

//===----------------------------------------------------------------------===//
// Fused attention: a warp per query row (forward, dq) or key row (dk, dv)
//===----------------------------------------------------------------------===//

/// Head sizes up to this many elements (each lane holds kPerLane).
constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;
constexpr int kWarpsPerBlock = 8;

/// artifact::AttentionShape and the step's attributes, by value.
struct AttentionArgs {
  int64_t b, h, t, s, d, dv;
  int64_t maskStrides[4];
  const void *mask;
  int kind;
  bool causal;
  double scale, fill;
};

/// Keys query row i can see (all but the causal tail).
__device__ int64_t visibleKeys(const AttentionArgs &a, int64_t i) {
  if (!a.causal)
    return a.s;
  int64_t n = i + 1 + a.s - a.t;
  return n < 0 ? 0 : n > a.s ? a.s : n;
}

/// The score after the mask; `selected` where the mask replaced it.
template <typename T, typename C>
__device__ C maskedScore(const AttentionArgs &a, int64_t bh, int64_t i,
                         int64_t j, C score, bool &selected) {
  selected = false;
  if (!a.mask)
    return score;
  int64_t at = (bh / a.h) * a.maskStrides[0] + (bh % a.h) * a.maskStrides[1] +
               i * a.maskStrides[2] + j * a.maskStrides[3];
  if (a.kind == 1)
    return score + DT<T>::load(static_cast<const T *>(a.mask)[at]);
  if (static_cast<const bool *>(a.mask)[at] == (a.kind == 3)) {
    selected = true;
    return C(a.fill);
  }
  return score;
}

/// A row of `n` elements into a lane's registers (element lane + 32 r).
template <typename T, typename C>
__device__ void loadRow(const T *row, int64_t n, C (&x)[kPerLane]) {
  int lane = threadIdx.x % 32;
  for (int r = 0; r < kPerLane; ++r) {
    int64_t e = lane + 32 * r;
    x[r] = e < n ? DT<T>::load(row[e]) : C(0);
  }
}

/// acc (a lane's elements of a row) += w * row.
template <typename T, typename C>
__device__ void addScaledRow(C (&acc)[kPerLane], C w, const T *row,
                             int64_t n) {
  int lane = threadIdx.x % 32;
  for (int r = 0; r < kPerLane; ++r) {
    int64_t e = lane + 32 * r;
    if (e < n)
      acc[r] += w * DT<T>::load(row[e]);
  }
}

/// A lane's elements of a row, times `scale`, into `row`.
template <typename T, typename C>
__device__ void storeRow(T *row, const C (&x)[kPerLane], int64_t n,
                         C scale = C(1)) {
  int lane = threadIdx.x % 32;
  for (int r = 0; r < kPerLane; ++r) {
    int64_t e = lane + 32 * r;
    if (e < n)
      row[e] = DT<T>::store(x[r] * scale);
  }
}

/// The dot product of a register row with `row`, on every lane.
template <typename T, typename C>
__device__ C warpDot(const C (&x)[kPerLane], const T *row, int64_t n) {
  int lane = threadIdx.x % 32;
  C sum = 0;
  for (int r = 0; r < kPerLane; ++r) {
    int64_t e = lane + 32 * r;
    if (e < n)
      sum += x[r] * DT<T>::load(row[e]);
  }
  for (int offset = 16; offset > 0; offset >>= 1)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  return sum;
}

/// Takes score `s` into a running softmax: `m` the maximum so far, `l` the
/// sum of exp(score - m). Sets `p` = exp(s - m) for the new m and returns
/// the factor the terms summed before are rescaled by.
template <typename C>
__device__ C onlineSoftmaxStep(C s, C &m, C &l, C &p) {
  C mNew = s > m ? s : m;
  C alpha = exp(m - mNew);
  p = exp(s - mNew);
  l = l * alpha + p;
  m = mNew;
  return alpha;
}

/// The scaled, masked score of query i and key j (-inf: hidden).
template <typename T, typename C>
__device__ C scoreOf(const AttentionArgs &a, const C (&qi)[kPerLane],
                     const T *k, int64_t bh, int64_t i, int64_t j,
                     bool &selected) {
  C s = warpDot<T, C>(qi, k + (bh * a.s + j) * a.d, a.d) * C(a.scale);
  return maskedScore<T, C>(a, bh, i, j, s, selected);
}

template <typename T>
__global__ void attentionForward(const T *q, const T *k, const T *v, T *o,
                                 AttentionArgs a) {
  using C = typename DT<T>::C;
  int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= a.b * a.h * a.t)
    return;
  int64_t bh = row / a.t, i = row % a.t;
  C qi[kPerLane], acc[kPerLane];
  loadRow<T, C>(q + row * a.d, a.d, qi);
  for (int r = 0; r < kPerLane; ++r)
    acc[r] = 0;
  // Online softmax: m the running maximum, l the sum of exp(s - m).
  C m = -INFINITY, l = 0;
  int64_t visible = visibleKeys(a, i);
  for (int64_t j = 0; j < visible; ++j) {
    bool selected;
    C s = scoreOf<T, C>(a, qi, k, bh, i, j, selected);
    if (isinf(s) && s < 0)
      continue;
    C p, alpha = onlineSoftmaxStep(s, m, l, p);
    for (int r = 0; r < kPerLane; ++r)
      acc[r] *= alpha;
    addScaledRow<T, C>(acc, p, v + (bh * a.s + j) * a.dv, a.dv);
  }
  // No visible key: 0 * inf, NaN as softmax gives.
  storeRow<T, C>(o + row * a.dv, acc, a.dv, C(1) / l);
}

/// dq of one query row, and the row's log-sum-exp and sum(P * dP) into
/// `stats` (rows of each) for attentionGradKeys.
template <typename T>
__global__ void attentionGradQueries(const T *q, const T *k, const T *v,
                                     const T *g, T *dq,
                                     typename DT<T>::C *stats,
                                     AttentionArgs a) {
  using C = typename DT<T>::C;
  int64_t rows = a.b * a.h * a.t;
  int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows)
    return;
  int64_t bh = row / a.t, i = row % a.t;
  C qi[kPerLane], gi[kPerLane], acc[kPerLane];
  loadRow<T, C>(q + row * a.d, a.d, qi);
  loadRow<T, C>(g + row * a.dv, a.dv, gi);
  int64_t visible = visibleKeys(a, i);
  C m = -INFINITY, l = 0;
  for (int64_t j = 0; j < visible; ++j) {
    bool selected;
    C s = scoreOf<T, C>(a, qi, k, bh, i, j, selected);
    if (isinf(s) && s < 0)
      continue;
    C p;
    onlineSoftmaxStep(s, m, l, p);
  }
  C lse = m + log(l), dot = 0;
  for (int64_t j = 0; j < visible; ++j) {
    bool selected;
    C s = scoreOf<T, C>(a, qi, k, bh, i, j, selected);
    if (isinf(s) && s < 0)
      continue;
    dot += exp(s - lse) * warpDot<T, C>(gi, v + (bh * a.s + j) * a.dv, a.dv);
  }
  for (int r = 0; r < kPerLane; ++r)
    acc[r] = 0;
  for (int64_t j = 0; j < visible; ++j) {
    bool selected;
    C s = scoreOf<T, C>(a, qi, k, bh, i, j, selected);
    if ((isinf(s) && s < 0) || selected)
      continue;
    C p = exp(s - lse);
    C ds = p * (warpDot<T, C>(gi, v + (bh * a.s + j) * a.dv, a.dv) - dot) *
           C(a.scale);
    addScaledRow<T, C>(acc, ds, k + (bh * a.s + j) * a.d, a.d);
  }
  storeRow<T, C>(dq + row * a.d, acc, a.d);
  if (threadIdx.x % 32 == 0) {
    stats[row] = lse;
    stats[rows + row] = dot;
  }
}

/// dk and dv of one key row, from the queries that see it.
template <typename T>
__global__ void attentionGradKeys(const T *q, const T *k, const T *v,
                                  const T *g, T *dk, T *dv,
                                  const typename DT<T>::C *stats,
                                  AttentionArgs a) {
  using C = typename DT<T>::C;
  int64_t rows = a.b * a.h * a.t;
  int64_t key = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (key >= a.b * a.h * a.s)
    return;
  int64_t bh = key / a.s, j = key % a.s;
  C kj[kPerLane], vj[kPerLane], accK[kPerLane], accV[kPerLane];
  loadRow<T, C>(k + key * a.d, a.d, kj);
  loadRow<T, C>(v + key * a.dv, a.dv, vj);
  for (int r = 0; r < kPerLane; ++r)
    accK[r] = accV[r] = 0;
  // Query i sees key j when j < visibleKeys(i).
  int64_t first = a.causal ? j - (a.s - a.t) : 0;
  for (int64_t i = first < 0 ? 0 : first; i < a.t; ++i) {
    int64_t row = bh * a.t + i;
    bool selected;
    C s = warpDot<T, C>(kj, q + row * a.d, a.d) * C(a.scale);
    s = maskedScore<T, C>(a, bh, i, j, s, selected);
    if (isinf(s) && s < 0)
      continue;
    C p = exp(s - stats[row]);
    const T *gi = g + row * a.dv;
    C ds = selected ? C(0)
                    : p * (warpDot<T, C>(vj, gi, a.dv) - stats[rows + row]) *
                          C(a.scale);
    addScaledRow<T, C>(accK, ds, q + row * a.d, a.d);
    addScaledRow<T, C>(accV, p, gi, a.dv);
  }
  storeRow<T, C>(dk + key * a.d, accK, a.d);
  storeRow<T, C>(dv + key * a.dv, accV, a.dv);
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

bool check(cudaError_t e, const char *what, std::string &error) {
  if (e == cudaSuccess)
    return true;
  error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

/// Launch errors (bad configuration) surface here; execution errors at the
/// next synchronization.
bool launched(const char *what, std::string &error) {
  return check(cudaGetLastError(), what, error);
}

cudaStream_t streamOf(LaunchContext &l) {
  return static_cast<cudaStream_t>(l.stream);
}

/// Copies of `bytes`-sized elements by the widest word that divides them.
template <typename F> void byWord(size_t bytes, F &&f) {
  switch (bytes) {
  case 8: f(uint64_t{}); break;
  case 4: f(uint32_t{}); break;
  case 2: f(uint16_t{}); break;
  default: f(uint8_t{}); break;
  }
}

bool viewCopy(const TensorRef &in, const TensorRef &out,
              const Shape &inStrides, int64_t base, LaunchContext &l,
              std::string &error) {
  int64_t n = out.numElements();
  if (n == 0)
    return true;
  auto ix = makeIndexer<1>(out.shape, {inStrides});
  byWord(dtypeSize(out.dtype), [&](auto w) {
    using W = decltype(w);
    gatherView<W><<<blocksFor(n), kThreads, 0, streamOf(l)>>>(
        static_cast<const W *>(in.data), static_cast<W *>(out.data), n, ix,
        base);
  });
  return launched("strided copy", error);
}

/// The arguments of an attention step; false with `error` when the
/// operands do not fit (the validator has checked them) or the heads are
/// too wide for the kernels.
bool attentionArgs(const Step &step, const std::vector<TensorRef> &in,
                   size_t maskAt, AttentionArgs &a, std::string &error) {
  const TensorRef *mask = in.size() > maskAt ? &in[maskAt] : nullptr;
  artifact::AttentionShape shape;
  if (!artifact::attentionShape(in[0].shape, in[1].shape, in[2].shape,
                                mask ? &mask->shape : nullptr, shape, error))
    return false;
  a = AttentionArgs{shape.b, shape.h, shape.t, shape.s, shape.d, shape.dv,
                    {0, 0, 0, 0}, mask ? mask->data : nullptr,
                    static_cast<int>(step.ints[1]), step.ints[0] != 0,
                    step.floats[0], step.floats[1]};
  for (size_t d = 0; d < shape.maskStrides.size(); ++d)
    a.maskStrides[d] = shape.maskStrides[d];
  return true;
}

unsigned warpBlocks(int64_t warps) {
  return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

bool matmul(const Step &step, const TensorRef &a, const TensorRef &b,
            const TensorRef &out, LaunchContext &l, std::string &error);

} // namespace

bool supportsStep(const artifact::Plan &plan, const Step &step,
                  std::string &why) {
  auto slotOf = [&](uint32_t s) -> const artifact::Slot & {
    return plan.slots[s];
  };
  for (uint32_t s : step.inputs)
    if (slotOf(s).shape.size() > static_cast<size_t>(kMaxRank)) {
      why = std::string(artifact::kernelName(step.kernel)) + " of rank > 8";
      return false;
    }
  for (uint32_t s : step.outputs)
    if (slotOf(s).shape.size() > static_cast<size_t>(kMaxRank)) {
      why = std::string(artifact::kernelName(step.kernel)) + " of rank > 8";
      return false;
    }
  DType t = step.inputs.empty() ? DType::F32 : slotOf(step.inputs[0]).dtype;
  auto on = [&](const char *what) {
    why = std::string(artifact::kernelName(step.kernel)) + " on " + what;
    return false;
  };
  bool anyType = dispatch(t, [](auto) {});
  switch (step.kernel) {
  case Kernel::MatMul: {
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
      return on(dtypeName(t));
    // Batches: each operand a full batch or one matrix for all.
    artifact::MatMulShape shape;
    std::string ignored;
    if (!artifact::matmulShape(slotOf(step.inputs[0]).shape,
                               slotOf(step.inputs[1]).shape, step.ints, shape,
                               ignored))
      return on("shapes that do not multiply");
    int64_t a = product(shape.batchA), b = product(shape.batchB),
            all = product(shape.batch);
    if ((a != all && a != 1) || (b != all && b != 1))
      return on("batches that broadcast other than all-or-one");
    return true;
  }
  case Kernel::Attention:
  case Kernel::AttentionGrad:
    if (slotOf(step.inputs[0]).shape.back() > kMaxHeadDim ||
        slotOf(step.inputs[2]).shape.back() > kMaxHeadDim)
      return on(("heads wider than " + std::to_string(kMaxHeadDim)).c_str());
    return anyType ? true : on(dtypeName(t));
  case Kernel::Cast:
    if (!anyType || !dispatch(slotOf(step.outputs[0]).dtype, [](auto) {}))
      return on(dtypeName(anyType ? slotOf(step.outputs[0]).dtype : t));
    return true;
  default:
    return anyType ? true : on(dtypeName(t));
  }
}

bool launchKernel(const Step &step, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out,
                  const cpu::KernelContext &ctx, LaunchContext &l,
                  std::string &error) {
  cudaStream_t stream = streamOf(l);
  const char *name = artifact::kernelName(step.kernel);
  bool typed = true;
  switch (step.kernel) {
  case Kernel::Add: case Kernel::Sub: case Kernel::Mul: case Kernel::Div:
  case Kernel::Pow: case Kernel::Max: case Kernel::Min: case Kernel::And:
  case Kernel::Or: case Kernel::Equal: case Kernel::Less:
  case Kernel::Greater: {
    bool compare = step.kernel == Kernel::Equal ||
                   step.kernel == Kernel::Less ||
                   step.kernel == Kernel::Greater;
    int64_t n = out[0].numElements();
    auto ix = makeIndexer<2>(out[0].shape,
                             {broadcastStrides(in[0].shape, out[0].shape),
                              broadcastStrides(in[1].shape, out[0].shape)});
    typed = dispatch(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (n)
        binaryKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(
            step.kernel, static_cast<const T *>(in[0].data),
            static_cast<const T *>(in[1].data),
            compare ? nullptr : static_cast<T *>(out[0].data),
            compare ? static_cast<bool *>(out[0].data) : nullptr, n, ix,
            l.errorFlag);
    });
    break;
  }
  case Kernel::Select: {
    int64_t n = out[0].numElements();
    auto ix = makeIndexer<3>(out[0].shape,
                             {broadcastStrides(in[0].shape, out[0].shape),
                              broadcastStrides(in[1].shape, out[0].shape),
                              broadcastStrides(in[2].shape, out[0].shape)});
    byWord(dtypeSize(out[0].dtype), [&](auto w) {
      using W = decltype(w);
      if (n)
        selectKernel<W><<<blocksFor(n), kThreads, 0, stream>>>(
            static_cast<const bool *>(in[0].data),
            static_cast<const W *>(in[1].data),
            static_cast<const W *>(in[2].data), static_cast<W *>(out[0].data),
            n, ix);
    });
    break;
  }
  case Kernel::Neg: case Kernel::Exp: case Kernel::Log: case Kernel::Sqrt:
  case Kernel::Reciprocal: case Kernel::Tanh: case Kernel::Erf:
  case Kernel::Sin: case Kernel::Cos: case Kernel::Sigmoid: case Kernel::Relu:
  case Kernel::Not: case Kernel::Abs: case Kernel::Gelu: {
    int64_t n = out[0].numElements();
    bool tanhGelu = step.kernel == Kernel::Gelu && !step.ints.empty() &&
                    step.ints[0] != 0;
    typed = dispatch(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (n)
        unaryKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(
            step.kernel, static_cast<const T *>(in[0].data),
            static_cast<T *>(out[0].data), n, tanhGelu);
    });
    break;
  }
  case Kernel::Cast: {
    int64_t n = out[0].numElements();
    typed = dispatch(in[0].dtype, [&](auto from) {
      using From = decltype(from);
      typed = dispatch(out[0].dtype, [&](auto to) {
        using To = decltype(to);
        if (n)
          castKernel<To, From><<<blocksFor(n), kThreads, 0, stream>>>(
              static_cast<const From *>(in[0].data),
              static_cast<To *>(out[0].data), n);
      });
    }) && typed;
    break;
  }
  case Kernel::Copy:
    return check(cudaMemcpyAsync(out[0].data, in[0].data,
                                 out[0].numElements() * dtypeSize(out[0].dtype),
                                 cudaMemcpyDeviceToDevice, stream),
                 "copy", error);
  case Kernel::Broadcast:
    return viewCopy(in[0], out[0], broadcastStrides(in[0].shape, out[0].shape),
                    0, l, error);
  case Kernel::Transpose: {
    Shape src = contiguousStrides(in[0].shape), strides;
    for (int64_t p : step.ints)
      strides.push_back(src[p]);
    return viewCopy(in[0], out[0], strides, 0, l, error);
  }
  case Kernel::Slice: {
    size_t rank = in[0].shape.size();
    Shape src = contiguousStrides(in[0].shape), strides(rank);
    int64_t base = 0;
    for (size_t d = 0; d < rank; ++d) {
      base += step.ints[d] * src[d];
      strides[d] = step.ints[rank + d] * src[d];
    }
    return viewCopy(in[0], out[0], strides, base, l, error);
  }
  case Kernel::SliceGrad: {
    size_t rank = out[0].shape.size();
    uint64_t bytes = out[0].numElements() * dtypeSize(out[0].dtype);
    if (!check(cudaMemsetAsync(out[0].data, 0, bytes, stream), "slice_grad",
               error))
      return false;
    Shape dst = contiguousStrides(out[0].shape), strides(rank);
    int64_t base = 0;
    for (size_t d = 0; d < rank; ++d) {
      base += step.ints[d] * dst[d];
      strides[d] = step.ints[rank + d] * dst[d];
    }
    int64_t n = in[0].numElements();
    auto ix = makeIndexer<1>(in[0].shape, {strides});
    byWord(dtypeSize(out[0].dtype), [&](auto w) {
      using W = decltype(w);
      if (n)
        scatterView<W><<<blocksFor(n), kThreads, 0, stream>>>(
            static_cast<const W *>(in[0].data), static_cast<W *>(out[0].data),
            n, ix, base);
    });
    break;
  }
  case Kernel::Concat: {
    int64_t axis = step.ints[0], at = 0;
    Shape dst = contiguousStrides(out[0].shape);
    for (const TensorRef &t : in) {
      int64_t n = t.numElements();
      auto ix = makeIndexer<1>(t.shape, {dst});
      byWord(dtypeSize(out[0].dtype), [&](auto w) {
        using W = decltype(w);
        if (n)
          scatterView<W><<<blocksFor(n), kThreads, 0, stream>>>(
              static_cast<const W *>(t.data), static_cast<W *>(out[0].data),
              n, ix, at * dst[axis]);
      });
      at += t.shape[axis];
    }
    break;
  }
  case Kernel::Trilu: {
    const Shape &s = in[0].shape;
    int64_t n = in[0].numElements();
    byWord(dtypeSize(in[0].dtype), [&](auto w) {
      using W = decltype(w);
      if (n)
        triluKernel<W><<<blocksFor(n), kThreads, 0, stream>>>(
            static_cast<const W *>(in[0].data), static_cast<W *>(out[0].data),
            n, s[s.size() - 2], s.back(), step.ints[0] != 0, step.ints[1]);
    });
    break;
  }
  case Kernel::ReduceSum: case Kernel::ReduceMean: case Kernel::ReduceMax:
  case Kernel::ReduceSumSquare: {
    const Shape &s = in[0].shape;
    std::vector<bool> reduced(s.size(), false);
    for (size_t i = 0; i + 1 < step.ints.size(); ++i)
      reduced[step.ints[i]] = true;
    Shape strides = contiguousStrides(s), keptDims, keptStrides, redDims,
          redStrides;
    for (size_t d = 0; d < s.size(); ++d) {
      (reduced[d] ? redDims : keptDims).push_back(s[d]);
      (reduced[d] ? redStrides : keptStrides).push_back(strides[d]);
    }
    int64_t outCount = product(keptDims), count = product(redDims);
    auto keptIx = makeIndexer<1>(keptDims, {keptStrides});
    auto redIx = makeIndexer<1>(redDims, {redStrides});
    bool isMax = step.kernel == Kernel::ReduceMax;
    bool mean = step.kernel == Kernel::ReduceMean;
    bool square = step.kernel == Kernel::ReduceSumSquare; // Floats only.
    typed = dispatch(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      using C = typename DT<T>::C;
      using A = std::conditional_t<
          std::is_floating_point_v<C>, double,
          std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>>;
      A init = isMax ? (std::is_floating_point_v<A>
                            ? static_cast<A>(-INFINITY)
                            : std::numeric_limits<A>::lowest())
                     : A(0);
      if (!outCount)
        return;
      // Few outputs over many elements (a gradient norm's sum of squares
      // over a whole embedding): one block each would leave the GPU idle,
      // so each output's elements split into chunks of at least 64 Ki, a
      // block per chunk, and a second pass combines the partials.
      constexpr int64_t kChunk = int64_t(1) << 16;
      int64_t chunks = 1, chunk = count;
      int64_t room = int64_t(l.workspaceBytes / sizeof(A)) / outCount;
      if (outCount < 1024 && count >= 2 * kChunk && room >= 2) {
        chunks = std::min((count + kChunk - 1) / kChunk, room);
        chunk = (count + chunks - 1) / chunks;
        chunks = (count + chunk - 1) / chunk;
      }
      A *partial = static_cast<A *>(l.workspace);
      reduceKernel<T, A><<<static_cast<unsigned>(outCount * chunks),
                           kThreads, 0, stream>>>(
          static_cast<const T *>(in[0].data), static_cast<T *>(out[0].data),
          partial, keptIx, redIx, count, chunk, chunks, isMax, mean, square,
          init);
      if (chunks > 1)
        reduceFinish<T, A><<<static_cast<unsigned>(outCount), kThreads, 0,
                             stream>>>(partial, static_cast<T *>(out[0].data),
                                       count, chunks, isMax, mean, init);
    });
    break;
  }
  case Kernel::Softmax: case Kernel::LogSoftmax: {
    const Shape &s = in[0].shape;
    int64_t axis = step.ints[0];
    int64_t outer = product(s, 0, axis), dim = s[axis],
            inner = product(s, axis + 1);
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (outer * inner != 0 && dim != 0)
        softmaxKernel<T><<<static_cast<unsigned>(outer * inner), kThreads, 0,
                           stream>>>(static_cast<const T *>(in[0].data),
                                     static_cast<T *>(out[0].data), dim,
                                     inner,
                                     step.kernel == Kernel::LogSoftmax);
    });
    break;
  }
  case Kernel::LayerNorm: {
    const Shape &x = in[0].shape;
    int64_t axis = step.ints[0];
    Shape normalized(x.begin() + axis, x.end());
    int64_t rows = product(x, 0, axis), inner = product(normalized);
    bool hasBias = step.ints[1] != 0;
    auto ix = makeIndexer<2>(
        normalized, {broadcastStrides(in[1].shape, normalized),
                     hasBias ? broadcastStrides(in[2].shape, normalized)
                             : Shape(normalized.size(), 0)});
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (rows && inner)
        layerNormKernel<T><<<static_cast<unsigned>(rows), kThreads, 0,
                             stream>>>(
            static_cast<const T *>(in[0].data),
            static_cast<const T *>(in[1].data),
            hasBias ? static_cast<const T *>(in[2].data) : nullptr,
            static_cast<T *>(out[0].data), inner, ix, step.floats[0],
            step.ints.size() > 2 && step.ints[2] != 0);
    });
    break;
  }
  case Kernel::LayerNormGrad: {
    const Shape &x = in[0].shape;
    int64_t axis = step.ints[0];
    Shape normalized(x.begin() + axis, x.end());
    int64_t rows = product(x, 0, axis), inner = product(normalized);
    auto ix = makeIndexer<1>(normalized,
                             {broadcastStrides(in[1].shape, normalized)});
    // Each row's mean and 1/std, in the workspace.
    if (uint64_t(rows) * 2 * sizeof(double) > l.workspaceBytes) {
      error = "layer_norm_grad over " + std::to_string(rows) +
              " rows needs more scratch than the workspace has";
      return false;
    }
    double *moments = static_cast<double *>(l.workspace);
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (!rows || !inner)
        return;
      layerNormGradRows<T><<<static_cast<unsigned>(rows), kThreads, 0,
                             stream>>>(
          static_cast<const T *>(in[0].data),
          static_cast<const T *>(in[1].data),
          static_cast<const T *>(in[2].data), static_cast<T *>(out[0].data),
          inner, ix, step.floats[0], moments,
          step.ints.size() > 1 && step.ints[1] != 0);
      layerNormGradColumns<T><<<blocksFor(inner), kThreads, 0, stream>>>(
          static_cast<const T *>(in[0].data),
          static_cast<const T *>(in[2].data), static_cast<T *>(out[1].data),
          static_cast<T *>(out[2].data), rows, inner, moments);
    });
    break;
  }
  case Kernel::Gather: {
    const Shape &s = in[0].shape;
    int64_t axis = step.ints[0];
    int64_t outer = product(s, 0, axis), dim = s[axis],
            inner = product(s, axis + 1), count = in[1].numElements();
    int64_t n = outer * count * inner;
    byWord(dtypeSize(in[0].dtype), [&](auto w) {
      using W = decltype(w);
      auto go = [&](auto idx) {
        using I = decltype(idx);
        if (n)
          gatherKernel<W, I><<<blocksFor(n), kThreads, 0, stream>>>(
              static_cast<const W *>(in[0].data),
              static_cast<const I *>(in[1].data),
              static_cast<W *>(out[0].data), n, count, dim, inner,
              l.errorFlag);
      };
      in[1].dtype == DType::I32 ? go(int32_t{}) : go(int64_t{});
    });
    break;
  }
  case Kernel::GatherGrad: {
    const Shape &s = out[0].shape;
    int64_t axis = step.ints[0];
    int64_t outer = product(s, 0, axis), dim = s[axis],
            inner = product(s, axis + 1), count = in[1].numElements();
    if (!check(cudaMemsetAsync(out[0].data, 0,
                               out[0].numElements() * dtypeSize(out[0].dtype),
                               stream),
               "gather_grad", error))
      return false;
    typed = dispatchFloat(out[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      auto go = [&](auto idx) {
        using I = decltype(idx);
        if (outer * inner != 0)
          gatherGradKernel<T, I><<<blocksFor(outer * inner), kThreads, 0,
                                   stream>>>(
              static_cast<const T *>(in[0].data),
              static_cast<const I *>(in[1].data),
              static_cast<T *>(out[0].data), outer, count, dim, inner,
              l.errorFlag);
      };
      in[1].dtype == DType::I32 ? go(int32_t{}) : go(int64_t{});
    });
    break;
  }
  case Kernel::CrossEntropy:
  case Kernel::CrossEntropyGrad: {
    int64_t n = in[0].shape[0], v = in[0].shape[1];
    // Per-row scratch in the workspace: loss, sum, max; then the count.
    uint64_t need = (3 * n + 1) * sizeof(double);
    if (need > l.workspaceBytes) {
      error = "cross-entropy over " + std::to_string(n) +
              " rows needs more scratch than the workspace has";
      return false;
    }
    double *rowLoss = static_cast<double *>(l.workspace);
    double *rowSum = rowLoss + n, *rowMax = rowSum + n, *count = rowMax + n;
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      auto go = [&](auto idx) {
        using I = decltype(idx);
        const T *x = static_cast<const T *>(in[0].data);
        const I *labels = static_cast<const I *>(in[1].data);
        if (n == 0)
          return;
        crossEntropyRows<T, I><<<static_cast<unsigned>(n), kThreads, 0,
                                 stream>>>(x, labels, rowLoss, rowSum, rowMax,
                                           v, l.errorFlag);
        bool loss = step.kernel == Kernel::CrossEntropy;
        crossEntropyMean<T, I><<<1, 1, 0, stream>>>(
            loss ? rowLoss : nullptr, labels, loss ? out[0].data : nullptr,
            out[0].dtype, n, count);
        if (!loss)
          crossEntropyGradKernel<T, I><<<blocksFor(n * v), kThreads, 0,
                                         stream>>>(
              x, labels, in[2].data, in[2].dtype, rowSum, rowMax,
              static_cast<T *>(out[0].data), n, v, count);
      };
      in[1].dtype == DType::I32 ? go(int32_t{}) : go(int64_t{});
    });
    break;
  }
  case Kernel::Elementwise: {
    artifact::ElementwiseProgram p;
    if (!artifact::elementwiseProgram(step.ints, step.floats, in.size(),
                                      out.size(), p, error))
      return false;
    ElementwiseArgs a{};
    a.numInputs = p.numInputs;
    a.numConstants = p.numConstants;
    a.numInstructions = static_cast<int>(p.instructions.size());
    a.numOutputs = static_cast<int>(p.outputs.size());
    for (size_t s = 0; s < p.instructions.size(); ++s) {
      const auto &ins = p.instructions[s];
      a.code[s][0] = static_cast<int32_t>(ins.kernel);
      a.code[s][1] = ins.a;
      a.code[s][2] = ins.b;
      a.code[s][3] = ins.flag;
    }
    for (size_t o = 0; o < p.outputs.size(); ++o) {
      a.outputs[o] = p.outputs[o];
      a.outs[o] = out[o].data;
    }
    for (size_t c = 0; c < step.floats.size(); ++c)
      a.constants[c] = step.floats[c];
    std::array<Shape, kMaxElementwiseInputs> strides;
    for (size_t k = 0; k < strides.size(); ++k) {
      strides[k] = Shape(out[0].shape.size(), 0);
      if (k < in.size()) {
        strides[k] = broadcastStrides(in[k].shape, out[0].shape);
        a.inputs[k] = in[k].data;
      }
    }
    auto ix = makeIndexer<kMaxElementwiseInputs>(out[0].shape, strides);
    int64_t n = out[0].numElements();
    typed = dispatchFloat(out[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (n)
        elementwiseKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(a, ix, n);
    });
    break;
  }
  case Kernel::Attention: {
    AttentionArgs a;
    if (!attentionArgs(step, in, 3, a, error))
      return false;
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (int64_t rows = a.b * a.h * a.t)
        attentionForward<T><<<warpBlocks(rows), 32 * kWarpsPerBlock, 0,
                              stream>>>(
            static_cast<const T *>(in[0].data),
            static_cast<const T *>(in[1].data),
            static_cast<const T *>(in[2].data), static_cast<T *>(out[0].data),
            a);
    });
    break;
  }
  case Kernel::AttentionGrad: {
    AttentionArgs a;
    if (!attentionArgs(step, in, 4, a, error))
      return false;
    int64_t rows = a.b * a.h * a.t, keys = a.b * a.h * a.s;
    // Each query row's log-sum-exp and sum(P * dP), in the workspace.
    if (uint64_t(rows) * 2 * dtypeSize(in[0].dtype) > l.workspaceBytes) {
      error = "attention_grad over " + std::to_string(rows) +
              " query rows needs more scratch than the workspace has";
      return false;
    }
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      using C = typename DT<T>::C;
      auto *stats = static_cast<C *>(l.workspace);
      const T *q = static_cast<const T *>(in[0].data),
              *k = static_cast<const T *>(in[1].data),
              *v = static_cast<const T *>(in[2].data),
              *g = static_cast<const T *>(in[3].data);
      if (rows)
        attentionGradQueries<T><<<warpBlocks(rows), 32 * kWarpsPerBlock, 0,
                                  stream>>>(
            q, k, v, g, static_cast<T *>(out[0].data), stats, a);
      if (keys && !rows) { // No queries: nothing flows to k and v.
        cudaMemsetAsync(out[1].data, 0, out[1].numElements() * sizeof(T),
                        stream);
        cudaMemsetAsync(out[2].data, 0, out[2].numElements() * sizeof(T),
                        stream);
      }
      if (keys && rows)
        attentionGradKeys<T><<<warpBlocks(keys), 32 * kWarpsPerBlock, 0,
                               stream>>>(
            q, k, v, g, static_cast<T *>(out[1].data),
            static_cast<T *>(out[2].data), stats, a);
    });
    break;
  }
  case Kernel::GeluGrad: {
    int64_t n = in[0].numElements();
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (n)
        geluGradKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(
            static_cast<const T *>(in[0].data),
            static_cast<const T *>(in[1].data), static_cast<T *>(out[0].data),
            n, !step.ints.empty() && step.ints[0] != 0);
    });
    break;
  }
  case Kernel::MatMul:
    return matmul(step, in[0], in[1], out[0], l, error);
  case Kernel::UpdateSgd: case Kernel::UpdateMomentum:
  case Kernel::UpdateAdamW: {
    if (!ctx.applyUpdates)
      return true;
    artifact::UpdateOperands at =
        artifact::updateOperands(step.kernel, in.size(), step.ints);
    size_t needed = at.before;
    int64_t micro = step.ints.empty() ? 1 : step.ints[0];
    void *low = at.low >= 0 ? in[at.low].data : nullptr;
    bool brain = at.low >= 0 && in[at.low].dtype == DType::BF16;
    int64_t n = in[0].numElements();
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      using C = typename DT<T>::C;
      math::UpdateCoefficients<C> c;
      // The scale is read on the device; 1 here stands in for it.
      math::updateCoefficients<C>(step.kernel, step.floats.data(), C(1), 1,
                                  ctx.step, ctx.lrFactor, c);
      if (n)
        updateKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(
            step.kernel, static_cast<T *>(in[0].data),
            static_cast<T *>(in[1].data),
            needed > 2 ? static_cast<T *>(in[2].data) : nullptr,
            needed > 3 ? static_cast<T *>(in[3].data) : nullptr,
            at.scale >= 0 ? static_cast<const T *>(in[at.scale].data)
                          : nullptr,
            micro, n, c, micro > 1,
            brain ? static_cast<BF16 *>(low) : nullptr,
            brain ? nullptr : static_cast<F16 *>(low));
    });
    // A skipped step still zeroes the accumulator, as on the CPU.
    if (typed && micro > 1 &&
        !check(cudaMemsetAsync(in[1].data, 0,
                               in[1].numElements() * dtypeSize(in[1].dtype),
                               stream),
               name, error))
      return false;
    break;
  }
  case Kernel::UpdateAdaLomo: {
    if (!ctx.applyUpdates)
      return true;
    if (sizeof(AdaLomoScratch) > l.workspaceBytes) {
      error = "update_adalomo needs more scratch than the workspace has";
      return false;
    }
    auto *scratch = static_cast<AdaLomoScratch *>(l.workspace);
    const TensorRef &w = in[0];
    int64_t n = w.numElements();
    int64_t cols = w.shape.empty() ? 1 : std::max<int64_t>(w.shape.back(), 1);
    int64_t rows = n / cols;
    bool factored = in.size() == 4;
    double lr = step.floats[0] * ctx.lrFactor, wd = step.floats[1];
    double beta2 = 1.0 - std::pow(static_cast<double>(ctx.step), -0.8);
    typed = dispatchFloat(w.dtype, [&](auto tag) {
      using T = decltype(tag);
      if (n == 0)
        return;
      T *pw = static_cast<T *>(w.data);
      const T *pg = static_cast<const T *>(in[1].data);
      T *v = factored ? nullptr : static_cast<T *>(in[2].data);
      T *row = factored ? static_cast<T *>(in[2].data) : nullptr;
      T *col = factored ? static_cast<T *>(in[3].data) : nullptr;
      if (factored) {
        adaLomoRows<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
            pg, row, cols, beta2);
        adaLomoColumns<T><<<blocksFor(cols), kThreads, 0, stream>>>(
            pg, col, rows, cols, beta2);
        adaLomoRowMean<T><<<1, kThreads, 0, stream>>>(row, rows, scratch);
      } else {
        adaLomoSecondMoment<T><<<blocksFor(n), kThreads, 0, stream>>>(
            pg, v, n, beta2);
      }
      adaLomoPartials<T><<<kPartials, kThreads, 0, stream>>>(
          pw, pg, v, row, col, n, cols, scratch);
      adaLomoStep<<<1, kThreads, 0, stream>>>(n, lr, wd, scratch);
      adaLomoApply<T><<<blocksFor(n), kThreads, 0, stream>>>(
          pw, pg, v, row, col, n, cols, scratch);
    });
    break;
  }
  case Kernel::Accumulate: {
    int64_t n = in[0].numElements();
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (n)
        accumulateKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(
            static_cast<T *>(in[0].data), static_cast<const T *>(in[1].data),
            n);
    });
    break;
  }
  case Kernel::Assign:
    if (!ctx.applyUpdates)
      return true;
    [[fallthrough]];
  case Kernel::Store:
    return check(cudaMemcpyAsync(in[0].data, in[1].data,
                                 in[0].numElements() * dtypeSize(in[0].dtype),
                                 cudaMemcpyDeviceToDevice, stream),
                 name, error);
  default:
    error = std::string("the CUDA backend has no ") + name + " kernel";
    return false;
  }
  if (!typed) {
    error = std::string("the CUDA backend has no ") + name + " kernel for " +
            dtypeName(in[0].dtype);
    return false;
  }
  return launched(name, error);
}

//===----------------------------------------------------------------------===//
// Matrix products through cuBLASLt
//===----------------------------------------------------------------------===//

namespace {

bool lt(cublasStatus_t s, const char *what, std::string &error) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return true;
  error = std::string("cuBLASLt ") + what + " failed (status " +
          std::to_string(static_cast<int>(s)) + ")";
  return false;
}

/// One algorithm per shape, picked once by the heuristic and kept.
struct PlanKey {
  int64_t m, n, k, batch, strideA, strideB;
  bool ta, tb;
  int type;
  bool operator<(const PlanKey &o) const {
    return std::tie(m, n, k, batch, strideA, strideB, ta, tb, type) <
           std::tie(o.m, o.n, o.k, o.batch, o.strideA, o.strideB, o.ta, o.tb,
                    o.type);
  }
};
struct CachedPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
};
std::mutex planMutex;
std::map<PlanKey, CachedPlan> plans;

} // namespace

namespace {
bool matmul(const Step &step, const TensorRef &a, const TensorRef &b,
            const TensorRef &out, LaunchContext &l, std::string &error) {
  artifact::MatMulShape shape;
  if (!artifact::matmulShape(a.shape, b.shape, step.ints, shape, error))
    return false;
  bool ta = shape.ta, tb = shape.tb;
  int64_t m = shape.m, k = shape.k, n = shape.n;
  int64_t batchA = product(shape.batchA), batchB = product(shape.batchB);
  int64_t batch = product(shape.batch);
  // Strided batches: each operand is either a full batch or one matrix
  // read by all (general batch broadcasting is left to the plan).
  if ((batchA != batch && batchA != 1) || (batchB != batch && batchB != 1) ||
      out.numElements() != batch * m * n) {
    error = "matmul: batch dimensions that broadcast other than all-or-one "
            "are not supported by the CUDA backend";
    return false;
  }
  if (m == 0 || n == 0)
    return true;
  cudaDataType_t type = a.dtype == DType::F32   ? CUDA_R_32F
                        : a.dtype == DType::F16 ? CUDA_R_16F
                                                : CUDA_R_16BF;
  int64_t strideA = batchA == 1 ? 0 : m * k, strideB = batchB == 1 ? 0 : k * n;
  // Row-major C[m,n] = A B is column-major C^T[n,m] = B^T A^T: cuBLASLt
  // multiplies B (as the first operand) by A.
  PlanKey key{m, n, k, batch, strideA, strideB, ta, tb, static_cast<int>(type)};
  CachedPlan plan;
  {
    std::lock_guard<std::mutex> lock(planMutex);
    auto it = plans.find(key);
    if (it != plans.end())
      plan = it->second;
  }
  auto handle = static_cast<cublasLtHandle_t>(l.cublasLt);
  if (!plan.desc) {
    // fp32 accumulate always (no TF32: parity runs compare with the CPU).
    if (!lt(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F,
                                     CUDA_R_32F),
            "descriptor", error))
      return false;
    cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                   &opB, sizeof(opB));
    cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                   &opA, sizeof(opA));
    // Column-major views of the row-major operands.
    uint64_t rowsB = tb ? k : n, colsB = tb ? n : k; // B^T as stored
    uint64_t rowsA = ta ? m : k, colsA = ta ? k : m;
    if (!lt(cublasLtMatrixLayoutCreate(&plan.a, type, rowsB, colsB, rowsB),
            "layout", error) ||
        !lt(cublasLtMatrixLayoutCreate(&plan.b, type, rowsA, colsA, rowsA),
            "layout", error) ||
        !lt(cublasLtMatrixLayoutCreate(&plan.c, type, n, m, n), "layout",
            error))
      return false;
    int32_t count = static_cast<int32_t>(batch);
    int64_t strideC = m * n;
    for (auto [layout, stride] :
         {std::pair{plan.a, strideB}, {plan.b, strideA}, {plan.c, strideC}}) {
      cublasLtMatrixLayoutSetAttribute(layout,
                                       CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                       &count, sizeof(count));
      cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof(stride));
    }
    cublasLtMatmulPreference_t pref;
    if (!lt(cublasLtMatmulPreferenceCreate(&pref), "preference", error))
      return false;
    uint64_t ws = l.workspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(
        handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1, &result,
        &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (!lt(s, "heuristic", error))
      return false;
    if (found == 0) {
      error = "cuBLASLt has no algorithm for this matmul";
      return false;
    }
    plan.algo = result.algo;
    std::lock_guard<std::mutex> lock(planMutex);
    plans[key] = plan;
  }
  float alpha = 1.0f, beta = 0.0f;
  return lt(cublasLtMatmul(handle, plan.desc, &alpha, b.data, plan.a, a.data,
                           plan.b, &beta, out.data, plan.c, out.data, plan.c,
                           &plan.algo, l.workspace, l.workspaceBytes,
                           streamOf(l)),
            "matmul", error);
}
} // namespace

} // namespace strata::cuda
