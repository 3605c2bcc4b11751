// Attention.h - The CPU kernels of fused attention (Kernel::Attention and
// Kernel::AttentionGrad; runtime/backends/cpu/Attention.cpp).

#ifndef STRATA_RUNTIME_BACKENDS_CPU_ATTENTION_H
#define STRATA_RUNTIME_BACKENDS_CPU_ATTENTION_H

#include "runtime/artifact/Plan.h"
#include "runtime/backends/cpu/Kernels.h"

#include <string>
#include <vector>

namespace strata::cpu {

/// softmax(scale * q k^T, masked) v, a block of query rows at a time: the
/// T x S scores exist only as one block's scratch. Inputs (q, k, v, [mask]),
/// output o; ints [causal, mask_kind], floats [scale, fill] (Plan.h).
bool attention(const artifact::Step &step, const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out, std::string &error);

/// The gradients of q, k and v from (q, k, v, grad, [mask]): each block of
/// scores and probabilities is recomputed from q and k, never read back.
bool attentionGrad(const artifact::Step &step, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, std::string &error);

} // namespace strata::cpu

#endif // STRATA_RUNTIME_BACKENDS_CPU_ATTENTION_H
