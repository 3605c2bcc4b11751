//===- IndexOps.cpp - Element-wise gathers, scatters, TopK, Pad -----------===//
//
// These ONNX ops become compositions of graph ops that autodiff already
// differentiates and the backends already run, so they need no kernels of
// their own:
//
//  * GatherElements, GatherND: the data viewed flat (or as rows), one
//    graph.gather at positions computed from the indices (a constant part
//    from the coordinates, the index scaled by its stride); the gradient is
//    gather's scatter-add.
//  * ScatterElements, ScatterND: graph.gather_grad (a scatter-add) of the
//    updates at those positions, added to the data (reduction 'add') or
//    selected over it where an index lands (reduction 'none').
//  * TopK: K rounds of max, lowest index among equals, mask; the values
//    are then gathered, so the gradient reaches exactly the chosen elements.
//  * Pad: concatenation with constant blocks (mode 'constant') or a gather
//    with a constant index map per axis ('edge', 'reflect', 'wrap').
//
// With constant inputs every piece folds, so shape sub-graphs that use these
// ops become constants.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Matchers.h"

#include <limits>

using namespace mlir;
using namespace strata;
using namespace strata::graph;
using namespace strata::importer;

namespace {
/// The largest constant index map these compositions build (positions of
/// an index tensor): 2^26 int64s, 512 MiB.
constexpr int64_t kMaxIndexMap = int64_t(1) << 26;
/// The most TopK rounds a data-path TopK unrolls into.
constexpr int64_t kMaxTopK = 64;
} // namespace

