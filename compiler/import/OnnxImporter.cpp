//===- OnnxImporter.cpp - ONNX model to graph dialect ---------------------===//
//
// Walks the nodes of an ONNX graph in order and builds graph-dialect ops with
// static result types. Every op is built with `createOrFold`, so the shape
// computations that exporters emit fold into constants as they are imported;
// an input that decides a shape (Reshape's shape, Slice's starts, ...) must
// be such a constant, and the error says so when it is not.
//
//===----------------------------------------------------------------------===//

#include "runtime/support/Checked.h"
#include "compiler/import/Importer.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/ShapeInference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APSInt.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/GlobPattern.h"

#include <cmath>
#include <functional>
#include <set>

using namespace mlir;
using namespace strata;
using namespace strata::graph;
using strata::onnx::Node;

bool strata::parseInputShapeSpec(const std::string &spec, std::string &name,
                                 std::vector<int64_t> &dims,
                                 std::string &error) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    error = "expected NAME=D0xD1x... (e.g. input_ids=4x128), got '" + spec +
            "'";
    return false;
  }
  name = spec.substr(0, eq);
  dims.clear();
  std::string rest = spec.substr(eq + 1);
  if (rest == "scalar")
    return true;
  size_t pos = 0;
  while (true) {
    size_t x = rest.find('x', pos);
    std::string part = rest.substr(pos, x == std::string::npos ? x : x - pos);
    int64_t dim;
    if (part.empty() ||
        part.find_first_not_of("0123456789") != std::string::npos ||
        !strata::parseInt64(part, dim, 0)) {
      error = "invalid dimension '" + part + "' in '" + spec +
              "' (dimensions are positive integers joined by 'x', each "
              "below 2^63)";
      return false;
    }
    // An empty batch or sequence trains on nothing (a NaN loss): refuse it.
    if (dim == 0) {
      error = "dimension 0 in '" + spec + "' is an empty dimension; bind "
              "it to a positive size";
      return false;
    }
    dims.push_back(dim);
    if (x == std::string::npos)
      break;
    pos = x + 1;
  }
  if (!strata::checkedNumElements(dims)) {
    error = "the shape in '" + spec + "' has more than 2^63 elements";
    return false;
  }
  return true;
}

using namespace strata::importer;

//===----------------------------------------------------------------------===//
// Handler table
//===----------------------------------------------------------------------===//

const std::map<std::string, Handler> &Importer::handlers() {
  static const std::map<std::string, Handler> table = {
      {"Add", {&Importer::binary<AddOp>, 7}},
      {"Sub", {&Importer::binary<SubOp>, 7}},
      {"Mul", {&Importer::binary<MulOp>, 7}},
      {"Div", {&Importer::binary<DivOp>, 7}},
      {"Pow", {&Importer::binary<PowOp>, 7}},
      {"And", {&Importer::binary<AndOp>, 7}},
      {"Or", {&Importer::binary<OrOp>, 7}},
      {"Equal", {&Importer::binary<EqualOp>, 7}},
      {"Less", {&Importer::binary<LessOp>, 7}},
      {"Greater", {&Importer::binary<GreaterOp>, 7}},
      {"LessOrEqual", {&Importer::compareOrEqual<GreaterOp, true>, 12}},
      {"GreaterOrEqual", {&Importer::compareOrEqual<LessOp, true>, 12}},
      {"Max", {&Importer::variadic<MaxOp>, 8}},
      {"Min", {&Importer::variadic<MinOp>, 8}},
      {"Sum", {&Importer::variadic<AddOp>, 8}},
      {"Neg", {&Importer::unary<NegOp>, 6}},
      {"Exp", {&Importer::unary<ExpOp>, 6}},
      {"Log", {&Importer::unary<LogOp>, 6}},
      {"Sqrt", {&Importer::unary<SqrtOp>, 6}},
      {"Reciprocal", {&Importer::unary<ReciprocalOp>, 6}},
      {"Tanh", {&Importer::unary<TanhOp>, 6}},
      {"Erf", {&Importer::unary<ErfOp>, 9}},
      {"Sigmoid", {&Importer::unary<SigmoidOp>, 6}},
      {"Relu", {&Importer::unary<ReluOp>, 6}},
      {"Not", {&Importer::unary<NotOp>, 1}},
      {"Gelu", {&Importer::gelu, 20}},
      {"CumSum", {&Importer::cumsum, 11}},
      {"Tile", {&Importer::tile, 6}},
      {"Elu", {&Importer::activation, 6}},
      {"Celu", {&Importer::activation, 12}},
      {"Selu", {&Importer::activation, 6}},
      {"LeakyRelu", {&Importer::activation, 6}},
      {"HardSigmoid", {&Importer::activation, 6}},
      {"HardSwish", {&Importer::activation, 14}},
      {"Softplus", {&Importer::activation, 1}},
      {"Mish", {&Importer::activation, 18}},
      {"Swish", {&Importer::activation, 24}},
      {"Identity", {&Importer::identity, 1}},
      {"Mod", {&Importer::mod, 10}},
      {"GatherElements", {&Importer::gatherElements, 11}},
      {"GatherND", {&Importer::gatherND, 11}},
      {"ScatterElements", {&Importer::scatterElements, 11}},
      {"ScatterND", {&Importer::scatterND, 11}},
      {"TopK", {&Importer::topK, 11}},
      {"Pad", {&Importer::pad, 11}},
      {"Einsum", {&Importer::einsum, 12}},
      {"ArgMax", {&Importer::argExtreme, 11}},
      {"ArgMin", {&Importer::argExtreme, 11}},
      {"RMSNormalization", {&Importer::rmsNorm, 23}},
      {"RotaryEmbedding", {&Importer::rotaryEmbedding, 23}},
      {"Attention", {&Importer::attention, 23}},
      {"Loop", {&Importer::loop, 11}},
      {"If", {&Importer::ifNode, 11}},
      {"SequenceEmpty", {&Importer::sequenceEmpty, 11}},
      {"SequenceConstruct", {&Importer::sequenceConstruct, 11}},
      {"SequenceInsert", {&Importer::sequenceInsert, 11}},
      {"SequenceAt", {&Importer::sequenceAt, 11}},
      {"SequenceErase", {&Importer::sequenceErase, 11}},
      {"SequenceLength", {&Importer::sequenceLength, 11}},
      {"SplitToSequence", {&Importer::splitToSequence, 11}},
      {"ConcatFromSequence", {&Importer::concatFromSequence, 11}},
      {"Cast", {&Importer::castNode, 6}},
      {"Clip", {&Importer::clip, 11}},
      {"Dropout", {&Importer::dropout, 12}},
      {"MatMul", {&Importer::matmul, 1}},
      {"Gemm", {&Importer::gemm, 11}},
      {"Softmax", {&Importer::softmax<SoftmaxOp>, 1}},
      {"LogSoftmax", {&Importer::softmax<LogSoftmaxOp>, 1}},
      {"LayerNormalization", {&Importer::layerNorm, 17}},
      {"SoftmaxCrossEntropyLoss", {&Importer::classLoss<true>, 12}},
      {"NegativeLogLikelihoodLoss", {&Importer::classLoss<false>, 12}},
      {"ReduceSum", {&Importer::reduce<ReduceSumOp>, 1}},
      {"ReduceMean", {&Importer::reduce<ReduceMeanOp>, 1}},
      {"ReduceMax", {&Importer::reduce<ReduceMaxOp>, 1}},
      {"ReduceMin", {&Importer::reduce<ReduceMaxOp>, 1}},
      {"Floor", {&Importer::rounding, 6}},
      {"Ceil", {&Importer::rounding, 6}},
      {"Round", {&Importer::rounding, 11}},
      {"Sign", {&Importer::rounding, 9}},
      {"OneHot", {&Importer::oneHot, 11}},
      {"NonZero", {&Importer::nonZero, 9}},
      {"ReduceSumSquare", {&Importer::reduce<ReduceSumSquareOp>, 1}},
      {"Gather", {&Importer::gather, 11}},
      {"Reshape", {&Importer::reshapeNode, 5}},
      {"Flatten", {&Importer::flatten, 1}},
      {"Transpose", {&Importer::transpose, 1}},
      {"Split", {&Importer::split, 2}},
      {"Slice", {&Importer::slice, 10}},
      {"Concat", {&Importer::concat, 4}},
      {"Unsqueeze", {&Importer::unsqueeze, 1}},
      {"Squeeze", {&Importer::squeeze, 1}},
      {"Expand", {&Importer::expand, 8}},
      {"Where", {&Importer::where, 9}},
      {"Trilu", {&Importer::trilu, 14}},
      {"Range", {&Importer::range, 11}},
      {"ConstantOfShape", {&Importer::constantOfShape, 9}},
      {"Shape", {&Importer::shape, 1}},
      {"Size", {&Importer::size, 1}},
      {"Constant", {&Importer::constant, 1}},
      {"Abs", {&Importer::unary<AbsOp>, 6}},
      {"Sin", {&Importer::unary<SinOp>, 7}},
      {"Cos", {&Importer::unary<CosOp>, 7}},
      {"CastLike", {&Importer::castLike, 15}},
      {"Mean", {&Importer::mean, 8}},
      {"ai.onnx.preview.training.Adam", {&Importer::trainingOptimizer, 1}},
      {"ai.onnx.preview.training.Adagrad",
       {&Importer::trainingOptimizer, 1}},
      {"ai.onnx.preview.training.Momentum",
       {&Importer::trainingOptimizer, 1}},
  };
  return table;
}

