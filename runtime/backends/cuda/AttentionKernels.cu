// AttentionKernels.cu - CUDA kernels: fused attention, a warp per query row
// (forward, dq) or key row (dk, dv).

#include "runtime/backends/cuda/KernelFamilies.cuh"

namespace strata::cuda::kernels {

namespace {

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
__device__ void addScaledRow(C (&acc)[kPerLane], C w, const T *row, int64_t n) {
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
template <typename C> __device__ C onlineSoftmaxStep(C s, C &m, C &l, C &p) {
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
__global__ void
attentionGradQueries(const T *q, const T *k, const T *v, const T *g, T *dq,
                     typename DT<T>::C *stats, AttentionArgs a) {
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
__global__ void
attentionGradKeys(const T *q, const T *k, const T *v, const T *g, T *dk, T *dv,
                  const typename DT<T>::C *stats, AttentionArgs a) {
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
  a = AttentionArgs{shape.b,
                    shape.h,
                    shape.t,
                    shape.s,
                    shape.d,
                    shape.dv,
                    {0, 0, 0, 0},
                    mask ? mask->data : nullptr,
                    static_cast<int>(step.ints[1]),
                    step.ints[0] != 0,
                    step.floats[0],
                    step.floats[1]};
  for (size_t d = 0; d < shape.maskStrides.size(); ++d)
    a.maskStrides[d] = shape.maskStrides[d];
  return true;
}

unsigned warpBlocks(int64_t warps) {
  return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

} // namespace

STRATA_KERNEL_FAMILY(launchAttention) {
  [[maybe_unused]] cudaStream_t stream = streamOf(l);
  [[maybe_unused]] const char *name = artifact::kernelName(step.kernel);
  bool typed = true;
  switch (step.kernel) {
  case Kernel::Attention: {
    AttentionArgs a;
    if (!attentionArgs(step, in, 3, a, error))
      return false;
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (int64_t rows = a.b * a.h * a.t)
        attentionForward<T>
            <<<warpBlocks(rows), 32 * kWarpsPerBlock, 0, stream>>>(
                static_cast<const T *>(in[0].data),
                static_cast<const T *>(in[1].data),
                static_cast<const T *>(in[2].data),
                static_cast<T *>(out[0].data), a);
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
        attentionGradQueries<T>
            <<<warpBlocks(rows), 32 * kWarpsPerBlock, 0, stream>>>(
                q, k, v, g, static_cast<T *>(out[0].data), stats, a);
      if (keys && !rows) { // No queries: nothing flows to k and v.
        cudaMemsetAsync(out[1].data, 0, out[1].numElements() * sizeof(T),
                        stream);
        cudaMemsetAsync(out[2].data, 0, out[2].numElements() * sizeof(T),
                        stream);
      }
      if (keys && rows)
        attentionGradKeys<T>
            <<<warpBlocks(keys), 32 * kWarpsPerBlock, 0, stream>>>(
                q, k, v, g, static_cast<T *>(out[1].data),
                static_cast<T *>(out[2].data), stats, a);
    });
    break;
  }
  default:
    return std::nullopt;
  }
  return finishLaunch(typed, name, in, error);
}

} // namespace strata::cuda::kernels
