//===- FuseNorm.cpp - Decomposed norms become graph.layer_norm ------------===//
//
// Part of --strata-fuse-patterns (FusePatterns.cpp). Exporters before ONNX
// opset 17 (which added LayerNormalization) write a layer norm as
//
//   %m = graph.reduce_mean %x axes = [last k] keepdims
//   %d = graph.sub %x, %m
//   %s = graph.mul %d, %d                  (or graph.pow %d, 2)
//   %v = graph.reduce_mean %s axes = [last k] keepdims
//   %e = graph.add %v, %eps
//   %r = graph.sqrt %e
//   %n = graph.div %d, %r                  (or %d times 1 / %r)
//   %y = graph.add (graph.mul %n, %gamma), %beta     (both optional)
//
// nine kernels forward and more backward, each a pass over memory. The
// chain becomes one graph.layer_norm (its kernel and gradient kernel make
// one pass each); without a gamma the scale is a constant one. RMSNorm
// (LLaMA's), the same without the centring,
//
//   %v = graph.reduce_mean (graph.pow %x, 2) axes = [last k] keepdims
//   %y = graph.mul %w, (graph.mul %x, (graph.div 1, (graph.sqrt %v + eps)))
//
// becomes graph.layer_norm with `rms`.
//
//===----------------------------------------------------------------------===//

#include "passes/fusion/FusePatterns.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <optional>

using namespace mlir;
using namespace strata::graph;

namespace strata {

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// The number of trailing axes `mean` averages over (keepdims), or 0.
int64_t trailingAxes(ReduceMeanOp mean) {
  if (!mean || !mean.getKeepdims())
    return 0;
  int64_t rank = shapeOf(mean.getInput()).size();
  SmallVector<int64_t> axes(mean.getAxes());
  llvm::sort(axes);
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size() - i))
      return 0;
  return axes.size();
}

/// Whether `v` is `d` squared (mul d, d or pow d, 2).
bool isSquareOf(Value v, Value d) {
  Operation *op = v.getDefiningOp();
  if (auto mul = dyn_cast_or_null<MulOp>(op))
    return mul.getLhs() == d && mul.getRhs() == d;
  if (auto pow = dyn_cast_or_null<PowOp>(op))
    return pow.getLhs() == d && splatFloatValue(pow.getRhs()) == 2.0;
  return false;
}

/// The parts of a matched normalisation.
struct Norm {
  Value x;
  int64_t axis = 0;
  double epsilon = 0;
  bool rms = false;
  Value out; // The normalised value (before gamma and beta).
};

/// Matches `n` as (x - mean) / sqrt(var + eps) (or times its reciprocal).
std::optional<Norm> matchNormalised(Operation *n) {
  Value d, root;
  if (auto div = dyn_cast<DivOp>(n)) {
    d = div.getLhs();
    root = div.getRhs();
  } else if (auto mul = dyn_cast<MulOp>(n)) {
    for (int side = 0; side < 2 && !root; ++side) {
      Value r = n->getOperand(1 - side);
      if (auto rec = r.getDefiningOp<ReciprocalOp>()) {
        root = rec.getInput();
      } else if (auto inv = r.getDefiningOp<DivOp>();
                 inv && splatFloatValue(inv.getLhs()) == 1.0) {
        root = inv.getRhs();
      } else {
        continue;
      }
      d = n->getOperand(side);
    }
  }
  if (!d || !root)
    return std::nullopt;
  auto sqrt = root.getDefiningOp<SqrtOp>();
  if (!sqrt)
    return std::nullopt;
  auto addEps = sqrt.getInput().getDefiningOp<AddOp>();
  if (!addEps)
    return std::nullopt;
  Value var = addEps.getLhs();
  std::optional<double> eps = splatFloatValue(addEps.getRhs());
  if (!eps) {
    var = addEps.getRhs();
    eps = splatFloatValue(addEps.getLhs());
  }
  auto varMean = var.getDefiningOp<ReduceMeanOp>();
  if (!eps || *eps < 0 || !varMean || !isSquareOf(varMean.getInput(), d))
    return std::nullopt;
  int64_t k = trailingAxes(varMean);
  // Centred (layer norm): d = x - mean(x) over the same axes; otherwise
  // RMSNorm: d is x itself.
  auto sub = d.getDefiningOp<SubOp>();
  auto mean = sub ? sub.getRhs().getDefiningOp<ReduceMeanOp>() : nullptr;
  bool rms =
      !(mean && mean.getInput() == sub.getLhs() && trailingAxes(mean) == k);
  Value x = rms ? d : sub.getLhs();
  if (!k || n->getResult(0).getType() != x.getType())
    return std::nullopt;
  // Every intermediate feeds only the chain (x, for RMSNorm, may feed
  // anything: it is the input).
  Value square = varMean.getInput();
  auto onlyUsedBy = [](Value v, std::initializer_list<Operation *> users) {
    for (Operation *u : v.getUsers())
      if (llvm::find(users, u) == users.end())
        return false;
    return true;
  };
  if ((!rms && (!onlyUsedBy(mean, {sub}) ||
                !onlyUsedBy(d, {square.getDefiningOp(), n}))) ||
      !square.hasOneUse() || !var.hasOneUse() || !addEps->hasOneUse() ||
      !root.hasOneUse())
    return std::nullopt;
  Norm norm;
  norm.rms = rms;
  norm.x = x;
  norm.axis = static_cast<int64_t>(shapeOf(x).size()) - k;
  norm.epsilon = *eps;
  norm.out = n->getResult(0);
  return norm;
}

