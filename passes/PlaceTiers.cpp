//===- PlaceTiers.cpp - Parameters and state on device, host or SSD -------===//

#include "passes/ArenaRanges.h"
#include "passes/CostModel.h"
#include "passes/Passes.h"

#include "dialects/Exec/ExecDialect.h"
#include "runtime/artifact/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <map>
#include <optional>
#include <chrono>
#include <functional>
#include <limits>

#define DEBUG_TYPE "strata-place-tiers"

namespace strata {
#define GEN_PASS_DEF_PLACETIERSPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// The operands an update-type kernel writes in place (not counting the
/// destinations of transfers: assign and store).
SmallVector<unsigned> inPlaceOperands(exec::KernelOp kernel) {
  if (kernel.getKernel() == "assign" || kernel.getKernel() == "store")
    return {};
  std::vector<unsigned> written = writtenInputs(kernel);
  return SmallVector<unsigned>(written.begin(), written.end());
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

/// A swap space `name` on `tier` for `value`, which is stored into it
/// right after `after`. Returns the space.
Value storeAfter(Block &body, Operation *after, Value value,
                 const std::string &name, StringRef tier) {
  OpBuilder b(&body, body.begin());
  Value space = b.create<exec::SwapSpaceOp>(value.getLoc(), value.getType(),
                                            b.getStringAttr(name),
                                            b.getStringAttr(tier),
                                            IntegerAttr());
  b.setInsertionPointAfter(after);
  createTransfer(b, value.getLoc(), "store", {}, {space, value});
  return space;
}

/// The first (in program order) owner of `uses` (all in one block).
Operation *earliestUser(ArrayRef<OpOperand *> uses) {
  Operation *first = uses.front()->getOwner();
  for (OpOperand *use : uses)
    if (use->getOwner()->isBeforeInBlock(first))
      first = use->getOwner();
  return first;
}

/// Where one stored tensor lives.
enum class Tier : uint8_t { Device, Host, Ssd };

StringRef tierName(Tier t) {
  return t == Tier::Device ? "device" : t == Tier::Host ? "host" : "ssd";
}

Tier tierOf(StringRef name) {
  return name == "host" ? Tier::Host : name == "ssd" ? Tier::Ssd : Tier::Device;
}

/// What happens to a forward activation the backward pass reads.
enum class Act : uint8_t { Keep, Host, Ssd, Recompute };

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

/// One placement of a function: the tier of each `exec.param` and the fate
/// of each swap candidate, both in program order. Applying it to the same
/// function always gives the same program, so the planner can compare
/// placements on clones and apply the best one to the original.
struct Placement {
  std::string label;
  SmallVector<Tier> tiers;
  SmallVector<Act> acts;
  /// Per gradient candidate: Keep, Host or Ssd.
  SmallVector<Act> grads;
};

/// How good a placement is: the bytes by which it misses the budgets (0
/// when it fits), then the predicted step.
struct Score {
  uint64_t overBytes = std::numeric_limits<uint64_t>::max();
  int64_t stepUs = std::numeric_limits<int64_t>::max();
  bool fits() const { return overBytes == 0; }
  bool operator<(const Score &o) const {
    return overBytes != o.overBytes ? overBytes < o.overBytes
                                    : stepUs < o.stepUs;
  }
};

/// The layer a stored tensor belongs to, from its name: the name up to and
/// including its first all-digit component ("h.3" of "h.3.attn.c_attn.
/// weight.exp_avg", "model.layers.0" of "model.layers.0.mlp.up_proj.
/// weight"); empty when it has none.
static std::string layerOf(StringRef name) {
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

/// Greedy orders for activations: by the cost model, never recompute, or
/// recompute wherever it is free.
enum class Policy { Cost, Swap, Recompute };

struct PlaceTiersPass : public strata::impl::PlaceTiersPassBase<PlaceTiersPass> {
  using PlaceTiersPassBase::PlaceTiersPassBase;

  MachineProfile machine;
  int64_t recomputedCount = 0, recomputedBytes = 0;

  void runOnOperation() override {
    for (StringRef opt :
         {StringRef(params), StringRef(states), StringRef(gradients)})
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
    for (auto [what, opt] : {std::pair{"activations", acts},
                             std::pair{"gradients", StringRef(gradients)}})
      if (opt == "ssd" && !hasSsd) {
        getOperation().emitError(what) << " on the SSD need --ssd-dir";
        return signalPassFailure();
      }
    if (failed(loadProfile(getOperation(), profile, machine)))
      return signalPassFailure();
    SmallVector<func::FuncOp> funcs(getOperation().getOps<func::FuncOp>());
    for (auto func : funcs)
      if (failed(place(func)))
        return signalPassFailure();
  }

  //===--------------------------------------------------------------------===//
  // Estimates and helpers
  //===--------------------------------------------------------------------===//

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

  uint64_t arenaAlignment() const {
    return hasSsd ? artifact::kParamAlignment : artifact::kArenaAlignment;
  }

  /// Whether the planner may choose the tier of `p`. Constants (a forward
  /// program's weights, masks) follow the parameters' option: they are
  /// only read, so off the device they are fetched and never written back.
  bool isAuto(exec::ParamOp p) const {
    return mode(p.getState() ? Class::States : Class::Params) == "auto";
  }

  /// The classes a placement option covers.
  enum class Class { Params, States, Activations, Gradients };
  /// While the search builds the start a forced option would give, that
  /// class's forced value; empty otherwise.
  std::string overrideValue;
  Class overridden = Class::Params;
  /// What a class is left to: its option, or the override.
  StringRef mode(Class c) const {
    if (!overrideValue.empty() && c == overridden)
      return overrideValue;
    switch (c) {
    case Class::Params: return params;
    case Class::States: return states;
    case Class::Activations: return activations;
    case Class::Gradients: return gradients;
    }
    return "auto";
  }

  /// Forward values the backward pass reads: the candidates for swapping.
  /// Fetches are not (they sit right before their one use), so the list
  /// does not depend on where parameters live.
  static SmallVector<Value> swappable(Block &body) {
    SmallVector<Value> out;
    for (Operation &op : body) {
      auto kernel = dyn_cast<exec::KernelOp>(op);
      if (!kernel || kernel->hasAttr("strata.backward") ||
          kernel->hasAttr("strata.optimizer") || isTransferKernel(kernel))
        continue;
      for (Value r : kernel.getResults())
        if (!backwardUsesOf(r).empty())
          out.push_back(r);
    }
    return out;
  }

  /// Whether `op` runs after the backward pass, in the optimizer step.
  static bool isOptimizerPhase(Operation *op) {
    if (op->hasAttr("strata.optimizer"))
      return true;
    auto kernel = dyn_cast<exec::KernelOp>(op);
    return kernel && kernel.getKernel().starts_with("update_");
  }

  /// Whether `use` writes its value in place.
  static bool writesInPlace(OpOperand *use) {
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
  static SmallVector<Value> gradientCandidates(Block &body) {
    llvm::DenseMap<Operation *, unsigned> position = positions(body);
    SmallVector<Value> out;
    for (Operation &op : body) {
      auto kernel = dyn_cast<exec::KernelOp>(op);
      if (!kernel || !kernel->hasAttr("strata.backward") ||
          isTransferKernel(kernel))
        continue;
      for (Value r : kernel.getResults()) {
        bool isGradient = false;
        unsigned lastBefore = position.lookup(kernel),
                 firstAfter = std::numeric_limits<unsigned>::max();
        for (OpOperand *use : usesThroughViews(r)) {
          Operation *user = use->getOwner();
          auto update = dyn_cast<exec::KernelOp>(user);
          if (update && update.getKernel().starts_with("update_") &&
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

  /// Swaps gradient `value` out to `tier` after its last backward use and
  /// fetches it before each use in the optimizer step (once, before the
  /// first, when one of them writes it in place). False, and nothing
  /// changed, when no kernel runs in between (a fused update).
  bool swapGradient(Block &body, Value value, StringRef tier, unsigned index) {
    SmallVector<OpOperand *> after;
    Operation *lastBefore = value.getDefiningOp();
    bool inPlace = false;
    for (OpOperand *use : usesThroughViews(value)) {
      Operation *u = use->getOwner();
      if (isOptimizerPhase(u)) {
        after.push_back(use);
        inPlace |= writesInPlace(use);
      } else if (lastBefore->isBeforeInBlock(u)) {
        lastBefore = u;
      }
    }
    Operation *firstAfter = earliestUser(after);
    bool work = false;
    for (Operation *op = lastBefore->getNextNode(); op && op != firstAfter;
         op = op->getNextNode())
      if (auto k = dyn_cast<exec::KernelOp>(op))
        work |= !isTransferKernel(k);
    if (!work)
      return false;
    Value space = storeAfter(body, lastBefore, value,
                             "grad." + std::to_string(index), tier);
    auto fetchBefore = [&](Operation *user) {
      OpBuilder b(user);
      return createTransfer(b, value.getLoc(), "copy", value.getType(), space)
          .getResult(0);
    };
    if (inPlace) {
      replaceUses(after, value, fetchBefore(firstAfter));
    } else {
      // One fetch per reading op (`mul(g, g)` reads it once).
      llvm::MapVector<Operation *, SmallVector<OpOperand *>> byUser;
      for (OpOperand *use : after)
        byUser[use->getOwner()].push_back(use);
      for (auto &[user, uses] : byUser)
        replaceUses(uses, value, fetchBefore(user));
    }
    ++numGradientsSwapped;
    return true;
  }

  /// Whether `value` (through views) is used at `op` or after it.
  static bool usedFrom(Value value, Operation *op) {
    for (OpOperand *use : usesThroughViews(value))
      if (use->getOwner() == op || op->isBeforeInBlock(use->getOwner()))
        return true;
    return false;
  }

  static bool isTransferKernel(exec::KernelOp k) {
    StringRef name = k.getKernel();
    return name == "copy" || name == "store" || name == "assign";
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

  //===--------------------------------------------------------------------===//
  // Rewrites: fetches for off-device tensors, swaps, recomputation
  //===--------------------------------------------------------------------===//

  /// Gives every read of an off-device parameter a fetch into the arena
  /// right before it, and every in-place update of one a write-back.
  void insertFetches(func::FuncOp func) {
    Block &body = func.getBody().front();
    for (exec::ParamOp p : llvm::to_vector(body.getOps<exec::ParamOp>())) {
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
        Value fetched = createTransfer(b, user->getLoc(), "copy",
                                       p.getType(), p.getResult())
                            .getResult(0);
        ++numFetches;
        SmallVector<exec::ViewOp> chain;
        for (Value v = use->get(); v != p.getResult();
             v = v.getDefiningOp<exec::ViewOp>().getInput())
          chain.push_back(v.getDefiningOp<exec::ViewOp>());
        for (exec::ViewOp view : llvm::reverse(chain))
          fetched = b.create<exec::ViewOp>(view.getLoc(), view.getType(),
                                           fetched);
        use->set(fetched);
        if (inPlace) {
          // The kernel ran on the copy: write it back. After an optimizer
          // update that is an "assign", skipped like the update itself on
          // micro-batches that only accumulate; after any other in-place
          // kernel (an accumulation) a "store", which runs on every one.
          b.setInsertionPointAfter(user);
          bool skipped = kernel.getKernel().starts_with("update_");
          createTransfer(b, user->getLoc(), skipped ? "assign" : "store", {},
                         {p.getResult(), fetched});
          ++numWritebacks;
        }
      }
    }
  }

  /// Swaps `value` out to `tier` after its last forward use and back in
  /// before its first backward use. False when it cannot wait elsewhere.
  bool swap(Block &body, Value value, StringRef tier, unsigned index) {
    SmallVector<OpOperand *> backwardUses;
    Operation *lastForward = value.getDefiningOp();
    for (OpOperand *use : usesThroughViews(value)) {
      Operation *u = use->getOwner();
      if (u->hasAttr("strata.backward"))
        backwardUses.push_back(use);
      else if (lastForward->isBeforeInBlock(u))
        lastForward = u;
    }
    if (backwardUses.empty())
      return false;
    Operation *firstBackward = earliestUser(backwardUses);
    // Only a value the forward pass is done with can wait elsewhere (an
    // output, read after the run, cannot).
    if (!lastForward->isBeforeInBlock(firstBackward))
      return false;
    Value space = storeAfter(body, lastForward, value,
                             "swap." + std::to_string(index), tier);
    OpBuilder b(firstBackward);
    auto back =
        createTransfer(b, value.getLoc(), "copy", value.getType(), space);
    back->setAttr("strata.backward", b.getUnitAttr());
    replaceUses(backwardUses, value, back.getResult(0));
    ++numSwapped;
    return true;
  }

  /// Longest chain of kernels one recomputation may rerun.
  static constexpr unsigned kMaxChain = 8;

  /// The forward ops to rerun, in an order that respects their operands,
  /// so that `value` is available again right before `at`: its kernel and,
  /// for each input not available there, that input's ops in turn. An
  /// input is available when the backward pass keeps it anyway until `at`
  /// (an activation in `kept` used at or after `at`), or it is a device
  /// parameter or a step input, and nothing writes it in place between
  /// its forward reader and `at`. Empty when the chain would need more
  /// than kMaxChain kernels, a kernel that cannot rerun (a transfer, one
  /// with several results), or a leaf written in place.
  SmallVector<Operation *> recomputeChain(Value value, Operation *at,
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
        keptThere = p.getTier() == "device";
      else
        keptThere = isa_and_nonnull<exec::InputOp>(def) ||
                    (kept.contains(root) && usedFrom(root, at));
      if (!keptThere)
        return false;
      for (OpOperand *use : usesThroughViews(root)) {
        auto k = dyn_cast<exec::KernelOp>(use->getOwner());
        Operation *w = use->getOwner();
        if (k && k.getNumResults() == 0 && reader->isBeforeInBlock(w) &&
            w->isBeforeInBlock(at))
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
        if (!k || k.getNumResults() != 1 || isTransferKernel(k) ||
            k->hasAttr("strata.backward") || k->hasAttr("strata.optimizer") ||
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
  SmallVector<Operation *> chainFor(Value value,
                                    const llvm::DenseSet<Value> &kept) {
    SmallVector<OpOperand *> uses = backwardUsesOf(value);
    if (uses.empty())
      return {};
    return recomputeChain(value, earliestUser(uses), kept);
  }

  /// The cost in seconds of rerunning `chain`.
  double chainSeconds(ArrayRef<Operation *> chain) {
    double seconds = 0;
    for (Operation *op : chain)
      if (auto k = dyn_cast<exec::KernelOp>(op))
        seconds += kernelSeconds(k, machine);
    return seconds;
  }

  /// Replaces the backward uses of `value` with clones of `chain` (its
  /// recomputeChain) placed right before the first of them.
  void recompute(Value value, ArrayRef<Operation *> chain) {
    SmallVector<OpOperand *> backwardUses = backwardUsesOf(value);
    OpBuilder b(earliestUser(backwardUses));
    IRMapping mapping;
    for (Operation *op : chain) {
      Operation *again = b.clone(*op, mapping);
      again->setAttr("strata.backward", b.getUnitAttr());
      again->setAttr("strata.recomputed", b.getUnitAttr());
    }
    replaceUses(backwardUses, value, mapping.lookup(value));
    ++numRecomputed;
    ++recomputedCount;
    recomputedBytes += storageBytes(value.getType());
    // A value only the backward pass read need not be computed before.
    if (value.use_empty())
      value.getDefiningOp()->erase();
  }

  /// Applies `act` to `value`; returns what was done (a swap or a
  /// recomputation that is not possible keeps the value).
  /// `chain`, when given, is `value`'s recomputeChain, already found.
  Act applyAct(Block &body, Value value, Act act, llvm::DenseSet<Value> &kept,
               unsigned &swaps, ArrayRef<Operation *> chain = {}) {
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
      if (!swap(body, value, act == Act::Host ? "host" : "ssd", swaps))
        return Act::Keep;
      ++swaps;
      kept.erase(value);
      return act;
    }
    return Act::Keep;
  }

  /// Rewrites `func` as `placement` says. The caller suppresses
  /// diagnostics when this runs on a trial clone.
  LogicalResult apply(func::FuncOp func, const Placement &placement) {
    Block &body = func.getBody().front();
    SmallVector<exec::ParamOp> all(body.getOps<exec::ParamOp>());
    for (auto [p, tier] : llvm::zip(all, placement.tiers)) {
      if (tier == Tier::Ssd && !hasSsd)
        return p.emitError("placed on the SSD, but no --ssd-dir was given");
      p.setTier(tierName(tier));
    }
    insertFetches(func);
    SmallVector<Value> candidates = swappable(body);
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
    SmallVector<Value> gradients = gradientCandidates(body);
    if (gradients.size() != placement.grads.size())
      return func.emitError("internal error: ")
             << gradients.size() << " gradient candidates, the placement has "
             << placement.grads.size();
    for (auto [i, g] : llvm::enumerate(gradients)) {
      Act act = placement.grads[i];
      if (act == Act::Ssd && !hasSsd)
        return func.emitError("gradients on the SSD need --ssd-dir");
      if (act == Act::Host || act == Act::Ssd)
        swapGradient(body, g, act == Act::Host ? "host" : "ssd", i);
    }
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Placements: forced, greedy, naive; scoring and search
  //===--------------------------------------------------------------------===//

  /// The placement the options force, with everything automatic kept on
  /// the device.
  Placement forced(func::FuncOp func, size_t numCandidates,
                   size_t numGradients) {
    Placement out;
    out.label = "as forced";
    for (exec::ParamOp p : func.getBody().front().getOps<exec::ParamOp>()) {
      StringRef choice = mode(p.getState() ? Class::States : Class::Params);
      out.tiers.push_back(p.getConstant() || choice == "auto"
                              ? tierOf(p.getTier())
                              : tierOf(choice));
    }
    StringRef a = mode(Class::Activations);
    Act act = a == "host"        ? Act::Host
              : a == "ssd"       ? Act::Ssd
              : a == "recompute" ? Act::Recompute
                                 : Act::Keep;
    out.acts.assign(numCandidates, act);
    StringRef g = mode(Class::Gradients);
    out.grads.assign(numGradients, g == "host"  ? Act::Host
                                   : g == "ssd" ? Act::Ssd
                                                : Act::Keep);
    return out;
  }

  /// A greedy placement, built on `func` (a clone: it is rewritten):
  /// optimizer state leaves the device first, then parameters, largest
  /// first, to the host while the host budget lasts and then to the SSD;
  /// then activations, largest first, until the arena estimate fits, each
  /// recomputed or swapped as `policy` says.
  Placement greedy(func::FuncOp func, const Placement &start, Policy policy) {
    Block &body = func.getBody().front();
    Placement out = start;
    out.label = policy == Policy::Cost   ? "greedy"
                : policy == Policy::Swap ? "greedy, swaps only"
                                         : "greedy, recomputation first";
    SmallVector<exec::ParamOp> all(body.getOps<exec::ParamOp>());
    for (auto [p, tier] : llvm::zip(all, start.tiers))
      p.setTier(tierName(tier));
    uint64_t arena = liveArenaEstimate(body, arenaAlignment());
    uint64_t resident = 0, largestMoved = 0, host = 0;
    for (exec::ParamOp p : all) {
      uint64_t bytes = artifact::pagePadded(storageBytes(p.getType()));
      if (p.getTier() == "device")
        resident += bytes;
      else if (p.getTier() == "host")
        host += bytes;
    }
    SmallVector<unsigned> order;
    for (auto [i, p] : llvm::enumerate(all))
      if (isAuto(p) && p.getTier() == "device")
        order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
      if (all[a].getState() != all[b].getState())
        return bool(all[a].getState());
      return storageBytes(all[a].getType()) > storageBytes(all[b].getType());
    });
    // A fetched tensor needs a device copy while in use: budget for two of
    // the largest (the one in use and the next).
    for (unsigned i : order) {
      if (arena + resident + 2 * largestMoved <= gpuMem)
        break;
      uint64_t bytes = artifact::pagePadded(storageBytes(all[i].getType()));
      bool toHost = cpuMem == 0 || host + bytes <= cpuMem || !hasSsd;
      out.tiers[i] = toHost ? Tier::Host : Tier::Ssd;
      all[i].setTier(tierName(out.tiers[i]));
      host += toHost ? bytes : 0;
      resident -= bytes;
      largestMoved = std::max(largestMoved, bytes);
    }
    insertFetches(func);
    if (mode(Class::Activations) == "auto")
      greedyActivations(func, out, policy, resident, host);
    else
      applyForcedActivations(func, out);
    if (mode(Class::Gradients) != "auto")
      return out;
    // Then gradients, largest first, until the estimate fits.
    SmallVector<Value> grads = gradientCandidates(body);
    auto byBytes = llvm::to_vector(llvm::seq<unsigned>(0, grads.size()));
    std::stable_sort(byBytes.begin(), byBytes.end(), [&](unsigned a, unsigned b) {
      return storageBytes(grads[a].getType()) > storageBytes(grads[b].getType());
    });
    for (unsigned i : byBytes) {
      if (liveArenaEstimate(body, arenaAlignment()) + resident <= gpuMem)
        break;
      uint64_t bytes = storageBytes(grads[i].getType());
      bool toHost = cpuMem == 0 || host + bytes <= cpuMem;
      if (!toHost && !hasSsd)
        continue;
      if (!swapGradient(body, grads[i], toHost ? "host" : "ssd", i))
        continue;
      out.grads[i] = toHost ? Act::Host : Act::Ssd;
      host += toHost ? bytes : 0;
    }
    return out;
  }

  /// Rewrites `func` with the activation choices `out` already holds (the
  /// forced ones), so that later greedy steps see them.
  void applyForcedActivations(func::FuncOp func, const Placement &out) {
    Block &body = func.getBody().front();
    SmallVector<Value> candidates = swappable(body);
    llvm::DenseSet<Value> kept;
    for (auto [v, act] : llvm::zip(candidates, out.acts))
      if (act == Act::Keep)
        kept.insert(v);
    unsigned swaps = 0;
    for (auto [v, act] : llvm::zip(candidates, out.acts))
      if (act == Act::Host || act == Act::Ssd)
        applyAct(body, v, act, kept, swaps);
    for (auto [v, act] : llvm::zip(candidates, out.acts))
      if (act == Act::Recompute)
        applyAct(body, v, act, kept, swaps);
  }

  /// The greedy activation step: largest first until the arena estimate
  /// fits, each recomputed or swapped as `policy` says.
  void greedyActivations(func::FuncOp func, Placement &out, Policy policy,
                         uint64_t resident, uint64_t &host) {
    Block &body = func.getBody().front();
    SmallVector<Value> candidates = swappable(body);
    assert(candidates.size() == out.acts.size() && "candidates changed");
    llvm::DenseMap<Value, unsigned> indexOf;
    for (auto [i, v] : llvm::enumerate(candidates))
      indexOf[v] = i;
    llvm::DenseSet<Value> kept(candidates.begin(), candidates.end());
    SmallVector<Value> bySize = candidates;
    std::stable_sort(bySize.begin(), bySize.end(), [](Value a, Value b) {
      return storageBytes(a.getType()) > storageBytes(b.getType());
    });
    unsigned swaps = 0;
    for (Value v : bySize) {
      if (liveArenaEstimate(body, arenaAlignment()) + resident <= gpuMem)
        break;
      uint64_t bytes = storageBytes(v.getType());
      bool toHost = cpuMem == 0 || host + bytes <= cpuMem;
      Act moved = toHost ? Act::Host : Act::Ssd;
      SmallVector<Operation *> chain;
      if (policy != Policy::Swap)
        chain = chainFor(v, kept);
      double again = chain.empty() ? -1 : chainSeconds(chain);
      double round = transferSeconds(bytes, actName(moved), false, machine) +
                     transferSeconds(bytes, actName(moved), true, machine);
      Act act = again >= 0 && (policy == Policy::Recompute || again < round)
                    ? Act::Recompute
                : moved == Act::Ssd && !hasSsd ? Act::Keep
                                               : moved;
      act = applyAct(body, v, act, kept, swaps, chain);
      out.acts[indexOf[v]] = act;
      if (act == Act::Host)
        host += bytes;
    }
  }

  /// Applies `placement` to a clone of the module, plans its memory and
  /// predicts its step.
  Score score(func::FuncOp func, const Placement &placement) {
    ++evaluated;
    if (progress) {
      // A line every few seconds, only when planning runs that long.
      auto now = std::chrono::steady_clock::now();
      if (evaluated == 1)
        lastReport = now;
      else if (now - lastReport > std::chrono::seconds(3)) {
        lastReport = now;
        llvm::errs() << "strata-compile: planning placement: " << evaluated
                     << "/" << maxEvaluations << " placements scored";
        if (chosen.fits())
          llvm::errs() << ", best so far "
                       << llvm::format("%.2f", chosen.stepUs / 1e3)
                       << " ms predicted";
        llvm::errs() << "\n";
      }
    }
    MLIRContext *ctx = &getContext();
    ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
    OwningOpRef<ModuleOp> clone(cast<ModuleOp>(getOperation()->clone()));
    auto copy = clone->lookupSymbol<func::FuncOp>(func.getSymName());
    int64_t savedCount = recomputedCount, savedBytes = recomputedBytes;
    LogicalResult applied = apply(copy, placement);
    recomputedCount = savedCount, recomputedBytes = savedBytes;
    if (failed(applied))
      return Score();
    // Updates that would run on the CPU change the host link's traffic and
    // the host memory (landing buffers): score the plan they make.
    offloadOptimizerUpdates(copy, updates, machine, cpuJobBytes, cpuMem);
    PassManager pm(ctx, ModuleOp::getOperationName());
    PlanMemoryPassOptions memory;
    memory.deviceBudget = static_cast<int64_t>(gpuMem);
    pm.addPass(createPlanMemoryPass(memory));
    pm.addPass(createScheduleTransfersPass());
    if (failed(pm.run(*clone)))
      return Score();
    // The profile this pass read already, not the file again per score.
    predictStepTime(copy, machine);
    auto integer = [&](StringRef name) -> uint64_t {
      auto attr = copy->getAttrOfType<IntegerAttr>(name);
      return attr ? attr.getInt() : 0;
    };
    Score s;
    uint64_t device = integer("exec.arena_bytes") + integer("exec.params_bytes");
    uint64_t host = integer("exec.host_bytes");
    s.overBytes = (gpuMem && device > gpuMem ? device - gpuMem : 0) +
                  (cpuMem && host > cpuMem ? host - cpuMem : 0);
    auto predicted = copy->getAttrOfType<DictionaryAttr>("exec.predicted");
    s.stepUs = cast<IntegerAttr>(predicted.get("predicted_step_us")).getInt();
    return s;
  }

  /// Plans `func` and rewrites it. With a device budget and something left
  /// to the planner, it scores the greedy placements and the two naive
  /// ones (every activation swapped, every one recomputed), then improves
  /// the best by moving one tensor at a time while the predicted step
  /// drops (or, over budget, while the excess does); each placement is
  /// scored by planning its memory and replaying its schedule.
  LogicalResult place(func::FuncOp func) {
    Block &body = func.getBody().front();
    // The candidates do not depend on where parameters live, so they are
    // listed once, on the unplaced program.
    actBytes.clear();
    gradBytes.clear();
    for (Value v : swappable(body))
      actBytes.push_back(storageBytes(v.getType()));
    for (Value g : gradientCandidates(body))
      gradBytes.push_back(storageBytes(g.getType()));
    Placement best = forced(func, actBytes.size(), gradBytes.size());
    bool anyAuto = activations == "auto" || params == "auto" ||
                   states == "auto" || gradients == "auto";
    evaluated = 0;
    chosen = Score();
    if (gpuMem > 0 && anyAuto) {
      best = search(func, best);
      // A device budget that cannot be met is reported after memory
      // planning, with the minimum; a full host tier is reported here.
      uint64_t host = hostBytes(func, best);
      if (cpuMem > 0 && host > cpuMem && !hasSsd)
        return func.emitError("the device budget (")
               << gpuMem << " bytes) needs " << host
               << " bytes of tensors on the host, over the host budget ("
               << cpuMem << " bytes), and no --ssd-dir was given";
    }
    // One statement each: a Statistic cannot be assigned from another.
    for (Statistic *s : {&numFetches, &numWritebacks, &numSwapped,
                         &numRecomputed, &numGradientsSwapped})
      *s = 0;
    recomputedCount = recomputedBytes = 0;
    if (failed(apply(func, best)))
      return failure();
    Builder b(func.getContext());
    if (recomputedCount > 0)
      func->setAttr("exec.recomputed",
                    b.getDictionaryAttr({
                        b.getNamedAttr("recomputed_activations",
                                       b.getI64IntegerAttr(recomputedCount)),
                        b.getNamedAttr("recomputed_bytes",
                                       b.getI64IntegerAttr(recomputedBytes)),
                    }));
    if (evaluated > 0) {
      SmallVector<NamedAttribute> entries{b.getNamedAttr(
          "planner_evaluated", b.getI64IntegerAttr(evaluated))};
      for (auto &[key, s] : naive)
        entries.push_back(b.getNamedAttr(
            s.fits() ? key + "_us" : key + "_over_bytes",
            b.getI64IntegerAttr(s.fits() ? s.stepUs
                                         : static_cast<int64_t>(s.overBytes))));
      func->setAttr("exec.planner", b.getDictionaryAttr(entries));
    }
    return success();
  }

  /// Host bytes the stored tensors `placement` puts on the host take.
  static uint64_t hostBytes(func::FuncOp func, const Placement &placement) {
    uint64_t host = 0;
    for (auto [p, tier] : llvm::zip(
             func.getBody().front().getOps<exec::ParamOp>(), placement.tiers))
      if (tier == Tier::Host)
        host += artifact::pagePadded(storageBytes(p.getType()));
    return host;
  }

  /// Moves `choices` (indexed like `bytes`) off the device: to the host
  /// while `host` stays within the host budget, then to the SSD.
  void offDevice(ArrayRef<uint64_t> bytes, SmallVectorImpl<Act> &choices,
                 uint64_t &host) const {
    for (auto [n, act] : llvm::zip(bytes, choices)) {
      bool toHost = cpuMem == 0 || host + n <= cpuMem || !hasSsd;
      act = toHost ? Act::Host : Act::Ssd;
      host += toHost ? n : 0;
    }
  }

  /// The planner's search (see place()).
  Placement search(func::FuncOp func, const Placement &start) {
    SmallVector<std::pair<Placement, Score>> tried;
    auto consider = [&](Placement p) {
      Score s = score(func, p);
      LLVM_DEBUG(llvm::dbgs() << p.label << ": over " << s.overBytes
                              << " B, " << s.stepUs << " us\n");
      tried.push_back({std::move(p), s});
    };
    for (Policy policy : {Policy::Cost, Policy::Swap, Policy::Recompute}) {
      OwningOpRef<ModuleOp> clone(cast<ModuleOp>(getOperation()->clone()));
      auto copy = clone->lookupSymbol<func::FuncOp>(func.getSymName());
      int64_t savedCount = recomputedCount, savedBytes = recomputedBytes;
      consider(greedy(copy, start, policy));
      recomputedCount = savedCount, recomputedBytes = savedBytes;
      if (activations != "auto")
        break;
    }
    naive.clear();
    naive.push_back({"planner_greedy", tried.front().second});
    if (activations == "auto") {
      // The naive plans, with the first greedy plan's parameters: every
      // activation swapped (to the host while the host budget lasts), and
      // every one that can be recomputed recomputed.
      Placement swapAll = tried.front().first;
      swapAll.label = "swap all activations";
      uint64_t host = hostBytes(func, swapAll);
      offDevice(actBytes, swapAll.acts, host);
      Placement recomputeAll = tried.front().first;
      recomputeAll.label = "recompute all activations";
      recomputeAll.acts.assign(recomputeAll.acts.size(), Act::Recompute);
      consider(swapAll);
      naive.push_back({"planner_swap_all", tried.back().second});
      consider(recomputeAll);
      naive.push_back({"planner_recompute_all", tried.back().second});
    }
    // The least device memory the options allow. When nothing fits, this
    // is the plan whose need the error reports as the minimum.
    Placement least = leastDevice(func, tried.front().first);
    consider(least);
    SmallVector<std::pair<Class, std::string>> forcedClasses =
        forcedStarts(func, consider);
    auto bestIt = std::min_element(
        tried.begin(), tried.end(),
        [](auto &a, auto &b) { return a.second < b.second; });
    // Part of what is left to the best start; the rest to one search per
    // class, as a run forcing that class would do it: from the best
    // placement tried that has the whole class on one tier (or one
    // activation choice), with the class held there (a local search from
    // the best start alone can settle where one of those runs does better).
    SmallVector<std::pair<size_t, std::pair<Class, std::string>>> order;
    for (Class c : {Class::Params, Class::States, Class::Activations,
                    Class::Gradients}) {
      if (mode(c) != "auto")
        continue;
      std::optional<size_t> pick;
      std::string value;
      for (const auto &[forcedClass, forcedValue] : forcedClasses) {
        if (forcedClass != c)
          continue;
        for (size_t i = 0; i < tried.size(); ++i)
          if (uniform(func, tried[i].first, c, forcedValue) &&
              (!pick || tried[i].second < tried[*pick].second)) {
            pick = i;
            value = forcedValue;
          }
      }
      if (pick)
        order.push_back({*pick, {c, value}});
    }
    Placement result = improve(
        func, bestIt->first, bestIt->second,
        evaluated + (maxEvaluations - evaluated) / (1 + order.size() / 2));
    Score resultScore = chosen;
    for (auto [k, entry] : llvm::enumerate(order)) {
      int64_t share = (maxEvaluations - evaluated) /
                      static_cast<int64_t>(order.size() - k);
      if (share <= 0)
        break;
      std::tie(overridden, overrideValue) = entry.second;
      Placement p = improve(func, tried[entry.first].first,
                            tried[entry.first].second, evaluated + share);
      Score ps = chosen;
      overrideValue.clear();
      if (ps < resultScore) {
        result = std::move(p);
        resultScore = ps;
      }
    }
    chosen = resultScore;
    return result;
  }

  /// `base` with everything automatic off the device (to the host while
  /// the host budget lasts, then the SSD), every automatic activation and
  /// gradient swapped.
  Placement leastDevice(func::FuncOp func, const Placement &base) {
    Placement least = base;
    least.label = "everything off the device";
    uint64_t host = 0;
    for (auto [i, p] :
         llvm::enumerate(func.getBody().front().getOps<exec::ParamOp>())) {
      uint64_t bytes = artifact::pagePadded(storageBytes(p.getType()));
      if (isAuto(p)) {
        bool toHost = cpuMem == 0 || host + bytes <= cpuMem || !hasSsd;
        least.tiers[i] = toHost ? Tier::Host : Tier::Ssd;
      }
      host += least.tiers[i] == Tier::Host ? bytes : 0;
    }
    if (mode(Class::Activations) == "auto")
      offDevice(actBytes, least.acts, host);
    if (mode(Class::Gradients) == "auto")
      offDevice(gradBytes, least.grads, host);
    return least;
  }

  /// Whether `p` has every tensor of class `c` the planner may move at
  /// `value` ("device", "host", "ssd", or "recompute" for activations), as
  /// forcing the class would (constants stay where they are then).
  bool uniform(func::FuncOp func, const Placement &p, Class c,
               StringRef value) {
    if (c == Class::Activations || c == Class::Gradients) {
      Act want = value == "host"        ? Act::Host
                 : value == "ssd"       ? Act::Ssd
                 : value == "recompute" ? Act::Recompute
                                        : Act::Keep;
      const SmallVector<Act> &acts =
          c == Class::Activations ? p.acts : p.grads;
      return llvm::all_of(acts, [&](Act a) { return a == want; });
    }
    Tier want = tierOf(value);
    for (auto [i, op] :
         llvm::enumerate(func.getBody().front().getOps<exec::ParamOp>()))
      if (isAuto(op) && !op.getConstant() &&
          bool(op.getState()) == (c == Class::States) && p.tiers[i] != want)
        return false;
    return true;
  }

  /// The greedy start of every placement a user can force for one class
  /// the options leave to the planner (--place-states ssd, ...), so the
  /// search begins where such a run would and cannot end up worse than its
  /// first candidate.
  SmallVector<std::pair<Class, std::string>>
  forcedStarts(func::FuncOp func, function_ref<void(Placement)> consider) {
    SmallVector<std::pair<Class, StringRef>> starts;
    SmallVector<StringRef> tiers{"device", "host"};
    if (hasSsd)
      tiers.push_back("ssd");
    for (Class c : {Class::Params, Class::States, Class::Gradients})
      if (mode(c) == "auto")
        for (StringRef t : tiers)
          starts.push_back({c, t});
    if (mode(Class::Activations) == "auto") {
      for (StringRef t : tiers)
        starts.push_back({Class::Activations, t});
      starts.push_back({Class::Activations, "recompute"});
    }
    for (auto [c, value] : starts) {
      overridden = c;
      overrideValue = value.str();
      OwningOpRef<ModuleOp> clone(cast<ModuleOp>(getOperation()->clone()));
      auto copy = clone->lookupSymbol<func::FuncOp>(func.getSymName());
      int64_t savedCount = recomputedCount, savedBytes = recomputedBytes;
      Placement start = forced(copy, actBytes.size(), gradBytes.size());
      Placement p = greedy(copy, start, Policy::Cost);
      recomputedCount = savedCount, recomputedBytes = savedBytes;
      // The greedy start and the least-device plan of that run.
      Placement least = leastDevice(func, p);
      overrideValue.clear();
      p.label = "forced start";
      consider(std::move(p));
      least.label = "forced start, everything else off the device";
      consider(std::move(least));
    }
    SmallVector<std::pair<Class, std::string>> out;
    for (auto [c, value] : starts)
      out.push_back({c, value.str()});
    return out;
  }

  /// Local search from `best`: one choice changed at a time, largest
  /// tensor first, a change kept when it lowers the score, until a round
  /// changes nothing or the evaluations run out. Within the budgets only
  /// moves toward the device can pay off (recomputing instead of a round
  /// trip counts); over them, only moves away from it.
  Placement improve(func::FuncOp func, Placement best, Score bestScore,
                    int64_t limit) {
    chosen = bestScore;
    auto bySize = [](ArrayRef<uint64_t> bytes, bool enabled) {
      SmallVector<std::pair<uint64_t, unsigned>> order;
      if (enabled)
        for (auto [i, n] : llvm::enumerate(bytes))
          order.push_back({n, static_cast<unsigned>(i)});
      llvm::sort(order, std::greater<>());
      return order;
    };
    SmallVector<uint64_t> paramBytes;
    SmallVector<bool> paramAuto;
    for (exec::ParamOp p : func.getBody().front().getOps<exec::ParamOp>()) {
      paramBytes.push_back(isAuto(p) ? storageBytes(p.getType()) : 0);
      paramAuto.push_back(isAuto(p));
    }
    auto paramOrder = bySize(paramBytes, true);
    llvm::erase_if(paramOrder, [&](auto &e) { return !paramAuto[e.second]; });
    auto actOrder = bySize(actBytes, mode(Class::Activations) == "auto");
    auto gradOrder = bySize(gradBytes, mode(Class::Gradients) == "auto");
    // How far from the device each choice is.
    auto rank = [](Act a) {
      return a == Act::Keep ? 0 : a == Act::Host ? 1 : a == Act::Recompute ? 2 : 3;
    };
    bool improved = true;
    auto attempt = [&](Placement trial) {
      if (evaluated >= limit)
        return false;
      Score s = score(func, trial);
      if (!(s < bestScore))
        return false;
      best = std::move(trial);
      bestScore = chosen = s;
      improved = true;
      return true;
    };
    // Tries the alternatives of choice `i` of `field`, first improvement.
    auto moves = [&](auto field, ArrayRef<std::pair<uint64_t, unsigned>> order,
                     auto alternatives, auto useful) {
      for (auto [bytes, i] : order)
        for (auto alt : alternatives) {
          auto cur = (best.*field)[i];
          if (alt == cur || !useful(cur, alt))
            continue;
          Placement trial = best;
          (trial.*field)[i] = alt;
          if (attempt(std::move(trial)))
            break;
        }
    };
    auto towardIfFits = [&](auto cur, auto alt) {
      return bestScore.fits() == (rank(alt) < rank(cur));
    };
    // Whole classes and whole layers of stored tensors (the indices of
    // the automatic ones).
    SmallVector<unsigned> paramIdx, stateIdx;
    std::map<std::string, SmallVector<unsigned>> layers;
    for (auto [i, p] :
         llvm::enumerate(func.getBody().front().getOps<exec::ParamOp>())) {
      if (!isAuto(p))
        continue;
      (p.getState() ? stateIdx : paramIdx).push_back(i);
      std::string key = layerOf(p.getName());
      if (!key.empty())
        layers[key].push_back(i);
    }
    // Sets every choice of `field` at `indices` (all when empty) to `value`
    // and scores that, unless nothing changes.
    auto setAll = [&](auto field, ArrayRef<unsigned> indices, auto value) {
      Placement trial = best;
      bool changed = false;
      auto set = [&](unsigned i) {
        changed |= (trial.*field)[i] != value;
        (trial.*field)[i] = value;
      };
      if (indices.empty())
        for (unsigned i = 0; i < (trial.*field).size(); ++i)
          set(i);
      else
        llvm::for_each(indices, set);
      if (changed)
        attempt(std::move(trial));
    };
    while (improved && evaluated < limit) {
      improved = false;
      SmallVector<Act> actAlternatives{Act::Keep, Act::Host, Act::Recompute};
      SmallVector<Act> gradAlternatives{Act::Keep, Act::Host};
      SmallVector<Tier> tierAlternatives{Tier::Device, Tier::Host};
      if (hasSsd) {
        actAlternatives.push_back(Act::Ssd);
        gradAlternatives.push_back(Act::Ssd);
        tierAlternatives.push_back(Tier::Ssd);
      }
      // Whole classes first: each placement a user can force for one class
      // (--place-states ssd, ...) is one such move from here, so the search
      // does not stop short of one its own score prefers. Then whole layers
      // (a layer's parameters and states together), then single tensors.
      for (Tier t : tierAlternatives) {
        if (!paramIdx.empty())
          setAll(&Placement::tiers, paramIdx, t);
        if (!stateIdx.empty())
          setAll(&Placement::tiers, stateIdx, t);
      }
      if (mode(Class::Activations) == "auto" && !best.acts.empty())
        for (Act a : actAlternatives)
          setAll(&Placement::acts, {}, a);
      if (mode(Class::Gradients) == "auto" && !best.grads.empty())
        for (Act g : gradAlternatives)
          setAll(&Placement::grads, {}, g);
      if (layers.size() > 1)
        for (auto &[key, indices] : layers)
          for (Tier t : tierAlternatives)
            setAll(&Placement::tiers, indices, t);
      moves(&Placement::acts, actOrder, actAlternatives, [&](Act cur, Act alt) {
        if (alt == Act::Recompute)
          return bestScore.fits() ? cur != Act::Keep : cur == Act::Keep;
        return towardIfFits(cur, alt);
      });
      moves(&Placement::grads, gradOrder, gradAlternatives, towardIfFits);
      moves(&Placement::tiers, paramOrder, tierAlternatives,
            [&](Tier cur, Tier alt) { return bestScore.fits() == (alt < cur); });
    }
    chosen = bestScore;
    LLVM_DEBUG(llvm::dbgs() << "chosen: over " << bestScore.overBytes
                            << " B, " << bestScore.stepUs << " us after "
                            << evaluated << " placements\n");
    return best;
  }

  /// Sizes of the activation and gradient swap candidates, by index.
  SmallVector<uint64_t> actBytes, gradBytes;
  int64_t evaluated = 0;
  Score chosen;
  std::chrono::steady_clock::time_point lastReport;
  SmallVector<std::pair<std::string, Score>> naive;
};

} // namespace
