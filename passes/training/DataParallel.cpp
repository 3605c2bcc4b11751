//===- DataParallel.cpp - Gradients averaged over the data-parallel ranks -===//
//
// Every rank runs the same program on its own micro-batch. The gradient of
// the global batch's mean loss is the mean of the ranks' gradients (each of
// its rank's mean loss, over micro-batches of one size), so each gradient
// result of autodiff gets a train.all_reduce right after the op that makes
// it, and everything after (the norm, clipping, accumulation, the updates,
// a --mode grad output) reads the mean.
//
// With shard-optimizer (ZeRO stages 1 and 2) each gradient gets a
// train.reduce_scatter instead: the rank keeps only its shard of the mean,
// and the optimizer (--strata-attach-optimizer) updates only that shard of
// the parameter, with states of the shard's size.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/GraphOps.h"
#include "dialects/Strata/StrataDialect.h"
#include "dialects/Train/TrainDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_DATAPARALLELPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct DataParallelPass
    : public strata::impl::DataParallelPassBase<DataParallelPass> {
  using DataParallelPassBase::DataParallelPassBase;

  void runOnOperation() override {
    if (dataParallel < 1) {
      getOperation().emitError("data-parallel needs at least one rank, not ")
          << dataParallel;
      return signalPassFailure();
    }
    if (dataParallel == 1) {
      if (shardOptimizer) {
        getOperation().emitError("shard-optimizer shards the optimizer over "
                                 "the data-parallel ranks: it needs "
                                 "data-parallel of 2 or more");
        return signalPassFailure();
      }
      return;
    }
    if (ranksPerNode < 0 || ranksPerNode > dataParallel) {
      getOperation().emitError("ranks-per-node must be 0 (all ")
          << dataParallel << " ranks on one machine) or 1 to " << dataParallel
          << ", not " << ranksPerNode;
      return signalPassFailure();
    }
    int64_t perNode = ranksPerNode == 0 ? dataParallel : ranksPerNode;
    setDeclaredAttr<StrataDialect::RanksPerNodeAttrHelper>(
        getOperation(),
        IntegerAttr::get(IntegerType::get(&getContext(), 64), perNode));
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(average(func)))
        return signalPassFailure();
  }

  LogicalResult average(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    int64_t averaged = 0;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (!func.getResultAttr(
              i, graph::GraphDialect::GradOfAttrHelper::getNameStr()))
        continue;
      Value g = ret.getOperand(i);
      if (!isa<FloatType>(getElementTypeOrSelf(g.getType())))
        return func.emitError("gradient result ")
               << i << " is not floating-point: it cannot be averaged";
      // Right after the gradient is final, so that it overlaps the rest of
      // the backward pass (a block argument's at the start).
      OpBuilder b(func.getContext());
      if (Operation *def = g.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&body);
      Operation *mean;
      if (shardOptimizer) {
        auto type = cast<ShapedType>(g.getType());
        int64_t c = (type.getNumElements() + dataParallel - 1) / dataParallel;
        mean = b.create<train::ReduceScatterOp>(
            g.getLoc(), RankedTensorType::get({c}, type.getElementType()), g,
            b.getI64IntegerAttr(dataParallel));
      } else {
        mean = b.create<train::AllReduceOp>(g.getLoc(), g.getType(), g,
                                            b.getI64IntegerAttr(dataParallel));
      }
      // Part of the backward pass (two-pass clipping clones it into the
      // norm's pass, which then averages too).
      markers::setBackward(mean);
      ret.setOperand(i, mean->getResult(0));
      ++averaged;
    }
    if (averaged == 0)
      return func.emitError("data-parallel training needs gradients (run "
                            "--strata-autodiff first)");
    // The gradient results are now shards.
    if (shardOptimizer)
      func.setFunctionType(FunctionType::get(func.getContext(),
                                             func.getFunctionType().getInputs(),
                                             ret.getOperandTypes()));
    return success();
  }
};

} // namespace
