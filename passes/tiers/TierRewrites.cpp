//===- TierRewrites.cpp - Applying a placement to exec IR -----------------===//
//
// Fetches and write-backs for parameters and state off the device, swaps
// of activations and gradients to the host or the SSD, and recomputation
// of activations in the backward pass.
//
//===----------------------------------------------------------------------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/tiers/TierPlanner.h"

#include "passes/analysis/ArenaRanges.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

#include <functional>
#include <limits>

using namespace mlir;
using namespace strata;
using namespace strata::tiers;

/// Longest chain of kernels one recomputation may rerun.
static constexpr unsigned kMaxChain = 8;

/// Swaps gradient `value` out to `tier` after its last backward use and
/// fetches it before each use in the optimizer step (once, before the
/// first, when one of them writes it in place). False, and nothing
/// changed, when no kernel runs in between (a fused update).
bool TierPlanner::swapGradient(Block &body, Value value, Tier tier,
                               unsigned index) {
  SmallVector<OpOperand *> after;
  Operation *lastBefore = value.getDefiningOp();
  bool inPlace = false;
  for (OpOperand *use : usesThroughViews(value)) {
    Operation *u = use->getOwner();
    if (isOptimizerPhase(u)) {
      after.push_back(use);
      inPlace |= writesInPlace(use);
    } else if (before(order, lastBefore, u)) {
      lastBefore = u;
    }
  }
  Operation *firstAfter = earliestUser(after, order);
  bool work = false;
  for (Operation *op = lastBefore->getNextNode(); op && op != firstAfter;
       op = op->getNextNode())
    if (auto k = dyn_cast<exec::KernelOp>(op))
      work |= !k.isTransferKernel();
  if (!work)
    return false;
  Value space = storeAfter(body, lastBefore, value,
                           "grad." + std::to_string(index), tier);
  auto fetchBefore = [&](Operation *user) {
    OpBuilder b(user);
    return createTransfer(b, value.getLoc(), artifact::Kernel::Copy,
                          value.getType(), space)
        .getResult(0);
  };
  if (inPlace) {
    replaceUses(after, value, fetchBefore(firstAfter), order);
  } else {
    // One fetch per reading op (`mul(g, g)` reads it once).
    llvm::MapVector<Operation *, SmallVector<OpOperand *>> byUser;
    for (OpOperand *use : after)
      byUser[use->getOwner()].push_back(use);
    for (auto &[user, uses] : byUser)
      replaceUses(uses, value, fetchBefore(user), order);
  }
  ++counters.gradientsSwapped;
  return true;
}

/// Gives every read of an off-device parameter a fetch into the arena
/// right before it, and every in-place update of one a write-back.
void TierPlanner::insertFetches(func::FuncOp func) {
  Block &body = func.getBody().front();
  for (exec::ParamOp p : llvm::to_vector(body.getOps<exec::ParamOp>())) {
    if (p.getTier() == exec::Tier::Device)
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
      if (kernel && kernel.isKernel(artifact::Kernel::Assign) &&
          use->getOperandNumber() == 0)
        continue; // Writes go to any tier directly.
      Value fetched = createTransfer(b, user->getLoc(), artifact::Kernel::Copy,
                                     p.getType(), p.getResult())
                          .getResult(0);
      ++counters.fetches;
      SmallVector<exec::ViewOp> chain;
      for (Value v = use->get(); v != p.getResult();
           v = v.getDefiningOp<exec::ViewOp>().getInput())
        chain.push_back(v.getDefiningOp<exec::ViewOp>());
      for (exec::ViewOp view : llvm::reverse(chain))
        fetched =
            b.create<exec::ViewOp>(view.getLoc(), view.getType(), fetched);
      use->set(fetched);
      if (inPlace) {
        // The kernel ran on the copy: write it back. After an optimizer
        // update that is an "assign", skipped like the update itself on
        // micro-batches that only accumulate; after any other in-place
        // kernel (an accumulation) a "store", which runs on every one.
        b.setInsertionPointAfter(user);
        bool skipped = kernel.isUpdate();
        createTransfer(b, user->getLoc(),
                       skipped ? artifact::Kernel::Assign
                               : artifact::Kernel::Store,
                       {}, {p.getResult(), fetched});
        ++counters.writebacks;
      }
    }
  }
}

