// RowLoops.cpp - The row loops at the baseline ISA, and the choice of
// loops for this CPU.

#include "runtime/backends/cpu/RowLoops.h"
#include "runtime/backends/cpu/StreamingUpdates.h"
#include "runtime/kernels/SharedMath.h"

namespace {
#include "runtime/backends/cpu/RowLoopsBody.h"
} // namespace

namespace strata::cpu::detail {

const RowLoops kBaselineRowLoops = {transcendentalLoop, expShiftedSumLoop};

const RowLoops &rowLoops() {
  static const RowLoops &chosen = [&]() -> const RowLoops & {
#ifdef STRATA_HAVE_UPDATE_ISAS
    if (updateIsa() != UpdateIsa::Scalar)
      return kAvx2RowLoops;
#endif
    return kBaselineRowLoops;
  }();
  return chosen;
}

} // namespace strata::cpu::detail
