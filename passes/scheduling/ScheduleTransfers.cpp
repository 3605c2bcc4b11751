//===- ScheduleTransfers.cpp - Issue fetches from host and SSD ahead ------===//
//
// After memory planning, each fetch (a "copy" of a value stored on the host
// or the SSD into the arena) can start as soon as nothing before it still
// needs its destination bytes and nothing writes its source any more. The
// runtime runs fetches on a transfer queue beside the compute, so a fetch
// issued there overlaps the kernels in between; the consumer waits only for
// what is left. This pass records that point as `issue_after` (the index of
// the kernel after which to issue; -1: at the start of the step).
//
// A sharded parameter's gather (`unshard`, on the communication queue) is
// a fetch too: of the whole parameter from every rank's shard, issued as
// early as its destination bytes and its shard allow, so that it runs
// while the kernels before its readers compute (ZeRO stage 3's prefetch).
// Every rank runs the same plan, so the ranks still issue their
// collectives in one order.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/analysis/ArenaRanges.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace strata {
#define GEN_PASS_DEF_SCHEDULETRANSFERSPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

void strata::scheduleTransfers(func::FuncOp func,
                               const ScheduleTransfersPassOptions &options,
                               std::vector<artifact::StepAccesses> *out) {
  SmallVector<exec::KernelOp> kernels;
  for (auto k : func.getBody().front().getOps<exec::KernelOp>())
    kernels.push_back(k);
  // Every kernel's arena accesses, and the stored buffer it writes back.
  std::vector<artifact::StepAccesses> accesses = kernelAccesses(kernels);
  std::vector<std::vector<artifact::ArenaRange>> reads(kernels.size()),
      writes(kernels.size());
  auto arena = [](const std::vector<artifact::Access> &all,
                  std::vector<artifact::ArenaRange> &ranges) {
    for (const artifact::Access &a : all)
      if (a.region == artifact::Region::Arena)
        ranges.push_back(a.range);
  };
  std::vector<Operation *> writesStored(kernels.size(), nullptr);
  for (auto [i, k] : llvm::enumerate(kernels)) {
    arena(accesses[i].reads, reads[i]);
    arena(accesses[i].writes, writes[i]);
    if (k.getNumResults() == 0 && !k.getInputs().empty())
      writesStored[i] = storedRoot(k.getInputs()[0]);
  }
  if (out)
    *out = std::move(accesses);
  for (auto [i, k] : llvm::enumerate(kernels)) {
    if (!(isTransfer(k) && k.isKernel(artifact::Kernel::Copy)) &&
        !k.isKernel(artifact::Kernel::Unshard))
      continue;
    Operation *source = storedRoot(k.getInputs()[0]);
    // The latest kernel before it that conflicts; without one, the
    // start of the step or the lookahead bound.
    int64_t first =
        std::max<int64_t>(0, static_cast<int64_t>(i) - options.lookahead);
    int64_t after = first - 1;
    for (int64_t j = static_cast<int64_t>(i) - 1; j >= first; --j) {
      if ((writesStored[j] && writesStored[j] == source) ||
          artifact::accessesConflict(reads[i], writes[i], reads[j],
                                     writes[j])) {
        after = j;
        break;
      }
    }
    if (after == static_cast<int64_t>(i) - 1)
      continue; // Nothing to overlap: it stays in program order.
    k.setIssueAfter(after);
  }
}

namespace {

struct ScheduleTransfersPass
    : public strata::impl::ScheduleTransfersPassBase<ScheduleTransfersPass> {
  using ScheduleTransfersPassBase::ScheduleTransfersPassBase;

  void runOnOperation() override {
    ScheduleTransfersPassOptions options;
    options.lookahead = lookahead;
    for (auto func : getOperation().getOps<func::FuncOp>())
      scheduleTransfers(func, options);
  }
};

} // namespace