std::vector<std::pair<std::string, int64_t>> strata::supportedOnnxOps() {
  std::vector<std::pair<std::string, int64_t>> ops;
  for (const auto &entry : Importer::handlers())
    ops.push_back({entry.first, entry.second.minOpset});
  return ops;
}

//===----------------------------------------------------------------------===//
// Diagnostics and helpers
//===----------------------------------------------------------------------===//

std::string strata::importer::nodeLabel(const Node &node) {
  if (!node.name.empty())
    return "'" + node.name + "'";
  if (!node.outputs.empty())
    return "producing '" + node.outputs[0] + "'";
  return "<unnamed>";
}

Location Importer::nodeLoc(const Node &node) {
  std::string file = model_.path.empty() ? "<onnx>" : model_.path;
  Location fileLoc = FileLineColLoc::get(&context_, file, 0, 0);
  std::string name = node.name.empty() && !node.outputs.empty()
                         ? node.outputs[0]
                         : node.name;
  return NameLoc::get(StringAttr::get(&context_, name), fileLoc);
}

InFlightDiagnostic Importer::nodeError(const Node &node) {
  InFlightDiagnostic diag = emitError(nodeLoc(node));
  diag << "node " << nodeLabel(node) << " (" << node.opType << ", opset "
       << model_.opset << "): ";
  return diag;
}

Type Importer::elementType(int32_t dataType) {
  MLIRContext *ctx = &context_;
  switch (dataType) {
  case onnx::kFloat:
    return Float32Type::get(ctx);
  case onnx::kDouble:
    return Float64Type::get(ctx);
  case onnx::kFloat16:
    return Float16Type::get(ctx);
  case onnx::kBFloat16:
    return BFloat16Type::get(ctx);
  case onnx::kInt64:
    return IntegerType::get(ctx, 64);
  case onnx::kInt32:
    return IntegerType::get(ctx, 32);
  case onnx::kInt16:
    return IntegerType::get(ctx, 16);
  case onnx::kInt8:
    return IntegerType::get(ctx, 8);
  case onnx::kBool:
    return IntegerType::get(ctx, 1);
  case onnx::kUInt8:
    return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case onnx::kUInt16:
    return IntegerType::get(ctx, 16, IntegerType::Unsigned);
  case onnx::kUInt32:
    return IntegerType::get(ctx, 32, IntegerType::Unsigned);
  case onnx::kUInt64:
    return IntegerType::get(ctx, 64, IntegerType::Unsigned);
  default:
    return {};
  }
}

FailureOr<ElementsAttr> Importer::tensorAttr(const onnx::TensorData &t,
                                             Location loc, bool asResource) {
  Type et = elementType(t.dataType);
  if (!et)
    return emitError(loc) << "tensor '" << t.name
                          << "' has unsupported element type "
                          << onnx::dataTypeName(t.dataType);
  auto type = RankedTensorType::get(t.dims, et);
  ArrayRef<char> bytes(t.data, t.size);
  if (et.isInteger(1)) {
    SmallVector<bool> bools;
    for (char c : bytes)
      bools.push_back(c != 0);
    return ElementsAttr(DenseElementsAttr::get(type, bools));
  }
  if (!asResource) {
    bool detectedSplat = false;
    if (!DenseElementsAttr::isValidRawBuffer(type, bytes, detectedSplat))
      return emitError(loc) << "tensor '" << t.name << "' has invalid data";
    return ElementsAttr(DenseElementsAttr::getFromRawBuffer(type, bytes));
  }
  // A resource blob that refers to the data in place; the deleter keeps the
  // owner (parsed model or mapped file) alive as long as MLIR needs it.
  size_t align = onnx::dataTypeSize(t.dataType);
  AsmResourceBlob blob;
  if (reinterpret_cast<uintptr_t>(t.data) % align == 0) {
    std::shared_ptr<const void> owner = t.keepAlive;
    blob = AsmResourceBlob(
        bytes, align, [owner](void *, size_t, size_t) mutable { owner.reset(); },
        /*dataIsMutable=*/false);
  } else {
    blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, align);
  }
  return ElementsAttr(DenseResourceElementsAttr::get(
      type, t.name.empty() ? "tensor" : t.name, std::move(blob)));
}

Value Importer::input(const Node &node, size_t index) {
  if (index >= node.inputs.size() || node.inputs[index].empty())
    return {};
  return values_.lookup(node.inputs[index]);
}

LogicalResult Importer::requireInputs(const Node &node, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (i >= node.inputs.size() || node.inputs[i].empty())
      return nodeError(node) << "missing required input #" << i;
  }
  return success();
}

void Importer::define(const Node &node, size_t index, Value value) {
  if (index < node.outputs.size() && !node.outputs[index].empty())
    values_[node.outputs[index]] = value;
}

Shape Importer::shapeOf(Value v) {
  auto t = cast<ShapedType>(v.getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

Type Importer::elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

FailureOr<SmallVector<int64_t>> Importer::constInts(const Node &node,
                                                    size_t index,
                                                    const char *what) {
  Value v = input(node, index);
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) ||
      !isa<IntegerType>(attr.getElementType()))
    return nodeError(node)
           << what << " (input '" << node.inputs[index]
           << "') must be a compile-time integer constant; Strata needs "
              "static shapes (bind dynamic inputs with --input-shape)";
  // Every such list (a shape, axes, split sizes, slice bounds) has one
  // entry per dimension or output; a constant of millions is hostile.
  constexpr int64_t kMaxListEntries = 1024;
  if (attr.getNumElements() > kMaxListEntries)
    return nodeError(node) << what << " (input '" << node.inputs[index]
                           << "') has " << attr.getNumElements()
                           << " values; at most " << kMaxListEntries
                           << " are allowed";
  SmallVector<int64_t> result;
  for (const APInt &i : attr.getValues<APInt>())
    result.push_back(i.getSExtValue());
  return result;
}

/// Reads the axes of a reduction/squeeze: from input `inputIndex` when the
/// node has it, otherwise from the `axes` attribute; nullopt when neither.
std::optional<SmallVector<int64_t>>
Importer::axesOf(const Node &node, size_t inputIndex, LogicalResult &status) {
  status = success();
  if (input(node, inputIndex)) {
    FailureOr<SmallVector<int64_t>> axes = constInts(node, inputIndex, "axes");
    if (failed(axes)) {
      status = failure();
      return std::nullopt;
    }
    return *axes;
  }
  if (const onnx::Attribute *a = node.attribute("axes")) {
    if (a->kind != onnx::Attribute::Ints)
      wrongAttribute(*a, "a list of integers");
    return SmallVector<int64_t>(a->ints.begin(), a->ints.end());
  }
  return std::nullopt;
}

