//===- GraphDialect.cpp - Strata graph dialect ----------------------------===//

#include "dialects/Graph/GraphDialect.h"
#include "dialects/Graph/GraphOps.h"

using namespace mlir;
using namespace strata::graph;

#include "dialects/Graph/GraphDialect.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Graph/GraphOps.cpp.inc"
      >();
}

Operation *GraphDialect::materializeConstant(OpBuilder &builder,
                                             Attribute value, Type type,
                                             Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}
