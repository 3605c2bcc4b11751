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

/// Runs one step on the CPU. Outputs never alias inputs. Returns false with
/// `error` set for failures only the data can reveal (an index out of range,
/// integer division by zero).
bool runKernel(const artifact::Step &step, const std::vector<TensorRef> &inputs,
               const std::vector<TensorRef> &outputs, std::string &error);

} // namespace strata::cpu

#endif // STRATA_RUNTIME_CPU_KERNELS_H
