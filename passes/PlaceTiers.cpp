//===- PlaceTiers.cpp - Parameters and state on device, host or SSD -------===//

#include "passes/ArenaRanges.h"
#include "passes/CostModel.h"
#include "passes/Passes.h"

#include "dialects/Exec/ExecDialect.h"
#include "runtime/artifact/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>

#define DEBUG_TYPE "strata-place-tiers"

namespace strata {
#define GEN_PASS_DEF_PLACETIERSPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// The operands an update-type kernel writes in place.
SmallVector<unsigned> inPlaceOperands(exec::KernelOp kernel) {
  StringRef name = kernel.getKernel();
  if (name == "update_sgd" || name == "accumulate")
    return {0};
  if (name == "update_momentum")
    return {0, 2};
  if (name == "update_adamw")
    return {0, 2, 3};
  if (name == "update_adalomo") {
    SmallVector<unsigned> all{0};
    for (unsigned k = 2; k < kernel.getInputs().size(); ++k)
      all.push_back(k);
    return all;
  }
  return {};
}

/// Each op's index in `body`.
llvm::DenseMap<Operation *, unsigned> positions(Block &body) {
  llvm::DenseMap<Operation *, unsigned> position;
  unsigned i = 0;
  for (Operation &op : body)
    position[&op] = i++;
  return position;
}

/// The uses of `value`, looking through views (a use of a view of `value`
/// is a use of `value`).
SmallVector<OpOperand *> usesThroughViews(Value value) {
  SmallVector<OpOperand *> uses;
  SmallVector<Value> pending{value};
  while (!pending.empty()) {
    Value v = pending.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      if (auto view = dyn_cast<exec::ViewOp>(use.getOwner()))
        pending.push_back(view.getResult());
      else
        uses.push_back(&use);
    }
  }
  return uses;
}

/// The uses of `value` (through views) in the backward pass.
SmallVector<OpOperand *> backwardUsesOf(Value value) {
  SmallVector<OpOperand *> uses = usesThroughViews(value);
  llvm::erase_if(uses, [](OpOperand *use) {
    return !use->getOwner()->hasAttr("strata.backward");
  });
  return uses;
}

/// The first (in program order) owner of `uses`.
Operation *earliestUser(ArrayRef<OpOperand *> uses,
                        const llvm::DenseMap<Operation *, unsigned> &position) {
  Operation *first = uses.front()->getOwner();
  for (OpOperand *use : uses)
    if (position.lookup(use->getOwner()) < position.lookup(first))
      first = use->getOwner();
  return first;
}

struct PlaceTiersPass : public strata::impl::PlaceTiersPassBase<PlaceTiersPass> {
  using PlaceTiersPassBase::PlaceTiersPassBase;

  MachineProfile machine;
  int64_t recomputedCount = 0, recomputedBytes = 0;

  void runOnOperation() override {
    for (StringRef opt : {StringRef(params), StringRef(states)})
      if (opt != "auto" && opt != "device" && opt != "host" && opt != "ssd") {
        getOperation().emitError("unknown tier '")
            << opt << "' (auto, device, host or ssd)";
        return signalPassFailure();
      }
    StringRef acts = activations;
    if (acts != "auto" && acts != "device" && acts != "host" && acts != "ssd" &&
        acts != "recompute") {
      getOperation().emitError("unknown activation placement '")
          << acts << "' (auto, device, host, ssd or recompute)";
      return signalPassFailure();
    }
    std::string error;
    if (!profile.empty() && !machine.read(profile, error)) {
      getOperation().emitError(error);
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(place(func)))
        return signalPassFailure();
  }

