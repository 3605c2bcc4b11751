// UpdateCoefficients.h - The per-step constants of the optimizer updates.
//
// Plain data, apart from SharedMath.h's element functions, so that code
// built for another ISA (the vector update loops) can take it without
// including any inline function the baseline build also has.

#ifndef STRATA_RUNTIME_KERNELS_UPDATECOEFFICIENTS_H
#define STRATA_RUNTIME_KERNELS_UPDATECOEFFICIENTS_H

namespace strata::math {

/// Per-step constants of the updates, computed once on the host.
template <typename C> struct UpdateCoefficients {
  C scale;    // Loss-scale/clip factor (and 1/micro-batches).
  C lr;       // Base rate times the schedule's factor.
  C wd;       // SGD/momentum weight decay.
  C momentum; // Momentum.
  bool first; // Momentum's first step: the buffer starts at the gradient.
  C b1, b2, eps, decay, stepSize, bc2Sqrt; // AdamW.
};

} // namespace strata::math

#endif // STRATA_RUNTIME_KERNELS_UPDATECOEFFICIENTS_H
