// ReductionKernels.cu - CUDA kernels: reductions, softmax and norms, a block
// per row with a fixed tree.

#include "runtime/backends/cuda/KernelFamilies.cuh"

namespace strata::cuda::kernels {

namespace {

/// Block b reduces, for output b / chunks, the reduced elements of chunk
/// b % chunks ([c * chunk, (c + 1) * chunk) of `count`). With one chunk it
/// writes the output itself; else its partial goes to `partial[b]` for
/// reduceFinish. The chunk size follows from the shape alone, never the
/// GPU, so the order of the sum, and its bits, are the same on every card.
template <typename T, typename A>
__global__ void reduceKernel(const T *in, T *out, A *partial, Indexer<1> keptIx,
                             Indexer<1> reducedIx, int64_t count, int64_t chunk,
                             int64_t chunks, bool isMax, bool mean, bool square,
                             A init) {
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
    y[j * inner] =
        DT<T>::store(logSoftmax ? v - logSum : math::exp_(v) * invSum);
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
__global__ void layerNormKernel(const T *x, const T *scale, const T *bias, T *y,
                                int64_t inner, Indexer<2> paramIx, double eps,
                                bool rms) {
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
    double dxhat =
        double(DT<T>::load(dyr[i])) * double(DT<T>::load(scale[off[0]]));
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
    double dxhat =
        double(DT<T>::load(dyr[i])) * double(DT<T>::load(scale[off[0]]));
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

} // namespace

STRATA_KERNEL_FAMILY(launchReduction) {
  [[maybe_unused]] cudaStream_t stream = streamOf(l);
  [[maybe_unused]] const char *name = artifact::kernelName(step.kernel);
  bool typed = true;
  switch (step.kernel) {
  case Kernel::ReduceSum:
  case Kernel::ReduceMean:
  case Kernel::ReduceMax:
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
      reduceKernel<T, A>
          <<<static_cast<unsigned>(outCount * chunks), kThreads, 0, stream>>>(
              static_cast<const T *>(in[0].data), static_cast<T *>(out[0].data),
              partial, keptIx, redIx, count, chunk, chunks, isMax, mean, square,
              init);
      if (chunks > 1)
        reduceFinish<T, A>
            <<<static_cast<unsigned>(outCount), kThreads, 0, stream>>>(
                partial, static_cast<T *>(out[0].data), count, chunks, isMax,
                mean, init);
    });
    break;
  }
  case Kernel::Softmax:
  case Kernel::LogSoftmax: {
    const Shape &s = in[0].shape;
    int64_t axis = step.ints[0];
    int64_t outer = product(s, 0, axis), dim = s[axis],
            inner = product(s, axis + 1);
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (outer * inner != 0 && dim != 0)
        softmaxKernel<T>
            <<<static_cast<unsigned>(outer * inner), kThreads, 0, stream>>>(
                static_cast<const T *>(in[0].data),
                static_cast<T *>(out[0].data), dim, inner,
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
        layerNormKernel<T>
            <<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
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
    auto ix =
        makeIndexer<1>(normalized, {broadcastStrides(in[1].shape, normalized)});
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
      layerNormGradRows<T>
          <<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
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
  default:
    return std::nullopt;
  }
  return finishLaunch(typed, name, in, error);
}

} // namespace strata::cuda::kernels
