// Kernels.cpp - CPU kernels for every plan kernel: the dispatch.
//
// Kernels are templates over the storage type; half-precision types compute
// in float. Elementwise kernels walk rows of the output (the innermost
// dimension) so that the inner loop is a plain strided loop the compiler can
// vectorise, and rows are split across threads when the work is large.
// Matrix products use OpenBLAS when it is available. The kernels themselves
// live one family per file (KernelFamilies.h); attention and fused
// elementwise chains in Attention.cpp and Elementwise.cpp.

#include "runtime/backends/cpu/Kernels.h"
#include "runtime/backends/cpu/Attention.h"
#include "runtime/backends/cpu/Elementwise.h"
#include "runtime/backends/cpu/KernelFamilies.h"

#include <algorithm>
#include <cstring>

namespace strata::cpu {

using artifact::Kernel;
namespace k = kernels;

bool runKernel(const artifact::Step &step, const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out, const KernelContext &ctx,
               std::string &error) {
  switch (step.kernel) {
  case Kernel::CrossEntropy:
    return k::crossEntropy(in[0], in[1], out[0], error);
  case Kernel::CrossEntropyGrad:
    return k::crossEntropyGrad(in[0], in[1], in[2], out[0], error);
  case Kernel::GeluGrad:
    k::geluGrad(in[0], in[1], out[0], !step.ints.empty() && step.ints[0] != 0);
    return true;
  case Kernel::Attention:
    return attention(step, in, out, error);
  case Kernel::AttentionGrad:
    return attentionGrad(step, in, out, error);
  case Kernel::Elementwise:
    return elementwise(step, in, out, error);
  case Kernel::LayerNormGrad:
    k::layerNormGrad(in, out, step.ints.at(0), step.floats.at(0),
                     step.ints.size() > 1 && step.ints[1] != 0);
    return true;
  case Kernel::GatherGrad:
    return k::gatherGrad(in[0], in[1], out[0], step.ints.at(0), error);
  case Kernel::SliceGrad:
    k::sliceGrad(in[0], out[0], step.ints);
    return true;
  case Kernel::UpdateSgd:
  case Kernel::UpdateMomentum:
  case Kernel::UpdateAdamW: {
    int64_t micro = step.ints.empty() ? 1 : step.ints[0];
    k::update(step, in, micro, ctx);
    // The accumulator (the gradient input) starts the next step at zero.
    if (micro > 1 && ctx.applyUpdates)
      std::memset(in[1].data, 0, in[1].numElements() * dtypeSize(in[1].dtype));
    return true;
  }
  case Kernel::Accumulate:
    k::accumulate(in[0], in[1]);
    return true;
  case Kernel::UpdateAdaLomo:
    k::updateAdaLomo(in, step.floats, ctx);
    return true;
  case Kernel::Assign:
    if (ctx.applyUpdates)
      std::memcpy(in[0].data, in[1].data,
                  in[0].numElements() * dtypeSize(in[0].dtype));
    return true;
  case Kernel::Store: // Swapping an activation out: every micro-batch.
    std::memcpy(in[0].data, in[1].data,
                in[0].numElements() * dtypeSize(in[0].dtype));
    return true;
  case Kernel::CompactRows:
    k::compactRows(in[0], out[0], out[1]);
    return true;
  case Kernel::GroupRows:
    return k::groupRows(in, out[0], out[1], out[2], error);
  case Kernel::GroupedMatMul:
    k::groupedMatmul(in[0], in[1],
                     std::vector<TensorRef>(in.begin() + 2, in.end()), out[0],
                     step.ints.at(0) != 0);
    return true;
  case Kernel::SegmentMatMul:
    k::segmentMatmul(in[0], in[1], in[2], step.ints.at(0), out[0]);
    return true;
  case Kernel::Shard: {
    // This rank's chunk of the flattened input; zeros past its end.
    size_t size = dtypeSize(in[0].dtype);
    int64_t n = in[0].numElements(), c = out[0].numElements();
    int64_t from = std::min(n, ctx.rank * c);
    int64_t have = std::min(c, n - from);
    char *dst = static_cast<char *>(out[0].data);
    if (have > 0)
      std::memcpy(dst, static_cast<const char *>(in[0].data) + from * size,
                  static_cast<size_t>(have) * size);
    if (have < c)
      std::memset(dst + have * size, 0, static_cast<size_t>(c - have) * size);
    return true;
  }
  default:
    break;
  }
  const TensorRef &o = out[0];
  switch (step.kernel) {
  case Kernel::Add:
  case Kernel::Sub:
  case Kernel::Mul:
  case Kernel::Div:
  case Kernel::Pow:
  case Kernel::Max:
  case Kernel::Min:
  case Kernel::And:
  case Kernel::Or:
  case Kernel::Equal:
  case Kernel::Less:
  case Kernel::Greater:
    return k::binary(step.kernel, in[0], in[1], o, error);
  case Kernel::Select:
    return k::select(in[0], in[1], in[2], o);
  case Kernel::Neg:
  case Kernel::Exp:
  case Kernel::Log:
  case Kernel::Sqrt:
  case Kernel::Reciprocal:
  case Kernel::Tanh:
  case Kernel::Erf:
  case Kernel::Sin:
  case Kernel::Cos:
  case Kernel::Sigmoid:
  case Kernel::Relu:
  case Kernel::Not:
  case Kernel::Abs:
    k::unary(step.kernel, in[0], o, false);
    return true;
  case Kernel::Gelu:
    k::unary(step.kernel, in[0], o, !step.ints.empty() && step.ints[0] != 0);
    return true;
  case Kernel::Cast:
    k::cast(in[0], o);
    return true;
  case Kernel::MatMul:
    if (in.size() == 3)
      k::matmulRows(in[0], in[1], o, step.ints.size() > 0 && step.ints[0] != 0,
                    step.ints.size() > 1 && step.ints[1] != 0,
                    *static_cast<const int64_t *>(in[2].data));
    else
      k::matmul(in[0], in[1], o, step.ints.size() > 0 && step.ints[0] != 0,
                step.ints.size() > 1 && step.ints[1] != 0);
    return true;
  case Kernel::ReduceSum:
  case Kernel::ReduceMean:
  case Kernel::ReduceMax:
  case Kernel::ReduceSumSquare:
    k::reduce(step.kernel, in[0], o, step.ints);
    return true;
  case Kernel::Softmax:
  case Kernel::LogSoftmax:
    k::softmax(step.kernel, in[0], o, step.ints.at(0));
    return true;
  case Kernel::LayerNorm:
    k::layerNorm(in, o, step.ints.at(0), step.ints.at(1) != 0,
                 step.floats.at(0), step.ints.size() > 2 && step.ints[2] != 0);
    return true;
  case Kernel::Transpose:
    k::transpose(in[0], o, step.ints);
    return true;
  case Kernel::Slice:
    k::slice(in[0], o, step.ints);
    return true;
  case Kernel::Concat:
    k::concat(in, o, step.ints.at(0));
    return true;
  case Kernel::Broadcast:
    k::broadcast(in[0], o);
    return true;
  case Kernel::Gather:
    return k::gather(in[0], in[1], o, step.ints.at(0), error);
  case Kernel::Trilu:
    k::trilu(in[0], o, step.ints.at(0) != 0, step.ints.at(1));
    return true;
  case Kernel::Copy:
    std::memcpy(o.data, in[0].data, o.numElements() * dtypeSize(o.dtype));
    return true;
  default:
    break;
  }
  error = std::string("unknown kernel ") + artifact::kernelName(step.kernel);
  return false;
}

bool redoNeeded(const artifact::Step &step,
                const std::vector<TensorRef> &inputs) {
  return k::redoNeeded(step, inputs);
}

} // namespace strata::cpu
