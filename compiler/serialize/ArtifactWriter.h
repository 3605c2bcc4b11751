//===- ArtifactWriter.h - exec IR to an artifact directory ------*- C++ -*-===//

#ifndef STRATA_COMPILER_SERIALIZE_ARTIFACTWRITER_H
#define STRATA_COMPILER_SERIALIZE_ARTIFACTWRITER_H

#include "runtime/artifact/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace strata {

struct ArtifactInfo {
  std::string sourceModel;
  /// onnx::graphFingerprint of the source model (0: none).
  uint64_t sourceFingerprint = 0;
  /// Matrix-product FLOPs of one step, and of its recomputation (the
  /// manifest states them: what a measured step rate is computed from).
  double stepFlops = 0, recomputedFlops = 0;
  std::string producer;
  std::string mode = "forward";
  artifact::Schedule schedule;
  std::string optimizer;
  uint32_t accumulate = 1;
  /// Training plans: what --data feeds as labels (Plan::labels).
  std::string labels;
  /// Directories of the SSD store, when the plan uses one.
  std::vector<std::string> ssdDirs;
  /// Store trainable float parameters as synthetic (mean, deviation and a
  /// seed; generated at load) instead of their values: a plan-only
  /// artifact small enough to carry to another machine.
  bool syntheticParams = false;
  /// --synthetic-init: parameters whose name (or, for a low-precision
  /// copy, whose master's name) matches a rule's glob are synthetic with
  /// the rule's mean and deviation; their stored values are never read.
  /// The first matching rule applies.
  struct InitRule {
    std::string glob;
    double mean = 0, stddev = 0;
  };
  std::vector<InitRule> syntheticInit;
};

/// Copies what the passes recorded on the planned `func` (memory by class,
/// the predicted step, the planner's and the offload's counts) into
/// `plan.memory`, and the sizes of its regions into `plan`: what the
/// memory report needs, without the program.
void summarizePlan(mlir::func::FuncOp func, artifact::Plan &plan);

/// Serializes the planned exec function `@main` of `module` into the
/// artifact directory `dir` (plan.bin, params.bin, manifest.txt). The
/// directory is replaced atomically: readers see the old artifact or the new
/// one. Errors are emitted on the module.
mlir::LogicalResult writeArtifact(mlir::ModuleOp module, const std::string &dir,
                                  const ArtifactInfo &info);

} // namespace strata

#endif // STRATA_COMPILER_SERIALIZE_ARTIFACTWRITER_H
