//===- GraphGradients.cpp - Reverse-mode rules of graph ops ---------------===//
//
// Each differentiable op builds the gradients of its operands from the
// gradient of its result, out of graph ops. Broadcasting ops sum their
// gradient back to each operand's shape ("unbroadcast"). Rules whose
// composition from primitives would be slow or inaccurate (GELU, layer norm,
// cross-entropy, gather, slice, attention) use dedicated gradient ops with
// kernels.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/ShapeInference.h"

#include "mlir/IR/Builders.h"

#include <cmath>

using namespace mlir;
using namespace strata::graph;

namespace {

Shape shapeOf(Value v) {
  auto t = cast<ShapedType>(v.getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

Type elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

/// Builds the arithmetic of gradient rules with result types inferred.
class GradBuilder {
public:
  GradBuilder(OpBuilder &b, Location loc) : b_(b), loc_(loc) {}

  RankedTensorType type(const Shape &s, Type et) {
    return RankedTensorType::get(s, et);
  }

  template <typename OpT> Value binary(Value x, Value y) {
    Shape s = *broadcastShapes({shapeOf(x), shapeOf(y)});
    return b_.create<OpT>(loc_, type(s, elementTypeOf(x)), x, y);
  }
  Value add(Value x, Value y) { return binary<AddOp>(x, y); }
  Value sub(Value x, Value y) { return binary<SubOp>(x, y); }
  Value mul(Value x, Value y) { return binary<MulOp>(x, y); }
  Value div(Value x, Value y) { return binary<DivOp>(x, y); }
  Value neg(Value x) { return b_.create<NegOp>(loc_, x.getType(), x); }

  template <typename CmpT> Value compare(Value x, Value y) {
    Shape s = *broadcastShapes({shapeOf(x), shapeOf(y)});
    return b_.create<CmpT>(loc_, type(s, b_.getI1Type()), x, y);
  }

  Value scalar(double v, Type et) {
    auto t = type({}, et);
    APFloat f(v);
    bool lost;
    f.convert(cast<FloatType>(et).getFloatSemantics(),
              APFloat::rmNearestTiesToEven, &lost);
    return b_.create<ConstantOp>(loc_, t, DenseElementsAttr::get(t, f));
  }

  Value zerosLike(Value v) { return scalar(0.0, elementTypeOf(v)); }

  Value select(Value c, Value x, Value y) {
    Shape s = *broadcastShapes({shapeOf(c), shapeOf(x), shapeOf(y)});
    return b_.create<SelectOp>(loc_, type(s, elementTypeOf(x)), c, x, y);
  }

  Value reshape(Value v, const Shape &s) {
    if (shapeOf(v) == s)
      return v;
    return b_.create<ReshapeOp>(loc_, type(s, elementTypeOf(v)), v);
  }

  Value broadcastTo(Value v, const Shape &s) {
    if (shapeOf(v) == s)
      return v;
    return b_.create<BroadcastOp>(loc_, type(s, elementTypeOf(v)), v);
  }

  Value reduceSum(Value v, const std::vector<int64_t> &axes, bool keepdims) {
    if (axes.empty())
      return v;
    Shape out = reduceShape(shapeOf(v), axes, keepdims);
    return b_.create<ReduceSumOp>(loc_, type(out, elementTypeOf(v)), v,
                                  b_.getDenseI64ArrayAttr(axes),
                                  keepdims ? b_.getUnitAttr() : UnitAttr());
  }

  /// Sums `g` (of a broadcast shape) back to `target`'s shape.
  Value unbroadcast(Value g, const Shape &target) {
    Shape gs = shapeOf(g);
    if (gs == target)
      return g;
    size_t offset = gs.size() - target.size();
    std::vector<int64_t> axes;
    for (size_t d = 0; d < gs.size(); ++d)
      if (d < offset || (target[d - offset] == 1 && gs[d] != 1))
        axes.push_back(d);
    return reshape(reduceSum(g, axes, true), target);
  }

  Value transposeLastTwo(Value v) {
    Shape s = shapeOf(v);
    std::vector<int64_t> perm;
    for (size_t d = 0; d < s.size(); ++d)
      perm.push_back(d);
    std::swap(perm[s.size() - 1], perm[s.size() - 2]);
    std::swap(s[s.size() - 1], s[s.size() - 2]);
    return b_.create<TransposeOp>(loc_, type(s, elementTypeOf(v)), v,
                                  b_.getDenseI64ArrayAttr(perm));
  }

  Value matmul(Value x, Value y, bool tx = false, bool ty = false,
               Value rows = {}) {
    Shape s = *matmulShape(shapeOf(x), shapeOf(y), nullptr, tx, ty);
    return b_.create<MatMulOp>(loc_, type(s, elementTypeOf(x)), x, y, rows,
                               tx ? b_.getUnitAttr() : UnitAttr(),
                               ty ? b_.getUnitAttr() : UnitAttr());
  }

  template <typename OpT> Value unary(Value x) {
    return b_.create<OpT>(loc_, x.getType(), x);
  }

  OpBuilder &builder() { return b_; }
  Location loc() { return loc_; }

private:
  OpBuilder &b_;
  Location loc_;
};

bool isFloat(Value v) { return isa<FloatType>(elementTypeOf(v)); }

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  grads.push_back(gb.unbroadcast(g, shapeOf(getLhs())));
  grads.push_back(gb.unbroadcast(g, shapeOf(getRhs())));
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  grads.push_back(gb.unbroadcast(g, shapeOf(getLhs())));
  grads.push_back(gb.unbroadcast(gb.neg(g), shapeOf(getRhs())));
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  grads.push_back(gb.unbroadcast(gb.mul(g, getRhs()), shapeOf(getLhs())));
  grads.push_back(gb.unbroadcast(gb.mul(g, getLhs()), shapeOf(getRhs())));
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  if (!isFloat(getLhs()))
    return grads.append(2, Value()), success();
  GradBuilder gb(b, getLoc());
  // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b.
  grads.push_back(gb.unbroadcast(gb.div(g, getRhs()), shapeOf(getLhs())));
  grads.push_back(gb.unbroadcast(
      gb.neg(gb.div(gb.mul(g, getResult()), getRhs())), shapeOf(getRhs())));
  return success();
}

LogicalResult PowOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  if (!isFloat(getLhs()))
    return grads.append(2, Value()), success();
  GradBuilder gb(b, getLoc());
  Type et = elementTypeOf(getLhs());
  // d(a^b)/da = b * a^(b-1); d(a^b)/db = log(a) * a^b.
  Value bMinus1 = gb.sub(getRhs(), gb.scalar(1.0, et));
  Value da = gb.mul(gb.mul(g, getRhs()), gb.binary<PowOp>(getLhs(), bMinus1));
  grads.push_back(gb.unbroadcast(da, shapeOf(getLhs())));
  Value db = gb.mul(gb.mul(g, getResult()), gb.unary<LogOp>(getLhs()));
  grads.push_back(gb.unbroadcast(db, shapeOf(getRhs())));
  return success();
}

/// max/min: the gradient goes to the operand that was chosen (the left one
/// on ties).
template <typename OpT, typename CmpT>
static LogicalResult minMaxGradients(OpT op, OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  if (!isFloat(op.getLhs()))
    return grads.append(2, Value()), success();
  GradBuilder gb(b, op.getLoc());
  // Left wins unless the right is strictly better.
  Value rightWins = gb.compare<CmpT>(op.getRhs(), op.getLhs());
  Value zero = gb.zerosLike(g);
  grads.push_back(
      gb.unbroadcast(gb.select(rightWins, zero, g), shapeOf(op.getLhs())));
  grads.push_back(
      gb.unbroadcast(gb.select(rightWins, g, zero), shapeOf(op.getRhs())));
  return success();
}

LogicalResult MaxOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  return minMaxGradients<MaxOp, GreaterOp>(*this, b, g, grads);
}

