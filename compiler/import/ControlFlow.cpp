//===- ControlFlow.cpp - Loop, If and sequences at import -----------------===//
//
// Strata's graphs have static shapes and no control flow, so the importer
// resolves ONNX's control flow while it imports:
//
//  * A Loop whose trip count and condition are known at compile time (they
//    come from the bound shapes, as in the position and rotary sub-graphs
//    exporters write for dynamic axes) is unrolled: its body is imported
//    once per iteration. The carried values may change shape from one
//    iteration to the next; scan outputs are stacked.
//  * An If with a constant condition imports the branch it takes; one whose
//    condition is computed from the data imports both branches and selects
//    between their results (so the gradient flows through the taken one).
//  * A sequence is a list of SSA values that exists only while importing:
//    SplitToSequence slices, ConcatFromSequence concatenates, and the rest
//    edit the list.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace strata;
using namespace strata::graph;
using namespace strata::importer;

namespace {
/// Iterations one Loop may unroll into, and body nodes all Loops together
/// may import: a loop that only computes positions runs as many times as a
/// dimension is long; more than this is not a shape computation.
constexpr int64_t kMaxLoopIterations = int64_t(1) << 16;
constexpr int64_t kMaxUnrolledNodes = int64_t(1) << 20;
/// The longest sequence (a list of values at import).
constexpr int64_t kMaxSequence = int64_t(1) << 16;

/// The model inputs `v` is computed from, as ": from input 'a', input 'b'"
/// (empty when none): the inputs to bind for it to be known at compile time.
std::string dataInputsOf(Value v) {
  llvm::DenseSet<Value> seen;
  SmallVector<Value> work{v};
  std::string names;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      auto name = func ? func.getArgAttrOfType<StringAttr>(
                             arg.getArgNumber(),
                             GraphDialect::NameAttrHelper::getNameStr())
                       : StringAttr();
      if (name)
        names +=
            (names.empty() ? ": from input '" : ", input '") + name.str() + "'";
      continue;
    }
    if (Operation *def = x.getDefiningOp())
      for (Value operand : def->getOperands())
        work.push_back(operand);
  }
  return names;
}
} // namespace

bool Importer::takesSequences(const std::string &opType) {
  return opType == "SequenceInsert" || opType == "SequenceAt" ||
         opType == "SequenceErase" || opType == "SequenceLength" ||
         opType == "ConcatFromSequence" || opType == "Loop" ||
         opType == "Identity";
}

FailureOr<Importer::Slot> Importer::slotOf(const Node &node,
                                           const std::string &name) {
  auto seq = sequences_.find(name);
  if (seq != sequences_.end())
    return Slot{Value(), seq->second};
  if (Value v = values_.lookup(name))
    return Slot{v, std::nullopt};
  return nodeError(node) << "'" << name << "' is not defined";
}

FailureOr<Importer::Sequence> Importer::sequenceInput(const Node &node,
                                                      size_t index) {
  if (index >= node.inputs.size() || node.inputs[index].empty())
    return nodeError(node) << "missing required sequence input #" << index;
  auto it = sequences_.find(node.inputs[index]);
  if (it == sequences_.end())
    return nodeError(node) << "input '" << node.inputs[index]
                           << "' must be a sequence, not a tensor";
  return it->second;
}

void Importer::defineSequence(const Node &node, size_t index, Sequence seq) {
  if (index < node.outputs.size() && !node.outputs[index].empty())
    sequences_[node.outputs[index]] = std::move(seq);
}

