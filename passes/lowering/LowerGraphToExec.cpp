//===- LowerGraphToExec.cpp - graph ops to exec kernel launches -----------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/Passes.h"

#include "dialects/Exec/ExecDialect.h"
#include "dialects/Graph/GraphOps.h"
#include "dialects/Train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#define DEBUG_TYPE "strata-lower-graph-to-exec"

namespace strata {
#define GEN_PASS_DEF_LOWERGRAPHTOEXECPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// What one graph op becomes: a kernel name and its integer/float operands.
struct KernelSpec {
  std::string name;
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
};

/// The elementwise kernel of a graph.fused (artifact::ElementwiseProgram):
/// registers are the body's arguments, then its splat constants, then each
/// op's result; nullopt for a body the kernel cannot run.
std::optional<KernelSpec> programFor(graph::FusedOp fused) {
  KernelSpec spec{"elementwise", {0}, {}};
  Block &body = fused.getBody().front();
  llvm::DenseMap<Value, int64_t> reg;
  for (BlockArgument arg : body.getArguments())
    reg[arg] = arg.getArgNumber();
  int64_t next = body.getNumArguments();
  for (auto c : body.getOps<graph::ConstantOp>()) {
    auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
    if (!dense || !dense.isSplat())
      return std::nullopt;
    spec.floats.push_back(dense.getSplatValue<APFloat>().convertToDouble());
    reg[c.getResult()] = next++;
  }
  int64_t instructions = 0;
  for (Operation &op : body) {
    if (isa<graph::ConstantOp, graph::YieldOp>(op))
      continue;
    std::optional<artifact::Kernel> kernel = elementwiseInstructionOf(&op);
    if (!kernel)
      return std::nullopt;
    int64_t flag = 0;
    if (auto g = dyn_cast<graph::GeluOp>(op))
      flag = g.getTanh();
    if (auto g = dyn_cast<graph::GeluGradOp>(op))
      flag = g.getTanh();
    spec.ints.append(
        {static_cast<int64_t>(*kernel), reg.lookup(op.getOperand(0)),
         op.getNumOperands() == 2 ? reg.lookup(op.getOperand(1)) : -1, flag});
    reg[op.getResult(0)] = next++;
    ++instructions;
  }
  spec.ints[0] = instructions;
  for (Value v : body.getTerminator()->getOperands())
    spec.ints.push_back(reg.lookup(v));
  return spec;
}

/// Returns the kernel for `op`, or nullopt if the op has none.
std::optional<KernelSpec> kernelFor(Operation *op) {
  using namespace strata::graph;
  return llvm::TypeSwitch<Operation *, std::optional<KernelSpec>>(op)
      .Case<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, AndOp, OrOp,
            EqualOp, LessOp, GreaterOp, SelectOp, NegOp, AbsOp, ExpOp, LogOp,
            SqrtOp, ReciprocalOp, TanhOp, SinOp, CosOp, ErfOp, SigmoidOp,
            ReluOp, NotOp, CastOp, BroadcastOp>([](Operation *op) {
        // These kernels are named after the op and need no attributes.
        return KernelSpec{op->getName().stripDialect().str(), {}, {}};
      })
      .Case<MatMulOp>([](MatMulOp op) {
        return KernelSpec{
            "matmul",
            {op.getTransposeLhs() ? 1 : 0, op.getTransposeRhs() ? 1 : 0},
            {}};
      })
      .Case<CompactRowsOp>([](CompactRowsOp op) {
        // ints: [the count the cost model assumes], when estimated.
        KernelSpec spec{"compact_rows", {}, {}};
        if (std::optional<int64_t> expected = op.getExpected())
          spec.ints.push_back(*expected);
        return spec;
      })
      .Case<GroupRowsOp>([](GroupRowsOp op) {
        KernelSpec spec{"group_rows", {}, {}};
        if (std::optional<int64_t> expected = op.getExpected())
          spec.ints.push_back(*expected);
        return spec;
      })
      .Case<GroupedMatMulOp>([](GroupedMatMulOp op) {
        return KernelSpec{"grouped_matmul", {op.getTransposeRhs() ? 1 : 0}, {}};
      })
      .Case<SegmentMatMulOp>([](SegmentMatMulOp op) {
        return KernelSpec{
            "segment_matmul", {static_cast<int64_t>(op.getSegment())}, {}};
      })
      .Case<GeluOp>([](GeluOp op) {
        return KernelSpec{"gelu", {op.getTanh() ? 1 : 0}, {}};
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceSumSquareOp>(
          [](auto op) {
            KernelSpec spec{op->getName().stripDialect().str(), {}, {}};
            spec.ints.assign(op.getAxes().begin(), op.getAxes().end());
            spec.ints.push_back(op.getKeepdims() ? 1 : 0);
            return spec;
          })
      .Case<SoftmaxOp, LogSoftmaxOp>([](auto op) {
        return KernelSpec{op->getName().stripDialect().str(),
                          {static_cast<int64_t>(op.getAxis())},
                          {}};
      })
      .Case<LayerNormOp>([](LayerNormOp op) {
        return KernelSpec{
            "layer_norm",
            {static_cast<int64_t>(op.getAxis()), op.getBias() ? 1 : 0,
             op.getRms() ? 1 : 0},
            {static_cast<double>(op.getEpsilon().convertToFloat())}};
      })
      .Case<TransposeOp>([](TransposeOp op) {
        KernelSpec spec{"transpose", {}, {}};
        spec.ints.assign(op.getPerm().begin(), op.getPerm().end());
        return spec;
      })
      .Case<SliceOp>([](SliceOp op) {
        KernelSpec spec{"slice", {}, {}};
        spec.ints.assign(op.getOffsets().begin(), op.getOffsets().end());
        spec.ints.append(op.getStrides().begin(), op.getStrides().end());
        return spec;
      })
      .Case<ConcatOp>([](ConcatOp op) {
        return KernelSpec{"concat", {static_cast<int64_t>(op.getAxis())}, {}};
      })
      .Case<GatherOp>([](GatherOp op) {
        return KernelSpec{"gather", {static_cast<int64_t>(op.getAxis())}, {}};
      })
      .Case<TriluOp>([](TriluOp op) {
        return KernelSpec{
            "trilu",
            {op.getUpper() ? 1 : 0, static_cast<int64_t>(op.getK())},
            {}};
      })
      .Case<CrossEntropyOp, CrossEntropyGradOp>([](Operation *op) {
        return KernelSpec{op->getName().stripDialect().str(), {}, {}};
      })
      .Case<GeluGradOp>([](GeluGradOp op) {
        return KernelSpec{"gelu_grad", {op.getTanh() ? 1 : 0}, {}};
      })
      .Case<LayerNormGradOp>([](LayerNormGradOp op) {
        return KernelSpec{
            "layer_norm_grad",
            {static_cast<int64_t>(op.getAxis()), op.getRms() ? 1 : 0},
            {static_cast<double>(op.getEpsilon().convertToFloat())}};
      })
      .Case<FusedOp>([](FusedOp op) { return programFor(op); })
      .Case<AttentionOp, AttentionGradOp>([](auto op) {
        return KernelSpec{
            op->getName().stripDialect().str(),
            {op.getCausal() ? 1 : 0, static_cast<int64_t>(op.getMaskKind())},
            {op.getScale().convertToDouble(), op.getFill().convertToDouble()}};
      })
      .Case<GatherGradOp>([](GatherGradOp op) {
        return KernelSpec{
            "gather_grad", {static_cast<int64_t>(op.getAxis())}, {}};
      })
      .Case<SliceGradOp>([](SliceGradOp op) {
        KernelSpec spec{"slice_grad", {}, {}};
        spec.ints.assign(op.getOffsets().begin(), op.getOffsets().end());
        spec.ints.append(op.getStrides().begin(), op.getStrides().end());
        return spec;
      })
      .Case<train::UpdateAdaLomoOp>([](train::UpdateAdaLomoOp op) {
        return KernelSpec{"update_adalomo",
                          {1},
                          {op.getLr().convertToDouble(),
                           op.getWeightDecay().convertToDouble()}};
      })
      .Case<train::AssignOp>([](train::AssignOp op) {
        return KernelSpec{"assign", {}, {}};
      })
      .Case<train::AccumulateOp>([](train::AccumulateOp op) {
        return KernelSpec{"accumulate", {}, {}};
      })
      .Case<train::AllReduceOp>([](train::AllReduceOp op) {
        return KernelSpec{
            "all_reduce", {static_cast<int64_t>(op.getRanks())}, {}};
      })
      .Case<train::ReduceScatterOp, train::ShardOp, train::AllGatherOp,
            train::UnshardOp>([](auto op) {
        return KernelSpec{op->getName().stripDialect().str(),
                          {static_cast<int64_t>(op.getRanks())},
                          {}};
      })
      .Case<train::UpdateSgdOp>([](train::UpdateSgdOp op) {
        return KernelSpec{"update_sgd",
                          {static_cast<int64_t>(op.getAccumulate())},
                          {op.getLr().convertToDouble(),
                           op.getWeightDecay().convertToDouble()}};
      })
      .Case<train::UpdateMomentumOp>([](train::UpdateMomentumOp op) {
        return KernelSpec{"update_momentum",
                          {static_cast<int64_t>(op.getAccumulate())},
                          {op.getLr().convertToDouble(),
                           op.getMomentum().convertToDouble(),
                           op.getWeightDecay().convertToDouble()}};
      })
      .Case<train::UpdateAdamWOp>([](train::UpdateAdamWOp op) {
        return KernelSpec{
            "update_adamw",
            {static_cast<int64_t>(op.getAccumulate())},
            {op.getLr().convertToDouble(), op.getBeta1().convertToDouble(),
             op.getBeta2().convertToDouble(), op.getEps().convertToDouble(),
             op.getWeightDecay().convertToDouble()}};
      })
      .Default([](Operation *) { return std::nullopt; });
}

struct LowerGraphToExecPass
    : public strata::impl::LowerGraphToExecPassBase<LowerGraphToExecPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(lower(func)))
        return signalPassFailure();
  }

