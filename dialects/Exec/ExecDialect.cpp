//===- ExecDialect.cpp - Strata exec dialect ------------------------------===//

#include "dialects/Exec/ExecDialect.h"
#include "dialects/Strata/StrataDialect.h"

#include "runtime/artifact/KernelTable.h"
#include "runtime/artifact/Plan.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace strata::exec;

#include "dialects/Exec/ExecDialect.cpp.inc"
#include "dialects/Exec/ExecEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Exec/ExecAttrs.cpp.inc"

// exec::Queue is the plan's artifact::Queue in the IR: same cases, same
// values, converted by value.
#define STRATA_SAME_QUEUE(name)                                                \
  static_assert(static_cast<int>(Queue::name) ==                               \
                static_cast<int>(strata::artifact::Queue::name))
STRATA_SAME_QUEUE(Compute);
STRATA_SAME_QUEUE(HostToDevice);
STRATA_SAME_QUEUE(DeviceToHost);
STRATA_SAME_QUEUE(SsdRead);
STRATA_SAME_QUEUE(SsdWrite);
STRATA_SAME_QUEUE(Cpu);
STRATA_SAME_QUEUE(Comm);
#undef STRATA_SAME_QUEUE
static_assert(strata::artifact::kNumQueues == 7);

void ExecDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Exec/ExecOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Exec/ExecAttrs.cpp.inc"
      >();
}

LogicalResult ParamOp::verify() {
  if (std::optional<uint64_t> ranks = getShardRanks()) {
    auto whole = cast<ShapedType>(getValue().getType());
    auto shard = cast<ShapedType>(getType());
    int64_t n = static_cast<int64_t>(std::max<uint64_t>(*ranks, 1));
    int64_t c = (whole.getNumElements() + n - 1) / n;
    if (*ranks < 2 || shard.getElementType() != whole.getElementType() ||
        shard.getRank() != 1 || shard.getDimSize(0) != c)
      return emitOpError("a shard of ")
             << whole << " over " << *ranks << " ranks is "
             << RankedTensorType::get({c}, whole.getElementType())
             << " (of 2 or more ranks), not " << shard;
    return success();
  }
  if (getValue().getType() != getType())
    return emitOpError("value type ")
           << getValue().getType() << " does not match result type "
           << getType();
  return success();
}

LogicalResult KernelOp::verify() {
  const strata::artifact::KernelInfo *info =
      strata::artifact::kernelInfoByName(getKernel());
  if (!info)
    return emitOpError("unknown kernel '") << getKernel() << "'";
  // The kernel table's operand and result counts (what the plan loader
  // checks), here with a location.
  using strata::artifact::kVariadic;
  size_t in = getInputs().size(), out = getResults().size();
  bool inputsOk = in >= info->minInputs &&
                  (info->maxInputs == kVariadic || in <= info->maxInputs);
  if (!inputsOk) {
    auto diag = emitOpError("'") << getKernel() << "' takes ";
    unsigned most = info->maxInputs;
    if (info->maxInputs == kVariadic)
      diag << "at least " << (most = info->minInputs);
    else if (info->minInputs == info->maxInputs)
      diag << most;
    else
      diag << unsigned(info->minInputs) << " to " << most;
    return diag << (most == 1 ? " operand" : " operands") << ", not " << in;
  }
  bool outputsOk = info->outputs == kVariadic ? out >= 1 : out == info->outputs;
  if (!outputsOk)
    return emitOpError("'")
           << getKernel() << "' has "
           << (info->outputs == kVariadic ? std::string("one or more")
                                          : std::to_string(info->outputs))
           << " results, not " << out;
  return success();
}

