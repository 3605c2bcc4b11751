// Elementwise.h - The CPU kernel of fused elementwise chains
// (Kernel::Elementwise; runtime/backends/cpu/Elementwise.cpp).

#ifndef STRATA_RUNTIME_BACKENDS_CPU_ELEMENTWISE_H
#define STRATA_RUNTIME_BACKENDS_CPU_ELEMENTWISE_H

#include "runtime/artifact/Plan.h"
#include "runtime/backends/cpu/Kernels.h"

#include <string>
#include <vector>

namespace strata::cpu {

/// Runs an elementwise program (artifact::ElementwiseProgram) over the
/// output shape: each input is read once and each output written once, the
/// intermediate values living in small per-thread register blocks.
bool elementwise(const artifact::Step &step, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, std::string &error);

} // namespace strata::cpu

#endif // STRATA_RUNTIME_BACKENDS_CPU_ELEMENTWISE_H
