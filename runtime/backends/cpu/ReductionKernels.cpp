// ReductionKernels.cpp - CPU kernels: reductions and normalisations.

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

/// The sum of `n` values (squared when `square`) in double over eight
/// lanes, value i in lane i % 8, the lanes combined pairwise at the end:
/// independent additions instead of one chain of dependent ones (which the
/// adder's latency bounds). The bits depend on the values and n alone.
template <typename T> double laneSum(const T *p, int64_t n, bool square) {
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
  std::vector<int64_t> axes(ints.begin(),
                            ints.empty() ? ints.end() : ints.end() - 1);
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
    using Acc = std::conditional_t<
        std::is_floating_point_v<C>, double,
        std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>>;
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
          partial[t] =
              rangeAcc(pi + o * count + c0, std::min(kChunk, count - c0));
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
      parallelFor(outCount, rowsPerTask(count, kParallelGrain),
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
          int64_t c0 = blk * kColumns, n = std::min(kColumns, outCount - c0);
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
    parallelFor(
        outer * inner, rowsPerTask(dim, 8192), [&](int64_t b, int64_t e) {
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
                y[j * inner] = Traits<T>::store(
                    (Traits<T>::load(x[j * inner]) - mx) - logSum);
            } else {
              double invSum = 1.0 / sum;
              for (int64_t j = 0; j < dim; ++j)
                y[j * inner] =
                    Traits<T>::store(static_cast<C>(exps[j] * invSum));
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
    parallelFor(outer, rowsPerTask(inner, 8192), [&](int64_t b, int64_t e) {
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
          double v =
              (static_cast<double>(Traits<T>::load(row[i])) - mean) * inv;
          y[i] = Traits<T>::store(static_cast<C>(v * scale[i] + bias[i]));
        }
      }
    });
  });
}

} // namespace strata::cpu::kernels
