// Kernels.cu - The CUDA backend's kernels: what it supports and the
// dispatch of each plan step to its family (KernelFamilies.cuh).
//
// One kernel (or cuBLASLt call) per plan step, on the step's stream.

#include "runtime/cuda/KernelFamilies.cuh"

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
  case Kernel::Cast:
    if (!anyType || !dispatch(slotOf(step.outputs[0]).dtype, [](auto) {}))
      return on(dtypeName(anyType ? slotOf(step.outputs[0]).dtype : t));
    return true;
  default:
    return anyType ? true : on(dtypeName(t));
  }
}

bool launchKernel(const Step &step, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out,
                  const cpu::KernelContext &ctx, LaunchContext &l,
                  std::string &error) {
  for (auto family : {launchPointwise, launchMovement, launchReduction,
                      launchLoss, launchUpdate, launchAttention, launchMatMul})
    if (std::optional<bool> done = family(step, in, out, ctx, l, error))
      return *done;
  const char *name = artifact::kernelName(step.kernel);
  switch (step.kernel) {
  case Kernel::Assign:
    if (!ctx.applyUpdates)
      return true;
    [[fallthrough]];
  case Kernel::Store:
    return check(cudaMemcpyAsync(in[0].data, in[1].data,
                                 in[0].numElements() * dtypeSize(in[0].dtype),
                                 cudaMemcpyDeviceToDevice, streamOf(l)),
                 name, error);
  default:
    error = std::string("the CUDA backend has no ") + name + " kernel";
    return false;
  }
}

} // namespace strata::cuda
