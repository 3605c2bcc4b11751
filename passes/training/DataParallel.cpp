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
// With shard-parameters (ZeRO stage 3) each trainable parameter becomes
// this rank's shard of it (graph.param with shard_ranks), and its readers
// read a train.unshard of it instead: one placed before its first reader
// in the forward pass, another before its first one in the backward pass,
// so that the whole parameter lives only while a pass reads it. A
// low-precision read (autocast's cast of the parameter) is a cast of the
// shard, gathered at the low precision: half the bytes.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/GraphOps.h"
#include "dialects/Strata/StrataDialect.h"
#include "dialects/Train/TrainDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

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
      if (shardOptimizer || shardParameters) {
        getOperation().emitError()
            << (shardParameters ? "shard-parameters shards the parameters"
                                : "shard-optimizer shards the optimizer")
            << " over the data-parallel ranks: it needs data-parallel of 2 "
               "or more";
        return signalPassFailure();
      }
      return;
    }
    // A sharded parameter is updated where it is stored, by this rank's
    // shard of its gradient: sharded parameters shard the optimizer too.
    if (shardParameters)
      shardOptimizer = true;
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
      if (failed(average(func)) ||
          (shardParameters && failed(shardParams(func))))
        return signalPassFailure();
  }

  /// An unshard of `shard` (whole: `type`) for `uses`, placed before the
  /// first of their owners; part of the backward pass if they are.
  void gather(ArrayRef<OpOperand *> uses, Value shard, Type type,
              bool backward) {
    if (uses.empty())
      return;
    Operation *first = uses.front()->getOwner();
    for (OpOperand *use : uses)
      if (use->getOwner()->isBeforeInBlock(first))
        first = use->getOwner();
    OpBuilder b(first);
    auto whole = b.create<train::UnshardOp>(shard.getLoc(), type, shard,
                                            b.getI64IntegerAttr(dataParallel));
    if (backward)
      markers::setBackward(whole);
    for (OpOperand *use : uses)
      use->set(whole.getResult());
  }

  LogicalResult shardParams(func::FuncOp func) {
    Block &body = func.getBody().front();
    llvm::StringSet<> withGradient;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto of = func.getResultAttrOfType<StringAttr>(
              i, graph::GraphDialect::GradOfAttrHelper::getNameStr()))
        withGradient.insert(of.getValue());
    for (auto p : llvm::to_vector(body.getOps<graph::ParamOp>())) {
      // Frozen parameters (no gradient, no update) stay whole.
      if (!p.getTrainable() || !withGradient.contains(p.getName()))
        continue;
      if (!p.getInitialValueAttr())
        return p.emitError("parameter '")
               << p.getName() << "' has no initial value to shard";
      auto type = cast<RankedTensorType>(p.getType());
      int64_t c = (type.getNumElements() + dataParallel - 1) / dataParallel;
      OpBuilder b(p);
      b.setInsertionPointAfter(p);
      auto shard = b.create<graph::ParamOp>(
          p.getLoc(), RankedTensorType::get({c}, type.getElementType()),
          p.getNameAttr(), p.getTrainableAttr(), p.getInitialValueAttr(),
          b.getI64IntegerAttr(dataParallel));
      // The whole values read, each with the shard it is gathered from:
      // the parameter's, and each cast of it (a cast of the shard).
      SmallVector<std::pair<Value, Value>> reads = {
          {p.getResult(), shard.getResult()}};
      SmallVector<Operation *> casts;
      for (Operation *user : p->getUsers())
        if (auto narrow = dyn_cast<graph::CastOp>(user)) {
          auto to = cast<ShapedType>(narrow.getType()).getElementType();
          Value low = b.create<graph::CastOp>(
              narrow.getLoc(), RankedTensorType::get({c}, to), shard);
          reads.push_back({narrow.getResult(), low});
          casts.push_back(narrow);
        }
      for (auto [whole, part] : reads) {
        SmallVector<OpOperand *> forward, backward;
        for (OpOperand &use : whole.getUses()) {
          if (whole == p.getResult() &&
              llvm::is_contained(casts, use.getOwner()))
            continue;
          (markers::isBackward(use.getOwner()) ? backward : forward)
              .push_back(&use);
        }
        gather(forward, part, whole.getType(), /*backward=*/false);
        gather(backward, part, whole.getType(), /*backward=*/true);
      }
      for (Operation *narrow : casts)
        narrow->erase();
      p.erase();
    }
    return success();
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
