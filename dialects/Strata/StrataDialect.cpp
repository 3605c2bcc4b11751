//===- StrataDialect.cpp - Markers shared by every Strata dialect ---------===//

#include "dialects/Strata/StrataDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

#include "dialects/Strata/StrataDialect.cpp.inc"

using namespace mlir;

void strata::StrataDialect::initialize() {}

namespace strata::markers {

template <typename Helper> static bool has(Operation *op) {
  return Helper(op->getContext()).isAttrPresent(op);
}

template <typename Helper> static void set(Operation *op) {
  Helper(op->getContext()).setAttr(op, UnitAttr::get(op->getContext()));
}

bool isBackward(Operation *op) {
  return has<StrataDialect::BackwardAttrHelper>(op);
}
void setBackward(Operation *op) { set<StrataDialect::BackwardAttrHelper>(op); }
bool isOptimizer(Operation *op) {
  return has<StrataDialect::OptimizerAttrHelper>(op);
}
void setOptimizer(Operation *op) {
  set<StrataDialect::OptimizerAttrHelper>(op);
}
bool isRecomputed(Operation *op) {
  return has<StrataDialect::RecomputedAttrHelper>(op);
}
void setRecomputed(Operation *op) {
  set<StrataDialect::RecomputedAttrHelper>(op);
}
bool isSeed(Operation *op) { return has<StrataDialect::SeedAttrHelper>(op); }
void setSeed(Operation *op) { set<StrataDialect::SeedAttrHelper>(op); }
void setNormPass(Operation *op) { set<StrataDialect::NormPassAttrHelper>(op); }

bool isMarker(NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  return name.consume_front(StrataDialect::getDialectNamespace()) &&
         name.starts_with(".");
}

} // namespace strata::markers
