//===- GraphOps.cpp - Strata graph dialect ops: verifiers -----------------===//

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace strata::graph;

static Shape shapeOf(Value v) {
  auto t = cast<ShapedType>(v.getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

static Type elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

static std::string shapeString(const Shape &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

LogicalResult strata::graph::verifyBroadcastingOp(Operation *op) {
  bool isSelect = isa<SelectOp>(op);
  bool isCompare = isa<EqualOp, LessOp, GreaterOp>(op);
  bool isLogical = isa<AndOp, OrOp>(op);
  auto dataOperands = op->getOperands().drop_front(isSelect ? 1 : 0);
  Type elementType = elementTypeOf(dataOperands.front());
  for (Value v : dataOperands)
    if (elementTypeOf(v) != elementType)
      return op->emitOpError("operands must have the same element type, got ")
             << elementType << " and " << elementTypeOf(v);
  if (isLogical && !elementType.isInteger(1))
    return op->emitOpError("operands must be i1 tensors");

  std::vector<Shape> shapes;
  for (Value v : op->getOperands())
    shapes.push_back(shapeOf(v));
  std::optional<Shape> expected = broadcastShapes(shapes);
  if (!expected)
    return op->emitOpError("operand shapes do not broadcast");
  Value result = op->getResult(0);
  if (shapeOf(result) != *expected)
    return op->emitOpError("result shape must be the broadcast shape ")
           << shapeString(*expected) << ", got "
           << shapeString(shapeOf(result));
  Type expectedElement =
      isCompare ? IntegerType::get(op->getContext(), 1) : elementType;
  if (elementTypeOf(result) != expectedElement)
    return op->emitOpError("result element type must be ") << expectedElement;
  return success();
}

LogicalResult ConstantOp::verify() {
  if (!isa<ElementsAttr>(getValue()))
    return emitOpError("value must be an elements attribute");
  return success();
}

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("parameter name must not be empty");
  if (std::optional<uint64_t> ranks = getShardRanks()) {
    if (*ranks < 2)
      return emitOpError("a sharded parameter needs 2 or more ranks, not ")
             << *ranks;
    auto init = getInitialValueAttr();
    if (!init)
      return emitOpError("a sharded parameter needs its whole initial value");
    auto whole = cast<ShapedType>(init.getType());
    auto shard = cast<ShapedType>(getType());
    int64_t c = (whole.getNumElements() + static_cast<int64_t>(*ranks) - 1) /
                static_cast<int64_t>(*ranks);
    if (shard.getElementType() != whole.getElementType() ||
        shard.getRank() != 1 || shard.getDimSize(0) != c)
      return emitOpError("a shard of ")
             << whole << " over " << *ranks << " ranks is "
             << RankedTensorType::get({c}, whole.getElementType()) << ", not "
             << shard;
    return success();
  }
  if (auto init = getInitialValueAttr())
    if (init.getType() != getType())
      return emitOpError("initial value type ")
             << init.getType() << " does not match result type " << getType();
  return success();
}

LogicalResult MatMulOp::verify() {
  if (elementTypeOf(getLhs()) != elementTypeOf(getRhs()) ||
      elementTypeOf(getLhs()) != elementTypeOf(getResult()))
    return emitOpError("operands and result must share the element type");
  std::string why;
  std::optional<Shape> expected =
      matmulShape(shapeOf(getLhs()), shapeOf(getRhs()), &why, getTransposeLhs(),
                  getTransposeRhs());
  if (!expected)
    return emitOpError("invalid operand shapes: ") << why;
  if (*expected != shapeOf(getResult()))
    return emitOpError("result shape must be ") << shapeString(*expected);
  if (getRows()) {
    if (shapeOf(getLhs()).size() != 2 || shapeOf(getRhs()).size() != 2)
      return emitOpError("with rows, both operands must be matrices");
    if (getTransposeLhs() && getTransposeRhs())
      return emitOpError("with rows and transpose_lhs, the rhs must not be "
                         "transposed");
  }
  return success();
}

LogicalResult CompactRowsOp::verify() {
  if (shapeOf(getOrder()) != shapeOf(getMask()))
    return emitOpError("order must have the mask's shape");
  return success();
}

LogicalResult GroupRowsOp::verify() {
  if (getMasks().empty())
    return emitOpError("needs at least one mask");
  Shape rows = shapeOf(getMasks().front());
  for (Value m : getMasks())
    if (shapeOf(m) != rows)
      return emitOpError("masks must share their length");
  if (shapeOf(getOrder()) != rows)
    return emitOpError("order must have the masks' shape");
  if (shapeOf(getOffsets()) != Shape{int64_t(getMasks().size()) + 1})
    return emitOpError("offsets must have one entry per mask and one more");
  return success();
}

LogicalResult GroupedMatMulOp::verify() {
  Shape a = shapeOf(getLhs()), y = shapeOf(getResult());
  int64_t groups = getWeights().size();
  if (groups == 0)
    return emitOpError("needs at least one weight");
  if (shapeOf(getOffsets()) != Shape{groups + 1})
    return emitOpError("offsets must have one entry per weight and one more");
  Type et = elementTypeOf(getLhs());
  if (elementTypeOf(getResult()) != et)
    return emitOpError("operands and result must share the element type");
  Shape w0 = shapeOf(getWeights().front());
  for (Value w : getWeights())
    if (shapeOf(w) != w0 || elementTypeOf(w) != et)
      return emitOpError("weights must share the lhs's element type and one "
                         "shape");
  int64_t k = getTransposeRhs() ? w0[1] : w0[0];
  int64_t n = getTransposeRhs() ? w0[0] : w0[1];
  if (a[1] != k)
    return emitOpError("lhs has ")
           << a[1] << " columns, the weights " << k << " rows";
  if (y != Shape{a[0], n})
    return emitOpError("result shape must be ") << shapeString({a[0], n});
  return success();
}

LogicalResult SegmentMatMulOp::verify() {
  Shape a = shapeOf(getLhs()), b = shapeOf(getRhs());
  if (a[0] != b[0])
    return emitOpError("lhs and rhs must have the same rows");
  Type et = elementTypeOf(getLhs());
  if (elementTypeOf(getRhs()) != et || elementTypeOf(getResult()) != et)
    return emitOpError("operands and result must share the element type");
  if (shapeOf(getResult()) != Shape{a[1], b[1]})
    return emitOpError("result shape must be ") << shapeString({a[1], b[1]});
  int64_t groups = shapeOf(getOffsets())[0] - 1;
  int64_t segment = static_cast<int64_t>(getSegment());
  if (segment < 0 || segment >= groups)
    return emitOpError("segment ")
           << segment << " out of range for " << groups << " groups";
  return success();
}

/// Checks that `axes` is a strictly increasing list of dimensions of `rank`.
static LogicalResult verifyAxes(Operation *op, ArrayRef<int64_t> axes,
                                int64_t rank) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      return op->emitOpError("axis ")
             << axes[i] << " out of range for rank " << rank;
    if (i > 0 && axes[i] <= axes[i - 1])
      return op->emitOpError("axes must be strictly increasing");
  }
  return success();
}

