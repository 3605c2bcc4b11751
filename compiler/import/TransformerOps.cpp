//===- TransformerOps.cpp - ONNX's opset-23 transformer ops ---------------===//
//
// RMSNormalization is graph.layer_norm in its RMS form. RotaryEmbedding and
// Attention are compositions of graph ops (slices, products, matmuls, a
// softmax), so autodiff differentiates them and the attention fusion can
// recognise the result as it does exporters' own attention sub-graphs.
//
// Attention follows the operator's definition: 3-D inputs are split into
// heads; Q and K are each scaled by sqrt(scale); past keys and values are
// prepended (and returned as the present ones); grouped-query heads repeat
// each key/value head for consecutive query heads; softcap applies before
// the mask; a boolean mask allows where true, a float mask is added, and a
// mask shorter than the keys is padded with "masked"; is_causal masks key j
// for query i when j > i + offset (offset: the past length, or
// nonpad_kv_seqlen[b] - q_len for an external cache); nonpad_kv_seqlen masks
// the padding keys.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace strata;
using namespace strata::graph;
using namespace strata::importer;

LogicalResult Importer::rmsNorm(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value x = input(node, 0), scale = input(node, 1);
  Shape shape = shapeOf(x);
  FailureOr<int64_t> axis = axisAttr(node, -1, shape.size());
  if (failed(axis))
    return failure();
  Shape normalized(shape.begin() + *axis, shape.end());
  if (!broadcastsTo(shapeOf(scale), normalized))
    return nodeError(node) << "scale does not broadcast to the normalised "
                              "dimensions";
  if (elementTypeOf(scale) != elementTypeOf(x))
    return nodeError(node) << "scale and input differ in element type";
  Type stash =
      elementType(static_cast<int32_t>(intAttr(node, "stash_type", 1)));
  if (!stash || !isa<FloatType>(stash))
    return nodeError(node) << "unsupported stash_type";
  Location loc = nodeLoc(node);
  float epsilon = floatAttr(node, "epsilon", 1e-5f);
  // Normalised in the stash type, scaled in the input's.
  Value xs = builder_.createOrFold<CastOp>(loc, tensorType(shape, stash), x);
  Shape ones(normalized.size(), 1);
  auto onesType = tensorType(ones, stash);
  Value unit = builder_.create<ConstantOp>(
      loc, onesType,
      DenseElementsAttr::get(onesType, builder_.getFloatAttr(stash, 1.0)));
  Value n = builder_.create<LayerNormOp>(
      loc, xs.getType(), xs, unit, Value(), builder_.getI64IntegerAttr(*axis),
      builder_.getF32FloatAttr(epsilon), builder_.getUnitAttr());
  n = builder_.createOrFold<CastOp>(loc, x.getType(), n);
  define(node, 0, builder_.createOrFold<MulOp>(loc, x.getType(), n, scale));
  return success();
}