Value Importer::scalarConstant(Type elementType, double value, Location loc) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute attr;
  if (auto ft = dyn_cast<FloatType>(elementType)) {
    APFloat v(value);
    bool lost;
    v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    attr = DenseElementsAttr::get(type, v);
  } else {
    // Toward zero, saturating at the type's range, NaN as 0 (APFloat's
    // conversion): a cast of an out-of-range double would be undefined.
    unsigned bits = elementType.getIntOrFloatBitWidth();
    APSInt i(bits, /*isUnsigned=*/bits == 1);
    bool exact;
    APFloat(value).convertToInteger(i, APFloat::rmTowardZero, &exact);
    attr = DenseElementsAttr::get(type, APInt(i));
  }
  return builder_.create<ConstantOp>(loc, type, cast<TypedAttr>(attr));
}

int64_t Importer::intAttr(const Node &node, const char *name, int64_t dflt) {
  const onnx::Attribute *a = node.attribute(name);
  if (a && a->kind != onnx::Attribute::Int)
    wrongAttribute(*a, "an integer");
  return a && a->kind == onnx::Attribute::Int ? a->i : dflt;
}

float Importer::floatAttr(const Node &node, const char *name, float dflt) {
  const onnx::Attribute *a = node.attribute(name);
  // ONNX writes integral floats as floats; an INT here is a type error too.
  if (a && a->kind != onnx::Attribute::Float)
    wrongAttribute(*a, "a float");
  return a && a->kind == onnx::Attribute::Float ? a->f : dflt;
}

std::string Importer::stringAttr(const Node &node, const char *name,
                                 const std::string &dflt) {
  const onnx::Attribute *a = node.attribute(name);
  if (a && a->kind != onnx::Attribute::String)
    wrongAttribute(*a, "a string");
  return a && a->kind == onnx::Attribute::String ? a->s : dflt;
}

Value Importer::reshape(Value v, const Shape &shape, Location loc) {
  return builder_.createOrFold<ReshapeOp>(
      loc, tensorType(shape, elementTypeOf(v)), v);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename OpT>
LogicalResult Importer::binary(const Node &node) {
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
  bool compare = std::is_same_v<OpT, EqualOp> ||
                 std::is_same_v<OpT, LessOp> || std::is_same_v<OpT, GreaterOp>;
  Type et = compare ? builder_.getI1Type() : elementTypeOf(lhs);
  if ((std::is_same_v<OpT, AndOp> || std::is_same_v<OpT, OrOp>) &&
      !et.isInteger(1))
    return nodeError(node) << "operands must be bool";
  define(node, 0, builder_.createOrFold<OpT>(loc, tensorType(*shape, et), lhs,
                                             rhs));
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

template <typename OpT>
LogicalResult Importer::variadic(const Node &node) {
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

template <typename OpT>
LogicalResult Importer::unary(const Node &node) {
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
    return nodeError(node) << "a float Mod needs fmod=1";
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
         builder_.create<GeluOp>(
             nodeLoc(node), x.getType(), x,
             approximate == "tanh" ? builder_.getUnitAttr() : UnitAttr()));
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
    Value e = builder_.create<ExpOp>(
        loc, type, builder_.create<NegOp>(loc, type, abs));
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
    Value odd = builder_.createOrFold<EqualOp>(loc, bools, floorOf(half),
                                               half);
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

LogicalResult Importer::cumsum(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value x = input(node, 0);
  Shape shape = shapeOf(x);
  Type et = elementTypeOf(x);
  bool isFloat = isa<FloatType>(et);
  if (!isFloat && !et.isInteger(32) && !et.isInteger(64))
    return nodeError(node) << "input must be float, int32 or int64, not "
                           << et;
  FailureOr<SmallVector<int64_t>> axes = constInts(node, 1, "axis");
  if (failed(axes))
    return failure();
  std::optional<int64_t> axis =
      axes->size() == 1 ? normalizeAxis((*axes)[0], shape.size())
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
      APFloat fsum = APFloat::getZero(
          isFloat ? cast<FloatType>(et).getFloatSemantics()
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
      entries.push_back(isFloat ? Attribute(FloatAttr::get(et, counts(j, i)))
                                : Attribute(IntegerAttr::get(et, counts(j, i))));
  auto mType = tensorType({n, n}, et);
  Value m = builder_.create<ConstantOp>(
      loc, mType, DenseElementsAttr::get(mType, entries));
  Value y = builder_.create<MatMulOp>(loc, tensorType(moved, et), v, m);
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

/// Tile with constant repeats: x [d0, d1, ...] viewed as [1, d0, 1, d1,
/// ...], broadcast to [r0, d0, r1, d1, ...] and viewed as [r0 d0, r1 d1,
/// ...] -- ops that fold for a constant and that autodiff differentiates.
LogicalResult Importer::tile(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value x = input(node, 0);
  Shape shape = shapeOf(x);
  FailureOr<SmallVector<int64_t>> repeats = constInts(node, 1, "repeats");
  if (failed(repeats))
    return failure();
  if (repeats->size() != shape.size())
    return nodeError(node) << "has " << repeats->size()
                           << " repeats for rank " << shape.size();
  Shape spread, wide, out;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t r = (*repeats)[d], tiled;
    if (r < 0 || __builtin_mul_overflow(r, shape[d], &tiled))
      return nodeError(node) << "repeat " << r << " of dimension " << d
                             << " is negative or overflows";
    spread.insert(spread.end(), {1, shape[d]});
    wide.insert(wide.end(), {r, shape[d]});
    out.push_back(tiled);
  }
  if (!checkedNumElements(wide))
    return nodeError(node) << "the tiled tensor has more elements than int64 "
                              "can count";
  Location loc = nodeLoc(node);
  Type et = elementTypeOf(x);
  Value v = reshape(x, spread, loc);
  v = builder_.createOrFold<BroadcastOp>(loc, tensorType(wide, et), v);
  define(node, 0, reshape(v, out, loc));
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
  auto sqrt = [&](Value a) { return builder_.create<SqrtOp>(loc, a.getType(), a); };
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
      Value step = modeName == "standard"
                       ? vNew
                       : add(reg, mul(scalar(alpha), vNew));
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
      Value rate = builder_.create<SelectOp>(loc, tensorType({}, et),
                                             tPositive, adjusted, r);
      Value xNew = sub(x, mul(rate, div(vNew, hSqrt)));
      define(node, k, mul(scalar(1.0 - post), xNew));
      define(node, groups + k, vNew);
      define(node, 2 * groups + k, hNew);
    }
  }
  return success();
}

LogicalResult Importer::mean(const Node &node) {
  if (failed(variadic<AddOp>(node)))
    return failure();
  Value sum = values_.lookup(node.outputs[0]);
  if (!isa<FloatType>(elementTypeOf(sum)))
    return nodeError(node) << "inputs must be float tensors";
  int64_t count = llvm::count_if(node.inputs,
                                 [](const std::string &n) { return !n.empty(); });
  Location loc = nodeLoc(node);
  define(node, 0,
         builder_.createOrFold<DivOp>(
             loc, sum.getType(), sum,
             scalarConstant(elementTypeOf(sum), static_cast<double>(count),
                            loc)));
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
    bool zeroRatio = input(node, 1) &&
                     matchPattern(input(node, 1), m_Constant(&ratio)) &&
                     isa<FloatType>(ratio.getElementType()) &&
                     ratio.getNumElements() == 1 &&
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
           builder_.create<ConstantOp>(
               nodeLoc(node), maskType,
               DenseElementsAttr::get(maskType, true)));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions, reductions, normalisations
//===----------------------------------------------------------------------===//

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
  define(node, 0,
         builder_.create<MatMulOp>(nodeLoc(node),
                                   tensorType(*shape, elementTypeOf(a)), a, b));
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
  Value y = builder_.create<MatMulOp>(loc, type, a, b);
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

template <typename OpT>
LogicalResult Importer::softmax(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Shape shape = shapeOf(x);
  int64_t rank = shape.size();
  // Before opset 13 the input is seen as 2-D, [dims before axis, dims from
  // axis on] (axis 1 by default), and normalized over the second.
  bool flattened = model_.opset < 13;
  std::optional<int64_t> axis =
      normalizeAxis(intAttr(node, "axis", flattened ? 1 : -1), rank);
  if (!axis)
    return nodeError(node) << "axis out of range for rank " << rank;
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
  if (weights && (shapeOf(weights) != Shape{classes} ||
                  elementTypeOf(weights) != et))
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
    Value masked =
        builder_.createOrFold<SelectOp>(loc, tensorType(xs, et), onehot, v,
                                        zero);
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
  }
  else if (reduction == "mean")
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
  std::optional<int64_t> axis =
      normalizeAxis(intAttr(node, "axis", -1), shape.size());
  if (!axis)
    return nodeError(node) << "axis out of range for rank " << shape.size();
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
  Type stash = elementType(static_cast<int32_t>(intAttr(node, "stash_type", 1)));
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
  Value squared = builder_.create<MulOp>(loc, tensorType(shape, stash),
                                         centered, centered);
  Value var = builder_.create<ReduceMeanOp>(loc, statType, squared, axesAttr,
                                            builder_.getUnitAttr());
  Value shifted = builder_.create<AddOp>(loc, statType, var,
                                         scalarConstant(stash, epsilon, loc));
  Value root = builder_.create<SqrtOp>(loc, statType, shifted);
  define(node, 2, builder_.create<ReciprocalOp>(loc, statType, root));
  return success();
}

template <typename OpT>
LogicalResult Importer::reduce(const Node &node) {
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
        return nodeError(node) << "axis " << a << " out of range for rank "
                               << rank;
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
  Value r = builder_.create<OpT>(loc, tensorType(out, elementTypeOf(x)), x,
                                 builder_.getDenseI64ArrayAttr(normalized),
                                 keepdims ? builder_.getUnitAttr()
                                          : UnitAttr());
  if (min)
    r = builder_.createOrFold<NegOp>(loc, r.getType(), r);
  define(node, 0, r);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult Importer::gather(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value data = input(node, 0), indices = input(node, 1);
  Type it = elementTypeOf(indices);
  if (!it.isInteger(32) && !it.isInteger(64))
    return nodeError(node) << "indices must be int32 or int64";
  Shape shape = shapeOf(data);
  std::optional<int64_t> axis =
      normalizeAxis(intAttr(node, "axis", 0), shape.size());
  if (!axis)
    return nodeError(node) << "axis out of range for rank " << shape.size();
  Shape out = gatherShape(shape, shapeOf(indices), *axis);
  define(node, 0,
         builder_.createOrFold<GatherOp>(
             nodeLoc(node), tensorType(out, elementTypeOf(data)), data,
             indices, builder_.getI64IntegerAttr(*axis)));
  return success();
}

LogicalResult Importer::reshapeNode(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> target = constInts(node, 1, "shape");
  if (failed(target))
    return failure();
  Value x = input(node, 0);
  Shape in = shapeOf(x);
  bool allowZero = intAttr(node, "allowzero", 0) != 0;
  Shape out;
  int64_t inferred = -1;
  for (size_t i = 0; i < target->size(); ++i) {
    int64_t d = (*target)[i];
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return nodeError(node) << "shape entry " << i
                               << " copies a dimension the input lacks";
      d = in[i];
    }
    if (d == -1) {
      if (inferred >= 0)
        return nodeError(node) << "shape has more than one -1";
      inferred = i;
      out.push_back(1);
      continue;
    }
    if (d < 0)
      return nodeError(node) << "invalid shape entry " << d;
    out.push_back(d);
  }
  // The product of the given entries (the -1 counts as 1), checked.
  int64_t known = numElements(out);
  if (known < 0)
    return nodeError(node) << "the target shape has more than 2^63 elements";
  int64_t total = numElements(in);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return nodeError(node) << "cannot infer the -1 entry: " << total
                             << " elements do not divide by " << known;
    out[inferred] = total / known;
  }
  if (numElements(out) != total)
    return nodeError(node) << "cannot reshape " << x.getType() << " ("
                           << total << " elements) to "
                           << tensorType(out, elementTypeOf(x));
  define(node, 0, reshape(x, out, nodeLoc(node)));
  return success();
}

