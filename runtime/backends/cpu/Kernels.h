// Kernels.h - The CPU backend's kernels, one per plan kernel.

#ifndef STRATA_RUNTIME_BACKENDS_CPU_KERNELS_H
#define STRATA_RUNTIME_BACKENDS_CPU_KERNELS_H

#include "runtime/artifact/Plan.h"
#include "runtime/kernels/TensorRef.h"

#include <string>
#include <vector>

namespace strata::cpu {

/// Runs one step on the CPU. Outputs never alias inputs; update kernels
/// write their parameter and state inputs in place. Returns false with
/// `error` set for failures only the data can reveal (an index out of range,
/// integer division by zero).
bool runKernel(const artifact::Step &step, const std::vector<TensorRef> &inputs,
               const std::vector<TensorRef> &outputs,
               const KernelContext &context, std::string &error);

/// For the redo of a speculative update (artifact::Speculation::Redo):
/// whether its scale differs from 1, so that running it undoes the
/// speculative update and updates again. False for any other step.
bool redoNeeded(const artifact::Step &step,
                const std::vector<TensorRef> &inputs);

inline bool runKernel(const artifact::Step &step,
                      const std::vector<TensorRef> &inputs,
                      const std::vector<TensorRef> &outputs,
                      std::string &error) {
  return runKernel(step, inputs, outputs, KernelContext(), error);
}

} // namespace strata::cpu

#endif // STRATA_RUNTIME_BACKENDS_CPU_KERNELS_H