std::optional<int64_t> Importer::constantScalar(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || attr.getNumElements() != 1)
    return std::nullopt;
  if (isa<IntegerType>(attr.getElementType())) {
    APInt i = *attr.getValues<APInt>().begin();
    return attr.getElementType().isInteger(1) ? int64_t(i.getBoolValue())
                                              : i.getSExtValue();
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Sub-graphs
//===----------------------------------------------------------------------===//

LogicalResult Importer::runSubgraph(const Node &owner, const onnx::Graph &graph,
                                    ArrayRef<Slot> inputs,
                                    SmallVectorImpl<Slot> &outputs) {
  if (inputs.size() != graph.inputs.size())
    return nodeError(owner)
           << "its sub-graph '" << graph.name << "' takes "
           << graph.inputs.size() << " inputs, given " << inputs.size();
  // Loop bodies run once per iteration, branches inside them as often:
  // what all sub-graphs import together is bounded.
  subgraphNodes_ += static_cast<int64_t>(graph.nodes.size());
  if (subgraphNodes_ > kMaxUnrolledNodes)
    return nodeError(owner) << "unrolling the model's loops and branches "
                               "imports more than "
                            << kMaxUnrolledNodes << " nodes";
  // The names the sub-graph defines hide the enclosing graph's while it
  // runs, and are unbound (the hidden ones restored) afterwards.
  std::vector<std::string> names;
  for (const onnx::ValueInfo &in : graph.inputs)
    names.push_back(in.name);
  for (const onnx::TensorData &t : graph.initializers)
    names.push_back(t.name);
  for (const Node &node : graph.nodes)
    for (const std::string &out : node.outputs)
      if (!out.empty())
        names.push_back(out);
  struct Saved {
    std::string name;
    Value value;
    std::optional<Sequence> sequence;
  };
  std::vector<Saved> saved;
  for (const std::string &name : names) {
    auto seq = sequences_.find(name);
    if (seq != sequences_.end()) {
      saved.push_back({name, Value(), seq->second});
      sequences_.erase(seq);
    } else if (Value v = values_.lookup(name)) {
      saved.push_back({name, v, std::nullopt});
      values_.erase(name);
    }
  }
  auto bind = [&](const std::string &name, const Slot &slot) {
    if (slot.sequence)
      sequences_[name] = *slot.sequence;
    else
      values_[name] = slot.tensor;
  };
  for (size_t i = 0; i < inputs.size(); ++i)
    bind(graph.inputs[i].name, inputs[i]);

  LogicalResult status = success();
  for (const onnx::TensorData &t : graph.initializers) {
    FailureOr<ElementsAttr> value = tensorAttr(t, nodeLoc(owner), false);
    if (failed(value)) {
      status = failure();
      break;
    }
    values_[t.name] = builder_.create<ConstantOp>(
        nodeLoc(owner), value->getType(), cast<TypedAttr>(*value));
  }
  if (succeeded(status))
    status = importNodes(graph.nodes);
  if (succeeded(status)) {
    for (const onnx::ValueInfo &out : graph.outputs) {
      FailureOr<Slot> slot = slotOf(owner, out.name);
      if (failed(slot)) {
        status = failure();
        break;
      }
      outputs.push_back(*slot);
    }
  }
  for (const std::string &name : names) {
    values_.erase(name);
    sequences_.erase(name);
  }
  for (Saved &s : saved)
    bind(s.name, Slot{s.value, s.sequence});
  return status;
}

/// The sub-graph attribute `name` of a Loop or If.
static const onnx::Graph *graphAttr(const Node &node, const char *name) {
  const onnx::Attribute *a = node.attribute(name);
  return a && a->kind == onnx::Attribute::GraphBody ? a->g.get() : nullptr;
}

LogicalResult Importer::loop(const Node &node) {
  const onnx::Graph *body = graphAttr(node, "body");
  if (!body)
    return nodeError(node) << "has no 'body' graph";
  size_t carried = node.inputs.size() < 2 ? 0 : node.inputs.size() - 2;
  if (body->inputs.size() != carried + 2 || body->outputs.size() < carried + 1)
    return nodeError(node) << "its body takes " << body->inputs.size()
                           << " inputs and gives " << body->outputs.size()
                           << " outputs; with " << carried
                           << " loop-carried values it must take "
                           << carried + 2 << " and give at least "
                           << carried + 1;
  size_t scans = body->outputs.size() - carried - 1;
  if (node.outputs.size() > carried + scans)
    return nodeError(node) << "has " << node.outputs.size()
                           << " outputs; its body gives " << carried + scans;
  Location loc = nodeLoc(node);
  const char *unrolls = "; Strata unrolls a Loop whose trip count and "
                        "condition are known at compile time (bind the "
                        "model's dynamic dimensions with --input-shape)";

  int64_t tripCount = kMaxLoopIterations + 1;
  if (Value m = input(node, 0)) {
    std::optional<int64_t> trips = constantScalar(m);
    if (!trips)
      return nodeError(node) << "the trip count '" << node.inputs[0]
                             << "' is computed from the model's data"
                             << dataInputsOf(m) << unrolls;
    tripCount = std::max<int64_t>(0, *trips);
  }
  bool cond = true;
  Value condIn = input(node, 1);
  if (condIn) {
    std::optional<int64_t> c = constantScalar(condIn);
    if (!c)
      return nodeError(node) << "the condition '" << node.inputs[1]
                             << "' is computed from the model's data"
                             << dataInputsOf(condIn) << unrolls;
    cond = *c != 0;
  } else if (!input(node, 0)) {
    return nodeError(node) << "has neither a trip count nor a condition "
                              "(it would never end)";
  }

  SmallVector<Slot> state;
  for (size_t i = 0; i < carried; ++i) {
    FailureOr<Slot> s = slotOf(node, node.inputs[i + 2]);
    if (failed(s))
      return failure();
    state.push_back(*s);
  }
  std::vector<SmallVector<Value>> scanned(scans);
  Type i64 = builder_.getI64Type(), i1 = builder_.getI1Type();
  int64_t iteration = 0;
  for (; iteration < tripCount && cond; ++iteration) {
    if (iteration >= kMaxLoopIterations)
      return nodeError(node) << "runs more than " << kMaxLoopIterations
                             << " iterations at compile time" << unrolls;
    SmallVector<Slot> inputs;
    inputs.push_back({scalarConstant(i64, double(iteration), loc), {}});
    inputs.push_back({scalarConstant(i1, cond ? 1.0 : 0.0, loc), {}});
    inputs.append(state.begin(), state.end());
    SmallVector<Slot> outputs;
    if (failed(runSubgraph(node, *body, inputs, outputs)))
      return failure();
    std::optional<int64_t> next =
        outputs[0].sequence ? std::nullopt : constantScalar(outputs[0].tensor);
    if (!next)
      return nodeError(node)
             << "the body's condition output '" << body->outputs[0].name
             << "' is computed from the model's data" << unrolls;
    cond = *next != 0;
    for (size_t i = 0; i < carried; ++i)
      state[i] = outputs[1 + i];
    for (size_t k = 0; k < scans; ++k) {
      const Slot &s = outputs[1 + carried + k];
      if (s.sequence)
        return nodeError(node)
               << "scan output '" << body->outputs[1 + carried + k].name
               << "' is a sequence";
      scanned[k].push_back(s.tensor);
    }
  }
  for (size_t i = 0; i < carried && i < node.outputs.size(); ++i) {
    if (state[i].sequence)
      defineSequence(node, i, *state[i].sequence);
    else
      define(node, i, state[i].tensor);
  }
  for (size_t k = 0; k < scans && carried + k < node.outputs.size(); ++k) {
    if (!isConsumed(node.outputs[carried + k]))
      continue;
    if (scanned[k].empty())
      return nodeError(node) << "scan output '" << node.outputs[carried + k]
                             << "' is used, and the loop runs no iteration "
                                "(its shape is unknown)";
    // Stacked along a new leading axis.
    Shape one = shapeOf(scanned[k][0]);
    Type et = elementTypeOf(scanned[k][0]);
    SmallVector<Value> rows;
    for (Value v : scanned[k]) {
      if (shapeOf(v) != one || elementTypeOf(v) != et)
        return nodeError(node) << "scan output '" << node.outputs[carried + k]
                               << "' changes type between iterations";
      Shape s = one;
      s.insert(s.begin(), 1);
      rows.push_back(reshape(v, s, loc));
    }
    Shape out = one;
    out.insert(out.begin(), static_cast<int64_t>(rows.size()));
    define(node, carried + k,
           builder_.createOrFold<ConcatOp>(loc, tensorType(out, et), rows,
                                           builder_.getI64IntegerAttr(0)));
  }
  return success();
}

LogicalResult Importer::ifNode(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  const onnx::Graph *thenGraph = graphAttr(node, "then_branch");
  const onnx::Graph *elseGraph = graphAttr(node, "else_branch");
  if (!thenGraph || !elseGraph)
    return nodeError(node) << "needs 'then_branch' and 'else_branch' graphs";
  Value c = input(node, 0);
  if (!elementTypeOf(c).isInteger(1) || numElements(shapeOf(c)) != 1)
    return nodeError(node) << "the condition must be a single bool";
  auto defineAll = [&](ArrayRef<Slot> outs) -> LogicalResult {
    if (outs.size() < node.outputs.size())
      return nodeError(node)
             << "the branch gives " << outs.size() << " outputs; the node has "
             << node.outputs.size();
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (outs[i].sequence)
        defineSequence(node, i, *outs[i].sequence);
      else
        define(node, i, outs[i].tensor);
    }
    return success();
  };
  if (std::optional<int64_t> taken = constantScalar(c)) {
    SmallVector<Slot> outs;
    if (failed(runSubgraph(node, *taken ? *thenGraph : *elseGraph, {}, outs)))
      return failure();
    return defineAll(outs);
  }
  // A condition computed from the data: both branches, then a select.
  SmallVector<Slot> thenOuts, elseOuts;
  if (failed(runSubgraph(node, *thenGraph, {}, thenOuts)) ||
      failed(runSubgraph(node, *elseGraph, {}, elseOuts)))
    return failure();
  if (thenOuts.size() != elseOuts.size())
    return nodeError(node) << "its branches give different numbers of "
                              "outputs";
  Location loc = nodeLoc(node);
  Value scalarCond = reshape(c, {}, loc);
  SmallVector<Slot> selected;
  for (size_t i = 0; i < thenOuts.size(); ++i) {
    const Slot &a = thenOuts[i], &b = elseOuts[i];
    if (a.sequence || b.sequence || a.tensor.getType() != b.tensor.getType())
      return nodeError(node)
             << "its condition is computed from the model's data, and "
                "output #"
             << i
             << " differs in type between the branches (or is a sequence); "
                "Strata selects between branches only when their outputs "
                "have the same static type";
    selected.push_back(
        {builder_.createOrFold<SelectOp>(loc, a.tensor.getType(), scalarCond,
                                         a.tensor, b.tensor),
         std::nullopt});
  }
  return defineAll(selected);
}

