// UpdateKernels.cu - CUDA kernels: optimizer updates in place, with the CPU's
// arithmetic (SharedMath.h).

#include "runtime/backends/cuda/KernelFamilies.cuh"

namespace strata::cuda::kernels {

namespace {

/// `low`: the low-precision copy of w the model reads (f32 w only), given
/// the new weights rounded to nearest even, as the CPU's update does.
template <typename T>
__global__ void updateKernel(Kernel k, T *w, T *g, T *s1, T *s2,
                             const T *scalePtr, int64_t micro, int64_t n,
                             math::UpdateCoefficients<typename DT<T>::C> c,
                             bool zeroGradient, BF16 *lowBrain, F16 *lowHalf) {
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
  double rowMean;     // Mean of the updated row statistics (factored).
  double step, decay; // The final step size and weight decay factor.
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
__global__ void adaLomoSecondMoment(const T *g, T *v, int64_t n, double beta2) {
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

} // namespace

STRATA_KERNEL_FAMILY(launchUpdate) {
  [[maybe_unused]] cudaStream_t stream = streamOf(l);
  [[maybe_unused]] const char *name = artifact::kernelName(step.kernel);
  bool typed = true;
  switch (step.kernel) {
  case Kernel::UpdateSgd:
  case Kernel::UpdateMomentum:
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
            at.scale >= 0 ? static_cast<const T *>(in[at.scale].data) : nullptr,
            micro, n, c, micro > 1, brain ? static_cast<BF16 *>(low) : nullptr,
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
        adaLomoSecondMoment<T>
            <<<blocksFor(n), kThreads, 0, stream>>>(pg, v, n, beta2);
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
  default:
    return std::nullopt;
  }
  return finishLaunch(typed, name, in, error);
}

} // namespace strata::cuda::kernels
