// RowMath.h - Row helpers the CPU kernels share (softmax, cross-entropy,
// attention).

#ifndef STRATA_RUNTIME_BACKENDS_CPU_ROWMATH_H
#define STRATA_RUNTIME_BACKENDS_CPU_ROWMATH_H

#include "runtime/backends/cpu/ElementTypes.h"
#include "runtime/backends/cpu/RowLoops.h"
#include "runtime/kernels/SharedMath.h"

#include <cstdint>
#include <limits>
#include <type_traits>

namespace strata::cpu {

/// exp(x - shift) of `n` values `stride` apart into `out`, in double,
/// two at a time (math::fast::expCore; the lanes do the scalar code's
/// operations).
template <typename T>
inline void expShifted(const T *x, int64_t stride, int64_t n, double shift,
                       double *out) {
  using D2 = double __attribute__((vector_size(16)));
  using I2 = int64_t __attribute__((vector_size(16)));
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    D2 y = {double(Traits<T>::load(x[j * stride])) - shift,
            double(Traits<T>::load(x[(j + 1) * stride])) - shift};
    D2 e = math::fast::expCore<D2, I2>(y);
    out[j] = e[0];
    out[j + 1] = e[1];
  }
  for (; j < n; ++j)
    out[j] = math::fast::expCore<double, int64_t>(
        double(Traits<T>::load(x[j * stride])) - shift);
}

/// Four values `stride` apart, in float.
template <typename T>
inline math::Float4 load4Strided(const T *x, int64_t stride) {
  if constexpr (std::is_same_v<T, float>)
    if (stride == 1)
      return math::loadVec<math::Float4>(x);
  return math::Float4{Traits<T>::load(x[0]), Traits<T>::load(x[stride]),
                      Traits<T>::load(x[2 * stride]),
                      Traits<T>::load(x[3 * stride])};
}

/// The largest of `n` values `stride` apart in the compute type C (NaNs
/// skipped; -inf when there are none).
template <typename T, typename C = typename Traits<T>::C>
inline C rowMax(const T *x, int64_t stride, int64_t n) {
  C mx = -std::numeric_limits<C>::infinity();
  int64_t j = 0;
  if constexpr (std::is_same_v<C, float>) {
    math::Float4 m = math::Float4{} + mx;
    for (; j + 4 <= n; j += 4) {
      math::Float4 v = load4Strided(x + j * stride, stride);
      m = v > m ? v : m;
    }
    for (int l = 0; l < 4; ++l)
      mx = m[l] > mx ? m[l] : mx;
  }
  for (; j < n; ++j) {
    C v = Traits<T>::load(x[j * stride]);
    mx = v > mx ? v : mx;
  }
  return mx;
}

/// exp(x - shift) of `n` values `stride` apart into `out` (contiguous, in
/// the compute type C), returning their sum in double. Floats in float
/// (RowLoops.h: math::fast::expfCore, within two ulps of exp; x - shift
/// rounded to float first, as PyTorch's float softmax does; summed in eight
/// double lanes); doubles in double (math::fast::expCore). Either way the
/// bits depend only on the values and n.
template <typename T, typename C = typename Traits<T>::C>
inline double expShiftedSum(const T *x, int64_t stride, int64_t n, C shift,
                            C *out) {
  if constexpr (std::is_same_v<C, float>) {
    const float *in = out;
    if constexpr (std::is_same_v<T, float>)
      if (stride == 1)
        in = x;
    if (in == out) // Converted or gathered into `out` first.
      for (int64_t j = 0; j < n; ++j)
        out[j] = Traits<T>::load(x[j * stride]);
    return detail::rowLoops().expShiftedSum(in, n, shift, out);
  } else {
    expShifted(x, stride, n, double(shift), out);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += out[j];
    return sum;
  }
}

} // namespace strata::cpu

#endif // STRATA_RUNTIME_BACKENDS_CPU_ROWMATH_H
