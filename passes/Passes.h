//===- Passes.h - Strata passes and pipelines ------------------*- C++ -*-===//

#ifndef STRATA_PASSES_PASSES_H
#define STRATA_PASSES_PASSES_H

#include "dialects/Exec/ExecDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace strata {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// Cleans up freshly imported graph IR: folds, canonicalizes and removes
/// duplicate and dead computations. Registered as `strata-graph-cleanup`.
void buildGraphCleanupPipeline(mlir::OpPassManager &pm);

/// Lowers cleaned-up graph IR of a forward program to planned exec IR.
/// Registered as `strata-forward-to-exec`.
void buildForwardToExecPipeline(mlir::OpPassManager &pm);

/// Registers every Strata pass and named pipeline with the global registry
/// (for strata-opt).
void registerPassesAndPipelines();

} // namespace strata

#endif // STRATA_PASSES_PASSES_H