//===----------------------------------------------------------------------===//
// Sequences
//===----------------------------------------------------------------------===//

/// A position input of a sequence op, checked against `size` (`allowEnd`:
/// one past the last element is valid, for an insertion).
static std::optional<int64_t> sequencePosition(int64_t position, int64_t size,
                                               bool allowEnd) {
  int64_t p = position < 0 ? position + size : position;
  if (p < 0 || p > size || (p == size && !allowEnd))
    return std::nullopt;
  return p;
}

LogicalResult Importer::sequenceEmpty(const Node &node) {
  Type et =
      elementType(static_cast<int32_t>(intAttr(node, "dtype", onnx::kFloat)));
  if (!et)
    return nodeError(node) << "unsupported dtype";
  defineSequence(node, 0, Sequence{et, {}});
  return success();
}

LogicalResult Importer::sequenceConstruct(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Sequence seq{elementTypeOf(input(node, 0)), {}};
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    Value v = input(node, i);
    if (!v || elementTypeOf(v) != seq.elementType)
      return nodeError(node) << "the elements must be tensors of one "
                                "element type";
    seq.items.push_back(v);
  }
  defineSequence(node, 0, std::move(seq));
  return success();
}

LogicalResult Importer::sequenceInsert(const Node &node) {
  FailureOr<Sequence> seq = sequenceInput(node, 0);
  if (failed(seq) || failed(requireInputs(node, 2)))
    return failure();
  Value t = input(node, 1);
  if (!t)
    return nodeError(node) << "the inserted value must be a tensor";
  if (elementTypeOf(t) != seq->elementType)
    return nodeError(node) << "inserts a " << elementTypeOf(t)
                           << " tensor into a sequence of " << seq->elementType;
  int64_t size = static_cast<int64_t>(seq->items.size());
  int64_t at = size;
  if (input(node, 2)) {
    std::optional<int64_t> p = constantScalar(input(node, 2));
    std::optional<int64_t> q =
        p ? sequencePosition(*p, size, true) : std::nullopt;
    if (!q)
      return nodeError(node) << "the position must be a constant in [" << -size
                             << ", " << size << "]";
    at = *q;
  }
  if (size >= kMaxSequence)
    return nodeError(node) << "the sequence would exceed " << kMaxSequence
                           << " elements";
  seq->items.insert(seq->items.begin() + at, t);
  defineSequence(node, 0, std::move(*seq));
  return success();
}

