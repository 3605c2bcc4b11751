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
// * host->device: the stored tensors those kernels read that cannot stay
//   on the device. A kernel's own operands and results (parameters aside)
//   are on the device together, so the largest such set is arena the
//   device always needs; what is left of the budget is all that stored
//   tensors can keep there;
// * device->host: for each trainable parameter read there and not kept,
//   its gradient (to the host's update) or the updated parameter (written
//   back), whichever is smaller;
// * SSD: what the device and the host budget cannot hold is read every
//   step (every stored tensor is read by its kernels or its update) and,
//   but for frozen tensors and constants, written back.
// Each is at the link's best rate, without latencies.
//
//===----------------------------------------------------------------------===//

#include "passes/TierPlanner.h"

#include "dialects/Strata/StrataDialect.h"
#include "passes/ArenaRanges.h"
#include "passes/CostModel.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>

using namespace mlir;

namespace strata::tiers {

namespace {

/// The optimizer step's kernels and every update (fused updates run inside
/// the backward pass): they may run on the CPU instead.
bool isOptimizerKernel(exec::KernelOp k) {
  return markers::isOptimizer(k) || exec::isUpdate(k);
}

} // namespace

double PlacementBound::seconds() const {
  return std::max({compute, toDevice, toHost, ssdRead, ssdWrite});
}

PlacementBound placementBound(func::FuncOp func, const MachineProfile &m,
                              uint64_t gpuMem, uint64_t cpuMem, bool hasSsd) {
  PlacementBound b;
  Block &body = func.getBody().front();
  // Stored tensors: read by the passes' kernels (device reads), trainable,
  // never written (frozen and constants), all used ones.
  llvm::DenseSet<Operation *> readByPasses;
  double deviceArena = 0;
  for (auto k : body.getOps<exec::KernelOp>()) {
    if (isOptimizerKernel(k))
      continue;
    b.compute += kernelSeconds(k, m);
    llvm::DenseSet<Value> distinct;
    double bytes = 0;
    for (Value v : k->getOperands()) {
      Value root = viewRoot(v);
      if (auto p = root.getDefiningOp<exec::ParamOp>()) {
        readByPasses.insert(p);
        continue;
      }
      if (distinct.insert(root).second)
        bytes += storageBytes(root.getType());
    }
    for (Value r : k.getResults())
      bytes += storageBytes(r.getType());
    deviceArena = std::max(deviceArena, bytes);
  }
  double read = 0, trainableRead = 0, stored = 0, unwritten = 0;
  double gradientShare = 1.0;
  llvm::DenseMap<Operation *, double> gradientBytes;
  for (auto k : body.getOps<exec::KernelOp>())
    if (exec::isUpdate(k) && k.getInputs().size() > 1)
      if (auto p = viewRoot(k.getInputs()[0]).getDefiningOp<exec::ParamOp>())
        gradientBytes[p] = storageBytes(k.getInputs()[1].getType());
  for (auto p : body.getOps<exec::ParamOp>()) {
    if (p->use_empty())
      continue;
    double bytes = storageBytes(p.getType());
    stored += bytes;
    if (!p.getTrainable() && !p.getState() && !p.getCopyOf())
      unwritten += bytes;
    if (readByPasses.contains(p)) {
      read += bytes;
      if (p.getTrainable()) {
        trainableRead += bytes;
        auto g = gradientBytes.find(p);
        double back =
            g == gradientBytes.end() ? bytes : std::min(bytes, g->second);
        if (bytes > 0)
          gradientShare = std::min(gradientShare, back / bytes);
      }
    }
  }
  // What stored tensors can keep on the device.
  double kept = gpuMem ? std::max(0.0, double(gpuMem) - deviceArena) : stored;
  b.toDevice = std::max(0.0, read - kept) / (hostLinkGBs(true, m) * 1e9);
  b.toHost = gradientShare * std::max(0.0, trainableRead - kept) /
             (hostLinkGBs(false, m) * 1e9);
  if (hasSsd && cpuMem > 0) {
    double onSsd = std::max(0.0, stored - kept - double(cpuMem));
    b.ssdRead = onSsd / (ssdPeakGBs(true, m) * 1e9);
    b.ssdWrite =
        std::max(0.0, onSsd - unwritten) / (ssdPeakGBs(false, m) * 1e9);
  }
  return b;
}

} // namespace strata::tiers
