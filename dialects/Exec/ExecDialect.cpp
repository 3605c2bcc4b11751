//===- ExecDialect.cpp - Strata exec dialect ------------------------------===//

#include "dialects/Exec/ExecDialect.h"

#include "runtime/artifact/Plan.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace strata::exec;

#include "dialects/Exec/ExecDialect.cpp.inc"

void ExecDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Exec/ExecOps.cpp.inc"
      >();
}

LogicalResult ParamOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError("value type ")
           << getValue().getType() << " does not match result type "
           << getType();
  return success();
}

LogicalResult KernelOp::verify() {
  strata::artifact::Kernel kernel;
  if (!strata::artifact::kernelByName(getKernel().str(), kernel))
    return emitOpError("unknown kernel '") << getKernel() << "'";
  return success();
}

LogicalResult ViewOp::verify() {
  auto in = cast<ShapedType>(getInput().getType());
  auto out = cast<ShapedType>(getType());
  if (in.getElementType() != out.getElementType() ||
      in.getNumElements() != out.getNumElements())
    return emitOpError("must keep the element type and count");
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Exec/ExecOps.cpp.inc"
