// KernelTable.cpp - Every kernel's contract, in one table.

#include "runtime/artifact/KernelTable.h"

#include <string_view>
#include <unordered_map>

namespace strata::artifact {

namespace {

using K = Kernel;
using C = CostClass;
using P = InPlace;
constexpr uint8_t V = kVariadic;

// kernel, name, inputs min/max, outputs, ints, floats, in place, states,
// cost. Rows in kernel-number order (checked at first use).
const std::vector<KernelInfo> kTable = {
    {K::Add, "add", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::Sub, "sub", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::Mul, "mul", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::Div, "div", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::Pow, "pow", 2, 2, 1, 0, 0, P::None, 0, C::Transcendental},
    {K::Max, "max", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::Min, "min", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::And, "and", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::Or, "or", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::Equal, "equal", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::Less, "less", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::Greater, "greater", 2, 2, 1, 0, 0, P::None, 0, C::Simple},
    {K::Select, "select", 3, 3, 1, 0, 0, P::None, 0, C::Simple},
    {K::Neg, "neg", 1, 1, 1, 0, 0, P::None, 0, C::Simple},
    {K::Exp, "exp", 1, 1, 1, 0, 0, P::None, 0, C::Transcendental},
    {K::Log, "log", 1, 1, 1, 0, 0, P::None, 0, C::Transcendental},
    {K::Sqrt, "sqrt", 1, 1, 1, 0, 0, P::None, 0, C::Simple},
    {K::Reciprocal, "reciprocal", 1, 1, 1, 0, 0, P::None, 0, C::Simple},
    {K::Tanh, "tanh", 1, 1, 1, 0, 0, P::None, 0, C::Transcendental},
    {K::Erf, "erf", 1, 1, 1, 0, 0, P::None, 0, C::Transcendental},
    {K::Sigmoid, "sigmoid", 1, 1, 1, 0, 0, P::None, 0, C::Transcendental},
    {K::Relu, "relu", 1, 1, 1, 0, 0, P::None, 0, C::Simple},
    {K::Gelu, "gelu", 1, 1, 1, 0, 0, P::None, 0, C::Transcendental},
    {K::Not, "not", 1, 1, 1, 0, 0, P::None, 0, C::Simple},
    {K::Cast, "cast", 1, 1, 1, 0, 0, P::None, 0, C::Simple},
    // (a, b, [rows]): rows, an i64 scalar, counts a's live stored rows.
    {K::MatMul, "matmul", 2, 3, 1, 0, 0, P::None, 0, C::MatMul},
    {K::ReduceSum, "reduce_sum", 1, 1, 1, 1, 0, P::None, 0, C::Simple},
    {K::ReduceMean, "reduce_mean", 1, 1, 1, 1, 0, P::None, 0, C::Simple},
    {K::ReduceMax, "reduce_max", 1, 1, 1, 1, 0, P::None, 0, C::Simple},
    {K::Softmax, "softmax", 1, 1, 1, 1, 0, P::None, 0, C::Transcendental},
    {K::LogSoftmax, "log_softmax", 1, 1, 1, 1, 0, P::None, 0,
     C::Transcendental},
    {K::LayerNorm, "layer_norm", 2, 3, 1, 2, 1, P::None, 0, C::Transcendental},
    {K::Transpose, "transpose", 1, 1, 1, 0, 0, P::None, 0, C::Movement},
    {K::Slice, "slice", 1, 1, 1, 0, 0, P::None, 0, C::Movement},
    {K::Concat, "concat", 1, V, 1, 1, 0, P::None, 0, C::Movement},
    {K::Broadcast, "broadcast", 1, 1, 1, 0, 0, P::None, 0, C::Movement},
    {K::Gather, "gather", 2, 2, 1, 1, 0, P::None, 0, C::Movement},
    {K::Trilu, "trilu", 1, 1, 1, 2, 0, P::None, 0, C::Movement},
    {K::Copy, "copy", 1, 1, 1, 0, 0, P::None, 0, C::Simple},
    {K::Abs, "abs", 1, 1, 1, 0, 0, P::None, 0, C::Simple},
    {K::CrossEntropy, "cross_entropy", 2, 2, 1, 0, 0, P::None, 0,
     C::Transcendental},
    {K::CrossEntropyGrad, "cross_entropy_grad", 3, 3, 1, 0, 0, P::None, 0,
     C::Transcendental},
    {K::GeluGrad, "gelu_grad", 2, 2, 1, 0, 0, P::None, 0, C::Transcendental},
    {K::LayerNormGrad, "layer_norm_grad", 3, 3, 3, 1, 1, P::None, 0,
     C::Transcendental},
    {K::GatherGrad, "gather_grad", 2, 2, 1, 1, 0, P::None, 0, C::Movement},
    {K::SliceGrad, "slice_grad", 1, 1, 1, 0, 0, P::None, 0, C::Movement},
    // Updates: (w, g, states..., [scale], [low copy], [keeps...]); scale
    // is read only, the low-precision copy written, a keep per written
    // tensor with speculation (updateOperands).
    {K::UpdateSgd, "update_sgd", 2, 6, 0, 0, 2, P::ParamAndStates, 0,
     C::Simple},
    {K::UpdateMomentum, "update_momentum", 3, 8, 0, 0, 3, P::ParamAndStates, 1,
     C::Simple},
    {K::UpdateAdamW, "update_adamw", 4, 10, 0, 0, 5, P::ParamAndStates, 2,
     C::Transcendental},
    {K::Accumulate, "accumulate", 2, 2, 0, 0, 0, P::First, 0, C::Simple},
    {K::UpdateAdaLomo, "update_adalomo", 3, 4, 0, 0, 2, P::ParamAndStates, V,
     C::Transcendental},
    {K::Assign, "assign", 2, 2, 0, 0, 0, P::First, 0, C::Simple},
    {K::Sin, "sin", 1, 1, 1, 0, 0, P::None, 0, C::Transcendental},
    {K::Cos, "cos", 1, 1, 1, 0, 0, P::None, 0, C::Transcendental},
    {K::Store, "store", 2, 2, 0, 0, 0, P::First, 0, C::Simple},
    {K::Attention, "attention", 3, 4, 1, 2, 2, P::None, 0, C::Attention},
    {K::AttentionGrad, "attention_grad", 4, 5, 3, 2, 2, P::None, 0,
     C::Attention},
    {K::Elementwise, "elementwise", 1, V, V, 2, 0, P::None, 0,
     C::Transcendental},
    {K::ReduceSumSquare, "reduce_sum_square", 1, 1, 1, 1, 0, P::None, 0,
     C::Simple},
    {K::AllReduce, "all_reduce", 1, 1, 1, 1, 0, P::None, 0, C::Collective},
    // Sharded optimizer state: (g) -> this rank's shard of the mean;
    // (w) -> a copy of this rank's shard; (w, shard) with every rank's
    // shard written into w.
    {K::ReduceScatter, "reduce_scatter", 1, 1, 1, 1, 0, P::None, 0,
     C::Collective},
    {K::Shard, "shard", 1, 1, 1, 1, 0, P::None, 0, C::Movement},
    {K::AllGather, "all_gather", 2, 2, 0, 1, 0, P::First, 0, C::Collective},
    // Sharded parameters: (shard) -> the whole tensor, every rank's shard.
    {K::Unshard, "unshard", 1, 1, 1, 1, 0, P::None, 0, C::Collective},
    // (mask) -> (order, count): a mask's true positions first.
    {K::CompactRows, "compact_rows", 1, 1, 2, 0, 0, P::None, 0, C::Movement},
    // (masks...) -> (order, offsets, count): disjoint masks' true
    // positions, mask by mask, then the others.
    {K::GroupRows, "group_rows", 1, V, 3, 0, 0, P::None, 0, C::Movement},
    // (a, offsets, w...): each group of a's rows times its own w.
    {K::GroupedMatMul, "grouped_matmul", 3, V, 1, 1, 0, P::None, 0, C::MatMul},
    // (a, b, offsets): a[group]^T b[group], one group's rows.
    {K::SegmentMatMul, "segment_matmul", 3, 3, 1, 1, 0, P::None, 0, C::MatMul},
};

bool tableInOrder() {
  if (kTable.size() + 1 != static_cast<size_t>(Kernel::NumKernels))
    return false;
  for (size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<size_t>(kTable[i].kernel) != i + 1)
      return false;
  return true;
}

} // namespace

const std::vector<KernelInfo> &kernelTable() {
  static const bool ordered = tableInOrder();
  if (!ordered)
    __builtin_trap(); // A row out of place is a build mistake, not input.
  return kTable;
}

const KernelInfo &kernelInfo(Kernel kernel) {
  return kernelTable()[static_cast<size_t>(kernel) - 1];
}

const KernelInfo *kernelInfoByName(std::string_view name) {
  // Looked up for every kernel op many times over while the planner scores
  // placements: a hash of the names, built once (thread-safe: a static).
  static const std::unordered_map<std::string_view, const KernelInfo *> byName =
      [] {
        std::unordered_map<std::string_view, const KernelInfo *> m;
        for (const KernelInfo &k : kernelTable())
          m.emplace(k.name, &k);
        return m;
      }();
  auto it = byName.find(name);
  return it == byName.end() ? nullptr : it->second;
}

bool writesBack(Kernel kernel) {
  return kernelInfo(kernel).inPlace == InPlace::First &&
         kernel != Kernel::Accumulate;
}

std::vector<InputUse> inputUses(Kernel kernel, size_t numInputs,
                                const std::vector<int64_t> &ints) {
  std::vector<InputUse> uses(numInputs);
  for (unsigned k : writtenInputs(kernel, numInputs, ints))
    if (k < numInputs) {
      uses[k].written = true;
      uses[k].read = !writesBack(kernel);
    }
  // A speculative update's keeps are written without being read.
  UpdateOperands at = updateOperands(kernel, numInputs, ints);
  if (at.speculation == Speculation::Speculate)
    for (size_t i = at.keeps; i < numInputs; ++i)
      uses[i].read = false;
  return uses;
}

std::vector<unsigned> writtenInputs(Kernel kernel, size_t numInputs,
                                    const std::vector<int64_t> &ints) {
  const KernelInfo &k = kernelInfo(kernel);
  switch (k.inPlace) {
  case InPlace::None:
    return {};
  case InPlace::First:
    return {0};
  case InPlace::ParamAndStates: {
    std::vector<unsigned> written{0};
    if (!ints.empty() && ints[0] > 1 && numInputs > 1)
      written.push_back(1); // The gradient accumulator, zeroed.
    size_t end = k.states == kVariadic
                     ? numInputs
                     : std::min(numInputs, size_t(2) + k.states);
    for (size_t i = 2; i < end; ++i)
      written.push_back(static_cast<unsigned>(i));
    UpdateOperands at = updateOperands(kernel, numInputs, ints);
    if (at.low >= 0)
      written.push_back(static_cast<unsigned>(at.low));
    // A speculative update copies what it writes into the keeps first (a
    // redo reads them back).
    if (at.speculation == Speculation::Speculate)
      for (size_t i = at.keeps; i < numInputs; ++i)
        written.push_back(static_cast<unsigned>(i));
    return written;
  }
  }
  return {};
}

UpdateOperands updateOperands(Kernel kernel, size_t numInputs,
                              const std::vector<int64_t> &ints) {
  UpdateOperands out;
  const KernelInfo &k = kernelInfo(kernel);
  if (k.inPlace != InPlace::ParamAndStates || k.states == kVariadic) {
    out.before = static_cast<unsigned>(numInputs);
    return out;
  }
  out.before = 2 + k.states;
  bool low = ints.size() > 1 && ints[1] == 1;
  size_t end = numInputs;
  if (ints.size() > 2 && (ints[2] == int64_t(Speculation::Speculate) ||
                          ints[2] == int64_t(Speculation::Redo))) {
    // One keep per written tensor: w, the states, the low copy.
    size_t keeps = 1 + k.states + (low ? 1 : 0);
    if (numInputs >= out.before + keeps) {
      out.speculation = static_cast<Speculation>(ints[2]);
      end = numInputs - keeps;
      out.keeps = static_cast<int>(end);
    }
  }
  size_t rest = end > out.before ? end - out.before : 0;
  low = low && rest > 0;
  if (low)
    out.low = static_cast<int>(end - 1);
  if (rest > (low ? 1u : 0u))
    out.scale = static_cast<int>(out.before);
  return out;
}

std::vector<size_t> keptInputs(const UpdateOperands &at) {
  std::vector<size_t> kept{0};
  for (size_t i = 2; i < at.before; ++i)
    kept.push_back(i);
  if (at.low >= 0)
    kept.push_back(static_cast<size_t>(at.low));
  return kept;
}

} // namespace strata::artifact
