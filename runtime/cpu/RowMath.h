// RowMath.h - Row helpers the CPU kernels share (softmax, cross-entropy,
// attention).

#ifndef STRATA_RUNTIME_CPU_ROWMATH_H
#define STRATA_RUNTIME_CPU_ROWMATH_H

#include "runtime/cpu/ElementTypes.h"
#include "runtime/cpu/SharedMath.h"

#include <cstdint>

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

} // namespace strata::cpu

#endif // STRATA_RUNTIME_CPU_ROWMATH_H
