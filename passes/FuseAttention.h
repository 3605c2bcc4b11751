//===- FuseAttention.h - Attention chains to graph.attention ----*- C++ -*-===//

#ifndef STRATA_PASSES_FUSEATTENTION_H
#define STRATA_PASSES_FUSEATTENTION_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Location.h"

#include <optional>

namespace strata {

/// Replaces each score-softmax-value chain in `body` with graph.attention
/// (see FuseAttention.cpp); returns how many. `where` is set to the first
/// fused chain's location if it is unset.
unsigned fuseAttention(mlir::Block &body,
                       std::optional<mlir::Location> &where);

} // namespace strata

#endif // STRATA_PASSES_FUSEATTENTION_H
