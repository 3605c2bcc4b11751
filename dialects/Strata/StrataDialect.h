//===- StrataDialect.h - Markers shared by every Strata dialect -*- C++ -*-===//
//
// The accessors of the `strata.*` markers (StrataDialect.td): the one place
// that knows their names.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECTS_STRATA_STRATADIALECT_H
#define STRATA_DIALECTS_STRATA_STRATADIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace strata {
// The generated helpers name the markers' attribute type unqualified.
using mlir::IntegerAttr;
using mlir::UnitAttr;
} // namespace strata

#include "dialects/Strata/StrataDialect.h.inc"

namespace strata {

/// A discardable attribute a dialect's ODS declares (`Helper` is the
/// generated XAttrHelper, e.g. exec::ExecDialect::ArenaBytesAttrHelper),
/// read from `op` (null when absent), written on it, or its name.
template <typename Helper> auto getDeclaredAttr(mlir::Operation *op) {
  return Helper(op->getContext()).getAttr(op);
}
template <typename Helper, typename A>
void setDeclaredAttr(mlir::Operation *op, A value) {
  Helper(op->getContext()).setAttr(op, value);
}
template <typename Helper>
mlir::StringAttr declaredName(mlir::MLIRContext *ctx) {
  return Helper(ctx).getName();
}

} // namespace strata

namespace strata::markers {

/// The op belongs to the backward pass.
bool isBackward(mlir::Operation *op);
void setBackward(mlir::Operation *op);

/// The op belongs to the optimizer step.
bool isOptimizer(mlir::Operation *op);
void setOptimizer(mlir::Operation *op);

/// A forward op rerun in the backward pass.
bool isRecomputed(mlir::Operation *op);
void setRecomputed(mlir::Operation *op);

/// The gradient seed of the loss.
bool isSeed(mlir::Operation *op);
void setSeed(mlir::Operation *op);

/// An op of the first backward pass of two-pass gradient clipping.
void setNormPass(mlir::Operation *op);

/// Whether `attr` is one of these markers (lowering and fusion carry them
/// over to the ops they create).
bool isMarker(mlir::NamedAttribute attr);

} // namespace strata::markers

#endif // STRATA_DIALECTS_STRATA_STRATADIALECT_H