/// Swaps `value` out to `tier` after its last forward use and back in
/// before its first backward use. False when it cannot wait elsewhere.
bool TierPlanner::swap(Block &body, Value value, Tier tier, unsigned index) {
  SmallVector<OpOperand *> backwardUses;
  Operation *lastForward = value.getDefiningOp();
  for (OpOperand *use : usesThroughViews(value)) {
    Operation *u = use->getOwner();
    if (markers::isBackward(u))
      backwardUses.push_back(use);
    else if (before(order, lastForward, u))
      lastForward = u;
  }
  if (backwardUses.empty())
    return false;
  Operation *firstBackward = earliestUser(backwardUses, order);
  // Only a value the forward pass is done with can wait elsewhere (an
  // output, read after the run, cannot).
  if (!before(order, lastForward, firstBackward))
    return false;
  Value space = storeAfter(body, lastForward, value,
                           "swap." + std::to_string(index), tier);
  OpBuilder b(firstBackward);
  auto back = createTransfer(b, value.getLoc(), artifact::Kernel::Copy,
                             value.getType(), space);
  markers::setBackward(back);
  replaceUses(backwardUses, value, back.getResult(0), order);
  ++counters.swapped;
  return true;
}

/// The forward ops to rerun, in an order that respects their operands,
/// so that `value` is available again right before `at`: its kernel and,
/// for each input not available there, that input's ops in turn. An
/// input is available when the backward pass keeps it anyway until `at`
/// (an activation in `kept` used at or after `at`), or it is a device
/// parameter or a step input, and nothing writes it in place between
/// its forward reader and `at`. Empty when the chain would need more
/// than kMaxChain kernels, a kernel that cannot rerun (a transfer, one
/// with several results), or a leaf written in place.
SmallVector<Operation *>
TierPlanner::recomputeChain(Value value, Operation *at,
                            const llvm::DenseSet<Value> &kept) {
  SmallVector<Operation *> chain;
  llvm::DenseSet<Operation *> inChain;
  unsigned kernels = 0;
  bool ok = true;
  // Whether `in`, read by `reader`, can be read again at `at` as it is.
  auto available = [&](Value in, Operation *reader) {
    Value root = in;
    while (auto view = root.getDefiningOp<exec::ViewOp>())
      root = view.getInput();
    Operation *def = root.getDefiningOp();
    bool keptThere;
    if (auto p = dyn_cast_or_null<exec::ParamOp>(def))
      keptThere = p.getTier() == exec::Tier::Device;
    else
      keptThere = isa_and_nonnull<exec::InputOp>(def) ||
                  (kept.contains(root) && usedFrom(root, at, order));
    if (!keptThere)
      return false;
    for (OpOperand *use : usesThroughViews(root)) {
      auto k = dyn_cast<exec::KernelOp>(use->getOwner());
      Operation *w = use->getOwner();
      if (k && k.getNumResults() == 0 && before(order, reader, w) &&
          before(order, w, at))
        ok = false; // Changed in between: neither reusable nor rerun.
    }
    return true;
  };
  std::function<void(Value)> need = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (!ok || !def || inChain.contains(def))
      return;
    SmallVector<Value> inputs;
    if (auto view = dyn_cast<exec::ViewOp>(def)) {
      inputs.push_back(view.getInput());
    } else {
      auto k = dyn_cast<exec::KernelOp>(def);
      if (!k || k.getNumResults() != 1 || k.isTransferKernel() ||
          markers::isBackward(k) || markers::isOptimizer(k) ||
          ++kernels > kMaxChain) {
        ok = false;
        return;
      }
      inputs.append(k.getInputs().begin(), k.getInputs().end());
    }
    for (Value in : inputs)
      if (!available(in, def))
        need(in);
    inChain.insert(def);
    chain.push_back(def);
  };
  need(value);
  if (!ok)
    chain.clear();
  return chain;
}

/// The recomputeChain of `value` before its first backward use (empty
/// when the backward pass does not read it or it cannot be recomputed).
SmallVector<Operation *>
TierPlanner::chainFor(Value value, const llvm::DenseSet<Value> &kept) {
  SmallVector<OpOperand *> uses = backwardUsesOf(value);
  if (uses.empty())
    return {};
  return recomputeChain(value, earliestUser(uses, order), kept);
}

