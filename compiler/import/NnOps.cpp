//===- NnOps.cpp
//-----------------------------------------------------------===//
//
// MatMul and Gemm, the softmaxes, LayerNormalization, the reductions, the
// classification losses (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss),
// CumSum, and the optimizers of ai.onnx.preview.training.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"
#include "runtime/support/Checked.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/APSInt.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace strata;
using namespace strata::graph;
using namespace strata::importer;

LogicalResult Importer::cumsum(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value x = input(node, 0);
  Shape shape = shapeOf(x);
  Type et = elementTypeOf(x);
  bool isFloat = isa<FloatType>(et);
  if (!isFloat && !et.isInteger(32) && !et.isInteger(64))
    return nodeError(node) << "input must be float, int32 or int64, not " << et;
  FailureOr<SmallVector<int64_t>> axes = constInts(node, 1, "axis");
  if (failed(axes))
    return failure();
  std::optional<int64_t> axis = axes->size() == 1
                                    ? normalizeAxis((*axes)[0], shape.size())
                                    : std::nullopt;
  if (!axis)
    return nodeError(node) << "axis must be one value in range for rank "
                           << shape.size();
  bool exclusive = intAttr(node, "exclusive", 0) != 0;
  bool reverse = intAttr(node, "reverse", 0) != 0;
  int64_t n = shape[*axis];
  // Whether element j counts toward element i.
  auto counts = [&](int64_t j, int64_t i) {
    return reverse ? (exclusive ? j > i : j >= i)
                   : (exclusive ? j < i : j <= i);
  };
  Location loc = nodeLoc(node);
  DenseElementsAttr constant;
  if (matchPattern(x, m_Constant(&constant))) {
    // One running sum per line along the axis, in the direction asked.
    int64_t inner = 1;
    for (size_t d = *axis + 1; d < shape.size(); ++d)
      inner *= shape[d];
    int64_t total = constant.getNumElements();
    int64_t lines = n == 0 ? 0 : total / n;
    auto values = llvm::to_vector(constant.getValues<Attribute>());
    SmallVector<Attribute> out(total);
    for (int64_t line = 0; line < lines; ++line) {
      int64_t base = (line / inner) * n * inner + line % inner;
      APFloat fsum =
          APFloat::getZero(isFloat ? cast<FloatType>(et).getFloatSemantics()
                                   : APFloat::IEEEdouble());
      APInt isum(et.getIntOrFloatBitWidth(), 0);
      for (int64_t step = 0; step < n; ++step) {
        int64_t k = reverse ? n - 1 - step : step;
        int64_t at = base + k * inner;
        if (isFloat) {
          APFloat here = cast<FloatAttr>(values[at]).getValue();
          if (!exclusive)
            fsum.add(here, APFloat::rmNearestTiesToEven);
          out[at] = FloatAttr::get(et, fsum);
          if (exclusive)
            fsum.add(here, APFloat::rmNearestTiesToEven);
        } else {
          APInt here = cast<IntegerAttr>(values[at]).getValue();
          if (!exclusive)
            isum += here;
          out[at] = IntegerAttr::get(et, isum);
          if (exclusive)
            isum += here;
        }
      }
    }
    auto type = tensorType(shape, et);
    define(node, 0,
           builder_.create<ConstantOp>(loc, type,
                                       DenseElementsAttr::get(type, out)));
    return success();
  }
  constexpr int64_t kMaxProduct = 4096;
  if (n > kMaxProduct)
    return nodeError(node) << "CumSum over " << n << " elements on the data "
                           << "path (a product with an [n, n] matrix) is "
                              "limited to "
                           << kMaxProduct;
  int64_t rank = shape.size();
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      perm.push_back(d);
  perm.push_back(*axis);
  Shape moved;
  for (int64_t d : perm)
    moved.push_back(shape[d]);
  Value v = x;
  if (*axis != rank - 1)
    v = builder_.create<TransposeOp>(loc, tensorType(moved, et), x,
                                     builder_.getDenseI64ArrayAttr(perm));
  // y[..., i] = sum_j v[..., j] * m[j, i].
  SmallVector<Attribute> entries;
  entries.reserve(n * n);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < n; ++i)
      entries.push_back(isFloat
                            ? Attribute(FloatAttr::get(et, counts(j, i)))
                            : Attribute(IntegerAttr::get(et, counts(j, i))));
  auto mType = tensorType({n, n}, et);
  Value m = builder_.create<ConstantOp>(loc, mType,
                                        DenseElementsAttr::get(mType, entries));
  Value y =
      builder_.create<MatMulOp>(loc, tensorType(moved, et), v, m, Value());
  if (*axis != rank - 1) {
    SmallVector<int64_t> back(rank);
    for (int64_t d = 0; d < rank; ++d)
      back[perm[d]] = d;
    y = builder_.create<TransposeOp>(loc, tensorType(shape, et), y,
                                     builder_.getDenseI64ArrayAttr(back));
  }
  define(node, 0, y);
  return success();
}

