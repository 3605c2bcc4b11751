// RowMath.h - Row helpers the CPU kernels share (softmax, cross-entropy,
// attention).

#ifndef STRATA_RUNTIME_CPU_ROWMATH_H
#define STRATA_RUNTIME_CPU_ROWMATH_H

#include "runtime/cpu/ElementTypes.h"
#include "runtime/cpu/SharedMath.h"

#include <cstdint>
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

/// d = tanh(a), the tanh GELU of a, or its derivative times b (`k`: Tanh,
/// Gelu or GeluGrad), over `n` values: floats four at a time
/// (math::Float4, each lane doing the scalar operations, so the same bits
/// either way), other compute types one at a time.
template <typename C>
inline void tanhFamily(artifact::Kernel k, const C *a, const C *b, C *d,
                       int64_t n) {
  using artifact::Kernel;
  int64_t j = 0;
  if constexpr (std::is_same_v<C, float>) {
    using F4 = math::Float4;
    for (; j + 4 <= n; j += 4) {
      F4 x = math::load4(a + j);
      F4 y = k == Kernel::Tanh   ? math::tanh_(x)
             : k == Kernel::Gelu ? math::geluTanh<F4, float>(x)
                                 : math::geluTanhDerivative<F4, float>(x) *
                                       math::load4(b + j);
      math::store4(d + j, y);
    }
  }
  for (; j < n; ++j)
    d[j] = k == Kernel::Tanh   ? math::tanh_(a[j])
           : k == Kernel::Gelu ? math::geluTanh<C>(a[j])
                               : math::geluTanhDerivative<C>(a[j]) * b[j];
}

} // namespace strata::cpu

#endif // STRATA_RUNTIME_CPU_ROWMATH_H