/// The cost in seconds of rerunning `chain`.
double TierPlanner::chainSeconds(ArrayRef<Operation *> chain) {
  double seconds = 0;
  for (Operation *op : chain)
    if (auto k = dyn_cast<exec::KernelOp>(op))
      seconds += kernelSeconds(k, machine);
  return seconds;
}

/// Replaces the backward uses of `value` with clones of `chain` (its
/// recomputeChain) placed right before the first of them.
void TierPlanner::recompute(Value value, ArrayRef<Operation *> chain) {
  SmallVector<OpOperand *> backwardUses = backwardUsesOf(value);
  OpBuilder b(earliestUser(backwardUses, order));
  IRMapping mapping;
  for (Operation *op : chain) {
    Operation *again = b.clone(*op, mapping);
    markers::setBackward(again);
    markers::setRecomputed(again);
  }
  replaceUses(backwardUses, value, mapping.lookup(value), order);
  ++counters.recomputed;
  counters.recomputedBytes += storageBytes(value.getType());
  // A value only the backward pass read need not be computed before.
  if (value.use_empty()) {
    if (order)
      order->forget(value.getDefiningOp());
    value.getDefiningOp()->erase();
  }
}

/// Applies `act` to `value`; returns what was done (a swap or a
/// recomputation that is not possible keeps the value).
/// `chain`, when given, is `value`'s recomputeChain, already found.
Act TierPlanner::applyAct(Block &body, Value value, Act act,
                          llvm::DenseSet<Value> &kept, unsigned &swaps,
                          ArrayRef<Operation *> chain) {
  if (act == Act::Recompute) {
    kept.erase(value);
    SmallVector<Operation *> found(chain);
    if (found.empty())
      found = chainFor(value, kept);
    if (found.empty()) {
      kept.insert(value);
      return Act::Keep;
    }
    recompute(value, found);
    return act;
  }
  if (act == Act::Host || act == Act::Ssd) {
    if (!swap(body, value, act == Act::Host ? Tier::Host : Tier::Ssd, swaps))
      return Act::Keep;
    ++swaps;
    kept.erase(value);
    return act;
  }
  return Act::Keep;
}

/// Rewrites `func` as `placement` says. The caller suppresses
/// diagnostics when this runs on a trial clone.
LogicalResult TierPlanner::apply(func::FuncOp func, const Placement &placement,
                                 std::optional<Candidates> known) {
  Block &body = func.getBody().front();
  SmallVector<exec::ParamOp> all(body.getOps<exec::ParamOp>());
  for (auto [p, tier] : llvm::zip(all, placement.tiers)) {
    if (tier == Tier::Ssd && !hasSsd)
      return p.emitError("placed on the SSD, but no --ssd-dir was given");
    p.setTier(tier);
  }
  insertFetches(func);
  OrderedRewrite ordered(*this, body);
  SmallVector<Value> candidates =
      known ? std::move(known->acts) : swappable(body);
  if (candidates.size() != placement.acts.size())
    return func.emitError("internal error: ")
           << candidates.size() << " swap candidates, the placement has "
           << placement.acts.size();
  llvm::DenseSet<Value> kept(candidates.begin(), candidates.end());
  for (auto [v, act] : llvm::zip(candidates, placement.acts))
    if (act != Act::Keep)
      kept.erase(v);
  // Swaps first, so that a recomputation sees the plan's final kept set.
  unsigned swaps = 0;
  for (auto [v, act] : llvm::zip(candidates, placement.acts))
    if (act == Act::Host || act == Act::Ssd)
      if (applyAct(body, v, act, kept, swaps) == Act::Keep)
        kept.insert(v);
  for (auto [v, act] : llvm::zip(candidates, placement.acts))
    if (act == Act::Recompute)
      if (applyAct(body, v, act, kept, swaps) == Act::Keep)
        kept.insert(v);
  SmallVector<Value> gradients =
      known ? std::move(known->grads) : gradientCandidates(body);
  if (gradients.size() != placement.grads.size())
    return func.emitError("internal error: ")
           << gradients.size() << " gradient candidates, the placement has "
           << placement.grads.size();
  for (auto [i, g] : llvm::enumerate(gradients)) {
    Act act = placement.grads[i];
    if (act == Act::Ssd && !hasSsd)
      return func.emitError("gradients on the SSD need --ssd-dir");
    if (act == Act::Host || act == Act::Ssd)
      swapGradient(body, g, act == Act::Host ? Tier::Host : Tier::Ssd, i);
  }
  return success();
}
