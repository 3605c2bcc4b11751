//===- GraphFolds.cpp - Constant folding of graph ops ---------------------===//
//
// Folds graph ops whose operands are constants. The ONNX importer builds
// every op through `createOrFold`, so these folders are what turns the shape
// sub-graphs of exported models (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape, Where/Equal on shapes, masks built with Trilu) into constants as
// the model is imported. Canonicalization reuses them.
//
// Constants are unpacked into a host tensor (floats as double, integers as
// int64), evaluated and packed back into the result type; splats stay splats
// so that folding a large `ConstantOfShape` costs nothing.
//
//===----------------------------------------------------------------------===//

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/ShapeInference.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>

using namespace mlir;
using namespace strata::graph;

namespace {

/// Results larger than this (and not splats) are left unfolded: the runtime
/// computes them, and the IR stays small.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 20;

/// A constant tensor unpacked for evaluation.
struct HostTensor {
  Shape shape;
  bool isFloat = false;
  bool splat = false;
  std::vector<double> f;
  std::vector<int64_t> i;

  int64_t stored() const { return isFloat ? f.size() : i.size(); }
  double asDouble(int64_t k) const {
    k = splat ? 0 : k;
    return isFloat ? f[k] : static_cast<double>(i[k]);
  }
  int64_t asInt(int64_t k) const {
    k = splat ? 0 : k;
    return isFloat ? static_cast<int64_t>(f[k]) : i[k];
  }
};

} // namespace

static Shape shapeOfType(Type type) {
  auto shaped = cast<ShapedType>(type);
  return Shape(shaped.getShape().begin(), shaped.getShape().end());
}

/// The bytes an f32, f64 or bf16 element takes in a dense attribute's raw
/// data (the types folded through their bits); 0 for the others.
static unsigned rawFloatBytes(Type type) {
  return type.isF32() ? 4 : type.isF64() ? 8 : type.isBF16() ? 2 : 0;
}

/// Unpacks the constant operand `attr` of a folder whose result has type
/// `result`. A non-splat constant is left packed when that result has more
/// than kMaxFoldedElements elements: every folder below makes a non-splat
/// result from a non-splat operand and leaves such a result unfolded, so
/// unpacking it (a cast or transpose of a weight: millions of elements,
/// each through APFloat, at every canonicalization) would be spent for
/// nothing. A null `result` unpacks whatever its size.
static std::optional<HostTensor> unpack(Attribute attr, Type result) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  auto shaped = dyn_cast_or_null<ShapedType>(result);
  if (shaped && shaped.hasStaticShape() && !dense.isSplat() &&
      shaped.getNumElements() > kMaxFoldedElements)
    return std::nullopt;
  HostTensor t;
  t.shape = shapeOfType(dense.getType());
  t.splat = dense.isSplat();
  Type elementType = dense.getElementType();
  if (isa<FloatType>(elementType)) {
    t.isFloat = true;
    // f32, f64 and bf16 read from their stored bits (exact in a double);
    // the others through APFloat. A splat stores one element.
    if (unsigned bytes = rawFloatBytes(elementType)) {
      ArrayRef<char> raw = dense.getRawData();
      size_t n = raw.size() / bytes;
      t.f.resize(n);
      for (size_t k = 0; k < n; ++k) {
        const char *at = raw.data() + k * bytes;
        if (bytes == 8) {
          std::memcpy(&t.f[k], at, 8);
          continue;
        }
        uint32_t bits = 0;
        if (bytes == 4) {
          std::memcpy(&bits, at, 4);
        } else {
          uint16_t high;
          std::memcpy(&high, at, 2);
          bits = uint32_t(high) << 16;
        }
        float v;
        std::memcpy(&v, &bits, 4);
        t.f[k] = v;
      }
      return t;
    }
    if (t.splat) {
      t.f.push_back(dense.getSplatValue<APFloat>().convertToDouble());
    } else {
      for (const APFloat &v : dense.getValues<APFloat>())
        t.f.push_back(v.convertToDouble());
    }
    return t;
  }
  auto intType = dyn_cast<IntegerType>(elementType);
  if (!intType)
    return std::nullopt;
  bool zext = intType.getWidth() == 1 || intType.isUnsigned();
  auto read = [&](const APInt &v) {
    return zext ? static_cast<int64_t>(v.getZExtValue()) : v.getSExtValue();
  };
  if (t.splat) {
    t.i.push_back(read(dense.getSplatValue<APInt>()));
  } else {
    for (const APInt &v : dense.getValues<APInt>())
      t.i.push_back(read(v));
  }
  return t;
}

