//===- Autodiff.cpp - Reverse-mode differentiation of the loss ------------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/Passes.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#define DEBUG_TYPE "strata-autodiff"

namespace strata {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;

namespace {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<ShapedType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

struct AutodiffPass : public strata::impl::AutodiffPassBase<AutodiffPass> {
  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!func) {
      getOperation().emitError("no @main function");
      return signalPassFailure();
    }
    if (failed(differentiate(func)))
      signalPassFailure();
  }

  LogicalResult differentiate(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() == 0)
      return func.emitError("autodiff needs the loss as the first result");
    Value loss = ret.getOperand(0);
    auto lossType = cast<RankedTensorType>(loss.getType());
    if (lossType.getRank() != 0 || !isa<FloatType>(lossType.getElementType()))
      return func.emitError("the loss must be a float scalar, it is ")
             << lossType;

    // Forward: which values depend on a trainable parameter.
    llvm::DenseSet<Value> active;
    SmallVector<ParamOp> params;
    for (Operation &op : body) {
      if (auto param = dyn_cast<ParamOp>(op)) {
        if (param.getTrainable()) {
          active.insert(param.getResult());
          params.push_back(param);
        }
        continue;
      }
      if (!isa<GradientOpInterface>(op))
        continue;
      bool anyActive = llvm::any_of(
          op.getOperands(), [&](Value v) { return active.contains(v); });
      if (!anyActive)
        continue;
      for (Value r : op.getResults())
        if (isFloatTensor(r))
          active.insert(r);
    }
    if (!active.contains(loss))
      return func.emitError("the loss does not depend on any trainable "
                            "parameter (are they all frozen?)");

    // Reverse: accumulate gradients. Everything built from here on is the
    // backward pass; it is tagged so the memory report can tell it apart.
    llvm::DenseSet<Operation *> forwardOps;
    for (Operation &op : body)
      forwardOps.insert(&op);
    OpBuilder b(ret);
    llvm::DenseMap<Value, Value> grads;
    auto accumulate = [&](Value v, Value g, Location loc) {
      auto it = grads.find(v);
      if (it == grads.end()) {
        grads[v] = g;
        return;
      }
      it->second = b.create<AddOp>(loc, v.getType(), it->second, g);
    };
    APFloat oneValue(1.0);
    bool losesInfo;
    oneValue.convert(
        cast<FloatType>(lossType.getElementType()).getFloatSemantics(),
        APFloat::rmNearestTiesToEven, &losesInfo);
    auto one = b.create<ConstantOp>(loss.getLoc(), lossType,
                                    DenseElementsAttr::get(lossType, oneValue));
    markers::setSeed(one);
    grads[loss] = one;
    SmallVector<Operation *> forward;
    for (Operation &op : body)
      forward.push_back(&op);
    for (Operation *op : llvm::reverse(forward)) {
      if (op->getNumResults() != 1 || !active.contains(op->getResult(0)))
        continue;
      auto it = grads.find(op->getResult(0));
      if (it == grads.end())
        continue;
      if (isa<ParamOp>(op))
        continue;
      auto rule = dyn_cast<GradientOpInterface>(op);
      if (!rule)
        return op->emitError("no gradient rule for ") << op->getName();
      SmallVector<Value> operandGrads;
      b.setInsertionPoint(ret);
      if (failed(rule.buildGradients(b, it->second, operandGrads)))
        return failure();
      if (operandGrads.size() != op->getNumOperands())
        return op->emitError("gradient rule returned ")
               << operandGrads.size() << " gradients for "
               << op->getNumOperands() << " operands";
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
        if (g && active.contains(operand))
          accumulate(operand, g, op->getLoc());
    }

    // The gradients become results.
    SmallVector<Value> results{loss};
    SmallVector<Type> types{loss.getType()};
    SmallVector<DictionaryAttr> attrs{func.getResultAttrDict(0)};
    for (ParamOp param : params) {
      auto it = grads.find(param.getResult());
      if (it == grads.end())
        continue;
      results.push_back(it->second);
      types.push_back(it->second.getType());
      attrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(graph::GraphDialect::GradOfAttrHelper::getNameStr(),
                         param.getNameAttr())));
      ++numGradients;
    }
    b.setInsertionPoint(ret);
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    for (Operation &op : body)
      if (!forwardOps.contains(&op) && !isa<func::ReturnOp>(op))
        markers::setBackward(&op);
    func.setFunctionType(
        b.getFunctionType(func.getFunctionType().getInputs(), types));
    func.setAllResultAttrs(attrs);
    return success();
  }
};

} // namespace
