// Kernels.h - The CPU backend's kernels, one per plan kernel.

#ifndef STRATA_RUNTIME_CPU_KERNELS_H
#define STRATA_RUNTIME_CPU_KERNELS_H

#include "runtime/artifact/Plan.h"

#include <string>
#include <vector>

namespace strata::cpu {

/// A tensor in memory: row-major, densely packed.
struct TensorRef {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  void *data = nullptr;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

/// What a training step's update kernels need from the training loop.
struct KernelContext {
  /// The optimizer step, from 1 (AdamW's bias correction).
  int64_t step = 1;
  /// The schedule's factor for this step; multiplies every base rate.
  double lrFactor = 1.0;
  /// False on all but the last micro-batch of an accumulating step: the
  /// update kernels then do nothing (accumulate still runs).
  bool applyUpdates = true;
  /// Whether this step's speculative updates run (artifact::Speculation).
  /// When they do not, their redos are the plain updates, with the scale.
  bool speculating = true;
};

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

#endif // STRATA_RUNTIME_CPU_KERNELS_H
