// LossGradKernels.cpp - CPU kernels: losses and gradient kernels.

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

namespace strata::cpu::kernels {

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
    parallelFor(n, rowsPerTask(v, 4096), [&](int64_t b, int64_t e) {
      std::vector<C> exps;
      for (int64_t i = b; i < e; ++i) {
        int64_t l = labelAt(labels, i);
        if (l < 0)
          continue;
        const T *row = x + i * v;
        auto [mx, sum] = rowMaxAndExpSum(row, v, exps);
        rowLoss[i] =
            double(mx) + std::log(sum) - double(Traits<T>::load(row[l]));
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
    parallelFor(n, rowsPerTask(v, 4096), [&](int64_t b, int64_t e) {
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
        drow[l] =
            Traits<T>::store(static_cast<C>((exps[l] / sum - 1.0) * scale));
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
    parallelFor(rows, rowsPerTask(inner, 4096), [&](int64_t b, int64_t e) {
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

} // namespace strata::cpu::kernels