/// Packs `t` as an attribute of `type`, converting between domains with the
/// rules of graph.cast. Returns null if the result would be too large.
static Attribute pack(const HostTensor &t, Type type) {
  auto shaped = cast<ShapedType>(type);
  int64_t count = t.splat ? 1 : shaped.getNumElements();
  if (!t.splat && count > kMaxFoldedElements)
    return {};
  Type elementType = shaped.getElementType();
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    // One value converted as graph.cast does (round to nearest, ties to
    // even), returned as its bits.
    auto viaAPFloat = [&](double d) {
      APFloat v(d);
      bool losesInfo;
      v.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &losesInfo);
      return v.bitcastToAPInt().getZExtValue();
    };
    // f32, f64 and bf16 written as stored bits (millions of elements for a
    // rotary table cast in every layer). A double that is a finite float
    // converts to f32 exactly and to bf16 by rounding its float bits once
    // (the same single rounding); anything else goes through APFloat.
    if (unsigned bytes = rawFloatBytes(elementType)) {
      std::vector<char> raw(static_cast<size_t>(count) * bytes);
      for (int64_t k = 0; k < count; ++k) {
        double d = t.asDouble(k);
        char *at = raw.data() + k * bytes;
        if (bytes == 8) {
          std::memcpy(at, &d, 8);
          continue;
        }
        bool isFloat = std::fabs(d) <= FLT_MAX && double(float(d)) == d;
        if (!isFloat) {
          uint64_t bits = viaAPFloat(d);
          uint32_t word = static_cast<uint32_t>(bits);
          uint16_t half = static_cast<uint16_t>(bits);
          std::memcpy(at, bytes == 4 ? static_cast<void *>(&word) : &half,
                      bytes);
          continue;
        }
        float f = static_cast<float>(d);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        if (bytes == 4) {
          std::memcpy(at, &bits, 4);
          continue;
        }
        uint16_t high =
            static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
        std::memcpy(at, &high, 2);
      }
      return DenseElementsAttr::getFromRawBuffer(shaped, raw);
    }
    SmallVector<APFloat> values;
    values.reserve(count);
    for (int64_t k = 0; k < count; ++k) {
      APFloat v(t.asDouble(k));
      bool losesInfo;
      v.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &losesInfo);
      values.push_back(v);
    }
    return DenseElementsAttr::get(shaped, values);
  }
  auto intType = dyn_cast<IntegerType>(elementType);
  if (!intType)
    return {};
  unsigned width = intType.getWidth();
  SmallVector<APInt> values;
  values.reserve(count);
  for (int64_t k = 0; k < count; ++k) {
    if (width == 1) {
      bool nonZero = t.isFloat ? t.asDouble(k) != 0.0 : t.asInt(k) != 0;
      values.push_back(APInt(1, nonZero ? 1 : 0));
    } else {
      int64_t v = t.isFloat ? static_cast<int64_t>(std::trunc(t.asDouble(k)))
                            : t.asInt(k);
      values.push_back(APInt(width, static_cast<uint64_t>(v), true));
    }
  }
  return DenseElementsAttr::get(shaped, values);
}

/// Two's-complement integer arithmetic, as the runtime kernels compute it
/// (signed overflow is undefined in C++, so go through unsigned).
static int64_t wrapping(int64_t x, int64_t y, char op) {
  uint64_t a = static_cast<uint64_t>(x), b = static_cast<uint64_t>(y);
  uint64_t r = op == '+' ? a + b : op == '-' ? a - b : a * b;
  return static_cast<int64_t>(r);
}

/// For each element of `out`, the linear index of the element of `in` that
/// NumPy broadcasting reads.
static std::vector<int64_t> broadcastSources(const Shape &in,
                                             const Shape &out) {
  int64_t n = numElements(out);
  size_t rank = out.size(), offset = rank - in.size();
  std::vector<int64_t> inStride(rank, 0);
  int64_t stride = 1;
  for (size_t d = rank; d-- > offset;) {
    int64_t dim = in[d - offset];
    inStride[d] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  std::vector<int64_t> sources(n);
  std::vector<int64_t> index(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d)
      src += index[d] * inStride[d];
    sources[k] = src;
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < out[d])
        break;
      index[d] = 0;
    }
  }
  return sources;
}