LogicalResult Importer::flatten(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Shape in = shapeOf(x);
  int64_t rank = in.size();
  int64_t axis = intAttr(node, "axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return nodeError(node) << "axis out of range for rank " << rank;
  int64_t outer = numElements(Shape(in.begin(), in.begin() + axis));
  int64_t inner = numElements(Shape(in.begin() + axis, in.end()));
  define(node, 0, reshape(x, {outer, inner}, nodeLoc(node)));
  return success();
}

LogicalResult Importer::transpose(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Shape in = shapeOf(x);
  SmallVector<int64_t> perm;
  if (const onnx::Attribute *a = node.attribute("perm")) {
    if (a->kind != onnx::Attribute::Ints)
      wrongAttribute(*a, "a list of integers");
    perm.assign(a->ints.begin(), a->ints.end());
  } else {
    for (int64_t d = in.size(); d-- > 0;)
      perm.push_back(d);
  }
  if (perm.size() != in.size())
    return nodeError(node) << "perm has " << perm.size()
                           << " entries for rank " << in.size();
  Shape out;
  std::vector<bool> seen(in.size(), false);
  for (int64_t &p : perm) {
    std::optional<int64_t> n = normalizeAxis(p, in.size());
    if (!n || seen[*n])
      return nodeError(node) << "perm is not a permutation";
    seen[*n] = true;
    p = *n;
    out.push_back(in[p]);
  }
  define(node, 0,
         builder_.createOrFold<TransposeOp>(
             nodeLoc(node), tensorType(out, elementTypeOf(x)), x,
             builder_.getDenseI64ArrayAttr(perm)));
  return success();
}

LogicalResult Importer::split(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Shape in = shapeOf(x);
  std::optional<int64_t> axis =
      normalizeAxis(intAttr(node, "axis", 0), in.size());
  if (!axis)
    return nodeError(node) << "axis out of range for rank " << in.size();
  int64_t dim = in[*axis];
  int64_t outputs = node.outputs.size();
  if (outputs == 0)
    return nodeError(node) << "has no outputs";
  SmallVector<int64_t> sizes;
  if (input(node, 1)) {
    FailureOr<SmallVector<int64_t>> s = constInts(node, 1, "split");
    if (failed(s))
      return failure();
    sizes = *s;
  } else if (const onnx::Attribute *a = node.attribute("split")) {
    if (a->kind != onnx::Attribute::Ints)
      wrongAttribute(*a, "a list of integers");
    sizes.assign(a->ints.begin(), a->ints.end());
  } else if (const onnx::Attribute *a = node.attribute("num_outputs")) {
    if (a->kind != onnx::Attribute::Int)
      wrongAttribute(*a, "an integer");
    int64_t n = a->i;
    if (n <= 0 || n != outputs)
      return nodeError(node) << "num_outputs " << n << " does not match the "
                             << outputs << " outputs";
    int64_t chunk = (dim + n - 1) / n;
    for (int64_t k = 0; k < n; ++k)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - k * chunk)));
  } else {
    if (dim % outputs != 0)
      return nodeError(node) << "dimension " << dim << " does not split into "
                             << outputs << " equal parts";
    sizes.assign(outputs, dim / outputs);
  }
  if (static_cast<int64_t>(sizes.size()) != outputs)
    return nodeError(node) << sizes.size() << " split sizes for " << outputs
                           << " outputs";
  FailureOr<SmallVector<Value>> parts = splitAlong(node, x, *axis, sizes);
  if (failed(parts))
    return failure();
  for (int64_t k = 0; k < outputs; ++k)
    define(node, k, (*parts)[k]);
  return success();
}