/// ONNX's training-domain optimizers (Adam, Adagrad, Momentum) as graph
/// arithmetic: one functional update per (X, G, state...) group, with the
/// rate R and the step count T as runtime scalars.
LogicalResult Importer::trainingOptimizer(const Node &node) {
  Location loc = nodeLoc(node);
  const std::string &op = node.opType;
  size_t states = op == "Adam" ? 2 : 1;
  size_t groups = (node.inputs.size() - 2) / (2 + states);
  if (node.inputs.size() != 2 + groups * (2 + states) || groups == 0)
    return nodeError(node) << "expects R, T and " << 2 + states
                           << " tensors per optimized input";
  if (failed(requireInputs(node, node.inputs.size())))
    return failure();
  Value r = input(node, 0), t = input(node, 1);
  Type et = elementTypeOf(r);
  if (!isa<FloatType>(et) || shapeOf(r).size() != 0 || shapeOf(t).size() != 0)
    return nodeError(node) << "R must be a float scalar and T a scalar";
  auto scalar = [&](double v) { return scalarConstant(et, v, loc); };
  auto bin = [&](auto tag, Value a, Value b) -> Value {
    using OpT = decltype(tag);
    Shape s = *broadcastShapes({shapeOf(a), shapeOf(b)});
    return builder_.create<OpT>(loc, tensorType(s, et), a, b);
  };
  auto add = [&](Value a, Value b) { return bin(AddOp(), a, b); };
  auto sub = [&](Value a, Value b) { return bin(SubOp(), a, b); };
  auto mul = [&](Value a, Value b) { return bin(MulOp(), a, b); };
  auto div = [&](Value a, Value b) { return bin(DivOp(), a, b); };
  auto sqrt = [&](Value a) {
    return builder_.create<SqrtOp>(loc, a.getType(), a);
  };
  Value tf = builder_.create<CastOp>(loc, tensorType({}, et), t);
  Value tPositive = builder_.create<GreaterOp>(
      loc, tensorType({}, builder_.getI1Type()), tf, scalar(0.0));
  float normCoefficient = floatAttr(node, "norm_coefficient", 0.0f);
  for (size_t k = 0; k < groups; ++k) {
    Value x = input(node, 2 + k), g = input(node, 2 + groups + k);
    if (elementTypeOf(x) != et || shapeOf(g) != shapeOf(x))
      return nodeError(node) << "X and G must share shape and type with R";
    Value reg = add(mul(scalar(normCoefficient), x), g);
    if (op == "Adagrad") {
      Value h = input(node, 2 + 2 * groups + k);
      float decay = floatAttr(node, "decay_factor", 0.0f);
      float epsilon = floatAttr(node, "epsilon", 0.0f);
      Value rate = div(r, add(scalar(1.0), mul(tf, scalar(decay))));
      Value hNew = add(h, mul(reg, reg));
      Value adaptive = add(sqrt(hNew), scalar(epsilon));
      define(node, k, sub(x, div(mul(rate, reg), adaptive)));
      define(node, groups + k, hNew);
    } else if (op == "Momentum") {
      Value v = input(node, 2 + 2 * groups + k);
      float alpha = floatAttr(node, "alpha", 0.0f);
      float beta = floatAttr(node, "beta", 0.0f);
      std::string modeName = stringAttr(node, "mode", "standard");
      if (modeName != "standard" && modeName != "nesterov")
        return nodeError(node) << "unknown mode '" << modeName << "'";
      Value betaAdjusted = builder_.create<SelectOp>(
          loc, tensorType({}, et), tPositive, scalar(beta), scalar(1.0));
      Value vNew = add(mul(scalar(alpha), v), mul(betaAdjusted, reg));
      Value step =
          modeName == "standard" ? vNew : add(reg, mul(scalar(alpha), vNew));
      define(node, k, sub(x, mul(r, step)));
      define(node, groups + k, vNew);
    } else {
      Value v = input(node, 2 + 2 * groups + k);
      Value h = input(node, 2 + 3 * groups + k);
      float alpha = floatAttr(node, "alpha", 0.9f);
      float beta = floatAttr(node, "beta", 0.999f);
      float epsilon = floatAttr(node, "epsilon", 1e-6f);
      float post = floatAttr(node, "norm_coefficient_post", 0.0f);
      Value vNew = add(mul(scalar(alpha), v), mul(scalar(1.0 - alpha), reg));
      Value hNew =
          add(mul(scalar(beta), h), mul(scalar(1.0 - beta), mul(reg, reg)));
      Value hSqrt = add(sqrt(hNew), scalar(epsilon));
      auto power = [&](float base) {
        return builder_.create<PowOp>(loc, tensorType({}, et), scalar(base),
                                      tf);
      };
      Value adjusted = div(mul(r, sqrt(sub(scalar(1.0), power(beta)))),
                           sub(scalar(1.0), power(alpha)));
      Value rate = builder_.create<SelectOp>(loc, tensorType({}, et), tPositive,
                                             adjusted, r);
      Value xNew = sub(x, mul(rate, div(vNew, hSqrt)));
      define(node, k, mul(scalar(1.0 - post), xNew));
      define(node, groups + k, vNew);
      define(node, 2 * groups + k, hNew);
    }
  }
  return success();
}

