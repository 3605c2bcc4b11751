// Elementwise.cpp - Fused elementwise chains on the CPU.
//
// The output is walked in blocks of up to kBlock elements of one innermost
// row. For each block the inputs are loaded (broadcast: a stride of 0) into
// register blocks in the compute type, every instruction runs as a plain
// loop over the block (its kernel fixed outside the loop, so that it
// vectorises), and the output registers are stored. Blocks are spread over
// the thread pool.

#include "runtime/backends/cpu/Elementwise.h"
#include "runtime/artifact/KernelContract.h"
#include "runtime/backends/cpu/ElementTypes.h"
#include "runtime/backends/cpu/RowLoops.h"
#include "runtime/kernels/SharedMath.h"
#include "runtime/support/ThreadPool.h"

#include <algorithm>

namespace strata::cpu {

namespace {

using artifact::Kernel;
using Shape = std::vector<int64_t>;

constexpr int64_t kBlock = 256;

/// One instruction over `n` values.
template <typename C>
void apply(const artifact::ElementwiseProgram::Instruction &in,
           const C *__restrict a, const C *__restrict b, C *__restrict d,
           int64_t n) {
  // The same loops as the unfused kernels' (Kernels.cpp), so the same bits.
  if constexpr (std::is_same_v<C, float>)
    if (detail::hasVectorForm(in.kernel, in.flag != 0))
      return detail::rowLoops().transcendental(in.kernel, a, b, d, n);
  switch (in.kernel) {
  case Kernel::Add:
    for (int64_t j = 0; j < n; ++j)
      d[j] = a[j] + b[j];
    return;
  case Kernel::Sub:
    for (int64_t j = 0; j < n; ++j)
      d[j] = a[j] - b[j];
    return;
  case Kernel::Mul:
    for (int64_t j = 0; j < n; ++j)
      d[j] = a[j] * b[j];
    return;
  case Kernel::Div:
    for (int64_t j = 0; j < n; ++j)
      d[j] = a[j] / b[j];
    return;
  case Kernel::Neg:
    for (int64_t j = 0; j < n; ++j)
      d[j] = -a[j];
    return;
  case Kernel::Reciprocal:
    for (int64_t j = 0; j < n; ++j)
      d[j] = C(1) / a[j];
    return;
  case Kernel::GeluGrad:
    for (int64_t j = 0; j < n; ++j)
      d[j] = math::geluDerivative<C>(a[j], in.flag != 0) * b[j];
    return;
  default:
    break;
  }
  if (b) {
    bool divByZero = false; // Float division: no error to report.
    for (int64_t j = 0; j < n; ++j)
      d[j] = math::applyBinary<C>(in.kernel, a[j], b[j], divByZero);
  } else {
    for (int64_t j = 0; j < n; ++j)
      d[j] = math::applyUnary<C>(in.kernel, a[j], in.flag != 0);
  }
}

template <typename T>
void run(const artifact::ElementwiseProgram &p,
         const std::vector<double> &constants, const std::vector<TensorRef> &in,
         const std::vector<TensorRef> &out) {
  using C = typename Traits<T>::C;
  const Shape &shape = out[0].shape;
  size_t rank = shape.size();
  int64_t total = out[0].numElements();
  if (total == 0)
    return;
  int64_t inner = rank ? shape.back() : 1;
  int64_t rows = total / inner, blocksPerRow = (inner + kBlock - 1) / kBlock;
  // Each input's element stride along each output dimension.
  std::vector<Shape> strides;
  for (const TensorRef &t : in) {
    Shape st(rank, 0);
    int64_t stride = 1;
    size_t offset = rank - t.shape.size();
    for (size_t d = t.shape.size(); d-- > 0;) {
      st[offset + d] = t.shape[d] == 1 ? 0 : stride;
      stride *= t.shape[d];
    }
    strides.push_back(std::move(st));
  }
  int32_t fixed = p.numInputs + p.numConstants;
  parallelFor(
      rows * blocksPerRow, std::max<int64_t>(1, kParallelGrain / kBlock),
      [&](int64_t begin, int64_t end) {
        std::vector<C> regs(static_cast<size_t>(p.numRegisters()) * kBlock);
        auto reg = [&](int32_t r) { return regs.data() + int64_t(r) * kBlock; };
        for (int32_t c = 0; c < p.numConstants; ++c)
          std::fill(reg(p.numInputs + c), reg(p.numInputs + c) + kBlock,
                    C(constants[c]));
        for (int64_t task = begin; task < end; ++task) {
          int64_t row = task / blocksPerRow,
                  c0 = (task % blocksPerRow) * kBlock;
          int64_t n = std::min(kBlock, inner - c0);
          for (int32_t k = 0; k < p.numInputs; ++k) {
            const Shape &st = strides[k];
            int64_t base = 0, rem = row;
            for (size_t d = rank >= 1 ? rank - 1 : 0; d-- > 0;) {
              base += (rem % shape[d]) * st[d];
              rem /= shape[d];
            }
            int64_t is = rank ? st[rank - 1] : 0;
            const T *src = static_cast<const T *>(in[k].data) + base + c0 * is;
            C *dst = reg(k);
            if (is == 0)
              std::fill(dst, dst + n, Traits<T>::load(src[0]));
            else
              for (int64_t j = 0; j < n; ++j)
                dst[j] = Traits<T>::load(src[j]);
          }
          for (size_t i = 0; i < p.instructions.size(); ++i) {
            const auto &ins = p.instructions[i];
            apply<C>(ins, reg(ins.a), ins.b >= 0 ? reg(ins.b) : nullptr,
                     reg(fixed + static_cast<int32_t>(i)), n);
          }
          for (size_t k = 0; k < out.size(); ++k) {
            const C *src = reg(p.outputs[k]);
            T *dst = static_cast<T *>(out[k].data) + row * inner + c0;
            for (int64_t j = 0; j < n; ++j)
              dst[j] = Traits<T>::store(src[j]);
          }
        }
      });
}

} // namespace

bool elementwise(const artifact::Step &step, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, std::string &error) {
  artifact::ElementwiseProgram program;
  if (!artifact::elementwiseProgram(step.ints, step.floats, in.size(),
                                    out.size(), program, error))
    return false;
  dispatchFloat(out[0].dtype, [&](auto tag) {
    run<decltype(tag)>(program, step.floats, in, out);
  });
  return true;
}

} // namespace strata::cpu