template <typename ReduceOpT> static LogicalResult verifyReduce(ReduceOpT op) {
  Shape in = shapeOf(op.getInput());
  if (failed(verifyAxes(op, op.getAxes(), in.size())))
    return failure();
  if (elementTypeOf(op.getInput()) != elementTypeOf(op.getResult()))
    return op.emitOpError("result element type must match the input");
  std::vector<int64_t> axes(op.getAxes().begin(), op.getAxes().end());
  Shape expected = reduceShape(in, axes, op.getKeepdims());
  if (expected != shapeOf(op.getResult()))
    return op.emitOpError("result shape must be ") << shapeString(expected);
  return success();
}

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceSumSquareOp::verify() {
  if (!isa<FloatType>(getInput().getType().getElementType()))
    return emitOpError("squares floating-point tensors only");
  return verifyReduce(*this);
}

static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ")
           << axis << " out of range [0, " << rank << ")";
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getType().getRank());
}
LogicalResult LogSoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getType().getRank());
}

LogicalResult LayerNormOp::verify() {
  Shape in = shapeOf(getInput());
  if (failed(verifyAxis(*this, getAxis(), in.size())))
    return failure();
  Shape normalized(in.begin() + getAxis(), in.end());
  if (!broadcastsTo(shapeOf(getScale()), normalized))
    return emitOpError("scale shape does not broadcast to the normalised "
                       "shape ")
           << shapeString(normalized);
  if (getBias() && !broadcastsTo(shapeOf(getBias()), normalized))
    return emitOpError("bias shape does not broadcast to the normalised "
                       "shape ")
           << shapeString(normalized);
  if (getResult().getType() != getInput().getType())
    return emitOpError("result type must equal the input type");
  if (getEpsilon().convertToFloat() < 0)
    return emitOpError("epsilon must be non-negative");
  return success();
}

