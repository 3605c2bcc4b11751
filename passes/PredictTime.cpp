//===- PredictTime.cpp - Cost model of the planned program ----------------===//

#include "passes/Passes.h"

#include "dialects/Exec/ExecDialect.h"
#include "passes/ArenaRanges.h"
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

/// Streaming kernels larger than this many elements run on several threads.
constexpr int64_t kParallelGrain = 16384;
/// The SSD store's stripe (tiers::SsdOptions::stripeBytes).
constexpr double kSsdStripeBytes = 1 << 20;

int64_t elements(Type type) {
  return cast<ShapedType>(type).getNumElements();
}

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

  static double matmulSeconds(exec::KernelOp k, const MachineProfile &m) {
    auto lhs = cast<ShapedType>(k.getInputs()[0].getType());
    auto out = cast<ShapedType>(k.getResult(0).getType());
    ArrayRef<int64_t> ints = k.getInts();
    bool ta = !ints.empty() && ints[0];
    int64_t K = lhs.getRank() == 1 ? lhs.getDimSize(0)
                : ta ? lhs.getDimSize(lhs.getRank() - 2)
                     : lhs.getDimSize(lhs.getRank() - 1);
    double flops = 2.0 * out.getNumElements() * K;
    // The operands' typical dimension (cube root of M*N*K) picks the rate.
    double n = std::cbrt(flops / 2.0);
    double rate = n < 128   ? m.matmulSmallGflops
                  : n < 512 ? m.matmulMediumGflops
                            : m.matmulLargeGflops;
    return flops / (rate * 1e9);
  }

  /// Seconds of one transfer on its link.
  static double transferSeconds(exec::KernelOp k, const MachineProfile &m,
                                double &hostLink, double &ssdLink) {
    StringRef name = k.getKernel();
    Value stored = k.getInputs()[0];
    double bytes = storageBytes(stored.getType());
    if (tierOf(stored) == "ssd") {
      bool read = name == "copy";
      // Below a stripe the store issues one request; above, many in
      // flight across stripes and drives.
      double rate = bytes < kSsdStripeBytes
                        ? (read ? m.ssdSmallReadGBs : m.ssdSmallWriteGBs)
                        : (read ? m.ssdReadGBs : m.ssdWriteGBs);
      double s = m.ssdLatencyUs * 1e-6 + bytes / (rate * 1e9);
      ssdLink += s;
      return s;
    }
    double s = bytes / (m.copyGBs * 1e9);
    hostLink += s;
    return s;
  }

  /// Seconds of one compute kernel.
  static double kernelSeconds(exec::KernelOp k, const MachineProfile &m) {
    static const llvm::StringSet<> transcendental = {
        "exp", "log", "tanh", "erf", "sigmoid", "gelu", "gelu_grad",
        "softmax", "log_softmax", "cross_entropy", "cross_entropy_grad",
        "pow", "sin", "cos", "update_adamw", "update_adalomo", "layer_norm",
        "layer_norm_grad"};
    static const llvm::StringSet<> movement = {
        "transpose", "slice", "slice_grad", "concat", "broadcast", "gather",
        "gather_grad", "trilu"};
    StringRef name = k.getKernel();
    double seconds = m.launchUs * 1e-6;
    if (name == "matmul")
      return seconds + matmulSeconds(k, m);
    // Streaming kernels: the larger of what they read and write.
    int64_t n = 0;
    for (Value v : k.getInputs())
      n = std::max(n, elements(v.getType()));
    for (Value v : k.getResults())
      n = std::max(n, elements(v.getType()));
    double perElement = transcendental.contains(name)
                            ? m.transcendentalNsPerElement
                        : movement.contains(name) ? m.movementNsPerElement
                                                  : m.simpleNsPerElement;
    seconds += n * perElement * 1e-9;
    // Kernels past the runtime's grain are split across threads.
    if (n > kParallelGrain)
      seconds += m.parallelLaunchUs * 1e-6;
    return seconds;
  }

  /// Replays the runtime's schedule (runtime/exec/Executor.cpp): kernels
  /// and host copies one after another on the compute thread, SSD
  /// transfers in issue order on one transfer queue (a fetch with
  /// `issue_after` right after that kernel, the rest at their place); the
  /// compute thread waits for the queued transfers whose arena bytes it
  /// conflicts with.
  void predict(func::FuncOp func, const MachineProfile &m) {
    SmallVector<exec::KernelOp> kernels;
    for (auto k : func.getBody().front().getOps<exec::KernelOp>())
      kernels.push_back(k);
    size_t n = kernels.size();
    std::vector<SmallVector<ByteRange, 4>> reads(n), writes(n);
    std::vector<SmallVector<size_t, 2>> issueAt(n + 1);
    for (auto [i, k] : llvm::enumerate(kernels)) {
      arenaAccesses(k, reads[i], writes[i]);
      if (auto after = k->getAttrOfType<IntegerAttr>("issue_after"))
        issueAt[after.getInt() + 1].push_back(i);
    }
    struct Job {
      double end;
      size_t kernel;
    };
    std::vector<Job> queued;
    double clock = 0, queueFree = 0, compute = 0, hostLink = 0, ssdLink = 0;
    auto submit = [&](size_t i) {
      double start = std::max(queueFree, clock);
      queueFree = start + transferSeconds(kernels[i], m, hostLink, ssdLink);
      queued.push_back({queueFree, i});
    };
    auto conflicts = [&](size_t job, size_t i) {
      for (const ByteRange &w : writes[job]) {
        for (const ByteRange &r : reads[i])
          if (w.overlaps(r))
            return true;
        for (const ByteRange &r : writes[i])
          if (w.overlaps(r))
            return true;
      }
      for (const ByteRange &r : reads[job])
        for (const ByteRange &w : writes[i])
          if (r.overlaps(w))
            return true;
      return false;
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
          start = std::max(start, job.end);
      double seconds;
      if (isTransfer(k)) {
        seconds = transferSeconds(k, m, hostLink, ssdLink);
      } else {
        seconds = kernelSeconds(k, m);
        compute += seconds;
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
    double step = std::max(clock, queueFree);
    double serial = compute + hostLink + ssdLink;
    double bound = std::max({compute, hostLink, ssdLink});
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
                      b.getNamedAttr("predicted_ssd_link_us", us(ssdLink)),
                      b.getNamedAttr("predicted_lower_bound_us", us(bound)),
                  }));
  }
};

} // namespace
