//===- FuseGradUpdate.cpp - Updates right after their gradient (LOMO) -----===//

#include "passes/Passes.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "strata-fuse-grad-update"

namespace strata {
#define GEN_PASS_DEF_FUSEGRADUPDATEPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

bool isUpdate(Operation *op) {
  return isa<train::UpdateSgdOp, train::UpdateMomentumOp, train::UpdateAdamWOp,
             train::UpdateAdaLomoOp, train::AccumulateOp>(op);
}

/// Ops that write state in place but are not parameter updates.
bool writesState(Operation *op) {
  return isUpdate(op) || isa<train::AssignOp>(op);
}

struct FuseGradUpdatePass
    : public strata::impl::FuseGradUpdatePassBase<FuseGradUpdatePass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      fuse(func);
  }

  /// Every op reading `v` or a view (reshape) of it.
  static void readersOf(Value v, SmallVectorImpl<Operation *> &readers) {
    for (Operation *user : v.getUsers()) {
      readers.push_back(user);
      if (auto view = dyn_cast<graph::ReshapeOp>(user))
        readersOf(view.getResult(), readers);
    }
  }

  void fuse(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = body.getTerminator();

    // The gradient-norm chain: pure ops that lead only to the grad_norm
    // result. They are hoisted next to their operands so that they do not
    // keep gradients alive.
    llvm::SetVector<Operation *> normChain;
    if (ret->getNumOperands() > 1) {
      SmallVector<Value> work{ret->getOperand(1)};
      while (!work.empty()) {
        Operation *op = work.pop_back_val().getDefiningOp();
        if (!op || !isa<graph::GraphDialect>(op->getDialect()) ||
            isa<graph::ParamOp, graph::ConstantOp>(op) || normChain.count(op))
          continue;
        // Only ops whose every user is in the chain or the return.
        bool onlyNorm = llvm::all_of(op->getUsers(), [&](Operation *u) {
          return u == ret || normChain.count(u) || isa<graph::ConstantOp>(u);
        });
        if (!onlyNorm && op->getResult(0) != ret->getOperand(1))
          continue;
        normChain.insert(op);
        for (Value v : op->getOperands())
          work.push_back(v);
      }
    }

    SmallVector<Operation *> updates;
    for (Operation &op : body)
      if (isUpdate(&op))
        updates.push_back(&op);

    // Block order through MLIR's own op order (kept up to date across the
    // moves below, mostly without renumbering): a position map rebuilt per
    // op moved made this quadratic in the graph's size.
    auto before = [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    };

    // Data parallel: the gradients' collectives (all-reduces, or
    // reduce-scatters with --shard-optimizer) in block order (this pass
    // moves neither them nor what they read).
    SmallVector<Operation *> allReduces;
    for (Operation &op : body)
      if (isa<train::AllReduceOp, train::ReduceScatterOp>(&op))
        allReduces.push_back(&op);

    // Hoist the norm chain in block order (each op after its operands; a
    // norm of a mean over the ranks past the later all-reduces, as an
    // update of one, so that the kernels after do not wait for it).
    {
      SmallVector<Operation *> chain;
      for (Operation &op : body)
        if (normChain.count(&op))
          chain.push_back(&op);
      for (Operation *op : chain) {
        Operation *after = nullptr;
        for (Value v : op->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (def && (!after || before(after, def)))
            after = def;
        }
        if (after)
          after = pastAllReduce(after, op, allReduces, before);
        if (after)
          op->moveAfter(after);
        else
          op->moveBefore(&body.front());
      }
    }

    Operation *firstBlocked = nullptr;
    for (Operation *update : updates) {
      // A sharded update (--shard-optimizer) moves with the copy of its
      // parameter's shard it works on and the all-gather that writes the
      // parameter back: what must not change before its last read is the
      // parameter.
      auto shard = update->getOperand(0).getDefiningOp<train::ShardOp>();
      train::AllGatherOp gather;
      if (shard)
        for (Operation *user : shard->getUsers())
          if (auto g = dyn_cast<train::AllGatherOp>(user))
            gather = g;
      if (!gather)
        shard = {};
      Operation *after = nullptr;
      auto later = [&](Operation *op) {
        if (op && op != update && op != shard && op != gather &&
            (!after || before(after, op)))
          after = op;
      };
      for (Value v : update->getOperands())
        later(v.getDefiningOp());
      if (shard)
        later(shard.getInput().getDefiningOp());
      // The parameter and its state must not change before their last read.
      SmallVector<Value> written{shard ? shard.getInput()
                                       : update->getOperand(0)};
      if (auto m = dyn_cast<train::UpdateMomentumOp>(update))
        written.push_back(m.getBuffer());
      if (auto a = dyn_cast<train::UpdateAdamWOp>(update)) {
        written.push_back(a.getExpAvg());
        written.push_back(a.getExpAvgSq());
      }
      if (auto a = dyn_cast<train::UpdateAdaLomoOp>(update))
        written.append(a.getStates().begin(), a.getStates().end());
      for (Value v : written) {
        SmallVector<Operation *> readers;
        readersOf(v, readers);
        for (Operation *r : readers)
          if (!writesState(r) || r == update)
            later(r == update ? nullptr : r);
      }
      // An earlier write of a stored tensor it reads or writes keeps its
      // order: the accumulation of the last micro-batch, then the update
      // that reads the accumulator. (Not of every operand: updates sharing
      // a clipping scale would then keep their block order.)
      SmallVector<Value> stored(written);
      for (Value v : update->getOperands())
        if (v.getDefiningOp<train::StateOp>())
          stored.push_back(v);
      for (Value v : stored)
        for (Operation *u : v.getUsers())
          if (writesState(u) && u != update && before(u, update))
            later(u);
      if (!after)
        continue;
      Operation *first = shard ? shard.getOperation() : update;
      after = pastAllReduce(after, first, allReduces, before);
      bool blocked = false;
      if (Value scale = updateScale(update))
        blocked = dependsOnEveryGradient(scale, updates);
      if (blocked) {
        ++numBlocked;
        if (!firstBlocked)
          firstBlocked = update;
      }
      if (before(after, first) && after->getNextNode() != first) {
        first->moveAfter(after);
        if (shard) {
          update->moveAfter(shard);
          gather->moveAfter(update);
        }
        if (!blocked)
          ++numFused;
      }
    }
    if (firstBlocked) {
      unsigned count = 0;
      for (Operation *u : updates)
        if (Value scale = updateScale(u))
          count += dependsOnEveryGradient(scale, updates);
      reportBlocked(firstBlocked, count);
    }
  }

  static int64_t bytesOf(Value v) {
    auto type = cast<ShapedType>(v.getType());
    return type.getNumElements() *
           std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  }

  /// Where an update (or a term of the gradient norm) whose last operand
  /// comes from an all-reduce goes: not right after it, where the kernel
  /// after would wait for the whole collective (the next gradients'
  /// compute stalled behind it), but after the all-reduces issued after it
  /// until they carry at least its bytes: the compute that makes those
  /// gradients runs while this one's collective is in flight (a device
  /// update then rarely waits; one on the CPU never held the compute back).
  /// The gradient lives that much longer.
  static bool isGradientCollective(Operation *op) {
    return op && isa<train::AllReduceOp, train::ReduceScatterOp>(op);
  }

  /// Of an update, or a sharded update's shard copy and all-gather.
  static bool isPlacedUpdate(Operation *op) {
    return isUpdate(op) || isa<train::ShardOp, train::AllGatherOp>(op);
  }

  template <typename Before>
  static Operation *pastAllReduce(Operation *after, Operation *update,
                                  ArrayRef<Operation *> allReduces,
                                  Before before) {
    Operation *own = isGradientCollective(after) ? after : nullptr;
    // A cast or view of the mean (the fp32 master's gradient) is as good.
    if (!own && after->getNumOperands() == 1 &&
        isa<graph::GraphDialect>(after->getDialect()) &&
        isGradientCollective(after->getOperand(0).getDefiningOp()))
      own = after->getOperand(0).getDefiningOp();
    if (!own || allReduces.empty())
      return after;
    auto next = llvm::partition_point(allReduces, [&](Operation *r) {
      return r == after || before(r, after);
    });
    // What a collective carries: its input (a reduce-scatter's result is
    // one rank's shard of it).
    int64_t need = bytesOf(own->getOperand(0)), carried = 0;
    Operation *anchor = after;
    for (; next != allReduces.end() && carried < need; ++next) {
      Operation *r = *next;
      if (!before(r, update))
        break;
      anchor = r;
      carried += bytesOf(r->getOperand(0));
    }
    // Behind the updates already placed there: they wait for earlier
    // collectives, so they go first.
    while (anchor->getNextNode() && anchor->getNextNode() != update &&
           isPlacedUpdate(anchor->getNextNode()))
      anchor = anchor->getNextNode();
    return anchor;
  }

  void reportBlocked(Operation *first, unsigned count) {
    first->emitRemark()
        << "cannot fuse " << count << " update" << (count == 1 ? "" : "s")
        << ": their scale depends on the global norm of this step's "
           "gradients (clipping, or the loss-scale overflow check), known "
           "only after the last one (use --clip-mode previous-step or "
           "two-pass; with loss scaling, two-pass; those that run on the "
           "CPU speculate instead, --speculate-updates)";
  }

  static Value updateScale(Operation *update) {
    if (auto u = dyn_cast<train::UpdateSgdOp>(update))
      return u.getScale();
    if (auto u = dyn_cast<train::UpdateMomentumOp>(update))
      return u.getScale();
    if (auto u = dyn_cast<train::UpdateAdamWOp>(update))
      return u.getScale();
    return {};
  }

  /// Whether `v` is computed from the gradients of all `updates`.
  static bool dependsOnEveryGradient(Value v, ArrayRef<Operation *> updates) {
    llvm::DenseSet<Value> seen;
    SmallVector<Value> work{v};
    while (!work.empty()) {
      Value x = work.pop_back_val();
      if (!seen.insert(x).second)
        continue;
      if (Operation *def = x.getDefiningOp())
        for (Value o : def->getOperands())
          work.push_back(o);
    }
    return llvm::all_of(updates, [&](Operation *u) {
      return u->getNumOperands() < 2 || seen.contains(u->getOperand(1));
    });
  }
};

} // namespace
