// KernelTable.h - Every kernel's contract, in one table.
//
// The plan format (names, numbers), the validator (operand and attribute
// counts), the compiler's lowering, placement and cost model (in-place
// operands, cost class) and every backend (what it implements) read this
// table; nothing else spells a kernel's name or operand rules out. A new
// kernel is one row here (appended: the numbers are part of the format),
// its shape rule in KernelContract.cpp and its implementations.
//
// The table is plain C++ without LLVM or MLIR so the runtime shares it.

#ifndef STRATA_RUNTIME_ARTIFACT_KERNELTABLE_H
#define STRATA_RUNTIME_ARTIFACT_KERNELTABLE_H

#include "runtime/artifact/Plan.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace strata::artifact {

/// How the cost model prices a kernel.
enum class CostClass : uint8_t {
  /// One cheap operation per element (add, select, copy, cast).
  Simple,
  /// exp/log/tanh-class math or several passes per element.
  Transcendental,
  /// Data movement with index arithmetic (transpose, gather, slice).
  Movement,
  /// FLOPs of a matrix product.
  MatMul,
  /// FLOPs of fused attention's products (forward, or its gradient's).
  Attention,
  /// Bytes through the link between data-parallel ranks (all_reduce).
  Collective,
};

/// Which inputs a kernel writes in place (kernels without outputs).
enum class InPlace : uint8_t {
  None,
  /// Input 0 (accumulate, assign, store).
  First,
  /// Input 0 and every optimizer state after the gradient: inputs
  /// 2..(2 + states) (update_momentum: 1 state, update_adamw: 2,
  /// update_adalomo: all the rest). With gradient accumulation (ints[0] >
  /// 1) the gradient accumulator, input 1, is zeroed for the next step too;
  /// with a low-precision copy (ints[1] == 1) the input before the keeps,
  /// which gets the new weights rounded to its type; a speculative update
  /// (ints[2] == 1) writes its keeps too (updateOperands).
  ParamAndStates,
};

constexpr uint8_t kVariadic = 255;

struct KernelInfo {
  Kernel kernel;
  /// The name the compiler and strata-inspect use ("matmul").
  const char *name;
  uint8_t minInputs, maxInputs;
  /// kVariadic: one or more.
  uint8_t outputs;
  /// Attributes every step of the kernel carries at least.
  uint8_t minInts, minFloats;
  InPlace inPlace;
  /// Optimizer states after the gradient (ParamAndStates); kVariadic: all
  /// remaining inputs.
  uint8_t states;
  CostClass cost;
};

/// The row of a valid kernel (Kernel::Add .. NumKernels - 1).
const KernelInfo &kernelInfo(Kernel kernel);
/// The row named `name`, or null.
const KernelInfo *kernelInfoByName(std::string_view name);
/// Every row, in kernel-number order.
const std::vector<KernelInfo> &kernelTable();

/// The inputs of a step of `kernel` (with `numInputs` inputs and `ints`)
/// that it writes in place.
std::vector<unsigned> writtenInputs(Kernel kernel, size_t numInputs,
                                    const std::vector<int64_t> &ints);

/// Whether `kernel` writes its first input without reading it: a write-back
/// to a stored tensor (assign, store), unlike accumulate.
bool writesBack(Kernel kernel);

/// How a step uses one of its inputs.
struct InputUse {
  bool read = true;
  bool written = false;
};

/// How a step of `kernel` uses each of its `numInputs` inputs: every input
/// is read except the destination of a write-back; writtenInputs are
/// written. The one rule for the runtime's step accesses and the
/// compiler's transfer schedule (passes/analysis/ArenaRanges.cpp).
std::vector<InputUse> inputUses(Kernel kernel, size_t numInputs,
                                const std::vector<int64_t> &ints);

/// How an update (sgd, momentum, adamw) on the CPU takes part in exact
/// clipping without waiting for the norm: ints[2] of the step.
enum class Speculation : int64_t {
  /// The plain update.
  None = 0,
  /// Run during the backward pass as if the step did not clip (scale 1):
  /// first copies every tensor it writes into its keep, then updates.
  Speculate = 1,
  /// After the norm: with a scale of exactly 1 the speculative update was
  /// right and nothing runs; otherwise the keeps are copied back and the
  /// update runs with the scale (skipped whole when it is zero or NaN).
  Redo = 2,
};

/// Where the optional operands of an update (sgd, momentum, adamw) are:
/// (w, g, states..., [scale], [low], [keeps...]). `low`, present when
/// ints[1] == 1, is the low-precision copy of w the model reads (bf16 or
/// fp16), which the update writes with its new values rounded. With a
/// speculation mode (ints[2] != 0), the last inputs are the keeps: one per
/// tensor the update writes (w, the states, low), in that order, from
/// `keeps` on. -1: absent. For any other kernel `before` is the input count
/// and the rest are absent.
struct UpdateOperands {
  unsigned before = 0;
  int scale = -1, low = -1, keeps = -1;
  Speculation speculation = Speculation::None;
};
UpdateOperands updateOperands(Kernel kernel, size_t numInputs,
                              const std::vector<int64_t> &ints);

/// The inputs a speculative update keeps, in the order of its keeps: w,
/// the states, the low-precision copy (keep j of input keptInputs(at)[j]
/// is input at.keeps + j).
std::vector<size_t> keptInputs(const UpdateOperands &at);

} // namespace strata::artifact

#endif // STRATA_RUNTIME_ARTIFACT_KERNELTABLE_H