/// The operand of binary `op` other than `v`, or null.
Value other(Operation *op, Value v) {
  if (op->getNumOperands() != 2)
    return Value();
  if (op->getOperand(0) == v)
    return op->getOperand(1);
  return op->getOperand(1) == v ? op->getOperand(0) : Value();
}

/// Whether `p` broadcasts over the rows only (its shape fits the
/// normalised dimensions, right-aligned).
bool fitsNormalised(Value p, ArrayRef<int64_t> normalised, Type et) {
  auto t = cast<RankedTensorType>(p.getType());
  if (t.getElementType() != et || t.getRank() > (int64_t)normalised.size())
    return false;
  size_t off = normalised.size() - t.getRank();
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.getShape()[d] != 1 && t.getShape()[d] != normalised[off + d])
      return false;
  return true;
}

} // namespace

unsigned fuseLayerNorms(Block &body, std::optional<Location> &where) {
  SmallVector<Operation *> candidates;
  for (Operation &op : body)
    if (isa<DivOp, MulOp>(op))
      candidates.push_back(&op);
  llvm::DenseSet<Operation *> erased;
  unsigned fused = 0;
  for (Operation *n : candidates) {
    if (erased.contains(n))
      continue;
    std::optional<Norm> norm = matchNormalised(n);
    if (!norm)
      continue;
    auto type = cast<RankedTensorType>(norm->x.getType());
    ArrayRef<int64_t> normalised = type.getShape().drop_front(norm->axis);
    Type et = type.getElementType();
    // Optional gamma, then beta, each when the value feeds only them.
    Value result = norm->out;
    SmallVector<Operation *> tail;
    // The parameter `result`'s one user of type OpT combines it with (and
    // that user's result becomes `result`), or null.
    auto absorb = [&](auto opTag) -> Value {
      using OpT = decltype(opTag);
      if (!result.hasOneUse())
        return Value();
      Operation *u = *result.getUsers().begin();
      Value p = isa<OpT>(u) ? other(u, result) : Value();
      if (!p || p == result || !fitsNormalised(p, normalised, et) ||
          u->getResult(0).getType() != type)
        return Value();
      result = u->getResult(0);
      tail.push_back(u);
      return p;
    };
    Value gamma = absorb(MulOp());
    Value beta = absorb(AddOp());
    Operation *last = tail.empty() ? n : tail.back();
    OpBuilder b(last);
    if (!gamma) {
      auto ones = RankedTensorType::get(normalised, et);
      gamma = b.create<ConstantOp>(
          n->getLoc(), ones,
          DenseElementsAttr::get(ones, b.getFloatAttr(et, 1.0)));
    }
    // Gamma and beta may be defined after the chain began but are before
    // `last`, where the fused op goes; x is before everything.
    auto ln = b.create<LayerNormOp>(
        n->getLoc(), type, norm->x, gamma, beta,
        b.getI64IntegerAttr(norm->axis),
        b.getF32FloatAttr(static_cast<float>(norm->epsilon)),
        norm->rms ? b.getUnitAttr() : UnitAttr());
    result.replaceAllUsesWith(ln.getResult());
    if (!where)
      where = n->getLoc();
    // Erase the chain from its end: the tail, n, then what fed n.
    SmallVector<Operation *> dead(tail.rbegin(), tail.rend());
    dead.push_back(n);
    for (size_t i = 0; i < dead.size(); ++i)
      for (Value v : dead[i]->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && def->getNumResults() == 1 &&
            !isa<ConstantOp, ParamOp>(def) && def != ln &&
            llvm::find(dead, def) == dead.end() &&
            llvm::all_of(def->getUsers(),
                         [&](Operation *u) {
                           return llvm::find(dead, u) != dead.end();
                         }) &&
            def->getResult(0) != norm->x && def->getResult(0) != gamma &&
            def->getResult(0) != beta)
          dead.push_back(def);
    for (Operation *op : dead) {
      erased.insert(op);
      op->dropAllReferences();
    }
    for (Operation *op : dead)
      op->erase();
    ++fused;
  }
  return fused;
}

} // namespace strata