LogicalResult Importer::sequenceAt(const Node &node) {
  FailureOr<Sequence> seq = sequenceInput(node, 0);
  if (failed(seq) || failed(requireInputs(node, 2)))
    return failure();
  int64_t size = static_cast<int64_t>(seq->items.size());
  std::optional<int64_t> p = constantScalar(input(node, 1));
  std::optional<int64_t> q =
      p ? sequencePosition(*p, size, false) : std::nullopt;
  if (!q)
    return nodeError(node) << "the position must be a constant in [" << -size
                           << ", " << size - 1 << "]";
  define(node, 0, seq->items[*q]);
  return success();
}

LogicalResult Importer::sequenceErase(const Node &node) {
  FailureOr<Sequence> seq = sequenceInput(node, 0);
  if (failed(seq))
    return failure();
  int64_t size = static_cast<int64_t>(seq->items.size());
  std::optional<int64_t> q =
      size > 0 ? std::optional<int64_t>(size - 1) : std::nullopt;
  if (input(node, 1)) {
    std::optional<int64_t> p = constantScalar(input(node, 1));
    q = p ? sequencePosition(*p, size, false) : std::nullopt;
  }
  if (!q)
    return nodeError(node) << "the position must be a constant in [" << -size
                           << ", " << size - 1 << "]";
  seq->items.erase(seq->items.begin() + *q);
  defineSequence(node, 0, std::move(*seq));
  return success();
}

