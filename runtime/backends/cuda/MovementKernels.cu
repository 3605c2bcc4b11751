// MovementKernels.cu - CUDA kernels: views (transpose, slice, broadcast),
// concat, trilu, gather and their gradients.

#include "runtime/backends/cuda/KernelFamilies.cuh"

namespace strata::cuda::kernels {

namespace {

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

/// compact_rows: one thread walks the mask twice (true positions, then the
/// others). The masks are NonZero's candidates (tokens x top-k at most):
/// short beside the products that follow.
__global__ void compactRowsKernel(const uint8_t *mask, int64_t *order,
                                  int64_t *count, int64_t n) {
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i)
    if (mask[i])
      order[k++] = i;
  *count = k;
  for (int64_t i = 0; i < n; ++i)
    if (!mask[i])
      order[k++] = i;
}

/// group_rows: one block walks the masks in turn, each thread a
/// contiguous chunk of positions; a block-wide scan of the chunks' counts
/// places each mask's positions in ascending order after the previous
/// mask's. A last pass places the positions no mask holds and flags a
/// position two masks hold. E passes of n/threads reads each: short beside
/// the grouped product that follows.
constexpr int kGroupThreads = 1024;
/// The masks' device addresses, passed by value with the launch (kernel
/// parameters hold up to 4 KiB).
constexpr size_t kMaxGroups = 256;
struct GroupMasks {
  const uint8_t *p[kMaxGroups];
};
/// Whether position i is placed in pass e: mask e holds there (e <
/// groups), or no mask does (e == groups; two masks holding there set
/// kGroupsOverlap in `flag` when given).
__device__ bool inPass(const GroupMasks &masks, int64_t groups, int64_t e,
                       int64_t i, int *flag) {
  if (e < groups)
    return masks.p[e][i] != 0;
  int held = 0;
  for (int64_t g = 0; g < groups; ++g)
    held += masks.p[g][i] != 0;
  if (held > 1 && flag)
    atomicOr(flag, static_cast<int>(kGroupsOverlap));
  return held == 0;
}

__global__ void groupRowsKernel(GroupMasks masks, int64_t groups, int64_t n,
                                int64_t *order, int64_t *offsets,
                                int64_t *count, int *flag) {
  __shared__ int64_t scan[kGroupThreads];
  __shared__ int64_t base;
  int t = threadIdx.x;
  int64_t chunk = (n + kGroupThreads - 1) / kGroupThreads;
  int64_t from = min(n, t * chunk), to = min(n, from + chunk);
  if (t == 0)
    base = 0;
  __syncthreads();
  // Pass e < groups: mask e's positions; pass `groups`: positions none
  // holds.
  for (int64_t e = 0; e <= groups; ++e) {
    int64_t mine = 0;
    for (int64_t i = from; i < to; ++i)
      mine += inPass(masks, groups, e, i, flag);
    scan[t] = mine;
    __syncthreads();
    for (int stride = 1; stride < kGroupThreads; stride *= 2) {
      int64_t add = t >= stride ? scan[t - stride] : 0;
      __syncthreads();
      scan[t] += add;
      __syncthreads();
    }
    int64_t at = base + scan[t] - mine;
    for (int64_t i = from; i < to; ++i)
      if (inPass(masks, groups, e, i, nullptr) && at < n)
        order[at++] = i;
    __syncthreads();
    if (t == 0) {
      offsets[e] = min(base, n);
      base += scan[kGroupThreads - 1];
      if (e == groups - 1)
        *count = min(base, n);
    }
    __syncthreads();
  }
}

bool viewCopy(const TensorRef &in, const TensorRef &out, const Shape &inStrides,
              int64_t base, LaunchContext &l, std::string &error) {
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

} // namespace

STRATA_KERNEL_FAMILY(launchMovement) {
  [[maybe_unused]] cudaStream_t stream = streamOf(l);
  [[maybe_unused]] const char *name = artifact::kernelName(step.kernel);
  bool typed = true;
  switch (step.kernel) {
  case Kernel::Copy:
    return check(cudaMemcpyAsync(out[0].data, in[0].data,
                                 out[0].numElements() * dtypeSize(out[0].dtype),
                                 cudaMemcpyDeviceToDevice, stream),
                 "copy", error);
  case Kernel::CompactRows:
    compactRowsKernel<<<1, 1, 0, stream>>>(
        static_cast<const uint8_t *>(in[0].data),
        static_cast<int64_t *>(out[0].data),
        static_cast<int64_t *>(out[1].data), in[0].numElements());
    return launched(name, error);
  case Kernel::GroupRows: {
    if (in.size() > kMaxGroups) {
      error = "group_rows: more than " + std::to_string(kMaxGroups) +
              " masks on the CUDA backend";
      return false;
    }
    GroupMasks masks{};
    for (size_t e = 0; e < in.size(); ++e)
      masks.p[e] = static_cast<const uint8_t *>(in[e].data);
    groupRowsKernel<<<1, kGroupThreads, 0, stream>>>(
        masks, int64_t(in.size()), out[0].numElements(),
        static_cast<int64_t *>(out[0].data),
        static_cast<int64_t *>(out[1].data),
        static_cast<int64_t *>(out[2].data), l.errorFlag);
    return launched(name, error);
  }
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
              static_cast<const W *>(t.data), static_cast<W *>(out[0].data), n,
              ix, at * dst[axis]);
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
              static_cast<const I *>(in[1].data), static_cast<W *>(out[0].data),
              n, count, dim, inner, l.errorFlag);
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
          gatherGradKernel<T, I>
              <<<blocksFor(outer * inner), kThreads, 0, stream>>>(
                  static_cast<const T *>(in[0].data),
                  static_cast<const I *>(in[1].data),
                  static_cast<T *>(out[0].data), outer, count, dim, inner,
                  l.errorFlag);
      };
      in[1].dtype == DType::I32 ? go(int32_t{}) : go(int64_t{});
    });
    break;
  }
  default:
    return std::nullopt;
  }
  return finishLaunch(typed, name, in, error);
}

} // namespace strata::cuda::kernels
