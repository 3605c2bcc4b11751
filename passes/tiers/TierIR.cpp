//===- TierIR.cpp - Queries on exec IR for the tier planner ---------------===//
//
// What the placement needs to know about a function: which forward values
// the backward pass reads (swap candidates), which gradients wait for the
// optimizer step, where values are used (through views), and a lower bound
// of the device arena.
//
//===----------------------------------------------------------------------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/tiers/TierPlanner.h"

#include "passes/analysis/ArenaRanges.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <limits>
#include <vector>

using namespace mlir;
using namespace strata;

namespace strata::tiers {

/// The operands an update-type kernel writes in place (not counting the
/// destinations of transfers: assign and store).
SmallVector<unsigned> inPlaceOperands(exec::KernelOp kernel) {
  // Read and written: in place (a write-back writes without reading).
  SmallVector<unsigned> out;
  for (auto [k, use] : llvm::enumerate(inputUses(kernel)))
    if (use.read && use.written)
      out.push_back(static_cast<unsigned>(k));
  return out;
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
    return !markers::isBackward(use->getOwner());
  });
  return uses;
}

/// A swap space `name` on `tier` for `value`, which is stored into it
/// right after `after`. Returns the space.
Value storeAfter(Block &body, Operation *after, Value value,
                 const std::string &name, Tier tier) {
  OpBuilder b(&body, body.begin());
  Value space = b.create<exec::SwapSpaceOp>(
      value.getLoc(), value.getType(), b.getStringAttr(name),
      exec::TierAttr::get(b.getContext(), tier), IntegerAttr());
  b.setInsertionPointAfter(after);
  createTransfer(b, value.getLoc(), artifact::Kernel::Store, {},
                 {space, value});
  return space;
}

/// The first (in program order) owner of `uses` (all in one block).
Operation *earliestUser(ArrayRef<OpOperand *> uses, BlockOrder *order) {
  Operation *first = uses.front()->getOwner();
  for (OpOperand *use : uses)
    if (before(order, use->getOwner(), first))
      first = use->getOwner();
  return first;
}

void BlockOrder::renumber() {
  positions.clear();
  double at = 0;
  for (Operation &op : block)
    positions[&op] = at++;
}

double BlockOrder::position(Operation *op) {
  auto it = positions.find(op);
  if (it != positions.end())
    return it->second;
  // Ops inserted since: every one between the nearest numbered neighbours,
  // spaced evenly between their positions.
  SmallVector<Operation *> fresh{op};
  Operation *prev = op->getPrevNode(), *next = op->getNextNode();
  for (; prev && !positions.count(prev); prev = prev->getPrevNode())
    fresh.insert(fresh.begin(), prev);
  for (; next && !positions.count(next); next = next->getNextNode())
    fresh.push_back(next);
  double gaps = static_cast<double>(fresh.size() + 1);
  double lo = prev ? positions.lookup(prev) : 0,
         hi = next ? positions.lookup(next) : 0;
  if (!prev)
    lo = next ? hi - gaps : 0;
  if (!next)
    hi = lo + gaps;
  double step = (hi - lo) / gaps, last = lo;
  for (auto [i, o] : llvm::enumerate(fresh)) {
    double p = lo + step * static_cast<double>(i + 1);
    if (!(p > last) || !(p < hi)) { // No room left between them.
      renumber();
      return positions.lookup(op);
    }
    positions[o] = last = p;
  }
  return positions.lookup(op);
}

Tier namedTier(StringRef name) {
  return exec::symbolizeTier(name).value_or(Tier::Device);
}

const char *actName(Act a) {
  switch (a) {
  case Act::Keep:
    return "keep";
  case Act::Host:
    return "host";
  case Act::Ssd:
    return "ssd";
  case Act::Recompute:
    return "recompute";
  }
  return "?";
}

/// The layer a stored tensor belongs to, from its name: the name up to and
/// including its first all-digit component ("h.3" of "h.3.attn.c_attn.
/// weight.exp_avg", "model.layers.0" of "model.layers.0.mlp.up_proj.
/// weight"); empty when it has none.
std::string layerOf(StringRef name) {
  size_t pos = 0;
  while (pos < name.size()) {
    size_t end = name.find_first_of("./", pos);
    if (end == StringRef::npos)
      end = name.size();
    StringRef part = name.slice(pos, end);
    if (!part.empty() && llvm::all_of(part, llvm::isDigit))
      return name.take_front(end).str();
    pos = end + 1;
  }
  return "";
}

