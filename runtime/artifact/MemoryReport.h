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

} // namespace strata::artifact

#endif // STRATA_RUNTIME_ARTIFACT_MEMORYREPORT_H
