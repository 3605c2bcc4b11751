//===- Importer.h - The ONNX importer's class (private) ---------*- C++ -*-===//
//
// The importer is one class whose handlers, one per ONNX op family, live in
// several files: OnnxImporter.cpp (the handler table and the driver),
// ImportHelpers.cpp (diagnostics, attributes, constants), ElementwiseOps.cpp,
// NnOps.cpp (contractions, reductions, normalisations, losses), ShapeOps.cpp
// (data movement, shapes, constants), ControlFlow.cpp (Loop, If, sequences),
// IndexOps.cpp (GatherElements, GatherND, scatters, TopK, ArgMax, Pad,
// OneHot, NonZero), Einsum.cpp and TransformerOps.cpp (RMSNormalization,
// RotaryEmbedding, Attention). Only the importer's own files include this
// header.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_COMPILER_IMPORT_IMPORTER_H
#define STRATA_COMPILER_IMPORT_IMPORTER_H

#include "compiler/import/OnnxImporter.h"
#include "compiler/import/OnnxModel.h"
#include "dialects/Graph/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/GlobPattern.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace strata::importer {

using namespace mlir;
using namespace strata::graph;
using strata::onnx::Node;

/// The largest tensor the compiler accepts (256 TiB): far above any real
/// model's, and low enough that sums of sizes cannot overflow int64.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;
/// The longest sequence a Range folds into a constant at import.
constexpr int64_t kMaxRangeElements = int64_t(1) << 22;

class Importer;
using HandlerFn = LogicalResult (Importer::*)(const Node &);

/// How to import one ONNX op type, and the first opset whose semantics the
/// handler implements (earlier versions differ: e.g. Softmax before 13
/// flattened its input to 2-D).
struct Handler {
  HandlerFn fn;
  int64_t minOpset;
};

/// Imports one model. Holds the value map from ONNX names to SSA values.
class Importer {
public:
  Importer(MLIRContext &context, const onnx::Model &model,
           const ImportOptions &options)
      : context_(context), model_(model), options_(options),
        builder_(&context) {}

  OwningOpRef<ModuleOp> run();

  static const std::map<std::string, Handler> &handlers();

  /// The handler table's key: the op type in the default domain, the
  /// domain-qualified name elsewhere ("ai.onnx.preview.training.Adam").
  static std::string handlerKey(const Node &node) {
    bool defaultDomain = node.domain.empty() || node.domain == "ai.onnx";
    return defaultDomain ? node.opType : node.domain + "." + node.opType;
  }
  /// The operator-set version in force for a node's domain.
  int64_t versionOf(const Node &node) const {
    if (node.domain.empty() || node.domain == "ai.onnx")
      return model_.opset;
    auto it = model_.domainOpsets.find(node.domain);
    return it == model_.domainOpsets.end() ? 0 : it->second;
  }

private:
  // Diagnostics.
  Location nodeLoc(const Node &node);
  InFlightDiagnostic nodeError(const Node &node);

  // Set-up.
  LogicalResult checkSupported();
  LogicalResult declareInputs(SmallVectorImpl<Type> &argTypes,
                              std::vector<std::string> &argNames);
  LogicalResult importInitializer(const onnx::TensorData &t);
  LogicalResult importNodes(const std::vector<Node> &nodes);
  LogicalResult importNode(const Node &node);
  LogicalResult finishOutputs(func::FuncOp func);

