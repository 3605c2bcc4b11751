// UpdateKernels.cpp - CPU kernels: optimizer updates (in place), with PyTorch's
// arithmetic order.

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
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace strata::cpu::kernels {

void accumulate(const TensorRef &acc, const TensorRef &g) {
  dispatchFloat(acc.dtype, [&](auto tag) {
    using T = decltype(tag);
    T *pa = static_cast<T *>(acc.data);
    const T *pg = static_cast<const T *>(g.data);
    parallelFor(acc.numElements(), kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        pa[i] =
            Traits<T>::store(Traits<T>::load(pa[i]) + Traits<T>::load(pg[i]));
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
        double r = beta2 * Traits<T>::load(row[i]) + (1 - beta2) * (s / cols);
        row[i] = Traits<T>::store(static_cast<C>(r));
        rowMeanSum += double(Traits<T>::load(row[i]));
      }
      for (int64_t j = 0; j < cols; ++j) {
        double c =
            beta2 * Traits<T>::load(col[j]) + (1 - beta2) * (colMean[j] / rows);
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
        double vi =
            beta2 * Traits<T>::load(v[i]) + (1 - beta2) * (gi * gi + eps1);
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

namespace {

/// Elements a speculative update copies into its keeps and then updates
/// in one go, while they are in cache: the copy costs the keeps' writes
/// and no second read.
constexpr int64_t kSpeculationBlock = int64_t(1) << 16;

/// memcpy, with the destination written past the caches where it is
/// aligned (x86-64): a keep is read again only on a step that clips, and a
/// cached store would first read the line it overwrites. Ends with a fence,
/// so that any thread sees the copy once this one hands on.
void streamCopy(char *dst, const char *src, size_t bytes) {
#if defined(__SSE2__)
  size_t head = (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16;
  if (bytes >= 4096 && head < bytes) {
    std::memcpy(dst, src, head);
    size_t body = (bytes - head) / 16 * 16;
    for (size_t i = head; i < head + body; i += 16)
      _mm_stream_si128(
          reinterpret_cast<__m128i *>(dst + i),
          _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i)));
    std::memcpy(dst + head + body, src + head + body, bytes - head - body);
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

/// Copies elements [from, to) of every tensor a speculative update writes
/// into its keep (`toKeeps`), or back.
void copyKeeps(const artifact::UpdateOperands &at,
               const std::vector<TensorRef> &in, bool toKeeps, int64_t from,
               int64_t to) {
  std::vector<size_t> written = artifact::keptInputs(at);
  for (size_t j = 0; j < written.size(); ++j) {
    const TensorRef &live = in[written[j]];
    const TensorRef &keep = in[static_cast<size_t>(at.keeps) + j];
    size_t size = dtypeSize(live.dtype);
    char *dst = static_cast<char *>(toKeeps ? keep.data : live.data);
    const char *src =
        static_cast<const char *>(toKeeps ? live.data : keep.data);
    if (toKeeps)
      streamCopy(dst + from * size, src + from * size,
                 static_cast<size_t>(to - from) * size);
    else
      std::memcpy(dst + from * size, src + from * size,
                  static_cast<size_t>(to - from) * size);
  }
}

/// The same, of whole tensors, on all threads.
void copyKeeps(const artifact::UpdateOperands &at,
               const std::vector<TensorRef> &in, bool toKeeps) {
  parallelFor(in[0].numElements(), kSpeculationBlock,
              [&](int64_t b, int64_t e) { copyKeeps(at, in, toKeeps, b, e); });
}

} // namespace

bool redoNeeded(const artifact::Step &step, const std::vector<TensorRef> &in) {
  if (!artifact::isUpdateKernel(step.kernel))
    return false;
  artifact::UpdateOperands at =
      artifact::updateOperands(step.kernel, in.size(), step.ints);
  if (at.speculation != artifact::Speculation::Redo || at.scale < 0)
    return false;
  bool redo = true;
  dispatchFloat(in[at.scale].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Traits<T>::C;
    // The speculative update ran with C(1): the same bits as this scale.
    redo =
        !(Traits<T>::load(*static_cast<const T *>(in[at.scale].data)) == C(1));
  });
  return redo;
}

void update(const artifact::Step &step, const std::vector<TensorRef> &in,
            int64_t micro, const KernelContext &ctx) {
  if (!ctx.applyUpdates)
    return;
  Kernel k = step.kernel;
  const std::vector<double> &hp = step.floats;
  artifact::UpdateOperands at =
      artifact::updateOperands(k, in.size(), step.ints);
  if (at.speculation == artifact::Speculation::Redo && ctx.speculating) {
    // The step clipped (or its norm is not finite): undo the speculative
    // update, then update with the scale (skipped whole at zero or NaN).
    if (!kernels::redoNeeded(step, in))
      return;
    copyKeeps(at, in, /*toKeeps=*/false);
  } else if (at.speculation == artifact::Speculation::Speculate &&
             !ctx.speculating) {
    return; // The redo is the update this step.
  }
  bool keep = at.speculation == artifact::Speculation::Speculate;
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
    C scale = scaleRef
                  ? Traits<T>::load(*static_cast<const T *>(scaleRef->data))
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
      auto run = [&](int64_t b, int64_t e) {
        LowCopy part = low;
        if (part.data)
          part.data += b;
        if (k == Kernel::UpdateSgd)
          sgdF32(w + b, g + b, e - b, c, part);
        else if (k == Kernel::UpdateMomentum)
          momentumF32(w + b, g + b, static_cast<float *>(in[2].data) + b, e - b,
                      c, part);
        else
          adamwF32(w + b, g + b, static_cast<float *>(in[2].data) + b,
                   static_cast<float *>(in[3].data) + b, e - b, c, part);
      };
      if (!keep) {
        run(0, n);
        return;
      }
      // Block by block on all threads (the kernels' own parallelFor runs
      // inline): the old values to the keeps, then the update.
      parallelFor(n, kSpeculationBlock, [&](int64_t b, int64_t e) {
        for (int64_t x = b; x < e; x += kSpeculationBlock) {
          int64_t y = std::min(e, x + kSpeculationBlock);
          copyKeeps(at, in, /*toKeeps=*/true, x, y);
          run(x, y);
        }
      });
      return;
    }
    if (keep)
      copyKeeps(at, in, /*toKeeps=*/true);
    if (k == Kernel::UpdateSgd) {
      parallelFor(n, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          w[i] = Traits<T>::store(math::sgdElement<C>(
              Traits<T>::load(w[i]), Traits<T>::load(g[i]), c));
      });
    } else if (k == Kernel::UpdateMomentum) {
      T *buf = static_cast<T *>(in[2].data);
      parallelFor(n, kParallelGrain, [&](int64_t b, int64_t e) {
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
      parallelFor(n, kParallelGrain, [&](int64_t b, int64_t e) {
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

} // namespace strata::cpu::kernels