LogicalResult Importer::matmul(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value a = input(node, 0), b = input(node, 1);
  if (elementTypeOf(a) != elementTypeOf(b))
    return nodeError(node) << "operands have different element types";
  std::string why;
  std::optional<Shape> shape = matmulShape(shapeOf(a), shapeOf(b), &why);
  if (!shape)
    return nodeError(node) << "cannot multiply " << a.getType() << " by "
                           << b.getType() << ": " << why;
  // Rows of a data-dependent length (held compacted, the real ones first):
  // the product stops at their count.
  Value rows;
  std::optional<BoundedDim> bounded = boundedDim(a);
  if (bounded && bounded->axis == 0 && shapeOf(a).size() == 2 &&
      shapeOf(b).size() == 2 && !boundedDim(b))
    rows = boundSets_[bounded->set].count;
  define(node, 0,
         builder_.create<MatMulOp>(
             nodeLoc(node), tensorType(*shape, elementTypeOf(a)), a, b, rows));
  return success();
}

LogicalResult Importer::gemm(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Location loc = nodeLoc(node);
  Value a = input(node, 0), b = input(node, 1), c = input(node, 2);
  if (shapeOf(a).size() != 2 || shapeOf(b).size() != 2)
    return nodeError(node) << "A and B must be matrices";
  auto transposed = [&](Value v) {
    Shape s = shapeOf(v);
    return builder_.createOrFold<TransposeOp>(
        loc, tensorType({s[1], s[0]}, elementTypeOf(v)), v,
        builder_.getDenseI64ArrayAttr({1, 0}));
  };
  if (intAttr(node, "transA", 0))
    a = transposed(a);
  if (intAttr(node, "transB", 0))
    b = transposed(b);
  Type et = elementTypeOf(a);
  std::string why;
  std::optional<Shape> shape = matmulShape(shapeOf(a), shapeOf(b), &why);
  if (!shape)
    return nodeError(node) << "A and B do not multiply: " << why;
  auto type = tensorType(*shape, et);
  // Rows of a data-dependent length as A (an nn.Linear with a bias on an
  // expert's rows): the product stops at their count.
  Value rows;
  std::optional<BoundedDim> bounded = boundedDim(input(node, 0));
  if (bounded && bounded->axis == 0 && !intAttr(node, "transA", 0) &&
      !boundedDim(input(node, 1)))
    rows = boundSets_[bounded->set].count;
  Value y = builder_.create<MatMulOp>(loc, type, a, b, rows);
  float alpha = floatAttr(node, "alpha", 1.0f);
  float beta = floatAttr(node, "beta", 1.0f);
  if (alpha != 1.0f)
    y = builder_.createOrFold<MulOp>(loc, type, y,
                                     scalarConstant(et, alpha, loc));
  if (c && beta != 0.0f) {
    if (!broadcastsTo(shapeOf(c), *shape))
      return nodeError(node) << "C does not broadcast to " << type;
    if (beta != 1.0f)
      c = builder_.createOrFold<MulOp>(loc, c.getType(), c,
                                       scalarConstant(et, beta, loc));
    y = builder_.createOrFold<AddOp>(loc, type, y, c);
  }
  define(node, 0, y);
  return success();
}

