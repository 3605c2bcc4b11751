// StreamingUpdatesAvx2.cpp - The update loops on 8-float AVX vectors.
// Built with -mavx2 -ffp-contract=off (no FMA: see StreamingUpdates.h);
// called only after cpuid says the CPU has AVX2.

#include "runtime/backends/cpu/StreamingUpdatesIsa.h"

#include <immintrin.h>

namespace {
using Vec = __m256;
constexpr int64_t kWidth = 8;
inline Vec vload(const float *p) { return _mm256_loadu_ps(p); }
inline void vstore(float *p, Vec x) { _mm256_storeu_ps(p, x); }
inline Vec vset(float x) { return _mm256_set1_ps(x); }
inline Vec vadd(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec vsub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
inline Vec vmul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec vdiv(Vec a, Vec b) { return _mm256_div_ps(a, b); }
inline Vec vsqrt(Vec a) { return _mm256_sqrt_ps(a); }
#include "runtime/backends/cpu/StreamingUpdatesBody.h"
} // namespace

const strata::cpu::detail::UpdateLoops strata::cpu::detail::kAvx2Loops = {
    sgdLoop, momentumLoop, adamwLoop};