LogicalResult Importer::rotaryEmbedding(const Node &node) {
  if (failed(requireInputs(node, 3)))
    return failure();
  Value x = input(node, 0), cosCache = input(node, 1),
        sinCache = input(node, 2), positions = input(node, 3);
  Shape original = shapeOf(x);
  Type et = elementTypeOf(x);
  if (!isa<FloatType>(et) || elementTypeOf(cosCache) != et ||
      elementTypeOf(sinCache) != et)
    return nodeError(node) << "input and caches must be floats of one type";
  Location loc = nodeLoc(node);
  // Work in [B, S, H, D].
  Value v = x;
  Shape bshd;
  if (original.size() == 4) {
    bshd = {original[0], original[2], original[1], original[3]};
    v = builder_.createOrFold<TransposeOp>(
        loc, tensorType(bshd, et), x,
        builder_.getDenseI64ArrayAttr({0, 2, 1, 3}));
  } else if (original.size() == 3) {
    int64_t heads = intAttr(node, "num_heads", 0);
    if (heads <= 0 || original[2] % heads != 0)
      return nodeError(node) << "a 3-D input needs num_heads dividing its "
                                "hidden size "
                             << original[2];
    bshd = {original[0], original[1], heads, original[2] / heads};
    v = reshape(x, bshd, loc);
  } else {
    return nodeError(node) << "input must have rank 3 or 4";
  }
  int64_t b = bshd[0], s = bshd[1], h = bshd[2], d = bshd[3];
  int64_t r = intAttr(node, "rotary_embedding_dim", 0);
  if (r == 0)
    r = d;
  if (r < 2 || r > d || r % 2 != 0)
    return nodeError(node) << "rotary_embedding_dim " << r
                           << " must be even and at most the head size " << d;
  bool interleaved = intAttr(node, "interleaved", 0) != 0;
  Shape half{b, s, 1, r / 2};
  Value cos = cosCache, sin = sinCache;
  if (positions) {
    Type pt = elementTypeOf(positions);
    if (!pt.isInteger(64) && !pt.isInteger(32))
      return nodeError(node) << "position_ids must be integers";
    if (shapeOf(cosCache).size() != 2 || shapeOf(cosCache).back() != r / 2 ||
        shapeOf(sinCache) != shapeOf(cosCache) ||
        shapeOf(positions) != Shape{b, s})
      return nodeError(node) << "with position_ids [B, S] the caches must "
                                "be [positions, "
                             << r / 2 << "]";
    Shape gathered{b, s, r / 2};
    cos = builder_.createOrFold<GatherOp>(loc, tensorType(gathered, et),
                                          cosCache, positions,
                                          builder_.getI64IntegerAttr(0));
    sin = builder_.createOrFold<GatherOp>(loc, tensorType(gathered, et),
                                          sinCache, positions,
                                          builder_.getI64IntegerAttr(0));
  } else if (shapeOf(cosCache) != Shape{b, s, r / 2} ||
             shapeOf(sinCache) != shapeOf(cosCache)) {
    return nodeError(node) << "without position_ids the caches must be [B, "
                              "S, "
                           << r / 2 << "]";
  }
  cos = reshape(cos, half, loc);
  sin = reshape(sin, half, loc);
  auto slice = [&](Value from, int64_t start, int64_t count, int64_t step) {
    Shape out = shapeOf(from);
    out.back() = count;
    return builder_.createOrFold<SliceOp>(
        loc, tensorType(out, et), from,
        builder_.getDenseI64ArrayAttr({0, 0, 0, start}),
        builder_.getDenseI64ArrayAttr({1, 1, 1, step}));
  };
  Value x1 = interleaved ? slice(v, 0, r / 2, 2) : slice(v, 0, r / 2, 1);
  Value x2 = interleaved ? slice(v, 1, r / 2, 2) : slice(v, r / 2, r / 2, 1);
  auto halfType = tensorType({b, s, h, r / 2}, et);
  auto mul = [&](Value p, Value q) {
    return builder_.createOrFold<MulOp>(loc, halfType, p, q);
  };
  Value real =
      builder_.createOrFold<SubOp>(loc, halfType, mul(cos, x1), mul(sin, x2));
  Value imag =
      builder_.createOrFold<AddOp>(loc, halfType, mul(sin, x1), mul(cos, x2));
  Value rotated;
  auto rotType = tensorType({b, s, h, r}, et);
  if (interleaved) {
    Shape pairs{b, s, h, r / 2, 1};
    Value stacked = builder_.createOrFold<ConcatOp>(
        loc, tensorType({b, s, h, r / 2, 2}, et),
        ValueRange{reshape(real, pairs, loc), reshape(imag, pairs, loc)},
        builder_.getI64IntegerAttr(4));
    rotated = reshape(stacked, {b, s, h, r}, loc);
  } else {
    rotated = builder_.createOrFold<ConcatOp>(
        loc, rotType, ValueRange{real, imag}, builder_.getI64IntegerAttr(3));
  }
  if (r < d)
    rotated = builder_.createOrFold<ConcatOp>(
        loc, tensorType(bshd, et), ValueRange{rotated, slice(v, r, d - r, 1)},
        builder_.getI64IntegerAttr(3));
  if (original.size() == 3)
    rotated = reshape(rotated, original, loc);
  else
    rotated = builder_.createOrFold<TransposeOp>(
        loc, tensorType(original, et), rotated,
        builder_.getDenseI64ArrayAttr({0, 2, 1, 3}));
  define(node, 0, rotated);
  return success();
}

