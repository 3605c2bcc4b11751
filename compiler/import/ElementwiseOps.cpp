//===- ElementwiseOps.cpp
//--------------------------------------------------===//
//
// The binary, comparison, variadic and unary ops map one to one onto graph
// ops (broadcast shapes computed here); the activation family, Mod and the
// rounding ops are graph arithmetic, so autodiff differentiates them and
// the elementwise fusion runs them as one kernel.
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

template <typename OpT> LogicalResult Importer::binary(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value lhs = input(node, 0), rhs = input(node, 1);
  Location loc = nodeLoc(node);
  // Pow's exponent may have another type; compute in the base's type.
  if (std::is_same_v<OpT, PowOp> && elementTypeOf(lhs) != elementTypeOf(rhs))
    rhs = builder_.createOrFold<CastOp>(
        loc, tensorType(shapeOf(rhs), elementTypeOf(lhs)), rhs);
  if (elementTypeOf(lhs) != elementTypeOf(rhs))
    return nodeError(node) << "operands have different element types ("
                           << elementTypeOf(lhs) << " and "
                           << elementTypeOf(rhs) << ")";
  std::optional<Shape> shape = broadcastShapes({shapeOf(lhs), shapeOf(rhs)});
  if (!shape)
    return nodeError(node) << "operand shapes " << lhs.getType() << " and "
                           << rhs.getType() << " do not broadcast";
  bool compare = std::is_same_v<OpT, EqualOp> || std::is_same_v<OpT, LessOp> ||
                 std::is_same_v<OpT, GreaterOp>;
  Type et = compare ? builder_.getI1Type() : elementTypeOf(lhs);
  if ((std::is_same_v<OpT, AndOp> ||
       std::is_same_v<OpT, OrOp>)&&!et.isInteger(1))
    return nodeError(node) << "operands must be bool";
  define(node, 0,
         builder_.createOrFold<OpT>(loc, tensorType(*shape, et), lhs, rhs));
  return success();
}

template <typename OpT, bool Negate>
LogicalResult Importer::compareOrEqual(const Node &node) {
  // a <= b is not(a > b) only without NaN; build it as (a < b) or (a == b).
  if (failed(requireInputs(node, 2)))
    return failure();
  Value lhs = input(node, 0), rhs = input(node, 1);
  if (elementTypeOf(lhs) != elementTypeOf(rhs))
    return nodeError(node) << "operands have different element types";
  std::optional<Shape> shape = broadcastShapes({shapeOf(lhs), shapeOf(rhs)});
  if (!shape)
    return nodeError(node) << "operand shapes do not broadcast";
  Location loc = nodeLoc(node);
  auto type = tensorType(*shape, builder_.getI1Type());
  Value strict;
  if (std::is_same_v<OpT, GreaterOp>) // LessOrEqual
    strict = builder_.createOrFold<LessOp>(loc, type, lhs, rhs);
  else // GreaterOrEqual
    strict = builder_.createOrFold<GreaterOp>(loc, type, lhs, rhs);
  Value equal = builder_.createOrFold<EqualOp>(loc, type, lhs, rhs);
  define(node, 0, builder_.createOrFold<OrOp>(loc, type, strict, equal));
  return success();
}

template <typename OpT> LogicalResult Importer::variadic(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Location loc = nodeLoc(node);
  Value acc = input(node, 0);
  for (size_t i = 1; i < node.inputs.size(); ++i) {
    Value next = input(node, i);
    if (!next)
      continue;
    if (elementTypeOf(acc) != elementTypeOf(next))
      return nodeError(node) << "operands have different element types";
    std::optional<Shape> shape = broadcastShapes({shapeOf(acc), shapeOf(next)});
    if (!shape)
      return nodeError(node) << "operand shapes do not broadcast";
    acc = builder_.createOrFold<OpT>(
        loc, tensorType(*shape, elementTypeOf(acc)), acc, next);
  }
  define(node, 0, acc);
  return success();
}

template <typename OpT> LogicalResult Importer::unary(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Type et = elementTypeOf(x);
  bool anyNumber = std::is_same_v<OpT, NegOp> || std::is_same_v<OpT, AbsOp>;
  if (std::is_same_v<OpT, NotOp> ? !et.isInteger(1)
                                 : (!anyNumber && !isa<FloatType>(et)))
    return nodeError(node) << "unsupported element type " << et;
  define(node, 0, builder_.createOrFold<OpT>(nodeLoc(node), x.getType(), x));
  return success();
}