/// graph.attention and graph.attention_grad: q [..., T, D], k [..., S, D],
/// v [..., S, Dv] with the same batch dimensions (at most two), the mask as
/// `maskKind` says, broadcasting to [..., T, S].
static LogicalResult verifyAttention(Operation *op, Value q, Value k, Value v,
                                     Value mask, int64_t maskKind) {
  Shape sq = shapeOf(q), sk = shapeOf(k), sv = shapeOf(v);
  size_t rank = sq.size();
  if (rank < 2 || rank > 4 || sk.size() != rank || sv.size() != rank)
    return op->emitOpError("q, k and v must have the same rank, 2 to 4");
  if (!std::equal(sq.begin(), sq.end() - 2, sk.begin()) ||
      !std::equal(sq.begin(), sq.end() - 2, sv.begin()))
    return op->emitOpError("q, k and v must share their batch dimensions");
  if (sq[rank - 1] != sk[rank - 1])
    return op->emitOpError("q and k must have the same last dimension");
  if (sk[rank - 2] != sv[rank - 2])
    return op->emitOpError("k and v must have as many rows (keys)");
  if (elementTypeOf(q) != elementTypeOf(k) ||
      elementTypeOf(q) != elementTypeOf(v))
    return op->emitOpError("q, k and v must have one element type");
  if (maskKind < 0 || maskKind > 3)
    return op->emitOpError("mask_kind must be 0 (none), 1 (additive), 2 "
                           "(keep where true) or 3 (drop where true)");
  if ((maskKind == 0) != !mask)
    return op->emitOpError("a mask operand goes with a mask_kind of 1 to 3");
  if (!mask)
    return success();
  Shape scores(sq.begin(), sq.end() - 1);
  scores.push_back(sk[rank - 2]);
  if (!broadcastsTo(shapeOf(mask), scores))
    return op->emitOpError("mask does not broadcast to the scores' shape ")
           << shapeString(scores);
  bool boolean = elementTypeOf(mask).isInteger(1);
  if (boolean != (maskKind != 1))
    return op->emitOpError(maskKind == 1 ? "an additive mask must be float"
                                         : "a keep/drop mask must be i1");
  if (maskKind == 1 && elementTypeOf(mask) != elementTypeOf(q))
    return op->emitOpError("an additive mask must have q's element type");
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttention(*this, getQ(), getK(), getV(), getMask(),
                             getMaskKind())))
    return failure();
  Shape out = shapeOf(getQ());
  out.back() = shapeOf(getV()).back();
  if (shapeOf(getResult()) != out ||
      elementTypeOf(getResult()) != elementTypeOf(getQ()))
    return emitOpError("result must be ") << shapeString(out) << " of q's type";
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttention(*this, getQ(), getK(), getV(), getMask(),
                             getMaskKind())))
    return failure();
  if (getQGrad().getType() != getQ().getType() ||
      getKGrad().getType() != getK().getType() ||
      getVGrad().getType() != getV().getType())
    return emitOpError("gradients must have the types of q, k and v");
  Shape out = shapeOf(getQ());
  out.back() = shapeOf(getV()).back();
  if (shapeOf(getGrad()) != out)
    return emitOpError("grad must be ") << shapeString(out);
  return success();
}

std::optional<double> strata::graph::splatFloatValue(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

LogicalResult FusedOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << body.getNumArguments() << " arguments for " << getInputs().size()
           << " inputs";
  for (auto [arg, in] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError("body argument types must be the input types");
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().getTypes() != getResultTypes())
    return emitOpError("body must yield values of the result types");
  if (getResults().empty())
    return emitOpError("needs a result");
  Type shape = getResult(0).getType();
  for (Value r : getResults())
    if (r.getType() != shape)
      return emitOpError("results must share one type");
  for (Value in : getInputs())
    if (!broadcastsTo(shapeOf(in), shapeOf(getResult(0))) ||
        elementTypeOf(in) != elementTypeOf(getResult(0)))
      return emitOpError("inputs must broadcast to the results' shape and "
                         "have their element type");
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (elementTypeOf(getInput()) != elementTypeOf(getResult()))
    return emitOpError("element type must not change");
  if (numElements(shapeOf(getInput())) != numElements(shapeOf(getResult())))
    return emitOpError("element count must not change");
  return success();
}

