// TierIRTest.cpp - The tier planner's queries on exec IR, on a parsed
// function whose answers are worked out by hand.

#include "dialects/Exec/ExecDialect.h"
#include "dialects/Strata/StrataDialect.h"
#include "passes/tiers/TierPlanner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

using namespace strata;
using namespace strata::tiers;

namespace {

// A forward matmul, its backward pass and one update (the planner lit
// test's function).
constexpr const char *kStep = R"mlir(
func.func @main() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m = exec.param "w.m" state {value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %y = exec.kernel "matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g = exec.kernel "exp"(%y) {strata.backward} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw = exec.kernel "matmul"(%x, %g) {ints = array<i64: 1, 0>, strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_momentum"(%w, %gw, %m) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.output "g" %g : tensor<2x4xf32>
  return
}
)mlir";

class TierIR : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<exec::ExecDialect, StrataDialect,
                        mlir::func::FuncDialect>();
    module = mlir::parseSourceString<mlir::ModuleOp>(kStep, &context);
    ASSERT_TRUE(module);
    func = module->lookupSymbol<mlir::func::FuncOp>("main");
    ASSERT_TRUE(func);
  }
  mlir::Block &body() { return func.getBody().front(); }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
};

} // namespace

TEST_F(TierIR, LiveArenaEstimateIsThePeakOfLiveBuffers) {
  // Op indices: x 0, y 3, g 4 (read by the output at 7), gw 5 (read by
  // the update at 6); x is read until 5. Live at 4 and at 5: three
  // 32- or 64-byte buffers, each a 64-byte unit.
  EXPECT_EQ(liveArenaEstimate(body(), 64), 3u * 64);
  // At 4 KiB alignment every buffer takes a page.
  EXPECT_EQ(liveArenaEstimate(body(), 4096), 3u * 4096);
}

TEST_F(TierIR, SwapCandidatesAreForwardKernelResultsTheBackwardPassReads) {
  // y (the forward matmul's) is read by exp, a backward op; x is an input,
  // not a kernel's result; g and gw are the backward pass's own.
  llvm::SmallVector<mlir::Value> candidates = swappable(body());
  ASSERT_EQ(candidates.size(), 1u);
  auto kernel = candidates[0].getDefiningOp<exec::KernelOp>();
  ASSERT_TRUE(kernel);
  EXPECT_EQ(kernel.getKernel(), "matmul");
  EXPECT_FALSE(kernel->hasAttr("strata.backward"));
  // Its only backward use is exp's operand.
  llvm::SmallVector<mlir::OpOperand *> uses = backwardUsesOf(candidates[0]);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(llvm::cast<exec::KernelOp>(uses[0]->getOwner()).getKernel(), "exp");
}

TEST_F(TierIR, BlockOrderIsMlirsOrderThroughInsertionsAndErasures) {
  // The block grown as a placement grows it: clusters of ops inserted at
  // one place (more than any spacing leaves room for), at the front and
  // at the end, ops erased (forgotten first); after each change, every
  // pair compared as MLIR's own numbering compares them.
  std::mt19937 rng(7);
  mlir::Block &block = body();
  mlir::Operation *ret = block.getTerminator();
  BlockOrder order(block);
  mlir::OpBuilder b(&context);
  auto anyOp = [&](size_t i) {
    auto it = block.begin();
    std::advance(it, i % block.getOperations().size());
    return &*it;
  };
  std::vector<mlir::Operation *> made;
  for (int round = 0; round < 300; ++round) {
    unsigned what = rng() % 10;
    if (what < 6 || made.empty()) {
      mlir::Operation *at = what == 0   ? &block.front()
                            : what == 1 ? ret
                                        : anyOp(rng());
      // A cluster before `at`: each new op right before it, so later
      // ones come after earlier ones.
      b.setInsertionPoint(at);
      for (unsigned k = 0, n = 1 + rng() % 40; k < n; ++k)
        made.push_back(b.create<exec::InputOp>(
            b.getUnknownLoc(), mlir::RankedTensorType::get({1}, b.getF32Type()),
            b.getStringAttr("n"), mlir::IntegerAttr()));
    } else {
      size_t k = rng() % made.size();
      order.forget(made[k]);
      made[k]->erase();
      made.erase(made.begin() + k);
    }
    for (int q = 0; q < 50; ++q) {
      mlir::Operation *a = anyOp(rng()), *c = anyOp(rng());
      ASSERT_EQ(order.before(a, c), a->isBeforeInBlock(c)) << "round " << round;
    }
  }
  // Every op against its successor, once the block is large.
  for (mlir::Operation &op : block)
    if (mlir::Operation *next = op.getNextNode()) {
      ASSERT_TRUE(order.before(&op, next));
      ASSERT_FALSE(order.before(next, &op));
    }
}

TEST(TierNames, LayerOfIsTheNameUpToItsFirstNumber) {
  EXPECT_EQ(layerOf("h.3.attn.c_attn.weight.exp_avg"), "h.3");
  EXPECT_EQ(layerOf("model.layers.12.mlp.up_proj.weight"), "model.layers.12");
  EXPECT_EQ(layerOf("transformer/h/7/ln_1"), "transformer/h/7");
  EXPECT_EQ(layerOf("lm_head.weight"), "");
  EXPECT_EQ(layerOf("h3.weight"), "");
  EXPECT_EQ(layerOf(""), "");
}
