//===- FuseAttention.cpp - Attention chains become graph.attention --------===//
//
// Part of --strata-fuse-patterns (FusePatterns.cpp). An exporter writes
// scaled dot-product attention as
//
//   %s = graph.matmul %q, %kT          [..., T, S]   (or k with transpose_rhs)
//   %c = graph.mul %s, %scale          optional: mul or div by a scalar
//   %m = graph.select %mask, %c, %fill optional: select with a scalar fill,
//                                      or graph.add of a float mask
//   %p = graph.softmax %m axis = last
//   %o = graph.matmul %p, %v           [..., T, Dv]
//
// where every intermediate has the next as its only user. The chain becomes
// one graph.attention whose kernels never store the T x S scores. A constant
// mask that hides exactly the keys after each query (a causal mask, whatever
// its spelling: a boolean tril, an additive matrix of -inf or very negative
// values) becomes the `causal` attribute, which lets the kernels skip the
// hidden half. Masks that depend on a parameter stay unfused: graph.attention
// gives its mask no gradient.
//
//===----------------------------------------------------------------------===//

#include "passes/fusion/FusePatterns.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace strata::graph;

namespace strata {

namespace {

/// A mask value at or below this hides its key: exp() of it relative to
/// any visible score is zero in float.
constexpr double kHidden = -1e4;

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

bool singleUse(Value v) { return v.hasOneUse(); }

/// Whether `v` is computed from a parameter (then it would need a gradient).
bool dependsOnParam(Value v) {
  SmallVector<Value> work{v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !seen.insert(op).second)
      continue;
    if (isa<ParamOp>(op))
      return true;
    for (Value operand : op->getOperands())
      work.push_back(operand);
  }
  return false;
}

/// What the chain feeding the softmax is made of.
struct Chain {
  MatMulOp scores;
  double scale = 1;
  Value mask;
  int64_t maskKind = 0;
  double fill = 0;
  SmallVector<Operation *> ops; // Between the product and the softmax.
};

/// `v` as a product of q and k, optionally scaled by a constant scalar.
bool matchScaled(Value v, Chain &c) {
  Operation *op = v.getDefiningOp();
  if (auto mm = dyn_cast_or_null<MatMulOp>(op)) {
    c.scores = mm;
    return !mm.getTransposeLhs();
  }
  if (!isa_and_nonnull<MulOp, DivOp>(op))
    return false;
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  std::optional<double> s = splatFloatValue(rhs);
  if (!s && isa<MulOp>(op)) {
    std::swap(lhs, rhs);
    s = splatFloatValue(rhs);
  }
  if (!s || !shapeOf(rhs).empty() || !singleUse(lhs) || *s == 0)
    return false;
  auto mm = lhs.getDefiningOp<MatMulOp>();
  if (!mm || mm.getTransposeLhs())
    return false;
  c.scores = mm;
  c.scale = isa<DivOp>(op) ? 1.0 / *s : *s;
  c.ops.push_back(op);
  return true;
}

/// `v` (the softmax's input) as scaled scores, optionally masked.
bool matchChain(Value v, Chain &c) {
  Operation *op = v.getDefiningOp();
  if (auto sel = dyn_cast_or_null<SelectOp>(op)) {
    Value a = sel.getOnTrue(), b = sel.getOnFalse();
    std::optional<double> fill = splatFloatValue(b);
    c.maskKind = 2; // Keep where true.
    Value scores = a;
    if (!fill) {
      fill = splatFloatValue(a);
      c.maskKind = 3; // Drop where true.
      scores = b;
    }
    if (!fill || !singleUse(scores) || scores.getType() != v.getType())
      return false;
    c.fill = *fill;
    c.mask = sel.getCondition();
    c.ops.push_back(op);
    return matchScaled(scores, c);
  }
  if (auto add = dyn_cast_or_null<AddOp>(op)) {
    for (int side = 0; side < 2; ++side) {
      Value scores = add->getOperand(side), mask = add->getOperand(1 - side);
      if (scores.getType() != v.getType() || !singleUse(scores))
        continue;
      Chain attempt = c;
      if (!matchScaled(scores, attempt))
        continue;
      c = attempt;
      c.mask = mask;
      c.maskKind = 1;
      c.ops.push_back(op);
      return true;
    }
    return false;
  }
  return matchScaled(v, c);
}

/// What isCausal found for a mask constant (its value, the mask kind, T
/// and S): one model's layers share one mask, of T x S elements.
using CausalCache =
    llvm::DenseMap<std::tuple<Attribute, int64_t, int64_t, int64_t>, bool>;

/// Whether the constant `mask` (kind 1 to 3, broadcasting to [..., T, S])
/// hides exactly the keys j > i + S - T of each query i.
bool isCausal(Value mask, int64_t maskKind, double fill, int64_t t, int64_t s,
              CausalCache &cache) {
  auto c = mask.getDefiningOp<ConstantOp>();
  if (!c || (maskKind != 1 && fill > kHidden))
    return false;
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  ArrayRef<int64_t> shape = shapeOf(mask);
  if (!dense || dense.isSplat() || shape.size() < 2)
    return false;
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if (rows != t || cols != s)
    return false;
  auto key = std::make_tuple(Attribute(dense), maskKind, t, s);
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  bool &causal = cache[key];
  causal = false;
  // Whether element k hides its key.
  std::vector<bool> hidden;
  hidden.reserve(dense.getNumElements());
  if (maskKind == 1) {
    auto add = [&](double x) {
      hidden.push_back(x != 0);
      return x == 0 || x <= kHidden; // Otherwise a bias, not a mask.
    };
    if (dense.getElementType().isF32()) {
      for (float x : dense.getValues<float>())
        if (!add(x))
          return false;
    } else {
      for (APFloat f : dense.getValues<APFloat>())
        if (!add(f.convertToDouble()))
          return false;
    }
  } else {
    for (bool b : dense.getValues<bool>())
      hidden.push_back(maskKind == 2 ? !b : b);
  }
  int64_t n = static_cast<int64_t>(hidden.size());
  for (int64_t k = 0; k < n; ++k) {
    int64_t i = (k / cols) % rows, j = k % cols;
    if (hidden[k] != (j > i + s - t))
      return false;
  }
  return causal = true;
}

/// Fuses the chain ending in `softmax`, or returns false leaving it as is.
bool fuseAt(SoftmaxOp softmax, CausalCache &cache) {
  auto type = cast<RankedTensorType>(softmax.getType());
  int64_t rank = type.getRank();
  if (rank < 2 || rank > 4 ||
      static_cast<int64_t>(softmax.getAxis()) != rank - 1 ||
      !singleUse(softmax.getResult()))
    return false;
  auto pv = dyn_cast<MatMulOp>(*softmax->getUsers().begin());
  if (!pv || pv.getLhs() != softmax.getResult() || pv.getTransposeLhs())
    return false;
  // Everything between the product and the softmax disappears into the
  // fused op: none of it may have another user (a model returning its
  // masked scores, say).
  Chain c;
  if (!singleUse(softmax.getInput()) || !matchChain(softmax.getInput(), c) ||
      !singleUse(c.scores.getResult()))
    return false;
  if (c.mask && dependsOnParam(c.mask))
    return false;
  Value q = c.scores.getLhs(), kOrKT = c.scores.getRhs(), vOrVT = pv.getRhs();
  ArrayRef<int64_t> sq = shapeOf(q), sk = shapeOf(kOrKT), sv = shapeOf(vOrVT);
  if (static_cast<int64_t>(sq.size()) != rank ||
      static_cast<int64_t>(sk.size()) != rank ||
      static_cast<int64_t>(sv.size()) != rank ||
      sq.drop_back(2) != sk.drop_back(2) || sq.drop_back(2) != sv.drop_back(2))
    return false; // Broadcast batches (shared keys) stay unfused.
  auto et = type.getElementType();
  if (cast<RankedTensorType>(q.getType()).getElementType() != et ||
      cast<RankedTensorType>(vOrVT.getType()).getElementType() != et)
    return false;
  if (c.maskKind == 1 &&
      cast<RankedTensorType>(c.mask.getType()).getElementType() != et)
    return false;
  int64_t t = sq[rank - 2], s = type.getShape()[rank - 1];

  OpBuilder b(pv);
  Location loc = pv.getLoc();
  // k and v as [..., S, D]: undo a transposed operand with a transpose the
  // canonicalizer folds into the one that made it.
  auto swapLast = [&](Value x) {
    SmallVector<int64_t> perm, shape(shapeOf(x));
    for (int64_t d = 0; d < rank; ++d)
      perm.push_back(d);
    std::swap(perm[rank - 1], perm[rank - 2]);
    std::swap(shape[rank - 1], shape[rank - 2]);
    auto ty = RankedTensorType::get(
        shape, cast<RankedTensorType>(x.getType()).getElementType());
    return b.create<TransposeOp>(loc, ty, x, b.getDenseI64ArrayAttr(perm))
        .getResult();
  };
  Value k = c.scores.getTransposeRhs() ? kOrKT : swapLast(kOrKT);
  Value v = pv.getTransposeRhs() ? swapLast(vOrVT) : vOrVT;

  bool causal = c.mask && isCausal(c.mask, c.maskKind, c.fill, t, s, cache);
  Value mask = causal ? Value() : c.mask;
  auto attention = b.create<AttentionOp>(
      loc, pv.getType(), q, k, v, mask, b.getF64FloatAttr(c.scale),
      b.getI64IntegerAttr(mask ? c.maskKind : 0),
      b.getF64FloatAttr(mask ? c.fill : 0.0),
      causal ? b.getUnitAttr() : UnitAttr());
  pv.getResult().replaceAllUsesWith(attention.getResult());
  // Erase from the output back to the product; then constants left unused.
  SmallVector<Operation *> dead{pv, softmax};
  dead.append(c.ops.rbegin(), c.ops.rend());
  dead.push_back(c.scores);
  llvm::SetVector<Operation *> constants;
  for (Operation *op : dead) {
    for (Value x : op->getOperands())
      if (auto cst = x.getDefiningOp<ConstantOp>())
        constants.insert(cst);
    op->dropAllReferences();
  }
  for (Operation *op : dead)
    op->erase();
  for (Operation *cst : constants)
    if (cst->use_empty())
      cst->erase();
  return true;
}

} // namespace

unsigned fuseAttention(Block &body, std::optional<Location> &where) {
  SmallVector<SoftmaxOp> softmaxes(body.getOps<SoftmaxOp>());
  unsigned fused = 0;
  CausalCache cache;
  for (SoftmaxOp softmax : softmaxes) {
    Location loc = softmax.getLoc();
    if (!fuseAt(softmax, cache))
      continue;
    ++fused;
    if (!where)
      where = loc;
  }
  return fused;
}

} // namespace strata
