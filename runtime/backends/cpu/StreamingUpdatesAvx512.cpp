// StreamingUpdatesAvx512.cpp - The update loops on 16-float AVX-512
// vectors. Built with -mavx512f -ffp-contract=off (no FMA: see
// StreamingUpdates.h); called only after cpuid says the CPU has AVX-512F.

#include "runtime/backends/cpu/StreamingUpdatesIsa.h"

#include <immintrin.h>

namespace {
using Vec = __m512;
constexpr int64_t kWidth = 16;
inline Vec vload(const float *p) { return _mm512_loadu_ps(p); }
inline void vstore(float *p, Vec x) { _mm512_storeu_ps(p, x); }
inline Vec vset(float x) { return _mm512_set1_ps(x); }
inline Vec vadd(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec vsub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
inline Vec vmul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec vdiv(Vec a, Vec b) { return _mm512_div_ps(a, b); }
inline Vec vsqrt(Vec a) { return _mm512_sqrt_ps(a); }
#include "runtime/backends/cpu/StreamingUpdatesBody.h"
} // namespace

const strata::cpu::detail::UpdateLoops strata::cpu::detail::kAvx512Loops = {
    sgdLoop, momentumLoop, adamwLoop};
