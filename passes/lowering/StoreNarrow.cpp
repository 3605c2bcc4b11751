//===- StoreNarrow.cpp - Widening casts recomputed for the backward pass --===//
//
// See StoreNarrowPass in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_STORENARROWPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

unsigned elementBits(Value v) {
  Type t = cast<ShapedType>(v.getType()).getElementType();
  return t.isIntOrFloat() ? t.getIntOrFloatBitWidth() : 0;
}

struct StoreNarrowPass
    : public strata::impl::StoreNarrowPassBase<StoreNarrowPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func.getBody().hasOneBlock())
        run(func.getBody().front());
  }

  void run(Block &body) {
    for (auto kernel : llvm::to_vector(body.getOps<exec::KernelOp>())) {
      if (!kernel.isKernel(artifact::Kernel::Cast) ||
          markers::isBackward(kernel) || kernel.getNumResults() != 1)
        continue;
      Value wide = kernel.getResult(0), narrow = kernel.getInputs()[0];
      if (!isa<FloatType>(
              cast<ShapedType>(narrow.getType()).getElementType()) ||
          !isa<FloatType>(cast<ShapedType>(wide.getType()).getElementType()) ||
          elementBits(narrow) >= elementBits(wide))
        continue;
      // The backward readers, in program order, read a copy made right
      // before the first of them.
      Operation *first = nullptr;
      SmallVector<OpOperand *> backward;
      for (OpOperand &use : wide.getUses()) {
        Operation *user = use.getOwner();
        if (!markers::isBackward(user))
          continue;
        backward.push_back(&use);
        if (!first || user->isBeforeInBlock(first))
          first = user;
      }
      if (backward.empty())
        continue;
      OpBuilder b(first);
      Operation *again = b.clone(*kernel);
      markers::setBackward(again);
      for (OpOperand *use : backward)
        use->set(again->getResult(0));
      ++numRecomputed;
    }
  }
};

} // namespace
