// SupportsTest.cpp - What the CUDA backend says it cannot run (host code:
// runs without a GPU).

#include "runtime/artifact/KernelTable.h"
#include "runtime/backends/cuda/Kernels.h"

#include <gtest/gtest.h>

using namespace strata;
using namespace strata::artifact;

namespace {

Plan twoOperands(DType t, std::vector<int64_t> a, std::vector<int64_t> b,
                 std::vector<int64_t> out) {
  Plan p;
  p.slots.push_back({"a", t, a, Region::Arena, 0, 0});
  p.slots.push_back({"b", t, b, Region::Arena, 0, 0});
  p.slots.push_back({"y", t, out, Region::Arena, 0, 0});
  return p;
}

Step step(Kernel k) {
  Step s;
  s.kernel = k;
  s.inputs = {0, 1};
  s.outputs = {2};
  return s;
}

TEST(CudaSupports, NamesTheKernelAndElementTypeItLacks) {
  std::string why;
  Plan f32 = twoOperands(DType::F32, {4, 8}, {8, 2}, {4, 2});
  EXPECT_TRUE(cuda::supportsStep(f32, step(Kernel::MatMul), why)) << why;
  Plan i64 = twoOperands(DType::I64, {4, 8}, {8, 2}, {4, 2});
  EXPECT_FALSE(cuda::supportsStep(i64, step(Kernel::MatMul), why));
  EXPECT_EQ(why, "matmul on int64");
  Plan i16 = twoOperands(DType::I16, {4}, {4}, {4});
  EXPECT_FALSE(cuda::supportsStep(i16, step(Kernel::Add), why));
  EXPECT_EQ(why, "add on int16");
  // Batches that broadcast against each other (2x1 and 1x3).
  Plan crossed =
      twoOperands(DType::F32, {2, 1, 4, 8}, {1, 3, 8, 2}, {2, 3, 4, 2});
  EXPECT_FALSE(cuda::supportsStep(crossed, step(Kernel::MatMul), why));
  EXPECT_NE(why.find("batches"), std::string::npos) << why;
  Plan deep =
      twoOperands(DType::F32, std::vector<int64_t>(9, 1),
                  std::vector<int64_t>(9, 1), std::vector<int64_t>(9, 1));
  EXPECT_FALSE(cuda::supportsStep(deep, step(Kernel::Add), why));
  EXPECT_EQ(why, "add of rank > 8");
}

// Every kernel of the table has CUDA code (Kernels.cu's familyOf has no
// default, so a new kernel must be placed there to build); a step of a
// kernel without it would be refused by supportsStep, naming the kernel.
// The exceptions are the collectives, which the executor runs itself
// (through the communicator), never the backend.
TEST(CudaSupports, EveryKernelOfTheTableIsImplemented) {
  for (const KernelInfo &k : kernelTable()) {
    if (!isCollective(k.kernel)) {
      EXPECT_TRUE(cuda::implemented(k.kernel)) << k.name;
    }
  }
}

} // namespace
