// Kernels.cu - The CUDA backend's kernels: what it supports and the
// dispatch of each plan step to its family (KernelFamilies.cuh).
//
// One kernel (or cuBLASLt call) per plan step, on the step's stream.

#include "runtime/backends/cuda/KernelFamilies.cuh"

namespace strata::cuda {

using namespace kernels;

bool supportsStep(const artifact::Plan &plan, const Step &step,
                  std::string &why) {
  auto slotOf = [&](uint32_t s) -> const artifact::Slot & {
    return plan.slots[s];
  };
  for (uint32_t s : step.inputs)
    if (slotOf(s).shape.size() > static_cast<size_t>(kMaxRank)) {
      why = std::string(artifact::kernelName(step.kernel)) + " of rank > 8";
      return false;
    }
  for (uint32_t s : step.outputs)
    if (slotOf(s).shape.size() > static_cast<size_t>(kMaxRank)) {
      why = std::string(artifact::kernelName(step.kernel)) + " of rank > 8";
      return false;
    }
  DType t = step.inputs.empty() ? DType::F32 : slotOf(step.inputs[0]).dtype;
  auto on = [&](const char *what) {
    why = std::string(artifact::kernelName(step.kernel)) + " on " + what;
    return false;
  };
  if (!implemented(step.kernel)) {
    why = artifact::kernelName(step.kernel);
    return false;
  }
  bool anyType = dispatch(t, [](auto) {});
  switch (step.kernel) {
  case Kernel::MatMul: {
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
      return on(dtypeName(t));
    // Batches: each operand a full batch or one matrix for all.
    artifact::MatMulShape shape;
    std::string ignored;
    if (!artifact::matmulShape(slotOf(step.inputs[0]).shape,
                               slotOf(step.inputs[1]).shape, step.ints, shape,
                               ignored))
      return on("shapes that do not multiply");
    int64_t a = product(shape.batchA), b = product(shape.batchB),
            all = product(shape.batch);
    if ((a != all && a != 1) || (b != all && b != 1))
      return on("batches that broadcast other than all-or-one");
    return true;
  }
  case Kernel::Attention:
  case Kernel::AttentionGrad:
    if (slotOf(step.inputs[0]).shape.back() > kMaxHeadDim ||
        slotOf(step.inputs[2]).shape.back() > kMaxHeadDim)
      return on(("heads wider than " + std::to_string(kMaxHeadDim)).c_str());
    return anyType ? true : on(dtypeName(t));
  case Kernel::CompactRows:
  case Kernel::GroupRows:
    return true; // Bool masks in, int64 out (the validator checked).
  case Kernel::GroupedMatMul:
  case Kernel::SegmentMatMul:
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
      return on(dtypeName(t));
    return true;
  case Kernel::Cast:
    if (!anyType || !dispatch(slotOf(step.outputs[0]).dtype, [](auto) {}))
      return on(dtypeName(anyType ? slotOf(step.outputs[0]).dtype : t));
    return true;
  default:
    return anyType ? true : on(dtypeName(t));
  }
}

namespace {

using Family = std::optional<bool> (*)(const Step &,
                                       const std::vector<TensorRef> &,
                                       const std::vector<TensorRef> &,
                                       const KernelContext &, LaunchContext &,
                                       std::string &);

/// Assign (an update's copy, skipped when updates are not applied),
/// Store (an activation swapped out) and Shard (this rank's chunk of a
/// parameter, zeros past its end): device-to-device copies.
STRATA_KERNEL_FAMILY(launchCopies) {
  if (step.kernel == Kernel::Assign && !ctx.applyUpdates)
    return true;
  if (step.kernel == Kernel::Shard) {
    size_t size = dtypeSize(in[0].dtype);
    int64_t n = in[0].numElements(), c = out[0].numElements();
    int64_t from = std::min(n, ctx.rank * c);
    int64_t have = std::min(c, n - from);
    char *dst = static_cast<char *>(out[0].data);
    if (have > 0 &&
        !check(cudaMemcpyAsync(
                   dst, static_cast<const char *>(in[0].data) + from * size,
                   have * size, cudaMemcpyDeviceToDevice, streamOf(l)),
               "shard", error))
      return false;
    return have >= c || check(cudaMemsetAsync(dst + have * size, 0,
                                              (c - have) * size, streamOf(l)),
                              "shard", error);
  }
  return check(cudaMemcpyAsync(in[0].data, in[1].data,
                               in[0].numElements() * dtypeSize(in[0].dtype),
                               cudaMemcpyDeviceToDevice, streamOf(l)),
               artifact::kernelName(step.kernel), error);
}

/// The family that launches kernel `k`. No default case: a kernel added to
/// the table does not compile here (-Wswitch is an error) until it is
/// given a family, so supportsStep cannot accept a kernel that launchKernel
/// has no code for; strata-kernel-check runs a case of every kernel.
Family familyOf(Kernel k) {
  switch (k) {
  case Kernel::Abs:
  case Kernel::Add:
  case Kernel::And:
  case Kernel::Cast:
  case Kernel::Cos:
  case Kernel::Div:
  case Kernel::Elementwise:
  case Kernel::Equal:
  case Kernel::Erf:
  case Kernel::Exp:
  case Kernel::Gelu:
  case Kernel::GeluGrad:
  case Kernel::Greater:
  case Kernel::Less:
  case Kernel::Log:
  case Kernel::Max:
  case Kernel::Min:
  case Kernel::Mul:
  case Kernel::Neg:
  case Kernel::Not:
  case Kernel::Or:
  case Kernel::Pow:
  case Kernel::Reciprocal:
  case Kernel::Relu:
  case Kernel::Select:
  case Kernel::Sigmoid:
  case Kernel::Sin:
  case Kernel::Sqrt:
  case Kernel::Sub:
  case Kernel::Tanh:
    return launchPointwise;
  case Kernel::Broadcast:
  case Kernel::CompactRows:
  case Kernel::GroupRows:
  case Kernel::Concat:
  case Kernel::Copy:
  case Kernel::Gather:
  case Kernel::GatherGrad:
  case Kernel::Slice:
  case Kernel::SliceGrad:
  case Kernel::Transpose:
  case Kernel::Trilu:
    return launchMovement;
  case Kernel::LayerNorm:
  case Kernel::LayerNormGrad:
  case Kernel::LogSoftmax:
  case Kernel::ReduceMax:
  case Kernel::ReduceMean:
  case Kernel::ReduceSum:
  case Kernel::ReduceSumSquare:
  case Kernel::Softmax:
    return launchReduction;
  case Kernel::CrossEntropy:
  case Kernel::CrossEntropyGrad:
    return launchLoss;
  case Kernel::Accumulate:
  case Kernel::UpdateAdaLomo:
  case Kernel::UpdateAdamW:
  case Kernel::UpdateMomentum:
  case Kernel::UpdateSgd:
    return launchUpdate;
  case Kernel::Attention:
  case Kernel::AttentionGrad:
    return launchAttention;
  case Kernel::MatMul:
  case Kernel::GroupedMatMul:
  case Kernel::SegmentMatMul:
    return launchMatMul;
  case Kernel::Assign:
  case Kernel::Shard:
  case Kernel::Store:
    return launchCopies;
  case Kernel::AllReduce:     // The executor runs the collectives, through the
  case Kernel::ReduceScatter: // communicator.
  case Kernel::AllGather:
  case Kernel::Unshard:
  case Kernel::NumKernels: // Not a kernel: the count.
    break;
  }
  return nullptr;
}

} // namespace

bool implemented(Kernel kernel) { return familyOf(kernel) != nullptr; }

bool launchKernel(const Step &step, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const KernelContext &ctx,
                  LaunchContext &l, std::string &error) {
  Family family = familyOf(step.kernel);
  std::optional<bool> done =
      family ? family(step, in, out, ctx, l, error) : std::nullopt;
  if (!done)
    error = std::string("the CUDA backend has no ") +
            artifact::kernelName(step.kernel) + " kernel";
  return done.value_or(false);
}

} // namespace strata::cuda
