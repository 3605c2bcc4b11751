// MemoryReport.h - The planned memory of an artifact, by class, for people.

#ifndef STRATA_RUNTIME_ARTIFACT_MEMORYREPORT_H
#define STRATA_RUNTIME_ARTIFACT_MEMORYREPORT_H

#include "runtime/artifact/Plan.h"

#include <string>

namespace strata::artifact {

/// A table of the plan's memory by class: parameters, optimizer states and
/// constants (parameter region), and the device arena's peak split into the
/// activations, gradients and workspace live at that moment.
std::string formatMemoryReport(const Plan &plan);

/// The schedule's floor the compiler's cost model recorded: when the
/// backward pass starts, the busiest queue's work after that, and the rest
/// of the step ("140296.869 ms (the backward pass starts at ...); the
/// other ..."). Empty where the plan has none, or where it is within 2% of
/// the busiest resource (then the order of the work costs little).
std::string formatScheduleFloor(const Plan &plan);

} // namespace strata::artifact

#endif // STRATA_RUNTIME_ARTIFACT_MEMORYREPORT_H
