//===- PlacementBound.cpp - No placement can be predicted faster ----------===//
//
// A lower bound on the predicted step of every placement that meets the
// budgets, from the program before placement: the planner's result is
// reported against it, so the gap its search leaves is known, not guessed.
//
// Under the cost model the step is at least each queue's busy time:
// * compute: every kernel of the forward and backward passes but the
//   updates (the optimizer's kernels may move to the CPU, fused updates
//   too; recomputation only adds);
// * host->device: every read of a stored tensor that is not on the device
//   is a fetch of its own (one per reading kernel). A kernel's own
//   operands and results (parameters aside) are on the device together,
//   so the largest such set is arena the device always needs; what is
//   left of the budget is all that stored tensors can keep there, and the
//   fewest fetches are made when it keeps the most-read ones. Without a
//   GPU an SSD tensor is fetched by the SSD queue instead of the host
//   link: the fetches then share both rates;
// * updates: each update reads its parameter and optimizer state either
//   on the device (a fetch each, when they are not kept there) or on the
//   CPU (the CPU optimizer reads and writes them); the passes' fetches
//   and the updates' reads together over the host link's and the CPU's
//   rates together;
// * device->host: for each trainable parameter read there and not kept,
//   its gradient (to the host's update) or the updated parameter (written
//   back), whichever is smaller;
// * SSD: what the device and the host budget cannot hold is read every
//   time it is fetched or updated (the least-read tensors there) and, but
//   for frozen tensors and constants, written back.
// Each is at the link's best rate, without latencies.
//
//===----------------------------------------------------------------------===//

#include "passes/TierPlanner.h"

#include "dialects/Strata/StrataDialect.h"
#include "passes/ArenaRanges.h"
#include "passes/CostModel.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <limits>
#include <vector>

using namespace mlir;

namespace strata::tiers {

namespace {

/// The optimizer step's kernels and every update (fused updates run inside
/// the backward pass): they may run on the CPU instead.
bool isOptimizerKernel(exec::KernelOp k) {
  return markers::isOptimizer(k) || exec::isUpdate(k);
}

/// A stored tensor's bytes and how many times a step reads it.
struct Reads {
  double bytes = 0, count = 0;
};

/// The fewest reads (in bytes) that the tensors not kept make when `kept`
/// bytes of the most-read ones stay (a fraction of one may).
double readsNotKept(std::vector<Reads> tensors, double kept) {
  llvm::sort(tensors,
             [](const Reads &a, const Reads &b) { return a.count > b.count; });
  double total = 0;
  for (const Reads &t : tensors) {
    double stays = std::min(kept, t.bytes);
    kept -= stays;
    total += (t.bytes - stays) * t.count;
  }
  return total;
}

} // namespace

double PlacementBound::seconds() const {
  return std::max({compute, toDevice, toHost, updates, ssdRead, ssdWrite});
}

PlacementBound placementBound(func::FuncOp func, const MachineProfile &m,
                              uint64_t gpuMem, uint64_t cpuMem, bool hasSsd) {
  PlacementBound b;
  Block &body = func.getBody().front();
  // How many of the passes' kernels read each stored tensor; those the
  // updates read (trainable parameters and optimizer state).
  llvm::DenseMap<Operation *, double> passReads;
  llvm::DenseSet<Operation *> updated;
  double deviceArena = 0;
  // The CPU optimizer's bytes per byte of the tensors an update reads
  // (each read, the in-place ones written too; the gradient adds more).
  double cpuBytesPerByte = std::numeric_limits<double>::infinity();
  // Each updated parameter's gradient bytes.
  llvm::DenseMap<Operation *, double> gradientBytes;
  for (auto k : body.getOps<exec::KernelOp>()) {
    if (isOptimizerKernel(k)) {
      if (!exec::isUpdate(k))
        continue;
      if (k.getInputs().size() > 1)
        if (auto p = viewRoot(k.getInputs()[0]).getDefiningOp<exec::ParamOp>())
          gradientBytes[p] = storageBytes(k.getInputs()[1].getType());
      double footprint = 0;
      for (Value v : k.getInputs())
        if (auto p = viewRoot(v).getDefiningOp<exec::ParamOp>())
          if (p.getTrainable() || p.getState()) {
            updated.insert(p);
            footprint += storageBytes(p.getType());
          }
      if (footprint > 0)
        cpuBytesPerByte =
            std::min(cpuBytesPerByte, cpuUpdateBytes(k) / footprint);
      continue;
    }
    b.compute += kernelSeconds(k, m);
    llvm::DenseSet<Value> distinct;
    double bytes = 0;
    for (Value v : k->getOperands()) {
      Value root = viewRoot(v);
      if (!distinct.insert(root).second)
        continue;
      if (auto p = root.getDefiningOp<exec::ParamOp>())
        passReads[p] += 1;
      else
        bytes += storageBytes(root.getType());
    }
    for (Value r : k.getResults())
      bytes += storageBytes(r.getType());
    deviceArena = std::max(deviceArena, bytes);
  }
  double trainableRead = 0, stored = 0, unwritten = 0;
  double gradientShare = 1.0;
  // Reads by the passes alone; by the passes and the updates.
  std::vector<Reads> fetched, read;
  for (auto p : body.getOps<exec::ParamOp>()) {
    if (p->use_empty())
      continue;
    double bytes = storageBytes(p.getType());
    stored += bytes;
    if (!p.getTrainable() && !p.getState() && !p.getCopyOf())
      unwritten += bytes;
    double byPasses = passReads.lookup(p);
    fetched.push_back({bytes, byPasses});
    read.push_back({bytes, byPasses + (updated.contains(p) ? 1 : 0)});
    if (byPasses > 0 && p.getTrainable()) {
      trainableRead += bytes;
      auto g = gradientBytes.find(p);
      double back =
          g == gradientBytes.end() ? bytes : std::min(bytes, g->second);
      if (bytes > 0)
        gradientShare = std::min(gradientShare, back / bytes);
    }
  }
  // What stored tensors can keep on the device.
  double kept = gpuMem ? std::max(0.0, double(gpuMem) - deviceArena) : stored;
  // Fetches ride the host link; without a GPU, those from the SSD ride
  // the SSD queue instead.
  double fetchGBs = hostLinkGBs(true, m) +
                    (!m.gpu && hasSsd && cpuMem > 0 ? ssdPeakGBs(true, m) : 0);
  b.toDevice = readsNotKept(fetched, kept) / (fetchGBs * 1e9);
  if (!updated.empty() && m.cpuUpdateGBs > 0)
    b.updates = readsNotKept(read, kept) /
                ((fetchGBs + m.cpuUpdateGBs / cpuBytesPerByte) * 1e9);
  b.toHost = gradientShare * std::max(0.0, trainableRead - kept) /
             (hostLinkGBs(false, m) * 1e9);
  if (hasSsd && cpuMem > 0) {
    // At best the SSD holds the least-read tensors: what is not kept when
    // the device and the host keep the most-read ones.
    double onSsd = std::max(0.0, stored - kept - double(cpuMem));
    b.ssdRead =
        readsNotKept(read, stored - onSsd) / (ssdPeakGBs(true, m) * 1e9);
    b.ssdWrite =
        std::max(0.0, onSsd - unwritten) / (ssdPeakGBs(false, m) * 1e9);
  }
  return b;
}

} // namespace strata::tiers
