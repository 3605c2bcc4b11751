//===- LowPrecisionCopies.cpp - The bf16/fp16 weights the update writes ---===//
//
// See LowPrecisionCopiesPass in Passes.td. Under mixed precision the model
// reads each fp32 master through casts; the cast's result is held from the
// forward pass to the backward pass's matrix products and, for a master off
// the device, costs a fetch of four bytes per weight. Here the casts of a
// master become reads of a stored copy in the low precision that the
// master's update writes (rounded exactly as the cast rounds), so the
// training computes the same numbers from half the weight bytes.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/training/HalfValues.h"

#include "runtime/artifact/KernelTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

namespace strata {
#define GEN_PASS_DEF_LOWPRECISIONCOPIESPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// The 16-bit float type `cast` narrows an fp32 tensor to, or null.
FloatType narrowedTo(exec::KernelOp kernel) {
  if (!kernel.isKernel(artifact::Kernel::Cast) || kernel.getNumResults() != 1)
    return {};
  auto out = dyn_cast<FloatType>(
      cast<ShapedType>(kernel.getResult(0).getType()).getElementType());
  return out && (out.isBF16() || out.isF16()) ? out : FloatType();
}

struct LowPrecisionCopiesPass
    : public strata::impl::LowPrecisionCopiesPassBase<LowPrecisionCopiesPass> {
  using LowPrecisionCopiesPassBase::LowPrecisionCopiesPassBase;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func.getBody().hasOneBlock() && failed(run(func)))
        return signalPassFailure();
  }

  LogicalResult run(func::FuncOp func) {
    Block &body = func.getBody().front();
    llvm::StringSet<> names;
    for (auto p : body.getOps<exec::ParamOp>())
      names.insert(p.getName());
    llvm::DenseMap<Operation *, unsigned> position;
    for (Operation &op : body)
      position[&op] = position.size();
    for (auto update : llvm::to_vector(body.getOps<exec::KernelOp>())) {
      artifact::Kernel kernel;
      if (!artifact::kernelByName(update.getKernel(), kernel) ||
          (kernel != artifact::Kernel::UpdateSgd &&
           kernel != artifact::Kernel::UpdateMomentum &&
           kernel != artifact::Kernel::UpdateAdamW))
        continue;
      std::vector<int64_t> ints(update.getInts().begin(),
                                update.getInts().end());
      if (artifact::updateOperands(kernel, update.getInputs().size(), ints)
              .low >= 0)
        continue;
      auto master = update.getInputs()[0].getDefiningOp<exec::ParamOp>();
      if (!master || !master.getTrainable() ||
          !cast<ShapedType>(master.getType()).getElementType().isF32())
        continue;
      // Every cast of the master to one 16-bit type, each of whose readers
      // comes before the update (a fused update in the backward pass may
      // precede a reader of the old weights: those casts stay).
      SmallVector<exec::KernelOp> casts;
      FloatType low;
      bool usable = true;
      for (Operation *user : master->getUsers()) {
        auto narrowing = dyn_cast<exec::KernelOp>(user);
        FloatType to = narrowing ? narrowedTo(narrowing) : FloatType();
        if (!to)
          continue;
        if (low && to != low) {
          usable = false;
          break;
        }
        low = to;
        SmallVector<Operation *> readers(narrowing->getUsers());
        while (!readers.empty()) {
          Operation *reader = readers.pop_back_val();
          usable &= position.lookup(reader) < position.lookup(update);
          if (isa<exec::ViewOp>(reader))
            readers.append(reader->user_begin(), reader->user_end());
        }
        usable &= position.lookup(narrowing) < position.lookup(update);
        casts.push_back(narrowing);
      }
      if (!usable || casts.empty()) {
        numKept += casts.size();
        continue;
      }
      // Named after the master, unique among the stored tensors.
      StringRef suffix = low.isBF16() ? ".bf16" : ".fp16";
      std::string name = (master.getName() + suffix).str();
      for (int k = 2; names.contains(name); ++k)
        name = (master.getName() + suffix + "." + Twine(k)).str();
      names.insert(name);
      auto lowType = RankedTensorType::get(
          cast<ShapedType>(master.getType()).getShape(), low);
      // A sharded master's copy is sharded too, its value whole as the
      // master's is.
      auto valueType = RankedTensorType::get(
          cast<ShapedType>(master.getValue().getType()).getShape(), low);
      std::optional<ElementsAttr> value =
          deferCopyValues ? std::optional<ElementsAttr>(DenseElementsAttr::get(
                                valueType, FloatAttr::get(low, 0.0)))
                          : narrowValues(master.getValue(), low, name);
      if (!value)
        return master.emitError("cannot read the values of '")
               << master.getName() << "' to make its " << suffix.drop_front()
               << " copy";
      OpBuilder b(master);
      b.setInsertionPointAfter(master);
      auto copy = b.create<exec::ParamOp>(
          master.getLoc(), lowType, b.getStringAttr(name), UnitAttr(),
          UnitAttr(), UnitAttr(), *value, IntegerAttr(), master.getTierAttr(),
          master.getNameAttr(), master.getShardRanksAttr());
      if (deferCopyValues)
        copy->setAttr(exec::kDeferredCopyAttr, b.getUnitAttr());
      for (exec::KernelOp narrowing : casts) {
        narrowing.getResult(0).replaceAllUsesWith(copy.getResult());
        narrowing.erase();
      }
      // The copy last; ints[1] = 1 says so (ints[0]: accumulation).
      update.getInputsMutable().append(copy.getResult());
      if (ints.empty())
        ints.push_back(1);
      ints.resize(2);
      ints[1] = 1;
      update.setInts(ints);
      numCopies += 1;
      numCastsRemoved += casts.size();
    }
    return success();
  }
};

} // namespace
