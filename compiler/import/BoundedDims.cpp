//===- BoundedDims.cpp - Dimensions whose length the data decide ----------===//
//
// NonZero on the data path (transformers' mixture-of-experts routing:
// `torch.where(expert_mask[e])`) gives as many rows as the mask has true
// entries, a count known only when the step runs. It is bounded: at most
// one row per element of NonZero's input. Strata holds such a dimension at
// its bound, one row per candidate position in NonZero's (row-major) order,
// with an i1 mask of the rows that are real:
//
//  * NonZero itself becomes every candidate's coordinates (a constant)
//    gathered in an order that puts the real ones first
//    (graph.compact_rows of `input != 0`, which also counts them); the
//    mask of real rows is then `position < count`.
//  * Ops that treat rows independently (elementwise ops, matrix products
//    over other axes, views, gathers at the rows' coordinates, softmax and
//    reductions over other axes) compute every candidate row, the real and
//    the others alike, except matrix products of the rows by a matrix:
//    those take the count (graph.matmul's `rows`) and compute the real rows
//    only, the others zero. A candidate that is not real computes what it
//    would if it were (its coordinates are valid), or, after such a
//    product, from zero rows; it is zeroed before it can reach anything
//    real, and the products' gradients stop at the count too. What this
//    does not cover: a function with no finite value or derivative at zero
//    (a log, a division by the rows) applied after a product, whose
//    gradient then reaches a parameter broadcast over the rows (a bias
//    summed over them) -- a non-finite gradient norm, which stops the run
//    (--on-nan), not a silent error. Experts as models write them (SwiGLU,
//    GELU, ReLU MLPs) are finite there; --nonzero-rows=bound avoids it.
//  * Ops that combine rows (ScatterElements, the index_add_ that puts each
//    expert's output back) take only the real ones: the others' updates are
//    zeroed and do not count as landing.
//  * Shape() of such a tensor gives a symbolic length; Reshape, Expand and
//    ConstantOfShape resolve it to the bound. Any other use of the length
//    (arithmetic, a comparison, a graph output) is refused, naming the
//    node, as is any op not listed here taking such a tensor.
//
// The result equals the model's on the real rows, for every routing: memory
// is planned at the bound, the products cost the real rows (for a mixture
// of experts: tokens x top-k rows over all experts, as a grouped product
// would), the rest of the row-wise work the bound.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace strata;
using namespace strata::graph;
using namespace strata::importer;

namespace {
/// How an op treats a dimension of data-dependent length in its inputs.
enum class RowRule {
  Refused,     ///< Not taken.
  Elementwise, ///< Broadcasting: the dimension aligns from the right.
  Transpose,
  Squeeze,
  Unsqueeze,
  Reshape, ///< Reshape, Flatten: kept whole, found by the products beside.
  Split,
  Slice,
  Concat,
  Expand,
  Gather,
  MatMul,
  Gemm, ///< Rows as A (not transposed); C broadcast over them.
  Softmax,
  Reduce,
  Scatter, ///< ScatterElements: takes the real rows (in its handler).
  Shape,   ///< Gives a symbolic length (in its handler).
};
} // namespace

static RowRule rowRule(StringRef op) {
  return llvm::StringSwitch<RowRule>(op)
      .Cases("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum",
             RowRule::Elementwise)
      .Cases("And", "Or", "Equal", "Less", "Greater", "LessOrEqual",
             "GreaterOrEqual", "Mod", RowRule::Elementwise)
      .Cases("Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Tanh", "Erf",
             "Sigmoid", "Relu", RowRule::Elementwise)
      .Cases("Not", "Gelu", "Elu", "Celu", "Selu", "LeakyRelu", "HardSigmoid",
             "HardSwish", "Softplus", RowRule::Elementwise)
      .Cases("Mish", "Swish", "Identity", "Cast", "CastLike", "Clip", "Abs",
             "Sin", "Cos", RowRule::Elementwise)
      .Cases("Where", "Floor", "Ceil", "Round", "Sign", "Mean", "Dropout",
             RowRule::Elementwise)
      .Case("Transpose", RowRule::Transpose)
      .Case("Squeeze", RowRule::Squeeze)
      .Case("Unsqueeze", RowRule::Unsqueeze)
      .Cases("Reshape", "Flatten", RowRule::Reshape)
      .Case("Split", RowRule::Split)
      .Case("Slice", RowRule::Slice)
      .Case("Concat", RowRule::Concat)
      .Case("Expand", RowRule::Expand)
      .Case("Gather", RowRule::Gather)
      .Case("MatMul", RowRule::MatMul)
      .Case("Gemm", RowRule::Gemm)
      .Cases("Softmax", "LogSoftmax", RowRule::Softmax)
      .Cases("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
             "ReduceSumSquare", RowRule::Reduce)
      .Case("ScatterElements", RowRule::Scatter)
      .Case("Shape", RowRule::Shape)
      .Default(RowRule::Refused);
}

