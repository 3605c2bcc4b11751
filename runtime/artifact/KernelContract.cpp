// KernelContract.cpp - What each kernel requires of its operands.

#include "runtime/artifact/KernelContract.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/support/Checked.h"

#include <algorithm>

namespace strata::artifact {

namespace {

using Shape = std::vector<int64_t>;

int64_t count(const Shape &shape) {
  return checkedNumElements(shape).value_or(-1);
}

std::string shapeText(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Checks one step; each rule returns false with `why` set.
class StepChecker {
public:
  StepChecker(const Plan &plan, const Step &step, std::string &why)
      : plan_(plan), step_(step), why_(why) {}

  bool check();

private:
  const Slot &in(size_t k) const { return plan_.slots[step_.inputs[k]]; }
  const Slot &out(size_t k) const { return plan_.slots[step_.outputs[k]]; }

  bool fail(const std::string &why) {
    why_ = why;
    return false;
  }
  /// The operand counts of the kernel table (validatePlan checks them
  /// first; kept here so the contract check stands alone).
  bool operands() {
    const KernelInfo &k = kernelInfo(step_.kernel);
    size_t maxIn = k.maxInputs == kVariadic ? SIZE_MAX : k.maxInputs;
    if (step_.inputs.size() < k.minInputs || step_.inputs.size() > maxIn)
      return fail("takes " + std::to_string(k.minInputs) +
                  (maxIn == SIZE_MAX      ? " or more"
                   : maxIn != k.minInputs ? "-" + std::to_string(maxIn)
                                          : "") +
                  " inputs, has " + std::to_string(step_.inputs.size()));
    if (k.outputs == kVariadic ? step_.outputs.empty()
                               : step_.outputs.size() != k.outputs)
      return fail("has " + std::to_string(k.outputs) + " outputs, not " +
                  std::to_string(step_.outputs.size()));
    return true;
  }
  bool attributes(size_t ints, size_t floats) {
    if (step_.ints.size() < ints || step_.floats.size() < floats)
      return fail("needs " + std::to_string(ints) + " integer and " +
                  std::to_string(floats) + " float attributes");
    return true;
  }
  bool sameType(const Slot &a, const Slot &b) {
    if (a.dtype != b.dtype)
      return fail("mixes " + std::string(dtypeName(a.dtype)) + " '" + a.name +
                  "' and " + dtypeName(b.dtype) + " '" + b.name + "'");
    return true;
  }
  bool floating(const Slot &s) {
    if (!isFloatDType(s.dtype))
      return fail("needs a floating-point '" + s.name + "', it is " +
                  dtypeName(s.dtype));
    return true;
  }
  bool indexType(const Slot &s) {
    if (s.dtype != DType::I32 && s.dtype != DType::I64)
      return fail("needs int32 or int64 '" + s.name + "', it is " +
                  dtypeName(s.dtype));
    return true;
  }
  bool sameCount(const Slot &a, const Slot &b) {
    if (count(a.shape) != count(b.shape))
      return fail("'" + a.name + "' " + shapeText(a.shape) + " and '" + b.name +
                  "' " + shapeText(b.shape) + " differ in element count");
    return true;
  }
  bool sameShape(const Slot &a, const Slot &b) {
    if (a.shape != b.shape)
      return fail("'" + a.name + "' " + shapeText(a.shape) + " and '" + b.name +
                  "' " + shapeText(b.shape) + " differ in shape");
    return true;
  }
  bool elementCount(const Slot &s, int64_t expected) {
    if (count(s.shape) != expected)
      return fail("'" + s.name + "' " + shapeText(s.shape) + " should have " +
                  std::to_string(expected) + " elements");
    return true;
  }
  /// Whether `shard` is a vector of one of ints[0] shards of `full`:
  /// ceil(numel / ranks) elements.
  bool shardOf(const Slot &full, const Slot &shard) {
    int64_t ranks = step_.ints[0];
    if (ranks < 1 || ranks > (int64_t(1) << 20))
      return fail("shards over 1 to 2^20 ranks, not " + std::to_string(ranks));
    int64_t n = count(full.shape);
    if (n < 0)
      return fail("'" + full.name + "' " + shapeText(full.shape) +
                  " has too many elements");
    int64_t c = n / ranks + (n % ranks != 0);
    if (shard.shape != Shape{c})
      return fail("a shard of '" + full.name + "' " + shapeText(full.shape) +
                  " over " + std::to_string(ranks) + " ranks is [" +
                  std::to_string(c) + "], '" + shard.name + "' is " +
                  shapeText(shard.shape));
    return true;
  }
  /// `from` reads right-aligned into `to`: each dimension equal or 1.
  bool broadcastsTo(const Shape &from, const Shape &to, const std::string &n) {
    if (from.size() > to.size())
      return fail("'" + n + "' " + shapeText(from) + " does not broadcast to " +
                  shapeText(to));
    size_t offset = to.size() - from.size();
    for (size_t d = 0; d < from.size(); ++d)
      if (from[d] != 1 && from[d] != to[offset + d])
        return fail("'" + n + "' " + shapeText(from) +
                    " does not broadcast to " + shapeText(to));
    return true;
  }
  bool axis(int64_t a, size_t rank, bool inclusive = false) {
    if (a < 0 || a > static_cast<int64_t>(rank) ||
        (!inclusive && a == static_cast<int64_t>(rank)))
      return fail("axis " + std::to_string(a) + " is out of range for rank " +
                  std::to_string(rank));
    return true;
  }
  /// A strided window: ints = offsets (rank), then strides (rank), of
  /// `window` inside `whole`; every index it touches must be in bounds.
  bool window(const Shape &whole, const Shape &window) {
    size_t rank = whole.size();
    if (window.size() != rank || step_.ints.size() != 2 * rank)
      return fail("needs offsets and strides for each of " +
                  std::to_string(rank) + " dimensions");
    if (count(window) == 0)
      return true;
    for (size_t d = 0; d < rank; ++d) {
      __int128 first = step_.ints[d];
      __int128 last =
          first + static_cast<__int128>(window[d] - 1) * step_.ints[rank + d];
      if (first < 0 || first >= whole[d] || last < 0 || last >= whole[d])
        return fail("window " + shapeText(window) + " at offsets/strides " +
                    shapeText(step_.ints) + " leaves " + shapeText(whole) +
                    " in dimension " + std::to_string(d));
    }
    return true;
  }

  bool elementwise();
  bool matmul();
  bool reduce();
  bool layerNorm();
  bool concat();
  bool attention();
  bool fusedElementwise();
  bool gather(const Slot &data, const Slot &indices, const Slot &result,
              bool grad);
  bool update();

  const Plan &plan_;
  const Step &step_;
  std::string &why_;
};

bool StepChecker::elementwise() {
  Kernel k = step_.kernel;
  bool binary = k <= Kernel::Greater;
  bool compare =
      k == Kernel::Equal || k == Kernel::Less || k == Kernel::Greater;
  if (k == Kernel::Select) {
    if (!operands() || !sameType(in(1), in(2)) || !sameType(in(1), out(0)))
      return false;
    if (in(0).dtype != DType::Bool)
      return fail("needs a bool condition");
    for (size_t i = 0; i < 3; ++i)
      if (!broadcastsTo(in(i).shape, out(0).shape, in(i).name))
        return false;
    return true;
  }
  if (binary) {
    if (!operands() || !sameType(in(0), in(1)))
      return false;
    if (compare ? out(0).dtype != DType::Bool : out(0).dtype != in(0).dtype)
      return fail("has the wrong result type " +
                  std::string(dtypeName(out(0).dtype)));
    return broadcastsTo(in(0).shape, out(0).shape, in(0).name) &&
           broadcastsTo(in(1).shape, out(0).shape, in(1).name);
  }
  // Unary kernels, gelu and cast: one value in, the same count out.
  if (!operands() || !sameCount(in(0), out(0)))
    return false;
  if (k != Kernel::Cast && !sameType(in(0), out(0)))
    return false;
  return true;
}

bool StepChecker::matmul() {
  if (!operands() || !sameType(in(0), in(1)) || !sameType(in(0), out(0)))
    return false;
  MatMulShape s;
  std::string why;
  if (!matmulShape(in(0).shape, in(1).shape, step_.ints, s, why))
    return fail(why);
  Shape batch = s.batch;
  batch.push_back(s.m);
  batch.push_back(s.n);
  std::optional<int64_t> expected = checkedNumElements(batch);
  if (!expected)
    return fail("result size overflows");
  if (step_.inputs.size() == 3) {
    if (in(2).dtype != DType::I64 || !in(2).shape.empty())
      return fail("rows must be an int64 scalar");
    if (in(0).shape.size() != 2 || in(1).shape.size() != 2)
      return fail("with rows, both operands must be matrices");
    if (s.ta && s.tb)
      return fail("with rows and a transposed a, b must not be transposed");
  }
  return elementCount(out(0), *expected);
}

bool StepChecker::reduce() {
  if (!operands() || !sameType(in(0), out(0)))
    return false;
  if (step_.kernel == Kernel::ReduceSumSquare && !floating(in(0)))
    return false;
  if (step_.ints.empty())
    return fail("has no keepdims attribute");
  const Shape &s = in(0).shape;
  std::vector<bool> reduced(s.size(), false);
  for (size_t i = 0; i + 1 < step_.ints.size(); ++i) {
    int64_t a = step_.ints[i];
    if (!axis(a, s.size()))
      return false;
    if (reduced[a])
      return fail("reduces axis " + std::to_string(a) + " twice");
    reduced[a] = true;
  }
  Shape kept;
  for (size_t d = 0; d < s.size(); ++d)
    if (!reduced[d])
      kept.push_back(s[d]);
  std::optional<int64_t> n = checkedNumElements(kept);
  if (!n)
    return fail("result size overflows");
  return elementCount(out(0), *n);
}

bool StepChecker::layerNorm() {
  bool grad = step_.kernel == Kernel::LayerNormGrad;
  if (!operands())
    return false;
  if (!attributes(grad ? 1 : 2, 1) || !floating(in(0)))
    return false;
  const Shape &x = in(0).shape;
  if (!axis(step_.ints[0], x.size(), /*inclusive=*/true))
    return false;
  Shape normalized(x.begin() + step_.ints[0], x.end());
  if (!broadcastsTo(in(1).shape, normalized, in(1).name))
    return false;
  if (grad) {
    int64_t inner = count(normalized);
    return sameShape(in(2), in(0)) && sameType(in(2), in(0)) &&
           sameShape(out(0), in(0)) && sameType(out(0), in(0)) &&
           sameType(out(1), in(0)) && sameType(out(2), in(0)) &&
           elementCount(out(1), inner) && elementCount(out(2), inner);
  }
  bool hasBias = step_.ints[1] != 0;
  if (hasBias != (step_.inputs.size() == 3))
    return fail("bias flag and operands disagree");
  if (hasBias && !broadcastsTo(in(2).shape, normalized, in(2).name))
    return false;
  return sameShape(out(0), in(0)) && sameType(out(0), in(0));
}

bool StepChecker::attention() {
  bool grad = step_.kernel == Kernel::AttentionGrad;
  if (!operands() || !attributes(2, 2) || !floating(in(0)) ||
      !sameType(in(0), in(1)) || !sameType(in(0), in(2)))
    return false;
  int64_t kind = step_.ints[1];
  size_t maskAt = grad ? 4 : 3;
  bool hasMask = step_.inputs.size() > maskAt;
  if (kind < 0 || kind > 3 || (kind != 0) != hasMask)
    return fail("mask kind " + std::to_string(kind) + " and operands disagree");
  if (hasMask && (kind == 1 ? in(maskAt).dtype != in(0).dtype
                            : in(maskAt).dtype != DType::Bool))
    return fail("mask '" + in(maskAt).name + "' is " +
                dtypeName(in(maskAt).dtype) +
                (kind == 1 ? ", not q's type" : ", not bool"));
  AttentionShape a;
  std::string why;
  const Shape *mask = hasMask ? &in(maskAt).shape : nullptr;
  if (!attentionShape(in(0).shape, in(1).shape, in(2).shape, mask, a, why))
    return fail(why);
  Shape o = in(0).shape;
  o.back() = a.dv;
  if (!grad) {
    if (out(0).shape != o)
      return fail("result '" + out(0).name + "' should be " + shapeText(o));
    return sameType(out(0), in(0));
  }
  if (in(3).shape != o)
    return fail("gradient '" + in(3).name + "' should be " + shapeText(o));
  for (int i = 0; i < 3; ++i)
    if (!sameType(out(i), in(i)) || !sameShape(out(i), in(i)))
      return false;
  return sameType(in(3), in(0));
}

bool StepChecker::fusedElementwise() {
  if (!operands())
    return false;
  ElementwiseProgram program;
  std::string why;
  if (!elementwiseProgram(step_.ints, step_.floats, step_.inputs.size(),
                          step_.outputs.size(), program, why))
    return fail(why);
  const Slot &first = out(0);
  if (!floating(first))
    return false;
  for (size_t k = 0; k < step_.outputs.size(); ++k)
    if (!sameType(out(k), first) || !sameShape(out(k), first))
      return false;
  for (size_t k = 0; k < step_.inputs.size(); ++k)
    if (!sameType(in(k), first) ||
        !broadcastsTo(in(k).shape, first.shape, in(k).name))
      return false;
  return true;
}

bool StepChecker::concat() {
  if (step_.inputs.empty() || !operands() || !attributes(1, 0))
    return false;
  const Shape &o = out(0).shape;
  int64_t a = step_.ints[0];
  if (!axis(a, o.size()))
    return false;
  int64_t total = 0;
  for (size_t k = 0; k < step_.inputs.size(); ++k) {
    const Shape &s = in(k).shape;
    if (!sameType(in(k), out(0)))
      return false;
    if (s.size() != o.size())
      return fail("joins '" + in(k).name + "' of another rank");
    for (size_t d = 0; d < s.size(); ++d)
      if (static_cast<int64_t>(d) != a && s[d] != o[d])
        return fail("joins '" + in(k).name + "' " + shapeText(s) + " into " +
                    shapeText(o));
    std::optional<int64_t> sum = checkedAdd(total, s[a]);
    if (!sum)
      return fail("joined sizes overflow");
    total = *sum;
  }
  if (total != o[a])
    return fail("joined sizes add up to " + std::to_string(total) + ", not " +
                std::to_string(o[a]));
  return true;
}

bool StepChecker::gather(const Slot &data, const Slot &indices,
                         const Slot &result, bool grad) {
  if (!operands() || !attributes(1, 0) || !indexType(indices) ||
      !sameType(data, result))
    return false;
  if (grad && !floating(result))
    return false;
  const Shape &s = data.shape;
  int64_t a = step_.ints[0];
  if (!axis(a, s.size()))
    return false;
  Shape expected(s.begin(), s.begin() + a);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), s.begin() + a + 1, s.end());
  std::optional<int64_t> n = checkedNumElements(expected);
  if (!n)
    return fail("result size overflows");
  // Forward: data -> result; gradient: `result` is the incoming gradient
  // laid out like the forward result.
  return elementCount(grad ? in(0) : result, *n);
}

bool StepChecker::update() {
  Kernel k = step_.kernel;
  if (k == Kernel::Accumulate || k == Kernel::Assign || k == Kernel::Store) {
    if (!operands())
      return false;
    return sameType(in(0), in(1)) && sameCount(in(0), in(1)) &&
           (k != Kernel::Accumulate || floating(in(0)));
  }
  if (k == Kernel::UpdateAdaLomo) {
    if (!operands() || !attributes(0, 2) || !floating(in(0)))
      return false;
    for (size_t i = 1; i < step_.inputs.size(); ++i)
      if (!sameType(in(i), in(0)))
        return false;
    if (!sameCount(in(0), in(1)))
      return false;
    int64_t n = count(in(0).shape);
    if (step_.inputs.size() == 3)
      return elementCount(in(2), n);
    int64_t cols = in(0).shape.empty() ? 1 : in(0).shape.back();
    if (cols == 0)
      return fail("factors a parameter with no columns");
    return elementCount(in(2), n / cols) && elementCount(in(3), cols);
  }
  UpdateOperands at = updateOperands(k, step_.inputs.size(), step_.ints);
  size_t hyper = k == Kernel::UpdateSgd        ? 2
                 : k == Kernel::UpdateMomentum ? 3
                                               : 5;
  if (!operands() || !attributes(0, hyper) || !floating(in(0)))
    return false;
  if (step_.inputs.size() < at.before)
    return fail("takes at least " + std::to_string(at.before) + " inputs");
  if (step_.ints.size() > 1 && step_.ints[1] != 0 && at.low < 0)
    return fail("names a low-precision copy it does not have");
  size_t keeps = at.keeps >= 0 ? step_.inputs.size() - at.keeps : 0;
  if (step_.ints.size() > 2 && step_.ints[2] != 0 &&
      at.speculation == Speculation::None)
    return fail(step_.ints[2] == int64_t(Speculation::Speculate) ||
                        step_.ints[2] == int64_t(Speculation::Redo)
                    ? "speculates without a keep per tensor it writes"
                    : "has speculation mode " + std::to_string(step_.ints[2]));
  if (step_.inputs.size() > at.before + (at.scale >= 0) + (at.low >= 0) + keeps)
    return fail("has " + std::to_string(step_.inputs.size()) +
                " inputs: more than its states, scale and copy");
  if (at.speculation != Speculation::None) {
    // The keeps live beside the tensors in host memory or on the SSD, and
    // only the CPU runs a speculative update or its redo.
    if (!isCpuUpdate(plan_, step_))
      return fail("speculates but is not a CPU update");
    if (step_.ints[0] != 1)
      return fail("speculates over accumulated micro-batches");
    if ((at.speculation == Speculation::Speculate) != (at.scale < 0))
      return fail(at.scale < 0 ? "redoes without a scale"
                               : "speculates with a scale");
    std::vector<size_t> written = keptInputs(at);
    for (size_t j = 0; j < keeps; ++j)
      if (!sameType(in(at.keeps + j), in(written[j])) ||
          !sameShape(in(at.keeps + j), in(written[j])))
        return false;
  }
  for (size_t i = 1; i < step_.inputs.size(); ++i)
    if (static_cast<int>(i) != at.low &&
        (at.keeps < 0 || static_cast<int>(i) < at.keeps) &&
        !sameType(in(i), in(0)))
      return false;
  for (size_t i = 1; i < at.before; ++i)
    if (!sameCount(in(i), in(0)))
      return false;
  if (at.scale >= 0 && !elementCount(in(at.scale), 1))
    return false;
  if (at.low >= 0) {
    const Slot &low = in(at.low);
    if (in(0).dtype != DType::F32 ||
        (low.dtype != DType::BF16 && low.dtype != DType::F16))
      return fail("keeps a " + std::string(dtypeName(low.dtype)) + " copy '" +
                  low.name + "' of " + dtypeName(in(0).dtype) + " '" +
                  in(0).name + "' (a bf16 or f16 copy of f32 weights)");
    if (!sameCount(low, in(0)))
      return false;
  }
  if (!step_.ints.empty() && step_.ints[0] < 1)
    return fail("accumulates " + std::to_string(step_.ints[0]) +
                " micro-batches");
  return true;
}

bool StepChecker::check() {
  for (uint32_t s : step_.inputs)
    if (count(plan_.slots[s].shape) < 0)
      return fail("operand '" + plan_.slots[s].name + "' has an invalid shape");
  for (uint32_t s : step_.outputs)
    if (count(plan_.slots[s].shape) < 0)
      return fail("result '" + plan_.slots[s].name + "' has an invalid shape");
  switch (step_.kernel) {
  case Kernel::MatMul:
    return matmul();
  case Kernel::ReduceSum:
  case Kernel::ReduceMean:
  case Kernel::ReduceMax:
  case Kernel::ReduceSumSquare:
    return reduce();
  case Kernel::Softmax:
  case Kernel::LogSoftmax:
    return operands() && attributes(1, 0) && floating(in(0)) &&
           axis(step_.ints[0], in(0).shape.size()) &&
           sameShape(in(0), out(0)) && sameType(in(0), out(0));
  case Kernel::LayerNorm:
  case Kernel::LayerNormGrad:
    return layerNorm();
  case Kernel::Transpose: {
    if (!operands() || !sameType(in(0), out(0)))
      return false;
    const Shape &s = in(0).shape;
    if (step_.ints.size() != s.size())
      return fail("permutation has " + std::to_string(step_.ints.size()) +
                  " entries for rank " + std::to_string(s.size()));
    std::vector<bool> seen(s.size(), false);
    Shape permuted;
    for (int64_t p : step_.ints) {
      if (p < 0 || p >= static_cast<int64_t>(s.size()) || seen[p])
        return fail("is not a permutation: " + shapeText(step_.ints));
      seen[p] = true;
      permuted.push_back(s[p]);
    }
    if (permuted != out(0).shape)
      return fail("result " + shapeText(out(0).shape) + " is not " +
                  shapeText(s) + " permuted");
    return true;
  }
  case Kernel::Slice:
    return operands() && sameType(in(0), out(0)) &&
           window(in(0).shape, out(0).shape);
  case Kernel::SliceGrad:
    return operands() && sameType(in(0), out(0)) &&
           window(out(0).shape, in(0).shape);
  case Kernel::Concat:
    return concat();
  case Kernel::Broadcast:
    return operands() && sameType(in(0), out(0)) &&
           broadcastsTo(in(0).shape, out(0).shape, in(0).name);
  case Kernel::Gather:
    return operands() && gather(in(0), in(1), out(0), false);
  case Kernel::GatherGrad:
    return operands() && sameType(in(0), out(0)) &&
           gather(out(0), in(1), out(0), true);
  case Kernel::Trilu:
    if (!operands() || !attributes(2, 0) || !sameType(in(0), out(0)) ||
        !sameShape(in(0), out(0)))
      return false;
    if (in(0).shape.size() < 2)
      return fail("needs a matrix");
    return true;
  case Kernel::Copy:
    return operands() && sameType(in(0), out(0)) && sameCount(in(0), out(0));
  case Kernel::CompactRows:
    if (!operands())
      return false;
    if (in(0).dtype != DType::Bool || in(0).shape.size() != 1)
      return fail("needs a bool vector");
    if (out(0).dtype != DType::I64 || out(0).shape != in(0).shape)
      return fail("order must be an int64 vector of the mask's length");
    if (out(1).dtype != DType::I64 || !out(1).shape.empty())
      return fail("count must be an int64 scalar");
    return true;
  case Kernel::GroupRows: {
    if (!operands())
      return false;
    for (size_t i = 0; i < step_.inputs.size(); ++i)
      if (in(i).dtype != DType::Bool || in(i).shape.size() != 1 ||
          in(i).shape != in(0).shape)
        return fail("needs bool vectors of one length");
    if (out(0).dtype != DType::I64 || out(0).shape != in(0).shape)
      return fail("order must be an int64 vector of the masks' length");
    if (out(1).dtype != DType::I64 ||
        out(1).shape != Shape{int64_t(step_.inputs.size()) + 1})
      return fail("offsets must be an int64 vector of one entry per mask "
                  "and one more");
    if (out(2).dtype != DType::I64 || !out(2).shape.empty())
      return fail("count must be an int64 scalar");
    return true;
  }
  case Kernel::GroupedMatMul: {
    if (!operands() || !attributes(1, 0) || !floating(in(0)) ||
        !sameType(in(0), out(0)))
      return false;
    size_t groups = step_.inputs.size() - 2;
    if (in(1).dtype != DType::I64 || in(1).shape != Shape{int64_t(groups) + 1})
      return fail("offsets must be an int64 vector of one entry per weight "
                  "and one more");
    if (in(0).shape.size() != 2)
      return fail("needs a matrix of rows");
    for (size_t i = 2; i < step_.inputs.size(); ++i)
      if (!sameType(in(0), in(i)) || in(i).shape.size() != 2 ||
          in(i).shape != in(2).shape)
        return fail("needs weights of one matrix shape");
    bool tb = step_.ints[0] != 0;
    int64_t k = in(2).shape[tb ? 1 : 0], n = in(2).shape[tb ? 0 : 1];
    if (in(0).shape[1] != k)
      return fail("rows of " + std::to_string(in(0).shape[1]) +
                  " columns times weights of " + std::to_string(k) + " rows");
    if (out(0).shape != Shape{in(0).shape[0], n})
      return fail("result must be " + shapeText({in(0).shape[0], n}));
    return true;
  }
  case Kernel::SegmentMatMul: {
    if (!operands() || !attributes(1, 0) || !floating(in(0)) ||
        !sameType(in(0), in(1)) || !sameType(in(0), out(0)))
      return false;
    if (in(0).shape.size() != 2 || in(1).shape.size() != 2 ||
        in(0).shape[0] != in(1).shape[0])
      return fail("needs two matrices of the same rows");
    if (in(2).dtype != DType::I64 || in(2).shape.size() != 1 ||
        in(2).shape[0] < 2)
      return fail("offsets must be an int64 vector of two or more entries");
    if (step_.ints[0] < 0 || step_.ints[0] + 1 >= in(2).shape[0])
      return fail("segment " + std::to_string(step_.ints[0]) +
                  " is not one of the offsets' groups");
    if (out(0).shape != Shape{in(0).shape[1], in(1).shape[1]})
      return fail("result must be " +
                  shapeText({in(0).shape[1], in(1).shape[1]}));
    return true;
  }
  case Kernel::AllReduce:
    if (!operands() || !attributes(1, 0) || !floating(in(0)) ||
        !sameType(in(0), out(0)) || !sameShape(in(0), out(0)))
      return false;
    if (step_.ints[0] < 1)
      return fail("needs at least one rank, not " +
                  std::to_string(step_.ints[0]));
    return true;
  case Kernel::ReduceScatter:
  case Kernel::Shard:
    return operands() && attributes(1, 0) && floating(in(0)) &&
           sameType(in(0), out(0)) && shardOf(in(0), out(0));
  case Kernel::AllGather:
    return operands() && attributes(1, 0) && floating(in(0)) &&
           sameType(in(0), in(1)) && shardOf(in(0), in(1));
  case Kernel::Unshard:
    return operands() && attributes(1, 0) && floating(in(0)) &&
           sameType(in(0), out(0)) && shardOf(out(0), in(0));
  case Kernel::CrossEntropy:
  case Kernel::CrossEntropyGrad: {
    // The loss and its gradient may be of another float type than the
    // logits (an fp32 loss of bf16 logits); the logits' gradient is of
    // theirs.
    bool grad = step_.kernel == Kernel::CrossEntropyGrad;
    if (!operands() || !floating(in(0)) || !indexType(in(1)) ||
        !floating(out(0)) || (grad && !sameType(in(0), out(0))))
      return false;
    if (in(0).shape.size() != 2)
      return fail("needs logits [rows, classes]");
    if (!elementCount(in(1), in(0).shape[0]))
      return false;
    if (grad)
      return floating(in(2)) && elementCount(in(2), 1) &&
             sameShape(out(0), in(0));
    return elementCount(out(0), 1);
  }
  case Kernel::Attention:
  case Kernel::AttentionGrad:
    return attention();
  case Kernel::Elementwise:
    return fusedElementwise();
  case Kernel::GeluGrad:
    return operands() && floating(in(0)) && sameShape(in(0), in(1)) &&
           sameType(in(0), in(1)) && sameShape(in(0), out(0)) &&
           sameType(in(0), out(0));
  case Kernel::UpdateSgd:
  case Kernel::UpdateMomentum:
  case Kernel::UpdateAdamW:
  case Kernel::Accumulate:
  case Kernel::UpdateAdaLomo:
  case Kernel::Assign:
  case Kernel::Store:
    return update();
  default:
    break;
  }
  if ((step_.kernel >= Kernel::Add && step_.kernel <= Kernel::Cast) ||
      step_.kernel == Kernel::Abs || step_.kernel == Kernel::Sin ||
      step_.kernel == Kernel::Cos)
    return elementwise();
  return fail("has no contract");
}

} // namespace