/// Gathers elements of `in` at `sources` into a tensor of shape `out`.
static HostTensor take(const HostTensor &in, const Shape &out,
                       const std::vector<int64_t> &sources) {
  HostTensor t;
  t.shape = out;
  t.isFloat = in.isFloat;
  t.splat = in.splat;
  if (in.splat) {
    t.f = in.f;
    t.i = in.i;
    return t;
  }
  for (int64_t s : sources) {
    if (in.isFloat)
      t.f.push_back(in.f[s]);
    else
      t.i.push_back(in.i[s]);
  }
  return t;
}

/// Calls `visit(linearIndex, multiIndex)` for every element of `shape`.
static void forEachIndex(
    const Shape &shape,
    const std::function<void(int64_t, const std::vector<int64_t> &)> &visit) {
  int64_t n = numElements(shape);
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    visit(k, index);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

using FloatFn = std::function<std::optional<double>(double, double)>;
using IntFn = std::function<std::optional<int64_t>(int64_t, int64_t)>;

/// Folds an elementwise op over broadcast operands. The computation runs in
/// the operands' domain; the result is converted to the result type.
static Attribute foldElementwise(Operation *op, ArrayRef<Attribute> operands,
                                 const FloatFn &floatFn, const IntFn &intFn) {
  Type resultType = op->getResult(0).getType();
  std::vector<HostTensor> inputs;
  for (Attribute a : operands) {
    std::optional<HostTensor> t = unpack(a, resultType);
    if (!t)
      return {};
    inputs.push_back(std::move(*t));
  }
  Shape out = shapeOfType(resultType);
  bool allSplat = llvm::all_of(inputs, [](auto &t) { return t.splat; });
  if (!allSplat && numElements(out) > kMaxFoldedElements)
    return {};
  const HostTensor &a = inputs[0], &b = inputs.size() > 1 ? inputs[1] : a;
  bool isFloat = a.isFloat;
  HostTensor result;
  result.shape = out;
  result.splat = allSplat;
  result.isFloat = isFloat && (floatFn != nullptr);
  int64_t n = allSplat ? 1 : numElements(out);
  std::vector<int64_t> srcA =
      allSplat ? std::vector<int64_t>{0} : broadcastSources(a.shape, out);
  std::vector<int64_t> srcB =
      allSplat ? std::vector<int64_t>{0} : broadcastSources(b.shape, out);
  for (int64_t k = 0; k < n; ++k) {
    if (isFloat) {
      if (!floatFn)
        return {};
      std::optional<double> v =
          floatFn(a.asDouble(srcA[k]), b.asDouble(srcB[k]));
      if (!v)
        return {};
      result.f.push_back(*v);
    } else {
      if (!intFn)
        return {};
      std::optional<int64_t> v = intFn(a.asInt(srcA[k]), b.asInt(srcB[k]));
      if (!v)
        return {};
      result.i.push_back(*v);
    }
  }
  return pack(result, resultType);
}

/// Comparisons compute in the operand domain but produce i1.
static Attribute
foldCompare(Operation *op, ArrayRef<Attribute> operands,
            const std::function<bool(double, double)> &fcmp,
            const std::function<bool(int64_t, int64_t)> &icmp) {
  Type resultType = op->getResult(0).getType();
  std::optional<HostTensor> a = unpack(operands[0], resultType),
                            b = unpack(operands[1], resultType);
  if (!a || !b)
    return {};
  Shape out = shapeOfType(resultType);
  bool allSplat = a->splat && b->splat;
  if (!allSplat && numElements(out) > kMaxFoldedElements)
    return {};
  HostTensor result;
  result.shape = out;
  result.splat = allSplat;
  int64_t n = allSplat ? 1 : numElements(out);
  std::vector<int64_t> srcA =
      allSplat ? std::vector<int64_t>{0} : broadcastSources(a->shape, out);
  std::vector<int64_t> srcB =
      allSplat ? std::vector<int64_t>{0} : broadcastSources(b->shape, out);
  for (int64_t k = 0; k < n; ++k) {
    bool v = a->isFloat ? fcmp(a->asDouble(srcA[k]), b->asDouble(srcB[k]))
                        : icmp(a->asInt(srcA[k]), b->asInt(srcB[k]));
    result.i.push_back(v);
  }
  return pack(result, resultType);
}

static Attribute foldUnaryFloat(Operation *op, Attribute operand,
                                double (*fn)(double)) {
  return foldElementwise(
      op, {operand}, [fn](double x, double) { return fn(x); }, nullptr);
}

//===----------------------------------------------------------------------===//
// Elementwise folders
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](double x, double y) { return x + y; },
      [](int64_t x, int64_t y) { return wrapping(x, y, '+'); });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](double x, double y) { return x - y; },
      [](int64_t x, int64_t y) { return wrapping(x, y, '-'); });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](double x, double y) { return x * y; },
      [](int64_t x, int64_t y) { return wrapping(x, y, '*'); });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](double x, double y) { return x / y; },
      [](int64_t x, int64_t y) -> std::optional<int64_t> {
        if (y == 0)
          return std::nullopt; // Leave the error to the runtime.
        if (y == -1)
          return wrapping(0, x, '-'); // INT64_MIN / -1 would trap.
        return x / y;
      });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](double x, double y) { return std::pow(x, y); },
      [](int64_t x, int64_t y) -> std::optional<int64_t> {
        if (y < 0)
          return std::nullopt;
        // By squaring, wrapping: y may be as large as 2^63 - 1.
        int64_t r = 1;
        for (; y > 0; y >>= 1) {
          if (y & 1)
            r = wrapping(r, x, '*');
          x = wrapping(x, x, '*');
        }
        return r;
      });
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](double x, double y) {
        return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
      },
      [](int64_t x, int64_t y) { return std::max(x, y); });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](double x, double y) {
        return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
      },
      [](int64_t x, int64_t y) { return std::min(x, y); });
}

