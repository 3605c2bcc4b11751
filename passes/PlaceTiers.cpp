//===- PlaceTiers.cpp - Parameters and state on device, host or SSD -------===//

#include "passes/Passes.h"

#include "dialects/Exec/ExecDialect.h"
#include "runtime/artifact/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

#define DEBUG_TYPE "strata-place-tiers"

namespace strata {
#define GEN_PASS_DEF_PLACETIERSPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

uint64_t bytesOf(Type type) {
  auto shaped = cast<ShapedType>(type);
  Type et = shaped.getElementType();
  uint64_t element = et.isInteger(1) ? 1 : (et.getIntOrFloatBitWidth() + 7) / 8;
  return static_cast<uint64_t>(shaped.getNumElements()) * element;
}

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

struct PlaceTiersPass : public strata::impl::PlaceTiersPassBase<PlaceTiersPass> {
  using PlaceTiersPassBase::PlaceTiersPassBase;

  void runOnOperation() override {
    for (StringRef opt : {StringRef(params), StringRef(states)})
      if (opt != "auto" && opt != "device" && opt != "host" && opt != "ssd") {
        getOperation().emitError("unknown tier '")
            << opt << "' (auto, device, host or ssd)";
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
          (bytesOf(v.getType()) + alignment - 1) / alignment * alignment);
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
    // Stored tensors take whole 4 KiB pages in their region.
    auto stored = [](exec::ParamOp p) {
      uint64_t a = artifact::kParamAlignment;
      return (bytesOf(p.getType()) + a - 1) / a * a;
    };
    uint64_t resident = 0, largestMoved = 0, host = 0;
    for (exec::ParamOp p : all)
      if (p.getTier() == "device")
        resident += stored(p);
    SmallVector<exec::ParamOp> candidates;
    for (exec::ParamOp p : all)
      if (!p.getConstant() && p.getTier() == "device" &&
          (p.getState() ? states == "auto" : params == "auto"))
        candidates.push_back(p);
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](exec::ParamOp a, exec::ParamOp b) {
                       if (a.getState() != b.getState())
                         return a.getState();
                       return bytesOf(a.getType()) > bytesOf(b.getType());
                     });
    // A fetched tensor needs a device copy while in use: budget for two of
    // the largest (the one in use and the next).
    auto need = [&] { return arena + resident + 2 * largestMoved; };
    for (exec::ParamOp p : candidates) {
      if (need() <= gpuMem)
        break;
      uint64_t bytes = stored(p);
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

  LogicalResult place(func::FuncOp func) {
    Block &body = func.getBody().front();
    SmallVector<exec::ParamOp> all(body.getOps<exec::ParamOp>());
    if (failed(decide(func, all)))
      return failure();
    for (exec::ParamOp p : all) {
      if (p.getTier() == "device")
        continue;
      // Uses through views are rebuilt on the fetched copy.
      SmallVector<OpOperand *> uses;
      std::function<void(Value)> collect = [&](Value v) {
        for (OpOperand &use : v.getUses()) {
          if (auto view = dyn_cast<exec::ViewOp>(use.getOwner()))
            collect(view.getResult());
          else
            uses.push_back(&use);
        }
      };
      collect(p.getResult());
      for (OpOperand *use : uses) {
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
    return success();
  }
};

} // namespace
