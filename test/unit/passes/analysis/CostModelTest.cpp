// CostModelTest.cpp - The cost model's FLOP counts on parsed exec IR,
// worked out by hand.

#include "passes/analysis/CostModel.h"
#include "dialects/Exec/ExecDialect.h"
#include "dialects/Strata/StrataDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace strata;

namespace {

// Rows of a data-dependent length (32 candidates, 8 expected): a product
// of them by a matrix, its weight gradient (contracting over them), the
// same product without the count, with a count not estimated, and with the
// count swapped out and back.
constexpr const char *kRows = R"mlir(
func.func @main() {
  %mask = exec.input "mask" : tensor<32xi1>
  %x = exec.input "x" : tensor<32x16xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<16x64xf32>} : tensor<16x64xf32>
  %order, %count = exec.kernel "compact_rows"(%mask) {ints = array<i64: 8>} : (tensor<32xi1>) -> (tensor<32xi64>, tensor<i64>)
  %y = exec.kernel "matmul"(%x, %w, %count) : (tensor<32x16xf32>, tensor<16x64xf32>, tensor<i64>) -> tensor<32x64xf32>
  %gw = exec.kernel "matmul"(%x, %y, %count) {ints = array<i64: 1, 0>} : (tensor<32x16xf32>, tensor<32x64xf32>, tensor<i64>) -> tensor<16x64xf32>
  %z = exec.kernel "matmul"(%x, %w) : (tensor<32x16xf32>, tensor<16x64xf32>) -> tensor<32x64xf32>
  %o2, %c2 = exec.kernel "compact_rows"(%mask) : (tensor<32xi1>) -> (tensor<32xi64>, tensor<i64>)
  %u = exec.kernel "matmul"(%x, %w, %c2) : (tensor<32x16xf32>, tensor<16x64xf32>, tensor<i64>) -> tensor<32x64xf32>
  %space = exec.swap_space "swap.0" {tier = #exec.tier<host>} : tensor<i64>
  exec.kernel "store"(%space, %count) : (tensor<i64>, tensor<i64>) -> ()
  %back = exec.kernel "copy"(%space) : (tensor<i64>) -> tensor<i64>
  %v = exec.kernel "matmul"(%x, %w, %back) : (tensor<32x16xf32>, tensor<16x64xf32>, tensor<i64>) -> tensor<32x64xf32>
  exec.output "y" %y : tensor<32x64xf32>
  exec.output "gw" %gw : tensor<16x64xf32>
  exec.output "z" %z : tensor<32x64xf32>
  exec.output "u" %u : tensor<32x64xf32>
  exec.output "v" %v : tensor<32x64xf32>
  return
}
)mlir";

// Grouped rows (4 groups of a 32-row buffer, 24 rows expected in all): a
// grouped product, one group's weight gradient, and the same product with
// no estimate.
constexpr const char *kGrouped = R"mlir(
func.func @main() {
  %m0 = exec.input "m0" : tensor<32xi1>
  %m1 = exec.input "m1" : tensor<32xi1>
  %m2 = exec.input "m2" : tensor<32xi1>
  %m3 = exec.input "m3" : tensor<32xi1>
  %x = exec.input "x" : tensor<32x16xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<16x64xf32>} : tensor<16x64xf32>
  %order, %offsets, %count = exec.kernel "group_rows"(%m0, %m1, %m2, %m3) {ints = array<i64: 24>} : (tensor<32xi1>, tensor<32xi1>, tensor<32xi1>, tensor<32xi1>) -> (tensor<32xi64>, tensor<5xi64>, tensor<i64>)
  %y = exec.kernel "grouped_matmul"(%x, %offsets, %w, %w, %w, %w) {ints = array<i64: 0>} : (tensor<32x16xf32>, tensor<5xi64>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<32x64xf32>
  %gw = exec.kernel "segment_matmul"(%x, %y, %offsets) {ints = array<i64: 2>} : (tensor<32x16xf32>, tensor<32x64xf32>, tensor<5xi64>) -> tensor<16x64xf32>
  %o2, %off2, %c2 = exec.kernel "group_rows"(%m0, %m1, %m2, %m3) : (tensor<32xi1>, tensor<32xi1>, tensor<32xi1>, tensor<32xi1>) -> (tensor<32xi64>, tensor<5xi64>, tensor<i64>)
  %z = exec.kernel "grouped_matmul"(%x, %off2, %w, %w, %w, %w) {ints = array<i64: 0>} : (tensor<32x16xf32>, tensor<5xi64>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<32x64xf32>
  exec.output "y" %y : tensor<32x64xf32>
  exec.output "gw" %gw : tensor<16x64xf32>
  exec.output "z" %z : tensor<32x64xf32>
  return
}
)mlir";

} // namespace

TEST(CostModel, GroupedProductsCostTheExpectedRows) {
  mlir::MLIRContext context;
  context
      .loadDialect<exec::ExecDialect, StrataDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kGrouped, &context);
  ASSERT_TRUE(module);
  std::vector<double> flops;
  module->walk([&](exec::KernelOp k) {
    if (k.getKernel() != "group_rows")
      flops.push_back(kernelFlops(k));
  });
  ASSERT_EQ(flops.size(), 3u);
  // 24 rows over every group; one group's 6 for its weight gradient; no
  // estimate: every stored row.
  EXPECT_DOUBLE_EQ(flops[0], 2.0 * 24 * 16 * 64);
  EXPECT_DOUBLE_EQ(flops[1], 2.0 * 6 * 16 * 64);
  EXPECT_DOUBLE_EQ(flops[2], 2.0 * 32 * 16 * 64);
}

TEST(CostModel, ProductsOfCompactedRowsCostTheExpectedCount) {
  mlir::MLIRContext context;
  context
      .loadDialect<exec::ExecDialect, StrataDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kRows, &context);
  ASSERT_TRUE(module);
  std::map<std::string, double> flops;
  module->walk([&](exec::KernelOp k) {
    if (k.getKernel() == "matmul")
      flops[std::to_string(flops.size())] = kernelFlops(k);
  });
  ASSERT_EQ(flops.size(), 5u);
  // 8 of 32 rows: 2 * 8 * 64 * 16 for the product and for the gradient.
  EXPECT_DOUBLE_EQ(flops["0"], 2.0 * 8 * 64 * 16);
  EXPECT_DOUBLE_EQ(flops["1"], 2.0 * 16 * 64 * 8);
  // Without a count, or a count with no estimate: the bound.
  EXPECT_DOUBLE_EQ(flops["2"], 2.0 * 32 * 64 * 16);
  EXPECT_DOUBLE_EQ(flops["3"], 2.0 * 32 * 64 * 16);
  // The count swapped out after the forward pass and back for the
  // backward: still the estimate.
  EXPECT_DOUBLE_EQ(flops["4"], 2.0 * 8 * 64 * 16);
}