OpFoldResult AndOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(*this, adaptor.getOperands(), nullptr,
                         [](int64_t x, int64_t y) { return int64_t(x && y); });
}

OpFoldResult OrOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(*this, adaptor.getOperands(), nullptr,
                         [](int64_t x, int64_t y) { return int64_t(x || y); });
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      *this, adaptor.getOperands(), [](double x, double y) { return x == y; },
      [](int64_t x, int64_t y) { return x == y; });
}

OpFoldResult LessOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      *this, adaptor.getOperands(), [](double x, double y) { return x < y; },
      [](int64_t x, int64_t y) { return x < y; });
}

OpFoldResult GreaterOp::fold(FoldAdaptor adaptor) {
  return foldCompare(
      *this, adaptor.getOperands(), [](double x, double y) { return x > y; },
      [](int64_t x, int64_t y) { return x > y; });
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, {adaptor.getInput()}, [](double x, double) { return -x; },
      [](int64_t x, int64_t) { return -x; });
}

OpFoldResult AbsOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, {adaptor.getInput()},
      [](double x, double) { return std::fabs(x); },
      [](int64_t x, int64_t) { return x < 0 ? -x : x; });
}

static double reciprocal(double x) { return 1.0 / x; }
static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
static double relu(double x) { return x > 0 ? x : 0.0; }
static double expFn(double x) { return std::exp(x); }
static double logFn(double x) { return std::log(x); }
static double sqrtFn(double x) { return std::sqrt(x); }
static double tanhFn(double x) { return std::tanh(x); }
static double erfFn(double x) { return std::erf(x); }
static double sinFn(double x) { return std::sin(x); }
static double cosFn(double x) { return std::cos(x); }

OpFoldResult ExpOp::fold(FoldAdaptor a) {
  return foldUnaryFloat(*this, a.getInput(), expFn);
}
OpFoldResult LogOp::fold(FoldAdaptor a) {
  return foldUnaryFloat(*this, a.getInput(), logFn);
}
OpFoldResult SqrtOp::fold(FoldAdaptor a) {
  return foldUnaryFloat(*this, a.getInput(), sqrtFn);
}
OpFoldResult ReciprocalOp::fold(FoldAdaptor a) {
  return foldUnaryFloat(*this, a.getInput(), reciprocal);
}
OpFoldResult TanhOp::fold(FoldAdaptor a) {
  return foldUnaryFloat(*this, a.getInput(), tanhFn);
}
OpFoldResult SinOp::fold(FoldAdaptor a) {
  return foldUnaryFloat(*this, a.getInput(), sinFn);
}
OpFoldResult CosOp::fold(FoldAdaptor a) {
  return foldUnaryFloat(*this, a.getInput(), cosFn);
}
OpFoldResult ErfOp::fold(FoldAdaptor a) {
  return foldUnaryFloat(*this, a.getInput(), erfFn);
}
OpFoldResult SigmoidOp::fold(FoldAdaptor a) {
  return foldUnaryFloat(*this, a.getInput(), sigmoid);
}
OpFoldResult ReluOp::fold(FoldAdaptor a) {
  return foldUnaryFloat(*this, a.getInput(), relu);
}

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(*this, {adaptor.getInput()}, nullptr,
                         [](int64_t x, int64_t) { return int64_t(!x); });
}