/// ONNX Mod: integers take the divisor's sign (Python's %) unless fmod=1
/// (C's %, the dividend's sign); floats need fmod=1. Built from a
/// truncating division: r = a - trunc(a / b) * b, then for fmod=0 a
/// non-zero r of the other sign than b moves by b.
LogicalResult Importer::mod(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value a = input(node, 0), b = input(node, 1);
  Type et = elementTypeOf(a);
  if (elementTypeOf(b) != et)
    return nodeError(node) << "operands have different element types";
  bool fmod = intAttr(node, "fmod", 0) != 0;
  bool isFloat = isa<FloatType>(et);
  if (isFloat && !fmod)
    return nodeError(node) << "a float Mod with fmod=0 (floor rounding, "
                              "legal from opset 28) is not supported; "
                              "fmod=1 is";
  if (et.isInteger(1))
    return nodeError(node) << "operands must be numbers, not bool";
  std::optional<Shape> shape = broadcastShapes({shapeOf(a), shapeOf(b)});
  if (!shape)
    return nodeError(node) << "operand shapes do not broadcast";
  Location loc = nodeLoc(node);
  auto type = tensorType(*shape, et);
  Value q = builder_.createOrFold<DivOp>(loc, type, a, b);
  if (isFloat) {
    auto i64 = tensorType(*shape, builder_.getI64Type());
    q = builder_.createOrFold<CastOp>(
        loc, type, builder_.createOrFold<CastOp>(loc, i64, q));
  }
  Value r = builder_.createOrFold<SubOp>(
      loc, type, a, builder_.createOrFold<MulOp>(loc, type, q, b));
  if (!fmod) {
    auto bools = tensorType(*shape, builder_.getI1Type());
    Value zero = scalarConstant(et, 0, loc);
    Value rNeg = builder_.createOrFold<LessOp>(loc, bools, r, zero);
    Value bNeg = builder_.createOrFold<LessOp>(
        loc, tensorType(shapeOf(b), builder_.getI1Type()), b, zero);
    Value rPos = builder_.createOrFold<GreaterOp>(loc, bools, r, zero);
    Value bPos = builder_.createOrFold<GreaterOp>(
        loc, tensorType(shapeOf(b), builder_.getI1Type()), b, zero);
    Value wrong = builder_.createOrFold<OrOp>(
        loc, bools, builder_.createOrFold<AndOp>(loc, bools, rNeg, bPos),
        builder_.createOrFold<AndOp>(loc, bools, rPos, bNeg));
    r = builder_.createOrFold<SelectOp>(
        loc, type, wrong, builder_.createOrFold<AddOp>(loc, type, r, b), r);
  }
  define(node, 0, r);
  return success();
}

LogicalResult Importer::identity(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  auto seq = sequences_.find(node.inputs[0]);
  if (seq != sequences_.end()) {
    defineSequence(node, 0, seq->second);
    return success();
  }
  define(node, 0, input(node, 0));
  return success();
}