  /// Bytes the device arena needs, without any placement (a lower bound of
  /// the real plan's): the largest sum of live buffers at any op.
  static uint64_t liveArenaEstimate(Block &body, uint64_t alignment) {
    llvm::DenseMap<Value, std::pair<int64_t, int64_t>> life;
    int64_t index = 0;
    for (Operation &op : body) {
      for (Value v : op.getOperands()) {
        while (auto view = v.getDefiningOp<exec::ViewOp>())
          v = view.getInput();
        auto it = life.find(v);
        if (it != life.end())
          it->second.second = index;
      }
      if (isa<exec::InputOp, exec::KernelOp>(op))
        for (Value r : op.getResults())
          life[r] = {index, index};
      ++index;
    }
    std::vector<int64_t> delta(index + 2, 0);
    for (auto &[v, span] : life) {
      int64_t bytes = static_cast<int64_t>(
          artifact::alignUp(storageBytes(v.getType()), alignment));
      delta[span.first] += bytes;
      delta[span.second + 1] -= bytes;
    }
    int64_t live = 0, peak = 0;
    for (int64_t d : delta)
      peak = std::max(peak, live += d);
    return static_cast<uint64_t>(peak);
  }

  LogicalResult decide(func::FuncOp func, SmallVectorImpl<exec::ParamOp> &all) {
    Block &body = func.getBody().front();
    bool forced = params != "auto" || states != "auto";
    for (exec::ParamOp p : all) {
      if (p.getConstant())
        continue;
      StringRef choice = p.getState() ? StringRef(states) : StringRef(params);
      if (choice != "auto")
        p.setTier(choice);
    }
    for (exec::ParamOp p : all)
      if (p.getTier() == "ssd" && !hasSsd)
        return p.emitError("placed on the SSD, but no --ssd-dir was given");
    if (gpuMem == 0)
      return success();
    // Automatic placement under the device budget: optimizer state first,
    // then parameters, largest first; host while it fits, then SSD.
    // With an SSD tier every arena buffer is 4 KiB-aligned and padded.
    uint64_t arena = liveArenaEstimate(
        body, hasSsd ? artifact::kParamAlignment : artifact::kArenaAlignment);
    uint64_t resident = 0, largestMoved = 0, host = 0;
    for (exec::ParamOp p : all)
      if (p.getTier() == "device")
        resident += artifact::pagePadded(storageBytes(p.getType()));
    SmallVector<exec::ParamOp> candidates;
    for (exec::ParamOp p : all)
      if (!p.getConstant() && p.getTier() == "device" &&
          (p.getState() ? states == "auto" : params == "auto"))
        candidates.push_back(p);
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](exec::ParamOp a, exec::ParamOp b) {
                       if (a.getState() != b.getState())
                         return a.getState();
                       return storageBytes(a.getType()) > storageBytes(b.getType());
                     });
    // A fetched tensor needs a device copy while in use: budget for two of
    // the largest (the one in use and the next).
    auto need = [&] { return arena + resident + 2 * largestMoved; };
    for (exec::ParamOp p : candidates) {
      if (need() <= gpuMem)
        break;
      uint64_t bytes = artifact::pagePadded(storageBytes(p.getType()));
      bool toHost = cpuMem == 0 || host + bytes <= cpuMem;
      if (!toHost && !hasSsd)
        return func.emitError("the device budget (")
               << gpuMem << " bytes) needs tensors off the device, the host "
               << "budget is full and no --ssd-dir was given";
      p.setTier(toHost ? "host" : "ssd");
      host += toHost ? bytes : 0;
      resident -= bytes;
      largestMoved = std::max(largestMoved, bytes);
    }
    (void)forced;
    return success();
  }

  /// Forward values the backward pass reads: the candidates for swapping.
  static SmallVector<Value> swappable(Block &body) {
    SmallVector<Value> out;
    for (Operation &op : body) {
      auto kernel = dyn_cast<exec::KernelOp>(op);
      if (!kernel || kernel->hasAttr("strata.backward") ||
          kernel->hasAttr("strata.optimizer"))
        continue;
      for (Value r : kernel.getResults())
        if (!backwardUsesOf(r).empty())
          out.push_back(r);
    }
    return out;
  }

  /// Swaps `value` out to `tier` after its last forward use and back in
  /// before its first backward use.
  void swap(Block &body, Value value, StringRef tier, unsigned index) {
    llvm::DenseMap<Operation *, unsigned> position = positions(body);
    SmallVector<OpOperand *> backwardUses;
    Operation *lastForward = value.getDefiningOp();
    for (OpOperand *use : usesThroughViews(value)) {
      Operation *u = use->getOwner();
      if (u->hasAttr("strata.backward"))
        backwardUses.push_back(use);
      else if (position[u] > position[lastForward])
        lastForward = u;
    }
    if (backwardUses.empty())
      return;
    Operation *firstBackward = earliestUser(backwardUses, position);
    // Only a value the forward pass is done with can wait elsewhere (an
    // output, read after the run, cannot).
    if (position[lastForward] >= position[firstBackward])
      return;
    OpBuilder b(&body, body.begin());
    Location loc = value.getLoc();
    Value space = b.create<exec::SwapSpaceOp>(
        loc, value.getType(), b.getStringAttr("swap." + std::to_string(index)),
        b.getStringAttr(tier), IntegerAttr());
    b.setInsertionPointAfter(lastForward);
    b.create<exec::KernelOp>(loc, TypeRange{}, b.getStringAttr("store"),
                             ValueRange{space, value},
                             b.getDenseI64ArrayAttr({}),
                             b.getDenseF64ArrayAttr({}), IntegerAttr(),
                             DenseI64ArrayAttr());
    b.setInsertionPoint(firstBackward);
    auto back = b.create<exec::KernelOp>(
        loc, TypeRange{value.getType()}, b.getStringAttr("copy"),
        ValueRange{space}, b.getDenseI64ArrayAttr({}),
        b.getDenseF64ArrayAttr({}), IntegerAttr(), DenseI64ArrayAttr());
    back->setAttr("strata.backward", b.getUnitAttr());
    replaceUses(backwardUses, value, back.getResult(0));
    ++numSwapped;
  }

  /// Recomputes `value` right before its first backward use instead of
  /// keeping it, when that costs no memory and gives the same bits: its
  /// kernel has one result and reads only values the backward pass keeps
  /// anyway (device parameters, step inputs, or activations the backward
  /// pass reads later than this point and that are not themselves moved),
  /// none of which is written in place before the recomputation. Returns the kernel's cost in seconds,
  /// or a negative number when it cannot be recomputed.
  double recomputeCost(Value value, const llvm::DenseSet<Value> &kept,
                       const llvm::DenseMap<Operation *, unsigned> &position,
                       Operation *firstBackward) {
    auto kernel = value.getDefiningOp<exec::KernelOp>();
    if (!kernel || kernel.getNumResults() != 1 || isTransferKernel(kernel))
      return -1;
    for (Value in : kernel.getInputs()) {
      Value root = in;
      while (auto view = root.getDefiningOp<exec::ViewOp>())
        root = view.getInput();
      Operation *def = root.getDefiningOp();
      bool ok = false;
      if (auto p = dyn_cast_or_null<exec::ParamOp>(def))
        ok = p.getTier() == "device";
      else if (isa_and_nonnull<exec::InputOp>(def))
        ok = true;
      else
        ok = kept.contains(root) &&
             lastUse(root, position) >= position.lookup(firstBackward);
      if (!ok)
        return -1;
      // Nothing may write it in place between the two runs.
      for (OpOperand *use : usesThroughViews(root)) {
        auto k = dyn_cast<exec::KernelOp>(use->getOwner());
        unsigned at = position.lookup(use->getOwner());
        if (k && k.getNumResults() == 0 && at > position.lookup(kernel) &&
            at < position.lookup(firstBackward))
          return -1;
      }
    }
    return kernelSeconds(kernel, machine);
  }

  /// The position of the last user of `value` (through views).
  static unsigned
  lastUse(Value value, const llvm::DenseMap<Operation *, unsigned> &position) {
    unsigned last = 0;
    for (OpOperand *use : usesThroughViews(value))
      last = std::max(last, position.lookup(use->getOwner()));
    return last;
  }

  static bool isTransferKernel(exec::KernelOp k) {
    StringRef name = k.getKernel();
    return name == "copy" || name == "store" || name == "assign";
  }

  /// Replaces the backward uses of `value` with a clone of its kernel
  /// placed right before the first of them.
  void recompute(Block &body, Value value) {
    llvm::DenseMap<Operation *, unsigned> position = positions(body);
    SmallVector<OpOperand *> backwardUses = backwardUsesOf(value);
    if (backwardUses.empty())
      return;
    Operation *firstBackward = earliestUser(backwardUses, position);
    OpBuilder b(firstBackward);
    Operation *again = b.clone(*value.getDefiningOp());
    again->setAttr("strata.backward", b.getUnitAttr());
    again->setAttr("strata.recomputed", b.getUnitAttr());
    replaceUses(backwardUses, value, again->getResult(0));
    ++numRecomputed;
    ++recomputedCount;
    recomputedBytes += storageBytes(value.getType());
    // A value only the backward pass read need not be computed before.
    if (value.use_empty())
      value.getDefiningOp()->erase();
  }

  /// Points `uses` of `value` (possibly through views) at `replacement`,
  /// rebuilding the views in between.
  static void replaceUses(ArrayRef<OpOperand *> uses, Value value,
                          Value replacement) {
    for (OpOperand *use : uses) {
      SmallVector<exec::ViewOp> chain;
      for (Value v = use->get(); v != value;
           v = v.getDefiningOp<exec::ViewOp>().getInput())
        chain.push_back(v.getDefiningOp<exec::ViewOp>());
      Value r = replacement;
      OpBuilder vb(use->getOwner());
      for (exec::ViewOp view : llvm::reverse(chain))
        r = vb.create<exec::ViewOp>(view.getLoc(), view.getType(), r);
      use->set(r);
    }
  }

  LogicalResult placeActivations(func::FuncOp func) {
    Block &body = func.getBody().front();
    SmallVector<Value> candidates = swappable(body);
    // Which candidates can be recomputed for free, and at what cost; the
    // decision uses the plan as it stands (kept = read by the backward
    // pass and not moved).
    llvm::DenseSet<Value> kept(candidates.begin(), candidates.end());
    auto costOf = [&](Value v) {
      llvm::DenseMap<Operation *, unsigned> position = positions(body);
      SmallVector<OpOperand *> uses = backwardUsesOf(v);
      return uses.empty() ? -1.0
                          : recomputeCost(v, kept, position,
                                          earliestUser(uses, position));
    };
    if (activations == "recompute") {
      // Every candidate that can be, in program order; what cannot stays
      // on the device.
      for (Value v : candidates) {
        if (costOf(v) < 0)
          continue;
        kept.erase(v);
        recompute(body, v);
      }
      return success();
    }
    if (activations == "host" || activations == "ssd") {
      if (activations == "ssd" && !hasSsd)
        return func.emitError("activations on the SSD need --ssd-dir");
      unsigned n = 0;
      for (Value v : candidates)
        swap(body, v, activations, n++);
      return success();
    }
    if (activations == "device" || gpuMem == 0)
      return success();
    uint64_t alignment =
        hasSsd ? artifact::kParamAlignment : artifact::kArenaAlignment;
    uint64_t resident = 0;
    for (auto p : body.getOps<exec::ParamOp>())
      if (p.getTier() == "device")
        resident += artifact::pagePadded(storageBytes(p.getType()));
    // Largest first, until the estimate fits; swap space on the host while
    // it fits the host budget (after the tensors already placed there).
    uint64_t host = 0;
    for (auto p : body.getOps<exec::ParamOp>())
      if (p.getTier() == "host")
        host += storageBytes(p.getType());
    std::stable_sort(candidates.begin(), candidates.end(), [](Value a, Value b) {
      return storageBytes(a.getType()) > storageBytes(b.getType());
    });
    // Largest first until the estimate fits: recompute when that is
    // cheaper than the swap out and back (by the cost model), else swap.
    unsigned n = 0;
    for (Value v : candidates) {
      if (liveArenaEstimate(body, alignment) + resident <= gpuMem)
        break;
      uint64_t bytes = storageBytes(v.getType());
      bool toHost = cpuMem == 0 || host + bytes <= cpuMem;
      StringRef tier = toHost ? "host" : "ssd";
      double again = costOf(v);
      double moved = transferSeconds(bytes, tier, false, machine) +
                     transferSeconds(bytes, tier, true, machine);
      if (again >= 0 && again < moved) {
        kept.erase(v);
        recompute(body, v);
        continue;
      }
      if (!toHost && !hasSsd)
        continue;
      host += toHost ? bytes : 0;
      kept.erase(v);
      swap(body, v, tier, n++);
    }
    return success();
  }

  LogicalResult place(func::FuncOp func) {
    Block &body = func.getBody().front();
    SmallVector<exec::ParamOp> all(body.getOps<exec::ParamOp>());
    if (failed(decide(func, all)))
      return failure();
    for (exec::ParamOp p : all) {
      if (p.getTier() == "device")
        continue;
      // Uses through views are rebuilt on the fetched copy.
      for (OpOperand *use : usesThroughViews(p.getResult())) {
        Operation *user = use->getOwner();
        OpBuilder b(user);
        auto kernel = dyn_cast<exec::KernelOp>(user);
        bool inPlace = false;
        if (kernel)
          for (unsigned k : inPlaceOperands(kernel))
            inPlace |= kernel.getInputsMutable()[k].getOperandNumber() ==
                       use->getOperandNumber();
        if (kernel && kernel.getKernel() == "assign" &&
            use->getOperandNumber() == 0)
          continue; // Writes go to any tier directly.
        // Fetch: a copy into the device arena right before the use.
        Value fetched = b.create<exec::KernelOp>(
                             user->getLoc(), TypeRange{p.getType()},
                             b.getStringAttr("copy"), ValueRange{p.getResult()},
                             b.getDenseI64ArrayAttr({}),
                             b.getDenseF64ArrayAttr({}), IntegerAttr(),
                             DenseI64ArrayAttr())
                            .getResult(0);
        ++numFetches;
        // Re-apply the views between the parameter and this use.
        SmallVector<exec::ViewOp> chain;
        for (Value v = use->get(); v != p.getResult();
             v = v.getDefiningOp<exec::ViewOp>().getInput())
          chain.push_back(v.getDefiningOp<exec::ViewOp>());
        for (exec::ViewOp view : llvm::reverse(chain))
          fetched = b.create<exec::ViewOp>(view.getLoc(), view.getType(),
                                           fetched);
        use->set(fetched);
        if (inPlace) {
          // The update ran on the copy: write it back.
          b.setInsertionPointAfter(user);
          b.create<exec::KernelOp>(user->getLoc(), TypeRange{},
                                   b.getStringAttr("assign"),
                                   ValueRange{p.getResult(), fetched},
                                   b.getDenseI64ArrayAttr({}),
                                   b.getDenseF64ArrayAttr({}), IntegerAttr(),
                                   DenseI64ArrayAttr());
          ++numWritebacks;
        }
      }
    }
    recomputedCount = recomputedBytes = 0;
    if (failed(placeActivations(func)))
      return failure();
    if (recomputedCount > 0) {
      Builder b(func.getContext());
      func->setAttr("exec.recomputed",
                    b.getDictionaryAttr({
                        b.getNamedAttr("recomputed_activations",
                                       b.getI64IntegerAttr(recomputedCount)),
                        b.getNamedAttr("recomputed_bytes",
                                       b.getI64IntegerAttr(recomputedBytes)),
                    }));
    }
    return success();
  }
};

} // namespace