bool elementwiseInstruction(Kernel kernel, int &arity) {
  switch (kernel) {
  case Kernel::Add:
  case Kernel::Sub:
  case Kernel::Mul:
  case Kernel::Div:
  case Kernel::Pow:
  case Kernel::Max:
  case Kernel::Min:
  case Kernel::GeluGrad:
    arity = 2;
    return true;
  case Kernel::Neg:
  case Kernel::Exp:
  case Kernel::Log:
  case Kernel::Sqrt:
  case Kernel::Reciprocal:
  case Kernel::Tanh:
  case Kernel::Erf:
  case Kernel::Sigmoid:
  case Kernel::Relu:
  case Kernel::Gelu:
  case Kernel::Abs:
  case Kernel::Sin:
  case Kernel::Cos:
    arity = 1;
    return true;
  default:
    return false;
  }
}

bool elementwiseProgram(const std::vector<int64_t> &ints,
                        const std::vector<double> &floats, size_t numInputs,
                        size_t numOutputs, ElementwiseProgram &program,
                        std::string &why) {
  auto fail = [&](const std::string &w) {
    why = "elementwise program: " + w;
    return false;
  };
  if (numInputs > size_t(kMaxElementwiseInputs) ||
      floats.size() > size_t(kMaxElementwiseConstants) ||
      numOutputs > size_t(kMaxElementwiseOutputs))
    return fail("more than " + std::to_string(kMaxElementwiseInputs) +
                " inputs, " + std::to_string(kMaxElementwiseConstants) +
                " constants or " + std::to_string(kMaxElementwiseOutputs) +
                " outputs");
  if (ints.empty() || ints[0] < 1 || ints[0] > kMaxElementwiseInstructions)
    return fail("needs 1 to " + std::to_string(kMaxElementwiseInstructions) +
                " instructions");
  size_t n = static_cast<size_t>(ints[0]);
  if (ints.size() != 1 + 4 * n + numOutputs)
    return fail("has " + std::to_string(ints.size()) + " integers, not " +
                std::to_string(1 + 4 * n + numOutputs));
  ElementwiseProgram p;
  p.numInputs = static_cast<int32_t>(numInputs);
  p.numConstants = static_cast<int32_t>(floats.size());
  int64_t defined = p.numInputs + p.numConstants;
  for (size_t i = 0; i < n; ++i, ++defined) {
    const int64_t *w = &ints[1 + 4 * i];
    int arity = 0;
    if (w[0] < 1 || w[0] >= static_cast<int64_t>(Kernel::NumKernels) ||
        !elementwiseInstruction(static_cast<Kernel>(w[0]), arity))
      return fail("instruction " + std::to_string(i) + " has kernel " +
                  std::to_string(w[0]) + ", not an elementwise one");
    bool ok = w[1] >= 0 && w[1] < defined &&
              (arity == 1 ? w[2] == -1 : w[2] >= 0 && w[2] < defined) &&
              (w[3] == 0 || w[3] == 1);
    if (!ok)
      return fail("instruction " + std::to_string(i) +
                  " reads a register not yet written or has a bad flag");
    p.instructions.push_back(
        {static_cast<Kernel>(w[0]), static_cast<int32_t>(w[1]),
         static_cast<int32_t>(w[2]), static_cast<int32_t>(w[3])});
  }
  for (size_t k = 0; k < numOutputs; ++k) {
    int64_t r = ints[1 + 4 * n + k];
    if (r < 0 || r >= defined)
      return fail("output " + std::to_string(k) + " names register " +
                  std::to_string(r) + " of " + std::to_string(defined));
    p.outputs.push_back(static_cast<int32_t>(r));
  }
  program = std::move(p);
  return true;
}

