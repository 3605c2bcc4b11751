// RowLoops.h - The float row loops behind the CPU's softmax, cross-entropy,
// attention, tanh, GELU, exp and sigmoid kernels, built once per ISA
// (RowLoopsBody.h in RowLoops.cpp at the baseline and in RowLoopsAvx2.cpp with
// -mavx2) and chosen at run time. Plain functions over plain data, so that
// nothing inline is shared between code built for different ISAs.
//
// Both builds run the same operations on vectors of eight floats (the
// baseline as two SSE halves), lane by lane, without fused multiply-adds:
// the bits do not depend on which one runs.

#ifndef STRATA_RUNTIME_BACKENDS_CPU_ROWLOOPS_H
#define STRATA_RUNTIME_BACKENDS_CPU_ROWLOOPS_H

#include "runtime/artifact/Plan.h"

#include <cstdint>

namespace strata::cpu::detail {

struct RowLoops {
  /// d = f(a) over n floats for the kernels with a vector form
  /// (hasVectorForm): Tanh, Exp, Sigmoid, the tanh GELU, and the tanh GELU's
  /// derivative times b.
  void (*transcendental)(artifact::Kernel k, const float *a, const float *b,
                         float *d, int64_t n);
  /// exp(x - shift) of n floats into `out` (math::fast::expfCore); returns
  /// their sum in double, value i added into lane i % 8 of eight, the lanes
  /// combined pairwise.
  double (*expShiftedSum)(const float *x, int64_t n, float shift, float *out);
};

/// Whether `transcendental` computes kernel k (`tanhGelu`: the GELU's
/// flag; the erf GELU has no vector form).
inline bool hasVectorForm(artifact::Kernel k, bool tanhGelu) {
  using artifact::Kernel;
  return k == Kernel::Tanh || k == Kernel::Exp || k == Kernel::Sigmoid ||
         ((k == Kernel::Gelu || k == Kernel::GeluGrad) && tanhGelu);
}

/// The loops for this CPU: AVX2 where it has it, unless STRATA_CPU_ISA says
/// scalar (StreamingUpdates.h reads it). Chosen once.
const RowLoops &rowLoops();

/// Defined by RowLoops.cpp (baseline) and RowLoopsAvx2.cpp (x86-64 only).
extern const RowLoops kBaselineRowLoops, kAvx2RowLoops;

} // namespace strata::cpu::detail

#endif // STRATA_RUNTIME_BACKENDS_CPU_ROWLOOPS_H
