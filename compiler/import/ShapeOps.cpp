//===- ShapeOps.cpp
//--------------------------------------------------------===//
//
// Views, slices, concatenations, gathers and broadcasts; Shape, Size,
// Range, ConstantOfShape and Constant, which (with the folds of the ops
// they feed) turn exporters' shape computations into constants.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"
#include "runtime/support/Checked.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/APSInt.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace strata;
using namespace strata::graph;
using namespace strata::importer;

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
    return nodeError(node) << "has " << repeats->size() << " repeats for rank "
                           << shape.size();
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

LogicalResult Importer::gather(const Node &node) {
  if (failed(requireInputs(node, 2)))
    return failure();
  Value data = input(node, 0), indices = input(node, 1);
  Type it = elementTypeOf(indices);
  if (!it.isInteger(32) && !it.isInteger(64))
    return nodeError(node) << "indices must be int32 or int64";
  Shape shape = shapeOf(data);
  FailureOr<int64_t> axis = axisAttr(node, 0, shape.size());
  if (failed(axis))
    return failure();
  // Constant indices are checked here, where the node can be named, rather
  // than when the step runs (or a folder reads past the data).
  DenseElementsAttr constant;
  if (matchPattern(indices, m_Constant(&constant)) &&
      !ShapedType::isDynamic(shape[*axis])) {
    int64_t dim = shape[*axis];
    for (const APInt &v : constant.getValues<APInt>()) {
      int64_t i = v.getSExtValue();
      if (i < -dim || i >= dim)
        return nodeError(node)
               << "index " << i << " (input '" << node.inputs[1]
               << "') is out of range for axis " << *axis << " of size " << dim
               << " (valid: " << -dim << " to " << dim - 1 << ")";
    }
  }
  Shape out = gatherShape(shape, shapeOf(indices), *axis);
  define(node, 0,
         builder_.createOrFold<GatherOp>(
             nodeLoc(node), tensorType(out, elementTypeOf(data)), data, indices,
             builder_.getI64IntegerAttr(*axis)));
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
        return nodeError(node)
               << "shape entry " << i << " copies a dimension the input lacks";
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
    return nodeError(node) << "cannot reshape " << x.getType() << " (" << total
                           << " elements) to "
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
  if (std::optional<SmallVector<int64_t>> given = intsAttr(node, "perm")) {
    perm = std::move(*given);
  } else {
    for (int64_t d = in.size(); d-- > 0;)
      perm.push_back(d);
  }
  if (perm.size() != in.size())
    return nodeError(node) << "perm has " << perm.size() << " entries for rank "
                           << in.size();
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
  FailureOr<int64_t> axis = axisAttr(node, 0, in.size());
  if (failed(axis))
    return failure();
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
  } else if (std::optional<SmallVector<int64_t>> given =
                 intsAttr(node, "split")) {
    sizes = std::move(*given);
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

FailureOr<Shape> Importer::concatShape(const Node &node, ArrayRef<Value> parts,
                                       int64_t axis) {
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
  FailureOr<int64_t> axis = axisAttr(node, 0, shapeOf(inputs[0]).size());
  if (failed(axis))
    return failure();
  FailureOr<Shape> out = concatShape(node, inputs, *axis);
  if (failed(out))
    return failure();
  define(node, 0,
         builder_.createOrFold<ConcatOp>(
             nodeLoc(node), tensorType(*out, elementTypeOf(inputs[0])), inputs,
             builder_.getI64IntegerAttr(*axis)));
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
        return nodeError(node)
               << "cannot squeeze dimension " << *n << " of size " << in[*n];
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
         builder_.createOrFold<TriluOp>(nodeLoc(node), x.getType(), x,
                                        upper ? builder_.getUnitAttr()
                                              : UnitAttr(),
                                        builder_.getI64IntegerAttr(k)));
  return success();
}

LogicalResult Importer::range(const Node &node) {
  if (failed(requireInputs(node, 3)))
    return failure();
  DenseElementsAttr attrs[3];
  const char *names[3] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    if (!matchPattern(input(node, i), m_Constant(&attrs[i])) ||
        attrs[i].getNumElements() != 1)
      return nodeError(node)
             << names[i] << " (input '" << node.inputs[i]
             << "') must be a compile-time scalar constant; Strata needs "
                "static shapes (bind it with --input-value)";
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
    // The sequence is computed in double and rounded once per element:
    // for 16-bit types that is Range-27's default (stash_type=1, computed
    // in float); with stash_type=0 each step would be rounded to 16 bits.
    if (ft.getWidth() == 16 && intAttr(node, "stash_type", 1) == 0)
      return nodeError(node) << "a 16-bit Range with stash_type=0 (each "
                                "step rounded to 16 bits) is not supported; "
                                "stash_type=1 (the default) is";
    double start = attrs[0].getSplatValue<APFloat>().convertToDouble();
    double limit = attrs[1].getSplatValue<APFloat>().convertToDouble();
    double delta = attrs[2].getSplatValue<APFloat>().convertToDouble();
    if (delta == 0)
      return nodeError(node) << "delta is zero";
    double count = std::ceil((limit - start) / delta);
    if (!std::isfinite(count) || tooLong(count))
      return nodeError(node)
             << "the range [" << start << ", " << limit << ") by " << delta
             << " has more than " << kMaxRangeElements << " elements";
    // A range running the other way is empty (and a count far below zero
    // does not fit int64).
    int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
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
        v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
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
    return nodeError(node) << "the range [" << start << ", " << limit << ") by "
                           << delta << " has more than " << kMaxRangeElements
                           << " elements";
  // A range running the other way is empty; its count can lie far below
  // what int64 holds (a span near -2^64), so clamp before narrowing.
  int64_t n = count128 > 0 ? static_cast<int64_t>(count128) : 0;
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
    auto type =
        tensorType(Shape(shape->begin(), shape->end()), dense.getElementType());
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
  // A data-dependent length is a symbol the shapes it reaches resolve.
  if (std::optional<BoundedDim> b = boundedDim(input(node, 0)))
    if (b->axis >= start && b->axis < end)
      dims[b->axis - start] = symbolicLength(b->set);
  auto type =
      tensorType({static_cast<int64_t>(dims.size())}, builder_.getI64Type());
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
  define(
      node, 0,
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