bool attentionShape(const std::vector<int64_t> &q,
                    const std::vector<int64_t> &k,
                    const std::vector<int64_t> &v,
                    const std::vector<int64_t> *mask, AttentionShape &shape,
                    std::string &why) {
  size_t rank = q.size();
  if (rank < 2 || rank > 4 || k.size() != rank || v.size() != rank) {
    why = "q, k and v need one rank, 2 to 4";
    return false;
  }
  for (size_t d = 0; d + 2 < rank; ++d)
    if (k[d] != q[d] || v[d] != q[d]) {
      why = "q " + shapeText(q) + ", k " + shapeText(k) + " and v " +
            shapeText(v) + " differ in their batch dimensions";
      return false;
    }
  AttentionShape a;
  a.b = rank == 4 ? q[0] : 1;
  a.h = rank >= 3 ? q[rank - 3] : 1;
  a.t = q[rank - 2];
  a.d = q[rank - 1];
  a.s = k[rank - 2];
  a.dv = v[rank - 1];
  if (k[rank - 1] != a.d || v[rank - 2] != a.s) {
    why = "k " + shapeText(k) + " and v " + shapeText(v) + " do not fit q " +
          shapeText(q);
    return false;
  }
  if (count(q) < 0 || count(k) < 0 || count(v) < 0 ||
      !checkedNumElements({a.b, a.h, a.t, a.s})) {
    why = "attention sizes overflow";
    return false;
  }
  if (mask) {
    Shape full = {a.b, a.h, a.t, a.s};
    const Shape &m = *mask;
    if (m.size() > 4) {
      why = "mask " + shapeText(m) + " has rank above 4";
      return false;
    }
    a.maskStrides.assign(4, 0);
    int64_t stride = 1;
    for (size_t i = m.size(); i-- > 0;) {
      size_t d = 4 - m.size() + i;
      if (m[i] != 1 && m[i] != full[d]) {
        why = "mask " + shapeText(m) + " does not broadcast to " +
              shapeText(full);
        return false;
      }
      a.maskStrides[d] = m[i] == 1 ? 0 : stride;
      stride *= m[i];
    }
  }
  shape = a;
  return true;
}