LogicalResult MinOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  return minMaxGradients<MinOp, LessOp>(*this, b, g, grads);
}

// Logical and comparison ops: their operands get no gradient.
#define NO_GRADIENT(OpT)                                                       \
  LogicalResult OpT::buildGradients(OpBuilder &, Value,                        \
                                    SmallVectorImpl<Value> &grads) {           \
    grads.append((*this)->getNumOperands(), Value());                          \
    return success();                                                          \
  }
NO_GRADIENT(AndOp)
NO_GRADIENT(OrOp)
NO_GRADIENT(EqualOp)
NO_GRADIENT(LessOp)
NO_GRADIENT(GreaterOp)
NO_GRADIENT(NotOp)
#undef NO_GRADIENT

LogicalResult NegOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(isFloat(g) ? GradBuilder(b, getLoc()).neg(g) : Value());
  return success();
}

LogicalResult AbsOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.push_back(Value()), success();
  GradBuilder gb(b, getLoc());
  Value negative = gb.compare<LessOp>(getInput(), gb.zerosLike(g));
  grads.push_back(gb.select(negative, gb.neg(g), g));
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(GradBuilder(b, getLoc()).mul(g, getResult()));
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(GradBuilder(b, getLoc()).div(g, getInput()));
  return success();
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  grads.push_back(
      gb.div(gb.mul(g, gb.scalar(0.5, elementTypeOf(g))), getResult()));
  return success();
}