OpFoldResult SelectOp::fold(FoldAdaptor adaptor) {
  if (getOnTrue() == getOnFalse() && getType() == getOnTrue().getType())
    return getOnTrue();
  std::optional<HostTensor> c = unpack(adaptor.getCondition(), getType());
  if (!c)
    return {};
  // A uniform condition picks one side whole when no broadcast is needed.
  if (c->splat) {
    Value chosen = c->i[0] ? getOnTrue() : getOnFalse();
    if (chosen.getType() == getType())
      return chosen;
  }
  std::optional<HostTensor> t = unpack(adaptor.getOnTrue(), getType()),
                            f = unpack(adaptor.getOnFalse(), getType());
  if (!t || !f)
    return {};
  Shape out = shapeOfType(getType());
  bool allSplat = c->splat && t->splat && f->splat;
  if (!allSplat && numElements(out) > kMaxFoldedElements)
    return {};
  int64_t n = allSplat ? 1 : numElements(out);
  auto sources = [&](const HostTensor &x) {
    return allSplat ? std::vector<int64_t>{0} : broadcastSources(x.shape, out);
  };
  std::vector<int64_t> sc = sources(*c), st = sources(*t), sf = sources(*f);
  HostTensor result;
  result.shape = out;
  result.splat = allSplat;
  result.isFloat = t->isFloat;
  for (int64_t k = 0; k < n; ++k) {
    bool pick = c->asInt(sc[k]) != 0;
    if (result.isFloat)
      result.f.push_back(pick ? t->asDouble(st[k]) : f->asDouble(sf[k]));
    else
      result.i.push_back(pick ? t->asInt(st[k]) : f->asInt(sf[k]));
  }
  return pack(result, getType());
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  std::optional<HostTensor> t = unpack(adaptor.getInput(), getType());
  if (!t)
    return {};
  return pack(*t, getType());
}

//===----------------------------------------------------------------------===//
// Data movement folders
//===----------------------------------------------------------------------===//

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) is one reshape of x.
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  std::optional<HostTensor> t = unpack(adaptor.getInput(), getType());
  if (!t)
    return {};
  t->shape = shapeOfType(getType());
  return pack(*t, getType());
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPerm();
  bool identity = true;
  for (size_t d = 0; d < perm.size(); ++d)
    identity &= perm[d] == static_cast<int64_t>(d);
  if (identity)
    return getInput();
  // A transpose of a transpose is one transpose (composed permutation).
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> composed;
    for (int64_t d : perm)
      composed.push_back(inner.getPerm()[d]);
    setPermAttr(DenseI64ArrayAttr::get(getContext(), composed));
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  std::optional<HostTensor> t = unpack(adaptor.getInput(), getType());
  if (!t)
    return {};
  Shape out = shapeOfType(getType());
  std::vector<int64_t> inStride(t->shape.size(), 1);
  for (size_t d = t->shape.size(); d-- > 1;)
    inStride[d - 1] = inStride[d] * t->shape[d];
  std::vector<int64_t> sources;
  if (!t->splat)
    forEachIndex(out, [&](int64_t, const std::vector<int64_t> &index) {
      int64_t src = 0;
      for (size_t d = 0; d < index.size(); ++d)
        src += index[d] * inStride[perm[d]];
      sources.push_back(src);
    });
  return pack(take(*t, out, sources), getType());
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  bool identity = getInput().getType() == getType();
  for (size_t d = 0; d < getOffsets().size(); ++d)
    identity &= getOffsets()[d] == 0 && getStrides()[d] == 1;
  if (identity)
    return getInput();
  std::optional<HostTensor> t = unpack(adaptor.getInput(), getType());
  if (!t)
    return {};
  Shape out = shapeOfType(getType());
  std::vector<int64_t> inStride(t->shape.size(), 1);
  for (size_t d = t->shape.size(); d-- > 1;)
    inStride[d - 1] = inStride[d] * t->shape[d];
  std::vector<int64_t> sources;
  if (!t->splat)
    forEachIndex(out, [&](int64_t, const std::vector<int64_t> &index) {
      int64_t src = 0;
      for (size_t d = 0; d < index.size(); ++d)
        src += (getOffsets()[d] + index[d] * getStrides()[d]) * inStride[d];
      sources.push_back(src);
    });
  return pack(take(*t, out, sources), getType());
}