/// Row-major strides of `shape`.
static Shape stridesOf(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

Value Importer::intConstant(const Shape &shape, ArrayRef<int64_t> values,
                            Location loc) {
  auto type = tensorType(shape, builder_.getI64Type());
  return builder_.create<ConstantOp>(loc, type,
                                     DenseElementsAttr::get(type, values));
}

Value Importer::asInt64(Value v, Location loc) {
  if (elementTypeOf(v).isInteger(64))
    return v;
  return builder_.createOrFold<CastOp>(
      loc, tensorType(shapeOf(v), builder_.getI64Type()), v);
}

/// index + size where index < 0 (elementwise; `size` broadcasts).
Value Importer::wrapNegative(Value index, Value size, Location loc) {
  Shape shape = shapeOf(index);
  auto i64 = tensorType(shape, builder_.getI64Type());
  Value zero = scalarConstant(builder_.getI64Type(), 0, loc);
  Value negative = builder_.createOrFold<LessOp>(
      loc, tensorType(shape, builder_.getI1Type()), index, zero);
  Value wrapped = builder_.createOrFold<AddOp>(loc, i64, index, size);
  return builder_.createOrFold<SelectOp>(loc, i64, negative, wrapped, index);
}

/// Whether `v` is a float constant of zeros (torch.onnx's index_add_
/// scatters into one): a scatter into it needs no 'landed' mask.
static bool isFloatZeros(Value v) {
  DenseElementsAttr zeros;
  return matchPattern(v, m_Constant(&zeros)) && zeros.isSplat() &&
         isa<FloatType>(zeros.getElementType()) &&
         zeros.getSplatValue<APFloat>().isZero();
}

/// A constant index vector's entries lie in [-dim, dim): an error naming
/// the index otherwise (a flat scatter would write into a neighbour).
LogicalResult Importer::checkConstantIndices(const Node &node, Value idx,
                                             int64_t dim, int64_t axis) {
  DenseElementsAttr known;
  if (matchPattern(idx, m_Constant(&known)))
    for (const APInt &v : known.getValues<APInt>())
      if (v.getSExtValue() < -dim || v.getSExtValue() >= dim)
        return nodeError(node)
               << "index " << v.getSExtValue() << " is out of range for axis "
               << axis << " of size " << dim;
  return success();
}

FailureOr<Value> Importer::elementPositions(const Node &node, Value indices,
                                            const Shape &dataShape,
                                            int64_t axis, bool nonNegative) {
  Location loc = nodeLoc(node);
  Shape idxShape = shapeOf(indices);
  if (idxShape.size() != dataShape.size())
    return nodeError(node) << "indices have rank " << idxShape.size()
                           << ", the data " << dataShape.size();
  for (size_t d = 0; d < idxShape.size(); ++d)
    if (static_cast<int64_t>(d) != axis && idxShape[d] > dataShape[d])
      return nodeError(node) << "indices dimension " << d << " (" << idxShape[d]
                             << ") exceeds the data's (" << dataShape[d] << ")";
  int64_t count = numElements(idxShape);
  if (count > kMaxIndexMap)
    return nodeError(node) << "has " << count << " indices; at most "
                           << kMaxIndexMap << " are supported";
  Shape strides = stridesOf(dataShape);
  // The other coordinates' part of each position, a constant.
  std::vector<int64_t> base(count, 0);
  Shape coord(idxShape.size(), 0);
  for (int64_t k = 0; k < count; ++k) {
    int64_t p = 0;
    for (size_t d = 0; d < idxShape.size(); ++d)
      if (static_cast<int64_t>(d) != axis)
        p += coord[d] * strides[d];
    base[k] = p;
    for (size_t d = idxShape.size(); d-- > 0;) {
      if (++coord[d] < idxShape[d])
        break;
      coord[d] = 0;
    }
  }
  Value idx = asInt64(indices, loc);
  int64_t dim = dataShape[axis];
  if (failed(checkConstantIndices(node, idx, dim, axis)))
    return failure();
  auto i64 = tensorType(idxShape, builder_.getI64Type());
  // TopK's own indices are never negative; the last axis has stride 1.
  Value scaled =
      nonNegative
          ? idx
          : wrapNegative(idx, scalarConstant(builder_.getI64Type(), dim, loc),
                         loc);
  if (strides[axis] != 1)
    scaled = builder_.createOrFold<MulOp>(
        loc, i64, scaled,
        scalarConstant(builder_.getI64Type(), double(strides[axis]), loc));
  return builder_.createOrFold<AddOp>(loc, i64, scaled,
                                      intConstant(idxShape, base, loc));
}

FailureOr<Value> Importer::rowPositions(const Node &node, Value indices,
                                        const Shape &dataShape,
                                        int64_t batchDims) {
  Location loc = nodeLoc(node);
  Shape idxShape = shapeOf(indices);
  if (idxShape.empty())
    return nodeError(node) << "indices must have rank 1 or more";
  int64_t k = idxShape.back();
  int64_t b = batchDims;
  if (b < 0 || b >= static_cast<int64_t>(idxShape.size()) ||
      b > static_cast<int64_t>(dataShape.size()))
    return nodeError(node) << "batch_dims " << b << " is out of range";
  if (k < 1 || b + k > static_cast<int64_t>(dataShape.size()))
    return nodeError(node) << "indices' last dimension " << k
                           << " must be between 1 and the data's rank "
                           << dataShape.size() << " less batch_dims";
  for (int64_t d = 0; d < b; ++d)
    if (idxShape[d] != dataShape[d])
      return nodeError(node)
             << "batch dimension " << d << " differs: " << idxShape[d]
             << " and " << dataShape[d];
  Shape lead(idxShape.begin(), idxShape.end() - 1);
  int64_t count = numElements(lead);
  if (count > kMaxIndexMap)
    return nodeError(node) << "has " << count << " index tuples; at most "
                           << kMaxIndexMap << " are supported";
  // Position of a row: batch * (rows per batch) + sum of index * stride.
  Shape indexed(dataShape.begin() + b, dataShape.begin() + b + k);
  Shape strides = stridesOf(indexed);
  int64_t perBatch = numElements(indexed);
  int64_t perLead = numElements(Shape(lead.begin() + b, lead.end()));
  std::vector<int64_t> base(count);
  for (int64_t i = 0; i < count; ++i)
    base[i] = (perLead ? i / perLead : 0) * perBatch;
  Value idx = asInt64(indices, loc);
  DenseElementsAttr known;
  if (matchPattern(idx, m_Constant(&known))) {
    int64_t i = 0;
    for (const APInt &v : known.getValues<APInt>()) {
      int64_t dim = indexed[i++ % k];
      if (v.getSExtValue() < -dim || v.getSExtValue() >= dim)
        return nodeError(node)
               << "index " << v.getSExtValue()
               << " is out of range for a dimension of size " << dim;
    }
  }
  auto i64 = tensorType(idxShape, builder_.getI64Type());
  Value normalized = wrapNegative(idx, intConstant({k}, indexed, loc), loc);
  Value scaled = builder_.createOrFold<MulOp>(loc, i64, normalized,
                                              intConstant({k}, strides, loc));
  Value sum = intConstant(lead, base, loc);
  for (int64_t j = 0; j < k; ++j) {
    SmallVector<int64_t> offsets(idxShape.size(), 0), steps(idxShape.size(), 1);
    offsets.back() = j;
    Shape one = idxShape;
    one.back() = 1;
    Value part = builder_.createOrFold<SliceOp>(
        loc, tensorType(one, builder_.getI64Type()), scaled,
        builder_.getDenseI64ArrayAttr(offsets),
        builder_.getDenseI64ArrayAttr(steps));
    sum = builder_.createOrFold<AddOp>(loc,
                                       tensorType(lead, builder_.getI64Type()),
                                       sum, reshape(part, lead, loc));
  }
  return sum;
}

static LogicalResult checkIndexType(Type t) {
  return success(t.isInteger(32) || t.isInteger(64));
}

LogicalResult Importer::gatherElements(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value data = input(node, 0), indices = input(node, 1);
  if (failed(checkIndexType(elementTypeOf(indices))))
    return nodeError(node) << "indices must be int32 or int64";
  Shape shape = shapeOf(data);
  FailureOr<int64_t> axis = axisAttr(node, 0, shape.size());
  if (failed(axis))
    return failure();
  FailureOr<Value> positions = elementPositions(node, indices, shape, *axis);
  if (failed(positions))
    return failure();
  Location loc = nodeLoc(node);
  Value flat = reshape(data, {numElements(shape)}, loc);
  define(node, 0,
         builder_.createOrFold<GatherOp>(
             loc, tensorType(shapeOf(indices), elementTypeOf(data)), flat,
             *positions, builder_.getI64IntegerAttr(0)));
  return success();
}

LogicalResult Importer::gatherND(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value data = input(node, 0), indices = input(node, 1);
  if (!elementTypeOf(indices).isInteger(64))
    return nodeError(node) << "indices must be int64";
  Shape shape = shapeOf(data);
  int64_t b = intAttr(node, "batch_dims", 0);
  FailureOr<Value> rows = rowPositions(node, indices, shape, b);
  if (failed(rows))
    return failure();
  Shape idxShape = shapeOf(indices);
  int64_t k = idxShape.back();
  // The data as rows: [batch * indexed, rest...].
  Shape rowShape{numElements(Shape(shape.begin(), shape.begin() + b + k))};
  rowShape.insert(rowShape.end(), shape.begin() + b + k, shape.end());
  Location loc = nodeLoc(node);
  Shape out(idxShape.begin(), idxShape.end() - 1);
  out.insert(out.end(), shape.begin() + b + k, shape.end());
  define(node, 0,
         builder_.createOrFold<GatherOp>(loc,
                                         tensorType(out, elementTypeOf(data)),
                                         reshape(data, rowShape, loc), *rows,
                                         builder_.getI64IntegerAttr(0)));
  return success();
}

/// data with `updates` scattered at `positions` along axis 0 of the data
/// viewed as `rows`; `reduction` is "none" or "add".
FailureOr<Value> Importer::scatterRows(const Node &node, Value data,
                                       Value updates, Value positions,
                                       const Shape &rows,
                                       const std::string &reduction,
                                       Value hitWeights) {
  Location loc = nodeLoc(node);
  Type et = elementTypeOf(data);
  if (reduction != "none" && reduction != "add")
    return nodeError(node) << "reduction '" << reduction
                           << "' is not supported (none and add are)";
  if (elementTypeOf(updates) != et)
    return nodeError(node) << "updates and data differ in element type";
  // All constant (a shape computation, any element type): scattered here.
  DenseElementsAttr d, u, p;
  if (matchPattern(data, m_Constant(&d)) &&
      matchPattern(updates, m_Constant(&u)) &&
      matchPattern(positions, m_Constant(&p)) &&
      d.getNumElements() <= kMaxIndexMap) {
    SmallVector<Attribute> out(d.getValues<Attribute>().begin(),
                               d.getValues<Attribute>().end());
    SmallVector<Attribute> upd(u.getValues<Attribute>().begin(),
                               u.getValues<Attribute>().end());
    int64_t rowSize = rows[0] ? numElements(rows) / rows[0] : 0, k = 0;
    for (const APInt &pos : p.getValues<APInt>()) {
      int64_t r = pos.getSExtValue();
      if (r < 0 || r >= rows[0])
        return nodeError(node) << "an index lands outside the data";
      for (int64_t j = 0; j < rowSize; ++j, ++k) {
        Attribute &slot = out[r * rowSize + j];
        if (reduction == "none") {
          slot = upd[k];
        } else if (auto f = dyn_cast<FloatAttr>(slot)) {
          APFloat sum = f.getValue();
          sum.add(cast<FloatAttr>(upd[k]).getValue(),
                  APFloat::rmNearestTiesToEven);
          slot = FloatAttr::get(et, sum);
        } else {
          slot = IntegerAttr::get(et, cast<IntegerAttr>(slot).getValue() +
                                          cast<IntegerAttr>(upd[k]).getValue());
        }
      }
    }
    auto type = cast<RankedTensorType>(data.getType());
    return Value(builder_.create<ConstantOp>(
        loc, type, DenseElementsAttr::get(type, out)));
  }
  if (!isa<FloatType>(et))
    return nodeError(node) << "scatters into " << et
                           << " data on the data path; Strata scatters into "
                              "float tensors there";
  auto rowsType = tensorType(rows, et);
  Value flatData = reshape(data, rows, loc);
  Value scattered = builder_.create<GatherGradOp>(
      loc, rowsType, updates, positions, builder_.getI64IntegerAttr(0));
  Value result;
  bool intoZeros = isFloatZeros(data);
  if (reduction == "add" || intoZeros) {
    // Into zeros (index_add_ as torch.onnx exports it) the landing updates
    // are the result and zeros elsewhere, whatever the reduction.
    result = intoZeros ? scattered
                       : builder_.createOrFold<AddOp>(loc, rowsType, flatData,
                                                      scattered);
  } else {
    // Where an index lands, the update; elsewhere the data.
    Shape hitShape = shapeOf(positions);
    Shape maskShape{rows[0]};
    for (size_t d = 1; d < rows.size(); ++d) {
      hitShape.push_back(1);
      maskShape.push_back(1);
    }
    auto hitType = tensorType(hitShape, et);
    Value ones = hitWeights ? reshape(hitWeights, hitShape, loc)
                            : builder_.create<ConstantOp>(
                                  loc, hitType,
                                  DenseElementsAttr::get(
                                      hitType, builder_.getFloatAttr(et, 1.0)));
    Value hits =
        builder_.create<GatherGradOp>(loc, tensorType(maskShape, et), ones,
                                      positions, builder_.getI64IntegerAttr(0));
    Value hit = builder_.createOrFold<GreaterOp>(
        loc, tensorType(maskShape, builder_.getI1Type()), hits,
        scalarConstant(et, 0.0, loc));
    result = builder_.createOrFold<SelectOp>(loc, rowsType, hit, scattered,
                                             flatData);
  }
  return reshape(result, shapeOf(data), loc);
}

/// ScatterElements whose indices vary only along `axis`, a column of
/// indices broadcast over the rest (torch.onnx's index_add_ and
/// index_copy_), moving whole slices of the data: one scatter of slices at
/// a vector of indices, instead of a position per element (a tensor of
/// the updates' size, kept for the backward pass). False when the indices
/// are not of that form (or everything is a constant, folded elsewhere).
FailureOr<bool> Importer::scatterSlices(const Node &node, Value data,
                                        Value indices, Value updates,
                                        int64_t axis) {
  auto column = indices.getDefiningOp<BroadcastOp>();
  Shape shape = shapeOf(data), is = shapeOf(indices);
  Type et = elementTypeOf(data);
  if (!column || !isa<FloatType>(et) || elementTypeOf(updates) != et ||
      matchPattern(updates, m_Constant()))
    return false;
  Value source = column.getInput();
  Shape src = shapeOf(source);
  if (src.size() != is.size() || is.size() != shape.size() || is[axis] == 0)
    return false;
  for (size_t d = 0; d < is.size(); ++d)
    if (int64_t(d) != axis && (src[d] != 1 || is[d] != shape[d]))
      return false;
  std::optional<BoundedDim> rows = boundedDim(updates);
  if (rows && (rows->axis != axis || !boundedDim(indices) ||
               boundedDim(indices)->set != rows->set || boundedDim(data)))
    return false; // The element path says what is wrong.
  std::string reduction = stringAttr(node, "reduction", "none");
  if (reduction != "none" && reduction != "add")
    return false;
  Location loc = nodeLoc(node);
  int64_t dim = shape[axis], count = is[axis];
  Value idx = asInt64(reshape(source, {count}, loc), loc);
  if (failed(checkConstantIndices(node, idx, dim, axis)))
    return failure();
  if (!isNonNegative(source))
    idx =
        wrapNegative(idx, scalarConstant(builder_.getI64Type(), dim, loc), loc);
  // Rows of a data-dependent length: only the real ones land.
  Value weights;
  if (rows) {
    updates = zeroPadRows(updates, *rows, loc);
    weights = boundMask(rows->set, {count}, 0, et, loc);
  }
  auto type = cast<RankedTensorType>(data.getType());
  Value scattered = builder_.create<GatherGradOp>(
      loc, type, updates, idx, builder_.getI64IntegerAttr(axis));
  bool intoZeros = isFloatZeros(data);
  Value result;
  if (reduction == "add") {
    result = builder_.createOrFold<AddOp>(loc, type, data, scattered);
  } else if (intoZeros) {
    result = scattered;
  } else {
    // Where a slice lands, the update; elsewhere the data.
    if (!weights)
      weights = builder_.create<ConstantOp>(
          loc, tensorType({count}, et),
          DenseElementsAttr::get(tensorType({count}, et),
                                 builder_.getFloatAttr(et, 1.0)));
    Value hits =
        builder_.create<GatherGradOp>(loc, tensorType({dim}, et), weights, idx,
                                      builder_.getI64IntegerAttr(0));
    Shape view(shape.size(), 1);
    view[axis] = dim;
    Value hit = builder_.createOrFold<GreaterOp>(
        loc, tensorType({dim}, builder_.getI1Type()), hits,
        scalarConstant(et, 0.0, loc));
    result = builder_.createOrFold<SelectOp>(loc, type, reshape(hit, view, loc),
                                             scattered, data);
  }
  define(node, 0, result);
  return true;
}

LogicalResult Importer::scatterElements(const Node &node) {
  if (failed(requireInputs(node, 3)))
    return failure();
  Value data = input(node, 0), indices = input(node, 1),
        updates = input(node, 2);
  if (failed(checkIndexType(elementTypeOf(indices))))
    return nodeError(node) << "indices must be int32 or int64";
  if (shapeOf(updates) != shapeOf(indices))
    return nodeError(node) << "updates and indices differ in shape";
  Shape shape = shapeOf(data);
  FailureOr<int64_t> axis = axisAttr(node, 0, shape.size());
  if (failed(axis))
    return failure();
  if (FailureOr<bool> done = scatterSlices(node, data, indices, updates, *axis);
      failed(done) || *done)
    return failure(failed(done));
  FailureOr<Value> positions =
      elementPositions(node, indices, shape, *axis, isNonNegative(indices));
  if (failed(positions))
    return failure();
  // Rows of a data-dependent length: only the real ones land.
  Value hitWeights;
  std::optional<BoundedDim> rows = boundedDim(updates);
  if (rows || boundedDim(indices)) {
    std::optional<BoundedDim> idx = boundedDim(indices);
    if (!rows || !idx || rows->set != idx->set || rows->axis != idx->axis ||
        boundedDim(data))
      return nodeError(node)
             << "indices and updates must share their data-dependent length "
                "(from one NonZero), and the data have none";
    Location loc = nodeLoc(node);
    updates = zeroPadRows(updates, *rows, loc);
    hitWeights = boundMask(rows->set, shapeOf(updates), rows->axis,
                           elementTypeOf(updates), loc);
    hitWeights = builder_.createOrFold<BroadcastOp>(
        loc, tensorType(shapeOf(updates), elementTypeOf(updates)), hitWeights);
  }
  FailureOr<Value> out =
      scatterRows(node, data, updates, *positions, {numElements(shape)},
                  stringAttr(node, "reduction", "none"), hitWeights);
  if (failed(out))
    return failure();
  define(node, 0, *out);
  return success();
}

LogicalResult Importer::scatterND(const Node &node) {
  if (failed(requireInputs(node, 3)))
    return failure();
  Value data = input(node, 0), indices = input(node, 1),
        updates = input(node, 2);
  if (!elementTypeOf(indices).isInteger(64))
    return nodeError(node) << "indices must be int64";
  Shape shape = shapeOf(data), idxShape = shapeOf(indices);
  FailureOr<Value> rows = rowPositions(node, indices, shape, 0);
  if (failed(rows))
    return failure();
  int64_t k = idxShape.back();
  Shape expected(idxShape.begin(), idxShape.end() - 1);
  expected.insert(expected.end(), shape.begin() + k, shape.end());
  if (shapeOf(updates) != expected)
    return nodeError(node) << "updates must have shape indices.shape[:-1] + "
                              "data.shape[indices.shape[-1]:]";
  Shape rowShape{numElements(Shape(shape.begin(), shape.begin() + k))};
  rowShape.insert(rowShape.end(), shape.begin() + k, shape.end());
  FailureOr<Value> out = scatterRows(node, data, updates, *rows, rowShape,
                                     stringAttr(node, "reduction", "none"));
  if (failed(out))
    return failure();
  define(node, 0, *out);
  return success();
}

LogicalResult Importer::topK(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value x = input(node, 0);
  Type et = elementTypeOf(x);
  if (!isa<FloatType>(et))
    return nodeError(node) << "input must be a float tensor, not " << et;
  Shape shape = shapeOf(x);
  FailureOr<int64_t> axis = axisAttr(node, -1, shape.size());
  if (failed(axis))
    return failure();
  FailureOr<SmallVector<int64_t>> kList = constInts(node, 1, "K");
  if (failed(kList))
    return failure();
  if (kList->size() != 1)
    return nodeError(node) << "K must have one element";
  int64_t k = (*kList)[0], n = shape[*axis];
  if (k < 0 || k > n)
    return nodeError(node) << "K = " << k << " is outside [0, " << n << "]";
  if (k > kMaxTopK)
    return nodeError(node) << "K = " << k << "; Strata selects the top K by "
                           << "K passes over the axis, at most " << kMaxTopK;
  if (n > kMaxIndexMap)
    return nodeError(node) << "the axis has " << n << " elements; at most "
                           << kMaxIndexMap << " are supported";
  bool largest = intAttr(node, "largest", 1) != 0;
  intAttr(node, "sorted", 1); // Either way: the result is sorted.
  Location loc = nodeLoc(node);
  Type i64 = builder_.getI64Type(), i1 = builder_.getI1Type();
  Shape row = shape;
  row[*axis] = 1;
  Shape iotaShape(shape.size(), 1);
  iotaShape[*axis] = n;
  std::vector<int64_t> iotaValues(n);
  for (int64_t i = 0; i < n; ++i)
    iotaValues[i] = i;
  Value iota = intConstant(iotaShape, iotaValues, loc);
  Value candidates =
      largest ? x : builder_.createOrFold<NegOp>(loc, x.getType(), x);
  auto reduceMax = [&](Value v, Type elem) {
    return builder_.create<ReduceMaxOp>(loc, tensorType(row, elem), v,
                                        builder_.getDenseI64ArrayAttr({*axis}),
                                        builder_.getUnitAttr());
  };
  Value lowest =
      scalarConstant(et, -std::numeric_limits<double>::infinity(), loc);
  Value past = scalarConstant(i64, double(n), loc);
  SmallVector<Value> picks;
  for (int64_t r = 0; r < k; ++r) {
    Value best = reduceMax(candidates, et);
    Value isBest =
        builder_.create<EqualOp>(loc, tensorType(shape, i1), candidates, best);
    // The lowest index among equal values: max of (n - index) there.
    Value fromEnd =
        builder_.create<SubOp>(loc, tensorType(iotaShape, i64), past, iota);
    Value score =
        builder_.create<SelectOp>(loc, tensorType(shape, i64), isBest, fromEnd,
                                  scalarConstant(i64, 0, loc));
    Value pick = builder_.create<SubOp>(loc, tensorType(row, i64), past,
                                        reduceMax(score, i64));
    picks.push_back(pick);
    if (r + 1 < k) {
      Value taken =
          builder_.create<EqualOp>(loc, tensorType(shape, i1), iota, pick);
      candidates = builder_.create<SelectOp>(loc, x.getType(), taken, lowest,
                                             candidates);
    }
  }
  Shape out = shape;
  out[*axis] = k;
  Value indices =
      k == 0
          ? intConstant(out, {}, loc)
          : builder_.createOrFold<ConcatOp>(loc, tensorType(out, i64), picks,
                                            builder_.getI64IntegerAttr(*axis));
  FailureOr<Value> positions = elementPositions(node, indices, shape, *axis,
                                                /*nonNegative=*/true);
  if (failed(positions))
    return failure();
  define(node, 0,
         builder_.createOrFold<GatherOp>(
             loc, tensorType(out, et), reshape(x, {numElements(shape)}, loc),
             *positions, builder_.getI64IntegerAttr(0)));
  define(node, 1, indices);
  return success();
}

LogicalResult Importer::pad(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Shape shape = shapeOf(x);
  int64_t rank = shape.size();
  Type et = elementTypeOf(x);
  std::string mode = stringAttr(node, "mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" &&
      mode != "wrap")
    return nodeError(node) << "unknown mode '" << mode << "'";
  SmallVector<int64_t> pads;
  if (input(node, 1)) {
    FailureOr<SmallVector<int64_t>> p = constInts(node, 1, "pads");
    if (failed(p))
      return failure();
    pads = *p;
  } else if (const onnx::Attribute *a = node.attribute("pads")) {
    pads.assign(a->ints.begin(), a->ints.end());
  }
  SmallVector<int64_t> axes;
  if (input(node, 3)) {
    FailureOr<SmallVector<int64_t>> a = constInts(node, 3, "axes");
    if (failed(a))
      return failure();
    for (int64_t v : *a) {
      std::optional<int64_t> n = normalizeAxis(v, rank);
      if (!n)
        return nodeError(node) << "axis " << v << " out of range";
      axes.push_back(*n);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    return nodeError(node) << pads.size() << " pads for " << axes.size()
                           << " axes; expected " << 2 * axes.size();
  Location loc = nodeLoc(node);
  // The fill value: a scalar (of the data's type) that may come from the
  // data path; constant blocks of it fold.
  Value fill = scalarConstant(et, 0.0, loc);
  if (Value v = input(node, 2)) {
    if (numElements(shapeOf(v)) != 1 || elementTypeOf(v) != et)
      return nodeError(node) << "constant_value must be one " << et << " value";
    fill = reshape(v, {}, loc);
  } else if (const onnx::Attribute *a = node.attribute("value")) {
    fill = scalarConstant(et, a->f, loc);
  }
  size_t count = axes.size();
  for (size_t i = 0; i < count; ++i) {
    int64_t axis = axes[i], begin = pads[i], end = pads[i + count];
    int64_t n = shape[axis];
    int64_t length;
    if (__builtin_add_overflow(n, begin, &length) ||
        __builtin_add_overflow(length, end, &length) || length < 0 ||
        length > kMaxIndexMap)
      return nodeError(node) << "pads " << begin << " and " << end
                             << " give axis " << axis << " an invalid length";
    if (begin == 0 && end == 0)
      continue;
    Shape out = shape;
    out[axis] = length;
    if (mode == "constant") {
      // Crop (negative pads), then concatenate fill blocks.
      int64_t from = std::max<int64_t>(0, -begin);
      int64_t kept =
          std::max<int64_t>(0, n - from - std::max<int64_t>(0, -end));
      Shape keptShape = shape;
      keptShape[axis] = kept;
      SmallVector<int64_t> offsets(rank, 0), steps(rank, 1);
      offsets[axis] = kept ? from : 0;
      Value core =
          builder_.createOrFold<SliceOp>(loc, tensorType(keptShape, et), x,
                                         builder_.getDenseI64ArrayAttr(offsets),
                                         builder_.getDenseI64ArrayAttr(steps));
      SmallVector<Value> parts;
      auto block = [&](int64_t size) {
        Shape s = shape;
        s[axis] = size;
        return builder_.createOrFold<graph::BroadcastOp>(loc, tensorType(s, et),
                                                         fill);
      };
      if (begin > 0)
        parts.push_back(block(begin));
      parts.push_back(core);
      if (end > 0)
        parts.push_back(block(end));
      x = parts.size() == 1 ? core
                            : builder_.createOrFold<ConcatOp>(
                                  loc, tensorType(out, et), parts,
                                  builder_.getI64IntegerAttr(axis));
    } else {
      if (n == 0)
        return nodeError(node)
               << "cannot pad an empty axis in mode '" << mode << "'";
      std::vector<int64_t> map(length);
      for (int64_t j = 0; j < length; ++j) {
        int64_t s = j - begin;
        if (mode == "edge") {
          s = std::clamp<int64_t>(s, 0, n - 1);
        } else if (mode == "wrap") {
          s = ((s % n) + n) % n;
        } else { // reflect: mirror without repeating the edge.
          int64_t period = n == 1 ? 1 : 2 * (n - 1);
          s = ((s % period) + period) % period;
          if (s >= n)
            s = period - s;
        }
        map[j] = s;
      }
      x = builder_.createOrFold<GatherOp>(loc, tensorType(out, et), x,
                                          intConstant({length}, map, loc),
                                          builder_.getI64IntegerAttr(axis));
    }
    shape = out;
  }
  define(node, 0, x);
  return success();
}

LogicalResult Importer::argExtreme(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  Value x = input(node, 0);
  Type et = elementTypeOf(x);
  if (et.isInteger(1))
    return nodeError(node) << "input must be numbers, not bool";
  Shape shape = shapeOf(x);
  FailureOr<int64_t> axis = axisAttr(node, 0, shape.size());
  if (failed(axis))
    return failure();
  bool keepDims = intAttr(node, "keepdims", 1) != 0;
  bool last = intAttr(node, "select_last_index", 0) != 0;
  Location loc = nodeLoc(node);
  Type i64 = builder_.getI64Type(), i1 = builder_.getI1Type();
  int64_t n = shape[*axis];
  if (n == 0 || n > kMaxIndexMap)
    return nodeError(node) << "the axis has " << n << " elements; 1 to "
                           << kMaxIndexMap << " are supported";
  Shape row = shape;
  row[*axis] = 1;
  Value v = node.opType == "ArgMin"
                ? builder_.createOrFold<NegOp>(loc, x.getType(), x)
                : x;
  auto axesAttr = builder_.getDenseI64ArrayAttr({*axis});
  Value best = builder_.create<ReduceMaxOp>(loc, tensorType(row, et), v,
                                            axesAttr, builder_.getUnitAttr());
  Value isBest = builder_.create<EqualOp>(loc, tensorType(shape, i1), v, best);
  // Among equal values the first index (the largest n - index) or the last
  // (the largest index + 1).
  Shape iotaShape(shape.size(), 1);
  iotaShape[*axis] = n;
  std::vector<int64_t> score(n);
  for (int64_t i = 0; i < n; ++i)
    score[i] = last ? i + 1 : n - i;
  Value scores = builder_.create<SelectOp>(loc, tensorType(shape, i64), isBest,
                                           intConstant(iotaShape, score, loc),
                                           scalarConstant(i64, 0, loc));
  Value top = builder_.create<ReduceMaxOp>(loc, tensorType(row, i64), scores,
                                           axesAttr, builder_.getUnitAttr());
  Value index =
      last ? builder_.createOrFold<SubOp>(loc, top.getType(), top,
                                          scalarConstant(i64, 1, loc))
           : builder_.createOrFold<SubOp>(
                 loc, top.getType(), scalarConstant(i64, double(n), loc), top);
  if (!keepDims) {
    Shape out = shape;
    out.erase(out.begin() + *axis);
    index = reshape(index, out, loc);
  }
  define(node, 0, index);
  return success();
}

/// OneHot: where the index (wrapped when negative) equals the position
/// along the new axis, the "on" value, else "off". Indices may be data;
/// depth must be a constant.
LogicalResult Importer::oneHot(const Node &node) {
  if (failed(requireInputs(node, 3)))
    return failure();
  Value indices = input(node, 0), values = input(node, 2);
  Type it = elementTypeOf(indices);
  if (!isa<IntegerType>(it) && !isa<FloatType>(it))
    return nodeError(node) << "indices must be numbers";
  DenseElementsAttr depthAttr;
  if (!matchPattern(input(node, 1), m_Constant(&depthAttr)) ||
      depthAttr.getNumElements() != 1)
    return nodeError(node) << "depth (input '" << node.inputs[1]
                           << "') must be a compile-time scalar";
  double depthValue =
      isa<FloatType>(depthAttr.getElementType())
          ? (*depthAttr.getValues<APFloat>().begin()).convertToDouble()
          : double((*depthAttr.getValues<APInt>().begin()).getSExtValue());
  int64_t depth = static_cast<int64_t>(depthValue);
  if (depth <= 0 || depth > kMaxIndexMap)
    return nodeError(node) << "depth " << depthValue << " must be in [1, "
                           << kMaxIndexMap << "]";
  if (numElements(shapeOf(values)) != 2)
    return nodeError(node) << "values must hold [off, on]";
  Shape in = shapeOf(indices);
  int64_t outRank = static_cast<int64_t>(in.size()) + 1;
  FailureOr<int64_t> axis = axisAttr(node, -1, outRank);
  if (failed(axis))
    return failure();
  Location loc = nodeLoc(node);
  Type i64 = builder_.getI64Type();
  // Float indices are truncated, as ONNX casts them.
  Value idx = asInt64(indices, loc);
  idx = wrapNegative(idx, scalarConstant(i64, double(depth), loc), loc);
  Shape expanded = in;
  expanded.insert(expanded.begin() + *axis, 1);
  Shape iotaShape(outRank, 1);
  iotaShape[*axis] = depth;
  std::vector<int64_t> iota(depth);
  for (int64_t i = 0; i < depth; ++i)
    iota[i] = i;
  Shape out = in;
  out.insert(out.begin() + *axis, depth);
  Value hit = builder_.createOrFold<EqualOp>(
      loc, tensorType(out, builder_.getI1Type()), reshape(idx, expanded, loc),
      intConstant(iotaShape, iota, loc));
  Type vt = elementTypeOf(values);
  Value flat = reshape(values, {2}, loc);
  auto pick = [&](int64_t k) {
    return builder_.createOrFold<SliceOp>(loc, tensorType({1}, vt), flat,
                                          builder_.getDenseI64ArrayAttr({k}),
                                          builder_.getDenseI64ArrayAttr({1}));
  };
  Value result = builder_.createOrFold<SelectOp>(loc, tensorType(out, vt), hit,
                                                 reshape(pick(1), {}, loc),
                                                 reshape(pick(0), {}, loc));
  define(node, 0, result);
  // With "off" zero, one entry in `depth` along the axis is nonzero.
  DenseElementsAttr onOff;
  if (matchPattern(values, m_Constant(&onOff))) {
    bool offZero = isa<FloatType>(vt)
                       ? (*onOff.getValues<APFloat>().begin()).isZero()
                       : (*onOff.getValues<APInt>().begin()).isZero();
    if (offZero)
      density_[result] = 1.0 / double(depth);
  }
  return success();
}

/// NonZero has a data-dependent shape: only a constant input (a shape
/// computation) is evaluated, at import.
LogicalResult Importer::nonZero(const Node &node) {
  if (failed(requireInputs(node, 1)))
    return failure();
  DenseElementsAttr attr;
  if (!matchPattern(input(node, 0), m_Constant(&attr)))
    return boundedNonZero(node, input(node, 0));
  if (attr.getNumElements() > kMaxIndexMap)
    return nodeError(node) << "a constant of " << attr.getNumElements()
                           << " elements is too large to evaluate";
  Shape shape = shapeOf(input(node, 0));
  int64_t rank = shape.size();
  if (rank == 0)
    return nodeError(node) << "the input is a scalar; give it rank 1";
  std::vector<int64_t> hits;
  int64_t k = 0;
  auto record = [&](bool nonzero) {
    if (nonzero) {
      int64_t rem = k;
      std::vector<int64_t> coord(rank);
      for (int64_t d = rank; d-- > 0;) {
        coord[d] = shape[d] ? rem % shape[d] : 0;
        rem = shape[d] ? rem / shape[d] : 0;
      }
      hits.insert(hits.end(), coord.begin(), coord.end());
    }
    ++k;
  };
  if (isa<FloatType>(attr.getElementType()))
    for (const APFloat &f : attr.getValues<APFloat>())
      record(!f.isZero());
  else
    for (const APInt &i : attr.getValues<APInt>())
      record(!i.isZero());
  int64_t count = static_cast<int64_t>(hits.size()) / rank;
  // [rank, count]: coordinate d of every hit in row d.
  std::vector<int64_t> rows(hits.size());
  for (int64_t h = 0; h < count; ++h)
    for (int64_t d = 0; d < rank; ++d)
      rows[d * count + h] = hits[h * rank + d];
  define(node, 0, intConstant({rank, count}, rows, nodeLoc(node)));
  return success();
}
