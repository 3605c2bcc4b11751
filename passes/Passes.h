//===- Passes.h - Strata passes and pipelines ------------------*- C++ -*-===//

#ifndef STRATA_PASSES_PASSES_H
#define STRATA_PASSES_PASSES_H

#include "mlir/Pass/PassManager.h"

namespace strata {

/// Cleans up freshly imported graph IR: folds, canonicalizes and removes
/// duplicate and dead computations. Registered as `strata-graph-cleanup`.
void buildGraphCleanupPipeline(mlir::OpPassManager &pm);

/// Registers every Strata pass and named pipeline with the global registry
/// (for strata-opt).
void registerStrataPasses();

} // namespace strata

#endif // STRATA_PASSES_PASSES_H