  // Helpers.
  Type elementType(int32_t dataType);
  FailureOr<ElementsAttr> tensorAttr(const onnx::TensorData &t, Location loc,
                                     bool asResource);
  Value input(const Node &node, size_t index);
  LogicalResult requireInputs(const Node &node, size_t count);
  void define(const Node &node, size_t index, Value value);
  bool isConsumed(const std::string &name) const {
    return !name.empty() && consumed_.contains(name);
  }
  FailureOr<SmallVector<int64_t>> constInts(const Node &node, size_t index,
                                            const char *what);
  std::optional<SmallVector<int64_t>>
  axesOf(const Node &node, size_t inputIndex, LogicalResult &status);
  Value scalarConstant(Type elementType, double value, Location loc);
  static Shape shapeOf(Value v);
  static Type elementTypeOf(Value v);
  LogicalResult checkSizes(func::FuncOp func);
  /// Whether `v`'s tensor type has a size Strata can count (see
  /// kMaxTensorBytes); an error naming `what` at `loc` when not.
  LogicalResult checkSize(Value v, Location loc, const std::string &what);
  RankedTensorType tensorType(const Shape &shape, Type elementType) {
    return RankedTensorType::get(shape, elementType);
  }
  int64_t intAttr(const Node &node, const char *name, int64_t dflt);
  /// The integer-list attribute `name`; nullopt when the node has none (or
  /// it is of another kind: wrongAttribute records that).
  std::optional<SmallVector<int64_t>> intsAttr(const Node &node,
                                               const char *name);
  /// The node's "axis" attribute (default `dflt`) normalised for `rank`;
  /// an error naming the rank when it is out of range.
  FailureOr<int64_t> axisAttr(const Node &node, int64_t dflt, int64_t rank);
  /// Records that attribute `a` is not of the `expected` kind; the node
  /// then fails with that error once its handler returns, whatever default
  /// the handler went on with.
  void wrongAttribute(const onnx::Attribute &a, const char *expected) {
    if (attributeError_.empty())
      attributeError_ = "attribute '" + a.name + "' must be " + expected +
                        ", not " + kindName(a.kind);
  }
  static const char *kindName(int kind) {
    static const char *names[] = {"a float",  "an integer", "a string",
                                  "a tensor", "floats",     "integers",
                                  "strings",  "a graph",    "another kind"};
    return names[std::clamp(kind, 0, 8)];
  }
  std::string attributeError_;
  float floatAttr(const Node &node, const char *name, float dflt);
  std::string stringAttr(const Node &node, const char *name,
                         const std::string &dflt);
  Value reshape(Value v, const Shape &shape, Location loc);
  /// Slices of `x` along `axis` with the given sizes (checked: none
  /// negative, adding up to the dimension).
  FailureOr<SmallVector<Value>>
  splitAlong(const Node &node, Value x, int64_t axis, ArrayRef<int64_t> sizes);
  /// The shape of `parts` concatenated along `axis` (checked: same rank,
  /// element type and other dimensions).
  FailureOr<Shape> concatShape(const Node &node, ArrayRef<Value> parts,
                               int64_t axis);

  // Op handlers, one per ONNX op family.
  template <typename OpT> LogicalResult binary(const Node &node);
  template <typename OpT> LogicalResult variadic(const Node &node);
  template <typename OpT> LogicalResult unary(const Node &node);
  template <typename OpT, bool Negate>
  LogicalResult compareOrEqual(const Node &node);
  LogicalResult identity(const Node &node);
  LogicalResult mod(const Node &node);
  LogicalResult gelu(const Node &node);
  LogicalResult activation(const Node &node);
  LogicalResult rounding(const Node &node);
  LogicalResult cumsum(const Node &node);
  LogicalResult tile(const Node &node);
  LogicalResult castNode(const Node &node);
  LogicalResult castLike(const Node &node);
  LogicalResult trainingOptimizer(const Node &node);
  LogicalResult mean(const Node &node);
  LogicalResult clip(const Node &node);
  LogicalResult dropout(const Node &node);
  LogicalResult matmul(const Node &node);
  LogicalResult gemm(const Node &node);
  template <typename OpT> LogicalResult softmax(const Node &node);
  LogicalResult layerNorm(const Node &node);
  template <bool WithSoftmax> LogicalResult classLoss(const Node &node);
  template <typename OpT> LogicalResult reduce(const Node &node);
  LogicalResult gather(const Node &node);
  LogicalResult reshapeNode(const Node &node);
  LogicalResult flatten(const Node &node);
  LogicalResult transpose(const Node &node);
  LogicalResult split(const Node &node);
  LogicalResult slice(const Node &node);
  LogicalResult concat(const Node &node);
  LogicalResult unsqueeze(const Node &node);
  LogicalResult squeeze(const Node &node);
  LogicalResult expand(const Node &node);
  LogicalResult where(const Node &node);
  LogicalResult trilu(const Node &node);
  LogicalResult range(const Node &node);
  LogicalResult constantOfShape(const Node &node);
  LogicalResult shape(const Node &node);
  LogicalResult size(const Node &node);
  LogicalResult constant(const Node &node);