LogicalResult Importer::sequenceLength(const Node &node) {
  FailureOr<Sequence> seq = sequenceInput(node, 0);
  if (failed(seq))
    return failure();
  define(node, 0,
         scalarConstant(builder_.getI64Type(), double(seq->items.size()),
                        nodeLoc(node)));
  return success();
}

LogicalResult Importer::splitToSequence(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Shape in = shapeOf(x);
  FailureOr<int64_t> axis = axisAttr(node, 0, in.size());
  if (failed(axis))
    return failure();
  int64_t dim = in[*axis];
  bool keepDims = intAttr(node, "keepdims", 1) != 0;
  SmallVector<int64_t> sizes;
  if (Value s = input(node, 1)) {
    FailureOr<SmallVector<int64_t>> split = constInts(node, 1, "split");
    if (failed(split))
      return failure();
    if (shapeOf(s).empty()) {
      int64_t chunk = (*split)[0];
      if (chunk <= 0)
        return nodeError(node) << "split size " << chunk << " must be positive";
      if ((dim + chunk - 1) / chunk > kMaxSequence)
        return nodeError(node)
               << "the sequence would exceed " << kMaxSequence << " elements";
      for (int64_t at = 0; at < dim; at += chunk)
        sizes.push_back(std::min(chunk, dim - at));
    } else {
      sizes = *split;
    }
    keepDims = true; // keepdims applies only without 'split'.
  } else {
    if (dim > kMaxSequence)
      return nodeError(node)
             << "splitting " << dim << " elements one by one "
             << "exceeds the longest sequence, " << kMaxSequence;
    sizes.assign(dim, 1);
  }
  if (static_cast<int64_t>(sizes.size()) > kMaxSequence)
    return nodeError(node) << "the sequence would exceed " << kMaxSequence
                           << " elements";
  FailureOr<SmallVector<Value>> parts = splitAlong(node, x, *axis, sizes);
  if (failed(parts))
    return failure();
  Location loc = nodeLoc(node);
  Sequence seq{elementTypeOf(x), {}};
  for (Value piece : *parts) {
    if (!keepDims) {
      Shape out = shapeOf(piece);
      out.erase(out.begin() + *axis);
      piece = reshape(piece, out, loc);
    }
    seq.items.push_back(piece);
  }
  defineSequence(node, 0, std::move(seq));
  return success();
}

LogicalResult Importer::concatFromSequence(const Node &node) {
  FailureOr<Sequence> seq = sequenceInput(node, 0);
  if (failed(seq))
    return failure();
  if (seq->items.empty())
    return nodeError(node) << "concatenates an empty sequence";
  bool newAxis = intAttr(node, "new_axis", 0) != 0;
  Shape first = shapeOf(seq->items[0]);
  int64_t outRank = static_cast<int64_t>(first.size()) + (newAxis ? 1 : 0);
  FailureOr<int64_t> axis = axisAttr(node, 0, outRank);
  if (failed(axis))
    return failure();
  Location loc = nodeLoc(node);
  SmallVector<Value> parts;
  for (Value v : seq->items) {
    if (newAxis) {
      Shape s = shapeOf(v);
      s.insert(s.begin() + *axis, 1);
      v = reshape(v, s, loc);
    }
    parts.push_back(v);
  }
  FailureOr<Shape> out = concatShape(node, parts, *axis);
  if (failed(out))
    return failure();
  define(node, 0,
         builder_.createOrFold<ConcatOp>(
             loc, tensorType(*out, seq->elementType), parts,
             builder_.getI64IntegerAttr(*axis)));
  return success();
}