template <typename OpT> LogicalResult Importer::softmax(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Shape shape = shapeOf(x);
  int64_t rank = shape.size();
  // Before opset 13 the input is seen as 2-D, [dims before axis, dims from
  // axis on] (axis 1 by default), and normalized over the second.
  bool flattened = model_.opset < 13;
  FailureOr<int64_t> axis = axisAttr(node, flattened ? 1 : -1, rank);
  if (failed(axis))
    return failure();
  Location loc = nodeLoc(node);
  if (!flattened || *axis == rank - 1) {
    define(node, 0,
           builder_.create<OpT>(loc, x.getType(), x,
                                builder_.getI64IntegerAttr(*axis)));
    return success();
  }
  int64_t outer = numElements(Shape(shape.begin(), shape.begin() + *axis));
  int64_t inner = numElements(Shape(shape.begin() + *axis, shape.end()));
  Value flat = reshape(x, {outer, inner}, loc);
  Value y = builder_.create<OpT>(loc, flat.getType(), flat,
                                 builder_.getI64IntegerAttr(1));
  define(node, 0, reshape(y, shape, loc));
  return success();
}

/// SoftmaxCrossEntropyLoss (WithSoftmax: the scores' log-softmax over axis
/// 1 first, and optionally returned) and NegativeLogLikelihoodLoss: scores
/// [N, C, d1...], labels [N, d1...], optional class weights [C];
/// `ignore_index` labels count for nothing, not even in the mean's
/// denominator; reduction none, sum or mean (weighted: over the weights
/// of the labels counted). The form exporters write for a language model's
/// loss (softmax, [N, C], mean, no weights) is graph.cross_entropy, fused
/// and without a [N, C] temporary; every other form is built from
/// log_softmax, a one-hot mask of the labels and reductions, which autodiff
/// differentiates as it is.
template <bool WithSoftmax>
LogicalResult Importer::classLoss(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value x = input(node, 0), labels = input(node, 1), weights = input(node, 2);
  Shape xs = shapeOf(x), ls = shapeOf(labels);
  Type et = elementTypeOf(x), lt = elementTypeOf(labels);
  if (!isa<FloatType>(et))
    return nodeError(node) << "scores must be floating point, not " << et;
  if (!lt.isInteger(32) && !lt.isInteger(64))
    return nodeError(node) << "labels must be int32 or int64, not " << lt;
  bool shapesAgree = xs.size() >= 2 && ls.size() + 1 == xs.size() &&
                     ls[0] == xs[0] &&
                     std::equal(ls.begin() + 1, ls.end(), xs.begin() + 2);
  if (!shapesAgree)
    return nodeError(node) << "expects scores [N, C, d1...] and labels [N, "
                              "d1...]; they are "
                           << x.getType() << " and " << labels.getType();
  int64_t classes = xs[1];
  if (weights &&
      (shapeOf(weights) != Shape{classes} || elementTypeOf(weights) != et))
    return nodeError(node) << "weights must be [" << classes
                           << "] of the scores' type, not "
                           << weights.getType();
  std::string reduction = stringAttr(node, "reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return nodeError(node) << "unknown reduction '" << reduction
                           << "' (none, sum or mean)";
  std::optional<int64_t> ignore;
  if (node.attribute("ignore_index"))
    ignore = intAttr(node, "ignore_index", 0);
  Location loc = nodeLoc(node);
  auto i1 = builder_.getI1Type();
  Value logp;
  if (WithSoftmax && node.outputs.size() > 1 && isConsumed(node.outputs[1]))
    logp = builder_.create<LogSoftmaxOp>(loc, x.getType(), x,
                                         builder_.getI64IntegerAttr(1));
  if (WithSoftmax && xs.size() == 2 && !weights && reduction == "mean") {
    // The fused loss ignores negative labels: a non-negative ignore_index
    // becomes -1.
    Value l = labels;
    if (ignore && *ignore >= 0) {
      Value hit = builder_.createOrFold<EqualOp>(
          loc, tensorType(ls, i1), l, scalarConstant(lt, *ignore, loc));
      l = builder_.createOrFold<SelectOp>(loc, labels.getType(), hit,
                                          scalarConstant(lt, -1, loc), l);
    }
    define(node, 0,
           builder_.create<CrossEntropyOp>(loc, tensorType({}, et), x, l));
    if (logp)
      define(node, 1, logp);
    return success();
  }
  if (WithSoftmax && !logp)
    logp = builder_.create<LogSoftmaxOp>(loc, x.getType(), x,
                                         builder_.getI64IntegerAttr(1));
  Value scores = WithSoftmax ? logp : x;
  // onehot[n, c, d...] = labels[n, d...] == c.
  Shape column(xs.size(), 1);
  column[1] = classes;
  SmallVector<APInt> iota;
  for (int64_t c = 0; c < classes; ++c)
    iota.push_back(APInt(lt.getIntOrFloatBitWidth(), c, /*isSigned=*/true));
  auto iotaType = tensorType(column, lt);
  Value classIds = builder_.create<ConstantOp>(
      loc, iotaType, DenseElementsAttr::get(iotaType, iota));
  Shape spread = xs;
  spread[1] = 1;
  Value onehot = builder_.createOrFold<EqualOp>(
      loc, tensorType(xs, i1), reshape(labels, spread, loc), classIds);
  Value zero = scalarConstant(et, 0.0, loc);
  auto perClass = [&](Value v) {
    Value masked = builder_.createOrFold<SelectOp>(loc, tensorType(xs, et),
                                                   onehot, v, zero);
    return builder_.create<ReduceSumOp>(loc, tensorType(ls, et), masked,
                                        builder_.getDenseI64ArrayAttr({1}),
                                        UnitAttr());
  };
  Value loss =
      builder_.create<NegOp>(loc, tensorType(ls, et), perClass(scores));
  // Each element's weight: its label's class weight, 0 when ignored.
  Value weight;
  if (weights)
    weight = perClass(reshape(weights, column, loc));
  if (ignore) {
    Value hit = builder_.createOrFold<EqualOp>(
        loc, tensorType(ls, i1), labels, scalarConstant(lt, *ignore, loc));
    weight = builder_.createOrFold<SelectOp>(
        loc, tensorType(ls, et), hit, zero,
        weight ? weight : scalarConstant(et, 1.0, loc));
  }
  if (weight)
    loss = builder_.create<MulOp>(loc, tensorType(ls, et), loss, weight);
  SmallVector<int64_t> all;
  for (size_t d = 0; d < ls.size(); ++d)
    all.push_back(static_cast<int64_t>(d));
  auto total = [&](Value v) -> Value {
    return builder_.create<ReduceSumOp>(loc, tensorType({}, et), v,
                                        builder_.getDenseI64ArrayAttr(all),
                                        UnitAttr());
  };
  Value out = loss;
  if (reduction == "sum")
    out = total(loss);
  else if (reduction == "mean" && weight) {
    Value sum = total(loss), counted = total(weight);
    out = builder_.create<DivOp>(loc, tensorType({}, et), sum, counted);
  } else if (reduction == "mean")
    out = builder_.create<ReduceMeanOp>(loc, tensorType({}, et), loss,
                                        builder_.getDenseI64ArrayAttr(all),
                                        UnitAttr());
  define(node, 0, out);
  if (WithSoftmax)
    define(node, 1, logp);
  return success();
}

LogicalResult Importer::layerNorm(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value x = input(node, 0), scale = input(node, 1), bias = input(node, 2);
  Shape shape = shapeOf(x);
  FailureOr<int64_t> axis = axisAttr(node, -1, shape.size());
  if (failed(axis))
    return failure();
  Shape normalized(shape.begin() + *axis, shape.end());
  if (!broadcastsTo(shapeOf(scale), normalized) ||
      (bias && !broadcastsTo(shapeOf(bias), normalized)))
    return nodeError(node) << "scale/bias do not broadcast to the normalised "
                              "dimensions";
  float epsilon = floatAttr(node, "epsilon", 1e-5f);
  Location loc = nodeLoc(node);
  define(node, 0,
         builder_.create<LayerNormOp>(loc, x.getType(), x, scale, bias,
                                      builder_.getI64IntegerAttr(*axis),
                                      builder_.getF32FloatAttr(epsilon),
                                      UnitAttr()));
  // Mean and InvStdDev, when used, are computed alongside (in the stash
  // type, float32 by default) with keepdims shapes.
  bool wantMean = node.outputs.size() > 1 && isConsumed(node.outputs[1]);
  bool wantInv = node.outputs.size() > 2 && isConsumed(node.outputs[2]);
  if (!wantMean && !wantInv)
    return success();
  Type stash =
      elementType(static_cast<int32_t>(intAttr(node, "stash_type", 1)));
  if (!stash || !isa<FloatType>(stash))
    return nodeError(node) << "unsupported stash_type";
  Value xs = builder_.createOrFold<CastOp>(loc, tensorType(shape, stash), x);
  std::vector<int64_t> axes;
  for (int64_t d = *axis; d < static_cast<int64_t>(shape.size()); ++d)
    axes.push_back(d);
  auto statType = tensorType(reduceShape(shape, axes, true), stash);
  auto axesAttr = builder_.getDenseI64ArrayAttr(axes);
  Value mean = builder_.create<ReduceMeanOp>(loc, statType, xs, axesAttr,
                                             builder_.getUnitAttr());
  define(node, 1, mean);
  if (!wantInv)
    return success();
  Value centered =
      builder_.create<SubOp>(loc, tensorType(shape, stash), xs, mean);
  Value squared =
      builder_.create<MulOp>(loc, tensorType(shape, stash), centered, centered);
  Value var = builder_.create<ReduceMeanOp>(loc, statType, squared, axesAttr,
                                            builder_.getUnitAttr());
  Value shifted = builder_.create<AddOp>(loc, statType, var,
                                         scalarConstant(stash, epsilon, loc));
  Value root = builder_.create<SqrtOp>(loc, statType, shifted);
  define(node, 2, builder_.create<ReciprocalOp>(loc, statType, root));
  return success();
}

template <typename OpT> LogicalResult Importer::reduce(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Shape shape = shapeOf(x);
  int64_t rank = shape.size();
  LogicalResult status = success();
  std::optional<SmallVector<int64_t>> axes = axesOf(node, 1, status);
  if (failed(status))
    return failure();
  bool keepdims = intAttr(node, "keepdims", 1) != 0;
  std::vector<int64_t> normalized;
  if (!axes || axes->empty()) {
    if (intAttr(node, "noop_with_empty_axes", 0)) {
      define(node, 0, x);
      return success();
    }
    for (int64_t d = 0; d < rank; ++d)
      normalized.push_back(d);
  } else {
    for (int64_t a : *axes) {
      std::optional<int64_t> n = normalizeAxis(a, rank);
      if (!n)
        return nodeError(node)
               << "axis " << a << " out of range for rank " << rank;
      normalized.push_back(*n);
    }
    std::sort(normalized.begin(), normalized.end());
    normalized.erase(std::unique(normalized.begin(), normalized.end()),
                     normalized.end());
  }
  Shape out = reduceShape(shape, normalized, keepdims);
  // ReduceMin is -max(-x) (ReduceMax's rule: the gradient goes to the
  // extreme elements).
  bool min = node.opType == "ReduceMin";
  Location loc = nodeLoc(node);
  if (min)
    x = builder_.createOrFold<NegOp>(loc, x.getType(), x);
  Value r =
      builder_.create<OpT>(loc, tensorType(out, elementTypeOf(x)), x,
                           builder_.getDenseI64ArrayAttr(normalized),
                           keepdims ? builder_.getUnitAttr() : UnitAttr());
  if (min)
    r = builder_.createOrFold<NegOp>(loc, r.getType(), r);
  define(node, 0, r);
  return success();
}

// The specialisations the handler table (OnnxImporter.cpp) takes.
template LogicalResult Importer::softmax<SoftmaxOp>(const Node &);
template LogicalResult Importer::softmax<LogSoftmaxOp>(const Node &);
template LogicalResult Importer::classLoss<true>(const Node &);
template LogicalResult Importer::classLoss<false>(const Node &);
template LogicalResult Importer::reduce<ReduceSumOp>(const Node &);
template LogicalResult Importer::reduce<ReduceMeanOp>(const Node &);
template LogicalResult Importer::reduce<ReduceMaxOp>(const Node &);
template LogicalResult Importer::reduce<ReduceSumSquareOp>(const Node &);