/// Whether input `index` of `op` may be a shape holding a symbolic length:
/// the ops that move shape entries about and those that take a shape.
static bool takesSymbolicLength(StringRef op, size_t index) {
  if (op == "Concat" || op == "Shape")
    return true;
  if (op == "Gather" || op == "Slice" || op == "Squeeze" || op == "Unsqueeze" ||
      op == "Identity" || op == "Cast" || op == "ConstantOfShape")
    return index == 0;
  if (op == "Reshape")
    return index <= 1;
  if (op == "Expand")
    return index == 1;
  return false;
}

static int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

InFlightDiagnostic Importer::boundedError(const Node &node, BoundedDim dim) {
  const BoundSet &set = boundSets_[dim.set];
  return nodeError(node) << "takes a tensor whose dimension " << dim.axis
                         << " has a length the data decide (the rows of the "
                            "NonZero "
                         << set.origin << ", at most " << set.bound << "): ";
}

LogicalResult Importer::checkBoundedInputs(const Node &node) {
  resolvedLengths_.clear();
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    Value v = input(node, i);
    if (!v)
      continue;
    if (symbolic_.contains(v)) {
      bool castToI64 =
          node.opType != "Cast" || intAttr(node, "to", 0) == 7 /*INT64*/;
      if (!takesSymbolicLength(node.opType, i) || !castToI64)
        return nodeError(node)
               << "uses input '" << node.inputs[i]
               << "', a shape holding a length the data decide (the rows of "
                  "a NonZero), as data; Strata holds such a length at its "
                  "bound and can use it only as a shape (Reshape, Expand, "
                  "ConstantOfShape)";
    }
    if (std::optional<BoundedDim> b = boundedDim(v))
      if (rowRule(node.opType) == RowRule::Refused)
        return boundedError(node, *b)
               << node.opType
               << " does not take such a tensor in Strata (elementwise ops, "
                  "views, Gather, MatMul, Gemm, Softmax, reductions over "
                  "other axes and ScatterElements do)";
  }
  return success();
}

Value Importer::boundMask(unsigned set, const Shape &shape, int64_t axis,
                          Type et, Location loc) {
  const BoundSet &b = boundSets_[set];
  Shape view(shape.size(), 1);
  view[axis] = b.bound;
  Value mask = reshape(b.mask, view, loc);
  if (et.isInteger(1))
    return mask;
  return builder_.createOrFold<SelectOp>(loc, tensorType(view, et), mask,
                                         scalarConstant(et, 1.0, loc),
                                         scalarConstant(et, 0.0, loc));
}

Value Importer::zeroPadRows(Value v, BoundedDim dim, Location loc) {
  Shape shape = shapeOf(v);
  Value mask = boundMask(dim.set, shape, dim.axis, builder_.getI1Type(), loc);
  return builder_.createOrFold<SelectOp>(
      loc, v.getType(), mask, v, scalarConstant(elementTypeOf(v), 0.0, loc));
}

