//===- ImportHelpers.cpp - The importer's shared helpers ------------------===//
//
// Diagnostics naming a node, element types, tensor attributes, input and
// attribute access, constants: what every handler file uses.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"
#include "runtime/support/Checked.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/APSInt.h"

using namespace mlir;
using namespace strata;
using namespace strata::graph;
using namespace strata::importer;

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
  std::string name =
      node.name.empty() && !node.outputs.empty() ? node.outputs[0] : node.name;
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
        bytes, align,
        [owner](void *, size_t, size_t) mutable { owner.reset(); },
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

FailureOr<SmallVector<int64_t>>
Importer::constInts(const Node &node, size_t index, const char *what) {
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
  // A data-dependent length (checkBoundedInputs let it reach only a shape)
  // is held at its bound.
  if (symbolic_.contains(v))
    for (auto [pos, d] : llvm::enumerate(result)) {
      if (!isSymbolicLength(d))
        continue;
      unsigned set = unsigned(d - symbolicLength(0));
      if (set >= boundSets_.size())
        return nodeError(node) << what << " (input '" << node.inputs[index]
                               << "') holds an invalid dimension " << d;
      resolvedLengths_.push_back({pos, set});
      d = boundSets_[set].bound;
    }
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
  return intsAttr(node, "axes");
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

std::optional<SmallVector<int64_t>> Importer::intsAttr(const Node &node,
                                                       const char *name) {
  const onnx::Attribute *a = node.attribute(name);
  if (!a)
    return std::nullopt;
  if (a->kind != onnx::Attribute::Ints) {
    wrongAttribute(*a, "a list of integers");
    return std::nullopt;
  }
  return SmallVector<int64_t>(a->ints.begin(), a->ints.end());
}

int64_t Importer::intAttr(const Node &node, const char *name, int64_t dflt) {
  const onnx::Attribute *a = node.attribute(name);
  if (a && a->kind != onnx::Attribute::Int)
    wrongAttribute(*a, "an integer");
  return a && a->kind == onnx::Attribute::Int ? a->i : dflt;
}

FailureOr<int64_t> Importer::axisAttr(const Node &node, int64_t dflt,
                                      int64_t rank) {
  std::optional<int64_t> axis =
      normalizeAxis(intAttr(node, "axis", dflt), rank);
  if (!axis)
    return nodeError(node) << "axis out of range for rank " << rank;
  return *axis;
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
