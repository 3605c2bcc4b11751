// Kernels.h - The CUDA backend's kernels (runtime/backends/cuda/*.cu,
// KernelFamilies.cuh).
//
// Host-callable entry points only: no CUDA types in this header beyond an
// opaque stream, so CudaBackend.cpp and the tests include it freely.

#ifndef STRATA_RUNTIME_BACKENDS_CUDA_KERNELS_H
#define STRATA_RUNTIME_BACKENDS_CUDA_KERNELS_H

#include "runtime/artifact/Plan.h"
#include "runtime/backends/cpu/Kernels.h"

#include <string>
#include <vector>

namespace strata::cuda {

/// What a launch needs besides its operands.
struct LaunchContext {
  void *stream = nullptr;    // cudaStream_t
  void *cublasLt = nullptr;  // cublasLtHandle_t
  void *workspace = nullptr; // cuBLASLt workspace (device)
  uint64_t workspaceBytes = 0;
  /// A device int set non-zero by kernels that meet bad data (an index
  /// out of range); the backend checks it when it synchronizes.
  int *errorFlag = nullptr;
};

/// Whether this backend has a kernel for `step` of `plan` (kernel, element
/// types, rank); false with `why` ("adalomo", "matmul on int64").
bool supportsStep(const artifact::Plan &plan, const artifact::Step &step,
                  std::string &why);

/// Whether the backend has code for `kernel` at all (some element type).
bool implemented(artifact::Kernel kernel);

/// Enqueues `step` on the context's stream over device memory. False with
/// `error` for a launch or cuBLASLt failure.
bool launchKernel(const artifact::Step &step,
                  const std::vector<TensorRef> &inputs,
                  const std::vector<TensorRef> &outputs,
                  const KernelContext &context, LaunchContext &launch,
                  std::string &error);

/// Bits the device error flag uses.
enum ErrorBits : int {
  kIndexOutOfRange = 1,
  kLabelOutOfRange = 2,
  kIntegerDivisionByZero = 4,
  kGroupsOverlap = 8,
};

} // namespace strata::cuda

#endif // STRATA_RUNTIME_BACKENDS_CUDA_KERNELS_H
