//===- OnnxImporter.cpp - ONNX model to graph dialect ---------------------===//
//
// Walks the nodes of an ONNX graph in order and builds graph-dialect ops with
// static result types. Every op is built with `createOrFold`, so the shape
// computations that exporters emit fold into constants as they are imported;
// an input that decides a shape (Reshape's shape, Slice's starts, ...) must
// be such a constant, and the error says so when it is not.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"
#include "dialects/Strata/StrataDialect.h"
#include "runtime/support/Checked.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/ShapeInference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
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
    error =
        "expected NAME=D0xD1x... (e.g. input_ids=4x128), got '" + spec + "'";
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
      error = "dimension 0 in '" + spec +
              "' is an empty dimension; bind "
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
      {"ai.onnx.preview.training.Adagrad", {&Importer::trainingOptimizer, 1}},
      {"ai.onnx.preview.training.Momentum", {&Importer::trainingOptimizer, 1}},
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
      frozen ? UnitAttr() : builder_.getUnitAttr(), *value, IntegerAttr());
  return success();
}

namespace {
/// Whether `type` (a tensor of static shape) has a size Strata can count
/// in int64 bytes, with room to add sizes up (kMaxTensorBytes).
bool countable(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return true;
  int64_t n = graph::numElements(Shape(tensor.getShape()));
  unsigned bits = tensor.getElementType().isIntOrFloat()
                      ? tensor.getElementType().getIntOrFloatBitWidth()
                      : 64;
  int64_t bytes = 0;
  return n >= 0 &&
         !__builtin_mul_overflow(n, int64_t((bits + 7) / 8), &bytes) &&
         bytes <= kMaxTensorBytes;
}
constexpr const char *kTooLarge =
    " is larger than Strata supports for one tensor (2^48 bytes)";
} // namespace

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
  if (failed(checkBoundedInputs(node)))
    return failure();
  attributeError_.clear();
  LogicalResult status = (this->*handler.fn)(node);
  if (!attributeError_.empty())
    return nodeError(node) << attributeError_;
  if (failed(status))
    return failure();
  // A result too large to count is refused here, naming its node, before
  // a later node works with its size.
  for (const std::string &name : node.outputs) {
    auto it = values_.find(name);
    if (!name.empty() && it != values_.end() &&
        !countable(it->second.getType()))
      return nodeError(node)
             << "output '" << name << "' " << it->second.getType() << kTooLarge;
  }
  return propagateBounded(node);
}

LogicalResult Importer::finishOutputs(func::FuncOp func) {
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const onnx::ValueInfo &out : model_.outputs) {
    Value v = values_.lookup(out.name);
    if (!v)
      return emitError(func.getLoc())
             << "graph output '" << out.name << "' is never computed";
    if (std::optional<BoundedDim> b = boundedDim(v))
      return emitError(func.getLoc())
             << "graph output '" << out.name << "' has a dimension (" << b->axis
             << ") whose length the data decide (the rows of the NonZero "
             << boundSets_[b->set].origin
             << "); Strata's outputs have fixed shapes";
    if (symbolic_.contains(v))
      return emitError(func.getLoc())
             << "graph output '" << out.name
             << "' holds a length the data decide (the rows of a NonZero); "
                "Strata's outputs have fixed shapes";
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
    func.setResultAttr(i, graph::GraphDialect::NameAttrHelper::getNameStr(),
                       builder_.getStringAttr(model_.outputs[i].name));
  return success();
}

/// Every tensor of the imported graph has a size the rest of the compiler
/// and the runtime can count in int64 bytes, with room to add them up.

LogicalResult Importer::checkSize(Value v, Location loc,
                                  const std::string &what) {
  if (countable(v.getType()))
    return success();
  return emitError(loc) << what << " " << v.getType() << kTooLarge;
}

LogicalResult Importer::checkSizes(func::FuncOp func) {
  WalkResult walk = func.walk([&](Operation *op) {
    for (Value r : op->getResults())
      if (failed(
              checkSize(r, op->getLoc(),
                        "the result of " + op->getName().getStringRef().str())))
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
    func.setArgAttr(i, graph::GraphDialect::NameAttrHelper::getNameStr(),
                    builder_.getStringAttr(argNames[i]));
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
                         << onnx::dataTypeName(t.dataType) << "; the input is "
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
    values_[in.name] = builder_.create<ConstantOp>(fileLoc, value->getType(),
                                                   cast<TypedAttr>(*value));
  }
  // Inputs too large to count are refused before any node reads them
  // (each node's results are checked as it is imported: importNode).
  for (auto [i, arg] : llvm::enumerate(entry->getArguments()))
    if (failed(checkSize(arg, fileLoc, "input '" + argNames[i] + "'")))
      return nullptr;
  if (failed(importNodes(model_.nodes)) || failed(finishOutputs(func)))
    return nullptr;
  if (!model_.producer.empty())
    setDeclaredAttr<graph::GraphDialect::ProducerAttrHelper>(
        (*module), builder_.getStringAttr(model_.producer));
  setDeclaredAttr<graph::GraphDialect::OpsetAttrHelper>(
      (*module), builder_.getI64IntegerAttr(model_.opset));
  if (failed(checkSizes(func)) || failed(verify(*module)))
    return nullptr;
  if (!boundSets_.empty()) {
    // What the compiler decided for rows whose count the data decide.
    int64_t rows = 0, expected = 0, estimated = 0;
    for (const BoundSet &set : boundSets_) {
      rows += set.bound;
      if (set.expected) {
        expected += *set.expected;
        ++estimated;
      }
    }
    InFlightDiagnostic note = emitRemark(fileLoc);
    note << boundSets_.size() << " NonZero node"
         << (boundSets_.size() == 1 ? "" : "s")
         << " on the data path: their rows held at their bound (" << rows
         << " in all, memory planned for those)";
    if (options_.compactRows) {
      note << "; the real rows first, matrix products stop at their count";
      if (estimated)
        note << " (the cost model expects " << expected << " real rows in the "
             << estimated << " that pick one class of a one-hot, as routers "
             << "do)";
    } else {
      note << "; every row computed (--nonzero-rows=bound)";
    }
  }
  return module;
}

OwningOpRef<ModuleOp> strata::importOnnxModel(MLIRContext &context,
                                              const onnx::Model &model,
                                              const ImportOptions &options) {
  return Importer(context, model, options).run();
}