FailureOr<SmallVector<Value>> Importer::splitAlong(const Node &node, Value x,
                                                   int64_t axis,
                                                   ArrayRef<int64_t> sizes) {
  Shape in = shapeOf(x);
  int64_t sum = 0;
  for (int64_t s : sizes)
    if (s < 0 || __builtin_add_overflow(sum, s, &sum))
      return nodeError(node) << "invalid split size " << s;
  if (sum != in[axis])
    return nodeError(node) << "split sizes add up to " << sum
                           << ", the dimension is " << in[axis];
  Location loc = nodeLoc(node);
  SmallVector<Value> parts;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    Shape out = in;
    out[axis] = size;
    SmallVector<int64_t> offsets(in.size(), 0), strides(in.size(), 1);
    offsets[axis] = size == 0 ? 0 : offset;
    parts.push_back(builder_.createOrFold<SliceOp>(
        loc, tensorType(out, elementTypeOf(x)), x,
        builder_.getDenseI64ArrayAttr(offsets),
        builder_.getDenseI64ArrayAttr(strides)));
    offset += size;
  }
  return parts;
}

FailureOr<Shape> Importer::concatShape(const Node &node,
                                       ArrayRef<Value> parts, int64_t axis) {
  Shape out = shapeOf(parts[0]);
  out[axis] = 0;
  for (Value v : parts) {
    Shape s = shapeOf(v);
    if (s.size() != out.size() || elementTypeOf(v) != elementTypeOf(parts[0]))
      return nodeError(node) << "inputs differ in rank or element type";
    for (size_t d = 0; d < s.size(); ++d)
      if (static_cast<int64_t>(d) != axis && s[d] != out[d])
        return nodeError(node) << "inputs differ in dimension " << d;
    out[axis] += s[axis];
  }
  return out;
}

LogicalResult Importer::slice(const Node &node) {
  if (failed(requireInputs(node, 3)))
    return failure();
  Value x = input(node, 0);
  Shape in = shapeOf(x);
  int64_t rank = in.size();
  FailureOr<SmallVector<int64_t>> starts = constInts(node, 1, "starts");
  if (failed(starts))
    return failure();
  FailureOr<SmallVector<int64_t>> ends = constInts(node, 2, "ends");
  if (failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps;
  if (input(node, 3)) {
    FailureOr<SmallVector<int64_t>> a = constInts(node, 3, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (input(node, 4)) {
    FailureOr<SmallVector<int64_t>> s = constInts(node, 4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return nodeError(node) << "starts, ends, axes and steps differ in length";
  SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
  Shape out = in;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts->size(); ++i) {
    std::optional<int64_t> axis = normalizeAxis(axes[i], rank);
    if (!axis || seen[*axis])
      return nodeError(node) << "invalid or repeated axis " << axes[i];
    seen[*axis] = true;
    int64_t dim = in[*axis], step = steps[i];
    if (step == 0)
      return nodeError(node) << "step is zero";
    auto clampTo = [](int64_t v, int64_t lo, int64_t hi) {
      return std::max(lo, std::min(v, hi));
    };
    // ONNX: negative starts/ends count from the end, then clamp.
    int64_t start = (*starts)[i], end = (*ends)[i];
    if (start < 0)
      start += dim;
    if (end < 0)
      end = end < -dim ? -1 : end + dim;
    int64_t count;
    if (step > 0) {
      start = clampTo(start, 0, dim);
      end = clampTo(end, 0, dim);
      count = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = clampTo(start, 0, dim - 1);
      end = clampTo(end, -1, dim - 1);
      count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
    }
    out[*axis] = count;
    offsets[*axis] = count == 0 ? 0 : start;
    strides[*axis] = step;
  }
  define(node, 0,
         builder_.createOrFold<SliceOp>(
             nodeLoc(node), tensorType(out, elementTypeOf(x)), x,
             builder_.getDenseI64ArrayAttr(offsets),
             builder_.getDenseI64ArrayAttr(strides)));
  return success();
}

LogicalResult Importer::concat(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  SmallVector<Value> inputs;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (Value v = input(node, i))
      inputs.push_back(v);
  std::optional<int64_t> axis =
      normalizeAxis(intAttr(node, "axis", 0), shapeOf(inputs[0]).size());
  if (!axis)
    return nodeError(node) << "axis out of range for rank "
                           << shapeOf(inputs[0]).size();
  FailureOr<Shape> out = concatShape(node, inputs, *axis);
  if (failed(out))
    return failure();
  define(node, 0,
         builder_.createOrFold<ConcatOp>(
             nodeLoc(node), tensorType(*out, elementTypeOf(inputs[0])),
             inputs, builder_.getI64IntegerAttr(*axis)));
  return success();
}

LogicalResult Importer::unsqueeze(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  LogicalResult status = success();
  std::optional<SmallVector<int64_t>> axes = axesOf(node, 1, status);
  if (failed(status))
    return failure();
  if (!axes)
    return nodeError(node) << "axes are required";
  Value x = input(node, 0);
  Shape in = shapeOf(x);
  int64_t outRank = in.size() + axes->size();
  std::vector<bool> isNew(outRank, false);
  for (int64_t a : *axes) {
    std::optional<int64_t> n = normalizeAxis(a, outRank);
    if (!n || isNew[*n])
      return nodeError(node) << "invalid or repeated axis " << a;
    isNew[*n] = true;
  }
  Shape out;
  size_t next = 0;
  for (int64_t d = 0; d < outRank; ++d)
    out.push_back(isNew[d] ? 1 : in[next++]);
  define(node, 0, reshape(x, out, nodeLoc(node)));
  return success();
}

LogicalResult Importer::squeeze(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  LogicalResult status = success();
  std::optional<SmallVector<int64_t>> axes = axesOf(node, 1, status);
  if (failed(status))
    return failure();
  Value x = input(node, 0);
  Shape in = shapeOf(x);
  std::vector<bool> drop(in.size(), false);
  if (axes) {
    for (int64_t a : *axes) {
      std::optional<int64_t> n = normalizeAxis(a, in.size());
      if (!n)
        return nodeError(node) << "axis " << a << " out of range";
      if (in[*n] != 1)
        return nodeError(node) << "cannot squeeze dimension " << *n
                               << " of size " << in[*n];
      drop[*n] = true;
    }
  } else {
    for (size_t d = 0; d < in.size(); ++d)
      drop[d] = in[d] == 1;
  }
  Shape out;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d])
      out.push_back(in[d]);
  define(node, 0, reshape(x, out, nodeLoc(node)));
  return success();
}

LogicalResult Importer::expand(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  FailureOr<SmallVector<int64_t>> target = constInts(node, 1, "shape");
  if (failed(target))
    return failure();
  Value x = input(node, 0);
  std::optional<Shape> out =
      broadcastShapes({shapeOf(x), Shape(target->begin(), target->end())});
  if (!out)
    return nodeError(node) << "input " << x.getType()
                           << " does not broadcast to the requested shape";
  define(node, 0,
         builder_.createOrFold<BroadcastOp>(
             nodeLoc(node), tensorType(*out, elementTypeOf(x)), x));
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

LogicalResult Importer::trilu(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  if (shapeOf(x).size() < 2)
    return nodeError(node) << "input must have rank >= 2";
  int64_t k = 0;
  if (input(node, 1)) {
    FailureOr<SmallVector<int64_t>> kv = constInts(node, 1, "k");
    if (failed(kv))
      return failure();
    if (kv->size() != 1)
      return nodeError(node) << "k must be a scalar";
    k = (*kv)[0];
  }
  bool upper = intAttr(node, "upper", 1) != 0;
  define(node, 0,
         builder_.createOrFold<TriluOp>(
             nodeLoc(node), x.getType(), x,
             upper ? builder_.getUnitAttr() : UnitAttr(),
             builder_.getI64IntegerAttr(k)));
  return success();
}

//===----------------------------------------------------------------------===//
// Ops evaluated at import: shapes, ranges, constants
//===----------------------------------------------------------------------===//

LogicalResult Importer::range(const Node &node) {
  if (failed(requireInputs(node, 3)))
    return failure();
  DenseElementsAttr attrs[3];
  const char *names[3] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    if (!matchPattern(input(node, i), m_Constant(&attrs[i])) ||
        attrs[i].getNumElements() != 1)
      return nodeError(node) << names[i]
                             << " must be a compile-time scalar constant";
  }
  Type et = attrs[0].getElementType();
  if (attrs[1].getElementType() != et || attrs[2].getElementType() != et)
    return nodeError(node) << "start, limit and delta have different types ("
                           << et << ", " << attrs[1].getElementType() << ", "
                           << attrs[2].getElementType() << ")";
  Location loc = nodeLoc(node);
  // The folded sequence is materialised: bound it as other folds are.
  auto tooLong = [&](double n) {
    return n > static_cast<double>(kMaxRangeElements);
  };
  if (auto ft = dyn_cast<FloatType>(et)) {
    double start = attrs[0].getSplatValue<APFloat>().convertToDouble();
    double limit = attrs[1].getSplatValue<APFloat>().convertToDouble();
    double delta = attrs[2].getSplatValue<APFloat>().convertToDouble();
    if (delta == 0)
      return nodeError(node) << "delta is zero";
    double count = std::ceil((limit - start) / delta);
    if (!std::isfinite(count) || tooLong(count))
      return nodeError(node) << "the range [" << start << ", " << limit
                             << ") by " << delta << " has more than "
                             << kMaxRangeElements << " elements";
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
    auto type = tensorType({n}, et);
    DenseElementsAttr attr;
    if (ft.isF32()) {
      std::vector<float> values(n);
      for (int64_t k = 0; k < n; ++k)
        values[k] = static_cast<float>(start + k * delta);
      attr = DenseElementsAttr::get(type, ArrayRef<float>(values));
    } else {
      SmallVector<APFloat> values;
      for (int64_t k = 0; k < n; ++k) {
        APFloat v(start + k * delta);
        bool lost;
        v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                  &lost);
        values.push_back(v);
      }
      attr = DenseElementsAttr::get(type, values);
    }
    define(node, 0, builder_.create<ConstantOp>(loc, type, attr));
    return success();
  }
  int64_t start = attrs[0].getSplatValue<APInt>().getSExtValue();
  int64_t limit = attrs[1].getSplatValue<APInt>().getSExtValue();
  int64_t delta = attrs[2].getSplatValue<APInt>().getSExtValue();
  if (delta == 0)
    return nodeError(node) << "delta is zero";
  // In 128 bits: limit - start overflows int64 for extreme values.
  __int128 span = static_cast<__int128>(limit) - start;
  __int128 count128 = (span + delta + (delta > 0 ? -1 : 1)) / delta;
  if (count128 > kMaxRangeElements)
    return nodeError(node) << "the range [" << start << ", " << limit
                           << ") by " << delta << " has more than "
                           << kMaxRangeElements << " elements";
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count128));
  auto type = tensorType({n}, et);
  DenseElementsAttr attr;
  // Plain arrays for the usual types: one APInt per element is slow for
  // the millions of positions a long context folds.
  // Element k is start + k * delta, which lies between start and limit;
  // the product alone may not fit int64, so compute in 128 bits.
  auto element = [&](int64_t k) {
    return static_cast<int64_t>(static_cast<__int128>(start) +
                                static_cast<__int128>(k) * delta);
  };
  if (et.isInteger(64) || et.isInteger(32)) {
    std::vector<int64_t> wide(n);
    for (int64_t k = 0; k < n; ++k)
      wide[k] = element(k);
    if (et.isInteger(64)) {
      attr = DenseElementsAttr::get(type, ArrayRef<int64_t>(wide));
    } else {
      std::vector<int32_t> narrow(wide.begin(), wide.end());
      attr = DenseElementsAttr::get(type, ArrayRef<int32_t>(narrow));
    }
  } else {
    SmallVector<APInt> values;
    for (int64_t k = 0; k < n; ++k)
      values.push_back(APInt(et.getIntOrFloatBitWidth(), element(k), true));
    attr = DenseElementsAttr::get(type, values);
  }
  define(node, 0, builder_.create<ConstantOp>(loc, type, attr));
  return success();
}

