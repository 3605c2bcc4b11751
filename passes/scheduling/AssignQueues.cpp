//===- AssignQueues.cpp - Queues and waits for every step
//------------------===//
//
// Each exec.kernel gets the queue it runs on and the waits that order it
// after the steps on other queues it conflicts with. The algorithm is the
// runtime's (runtime/artifact/StepOrder.cpp), run on the accesses of the
// exec IR, so the plan the compiler writes is the one the validator checks.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/analysis/ArenaRanges.h"

#include "runtime/artifact/StepOrder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_ASSIGNQUEUESPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct AssignQueuesPass
    : public strata::impl::AssignQueuesPassBase<AssignQueuesPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      assign(func);
  }

  void assign(func::FuncOp func) {
    SmallVector<exec::KernelOp> kernels;
    for (auto k : func.getBody().front().getOps<exec::KernelOp>())
      kernels.push_back(k);
    // Derived afresh: the attributes of an earlier run may be stale.
    for (exec::KernelOp k : kernels)
      k.removeQueueAttr();
    StepOrdering o = orderSteps(kernels);
    std::vector<artifact::Queue> &queues = o.queues;
    std::vector<std::vector<uint32_t>> &waits = o.waits;
    for (auto [i, k] : llvm::enumerate(kernels)) {
      k.setQueue(exec::execQueue(queues[i]));
      if (waits[i].empty()) {
        k.removeWaitsAttr();
        continue;
      }
      SmallVector<int64_t> w(waits[i].begin(), waits[i].end());
      k.setWaits(w);
    }
  }
};

} // namespace
