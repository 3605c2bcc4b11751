//===- ArenaRanges.cpp - Device-arena bytes an exec kernel touches --------===//

#include "passes/analysis/ArenaRanges.h"

#include "runtime/artifact/KernelTable.h"
#include "runtime/artifact/StepOrder.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace strata {

uint64_t storageBytes(Type type) {
  auto bytes = [](int64_t elements, Type et) {
    uint64_t element =
        et.isInteger(1) ? 1 : (et.getIntOrFloatBitWidth() + 7) / 8;
    return static_cast<uint64_t>(elements) * element;
  };
  // Exec values are ranked tensors: their class directly, not through
  // the ShapedType interface (asked for every operand of every kernel each
  // time the planner scores a placement).
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return bytes(tensor.getNumElements(), tensor.getElementType());
  auto shaped = cast<ShapedType>(type);
  return bytes(shaped.getNumElements(), shaped.getElementType());
}

Value viewRoot(Value v) {
  while (auto view = v.getDefiningOp<exec::ViewOp>())
    v = view.getInput();
  return v;
}

Operation *storedRoot(Value v) {
  Operation *def = viewRoot(v).getDefiningOp();
  if (isa_and_nonnull<exec::ParamOp, exec::SwapSpaceOp>(def))
    return def;
  return nullptr;
}

StringRef storedName(Value v) {
  Operation *root = storedRoot(v);
  if (auto p = dyn_cast_or_null<exec::ParamOp>(root))
    return p.getName();
  if (auto s = dyn_cast_or_null<exec::SwapSpaceOp>(root))
    return s.getName();
  return {};
}

exec::Tier tierOf(Value v) {
  Operation *root = storedRoot(v);
  if (auto p = dyn_cast_or_null<exec::ParamOp>(root))
    return p.getTier();
  if (auto s = dyn_cast_or_null<exec::SwapSpaceOp>(root))
    return s.getTier();
  return exec::Tier::Device;
}

bool isTransfer(exec::KernelOp kernel) {
  if (kernel.getInputs().empty() || !kernel.isTransferKernel())
    return false;
  return tierOf(kernel.getInputs()[0]) != exec::Tier::Device;
}

std::vector<unsigned> writtenInputs(exec::KernelOp kernel) {
  const artifact::KernelInfo *info =
      artifact::kernelInfoByName(kernel.getKernel());
  if (!info)
    return {};
  return artifact::writtenInputs(
      info->kernel, kernel.getInputs().size(),
      std::vector<int64_t>(kernel.getInts().begin(), kernel.getInts().end()));
}

std::vector<artifact::InputUse> inputUses(exec::KernelOp kernel) {
  size_t n = kernel.getInputs().size();
  const artifact::KernelInfo *info =
      artifact::kernelInfoByName(kernel.getKernel());
  if (!info)
    return std::vector<artifact::InputUse>(n);
  return artifact::inputUses(
      info->kernel, n,
      std::vector<int64_t>(kernel.getInts().begin(), kernel.getInts().end()));
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
  // A kernel's offsets through its own accessors (asked for every operand
  // of every kernel each time the planner scores a placement); other ops'
  // by name.
  DenseI64ArrayAttr all;
  IntegerAttr one;
  if (auto kernel = dyn_cast<exec::KernelOp>(def)) {
    all = kernel.getOffsetsAttr();
    one = kernel.getOffsetAttr();
  } else {
    all = def->getAttrOfType<DenseI64ArrayAttr>("offsets");
    one = def->getAttrOfType<IntegerAttr>("offset");
  }
  if (all)
    offset = all.asArrayRef()[result.getResultNumber()];
  else if (one)
    offset = one.getInt();
  else
    return std::nullopt;
  if (pageAligned)
    bytes = artifact::pagePadded(bytes);
  return artifact::ArenaRange{static_cast<uint64_t>(offset),
                              static_cast<uint64_t>(offset) + bytes};
}