LogicalResult TransposeOp::verify() {
  Shape in = shapeOf(getInput());
  ArrayRef<int64_t> perm = getPerm();
  if (perm.size() != in.size())
    return emitOpError("perm must have one entry per dimension");
  std::vector<bool> seen(in.size(), false);
  Shape expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p])
      return emitOpError("perm must be a permutation of [0, rank)");
    seen[p] = true;
    expected.push_back(in[p]);
  }
  if (elementTypeOf(getInput()) != elementTypeOf(getResult()))
    return emitOpError("element type must not change");
  if (expected != shapeOf(getResult()))
    return emitOpError("result shape must be ") << shapeString(expected);
  return success();
}

LogicalResult SliceOp::verify() {
  Shape in = shapeOf(getInput()), out = shapeOf(getResult());
  if (in.size() != out.size())
    return emitOpError("result rank must equal input rank");
  if (getOffsets().size() != in.size() || getStrides().size() != in.size())
    return emitOpError("offsets and strides need one entry per dimension");
  if (elementTypeOf(getInput()) != elementTypeOf(getResult()))
    return emitOpError("element type must not change");
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t offset = getOffsets()[d], stride = getStrides()[d];
    if (stride == 0)
      return emitOpError("stride of dimension ") << d << " is zero";
    if (out[d] == 0)
      continue;
    int64_t last = offset + (out[d] - 1) * stride;
    if (offset < 0 || offset >= in[d] || last < 0 || last >= in[d])
      return emitOpError("dimension ")
             << d << " reads out of bounds (offset " << offset << ", stride "
             << stride << ", size " << out[d] << ", input size " << in[d]
             << ")";
  }
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  Shape expected = shapeOf(getInputs().front());
  if (failed(verifyAxis(*this, getAxis(), expected.size())))
    return failure();
  Type elementType = elementTypeOf(getInputs().front());
  expected[getAxis()] = 0;
  for (Value v : getInputs()) {
    Shape s = shapeOf(v);
    if (s.size() != expected.size() || elementTypeOf(v) != elementType)
      return emitOpError("inputs must share rank and element type");
    for (size_t d = 0; d < s.size(); ++d)
      if (d != getAxis() && s[d] != expected[d])
        return emitOpError("inputs differ in dimension ") << d;
    expected[getAxis()] += s[getAxis()];
  }
  if (expected != shapeOf(getResult()) ||
      elementTypeOf(getResult()) != elementType)
    return emitOpError("result must be ") << shapeString(expected);
  return success();
}

LogicalResult BroadcastOp::verify() {
  if (elementTypeOf(getInput()) != elementTypeOf(getResult()))
    return emitOpError("element type must not change");
  if (!broadcastsTo(shapeOf(getInput()), shapeOf(getResult())))
    return emitOpError("input shape ")
           << shapeString(shapeOf(getInput())) << " does not broadcast to "
           << shapeString(shapeOf(getResult()));
  return success();
}

LogicalResult GatherOp::verify() {
  Shape data = shapeOf(getData());
  if (failed(verifyAxis(*this, getAxis(), data.size())))
    return failure();
  Shape expected = gatherShape(data, shapeOf(getIndices()), getAxis());
  if (expected != shapeOf(getResult()) ||
      elementTypeOf(getResult()) != elementTypeOf(getData()))
    return emitOpError("result must be ")
           << shapeString(expected) << " of " << elementTypeOf(getData());
  return success();
}

namespace {

/// matmul(transpose(x)) with x's last two dimensions swapped becomes a
/// matmul that reads x transposed: no copy of x (a weight, usually).
struct FoldTransposeIntoMatMul : public OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  static bool swapsLastTwo(TransposeOp t) {
    ArrayRef<int64_t> perm = t.getPerm();
    size_t r = perm.size();
    if (r < 2 || perm[r - 1] != static_cast<int64_t>(r - 2) ||
        perm[r - 2] != static_cast<int64_t>(r - 1))
      return false;
    for (size_t d = 0; d + 2 < r; ++d)
      if (perm[d] != static_cast<int64_t>(d))
        return false;
    return true;
  }

