//===- FuseNorm.h - Decomposed layer norms to graph.layer_norm --*- C++ -*-===//

#ifndef STRATA_PASSES_FUSENORM_H
#define STRATA_PASSES_FUSENORM_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Location.h"

#include <optional>

namespace strata {

/// Replaces each layer norm written as reductions and elementwise ops in
/// `body` with graph.layer_norm (see FuseNorm.cpp); returns how many.
/// `where` is set to the first one's location if it is unset.
unsigned fuseLayerNorms(mlir::Block &body,
                        std::optional<mlir::Location> &where);

} // namespace strata

#endif // STRATA_PASSES_FUSENORM_H
