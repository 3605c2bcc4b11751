//===- AppendLoss.cpp - Make the function compute the training loss -------===//

#include "passes/Passes.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "strata-append-loss"

namespace strata {
#define GEN_PASS_DEF_APPENDLOSSPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct AppendLossPass
    : public strata::impl::AppendLossPassBase<AppendLossPass> {
  using AppendLossPassBase::AppendLossPassBase;

  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!func) {
      getOperation().emitError("no @main function");
      return signalPassFailure();
    }
    if (loss == "causal-lm") {
      if (failed(causalLm(func)))
        signalPassFailure();
    } else if (loss == "output") {
      if (failed(outputLoss(func)))
        signalPassFailure();
    } else {
      func.emitError("unknown loss '")
          << loss << "' (expected causal-lm or output)";
      signalPassFailure();
    }
  }

  /// Keeps only `loss` as the function's result.
  void returnOnly(func::FuncOp func, func::ReturnOp ret, Value loss) {
    OpBuilder b(ret);
    b.create<func::ReturnOp>(ret.getLoc(), loss);
    ret.erase();
    func.setFunctionType(
        b.getFunctionType(func.getFunctionType().getInputs(), loss.getType()));
    // The model's other outputs (its logits) are dropped with their names.
    func.setAllResultAttrs(ArrayRef<DictionaryAttr>{b.getDictionaryAttr(
        b.getNamedAttr(graph::GraphDialect::NameAttrHelper::getNameStr(),
                       b.getStringAttr("loss")))});
  }

  LogicalResult outputLoss(func::FuncOp func) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (ret.getNumOperands() == 0)
      return func.emitError("--loss output: the model has no output");
    Value loss = ret.getOperand(0);
    auto type = cast<RankedTensorType>(loss.getType());
    if (type.getRank() != 0 || !isa<FloatType>(type.getElementType()))
      return func.emitError("--loss output: the model's first output must "
                            "be a float scalar, it is ")
             << type;
    returnOnly(func, ret, loss);
    return success();
  }

  LogicalResult causalLm(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() == 0)
      return func.emitError("--loss causal-lm: the model has no output");
    Value logits = ret.getOperand(0);
    auto lt = cast<RankedTensorType>(logits.getType());
    BlockArgument ids;
    for (BlockArgument arg : body.getArguments()) {
      auto t = cast<RankedTensorType>(arg.getType());
      if (t.getRank() == 2 && isa<IntegerType>(t.getElementType()) &&
          !t.getElementType().isInteger(1)) {
        ids = arg;
        break;
      }
    }
    if (!ids || lt.getRank() != 3 || !isa<FloatType>(lt.getElementType()))
      return func.emitError(
                 "--loss causal-lm needs a model mapping token ids [B, T] "
                 "to logits [B, T, V]; its first output is ")
             << lt
             << " (use --loss output for a model that returns its "
                "own scalar loss)";
    auto it = cast<RankedTensorType>(ids.getType());
    if (it.getShape() != lt.getShape().drop_back())
      return func.emitError("--loss causal-lm: token ids ")
             << it << " and logits " << lt << " disagree on [B, T]";
    int64_t n = lt.getDimSize(0) * lt.getDimSize(1), v = lt.getDimSize(2);
    // The labels are the token ids shifted by one; the data loader provides
    // them as a second input of the same type.
    unsigned index = func.getNumArguments();
    func.insertArgument(
        index, it,
        DictionaryAttr::get(
            func.getContext(),
            {NamedAttribute(
                StringAttr::get(
                    func.getContext(),
                    graph::GraphDialect::NameAttrHelper::getNameStr()),
                StringAttr::get(func.getContext(), "labels"))}),
        func.getLoc());
    Value labels = body.getArgument(index);
    OpBuilder b(ret);
    Location loc = NameLoc::get(b.getStringAttr("loss"), func.getLoc());
    Value flatLogits = b.create<graph::ReshapeOp>(
        loc, RankedTensorType::get({n, v}, lt.getElementType()), logits);
    Value flatLabels = b.create<graph::ReshapeOp>(
        loc, RankedTensorType::get({n}, it.getElementType()), labels);
    Value loss = b.create<graph::CrossEntropyOp>(
        loc, RankedTensorType::get({}, lt.getElementType()), flatLogits,
        flatLabels);
    returnOnly(func, ret, loss);
    return success();
  }
};

} // namespace