LogicalResult Importer::attention(const Node &node) {
  if (failed(requireInputs(node, 3)))
    return failure();
  Value q = input(node, 0), k = input(node, 1), v = input(node, 2);
  Value mask = input(node, 3), pastKey = input(node, 4),
        pastValue = input(node, 5), nonpad = input(node, 6);
  Type et = elementTypeOf(q);
  if (!isa<FloatType>(et) || elementTypeOf(k) != et || elementTypeOf(v) != et)
    return nodeError(node) << "Q, K and V must be floats of one type";
  Location loc = nodeLoc(node);
  Shape qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  int64_t rank = qs.size();
  if (rank != 3 && rank != 4)
    return nodeError(node) << "Q must have rank 3 or 4";
  if (static_cast<int64_t>(ks.size()) != rank ||
      static_cast<int64_t>(vs.size()) != rank)
    return nodeError(node) << "Q, K and V must have the same rank";
  // Heads first: [B, H, L, D].
  auto split = [&](Value t, int64_t heads,
                   const char *what) -> FailureOr<Value> {
    Shape s = shapeOf(t);
    if (heads <= 0 || s[2] % heads != 0)
      return nodeError(node) << "a 3-D " << what << " needs a head count "
                             << "dividing its hidden size " << s[2]
                             << " (q_num_heads, kv_num_heads)";
    Value r = reshape(t, {s[0], s[1], heads, s[2] / heads}, loc);
    return builder_.createOrFold<TransposeOp>(
        loc, tensorType({s[0], heads, s[1], s[2] / heads}, et), r,
        builder_.getDenseI64ArrayAttr({0, 2, 1, 3}));
  };
  if (rank == 3) {
    int64_t qh = intAttr(node, "q_num_heads", 0),
            kvh = intAttr(node, "kv_num_heads", 0);
    FailureOr<Value> q4 = split(q, qh, "Q");
    if (failed(q4))
      return failure();
    FailureOr<Value> k4 = split(k, kvh, "K");
    if (failed(k4))
      return failure();
    FailureOr<Value> v4 = split(v, kvh, "V");
    if (failed(v4))
      return failure();
    q = *q4, k = *k4, v = *v4;
    qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  }
  int64_t b = qs[0], hq = qs[1], l = qs[2], dq = qs[3];
  int64_t hkv = ks[1], dv = vs[3];
  if (ks[0] != b || vs[0] != b || ks[3] != dq || vs[1] != hkv || vs[2] != ks[2])
    return nodeError(node) << "Q " << q.getType() << ", K " << k.getType()
                           << " and V " << v.getType() << " do not agree";
  if (hkv <= 0 || hq % hkv != 0)
    return nodeError(node) << hq << " query heads are not a multiple of " << hkv
                           << " key/value heads";
  // The cache: past keys and values come first.
  int64_t past = 0;
  auto prepend = [&](Value pastT, Value cur,
                     const char *what) -> FailureOr<Value> {
    if (!pastT)
      return cur;
    Shape ps = shapeOf(pastT), cs = shapeOf(cur);
    if (ps.size() != 4 || ps[0] != cs[0] || ps[1] != cs[1] || ps[3] != cs[3])
      return nodeError(node) << "past " << what << " " << pastT.getType()
                             << " does not match " << cur.getType();
    Shape out = cs;
    out[2] += ps[2];
    return builder_.createOrFold<ConcatOp>(loc, tensorType(out, et),
                                           ValueRange{pastT, cur},
                                           builder_.getI64IntegerAttr(2));
  };
  if (pastKey)
    past = shapeOf(pastKey)[2];
  FailureOr<Value> presentK = prepend(pastKey, k, "key");
  if (failed(presentK))
    return failure();
  FailureOr<Value> presentV = prepend(pastValue, v, "value");
  if (failed(presentV))
    return failure();
  define(node, 1, *presentK);
  define(node, 2, *presentV);
  k = *presentK, v = *presentV;
  int64_t total = shapeOf(k)[2];

  // The additive bias [.., L, total]: the mask, causal, padding.
  Type i1 = builder_.getI1Type(), i64 = builder_.getI64Type();
  double inf = std::numeric_limits<double>::infinity();
  Value zero = scalarConstant(et, 0.0, loc),
        minusInf = scalarConstant(et, -inf, loc);
  auto toBias = [&](Value allowed) {
    return builder_.createOrFold<SelectOp>(
        loc, tensorType(shapeOf(allowed), et), allowed, zero, minusInf);
  };
  auto add = [&](Value a, Value c) -> FailureOr<Value> {
    if (!a)
      return c;
    std::optional<Shape> s = broadcastShapes({shapeOf(a), shapeOf(c)});
    if (!s)
      return nodeError(node) << "attention masks do not broadcast";
    return builder_.createOrFold<AddOp>(loc, tensorType(*s, et), a, c);
  };
  Value bias;
  if (mask) {
    Shape ms = shapeOf(mask);
    Type mt = elementTypeOf(mask);
    if (ms.size() < 2 || ms.back() > total || (!mt.isInteger(1) && mt != et))
      return nodeError(node)
             << "attn_mask " << mask.getType() << " must be bool or " << et
             << " with at most " << total << " keys";
    bias = mt.isInteger(1) ? toBias(mask) : mask;
    if (ms.back() < total) {
      Shape padShape = ms;
      padShape.back() = total - ms.back();
      Value padding = builder_.createOrFold<graph::BroadcastOp>(
          loc, tensorType(padShape, et), minusInf);
      Shape full = ms;
      full.back() = total;
      bias = builder_.createOrFold<ConcatOp>(
          loc, tensorType(full, et), ValueRange{bias, padding},
          builder_.getI64IntegerAttr(ms.size() - 1));
    }
  }
  // Index vectors of the queries and keys; a longer sequence than this is
  // far beyond what one device holds.
  constexpr int64_t kMaxLength = int64_t(1) << 24;
  if (l > kMaxLength || total > kMaxLength)
    return nodeError(node) << "sequences of " << l << " queries and " << total
                           << " keys; at most " << kMaxLength
                           << " are supported";
  std::vector<int64_t> rows(l), cols(total);
  for (int64_t i = 0; i < l; ++i)
    rows[i] = i;
  for (int64_t j = 0; j < total; ++j)
    cols[j] = j;
  Value nonpadLen;
  if (nonpad) {
    if (shapeOf(nonpad) != Shape{b} || !elementTypeOf(nonpad).isInteger(64))
      return nodeError(node) << "nonpad_kv_seqlen must be int64 [" << b << "]";
    nonpadLen = reshape(nonpad, {b, 1, 1, 1}, loc);
  }
  if (intAttr(node, "is_causal", 0) != 0) {
    Value allowed;
    if ((!pastKey && nonpadLen) || l * total > (int64_t(1) << 22)) {
      // j <= i + offset: offset nonpad[b] - L per batch (an external
      // cache), else the past length; compared at run time (a table of
      // L x S would be too large, or differs per batch).
      Value i = intConstant({1, 1, l, 1}, rows, loc);
      Value j = intConstant({1, 1, 1, total}, cols, loc);
      Value offset = nonpadLen && !pastKey
                         ? builder_.createOrFold<SubOp>(
                               loc, tensorType({b, 1, 1, 1}, i64), nonpadLen,
                               scalarConstant(i64, double(l), loc))
                         : scalarConstant(i64, double(past), loc);
      int64_t ob = shapeOf(offset).empty() ? 1 : b;
      Value limit = builder_.createOrFold<AddOp>(
          loc, tensorType({ob, 1, l, 1}, i64), i, offset);
      Value beyond = builder_.createOrFold<GreaterOp>(
          loc, tensorType({ob, 1, l, total}, i1), j, limit);
      allowed = builder_.createOrFold<NotOp>(
          loc, tensorType({ob, 1, l, total}, i1), beyond);
    } else {
      auto type = tensorType({l, total}, i1);
      SmallVector<bool> table;
      for (int64_t i = 0; i < l; ++i)
        for (int64_t j = 0; j < total; ++j)
          table.push_back(j <= i + past);
      allowed = builder_.create<ConstantOp>(
          loc, type, DenseElementsAttr::get(type, ArrayRef<bool>(table)));
    }
    FailureOr<Value> sum = add(bias, toBias(allowed));
    if (failed(sum))
      return failure();
    bias = *sum;
  }
  if (nonpadLen) {
    Value j = intConstant({1, 1, 1, total}, cols, loc);
    Value inside = builder_.createOrFold<LessOp>(
        loc, tensorType({b, 1, 1, total}, i1), j, nonpadLen);
    FailureOr<Value> sum = add(bias, toBias(inside));
    if (failed(sum))
      return failure();
    bias = *sum;
  }

  // Grouped-query: each key/value head serves hq / hkv consecutive heads.
  auto repeatHeads = [&](Value t) {
    int64_t reps = hq / hkv;
    if (reps == 1)
      return t;
    Shape s = shapeOf(t);
    Value wide = builder_.createOrFold<graph::BroadcastOp>(
        loc, tensorType({s[0], s[1], reps, s[2], s[3]}, et),
        reshape(t, {s[0], s[1], 1, s[2], s[3]}, loc));
    return reshape(wide, {s[0], hq, s[2], s[3]}, loc);
  };
  k = repeatHeads(k);
  v = repeatHeads(v);

  float scaleAttr = floatAttr(node, "scale", 0.0f);
  double scale =
      scaleAttr != 0.0f ? double(scaleAttr) : 1.0 / std::sqrt(double(dq));
  Value root = scalarConstant(et, std::sqrt(scale), loc);
  Value qScaled = builder_.createOrFold<MulOp>(loc, q.getType(), q, root);
  Value kScaled = builder_.createOrFold<MulOp>(loc, k.getType(), k, root);
  auto scoreType = tensorType({b, hq, l, total}, et);
  Value scores =
      builder_.create<MatMulOp>(loc, scoreType, qScaled, kScaled, Value(),
                                UnitAttr(), builder_.getUnitAttr());
  float softcap = floatAttr(node, "softcap", 0.0f);
  if (softcap > 0.0f) {
    Value cap = scalarConstant(et, softcap, loc);
    Value t = builder_.createOrFold<DivOp>(loc, scoreType, scores, cap);
    t = builder_.createOrFold<TanhOp>(loc, scoreType, t);
    scores = builder_.createOrFold<MulOp>(loc, scoreType, t, cap);
  }
  Value qkOut = scores;
  if (bias) {
    FailureOr<Value> sum = add(scores, bias);
    if (failed(sum))
      return failure();
    if (shapeOf(*sum) != Shape{b, hq, l, total})
      return nodeError(node) << "attn_mask does not broadcast to [" << b << ", "
                             << hq << ", " << l << ", " << total << "]";
    scores = *sum;
  }
  int64_t mode = intAttr(node, "qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return nodeError(node) << "qk_matmul_output_mode " << mode
                           << " must be 0 to 3";
  if (mode == 2)
    qkOut = scores;
  // A row whose every key is masked attends to nothing: its probabilities
  // are zeros (not the NaN of exp(-inf) / 0), and so is its gradient. With
  // a constant bias the rows are known here, and usually none is empty.
  Value rowOk;
  if (bias) {
    Shape bs = shapeOf(bias), rs = bs;
    rs.back() = 1;
    DenseElementsAttr known;
    bool someRowEmpty = true;
    if (matchPattern(bias, m_Constant(&known))) {
      someRowEmpty = false;
      int64_t cols = bs.back(), k = 0;
      bool rowHasKey = false;
      for (APFloat f : known.getValues<APFloat>()) {
        rowHasKey |= !(f.isInfinity() && f.isNegative());
        if (++k % cols == 0) {
          someRowEmpty |= !rowHasKey;
          rowHasKey = false;
        }
      }
    }
    if (someRowEmpty) {
      Value rowMax = builder_.create<ReduceMaxOp>(
          loc, tensorType(rs, et), bias,
          builder_.getDenseI64ArrayAttr({static_cast<int64_t>(rs.size()) - 1}),
          builder_.getUnitAttr());
      rowOk = builder_.createOrFold<GreaterOp>(loc, tensorType(rs, i1), rowMax,
                                               minusInf);
      scores =
          builder_.createOrFold<SelectOp>(loc, scoreType, rowOk, scores, zero);
    }
  }
  Value probs;
  Type softmaxType = et;
  if (const onnx::Attribute *a = node.attribute("softmax_precision")) {
    softmaxType = elementType(static_cast<int32_t>(a->i));
    if (!softmaxType || !isa<FloatType>(softmaxType))
      return nodeError(node) << "unsupported softmax_precision";
  }
  Value wide = builder_.createOrFold<CastOp>(
      loc, tensorType({b, hq, l, total}, softmaxType), scores);
  probs = builder_.create<SoftmaxOp>(loc, wide.getType(), wide,
                                     builder_.getI64IntegerAttr(3));
  probs = builder_.createOrFold<CastOp>(loc, scoreType, probs);
  if (rowOk)
    probs = builder_.createOrFold<SelectOp>(loc, scoreType, rowOk, probs, zero);
  if (mode == 3)
    qkOut = probs;
  define(node, 3, qkOut);
  Value y =
      builder_.create<MatMulOp>(loc, tensorType({b, hq, l, dv}, et), probs, v,
                                Value(), UnitAttr(), UnitAttr());
  if (rank == 3) {
    y = builder_.createOrFold<TransposeOp>(
        loc, tensorType({b, l, hq, dv}, et), y,
        builder_.getDenseI64ArrayAttr({0, 2, 1, 3}));
    y = reshape(y, {b, l, hq * dv}, loc);
  }
  define(node, 0, y);
  return success();
}