LogicalResult Importer::boundedNonZero(const Node &node, Value x) {
  Shape shape = shapeOf(x);
  int64_t rank = shape.size();
  if (rank == 0)
    return nodeError(node) << "the input is a scalar; give it rank 1";
  if (boundedDim(x))
    return boundedError(node, *boundedDim(x))
           << "NonZero of such a tensor is not supported";
  int64_t bound = numElements(shape);
  if (bound <= 0)
    return nodeError(node) << "its input " << x.getType()
                           << " is empty; NonZero's rows would be none";
  if (bound > (int64_t(1) << 26) / rank)
    return nodeError(node)
           << "its input " << x.getType() << " has " << bound
           << " elements; Strata holds NonZero's rows at that bound and "
              "supports at most "
           << (int64_t(1) << 26) / rank;
  if (boundSets_.size() >= (1u << 20))
    return nodeError(node) << "the model has more than 2^20 data-path "
                              "NonZero nodes";
  Location loc = nodeLoc(node);
  // Every candidate's coordinates, in NonZero's (row-major) order.
  std::vector<int64_t> coords(rank * bound);
  for (int64_t k = 0; k < bound; ++k) {
    int64_t rem = k;
    for (int64_t d = rank; d-- > 0;) {
      coords[d * bound + k] = rem % shape[d];
      rem /= shape[d];
    }
  }
  Type et = elementTypeOf(x);
  Value nonzero = x;
  if (!et.isInteger(1)) {
    auto i1 = tensorType(shape, builder_.getI1Type());
    Value zero = scalarConstant(et, 0.0, loc);
    nonzero = builder_.createOrFold<NotOp>(
        loc, i1, builder_.createOrFold<EqualOp>(loc, i1, x, zero));
  }
  if (!options_.compactRows) {
    // Every candidate in NonZero's order; the mask says which are real.
    boundSets_.push_back({reshape(nonzero, {bound}, loc), Value(), bound,
                          std::nullopt, nodeLabel(node)});
    Value result = intConstant({rank, bound}, coords, loc);
    define(node, 0, result);
    boundedDims_[result] = {unsigned(boundSets_.size() - 1), 1};
    nonNegative_.insert(result);
    return success();
  }
  // The real candidates first: the rows' order, their count, and the
  // candidates' coordinates in that order.
  IntegerAttr expected;
  if (auto it = density_.find(x); it != density_.end())
    expected = builder_.getI64IntegerAttr(std::clamp<int64_t>(
        std::llround(it->second * double(bound)), 0, bound));
  auto compact = builder_.create<CompactRowsOp>(
      loc, tensorType({bound}, builder_.getI64Type()),
      tensorType({}, builder_.getI64Type()), reshape(nonzero, {bound}, loc),
      expected);
  std::vector<int64_t> iota(bound);
  for (int64_t i = 0; i < bound; ++i)
    iota[i] = i;
  Value real = builder_.createOrFold<LessOp>(
      loc, tensorType({bound}, builder_.getI1Type()),
      intConstant({bound}, iota, loc), compact.getCount());
  boundSets_.push_back({real, compact.getCount(), bound, compact.getExpected(),
                        nodeLabel(node)});
  Value result = builder_.create<GatherOp>(
      loc, tensorType({rank, bound}, builder_.getI64Type()),
      intConstant({rank, bound}, coords, loc), compact.getOrder(),
      builder_.getI64IntegerAttr(1));
  define(node, 0, result);
  boundedDims_[result] = {unsigned(boundSets_.size() - 1), 1};
  nonNegative_.insert(result);
  return success();
}

/// The axis the dimension `b` of `in` becomes in `out` when `out` is a view
/// of it that keeps it whole: the products of the dimensions before and
/// after it match. `hint` (a position where a shape gave its symbolic
/// length) is tried first.
static std::optional<int64_t> keptAxis(const Shape &in, int64_t b,
                                       const Shape &out,
                                       std::optional<int64_t> hint) {
  int64_t before = product(ArrayRef(in).take_front(b));
  int64_t after = product(ArrayRef(in).drop_front(b + 1));
  auto keeps = [&](int64_t c) {
    return c >= 0 && c < int64_t(out.size()) && out[c] == in[b] &&
           product(ArrayRef(out).take_front(c)) == before &&
           product(ArrayRef(out).drop_front(c + 1)) == after;
  };
  if (hint && keeps(*hint))
    return *hint;
  if (hint)
    return std::nullopt;
  for (int64_t c = 0; c < int64_t(out.size()); ++c)
    if (keeps(c))
      return c;
  return std::nullopt;
}

bool Importer::isNonNegative(Value v) const {
  if (!v || nonNegative_.contains(v))
    return bool(v);
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) ||
      !isa<IntegerType>(attr.getElementType()))
    return false;
  return llvm::all_of(attr.getValues<APInt>(),
                      [](const APInt &i) { return !i.isNegative(); });
}