LogicalResult Importer::gelu(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  std::string approximate = stringAttr(node, "approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return nodeError(node) << "unknown approximate mode '" << approximate
                           << "'";
  Value x = input(node, 0);
  if (!isa<FloatType>(elementTypeOf(x)))
    return nodeError(node) << "input must be a float tensor";
  define(node, 0,
         builder_.create<GeluOp>(nodeLoc(node), x.getType(), x,
                                 approximate == "tanh" ? builder_.getUnitAttr()
                                                       : UnitAttr()));
  return success();
}

/// The activation family, as graph arithmetic (so autodiff differentiates
/// them and the elementwise fusion runs them in one kernel). The forms
/// avoid overflow in either pass: an exponential is of min(x, 0) where
/// only x < 0 reads it, softplus is relu(x) + log(1 + exp(-|x|)).
LogicalResult Importer::activation(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Type et = elementTypeOf(x);
  if (!isa<FloatType>(et))
    return nodeError(node) << "input must be a float tensor, not " << et;
  Location loc = nodeLoc(node);
  Type type = x.getType();
  auto k = [&](double v) { return scalarConstant(et, v, loc); };
  auto mul = [&](Value a, Value b) {
    return builder_.create<MulOp>(loc, type, a, b).getResult();
  };
  auto add = [&](Value a, Value b) {
    return builder_.create<AddOp>(loc, type, a, b).getResult();
  };
  auto negative = [&] {
    return builder_.create<LessOp>(
        loc, tensorType(shapeOf(x), builder_.getI1Type()), x, k(0.0));
  };
  // alpha * (exp(min(x, 0) / scale) - 1): the negative branch of ELU-likes.
  auto expm1Negative = [&](double alpha, double scale) {
    Value m = builder_.create<MinOp>(loc, type, x, k(0.0));
    if (scale != 1.0)
      m = mul(m, k(1.0 / scale));
    Value e = builder_.create<ExpOp>(loc, type, m);
    return mul(builder_.create<SubOp>(loc, type, e, k(1.0)), k(alpha));
  };
  // x < 0 ? below : x, the condition built first (argument order is
  // unspecified: the IR would differ between compilers).
  auto belowZero = [&](llvm::function_ref<Value()> below) {
    Value c = negative();
    Value b = below();
    return builder_.create<SelectOp>(loc, type, c, b, x).getResult();
  };
  auto hardSigmoid = [&](double alpha, double beta) {
    Value y = add(mul(x, k(alpha)), k(beta));
    y = builder_.create<MinOp>(loc, type, y, k(1.0));
    return builder_.create<MaxOp>(loc, type, y, k(0.0)).getResult();
  };
  auto softplus = [&] {
    Value pos = builder_.create<ReluOp>(loc, type, x);
    Value abs = builder_.create<AbsOp>(loc, type, x);
    Value e = builder_.create<ExpOp>(loc, type,
                                     builder_.create<NegOp>(loc, type, abs));
    return add(pos, builder_.create<LogOp>(loc, type, add(e, k(1.0))));
  };
  const std::string &op = node.opType;
  Value y;
  if (op == "Elu") {
    float alpha = floatAttr(node, "alpha", 1.0f);
    y = belowZero([&] { return expm1Negative(alpha, 1.0); });
  } else if (op == "Celu") {
    float alpha = floatAttr(node, "alpha", 1.0f);
    if (alpha == 0.0f)
      return nodeError(node) << "alpha must not be 0";
    y = belowZero([&] { return expm1Negative(alpha, alpha); });
  } else if (op == "Selu") {
    float alpha = floatAttr(node, "alpha", 1.67326319217681884765625f);
    float gamma = floatAttr(node, "gamma", 1.05070102214813232421875f);
    y = belowZero([&] { return expm1Negative(alpha, 1.0); });
    y = mul(y, k(gamma));
  } else if (op == "LeakyRelu") {
    float alpha = floatAttr(node, "alpha", 0.01f);
    y = belowZero([&] { return mul(x, k(alpha)); });
  } else if (op == "HardSigmoid") {
    y = hardSigmoid(floatAttr(node, "alpha", 0.2f),
                    floatAttr(node, "beta", 0.5f));
  } else if (op == "HardSwish") {
    y = mul(x, hardSigmoid(1.0 / 6.0, 0.5));
  } else if (op == "Softplus") {
    y = softplus();
  } else if (op == "Mish") {
    y = mul(x, builder_.create<TanhOp>(loc, type, softplus()));
  } else if (op == "Swish") {
    Value s = builder_.create<SigmoidOp>(
        loc, type, mul(x, k(floatAttr(node, "alpha", 1.0f))));
    y = mul(x, s);
  } else {
    return nodeError(node) << "no activation rule for " << op;
  }
  define(node, 0, y);
  return success();
}

/// CumSum along a constant axis (exclusive: without the element itself;
/// reverse: from the end). Of a constant (positions computed from a mask
/// the exporter made) it is folded here; on the data path it is a product
/// with a constant triangular [n, n] matrix along the axis, which
/// autodiff differentiates (n up to 4096).
/// Floor, Ceil, Round (half to even) and Sign, as graph arithmetic: the
/// integer part by a cast to int64 and back (for |x| < 2^52; larger floats
/// are integers already and pass through), corrected by one where the cast's
/// truncation went the other way. Their gradient is zero, as autodiff finds
/// through the casts.
LogicalResult Importer::rounding(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Type et = elementTypeOf(x);
  Location loc = nodeLoc(node);
  Type type = x.getType();
  Shape shape = shapeOf(x);
  auto bools = tensorType(shape, builder_.getI1Type());
  auto k = [&](double v) { return scalarConstant(et, v, loc); };
  auto asFloat = [&](Value b) {
    return builder_.createOrFold<CastOp>(loc, type, b);
  };
  if (node.opType == "Sign") {
    if (et.isInteger(1))
      return nodeError(node) << "input must be numbers, not bool";
    Value pos = asFloat(builder_.createOrFold<GreaterOp>(loc, bools, x, k(0)));
    Value neg = asFloat(builder_.createOrFold<LessOp>(loc, bools, x, k(0)));
    define(node, 0, builder_.createOrFold<SubOp>(loc, type, pos, neg));
    return success();
  }
  if (!isa<FloatType>(et))
    return nodeError(node) << "input must be a float tensor, not " << et;
  auto trunc = [&](Value v) {
    Value i = builder_.createOrFold<CastOp>(
        loc, tensorType(shape, builder_.getI64Type()), v);
    return builder_.createOrFold<CastOp>(loc, type, i);
  };
  auto floorOf = [&](Value v) {
    Value t = trunc(v);
    Value over = asFloat(builder_.createOrFold<LessOp>(loc, bools, v, t));
    return builder_.createOrFold<SubOp>(loc, type, t, over);
  };
  Value r;
  if (node.opType == "Floor") {
    r = floorOf(x);
  } else if (node.opType == "Ceil") {
    Value t = trunc(x);
    Value under = asFloat(builder_.createOrFold<GreaterOp>(loc, bools, x, t));
    r = builder_.createOrFold<AddOp>(loc, type, t, under);
  } else { // Round: floor(x + 0.5), one less on an exact tie to an odd.
    Value up = floorOf(builder_.createOrFold<AddOp>(loc, type, x, k(0.5)));
    Value tie = builder_.createOrFold<EqualOp>(
        loc, bools, builder_.createOrFold<SubOp>(loc, type, up, x), k(0.5));
    Value half = builder_.createOrFold<MulOp>(loc, type, up, k(0.5));
    Value odd = builder_.createOrFold<EqualOp>(loc, bools, floorOf(half), half);
    odd = builder_.createOrFold<NotOp>(loc, bools, odd);
    Value down = asFloat(builder_.createOrFold<AndOp>(loc, bools, tie, odd));
    r = builder_.createOrFold<SubOp>(loc, type, up, down);
  }
  // Beyond 2^52 every float is an integer (and the cast would overflow).
  Value small = builder_.createOrFold<LessOp>(
      loc, bools, builder_.createOrFold<AbsOp>(loc, type, x),
      k(4503599627370496.0));
  define(node, 0, builder_.createOrFold<SelectOp>(loc, type, small, r, x));
  return success();
}

LogicalResult Importer::castNode(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  int64_t to = intAttr(node, "to", 0);
  Type et = elementType(static_cast<int32_t>(to));
  if (!et)
    return nodeError(node) << "unsupported target type "
                           << onnx::dataTypeName(static_cast<int32_t>(to));
  Value x = input(node, 0);
  define(node, 0,
         builder_.createOrFold<CastOp>(nodeLoc(node),
                                       tensorType(shapeOf(x), et), x));
  return success();
}

LogicalResult Importer::castLike(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value x = input(node, 0);
  Type et = elementTypeOf(input(node, 1));
  define(node, 0,
         builder_.createOrFold<CastOp>(nodeLoc(node),
                                       tensorType(shapeOf(x), et), x));
  return success();
}

LogicalResult Importer::mean(const Node &node) {
  if (failed(variadic<AddOp>(node)))
    return failure();
  Value sum = values_.lookup(node.outputs[0]);
  if (!isa<FloatType>(elementTypeOf(sum)))
    return nodeError(node) << "inputs must be float tensors";
  int64_t count = llvm::count_if(
      node.inputs, [](const std::string &n) { return !n.empty(); });
  Location loc = nodeLoc(node);
  define(
      node, 0,
      builder_.createOrFold<DivOp>(
          loc, sum.getType(), sum,
          scalarConstant(elementTypeOf(sum), static_cast<double>(count), loc)));
  return success();
}

LogicalResult Importer::clip(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Location loc = nodeLoc(node);
  Value x = input(node, 0);
  if (Value lo = input(node, 1)) {
    if (elementTypeOf(lo) != elementTypeOf(x) || shapeOf(lo).size() != 0)
      return nodeError(node) << "min must be a scalar of the input's type";
    x = builder_.createOrFold<MaxOp>(loc, x.getType(), x, lo);
  }
  if (Value hi = input(node, 2)) {
    if (elementTypeOf(hi) != elementTypeOf(x) || shapeOf(hi).size() != 0)
      return nodeError(node) << "max must be a scalar of the input's type";
    x = builder_.createOrFold<MinOp>(loc, x.getType(), x, hi);
  }
  define(node, 0, x);
  return success();
}

LogicalResult Importer::dropout(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  // Dropout is the identity unless training_mode is a true constant; in
  // training mode with a ratio of 0 (models exported in training mode with
  // dropout switched off) it is the identity too.
  if (Value mode = input(node, 2)) {
    DenseElementsAttr attr, ratio;
    if (!matchPattern(mode, m_Constant(&attr)))
      return nodeError(node) << "training_mode must be a constant";
    bool zeroRatio =
        input(node, 1) && matchPattern(input(node, 1), m_Constant(&ratio)) &&
        isa<FloatType>(ratio.getElementType()) && ratio.getNumElements() == 1 &&
        (*ratio.getValues<APFloat>().begin()).isZero();
    if (attr.getSplatValue<bool>() && !zeroRatio)
      return nodeError(node)
             << "Dropout in training mode (a ratio other than 0) is not "
                "supported; export the model in eval mode (model.eval()) or "
                "with its dropout probabilities set to 0";
  }
  Value x = input(node, 0);
  define(node, 0, x);
  if (node.outputs.size() > 1 && isConsumed(node.outputs[1])) {
    auto maskType = tensorType(shapeOf(x), builder_.getI1Type());
    define(node, 1,
           builder_.create<ConstantOp>(nodeLoc(node), maskType,
                                       DenseElementsAttr::get(maskType, true)));
  }
  return success();
}

LogicalResult Importer::where(const Node &node) {
  if (failed(requireInputs(node, 3)))
    return failure();
  Value c = input(node, 0), a = input(node, 1), b = input(node, 2);
  if (!elementTypeOf(c).isInteger(1))
    return nodeError(node) << "condition must be bool";
  if (elementTypeOf(a) != elementTypeOf(b))
    return nodeError(node) << "X and Y have different element types";
  std::optional<Shape> out =
      broadcastShapes({shapeOf(c), shapeOf(a), shapeOf(b)});
  if (!out)
    return nodeError(node) << "operand shapes do not broadcast";
  define(node, 0,
         builder_.createOrFold<SelectOp>(
             nodeLoc(node), tensorType(*out, elementTypeOf(a)), c, a, b));
  return success();
}

// The specialisations the handler table (OnnxImporter.cpp) takes.
template LogicalResult Importer::binary<AddOp>(const Node &);
template LogicalResult Importer::binary<SubOp>(const Node &);
template LogicalResult Importer::binary<MulOp>(const Node &);
template LogicalResult Importer::binary<DivOp>(const Node &);
template LogicalResult Importer::binary<PowOp>(const Node &);
template LogicalResult Importer::binary<AndOp>(const Node &);
template LogicalResult Importer::binary<OrOp>(const Node &);
template LogicalResult Importer::binary<EqualOp>(const Node &);
template LogicalResult Importer::binary<LessOp>(const Node &);
template LogicalResult Importer::binary<GreaterOp>(const Node &);
template LogicalResult Importer::compareOrEqual<GreaterOp, true>(const Node &);
template LogicalResult Importer::compareOrEqual<LessOp, true>(const Node &);
template LogicalResult Importer::variadic<MaxOp>(const Node &);
template LogicalResult Importer::variadic<MinOp>(const Node &);
template LogicalResult Importer::variadic<AddOp>(const Node &);
template LogicalResult Importer::unary<NegOp>(const Node &);
template LogicalResult Importer::unary<ExpOp>(const Node &);
template LogicalResult Importer::unary<LogOp>(const Node &);
template LogicalResult Importer::unary<SqrtOp>(const Node &);
template LogicalResult Importer::unary<ReciprocalOp>(const Node &);
template LogicalResult Importer::unary<TanhOp>(const Node &);
template LogicalResult Importer::unary<ErfOp>(const Node &);
template LogicalResult Importer::unary<SigmoidOp>(const Node &);
template LogicalResult Importer::unary<ReluOp>(const Node &);
template LogicalResult Importer::unary<NotOp>(const Node &);
template LogicalResult Importer::unary<AbsOp>(const Node &);
template LogicalResult Importer::unary<SinOp>(const Node &);
template LogicalResult Importer::unary<CosOp>(const Node &);
