//===- PredictTime.cpp - Cost model of the planned program ----------------===//

#include "passes/Passes.h"

#include "dialects/Exec/ExecDialect.h"
#include "passes/ArenaRanges.h"
#include "passes/CostModel.h"
#include "runtime/profile/MachineProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cmath>

#define DEBUG_TYPE "strata-predict-time"

namespace strata {
#define GEN_PASS_DEF_PREDICTTIMEPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct PredictTimePass
    : public strata::impl::PredictTimePassBase<PredictTimePass> {
  using PredictTimePassBase::PredictTimePassBase;

  void runOnOperation() override {
    MachineProfile machine;
    std::string error;
    if (!profile.empty() && !machine.read(profile, error)) {
      getOperation().emitError(error);
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      predict(func, machine);
  }

  /// Busy time per link: each host copy direction and the SSD (in all,
  /// and reads and writes apart).
  struct Links {
    double toDevice = 0, toHost = 0, ssd = 0, ssdRead = 0, ssdWrite = 0;
  };

  static double transferSeconds(exec::KernelOp k, const MachineProfile &m,
                                Links &links) {
    Value stored = k.getInputs()[0];
    bool ssd = tierOf(stored) == "ssd";
    bool read = k.getKernel() == "copy";
    double s = strata::transferSeconds(storageBytes(stored.getType()),
                                       ssd ? "ssd" : "host", read, m);
    (ssd ? links.ssd : read ? links.toDevice : links.toHost) += s;
    if (ssd)
      (read ? links.ssdRead : links.ssdWrite) += s;
    return s;
  }

  /// How long `work` seconds of work take when, for its first `busy`
  /// seconds, it runs `slow` times slower.
  static double stretched(double work, double slow, double busy) {
    return work * slow <= busy ? work * slow : busy + (work - busy / slow);
  }

  /// Replays the runtime's schedule (runtime/exec/Executor.cpp): kernels
  /// and host copies one after another on the compute thread, SSD reads
  /// and writes each in issue order on their own queue (a fetch with
  /// `issue_after` right after that kernel, the rest at their place), a
  /// transfer after the other queue's transfers of the same stored tensor
  /// or of arena bytes it conflicts with; the compute thread waits for the
  /// queued transfers whose arena bytes it conflicts with.
  static void predict(func::FuncOp func, const MachineProfile &m) {
    SmallVector<exec::KernelOp> kernels;
    for (auto k : func.getBody().front().getOps<exec::KernelOp>())
      kernels.push_back(k);
    size_t n = kernels.size();
    std::vector<std::vector<artifact::ArenaRange>> reads(n), writes(n);
    std::vector<SmallVector<size_t, 2>> issueAt(n + 1);
    for (auto [i, k] : llvm::enumerate(kernels)) {
      arenaAccesses(k, reads[i], writes[i]);
      if (auto after = k->getAttrOfType<IntegerAttr>("issue_after"))
        issueAt[after.getInt() + 1].push_back(i);
    }
    struct Job {
      double end;
      size_t kernel;
      bool read;
    };
    std::vector<Job> queued;
    // When each queue (0: reads, 1: writes) is next free.
    double clock = 0, queueFree[2] = {0, 0}, compute = 0;
    Links links;
    auto conflicts = [&](size_t job, size_t i) {
      return artifact::accessesConflict(reads[job], writes[job], reads[i],
                                        writes[i]);
    };
    // A sleeping thread (an idle queue worker, the compute thread waiting
    // for a transfer) takes half a queue round trip to wake up.
    double wake = m.queueRoundTripUs * 0.5e-6;
    auto submit = [&](size_t i) {
      bool read = kernels[i].getKernel() == "copy";
      double start = queueFree[!read] > clock ? queueFree[!read] : clock + wake;
      for (const Job &job : queued)
        if (job.read != read && job.end > start &&
            (kernels[job.kernel].getInputs()[0] == kernels[i].getInputs()[0] ||
             conflicts(job.kernel, i)))
          start = job.end + wake;
      // While the other direction is busy the drives are shared: the
      // transfer runs 1 + its direction's duplex slowdown times slower.
      double work = transferSeconds(kernels[i], m, links);
      double slow = 1 + (read ? m.ssdDuplexReadSlowdown
                              : m.ssdDuplexWriteSlowdown);
      double busy = std::max(0.0, queueFree[read] - start);
      queueFree[!read] = start + stretched(work, slow, busy);
      queued.push_back({queueFree[!read], i, read});
    };
    // Kernels and host copies run on the compute thread, after the queued
    // transfers they conflict with; SSD transfers go on the queue.
    auto issue = [&](size_t i) {
      exec::KernelOp k = kernels[i];
      if (isTransfer(k) && tierOf(k.getInputs()[0]) == "ssd")
        return submit(i);
      double start = clock;
      for (const Job &job : queued)
        if (job.end > clock && conflicts(job.kernel, i))
          start = std::max(start, job.end + wake);
      double seconds;
      if (isTransfer(k)) {
        seconds = transferSeconds(k, m, links);
      } else {
        double work = kernelSeconds(k, m);
        compute += work;
        // While the queue is busy (until queueFree) the kernel runs
        // 1 + overlapSlowdown times slower.
        double slow = 1 + m.overlapSlowdown;
        double busy =
            std::max(0.0, std::max(queueFree[0], queueFree[1]) - start);
        seconds = stretched(work, slow, busy);
      }
      clock = start + seconds;
      llvm::erase_if(queued, [&](const Job &j) { return j.end <= clock; });
    };
    for (size_t i : issueAt[0])
      issue(i);
    for (size_t i = 0; i < n; ++i) {
      exec::KernelOp k = kernels[i];
      if (!isTransfer(k) || !k->hasAttr("issue_after"))
        issue(i);
      for (size_t f : issueAt[i + 1])
        issue(f);
    }
    double step = std::max({clock, queueFree[0], queueFree[1]});
    double hostLink = links.toDevice + links.toHost;
    double serial = compute + hostLink + links.ssd;
    // With perfect overlap the busiest resource sets the pace.
    double bound = std::max({compute, links.toDevice, links.toHost,
                             links.ssdRead, links.ssdWrite});
    OpBuilder b(func.getContext());
    auto us = [&](double s) {
      return b.getI64IntegerAttr(static_cast<int64_t>(std::llround(s * 1e6)));
    };
    func->setAttr("exec.predicted",
                  b.getDictionaryAttr({
                      b.getNamedAttr("predicted_step_us", us(step)),
                      b.getNamedAttr("predicted_serial_us", us(serial)),
                      b.getNamedAttr("predicted_compute_us", us(compute)),
                      b.getNamedAttr("predicted_host_link_us", us(hostLink)),
                      b.getNamedAttr("predicted_host_to_device_us",
                                     us(links.toDevice)),
                      b.getNamedAttr("predicted_device_to_host_us",
                                     us(links.toHost)),
                      b.getNamedAttr("predicted_ssd_link_us", us(links.ssd)),
                      b.getNamedAttr("predicted_lower_bound_us", us(bound)),
                  }));
  }
};

} // namespace

void strata::predictStepTime(func::FuncOp func, const MachineProfile &m) {
  PredictTimePass::predict(func, m);
}