LogicalResult Importer::propagateBounded(const Node &node) {
  // The node's results (null where it has none).
  SmallVector<Value> results;
  for (const std::string &name : node.outputs)
    results.push_back(name.empty() ? Value() : values_.lookup(name));
  // Never negative: views and gathers of such values, their sums and
  // products.
  static const llvm::StringSet<> keepsSign = {
      "Transpose", "Split", "Squeeze",  "Unsqueeze", "Reshape", "Flatten",
      "Expand",    "Slice", "Identity", "Gather",    "Concat"};
  bool signKept = false;
  if (keepsSign.contains(node.opType) && !node.inputs.empty())
    signKept = node.opType == "Concat"
                   ? llvm::all_of(llvm::seq<size_t>(0, node.inputs.size()),
                                  [&](size_t i) {
                                    return isNonNegative(input(node, i));
                                  })
                   : nonNegative_.contains(input(node, 0));
  else if ((node.opType == "Add" || node.opType == "Mul") &&
           node.inputs.size() == 2)
    signKept = (nonNegative_.contains(input(node, 0)) ||
                nonNegative_.contains(input(node, 1))) &&
               isNonNegative(input(node, 0)) && isNonNegative(input(node, 1));
  if (signKept)
    for (Value v : results)
      if (v && isa<IntegerType>(elementTypeOf(v)))
        nonNegative_.insert(v);
  // A mask's expected density survives views, casts and picking classes.
  static const llvm::StringSet<> keepsDensity = {
      "Transpose", "Gather",   "Cast",    "Reshape", "Squeeze",
      "Unsqueeze", "Identity", "Flatten", "Slice",   "Split"};
  if (keepsDensity.contains(node.opType) && !node.inputs.empty())
    if (auto it = density_.find(input(node, 0)); it != density_.end()) {
      double d = it->second;
      for (Value v : results)
        if (v)
          density_[v] = d;
    }
  // Shapes that hold a symbolic length: Shape of rows of a data-dependent
  // length, and what the shape ops make of it while the symbol is still in
  // it (by where the value came from: a model's own constant of that value
  // is only a number).
  auto movesShape = [&](size_t i) { // Not an input a shape is taken from.
    bool consumes = (node.opType == "Reshape" && i == 1) ||
                    node.opType == "Expand" ||
                    node.opType == "ConstantOfShape" || node.opType == "Shape";
    return !consumes && symbolic_.contains(input(node, i));
  };
  bool fromSymbolic =
      node.opType == "Shape"
          ? bool(boundedDim(input(node, 0)))
          : llvm::any_of(llvm::seq<size_t>(0, node.inputs.size()), movesShape);
  for (Value v : results) {
    if (!v || !fromSymbolic)
      continue;
    DenseElementsAttr attr;
    if (!matchPattern(v, m_Constant(&attr)))
      return nodeError(node)
             << "mixes a shape holding a length the data decide (the rows of "
                "a NonZero) with data; Strata can use such a length only as "
                "a shape";
    if (!attr.getElementType().isInteger(64) || attr.getNumElements() > 1024)
      continue;
    for (const APInt &d : attr.getValues<APInt>())
      if (isSymbolicLength(d.getSExtValue())) {
        symbolic_.insert(v);
        break;
      }
  }
  // The inputs' data-dependent dimensions.
  SmallVector<std::optional<BoundedDim>> in;
  std::optional<BoundedDim> first;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    in.push_back(boundedDim(input(node, i)));
    if (in.back() && !first)
      first = in.back();
  }
  RowRule rule = rowRule(node.opType);
  // A shape with a symbolic length makes such a dimension.
  std::optional<std::pair<size_t, unsigned>> resolved;
  if (!resolvedLengths_.empty()) {
    if (resolvedLengths_.size() > 1)
      return nodeError(node) << "its shape holds more than one length the "
                                "data decide; Strata supports one";
    resolved = resolvedLengths_.front();
    if (first && first->set != resolved->second)
      return boundedError(node, *first)
             << "its shape holds the length of another NonZero's rows";
  }
  if (!first && !resolved)
    return success();
  if (rule == RowRule::Scatter || rule == RowRule::Shape)
    return success(); // Their handlers took the rows.

  Value out0 = results.empty() ? Value() : results[0];
  if (!out0)
    return success();
  Shape outShape = shapeOf(out0);
  int64_t outRank = outShape.size();
  std::optional<int64_t> axis;
  unsigned set = first ? first->set : resolved->second;
  auto refuse = [&](const char *why) {
    return boundedError(node, first ? *first : BoundedDim{set, 0}) << why;
  };
  Shape inShape = first ? shapeOf(input(node, 0)) : Shape();
  int64_t b = in.empty() || !in[0] ? -1 : in[0]->axis;

  switch (rule) {
  case RowRule::Refused:
    if (node.opType == "ConstantOfShape" && resolved) {
      axis = int64_t(resolved->first);
      break;
    }
    return refuse("not supported");
  case RowRule::Elementwise:
  case RowRule::Expand: {
    for (size_t i = 0; i < in.size(); ++i) {
      Value v = input(node, i);
      if (!v || (rule == RowRule::Expand && i > 0))
        continue;
      Shape s = shapeOf(v);
      if (!in[i])
        continue;
      if (in[i]->set != set)
        return refuse("it combines the rows of two different NonZero nodes");
      int64_t a = in[i]->axis + outRank - int64_t(s.size());
      if (axis && *axis != a)
        return refuse("its inputs hold the rows on different axes");
      axis = a;
    }
    if (rule == RowRule::Expand && resolved) {
      // The target shape (input 1) aligns with the output from the right.
      Shape target = shapeOf(input(node, 1));
      if (target.size() != 1)
        return refuse("its shape is not a list");
      int64_t a = int64_t(resolved->first) + outRank - target.front();
      if (axis && *axis != a)
        return refuse("its shape puts the rows on another axis");
      axis = a;
    }
    if (!axis)
      return refuse("not supported");
    // Every other operand must broadcast along the rows, not match them.
    for (size_t i = 0; i < in.size(); ++i) {
      Value v = input(node, i);
      if (!v || in[i] || (rule == RowRule::Expand && i > 0))
        continue;
      Shape s = shapeOf(v);
      int64_t a = *axis - (outRank - int64_t(s.size()));
      if (a >= 0 && s[a] != 1)
        return refuse("another operand has a fixed length along the rows "
                      "(it must broadcast along them)");
    }
    break;
  }
  case RowRule::Transpose: {
    std::optional<SmallVector<int64_t>> perm = intsAttr(node, "perm");
    if (!perm) {
      axis = outRank - 1 - b;
    } else {
      for (int64_t j = 0; j < int64_t(perm->size()); ++j)
        if ((*perm)[j] == b)
          axis = j;
    }
    break;
  }
  case RowRule::Squeeze:
  case RowRule::Unsqueeze: {
    LogicalResult status = success();
    std::optional<SmallVector<int64_t>> axes = axesOf(node, 1, status);
    if (failed(status))
      return failure();
    if (!axes)
      return refuse("Squeeze without axes would squeeze the rows when there "
                    "is one; give the axes");
    int64_t r = rule == RowRule::Squeeze ? int64_t(inShape.size()) : outRank;
    SmallVector<int64_t> norm;
    for (int64_t a : *axes)
      norm.push_back(normalizeAxis(a, r).value_or(a));
    if (rule == RowRule::Squeeze) {
      if (llvm::is_contained(norm, b))
        return refuse("Squeeze would remove the rows");
      axis = b - llvm::count_if(norm, [&](int64_t a) { return a < b; });
    } else {
      // The b-th output position that is not an inserted axis.
      int64_t seen = -1;
      for (int64_t c = 0; c < outRank; ++c)
        if (!llvm::is_contained(norm, c) && ++seen == b) {
          axis = c;
          break;
        }
    }
    break;
  }
  case RowRule::Reshape: {
    std::optional<int64_t> hint;
    if (resolved)
      hint = int64_t(resolved->first);
    if (b < 0)
      return refuse("its shape names the rows but its input holds none");
    axis = keptAxis(inShape, b, outShape, hint);
    if (!axis)
      return refuse("the reshape merges or splits the rows with another "
                    "dimension");
    break;
  }
  case RowRule::Split:
  case RowRule::Softmax: {
    FailureOr<int64_t> a = axisAttr(node, rule == RowRule::Split ? 0 : -1,
                                    int64_t(inShape.size()));
    if (failed(a))
      return failure();
    if (*a == b)
      return refuse(rule == RowRule::Split ? "Split along the rows"
                                           : "a softmax across the rows");
    for (Value v : results)
      if (v)
        boundedDims_[v] = {set, b};
    return success();
  }
  case RowRule::Slice: {
    if (node.inputs.size() < 4 || !input(node, 3))
      return refuse("a Slice without axes slices the rows");
    FailureOr<SmallVector<int64_t>> axes = constInts(node, 3, "axes");
    if (failed(axes))
      return failure();
    for (int64_t a : *axes)
      if (normalizeAxis(a, int64_t(inShape.size())).value_or(a) == b)
        return refuse("Slice along the rows");
    axis = b;
    break;
  }
  case RowRule::Concat: {
    FailureOr<int64_t> a = axisAttr(node, 0, int64_t(inShape.size()));
    if (failed(a))
      return failure();
    for (const auto &d : in)
      if (!d || d->set != set || d->axis != b)
        return refuse("Concat of tensors that do not all hold the same rows "
                      "on the same axis");
    if (*a == b)
      return refuse("Concat along the rows");
    axis = b;
    break;
  }
  case RowRule::Gather: {
    FailureOr<int64_t> g = axisAttr(node, 0, int64_t(inShape.size()));
    if (failed(g))
      return failure();
    int64_t idxRank = int64_t(shapeOf(input(node, 1)).size());
    if (in.size() > 1 && in[1]) {
      if (in[0])
        return refuse("Gather with rows in both the data and the indices");
      axis = *g + in[1]->axis;
    } else {
      if (*g == b)
        return refuse("Gather along the rows (picks rows by position)");
      axis = b < *g ? b : b + idxRank - 1;
    }
    break;
  }
  case RowRule::MatMul: {
    Shape a = shapeOf(input(node, 0)), c = shapeOf(input(node, 1));
    if (in[0]) {
      if (a.size() < 2 || in[0]->axis == int64_t(a.size()) - 1)
        return refuse("a matrix product over the rows");
      axis = in[0]->axis + outRank - int64_t(a.size());
    }
    if (in.size() > 1 && in[1]) {
      if (c.size() < 2 || in[1]->axis == int64_t(c.size()) - 2)
        return refuse("a matrix product over the rows");
      int64_t o = in[1]->axis + outRank - int64_t(c.size());
      if ((axis && *axis != o) || (in[0] && in[0]->set != in[1]->set))
        return refuse("both factors hold rows");
      axis = o;
    }
    break;
  }
  case RowRule::Gemm: {
    if (!in[0] || in[0]->axis != 0 || intAttr(node, "transA", 0) ||
        (in.size() > 1 && in[1]))
      return refuse("Gemm takes the rows only as A, not transposed");
    if (in.size() > 2 && in[2])
      return refuse("Gemm's C holds rows");
    axis = 0;
    break;
  }
  case RowRule::Reduce: {
    LogicalResult status = success();
    std::optional<SmallVector<int64_t>> axes = axesOf(node, 1, status);
    if (failed(status))
      return failure();
    if (!axes || axes->empty())
      return refuse("a reduction over every axis, the rows included");
    SmallVector<int64_t> norm;
    for (int64_t a : *axes)
      norm.push_back(normalizeAxis(a, int64_t(inShape.size())).value_or(a));
    if (llvm::is_contained(norm, b))
      return refuse("a reduction over the rows");
    axis = intAttr(node, "keepdims", 1)
               ? b
               : b - llvm::count_if(norm, [&](int64_t a) { return a < b; });
    break;
  }
  case RowRule::Scatter:
  case RowRule::Shape:
    return success();
  }
  if (!axis || *axis < 0 || *axis >= outRank ||
      outShape[*axis] != boundSets_[set].bound)
    return refuse("Strata could not follow the rows through it");
  for (auto [i, v] : llvm::enumerate(results)) {
    if (!v)
      continue;
    auto it = boundedDims_.find(v);
    if (it != boundedDims_.end() &&
        (it->second.set != set || it->second.axis != *axis))
      return refuse("its result is another tensor's rows");
    if (i == 0 || shapeOf(v) == outShape)
      boundedDims_[v] = {set, *axis};
  }
  return success();
}