OpFoldResult SliceGradOp::fold(FoldAdaptor) {
  // A window over the whole tensor: the gradient itself.
  if (getGrad().getType() == getType() &&
      llvm::all_of(getOffsets(), [](int64_t x) { return x == 0; }) &&
      llvm::all_of(getStrides(), [](int64_t x) { return x == 1; }))
    return getGrad();
  return {};
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  // A concatenation of a concatenation along the same axis is one.
  SmallVector<Value> flat;
  bool nested = false;
  for (Value in : getInputs()) {
    auto inner = in.getDefiningOp<ConcatOp>();
    if (inner && inner.getAxis() == getAxis()) {
      flat.append(inner.getInputs().begin(), inner.getInputs().end());
      nested = true;
    } else {
      flat.push_back(in);
    }
  }
  if (nested) {
    getInputsMutable().assign(flat);
    return getResult();
  }
  std::vector<HostTensor> inputs;
  for (Attribute a : adaptor.getInputs()) {
    std::optional<HostTensor> t = unpack(a, getType());
    if (!t)
      return {};
    inputs.push_back(std::move(*t));
  }
  Shape out = shapeOfType(getType());
  if (numElements(out) > kMaxFoldedElements)
    return {};
  int64_t axis = getAxis();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= out[d];
  for (size_t d = axis + 1; d < out.size(); ++d)
    inner *= out[d];
  HostTensor result;
  result.shape = out;
  result.isFloat = inputs[0].isFloat;
  for (int64_t o = 0; o < outer; ++o) {
    for (const HostTensor &t : inputs) {
      int64_t chunk = t.shape[axis] * inner;
      for (int64_t k = 0; k < chunk; ++k) {
        int64_t src = o * chunk + k;
        if (result.isFloat)
          result.f.push_back(t.asDouble(src));
        else
          result.i.push_back(t.asInt(src));
      }
    }
  }
  return pack(result, getType());
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  std::optional<HostTensor> t = unpack(adaptor.getInput(), getType());
  if (!t)
    return {};
  Shape out = shapeOfType(getType());
  std::vector<int64_t> sources;
  if (!t->splat) {
    if (numElements(out) > kMaxFoldedElements)
      return {};
    sources = broadcastSources(t->shape, out);
  }
  return pack(take(*t, out, sources), getType());
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  // Splat data gathers into a splat whatever the indices: only the data
  // decides whether the result may be folded.
  std::optional<HostTensor> data = unpack(adaptor.getData(), getType());
  std::optional<HostTensor> indices = unpack(adaptor.getIndices(), Type());
  if (!data || !indices)
    return {};
  Shape out = shapeOfType(getType());
  if (numElements(out) > kMaxFoldedElements)
    return {};
  int64_t axis = getAxis();
  int64_t axisSize = data->shape[axis];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= data->shape[d];
  for (size_t d = axis + 1; d < data->shape.size(); ++d)
    inner *= data->shape[d];
  int64_t numIndices = numElements(indices->shape);
  std::vector<int64_t> sources;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < numIndices; ++k) {
      int64_t index = indices->asInt(k);
      if (index < 0)
        index += axisSize;
      if (index < 0 || index >= axisSize)
        return {}; // Out of range: the runtime reports it.
      for (int64_t in = 0; in < inner; ++in)
        sources.push_back((o * axisSize + index) * inner + in);
    }
  }
  return pack(take(*data, out, sources), getType());
}

OpFoldResult TriluOp::fold(FoldAdaptor adaptor) {
  std::optional<HostTensor> t = unpack(adaptor.getInput(), getType());
  if (!t)
    return {};
  Shape shape = shapeOfType(getType());
  if (numElements(shape) > kMaxFoldedElements)
    return {};
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  bool upper = getUpper();
  int64_t k = getK();
  HostTensor result;
  result.shape = shape;
  result.isFloat = t->isFloat;
  forEachIndex(shape, [&](int64_t linear, const std::vector<int64_t> &) {
    int64_t j = linear % cols, i = (linear / cols) % rows;
    bool keep = upper ? j >= i + k : j <= i + k;
    if (result.isFloat)
      result.f.push_back(keep ? t->asDouble(linear) : 0.0);
    else
      result.i.push_back(keep ? t->asInt(linear) : 0);
  });
  return pack(result, getType());
}