  // Control flow and sequences (ControlFlow.cpp).
  /// A list of tensors (ONNX's sequence type). Sequences exist only while
  /// importing: every element is an SSA value of the graph.
  struct Sequence {
    Type elementType;
    SmallVector<Value> items;
  };
  /// A value of a sub-graph's interface: a tensor or a sequence.
  struct Slot {
    Value tensor;
    std::optional<Sequence> sequence;
  };
  bool isDefined(const std::string &name) const {
    return values_.count(name) || sequences_.count(name);
  }
  FailureOr<Slot> slotOf(const Node &node, const std::string &name);
  FailureOr<Sequence> sequenceInput(const Node &node, size_t index);
  void defineSequence(const Node &node, size_t index, Sequence seq);
  /// Imports the nodes of `graph` with its inputs bound to `inputs`, and
  /// reads its outputs; the names it defines are unbound afterwards (a Loop
  /// body runs once per iteration).
  LogicalResult runSubgraph(const Node &owner, const onnx::Graph &graph,
                            ArrayRef<Slot> inputs,
                            SmallVectorImpl<Slot> &outputs);
  std::optional<int64_t> constantScalar(Value v);
  LogicalResult loop(const Node &node);
  LogicalResult ifNode(const Node &node);
  LogicalResult sequenceEmpty(const Node &node);
  LogicalResult sequenceConstruct(const Node &node);
  LogicalResult sequenceInsert(const Node &node);
  LogicalResult sequenceAt(const Node &node);
  LogicalResult sequenceErase(const Node &node);
  LogicalResult sequenceLength(const Node &node);
  LogicalResult splitToSequence(const Node &node);
  LogicalResult concatFromSequence(const Node &node);
  /// The op types whose inputs may be sequences.
  static bool takesSequences(const std::string &opType);

  // Index ops (IndexOps.cpp).
  Value intConstant(const Shape &shape, ArrayRef<int64_t> values, Location loc);
  Value asInt64(Value v, Location loc);
  Value wrapNegative(Value index, Value size, Location loc);
  /// Row-major positions in the data (flat) of GatherElements-style
  /// indices along `axis` (negative ones wrap unless `nonNegative`).
  FailureOr<Value> elementPositions(const Node &node, Value indices,
                                    const Shape &dataShape, int64_t axis,
                                    bool nonNegative = false);
  /// Positions of GatherND-style index tuples in the data viewed as rows.
  FailureOr<Value> rowPositions(const Node &node, Value indices,
                                const Shape &dataShape, int64_t batchDims);
  /// `hitWeights` (shaped like `positions`, 1 or 0): which updates are
  /// real (rows of a data-dependent length); none: all.
  FailureOr<Value> scatterRows(const Node &node, Value data, Value updates,
                               Value positions, const Shape &rows,
                               const std::string &reduction,
                               Value hitWeights = {});
  LogicalResult gatherElements(const Node &node);
  LogicalResult gatherND(const Node &node);
  LogicalResult scatterElements(const Node &node);
  LogicalResult checkConstantIndices(const Node &node, Value idx, int64_t dim,
                                     int64_t axis);
  FailureOr<bool> scatterSlices(const Node &node, Value data, Value indices,
                                Value updates, int64_t axis);
  LogicalResult scatterND(const Node &node);
  LogicalResult topK(const Node &node);
  LogicalResult pad(const Node &node);
  LogicalResult argExtreme(const Node &node);
  LogicalResult oneHot(const Node &node);
  LogicalResult nonZero(const Node &node);