LogicalResult ViewOp::verify() {
  auto in = cast<ShapedType>(getInput().getType());
  auto out = cast<ShapedType>(getType());
  if (in.getElementType() != out.getElementType() ||
      in.getNumElements() != out.getNumElements())
    return emitOpError("must keep the element type and count");
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Exec/ExecOps.cpp.inc"

namespace {

bool isStore(KernelOp k) {
  return k.isKernel(::strata::artifact::Kernel::Store) ||
         k.isKernel(::strata::artifact::Kernel::Assign);
}

/// Whether `v` (through views and fetched copies) is an update's gradient
/// operand (its second).
bool feedsUpdateAsGradient(Value v) {
  for (OpOperand &use : v.getUses()) {
    Operation *owner = use.getOwner();
    if (auto view = dyn_cast<ViewOp>(owner)) {
      if (feedsUpdateAsGradient(view.getResult()))
        return true;
      continue;
    }
    auto k = dyn_cast<KernelOp>(owner);
    if (!k)
      continue;
    if (k.isUpdate() && use.getOperandNumber() == 1)
      return true;
    if (k.isKernel(::strata::artifact::Kernel::Copy) &&
        k.getNumResults() == 1 && feedsUpdateAsGradient(k.getResult(0)))
      return true;
  }
  return false;
}

/// The swap spaces `v` (through views) is stored into.
void storedInto(Value v, SmallVectorImpl<Value> &spaces) {
  for (OpOperand &use : v.getUses()) {
    Operation *owner = use.getOwner();
    if (auto view = dyn_cast<ViewOp>(owner)) {
      storedInto(view.getResult(), spaces);
    } else if (auto k = dyn_cast<KernelOp>(owner)) {
      if (isStore(k) && use.getOperandNumber() == 1) {
        Value dest = k.getInputs()[0];
        while (auto view = dest.getDefiningOp<ViewOp>())
          dest = view.getInput();
        if (dest.getDefiningOp<SwapSpaceOp>())
          spaces.push_back(dest);
      }
    }
  }
}

} // namespace

strata::exec::RegionSizes strata::exec::regionSizes(Operation *func) {
  MLIRContext *ctx = func->getContext();
  auto bytes = [&](IntegerAttr attr) {
    return attr ? static_cast<uint64_t>(attr.getInt()) : 0;
  };
  IntegerAttr arena = ExecDialect::ArenaBytesAttrHelper(ctx).getAttr(func);
  IntegerAttr params = ExecDialect::ParamsBytesAttrHelper(ctx).getAttr(func);
  RegionSizes r;
  r.arena = bytes(arena);
  r.params = bytes(params);
  r.host = bytes(ExecDialect::HostBytesAttrHelper(ctx).getAttr(func));
  r.ssd = bytes(ExecDialect::SsdBytesAttrHelper(ctx).getAttr(func));
  r.planned = arena && params;
  return r;
}

strata::artifact::SlotClass strata::exec::classifyBuffer(Value value) {
  using strata::artifact::SlotClass;
  while (auto view = value.getDefiningOp<ViewOp>())
    value = view.getInput();
  Operation *def = value.getDefiningOp();
  if (!def)
    return SlotClass::Activation;
  if (isa<InputOp>(def))
    return SlotClass::Input;
  if (auto param = dyn_cast<ParamOp>(def))
    return param.getState()      ? SlotClass::OptimizerState
           : param.getConstant() ? SlotClass::Constant
                                 : SlotClass::Parameter;
  if (feedsUpdateAsGradient(value))
    return SlotClass::Gradient;
  // A fetch holds what it fetched: a parameter (or state) streamed in from
  // the host or the SSD, a swapped activation brought back.
  if (auto k = dyn_cast<KernelOp>(def))
    if (k.isKernel(::strata::artifact::Kernel::Copy) &&
        k.getInputs().size() == 1) {
      Value source = k.getInputs()[0];
      while (auto view = source.getDefiningOp<ViewOp>())
        source = view.getInput();
      if (isa_and_nonnull<ParamOp, SwapSpaceOp>(source.getDefiningOp()))
        return classifyBuffer(source);
    }
  SmallVector<Value> spaces;
  if (isa<SwapSpaceOp>(def)) {
    // What is stored into it: the first store's source.
    for (OpOperand &use : value.getUses())
      if (auto k = dyn_cast<KernelOp>(use.getOwner()))
        if (isStore(k) && use.getOperandNumber() == 0 &&
            k.getInputs().size() > 1) {
          Value source = k.getInputs()[1];
          while (auto view = source.getDefiningOp<ViewOp>())
            source = view.getInput();
          if (source.getDefiningOp<SwapSpaceOp>())
            break;
          return classifyBuffer(source);
        }
    return SlotClass::Activation;
  }
  storedInto(value, spaces);
  for (Value space : spaces)
    if (feedsUpdateAsGradient(space))
      return SlotClass::Gradient;
  if (markers::isBackward(def) || markers::isOptimizer(def))
    return SlotClass::Workspace;
  return SlotClass::Activation;
}
