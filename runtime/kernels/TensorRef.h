// TensorRef.h - What every backend's kernels are handed: tensors in
// memory and the training loop's per-step context.

#ifndef STRATA_RUNTIME_KERNELS_TENSORREF_H
#define STRATA_RUNTIME_KERNELS_TENSORREF_H

#include "runtime/support/DType.h"

#include <cstdint>
#include <vector>

namespace strata {

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
  /// This process's data-parallel rank: the shard a `shard` step copies
  /// (elements [rank * c, (rank + 1) * c) of its flattened input).
  int64_t rank = 0;
};

} // namespace strata

#endif // STRATA_RUNTIME_KERNELS_TENSORREF_H