  // Data-dependent lengths (BoundedDims.cpp). NonZero on the data path
  // yields one row per candidate position (its bound) and a mask of the
  // rows that are real; what consumes the rows carries the mask along.
  /// A dimension whose length is a count known only when the step runs.
  struct BoundedDim {
    unsigned set; ///< Index into boundSets_.
    int64_t axis;
  };
  /// The rows one data-path NonZero made.
  struct BoundSet {
    Value mask;    ///< i1 [bound]: which rows are real (compacted: the first
                   ///< `count`).
    Value count;   ///< i64 scalar: how many rows are real (compacted).
    int64_t bound; ///< The number of candidate positions.
    /// The count the cost model assumes, where the importer estimated one.
    std::optional<int64_t> expected;
    std::string origin;
  };
  /// The value a shape holds for the length of `set`'s dimension: above
  /// any real dimension (2^48 bytes at most), below INT64_MAX (Slice's
  /// "to the end").
  static int64_t symbolicLength(unsigned set) {
    return (int64_t(1) << 62) + set;
  }
  static bool isSymbolicLength(int64_t d) {
    return d >= (int64_t(1) << 62) && d < (int64_t(1) << 62) + (1 << 20);
  }
  std::optional<BoundedDim> boundedDim(Value v) const {
    auto it = boundedDims_.find(v);
    if (it == boundedDims_.end())
      return std::nullopt;
    return it->second;
  }
  /// Refuses a node that takes a data-dependent length where Strata cannot
  /// (before its handler runs).
  LogicalResult checkBoundedInputs(const Node &node);
  /// Records which of the node's results have a data-dependent length and
  /// which hold such a length in a shape (after its handler ran).
  LogicalResult propagateBounded(const Node &node);
  /// NonZero of a tensor computed from the data.
  LogicalResult boundedNonZero(const Node &node, Value x);
  /// `set`'s mask as float 1/0 (or i1), shaped to broadcast against a tensor
  /// of `shape` whose dimension `axis` runs over the rows.
  Value boundMask(unsigned set, const Shape &shape, int64_t axis, Type et,
                  Location loc);
  /// `v` with its rows that are not real set to zero.
  Value zeroPadRows(Value v, BoundedDim dim, Location loc);
  InFlightDiagnostic boundedError(const Node &node, BoundedDim dim);
  llvm::DenseMap<Value, BoundedDim> boundedDims_;
  std::vector<BoundSet> boundSets_;
  /// Shape constants holding a symbolic length.
  llvm::DenseSet<Value> symbolic_;
  /// The expected fraction of nonzero entries of masks the model makes
  /// (one class of a OneHot over `depth` classes: 1/depth), followed
  /// through views and casts; a data-path NonZero of such a mask tells the
  /// cost model its expected count.
  llvm::DenseMap<Value, double> density_;
  /// Integer values known never to be negative (NonZero's coordinates and
  /// what views, gathers, sums and products make of them): their indices
  /// need no wrapping.
  llvm::DenseSet<Value> nonNegative_;
  bool isNonNegative(Value v) const;
  /// The symbolic lengths constInts replaced by their bound during the
  /// current node: (position in the list, set).
  SmallVector<std::pair<size_t, unsigned>> resolvedLengths_;

  LogicalResult einsum(const Node &node); // Einsum.cpp
  // TransformerOps.cpp
  LogicalResult rmsNorm(const Node &node);
  LogicalResult rotaryEmbedding(const Node &node);
  LogicalResult attention(const Node &node);

  /// Nodes imported from sub-graphs so far (unrolling is bounded).
  int64_t subgraphNodes_ = 0;

  MLIRContext &context_;
  const onnx::Model &model_;
  const ImportOptions &options_;
  OpBuilder builder_;
  llvm::StringMap<Value> values_;
  llvm::StringMap<Sequence> sequences_;
  llvm::StringSet<> consumed_;
  std::vector<llvm::GlobPattern> freeze_;
};

/// How messages name a node: by its name, or by its first output when the
/// exporter left it unnamed.
std::string nodeLabel(const Node &node);

} // namespace strata::importer

#endif // STRATA_COMPILER_IMPORT_IMPORTER_H