LogicalResult ReciprocalOp::buildGradients(OpBuilder &b, Value g,
                                           SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  grads.push_back(gb.neg(gb.mul(gb.mul(g, getResult()), getResult())));
  return success();
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  Value y2 = gb.mul(getResult(), getResult());
  grads.push_back(gb.mul(g, gb.sub(gb.scalar(1.0, elementTypeOf(g)), y2)));
  return success();
}

LogicalResult SinOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  grads.push_back(gb.mul(g, gb.unary<CosOp>(getInput())));
  return success();
}

LogicalResult CosOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  grads.push_back(gb.neg(gb.mul(g, gb.unary<SinOp>(getInput()))));
  return success();
}

LogicalResult ErfOp::buildGradients(OpBuilder &b, Value g,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  Type et = elementTypeOf(g);
  Value x2 = gb.mul(getInput(), getInput());
  Value e = gb.unary<ExpOp>(gb.neg(x2));
  grads.push_back(gb.mul(gb.mul(g, gb.scalar(2.0 / std::sqrt(M_PI), et)), e));
  return success();
}

LogicalResult SigmoidOp::buildGradients(OpBuilder &b, Value g,
                                        SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  Value oneMinus = gb.sub(gb.scalar(1.0, elementTypeOf(g)), getResult());
  grads.push_back(gb.mul(gb.mul(g, getResult()), oneMinus));
  return success();
}

LogicalResult ReluOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  Value positive = gb.compare<GreaterOp>(getInput(), gb.zerosLike(g));
  grads.push_back(gb.select(positive, g, gb.zerosLike(g)));
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  grads.push_back(
      b.create<GeluGradOp>(getLoc(), getType(), getInput(), g, getTanhAttr()));
  return success();
}

