// KernelContract.h - What each kernel requires of its operands.
//
// The plan validator checks every step against its kernel's contract
// (operand and attribute counts, element types, shapes, in-bounds slicing
// and axes), so that a plan which passes cannot make a kernel read or write
// outside its operands, whatever bytes a damaged or hostile plan.bin holds.
// Values that only the data reveals (a gather index, a label) are still
// checked by the kernels at run time.

#ifndef STRATA_RUNTIME_ARTIFACT_KERNELCONTRACT_H
#define STRATA_RUNTIME_ARTIFACT_KERNELCONTRACT_H

#include "runtime/artifact/Plan.h"

#include <string>

namespace strata::artifact {

/// Checks `step` (whose operand slot indices are already known to exist)
/// against its kernel's contract; false with `why` saying what is wrong.
bool checkKernelContract(const Plan &plan, const Step &step, std::string &why);

} // namespace strata::artifact

#endif // STRATA_RUNTIME_ARTIFACT_KERNELCONTRACT_H
