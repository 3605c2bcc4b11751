// StreamingUpdates.h - The fp32 optimizer updates on the host CPU, in one
// streaming pass, vectorised (AVX-512 or AVX2, chosen at run time) and
// threaded.
//
// Each element gets exactly the operations of math::sgdElement,
// momentumElement and adamwElement (SharedMath.h), in the same order and
// without fused multiply-adds (the vector files are built with
// -ffp-contract=off and use separate multiply and add intrinsics), so the
// bits equal the scalar CPU kernels' and the CUDA kernels' (built with
// -fmad=false): an update moved between the device and the CPU never
// changes the training. Multiply, add, divide and square root
// are correctly rounded in every ISA, which is what makes that hold.

#ifndef STRATA_RUNTIME_BACKENDS_CPU_STREAMINGUPDATES_H
#define STRATA_RUNTIME_BACKENDS_CPU_STREAMINGUPDATES_H

#include "runtime/kernels/SharedMath.h"

#include <cstdint>

namespace strata::cpu {

/// The vector width the updates use on this CPU.
enum class UpdateIsa { Scalar, Avx2, Avx512 };

/// The widest the CPU supports, or the narrower one STRATA_CPU_ISA names
/// (scalar, avx2, avx512; a wider one than the CPU has is refused with a
/// message on stderr, once). Read once.
UpdateIsa updateIsa();
const char *updateIsaName(UpdateIsa isa);
/// Whether this CPU can run `isa`.
bool cpuSupports(UpdateIsa isa);

/// The low-precision copy of the weights the model reads (mixed
/// precision): n bf16 or fp16 values an update overwrites with its new
/// weights, rounded to nearest even, chunk by chunk while they are in
/// cache. No data: none.
struct LowCopy {
  uint16_t *data = nullptr;
  bool brain = true; ///< bf16; false: fp16.
};

/// w, g (and buf / m, v) of n floats, updated in place on all threads.
void sgdF32(float *w, const float *g, int64_t n,
            const math::UpdateCoefficients<float> &c, LowCopy low = {},
            UpdateIsa isa = updateIsa());
void momentumF32(float *w, const float *g, float *buf, int64_t n,
                 const math::UpdateCoefficients<float> &c, LowCopy low = {},
                 UpdateIsa isa = updateIsa());
void adamwF32(float *w, const float *g, float *m, float *v, int64_t n,
              const math::UpdateCoefficients<float> &c, LowCopy low = {},
              UpdateIsa isa = updateIsa());

/// The fp32 AdamW's rate on this machine, all threads: GB/s of the 28 bytes
/// a parameter it reads and writes (the median of 3 steps over `n`
/// parameters, after one untimed). For the machine profile.
double measureAdamwGBs(int64_t n = int64_t(1) << 24);

} // namespace strata::cpu

#endif // STRATA_RUNTIME_BACKENDS_CPU_STREAMINGUPDATES_H
