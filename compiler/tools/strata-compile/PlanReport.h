//===- PlanReport.h - What a plan would do, without its weights -*- C++ -*-===//
//
// strata-compile --emit=plan-report: the memory each tier would hold, the
// predicted step, the throughput it implies and what bounds it, for a
// model compiled against a machine profile. Nothing reads or writes the
// model's weights, so a plan for a 175B-parameter model and a machine
// Strata has never seen costs a compile, not the terabytes behind it.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_COMPILER_TOOLS_STRATA_COMPILE_PLANREPORT_H
#define STRATA_COMPILER_TOOLS_STRATA_COMPILE_PLANREPORT_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>

namespace strata::compile {

/// What the report says about the compile besides the plan itself.
struct PlanReportInfo {
  std::string sourceModel;
  /// "train", "grad" or "forward"; the optimizer's description.
  std::string mode, optimizer;
  /// The machine profile's path; empty: the documented defaults.
  std::string profile;
  /// The profile is the one strata-calibrate remembered (no --profile).
  bool profileRemembered = false;
  /// The budgets (0: none) and the number of SSD directories.
  uint64_t gpuMem = 0, cpuMem = 0;
  unsigned ssdDrives = 0;
  uint32_t accumulate = 1;
};

/// The matrix-product work (matmuls, fused attention's products) of one
/// optimizer step of `@main`: FLOPs of the kernels that run once, and of
/// those rerun to recompute activations; with `accumulate` micro-batches.
struct StepFlops {
  double model = 0, recomputed = 0;
};
StepFlops stepFlops(mlir::ModuleOp module, uint32_t accumulate);

/// The report of the planned `@main` of `module` (memory planned, step
/// predicted); an error line when there is none.
std::string formatPlanReport(mlir::ModuleOp module, const PlanReportInfo &info);

/// The predicted schedule of the planned `@main` (--strata-predict-time's
/// spans) as a Chrome trace (chrome://tracing, Perfetto): one track per
/// queue, one event per kernel, transfer or CPU update, named by its kernel
/// and the stored tensor it moves or updates. Empty when nothing was
/// predicted.
std::string formatPredictedTrace(mlir::ModuleOp module);

} // namespace strata::compile

#endif // STRATA_COMPILER_TOOLS_STRATA_COMPILE_PLANREPORT_H
