//===- GraphOps.h - Strata graph dialect ops -------------------*- C++ -*-===//

#ifndef STRATA_DIALECTS_GRAPH_GRAPHOPS_H
#define STRATA_DIALECTS_GRAPH_GRAPHOPS_H

#include "dialects/Graph/GraphDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Graph/GradientInterface.h.inc"

namespace strata::graph {

/// Verifies an op with the Broadcasting trait: data operands (all but an i1
/// condition of graph.select) share one element type and the result has the
/// NumPy broadcast shape of all operands.
mlir::LogicalResult verifyBroadcastingOp(mlir::Operation *op);

namespace OpTrait {
template <typename ConcreteType>
class Broadcasting
    : public mlir::OpTrait::TraitBase<ConcreteType, Broadcasting> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyBroadcastingOp(op);
  }
};
} // namespace OpTrait

} // namespace strata::graph

#define GET_OP_CLASSES
#include "dialects/Graph/GraphOps.h.inc"

#include <optional>

namespace strata::graph {
/// The value of `v` when it is a splat floating-point graph.constant.
std::optional<double> splatFloatValue(mlir::Value v);
} // namespace strata::graph

#endif // STRATA_DIALECTS_GRAPH_GRAPHOPS_H