  LogicalResult matchAndRewrite(MatMulOp op,
                                PatternRewriter &rewriter) const override {
    auto lhs = op.getLhs().getDefiningOp<TransposeOp>();
    auto rhs = op.getRhs().getDefiningOp<TransposeOp>();
    // `rows` counts the stored lhs's rows: a folded transpose would change
    // which those are.
    bool foldLhs = lhs && swapsLastTwo(lhs) && !op.getRows();
    bool foldRhs =
        rhs && swapsLastTwo(rhs) && !(op.getRows() && op.getTransposeLhs());
    if (!foldLhs && !foldRhs)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      if (foldLhs) {
        op.getLhsMutable().assign(lhs.getInput());
        op.setTransposeLhs(!op.getTransposeLhs());
      }
      if (foldRhs) {
        op.getRhsMutable().assign(rhs.getInput());
        op.setTransposeRhs(!op.getTransposeRhs());
      }
    });
    return success();
  }
};

} // namespace

void MatMulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<FoldTransposeIntoMatMul>(context);
}

namespace {

/// add(slice_grad(a), slice_grad(b)) where the two windows are adjacent
/// along one axis (unit strides, the same elsewhere) is
/// slice_grad(concat(a, b)): the gradient of a tensor split into pieces
/// (GPT-2's fused q, k, v projection) becomes one concatenation instead of
/// zero-filled tensors summed. A window covering the whole tensor then
/// folds away.
struct AdjacentSliceGrads : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    auto a = add.getLhs().getDefiningOp<SliceGradOp>();
    auto b = add.getRhs().getDefiningOp<SliceGradOp>();
    if (!a || !b || a == b || !a->hasOneUse() || !b->hasOneUse() ||
        a.getType() != add.getType() || b.getType() != add.getType() ||
        elementTypeOf(a.getGrad()) != elementTypeOf(b.getGrad()))
      return failure();
    auto unit = [](ArrayRef<int64_t> s) {
      return llvm::all_of(s, [](int64_t x) { return x == 1; });
    };
    if (!unit(a.getStrides()) || !unit(b.getStrides()))
      return failure();
    Shape sa = shapeOf(a.getGrad()), sb = shapeOf(b.getGrad());
    ArrayRef<int64_t> oa = a.getOffsets(), ob = b.getOffsets();
    int axis = -1;
    for (size_t d = 0; d < sa.size(); ++d) {
      if (oa[d] == ob[d] && sa[d] == sb[d])
        continue;
      if (axis >= 0)
        return failure(); // Differ along two axes.
      axis = static_cast<int>(d);
    }
    if (axis < 0)
      return failure(); // The same window: not this pattern.
    if (oa[axis] + sa[axis] != ob[axis]) {
      if (ob[axis] + sb[axis] != oa[axis])
        return failure(); // Not adjacent.
      std::swap(a, b);
      std::swap(sa, sb);
    }
    Shape joined = sa;
    joined[axis] += sb[axis];
    auto type = RankedTensorType::get(joined, elementTypeOf(a.getGrad()));
    Value concat = rewriter.create<ConcatOp>(
        add.getLoc(), type, ValueRange{a.getGrad(), b.getGrad()},
        rewriter.getI64IntegerAttr(axis));
    rewriter.replaceOpWithNewOp<SliceGradOp>(
        add, add.getType(), concat, a.getOffsetsAttr(), a.getStridesAttr());
    return success();
  }
};

} // namespace

void AddOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<AdjacentSliceGrads>(context);
}

LogicalResult CrossEntropyOp::verify() {
  Shape logits = shapeOf(getLogits()), labels = shapeOf(getLabels());
  if (logits.size() != 2 || labels.size() != 1 || logits[0] != labels[0])
    return emitOpError("expects logits [N, V] and labels [N]");
  if (getType().getRank() != 0)
    return emitOpError("result must be a scalar");
  return success();
}

LogicalResult TriluOp::verify() {
  if (getType().getRank() < 2)
    return emitOpError("input must have rank >= 2");
  return success();
}

#include "dialects/Graph/GradientInterface.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/Graph/GraphOps.cpp.inc"
