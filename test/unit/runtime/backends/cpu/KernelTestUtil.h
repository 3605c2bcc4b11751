// KernelTestUtil.h - What the CPU kernel tests share: random inputs and
// running one step with its errors reported.

#ifndef STRATA_TEST_UNIT_RUNTIME_CPU_KERNELTESTUTIL_H
#define STRATA_TEST_UNIT_RUNTIME_CPU_KERNELTESTUTIL_H

#include "runtime/backends/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <random>

namespace strata::cpu::test {

/// `n` normal values of deviation `sigma`, the same for a seed.
inline std::vector<float> randomFloats(size_t n, unsigned seed,
                                       float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Runs one step of `k`; a failure is a test failure with the kernel's
/// error.
inline bool runStep(artifact::Kernel k, std::vector<TensorRef> in,
                    std::vector<TensorRef> out, std::vector<int64_t> ints = {},
                    std::vector<double> floats = {}) {
  artifact::Step step;
  step.kernel = k;
  step.ints = std::move(ints);
  step.floats = std::move(floats);
  std::string error;
  bool ok = runKernel(step, in, out, error);
  EXPECT_TRUE(ok) << error;
  return ok;
}

} // namespace strata::cpu::test

#endif // STRATA_TEST_UNIT_RUNTIME_CPU_KERNELTESTUTIL_H