LogicalResult SelectOp::buildGradients(OpBuilder &b, Value g,
                                       SmallVectorImpl<Value> &grads) {
  grads.push_back(Value());
  if (!isFloat(g))
    return grads.append(2, Value()), success();
  GradBuilder gb(b, getLoc());
  Value zero = gb.zerosLike(g);
  grads.push_back(
      gb.unbroadcast(gb.select(getCondition(), g, zero), shapeOf(getOnTrue())));
  grads.push_back(gb.unbroadcast(gb.select(getCondition(), zero, g),
                                 shapeOf(getOnFalse())));
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, Value g,
                                     SmallVectorImpl<Value> &grads) {
  if (!isFloat(getInput()) || !isFloat(getResult()))
    return grads.push_back(Value()), success();
  grads.push_back(b.create<CastOp>(getLoc(), getInput().getType(), g));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions, reductions, normalisations
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::buildGradients(OpBuilder &b, Value g,
                                       SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  Shape as = shapeOf(getLhs()), bs = shapeOf(getRhs());
  if (Value rows = getRows()) {
    // Matrices; the lhs's stored rows from `rows` on are zero, so their
    // gradient is zero, and they drop out of the rhs's. Each product below
    // has that same stored-row dimension as its lhs.
    Value A = getLhs(), B = getRhs();
    if (!ta) {
      // Y = A_r op(B): dA = G op(B)^T (rows of G past `rows` are zero in
      // Y, so dropping them is exact); dB from A_r^T G.
      grads.push_back(gb.matmul(g, B, false, !tb, rows));
      grads.push_back(tb ? gb.matmul(g, A, true, false, rows)
                         : gb.matmul(A, g, true, false, rows));
    } else {
      // Y = A_r^T B: dA = B G^T (B's rows past `rows` drop out), dB = A_r G.
      grads.push_back(gb.matmul(B, g, false, true, rows));
      grads.push_back(gb.matmul(A, g, false, false, rows));
    }
    grads.push_back(Value()); // The count is an integer.
    return success();
  }
  // Lift vectors to matrices as numpy.matmul does (a vector is never
  // transposed).
  Shape a2 = as, b2 = bs;
  if (a2.size() == 1)
    a2.insert(a2.begin(), 1);
  if (b2.size() == 1)
    b2.push_back(1);
  Shape g2 = *matmulShape(a2, b2, nullptr, ta, tb);
  Value A = gb.reshape(getLhs(), a2), B = gb.reshape(getRhs(), b2);
  Value G = gb.reshape(g, g2);
  // With A' = op(A), B' = op(B): dA' = G B'^T and dB' = A'^T G; a
  // transposed operand gets the transpose of those, all without copies.
  Value dA = ta ? gb.matmul(B, G, tb, true) : gb.matmul(G, B, false, !tb);
  grads.push_back(gb.reshape(gb.unbroadcast(dA, a2), as));
  Value dB;
  if (b2.size() == 2 && a2.size() > 2 && !ta) {
    // A weight shared across a batch: one large product over the
    // flattened batch instead of per-batch products summed.
    int64_t rows = numElements(a2) / a2.back();
    Value Af = gb.reshape(A, {rows, a2.back()});
    Value Gf = gb.reshape(G, {rows, g2.back()});
    dB = tb ? gb.matmul(Gf, Af, true, false) : gb.matmul(Af, Gf, true, false);
  } else {
    dB = tb ? gb.matmul(G, A, true, ta) : gb.matmul(A, G, !ta, false);
    dB = gb.unbroadcast(dB, b2);
  }
  grads.push_back(gb.reshape(dB, bs));
  return success();
}

LogicalResult GroupedMatMulOp::buildGradients(OpBuilder &b, Value g,
                                              SmallVectorImpl<Value> &grads) {
  // Y[group e] = A[group e] op(W_e), rows past the groups zero. dA is G
  // times each group's op(W_e)^T (rows past the groups get zero, as they
  // were taken as zero); dW_e contracts group e's rows of A and G.
  Location loc = getLoc();
  bool tb = getTransposeRhs();
  Value A = getLhs(), offsets = getOffsets();
  grads.push_back(b.create<GroupedMatMulOp>(loc, A.getType(), g, offsets,
                                            getWeights(), !tb));
  grads.push_back(Value()); // The offsets are integers.
  for (auto [e, w] : llvm::enumerate(getWeights())) {
    // op(W) = W: dW = A_e^T G_e; op(W) = W^T: dW = G_e^T A_e.
    Value lhs = tb ? g : A, rhs = tb ? A : g;
    grads.push_back(b.create<SegmentMatMulOp>(loc, w.getType(), lhs, rhs,
                                              offsets, int64_t(e)));
  }
  return success();
}

/// The result gradient of a reduction, broadcast back to the input shape.
template <typename OpT>
static Value expandReduced(GradBuilder &gb, OpT op, Value g) {
  Shape in = shapeOf(op.getInput());
  std::vector<int64_t> axes(op.getAxes().begin(), op.getAxes().end());
  Value kept = gb.reshape(g, reduceShape(in, axes, true));
  return gb.broadcastTo(kept, in);
}

LogicalResult ReduceSumOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.push_back(Value()), success();
  GradBuilder gb(b, getLoc());
  grads.push_back(expandReduced(gb, *this, g));
  return success();
}

LogicalResult ReduceSumSquareOp::buildGradients(OpBuilder &b, Value g,
                                                SmallVectorImpl<Value> &grads) {
  // d/dx sum(x^2) = 2 x.
  GradBuilder gb(b, getLoc());
  Value twoX = gb.mul(getInput(), gb.scalar(2.0, elementTypeOf(g)));
  grads.push_back(gb.mul(expandReduced(gb, *this, g), twoX));
  return success();
}

LogicalResult ReduceMeanOp::buildGradients(OpBuilder &b, Value g,
                                           SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.push_back(Value()), success();
  GradBuilder gb(b, getLoc());
  Shape in = shapeOf(getInput());
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= in[a];
  Value scaled = gb.mul(g, gb.scalar(1.0 / count, elementTypeOf(g)));
  grads.push_back(expandReduced(gb, *this, scaled));
  return success();
}

LogicalResult ReduceMaxOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.push_back(Value()), success();
  GradBuilder gb(b, getLoc());
  // Every position equal to the maximum receives the gradient.
  Value maxima = expandReduced(gb, *this, getResult());
  Value mask = gb.compare<EqualOp>(getInput(), maxima);
  grads.push_back(
      gb.select(mask, expandReduced(gb, *this, g), gb.zerosLike(g)));
  return success();
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, Value g,
                                        SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  // dx = y * (g - sum(g * y)).
  Value gy = gb.mul(g, getResult());
  Value s = gb.reduceSum(gy, {static_cast<int64_t>(getAxis())}, true);
  grads.push_back(gb.mul(getResult(), gb.sub(g, s)));
  return success();
}

