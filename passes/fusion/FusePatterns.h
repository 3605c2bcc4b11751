//===- FusePatterns.h - Recognisers of --strata-fuse-patterns ---*- C++ -*-===//
//
// Each replaces, in `body`, the chains it recognises with a fused graph op
// and returns how many; `where` is set to the first one's location if it is
// unset (the pass's remark points there).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_PASSES_FUSION_FUSEPATTERNS_H
#define STRATA_PASSES_FUSION_FUSEPATTERNS_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Location.h"

#include <optional>

namespace strata {

/// Score-softmax-value chains to graph.attention (FuseAttention.cpp).
unsigned fuseAttention(mlir::Block &body, std::optional<mlir::Location> &where);

/// Layer norms written as reductions and elementwise ops to
/// graph.layer_norm (FuseNorm.cpp).
unsigned fuseLayerNorms(mlir::Block &body,
                        std::optional<mlir::Location> &where);

} // namespace strata

#endif // STRATA_PASSES_FUSION_FUSEPATTERNS_H
