// KernelContract.h - What each kernel requires of its operands.
//
// The plan validator checks every step against its kernel's contract
// (operand and attribute counts, element types, shapes, in-bounds slicing
// and axes), so that a plan which passes cannot make a kernel read or write
// outside its operands, whatever bytes a damaged or hostile plan.bin holds.
// Values that only the data reveals (a gather index, a label) are still
// checked by the kernels at run time.

#ifndef STRATA_RUNTIME_ARTIFACT_KERNELCONTRACT_H
#define STRATA_RUNTIME_ARTIFACT_KERNELCONTRACT_H

#include "runtime/artifact/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata::artifact {

/// The dimensions of a matrix product (Kernel::MatMul, ints [transpose a,
/// transpose b]) as the validator and every backend read them: a vector
/// operand is a 1xK (left) or Kx1 (right) matrix and is never transposed;
/// batch dimensions broadcast, right-aligned.
struct MatMulShape {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  /// The result's batch dimensions, and each operand's padded to their rank
  /// with leading 1s.
  std::vector<int64_t> batch, batchA, batchB;
};
/// False with `why` when the shapes do not multiply.
bool matmulShape(const std::vector<int64_t> &a, const std::vector<int64_t> &b,
                 const std::vector<int64_t> &ints, MatMulShape &shape,
                 std::string &why);

/// The row ranges of grouped rows (Kernel::GroupedMatMul, SegmentMatMul)
/// from their offsets as read when the step runs: group e is rows
/// [bounds[e], bounds[e + 1]); entries are clamped to [0, rows] and made
/// non-decreasing, so offsets a damaged plan or a kernel fault wrote can
/// never take a kernel outside its operands.
std::vector<int64_t> groupBounds(const int64_t *offsets, size_t groups,
                                 int64_t rows);

/// The dimensions of fused attention (Kernel::Attention, AttentionGrad) as
/// the validator and every backend read them: q [.., T, D], k [.., S, D],
/// v [.., S, Dv] with up to two shared batch dimensions, seen as [B, H, ..]
/// (missing ones 1); the mask, when there is one, broadcasts to
/// [B, H, T, S] with `maskStrides` (0 where it broadcasts).
struct AttentionShape {
  int64_t b = 1, h = 1, t = 0, s = 0, d = 0, dv = 0;
  std::vector<int64_t> maskStrides;
};
/// False with `why` when the operands do not fit together; `mask` may be
/// null.
bool attentionShape(const std::vector<int64_t> &q,
                    const std::vector<int64_t> &k,
                    const std::vector<int64_t> &v,
                    const std::vector<int64_t> *mask, AttentionShape &shape,
                    std::string &why);

/// A fused chain of elementwise kernels (Kernel::Elementwise) as the
/// validator and every backend read it. Registers hold one value per
/// element of the output shape: first the step's inputs (broadcast to it),
/// then its constants (step.floats), then each instruction's result in
/// order. An instruction applies `kernel` (an elementwise kernel, or
/// gelu_grad with `a` the input and `b` the gradient) to registers `a` and
/// `b` (b is -1 for unary kernels) with `flag` its integer attribute (the
/// tanh form of gelu and gelu_grad). `outputs` names the register of each
/// output.
struct ElementwiseProgram {
  struct Instruction {
    Kernel kernel;
    int32_t a, b, flag;
  };
  std::vector<Instruction> instructions;
  std::vector<int32_t> outputs;
  int32_t numInputs = 0, numConstants = 0;

  int32_t numRegisters() const {
    return numInputs + numConstants + static_cast<int32_t>(instructions.size());
  }
};
/// Limits every backend supports.
constexpr int kMaxElementwiseInputs = 8;
constexpr int kMaxElementwiseConstants = 16;
constexpr int kMaxElementwiseInstructions = 48;
constexpr int kMaxElementwiseOutputs = 8;
/// Whether `kernel` may be an instruction, and how many operands it takes.
bool elementwiseInstruction(Kernel kernel, int &arity);
/// Decodes the program of an elementwise step with `numInputs` inputs and
/// `numOutputs` outputs; false with `why` for a malformed one (a register
/// read before it is written, an unknown kernel, a limit passed).
bool elementwiseProgram(const std::vector<int64_t> &ints,
                        const std::vector<double> &floats, size_t numInputs,
                        size_t numOutputs, ElementwiseProgram &program,
                        std::string &why);

/// Checks `step` (whose operand slot indices are already known to exist)
/// against its kernel's contract; false with `why` saying what is wrong.
bool checkKernelContract(const Plan &plan, const Step &step, std::string &why);

} // namespace strata::artifact

#endif // STRATA_RUNTIME_ARTIFACT_KERNELCONTRACT_H
