//===- Autocast.cpp - Mixed precision as explicit casts -------------------===//
//
// See AutocastPass in Passes.td. One walk over @main in program order; each
// op's float operands are cast to the precision its class wants, then its
// float results take that precision. Nothing but graph.cast ops is added,
// so autodiff differentiates the result as it is.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/GraphOps.h"
#include "passes/Passes.h"
#include "passes/training/HalfValues.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace strata {
#define GEN_PASS_DEF_AUTOCASTPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::graph;

namespace {

/// What precision an op runs in.
enum class Class {
  Low,    ///< Matrix products: low-precision operands and results.
  Wide,   ///< Numerically sensitive: fp32 operands and results.
  Follow, ///< Its operands' precision (mixed activations widen).
  /// Computes in fp32 from operands of any precision (its kernels widen as
  /// they load), fp32 results: the loss reads bf16 logits without an fp32
  /// copy of them, which would be the largest activation of a big
  /// vocabulary, and its gradient is in the logits' precision.
  Inside,
  Keep, ///< Untouched (sources, explicit casts, ops without floats).
};

Class classOf(Operation *op) {
  if (isa<MatMulOp, GroupedMatMulOp, AttentionOp>(op))
    return Class::Low;
  if (isa<SoftmaxOp, LogSoftmaxOp, LayerNormOp, ReduceSumOp, ReduceMeanOp,
          ReduceMaxOp, ReduceSumSquareOp, ExpOp, LogOp, PowOp>(op))
    return Class::Wide;
  if (isa<CrossEntropyOp>(op))
    return Class::Inside;
  if (isa<ParamOp, ConstantOp, CastOp>(op) || op->getNumRegions() != 0)
    return Class::Keep;
  return Class::Follow;
}

FloatType floatElement(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t ? dyn_cast<FloatType>(t.getElementType()) : FloatType();
}

Type withElement(Type type, Type element) {
  auto t = cast<RankedTensorType>(type);
  return RankedTensorType::get(t.getShape(), element);
}

struct AutocastPass : public strata::impl::AutocastPassBase<AutocastPass> {
  using AutocastPassBase::AutocastPassBase;

  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!func) {
      getOperation().emitError("no @main function");
      return signalPassFailure();
    }
    // Masters for half-precision parameters whatever the precision: the
    // model's own arithmetic is unchanged, only the update is in fp32.
    for (ParamOp p : llvm::to_vector(func.getOps<ParamOp>()))
      if (failed(widenMaster(p)))
        return signalPassFailure();
    if (precision == "fp32")
      return;
    Builder b(&getContext());
    Type low;
    if (precision == "bf16")
      low = b.getBF16Type();
    else if (precision == "fp16")
      low = b.getF16Type();
    if (!low) {
      func.emitError("unknown precision '")
          << precision << "' (expected fp32, bf16 or fp16)";
      return signalPassFailure();
    }
    Type wide = b.getF32Type();
    for (Operation &op : llvm::make_early_inc_range(func.getOps())) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        restoreResults(func, ret);
        continue;
      }
      Class c = classOf(&op);
      if (c == Class::Keep) {
        noteWeight(&op);
        continue;
      }
      Type target = c == Class::Low                          ? low
                    : c == Class::Wide || c == Class::Inside ? wide
                                                             : followType(&op);
      if (!target) {
        noteWeight(&op);
        continue;
      }
      auto operands = c == Class::Inside ? MutableArrayRef<OpOperand>()
                                         : op.getOpOperands();
      for (OpOperand &operand : operands) {
        FloatType t = floatElement(operand.get());
        if (!t || t == target)
          continue;
        // An f64 operand is left as the model has it.
        if (t.getWidth() > 32)
          continue;
        operand.set(castTo(op, operand.get(), target));
      }
      for (Value r : op.getResults())
        if (FloatType t = floatElement(r); t && t.getWidth() <= 32)
          r.setType(withElement(r.getType(), target));
      noteWeight(&op);
    }
  }

  /// The precision of a Follow op: that of its float activation operands,
  /// widened to fp32 when they differ; null when every float operand is a
  /// weight (weight arithmetic stays as it is).
  Type followType(Operation *op) {
    Type chosen;
    for (Value v : op->getOperands()) {
      FloatType t = floatElement(v);
      if (!t || weights_.contains(v))
        continue;
      if (!chosen)
        chosen = t;
      else if (chosen != t)
        chosen = t.getWidth() > cast<FloatType>(chosen).getWidth() ? t : chosen;
    }
    return chosen;
  }

  /// A trainable fp16 or bf16 parameter (a model exported in half
  /// precision) becomes an fp32 master, its values widened exactly, read
  /// through a cast to its own type: the optimizer then updates fp32
  /// weights, whose rounding does not swallow small steps.
  LogicalResult widenMaster(ParamOp p) {
    FloatType element = floatElement(p.getResult());
    if (!p.getTrainable() || !element || element.getWidth() != 16)
      return success();
    Type masterType = withElement(p.getType(), Builder(p).getF32Type());
    if (std::optional<ElementsAttr> init = p.getInitialValue()) {
      std::optional<ElementsAttr> master = widenValues(*init, p.getName());
      if (!master)
        return p.emitError("cannot read the half-precision values of '")
               << p.getName() << "' to make its fp32 master";
      p.setInitialValueAttr(*master);
    }
    Type own = p.getType();
    p->getResult(0).setType(masterType);
    OpBuilder b(p);
    b.setInsertionPointAfter(p);
    auto read = b.create<CastOp>(p.getLoc(), own, p.getResult());
    p.getResult().replaceAllUsesExcept(read.getResult(), read);
    return success();
  }

  /// Parameters and constants are weights, and so are views and casts of
  /// weights.
  void noteWeight(Operation *op) {
    bool view = isa<ReshapeOp, TransposeOp, BroadcastOp, SliceOp, CastOp>(op) &&
                weights_.contains(op->getOperand(0));
    if (isa<ParamOp, ConstantOp>(op) || view)
      for (Value r : op->getResults())
        weights_.insert(r);
  }

  /// `v` as `element`, by a graph.cast before `user`.
  Value castTo(Operation &user, Value v, Type element) {
    OpBuilder b(&user);
    return b.create<CastOp>(user.getLoc(), withElement(v.getType(), element),
                            v);
  }

  /// Every result keeps the function's declared type (the loss in fp32).
  void restoreResults(func::FuncOp func, func::ReturnOp ret) {
    ArrayRef<Type> declared = func.getFunctionType().getResults();
    for (auto [i, operand] : llvm::enumerate(ret->getOpOperands()))
      if (operand.get().getType() != declared[i])
        operand.set(
            castTo(*ret, operand.get(),
                   cast<RankedTensorType>(declared[i]).getElementType()));
  }

  llvm::DenseSet<Value> weights_;
};

} // namespace