/// Bytes the device arena needs, without any placement (a lower bound of
/// the real plan's): the largest sum of live buffers at any op.
uint64_t liveArenaEstimate(Block &body, uint64_t alignment) {
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

bool ArenaFit::fits() {
  if (excess > 0)
    return false;
  uint64_t need = liveArenaEstimate(body, alignment) + resident;
  excess = need > limit ? need - limit : 0;
  return excess == 0;
}

void ArenaFit::moved(uint64_t bytes) {
  uint64_t most = artifact::alignUp(bytes, alignment);
  excess = excess > most ? excess - most : 0;
}

/// Forward values the backward pass reads: the candidates for swapping.
/// Fetches are not (they sit right before their one use), so the list
/// does not depend on where parameters live.
SmallVector<Value> swappable(Block &body) {
  SmallVector<Value> out;
  for (Operation &op : body) {
    auto kernel = dyn_cast<exec::KernelOp>(op);
    if (!kernel || markers::isBackward(kernel) ||
        markers::isOptimizer(kernel) || kernel.isTransferKernel())
      continue;
    for (Value r : kernel.getResults())
      if (!backwardUsesOf(r).empty())
        out.push_back(r);
  }
  return out;
}

Operation *firstBackwardKernel(Block &body) {
  for (auto k : body.getOps<exec::KernelOp>())
    if (markers::isBackward(k))
      return k;
  return nullptr;
}

/// Whether `op` runs after the backward pass, in the optimizer step.
bool isOptimizerPhase(Operation *op) {
  if (markers::isOptimizer(op))
    return true;
  auto kernel = dyn_cast<exec::KernelOp>(op);
  return kernel && kernel.isUpdate();
}

/// Whether `use` writes its value in place.
bool writesInPlace(OpOperand *use) {
  auto kernel = dyn_cast<exec::KernelOp>(use->getOwner());
  if (!kernel || kernel.getNumResults() != 0)
    return false;
  for (unsigned k : inPlaceOperands(kernel))
    if (kernel.getInputsMutable()[k].getOperandNumber() ==
        use->getOperandNumber())
      return true;
  return false;
}

/// Gradients the optimizer step reads after the backward pass is done
/// with them: results of backward kernels that an update kernel reads as
/// its gradient. Swapping one out between its last backward use and its
/// first use in the optimizer step frees its device memory meanwhile.
/// (The list does not depend on other placement choices, which only add
/// transfers and recomputations between those uses.)
SmallVector<Value> gradientCandidates(Block &body) {
  llvm::DenseMap<Operation *, unsigned> position = positions(body);
  SmallVector<Value> out;
  for (Operation &op : body) {
    auto kernel = dyn_cast<exec::KernelOp>(op);
    if (!kernel || !markers::isBackward(kernel) || kernel.isTransferKernel())
      continue;
    for (Value r : kernel.getResults()) {
      bool isGradient = false;
      unsigned lastBefore = position.lookup(kernel),
               firstAfter = std::numeric_limits<unsigned>::max();
      for (OpOperand *use : usesThroughViews(r)) {
        Operation *user = use->getOwner();
        auto update = dyn_cast<exec::KernelOp>(user);
        if (update && update.isUpdate() &&
            update.getInputsMutable()[1].getOperandNumber() ==
                use->getOperandNumber())
          isGradient = true;
        unsigned at = position.lookup(user);
        if (isOptimizerPhase(user))
          firstAfter = std::min(firstAfter, at);
        else
          lastBefore = std::max(lastBefore, at);
      }
      if (isGradient && firstAfter != std::numeric_limits<unsigned>::max() &&
          lastBefore < firstAfter)
        out.push_back(r);
    }
  }
  return out;
}

/// Whether `value` (through views) is used at `op` or after it.
bool usedFrom(Value value, Operation *op, BlockOrder *order) {
  for (OpOperand *use : usesThroughViews(value))
    if (use->getOwner() == op || before(order, op, use->getOwner()))
      return true;
  return false;
}

/// Points `uses` of `value` (possibly through views) at `replacement`,
/// rebuilding the views in between.
void replaceUses(ArrayRef<OpOperand *> uses, Value value, Value replacement,
                 BlockOrder *order) {
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
    // A view nothing reads any more goes: left, it would keep `value`
    // live (in the arena) up to where it sits.
    for (exec::ViewOp view : chain) {
      if (!view->use_empty())
        break;
      if (order)
        order->forget(view);
      view->erase();
    }
  }
}

/// Host bytes the stored tensors `placement` puts on the host take.
uint64_t hostBytes(func::FuncOp func, const Placement &placement) {
  uint64_t host = 0;
  for (auto [p, tier] : llvm::zip(
           func.getBody().front().getOps<exec::ParamOp>(), placement.tiers))
    if (tier == Tier::Host)
      host += artifact::pagePadded(storageBytes(p.getType()));
  return host;
}

} // namespace strata::tiers
