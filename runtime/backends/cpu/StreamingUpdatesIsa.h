// StreamingUpdatesIsa.h - What the per-ISA update files export to
// StreamingUpdates.cpp: a table of plain functions over plain data, so that
// nothing inline is shared between code built for different ISAs.

#ifndef STRATA_RUNTIME_BACKENDS_CPU_STREAMINGUPDATESISA_H
#define STRATA_RUNTIME_BACKENDS_CPU_STREAMINGUPDATESISA_H

#include "runtime/kernels/UpdateCoefficients.h"

#include <cstdint>

namespace strata::cpu::detail {

using Coefficients = math::UpdateCoefficients<float>;

/// One ISA's vector loops. Each updates the first n - n % width elements
/// and returns that count; the caller does the rest with the scalar code.
struct UpdateLoops {
  int64_t (*sgd)(float *w, const float *g, int64_t n, const Coefficients &c);
  int64_t (*momentum)(float *w, const float *g, float *buf, int64_t n,
                      const Coefficients &c);
  int64_t (*adamw)(float *w, const float *g, float *m, float *v, int64_t n,
                   const Coefficients &c);
};

/// Defined by StreamingUpdatesAvx2.cpp and StreamingUpdatesAvx512.cpp (x86-64
/// builds only).
extern const UpdateLoops kAvx2Loops, kAvx512Loops;

} // namespace strata::cpu::detail

#endif // STRATA_RUNTIME_BACKENDS_CPU_STREAMINGUPDATESISA_H