LogicalResult Importer::constantOfShape(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = constInts(node, 0, "shape");
  if (failed(shape))
    return failure();
  for (int64_t d : *shape)
    if (d < 0)
      return nodeError(node) << "negative dimension " << d;
  Location loc = nodeLoc(node);
  Attribute splat;
  if (const onnx::Attribute *a = node.attribute("value")) {
    if (a->kind != onnx::Attribute::Tensor || a->t.numElements() != 1)
      return nodeError(node) << "value must be a one-element tensor";
    FailureOr<ElementsAttr> v = tensorAttr(a->t, loc, false);
    if (failed(v))
      return failure();
    auto dense = cast<DenseElementsAttr>(*v);
    auto type = tensorType(Shape(shape->begin(), shape->end()),
                           dense.getElementType());
    splat = dense.resizeSplat(type);
    if (!dense.isSplat()) // A one-element tensor is always a splat.
      return nodeError(node) << "value must be a one-element tensor";
    define(node, 0,
           builder_.create<ConstantOp>(loc, type, cast<TypedAttr>(splat)));
    return success();
  }
  auto type =
      tensorType(Shape(shape->begin(), shape->end()), builder_.getF32Type());
  define(node, 0,
         builder_.create<ConstantOp>(loc, type,
                                     DenseElementsAttr::get(type, 0.0f)));
  return success();
}

