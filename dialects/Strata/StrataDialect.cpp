//===- StrataDialect.cpp - Markers shared by every Strata dialect ---------===//

#include "dialects/Strata/StrataDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

#include "dialects/Strata/StrataDialect.cpp.inc"

using namespace mlir;

void strata::StrataDialect::initialize() {}

namespace strata::markers {

/// Whether `op` carries the marker: with the helper the loaded dialect
/// keeps (the planner asks this of every op of every placement it scores,
/// and a helper made here would look its name up in the context each
/// time), else with one made now.
template <typename Helper>
static bool has(Operation *op, Helper (StrataDialect::*kept)()) {
  if (auto *dialect = op->getContext()->getLoadedDialect<StrataDialect>())
    return (dialect->*kept)().isAttrPresent(op);
  return Helper(op->getContext()).isAttrPresent(op);
}

template <typename Helper> static void set(Operation *op) {
  Helper(op->getContext()).setAttr(op, UnitAttr::get(op->getContext()));
}

bool isBackward(Operation *op) {
  return has(op, &StrataDialect::getBackwardAttrHelper);
}
void setBackward(Operation *op) { set<StrataDialect::BackwardAttrHelper>(op); }
bool isOptimizer(Operation *op) {
  return has(op, &StrataDialect::getOptimizerAttrHelper);
}
void setOptimizer(Operation *op) {
  set<StrataDialect::OptimizerAttrHelper>(op);
}
bool isRecomputed(Operation *op) {
  return has(op, &StrataDialect::getRecomputedAttrHelper);
}
void setRecomputed(Operation *op) {
  set<StrataDialect::RecomputedAttrHelper>(op);
}
bool isSeed(Operation *op) {
  return has(op, &StrataDialect::getSeedAttrHelper);
}
void setSeed(Operation *op) { set<StrataDialect::SeedAttrHelper>(op); }
void setNormPass(Operation *op) { set<StrataDialect::NormPassAttrHelper>(op); }

bool isMarker(NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  return name.consume_front(StrataDialect::getDialectNamespace()) &&
         name.starts_with(".");
}

} // namespace strata::markers