void stepAccesses(exec::KernelOp kernel, StoredIds &ids,
                  std::vector<artifact::Access> &reads,
                  std::vector<artifact::Access> &writes) {
  reads.clear();
  writes.clear();
  bool ssd =
      isTransfer(kernel) && tierOf(kernel.getInputs()[0]) == exec::Tier::Ssd;
  // Stored buffers never overlap each other: each is one unit of a region
  // of its own (the plan places them; only their identity matters here).
  auto access = [&](Value v) -> std::optional<artifact::Access> {
    if (std::optional<artifact::ArenaRange> r = arenaRange(v, ssd))
      return artifact::Access{artifact::Region::Arena, *r};
    Operation *root = storedRoot(v);
    if (!root)
      return std::nullopt;
    uint64_t id = ids.try_emplace(root, ids.size()).first->second;
    return artifact::Access{artifact::Region::Host, {id, id + 1}};
  };
  // Which inputs are read and written: the runtime's rule.
  std::vector<artifact::InputUse> uses = inputUses(kernel);
  for (auto [k, v] : llvm::enumerate(kernel.getInputs())) {
    std::optional<artifact::Access> a = access(v);
    if (!a)
      continue;
    if (uses[k].read)
      reads.push_back(*a);
    if (uses[k].written)
      writes.push_back(*a);
  }
  for (Value v : kernel.getResults())
    if (std::optional<artifact::Access> a = access(v))
      writes.push_back(*a);
}

exec::KernelOp createTransfer(OpBuilder &b, Location loc,
                              artifact::Kernel kernel, TypeRange results,
                              ValueRange operands) {
  return b.create<exec::KernelOp>(loc, results, artifact::kernelName(kernel),
                                  operands);
}

artifact::UpdateOperands updateOperandsOf(exec::KernelOp k) {
  artifact::Kernel kernel;
  artifact::kernelByName(k.getKernel(), kernel);
  return artifact::updateOperands(
      kernel, k.getInputs().size(),
      std::vector<int64_t>(k.getInts().begin(), k.getInts().end()));
}

bool isCpuUpdate(exec::KernelOp k) {
  artifact::Kernel kernel;
  if (!artifact::kernelByName(k.getKernel(), kernel) ||
      !artifact::runsOnCpu(kernel) || k.getInputs().empty())
    return false;
  for (Value v : k.getInputs())
    if (tierOf(v) != exec::Tier::Host && tierOf(v) != exec::Tier::Ssd)
      return false;
  return true;
}

namespace {
artifact::Queue naturalQueue(exec::KernelOp k) {
  if (k.isCollective())
    return artifact::Queue::Comm;
  if (isCpuUpdate(k))
    return artifact::Queue::Cpu;
  if (!isTransfer(k))
    return artifact::Queue::Compute;
  return artifact::transferQueue(tierOf(k.getInputs()[0]) == exec::Tier::Ssd,
                                 k.isKernel(artifact::Kernel::Copy));
}
} // namespace

std::vector<artifact::StepAccesses>
kernelAccesses(ArrayRef<exec::KernelOp> kernels) {
  StoredIds ids;
  std::vector<artifact::StepAccesses> accesses(kernels.size());
  for (auto [i, k] : llvm::enumerate(kernels))
    stepAccesses(k, ids, accesses[i].reads, accesses[i].writes);
  return accesses;
}

StepOrdering orderSteps(ArrayRef<exec::KernelOp> kernels,
                        const std::vector<artifact::StepAccesses> *accesses) {
  StepOrdering o;
  std::vector<int64_t> issueAfter;
  bool given = !kernels.empty();
  for (exec::KernelOp k : kernels) {
    issueAfter.push_back(k.getIssueAfter().value_or(artifact::kInProgramOrder));
    artifact::Queue q = naturalQueue(k);
    if (std::optional<exec::Queue> assigned = k.getQueue())
      q = exec::planQueue(*assigned);
    else
      given = false;
    o.queues.push_back(q);
    std::vector<uint32_t> w;
    if (DenseI64ArrayAttr waits = k.getWaitsAttr())
      for (int64_t i : waits.asArrayRef())
        if (i >= 0 && static_cast<size_t>(i) < kernels.size())
          w.push_back(static_cast<uint32_t>(i));
    o.waits.push_back(std::move(w));
  }
  o.order = artifact::issueOrder(issueAfter);
  if (!given) {
    if (accesses && accesses->size() == kernels.size()) {
      o.waits = artifact::deriveWaits(o.queues, *accesses, o.order);
    } else {
      o.waits =
          artifact::deriveWaits(o.queues, kernelAccesses(kernels), o.order);
    }
  }
  return o;
}

} // namespace strata