LogicalResult Importer::shape(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Shape in = shapeOf(input(node, 0));
  int64_t rank = in.size();
  int64_t start = intAttr(node, "start", 0);
  int64_t end = intAttr(node, "end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::max<int64_t>(0, std::min(start, rank));
  end = std::max<int64_t>(start, std::min(end, rank));
  SmallVector<int64_t> dims(in.begin() + start, in.begin() + end);
  auto type = tensorType({static_cast<int64_t>(dims.size())},
                         builder_.getI64Type());
  define(node, 0,
         builder_.create<ConstantOp>(
             nodeLoc(node), type,
             DenseElementsAttr::get(type, ArrayRef<int64_t>(dims))));
  return success();
}

LogicalResult Importer::size(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  auto type = tensorType({}, builder_.getI64Type());
  define(node, 0,
         builder_.create<ConstantOp>(
             nodeLoc(node), type,
             DenseElementsAttr::get(type, numElements(shapeOf(input(node, 0))))));
  return success();
}

LogicalResult Importer::constant(const Node &node) {
  Location loc = nodeLoc(node);
  if (node.attributes.size() != 1)
    return nodeError(node) << "expected exactly one value attribute";
  const onnx::Attribute &a = node.attributes[0];
  TypedAttr value;
  if (a.name == "value" && a.kind == onnx::Attribute::Tensor) {
    FailureOr<ElementsAttr> v = tensorAttr(a.t, loc, false);
    if (failed(v))
      return failure();
    value = cast<TypedAttr>(*v);
  } else if (a.name == "value_float") {
    auto type = tensorType({}, builder_.getF32Type());
    value = DenseElementsAttr::get(type, a.f);
  } else if (a.name == "value_floats") {
    auto type = tensorType({static_cast<int64_t>(a.floats.size())},
                           builder_.getF32Type());
    value = DenseElementsAttr::get(type, ArrayRef<float>(a.floats));
  } else if (a.name == "value_int") {
    auto type = tensorType({}, builder_.getI64Type());
    value = DenseElementsAttr::get(type, a.i);
  } else if (a.name == "value_ints") {
    auto type = tensorType({static_cast<int64_t>(a.ints.size())},
                           builder_.getI64Type());
    value = DenseElementsAttr::get(type, ArrayRef<int64_t>(a.ints));
  } else {
    return nodeError(node) << "unsupported constant attribute '" << a.name
                           << "'";
  }
  define(node, 0, builder_.create<ConstantOp>(loc, value.getType(), value));
  return success();
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

/// Calls `fn` on every node of `nodes` and of the sub-graphs in their
/// attributes (Loop bodies, If branches), outer nodes first.
static void forEachNode(const std::vector<Node> &nodes,
                        const std::function<void(const Node &)> &fn) {
  for (const Node &node : nodes) {
    fn(node);
    for (const onnx::Attribute &a : node.attributes)
      if (a.g)
        forEachNode(a.g->nodes, fn);
  }
}

LogicalResult Importer::checkSupported() {
  Location fileLoc = FileLineColLoc::get(
      &context_, model_.path.empty() ? "<onnx>" : model_.path, 0, 0);
  bool usesDefaultDomain = llvm::any_of(model_.nodes, [](const Node &n) {
    return n.domain.empty() || n.domain == "ai.onnx";
  });
  if (usesDefaultDomain && model_.opset == 0)
    return emitError(fileLoc) << "the model imports no version of the "
                                 "default (ai.onnx) opset";
  if (usesDefaultDomain &&
      (model_.opset < kMinOpset || model_.opset > kMaxOpset))
    return emitError(fileLoc)
           << "the model uses opset " << model_.opset
           << "; Strata imports opsets " << kMinOpset << " through "
           << kMaxOpset << " (convert it with onnx.version_converter)";
  // Which values depend only on constants and shapes (bound at import):
  // an unsupported op there could in principle be evaluated at compile
  // time; one on the data path needs a kernel. The message says which.
  llvm::StringSet<> fixed;
  for (const onnx::TensorData &t : model_.initializers)
    if (!isa_and_nonnull<FloatType>(elementType(t.dataType)))
      fixed.insert(t.name);
  for (const auto &entry : options_.inputValues)
    fixed.insert(entry.first);
  for (const Node &node : model_.nodes) {
    bool isFixed = node.opType == "Shape" || node.opType == "Size" ||
                   llvm::all_of(node.inputs, [&](const std::string &in) {
                     return in.empty() || fixed.contains(in);
                   });
    if (isFixed)
      for (const std::string &out : node.outputs)
        fixed.insert(out);
  }
  auto onDataPath = [&](const Node &node) {
    return llvm::any_of(node.inputs, [&](const std::string &in) {
      return !in.empty() && !fixed.contains(in);
    });
  };
  // Group the unsupported nodes by op type so one message lists them all.
  std::map<std::string, std::vector<std::string>> unsupported;
  forEachNode(model_.nodes, [&](const Node &node) {
    std::string key = handlerKey(node);
    auto handler = handlers().find(key);
    if (handler != handlers().end() &&
        versionOf(node) >= handler->second.minOpset)
      return;
    if (handler != handlers().end())
      key += " (supported from opset " +
             std::to_string(handler->second.minOpset) + ")";
    key += onDataPath(node) ? "|on the data path"
                            : "|computing only from constants and shapes";
    unsupported[key].push_back(nodeLabel(node));
  });
  if (unsupported.empty())
    return success();
  InFlightDiagnostic diag = emitError(fileLoc);
  std::set<std::string> opTypes;
  for (const auto &entry : unsupported)
    opTypes.insert(entry.first.substr(0, entry.first.find('|')));
  diag << opTypes.size() << " unsupported op type"
       << (opTypes.size() == 1 ? "" : "s") << " in the model (opset "
       << model_.opset << "):";
  for (const auto &[key, nodes] : unsupported) {
    size_t bar = key.find('|');
    diag << "\n  " << key.substr(0, bar) << " (opset " << model_.opset
         << "): " << nodes.size() << " node" << (nodes.size() == 1 ? "" : "s")
         << " " << key.substr(bar + 1) << ": ";
    for (size_t i = 0; i < nodes.size() && i < 5; ++i)
      diag << (i ? ", " : "") << nodes[i];
    if (nodes.size() > 5)
      diag << ", ...";
  }
  return failure();
}

LogicalResult Importer::declareInputs(SmallVectorImpl<Type> &argTypes,
                                      std::vector<std::string> &argNames) {
  llvm::StringSet<> initializerNames;
  for (const onnx::TensorData &t : model_.initializers)
    initializerNames.insert(t.name);
  Location fileLoc = FileLineColLoc::get(
      &context_, model_.path.empty() ? "<onnx>" : model_.path, 0, 0);
  // Every binding must name an input or a symbolic dimension of one.
  llvm::StringSet<> bindable;
  for (const auto &entry : options_.inputValues) {
    bool found = llvm::any_of(model_.inputs, [&](const onnx::ValueInfo &in) {
      return in.name == entry.first && !initializerNames.contains(in.name);
    });
    if (!found)
      return emitError(fileLoc) << "--input-value names '" << entry.first
                                << "', which is not a graph input";
  }
  for (const onnx::ValueInfo &in : model_.inputs) {
    if (initializerNames.contains(in.name))
      continue;
    bindable.insert(in.name);
    for (const onnx::ValueInfo::Dim &dim : in.dims)
      if (!dim.param.empty())
        bindable.insert(dim.param);
  }
  for (const auto &entry : options_.inputShapes)
    if (!bindable.contains(entry.first))
      return emitError(fileLoc)
             << "--input-shape names '" << entry.first
             << "', which is neither a graph input nor a symbolic dimension "
                "of one";
  for (const onnx::ValueInfo &in : model_.inputs) {
    // Before IR version 4 initializers were also listed as inputs.
    if (initializerNames.contains(in.name) ||
        options_.inputValues.count(in.name))
      continue;
    Type et = elementType(in.dataType);
    if (!et)
      return emitError(fileLoc)
             << "input '" << in.name << "' has unsupported element type "
             << onnx::dataTypeName(in.dataType);
    if (!in.hasShape)
      return emitError(fileLoc) << "input '" << in.name
                                << "' has no shape; give one with "
                                   "--input-shape "
                                << in.name << "=D0xD1x...";
    auto given = options_.inputShapes.find(in.name);
    Shape shape;
    if (given != options_.inputShapes.end()) {
      if (given->second.size() != in.dims.size())
        return emitError(fileLoc)
               << "--input-shape for '" << in.name << "' has rank "
               << given->second.size() << ", the model's input has rank "
               << in.dims.size();
      for (size_t d = 0; d < in.dims.size(); ++d)
        if (in.dims[d].value >= 0 && in.dims[d].value != given->second[d])
          return emitError(fileLoc)
                 << "--input-shape for '" << in.name << "': dimension " << d
                 << " is fixed to " << in.dims[d].value << " by the model";
      shape.assign(given->second.begin(), given->second.end());
    } else {
      std::vector<std::string> unbound;
      for (const onnx::ValueInfo::Dim &dim : in.dims) {
        if (dim.value >= 0) {
          shape.push_back(dim.value);
          continue;
        }
        auto byName = options_.inputShapes.find(dim.param);
        if (!dim.param.empty() && byName != options_.inputShapes.end() &&
            byName->second.size() == 1) {
          shape.push_back(byName->second[0]);
          continue;
        }
        unbound.push_back(dim.param.empty() ? "?" : dim.param);
        shape.push_back(1);
      }
      if (!unbound.empty()) {
        InFlightDiagnostic diag = emitError(fileLoc);
        diag << "input '" << in.name << "' has dynamic dimensions [";
        for (size_t i = 0; i < unbound.size(); ++i)
          diag << (i ? ", " : "") << unbound[i];
        diag << "]; bind them with --input-shape " << in.name
             << "=D0xD1x... (e.g. --input-shape " << in.name << "=";
        for (size_t d = 0; d < in.dims.size(); ++d)
          diag << (d ? "x" : "")
               << (in.dims[d].value >= 0 ? in.dims[d].value : 4);
        diag << ")";
        return failure();
      }
    }
    argTypes.push_back(tensorType(shape, et));
    argNames.push_back(in.name);
  }
  return success();
}

LogicalResult Importer::importInitializer(const onnx::TensorData &t) {
  Location loc = NameLoc::get(
      StringAttr::get(&context_, t.name),
      FileLineColLoc::get(&context_,
                          model_.path.empty() ? "<onnx>" : model_.path, 0, 0));
  Type et = elementType(t.dataType);
  if (!et)
    return emitError(loc) << "initializer '" << t.name
                          << "' has unsupported element type "
                          << onnx::dataTypeName(t.dataType);
  bool isFloat = isa<FloatType>(et);
  FailureOr<ElementsAttr> value = tensorAttr(t, loc, /*asResource=*/isFloat);
  if (failed(value))
    return failure();
  auto type = tensorType(Shape(t.dims.begin(), t.dims.end()), et);
  if (!isFloat) {
    values_[t.name] =
        builder_.create<ConstantOp>(loc, type, cast<TypedAttr>(*value));
    return success();
  }
  bool frozen = llvm::any_of(
      freeze_, [&](const llvm::GlobPattern &g) { return g.match(t.name); });
  values_[t.name] = builder_.create<ParamOp>(
      loc, type, builder_.getStringAttr(t.name),
      frozen ? UnitAttr() : builder_.getUnitAttr(), *value);
  return success();
}

LogicalResult Importer::importNodes(const std::vector<Node> &nodes) {
  for (const Node &node : nodes)
    if (failed(importNode(node)))
      return failure();
  return success();
}

LogicalResult Importer::importNode(const Node &node) {
  bool sequencesAllowed = takesSequences(node.opType);
  for (const std::string &name : node.inputs) {
    if (name.empty())
      continue;
    if (!isDefined(name))
      return nodeError(node) << "input '" << name
                             << "' is not produced by any earlier node, "
                                "initializer or graph input";
    if (!sequencesAllowed && sequences_.count(name))
      return nodeError(node) << "input '" << name << "' is a sequence; "
                             << node.opType << " takes tensors";
  }
  const Handler &handler = handlers().at(handlerKey(node));
  attributeError_.clear();
  LogicalResult status = (this->*handler.fn)(node);
  if (!attributeError_.empty())
    return nodeError(node) << attributeError_;
  return status;
}

LogicalResult Importer::finishOutputs(func::FuncOp func) {
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const onnx::ValueInfo &out : model_.outputs) {
    Value v = values_.lookup(out.name);
    if (!v)
      return emitError(func.getLoc())
             << "graph output '" << out.name << "' is never computed";
    auto type = cast<RankedTensorType>(v.getType());
    if (out.hasShape && out.dims.size() == static_cast<size_t>(type.getRank()))
      for (size_t d = 0; d < out.dims.size(); ++d)
        if (out.dims[d].value >= 0 && out.dims[d].value != type.getDimSize(d))
          return emitError(func.getLoc())
                 << "graph output '" << out.name << "' is declared with "
                 << "dimension " << d << " = " << out.dims[d].value
                 << " but computes to " << type;
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  builder_.create<func::ReturnOp>(func.getLoc(), results);
  func.setFunctionType(builder_.getFunctionType(
      func.getFunctionType().getInputs(), resultTypes));
  for (size_t i = 0; i < model_.outputs.size(); ++i)
    func.setResultAttr(i, "graph.name",
                       builder_.getStringAttr(model_.outputs[i].name));
  return success();
}

/// Every tensor of the imported graph has a size the rest of the compiler
/// and the runtime can count in int64 bytes, with room to add them up.
LogicalResult Importer::checkSizes(func::FuncOp func) {
  auto check = [&](Value v, Location loc, const std::string &what) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape())
      return success();
    int64_t n = graph::numElements(Shape(type.getShape()));
    unsigned bits = type.getElementType().isIntOrFloat()
                        ? type.getElementType().getIntOrFloatBitWidth()
                        : 64;
    int64_t bytes = 0;
    if (n < 0 || __builtin_mul_overflow(n, int64_t((bits + 7) / 8), &bytes) ||
        bytes > kMaxTensorBytes)
      return LogicalResult(emitError(loc)
                           << what << " " << type
                           << " is larger than Strata supports for one tensor "
                              "(2^48 bytes)");
    return success();
  };
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    std::string name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "graph.name")
            .getValue()
            .str();
    (void)type;
    if (failed(check(arg, func.getLoc(), "input '" + name + "'")))
      return failure();
  }
  WalkResult walk = func.walk([&](Operation *op) {
    for (Value r : op->getResults())
      if (failed(check(r, op->getLoc(), "the result of " +
                                            op->getName().getStringRef().str())))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

OwningOpRef<ModuleOp> Importer::run() {
  context_.loadDialect<GraphDialect, func::FuncDialect>();
  for (const std::string &glob : options_.freezeGlobs) {
    llvm::Expected<llvm::GlobPattern> pattern = llvm::GlobPattern::create(glob);
    if (!pattern) {
      emitError(UnknownLoc::get(&context_))
          << "invalid --freeze pattern '" << glob
          << "': " << llvm::toString(pattern.takeError());
      return nullptr;
    }
    freeze_.push_back(std::move(*pattern));
  }
  if (failed(checkSupported()))
    return nullptr;
  forEachNode(model_.nodes, [&](const Node &node) {
    for (const std::string &name : node.inputs)
      consumed_.insert(name);
    for (const onnx::Attribute &a : node.attributes)
      if (a.g)
        for (const onnx::ValueInfo &out : a.g->outputs)
          consumed_.insert(out.name);
  });
  for (const onnx::ValueInfo &out : model_.outputs)
    consumed_.insert(out.name);

  Location fileLoc = FileLineColLoc::get(
      &context_, model_.path.empty() ? "<onnx>" : model_.path, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  SmallVector<Type> argTypes;
  std::vector<std::string> argNames;
  if (failed(declareInputs(argTypes, argNames)))
    return nullptr;
  builder_.setInsertionPointToEnd(module->getBody());
  auto func = builder_.create<func::FuncOp>(
      fileLoc, "main", builder_.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  for (size_t i = 0; i < argNames.size(); ++i) {
    values_[argNames[i]] = entry->getArgument(i);
    func.setArgAttr(i, "graph.name", builder_.getStringAttr(argNames[i]));
  }
  builder_.setInsertionPointToStart(entry);
  for (const onnx::TensorData &t : model_.initializers)
    if (failed(importInitializer(t)))
      return nullptr;
  for (const onnx::ValueInfo &in : model_.inputs) {
    auto given = options_.inputValues.find(in.name);
    if (given == options_.inputValues.end())
      continue;
    const onnx::TensorData &t = given->second;
    if (t.dataType != in.dataType) {
      emitError(fileLoc) << "--input-value for '" << in.name << "' is "
                         << onnx::dataTypeName(t.dataType)
                         << "; the input is "
                         << onnx::dataTypeName(in.dataType);
      return nullptr;
    }
    if (in.hasShape && in.dims.size() != t.dims.size()) {
      emitError(fileLoc) << "--input-value for '" << in.name << "' has rank "
                         << t.dims.size() << "; the input has rank "
                         << in.dims.size();
      return nullptr;
    }
    FailureOr<ElementsAttr> value = tensorAttr(t, fileLoc, false);
    if (failed(value))
      return nullptr;
    values_[in.name] = builder_.create<ConstantOp>(
        fileLoc, value->getType(), cast<TypedAttr>(*value));
  }
  if (failed(importNodes(model_.nodes)) || failed(finishOutputs(func)))
    return nullptr;
  if (!model_.producer.empty())
    (*module)->setAttr("graph.producer",
                       builder_.getStringAttr(model_.producer));
  (*module)->setAttr("graph.opset", builder_.getI64IntegerAttr(model_.opset));
  if (failed(checkSizes(func)) || failed(verify(*module)))
    return nullptr;
  return module;
}

OwningOpRef<ModuleOp> strata::importOnnxModel(MLIRContext &context,
                                              const onnx::Model &model,
                                              const ImportOptions &options) {
  return Importer(context, model, options).run();
}
