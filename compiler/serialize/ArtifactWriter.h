//===- ArtifactWriter.h - exec IR to an artifact directory ------*- C++ -*-===//

#ifndef STRATA_COMPILER_SERIALIZE_ARTIFACTWRITER_H
#define STRATA_COMPILER_SERIALIZE_ARTIFACTWRITER_H

#include "runtime/artifact/Plan.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace strata {

struct ArtifactInfo {
  std::string sourceModel;
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
};

/// Serializes the planned exec function `@main` of `module` into the
/// artifact directory `dir` (plan.bin, params.bin, manifest.txt). The
/// directory is replaced atomically: readers see the old artifact or the new
/// one. Errors are emitted on the module.
mlir::LogicalResult writeArtifact(mlir::ModuleOp module, const std::string &dir,
                                  const ArtifactInfo &info);

} // namespace strata

#endif // STRATA_COMPILER_SERIALIZE_ARTIFACTWRITER_H
