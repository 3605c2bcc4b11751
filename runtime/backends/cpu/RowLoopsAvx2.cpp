// RowLoopsAvx2.cpp - The row loops on 8-float AVX vectors. Built with
// -mavx2 -ffp-contract=off (no FMA, so the bits equal the baseline's);
// called only after cpuid says the CPU has AVX2.

#include "runtime/backends/cpu/RowLoops.h"
#include "runtime/kernels/SharedMath.h"

namespace {
#include "runtime/backends/cpu/RowLoopsBody.h"
} // namespace

const strata::cpu::detail::RowLoops strata::cpu::detail::kAvx2RowLoops = {
    transcendentalLoop, expShiftedSumLoop};