std::vector<int64_t> groupBounds(const int64_t *offsets, size_t groups,
                                 int64_t rows) {
  std::vector<int64_t> bounds(groups + 1);
  int64_t low = 0;
  for (size_t e = 0; e <= groups; ++e)
    low = bounds[e] = std::clamp<int64_t>(offsets[e], low, rows);
  return bounds;
}

bool matmulShape(const std::vector<int64_t> &a, const std::vector<int64_t> &b,
                 const std::vector<int64_t> &ints, MatMulShape &s,
                 std::string &why) {
  Shape as = a, bs = b;
  if (as.empty() || bs.empty())
    return (why = "multiplies a scalar", false);
  s.ta = ints.size() > 0 && ints[0] != 0;
  s.tb = ints.size() > 1 && ints[1] != 0;
  if (as.size() == 1) {
    as.insert(as.begin(), 1);
    s.ta = false;
  }
  if (bs.size() == 1) {
    bs.push_back(1);
    s.tb = false;
  }
  s.m = s.ta ? as.back() : as[as.size() - 2];
  s.k = s.ta ? as[as.size() - 2] : as.back();
  int64_t kb = s.tb ? bs.back() : bs[bs.size() - 2];
  s.n = s.tb ? bs[bs.size() - 2] : bs.back();
  if (s.k != kb)
    return (why = "multiplies " + shapeText(a) + " by " + shapeText(b) +
                  ": inner dimensions differ",
            false);
  size_t rank = std::max(as.size(), bs.size()) - 2;
  s.batch.assign(rank, 1);
  s.batchA.assign(rank, 1);
  s.batchB.assign(rank, 1);
  for (size_t d = 0; d + 2 < as.size(); ++d)
    s.batchA[rank - (as.size() - 2) + d] = as[d];
  for (size_t d = 0; d + 2 < bs.size(); ++d)
    s.batchB[rank - (bs.size() - 2) + d] = bs[d];
  for (size_t d = 0; d < rank; ++d) {
    int64_t da = s.batchA[d], db = s.batchB[d];
    if (da != db && da != 1 && db != 1)
      return (why = "batch dimensions of " + shapeText(a) + " and " +
                    shapeText(b) + " do not broadcast",
              false);
    s.batch[d] = da == 1 ? db : da;
  }
  return true;
}

bool checkKernelContract(const Plan &plan, const Step &step, std::string &why) {
  return StepChecker(plan, step, why).check();
}

} // namespace strata::artifact