LogicalResult LogSoftmaxOp::buildGradients(OpBuilder &b, Value g,
                                           SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  // dx = g - exp(y) * sum(g).
  Value s = gb.reduceSum(g, {static_cast<int64_t>(getAxis())}, true);
  grads.push_back(gb.sub(g, gb.mul(gb.unary<ExpOp>(getResult()), s)));
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  GradBuilder gb(b, getLoc());
  Shape in = shapeOf(getInput());
  Shape normalized(in.begin() + getAxis(), in.end());
  auto nt = gb.type(normalized, elementTypeOf(g));
  auto lng = b.create<LayerNormGradOp>(
      getLoc(), TypeRange{getInput().getType(), nt, nt}, getInput(), getScale(),
      g, getAxisAttr(), getEpsilonAttr(), getRmsAttr());
  grads.push_back(lng.getInputGrad());
  grads.push_back(gb.unbroadcast(lng.getScaleGrad(), shapeOf(getScale())));
  if (getBias())
    grads.push_back(gb.unbroadcast(lng.getBiasGrad(), shapeOf(getBias())));
  return success();
}

LogicalResult AttentionOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  // The fusion pass only fuses masks that need no gradient (constants and
  // values computed from inputs), so the mask gets none.
  auto ag = b.create<AttentionGradOp>(
      getLoc(), TypeRange{getQ().getType(), getK().getType(), getV().getType()},
      getQ(), getK(), getV(), g, getMask(), getScaleAttr(), getMaskKindAttr(),
      getFillAttr(), getCausalAttr());
  grads.push_back(ag.getQGrad());
  grads.push_back(ag.getKGrad());
  grads.push_back(ag.getVGrad());
  if (getMask())
    grads.push_back(Value());
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, Value g,
                                             SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<CrossEntropyGradOp>(getLoc(), getLogits().getType(),
                                               getLogits(), getLabels(), g));
  grads.push_back(Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, Value g,
                                        SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.push_back(Value()), success();
  grads.push_back(GradBuilder(b, getLoc()).reshape(g, shapeOf(getInput())));
  return success();
}

LogicalResult TransposeOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.push_back(Value()), success();
  SmallVector<int64_t> inverse(getPerm().size());
  for (size_t d = 0; d < getPerm().size(); ++d)
    inverse[getPerm()[d]] = d;
  grads.push_back(b.create<TransposeOp>(getLoc(), getInput().getType(), g,
                                        b.getDenseI64ArrayAttr(inverse)));
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, Value g,
                                      SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.push_back(Value()), success();
  grads.push_back(b.create<SliceGradOp>(getLoc(), getInput().getType(), g,
                                        getOffsetsAttr(), getStridesAttr()));
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, Value g,
                                       SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.append(getInputs().size(), Value()), success();
  Shape out = shapeOf(g);
  int64_t offset = 0;
  for (Value in : getInputs()) {
    Shape s = shapeOf(in);
    SmallVector<int64_t> offsets(s.size(), 0), strides(s.size(), 1);
    offsets[getAxis()] = s[getAxis()] == 0 ? 0 : offset;
    grads.push_back(b.create<SliceOp>(getLoc(), in.getType(), g,
                                      b.getDenseI64ArrayAttr(offsets),
                                      b.getDenseI64ArrayAttr(strides)));
    offset += s[getAxis()];
  }
  return success();
}

LogicalResult BroadcastOp::buildGradients(OpBuilder &b, Value g,
                                          SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.push_back(Value()), success();
  grads.push_back(GradBuilder(b, getLoc()).unbroadcast(g, shapeOf(getInput())));
  return success();
}

LogicalResult GatherOp::buildGradients(OpBuilder &b, Value g,
                                       SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.append(2, Value()), success();
  grads.push_back(b.create<GatherGradOp>(getLoc(), getData().getType(), g,
                                         getIndices(), getAxisAttr()));
  grads.push_back(Value());
  return success();
}

/// A scatter-add's gradient for what it scattered is a gather at the same
/// indices (ScatterElements and ScatterND are built from it).
LogicalResult GatherGradOp::buildGradients(OpBuilder &b, Value g,
                                           SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<GatherOp>(getLoc(), getGrad().getType(), g,
                                     getIndices(), getAxisAttr()));
  grads.push_back(Value());
  return success();
}

LogicalResult TriluOp::buildGradients(OpBuilder &b, Value g,
                                      SmallVectorImpl<Value> &grads) {
  if (!isFloat(g))
    return grads.push_back(Value()), success();
  grads.push_back(
      b.create<TriluOp>(getLoc(), getType(), g, getUpperAttr(), getKAttr()));
  return success();
}
