//===- ArenaRanges.cpp - Device-arena bytes an exec kernel touches --------===//

#include "passes/ArenaRanges.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace strata {

uint64_t storageBytes(Type type) {
  auto shaped = cast<ShapedType>(type);
  Type et = shaped.getElementType();
  uint64_t element = et.isInteger(1) ? 1 : (et.getIntOrFloatBitWidth() + 7) / 8;
  return static_cast<uint64_t>(shaped.getNumElements()) * element;
}

Operation *storedRoot(Value v) {
  while (auto view = v.getDefiningOp<exec::ViewOp>())
    v = view.getInput();
  Operation *def = v.getDefiningOp();
  if (isa_and_nonnull<exec::ParamOp, exec::SwapSpaceOp>(def))
    return def;
  return nullptr;
}

StringRef tierOf(Value v) {
  Operation *root = storedRoot(v);
  if (auto p = dyn_cast_or_null<exec::ParamOp>(root))
    return p.getTier();
  if (auto s = dyn_cast_or_null<exec::SwapSpaceOp>(root))
    return s.getTier();
  return "device";
}

bool isTransfer(exec::KernelOp kernel) {
  StringRef name = kernel.getKernel();
  if (kernel.getInputs().empty() ||
      (name != "copy" && name != "assign" && name != "store"))
    return false;
  return tierOf(kernel.getInputs()[0]) != "device";
}

std::optional<artifact::ArenaRange> arenaRange(Value v, bool pageAligned) {
  uint64_t bytes = storageBytes(v.getType());
  while (auto view = v.getDefiningOp<exec::ViewOp>())
    v = view.getInput();
  Operation *def = v.getDefiningOp();
  if (!def || isa<exec::ParamOp, exec::SwapSpaceOp>(def))
    return std::nullopt;
  int64_t offset;
  auto result = cast<OpResult>(v);
  if (auto all = def->getAttrOfType<DenseI64ArrayAttr>("offsets"))
    offset = all.asArrayRef()[result.getResultNumber()];
  else if (auto one = def->getAttrOfType<IntegerAttr>("offset"))
    offset = one.getInt();
  else
    return std::nullopt;
  if (pageAligned)
    bytes = artifact::pagePadded(bytes);
  return artifact::ArenaRange{static_cast<uint64_t>(offset),
                   static_cast<uint64_t>(offset) + bytes};
}

void arenaAccesses(exec::KernelOp kernel,
                   std::vector<artifact::ArenaRange> &reads,
                   std::vector<artifact::ArenaRange> &writes) {
  reads.clear();
  writes.clear();
  bool ssd = isTransfer(kernel) && tierOf(kernel.getInputs()[0]) == "ssd";
  bool update = kernel.getNumResults() == 0;
  for (Value v : kernel.getInputs()) {
    std::optional<artifact::ArenaRange> r = arenaRange(v, ssd);
    if (!r)
      continue;
    reads.push_back(*r);
    if (update)
      writes.push_back(*r);
  }
  for (Value v : kernel.getResults())
    if (std::optional<artifact::ArenaRange> r = arenaRange(v, ssd))
      writes.push_back(*r);
}

} // namespace strata
