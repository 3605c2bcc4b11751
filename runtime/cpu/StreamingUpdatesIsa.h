// StreamingUpdatesIsa.h - What the per-ISA update files export to
// StreamingUpdates.cpp: plain functions over plain data, so that nothing
// inline is shared between code built for different ISAs.

#ifndef STRATA_RUNTIME_CPU_STREAMINGUPDATESISA_H
#define STRATA_RUNTIME_CPU_STREAMINGUPDATESISA_H

#include <cstdint>

namespace strata::cpu::detail {

/// math::UpdateCoefficients<float>, copied field by field.
struct UpdateScalars {
  float scale, lr, wd, momentum, b1, b2, eps, decay, stepSize, bc2Sqrt;
  bool first;
};

/// Each updates the first n - n % width elements and returns that count.
#define STRATA_UPDATE_ISA_DECLARATIONS(isa)                                   \
  namespace isa {                                                             \
  int64_t sgd(float *w, const float *g, int64_t n, const UpdateScalars &c);   \
  int64_t momentum(float *w, const float *g, float *buf, int64_t n,           \
                   const UpdateScalars &c);                                   \
  int64_t adamw(float *w, const float *g, float *m, float *v, int64_t n,      \
                const UpdateScalars &c);                                      \
  }
STRATA_UPDATE_ISA_DECLARATIONS(avx2)
STRATA_UPDATE_ISA_DECLARATIONS(avx512)
#undef STRATA_UPDATE_ISA_DECLARATIONS

} // namespace strata::cpu::detail

/// Defines the entry points of one ISA file from its loops.
#define STRATA_UPDATE_ISA_ENTRY_POINTS(isa)                                   \
  namespace strata::cpu::detail::isa {                                        \
  int64_t sgd(float *w, const float *g, int64_t n, const UpdateScalars &c) {  \
    return sgdLoop(w, g, n, c);                                               \
  }                                                                           \
  int64_t momentum(float *w, const float *g, float *buf, int64_t n,           \
                   const UpdateScalars &c) {                                  \
    return momentumLoop(w, g, buf, n, c);                                     \
  }                                                                           \
  int64_t adamw(float *w, const float *g, float *m, float *v, int64_t n,      \
                const UpdateScalars &c) {                                     \
    return adamwLoop(w, g, m, v, n, c);                                       \
  }                                                                           \
  }

#endif // STRATA_RUNTIME_CPU_STREAMINGUPDATESISA_H