  LogicalResult lower(func::FuncOp func) {
    if (!func.getBody().hasOneBlock())
      return func.emitError("expected a function with one block");
    Block &body = func.getBody().front();
    OpBuilder builder(func.getContext());
    builder.setInsertionPointToStart(&body);
    IRMapping mapping;
    auto nameOf = [](DictionaryAttr attrs, const std::string &fallback) {
      if (attrs) {
        if (auto name = attrs.getAs<StringAttr>(
                graph::GraphDialect::NameAttrHelper::getNameStr()))
          return name.getValue().str();
        if (auto of = attrs.getAs<StringAttr>(
                graph::GraphDialect::GradOfAttrHelper::getNameStr()))
          return "grad:" + of.getValue().str();
      }
      return fallback;
    };
    // Arguments become inputs.
    for (BlockArgument arg : body.getArguments()) {
      std::string name = nameOf(func.getArgAttrDict(arg.getArgNumber()),
                                "arg" + std::to_string(arg.getArgNumber()));
      Value input = builder.create<exec::InputOp>(arg.getLoc(), arg.getType(),
                                                  builder.getStringAttr(name),
                                                  IntegerAttr());
      mapping.map(arg, input);
    }
    int constants = 0;
    SmallVector<Operation *> toErase;
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (isa<exec::InputOp>(op))
        continue;
      builder.setInsertionPoint(&op);
      SmallVector<Value> operands;
      for (Value v : op.getOperands())
        operands.push_back(mapping.lookupOrDefault(v));
      Value result;
      if (auto state = dyn_cast<train::StateOp>(op)) {
        auto type = cast<ShapedType>(state.getType());
        Attribute zero = builder.getFloatAttr(
            type.getElementType(), state.getInit().convertToDouble());
        result = builder.create<exec::ParamOp>(
            op.getLoc(), type, state.getNameAttr(), UnitAttr(), UnitAttr(),
            builder.getUnitAttr(), DenseElementsAttr::get(type, zero),
            IntegerAttr(),
            exec::TierAttr::get(builder.getContext(), exec::Tier::Device),
            StringAttr(), IntegerAttr());
      } else if (auto param = dyn_cast<graph::ParamOp>(op)) {
        if (!param.getInitialValueAttr())
          return param.emitError("parameter '")
                 << param.getName() << "' has no initial value to store";
        result = builder.create<exec::ParamOp>(
            op.getLoc(), param.getType(), param.getNameAttr(),
            param.getTrainableAttr(), UnitAttr(), UnitAttr(),
            param.getInitialValueAttr(), IntegerAttr(),
            exec::TierAttr::get(builder.getContext(), exec::Tier::Device),
            StringAttr(), param.getShardRanksAttr());
      } else if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
        result = builder.create<exec::ParamOp>(
            op.getLoc(), constant.getType(),
            builder.getStringAttr("const." + std::to_string(constants++)),
            UnitAttr(), builder.getUnitAttr(), UnitAttr(),
            cast<ElementsAttr>(constant.getValue()), IntegerAttr(),
            exec::TierAttr::get(builder.getContext(), exec::Tier::Device),
            StringAttr(), IntegerAttr());
      } else if (auto reshape = dyn_cast<graph::ReshapeOp>(op)) {
        result = builder.create<exec::ViewOp>(op.getLoc(), reshape.getType(),
                                              operands[0]);
        ++numViews;
      } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(operands))
          builder.create<exec::OutputOp>(
              op.getLoc(),
              builder.getStringAttr(nameOf(func.getResultAttrDict(i),
                                           "result" + std::to_string(i))),
              v);
        builder.create<func::ReturnOp>(op.getLoc());
      } else if (std::optional<KernelSpec> spec = kernelFor(&op)) {
        auto kernel = builder.create<exec::KernelOp>(
            op.getLoc(), op.getResultTypes(), spec->name, operands, spec->ints,
            spec->floats);
        for (auto [from, to] : llvm::zip(op.getResults(), kernel.getResults()))
          mapping.map(from, to);
        // Which part of the step the kernel belongs to, for the report.
        for (NamedAttribute attr : op.getDiscardableAttrs())
          if (markers::isMarker(attr))
            kernel->setAttr(attr.getName(), attr.getValue());
        ++numKernels;
      } else {
        return op.emitError("no exec lowering for ") << op.getName();
      }
      if (result)
        mapping.map(op.getResult(0), result);
      toErase.push_back(&op);
    }
    for (Operation *op : llvm::reverse(toErase))
      op->erase();
    // The function now takes and returns nothing: exec ops carry the I/O.
    body.eraseArguments(0, body.getNumArguments());
    func.setFunctionType(builder.getFunctionType({}, {}));
    func.removeArgAttrsAttr();
    func.removeResAttrsAttr();
    return success();
  }
};

} // namespace
