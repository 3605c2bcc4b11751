//===- OffloadOptimizer.cpp - Optimizer updates on the host CPU -----------===//
//
// See OffloadOptimizerPass in Passes.td. PlaceTiers leaves each update of a
// host-resident parameter as fetches of the parameter and its states, the
// update on the fetched copies and write-backs:
//
//   %wf = copy(%w)  %mf = copy(%m)  update(%wf, %g, %mf, %scale)
//   assign(%w, %wf) assign(%m, %mf)
//
// which becomes a store of the gradient (and, once, of the scale) into host
// memory and the update on the stored tensors themselves, which the runtime
// runs on its CPU queue (every operand in host memory or on the SSD, those
// on the SSD staged around the job on the SSD queues: isCpuUpdate):
//
//   store(%gs, %g)  update(%w, %gs, %m, %ss)
//
// A sharded update (--shard-optimizer) works on %ws, this rank's shard of
// the parameter copied out on the device, and gathers it back. On the CPU
// the shard goes to host memory beside the gradient and comes back for the
// gather, which moves after the CPU job:
//
//   %ws = shard(%w)  update(%ws, %g, %m)  all_gather(%w, %ws)
//
// becomes
//
//   %ws = shard(%w)  store(%wh, %ws)  store(%gs, %g)  update(%wh, %gs, %m)
//   %wf = copy(%wh)  all_gather(%w, %wf)
//
// A sharded parameter (--shard-parameters) stored on the device is this
// rank's shard itself: it (and its low-precision copy's shard, also
// stored on the device) goes to host memory the same way and is written
// back once the CPU job has run:
//
//   update(%ws, %g, %m)
//
// becomes
//
//   store(%wh, %ws)  store(%gs, %g)  update(%wh, %gs, %m)
//   %wf = copy(%wh)  assign(%ws, %wf)
//
//===----------------------------------------------------------------------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/Passes.h"
#include "passes/analysis/ArenaRanges.h"
#include "passes/analysis/CostModel.h"

#include "runtime/artifact/KernelTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"

#include <deque>
#include <string>

namespace strata {
#define GEN_PASS_DEF_OFFLOADOPTIMIZERPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// An in-place operand of an update: the fetch PlaceTiers made of a stored
/// tensor, and the write-back after the update.
struct Fetched {
  exec::KernelOp copy, assign;
  Value stored;
  /// The update's operand it is.
  unsigned input = 0;
};

/// What moving one update to the CPU involves, or why it cannot move.
struct Candidate {
  exec::KernelOp update;
  SmallVector<Fetched> fetched; // One per in-place operand.
  unsigned gradient = 1;
  int scale = -1; // Operand index of the scale, if any.
  /// The gradient is an accumulator (a stored tensor the update clears).
  bool accumulated = false;
  /// A sharded update: the kernel that copies this rank's shard of the
  /// parameter out (its operand 0) and the all-gather that puts it back.
  exec::KernelOp shard, gather;
  /// Or the update of a sharded parameter stored on the device: the
  /// operands (the parameter's shard, its low-precision copy's) that are
  /// stored shards on the device, written back after the CPU job.
  SmallVector<std::pair<unsigned, Value>, 2> deviceShards;
  std::string blocked;
  /// Device kernels of the backward pass follow it; its scale is computed
  /// after the backward pass.
  bool overlaps = false, lateScale = false;
  /// Where its speculative copy runs (artifact::Speculation): after this
  /// op, the last that its gradient or its stored tensors wait for; null
  /// when it does not speculate.
  Operation *speculateAfter = nullptr;
};

/// A stored tensor's name for a message ("?" for none).
std::string displayName(Value stored) {
  StringRef name = storedName(stored);
  return name.empty() ? "?" : name.str();
}

Candidate examine(exec::KernelOp update) {
  Candidate c;
  c.update = update;
  artifact::UpdateOperands at = updateOperandsOf(update);
  c.scale = at.scale;
  // With accumulation the update reads (and clears) the accumulator, a
  // stored tensor fetched like the states: the CPU updates it where it
  // lives, and there is no gradient to store.
  c.accumulated = llvm::is_contained(writtenInputs(update), c.gradient);
  for (unsigned i : writtenInputs(update)) {
    Value v = update.getInputs()[i];
    auto copy = v.getDefiningOp<exec::KernelOp>();
    Operation *root = copy && copy.isKernel(artifact::Kernel::Copy)
                          ? storedRoot(copy.getInputs()[0])
                          : nullptr;
    if (auto p = v.getDefiningOp<exec::ParamOp>();
        p && p.getShardRanks() && p.getTier() == exec::Tier::Device &&
        (i == 0 || static_cast<int>(i) == at.low)) {
      // Nothing but this update writes it; its gathers read it before.
      c.deviceShards.push_back({i, v});
      continue;
    }
    if (i == 0 && copy && copy.isKernel(artifact::Kernel::Shard)) {
      // Its readers: this update, then the all-gather alone.
      for (Operation *user : copy->getUsers()) {
        auto k = dyn_cast<exec::KernelOp>(user);
        if (k == update)
          continue;
        if (k && k.isKernel(artifact::Kernel::AllGather) && !c.gather &&
            k.getInputs()[1] == v && update->isBeforeInBlock(k)) {
          c.gather = k;
          continue;
        }
        c.blocked = "its parameter's shard has readers other than its "
                    "update and all-gather";
        return c;
      }
      if (!c.gather) {
        c.blocked = "its parameter's shard is not gathered back";
        return c;
      }
      c.shard = copy;
      continue;
    }
    if (!root || root->getNumResults() != 1) {
      c.blocked = (i == 0            ? std::string("its parameter")
                   : i == c.gradient ? "its gradient accumulator"
                   : static_cast<int>(i) == at.low ? "its low-precision copy"
                                                   : "a state") +
                  " lives in device memory (the CPU updates tensors in "
                  "host memory or on the SSD: --place-params host, "
                  "--place-states host or ssd)";
      return c;
    }
    Fetched f;
    f.copy = copy;
    f.stored = copy.getInputs()[0];
    f.input = i;
    for (Operation *user : copy->getUsers()) {
      auto k = dyn_cast<exec::KernelOp>(user);
      if (k == update)
        continue;
      if (k && k.isKernel(artifact::Kernel::Assign) &&
          k.getInputs()[0] == f.stored && !f.assign) {
        f.assign = k;
        continue;
      }
      c.blocked = "the device copy of '" + displayName(f.stored) +
                  "' has other readers";
      return c;
    }
    if (!f.assign) {
      c.blocked = "'" + displayName(f.stored) + "' is not written back";
      return c;
    }
    c.fetched.push_back(f);
  }
  // The gradient (and the scale) must be device values: stored to the host
  // here. A gradient already kept in host memory is fetched by a copy.
  for (int i : {static_cast<int>(c.gradient), c.scale}) {
    if (i < 0 || (c.accumulated && i == static_cast<int>(c.gradient)))
      continue;
    if (tierOf(update.getInputs()[i]) != exec::Tier::Device ||
        storedRoot(update.getInputs()[i])) {
      c.blocked = "its gradient is not in device memory";
      return c;
    }
    if (auto copy = update.getInputs()[i].getDefiningOp<exec::KernelOp>())
      if (copy.isKernel(artifact::Kernel::Copy) &&
          storedRoot(copy.getInputs()[0])) {
        c.blocked = "its gradient is kept in host memory and fetched "
                    "(--place-gradients)";
        return c;
      }
  }
  return c;
}

/// Why updates stayed on the device: each reason once, with its count and
/// the first update it applies to.
struct Reason {
  std::string why;
  unsigned count;
  Operation *first;
};
using Reasons = SmallVector<Reason>;

/// Seconds the device path takes for `c`: fetches, the kernel, the
/// write-backs; and the CPU path: the gradient's store and the CPU update.
void costs(const Candidate &c, const MachineProfile &m, double &device,
           double &cpu) {
  exec::KernelOp update = c.update;
  device = kernelSeconds(update, m);
  for (const Fetched &f : c.fetched) {
    double bytes = storageBytes(f.stored.getType());
    device += transferSeconds(bytes, tierOf(f.stored), true, m) +
              transferSeconds(bytes, tierOf(f.stored), false, m);
  }
  double grad = c.accumulated
                    ? 0
                    : storageBytes(update.getInputs()[c.gradient].getType());
  cpu = transferSeconds(grad, exec::Tier::Host, false, m) +
        cpuUpdateSeconds(update, m);
  // A sharded parameter's shard goes to host memory and comes back.
  auto roundTrip = [&](Value v) {
    double shard = storageBytes(v.getType());
    cpu += transferSeconds(shard, exec::Tier::Host, false, m) +
           transferSeconds(shard, exec::Tier::Host, true, m);
  };
  if (c.shard)
    roundTrip(update.getInputs()[0]);
  for (auto [i, v] : c.deviceShards)
    roundTrip(v);
}

/// How many host buffers of one tensor type gradients land in at least,
/// taken in turn: a gradient's store waits only when the CPU is that many
/// jobs behind the device. A job that updates more tensors of a type
/// holds more of them at once, and the pool grows to that; so does every
/// pool while the host budget has room (Offloader::offload), since a store
/// that waits for the CPU holds up the device-to-host queue behind it.
constexpr size_t kLandingBuffers = 3;

/// Where the chosen updates' gradients land (see Offloader::rewrite): per
/// update, the index of its host buffer in the order the buffers are made
/// (-1: none from the pools: an accumulated gradient, which is its own
/// stored tensor, or a speculating update's, which has a buffer of its
/// own), each buffer's type, and the bytes of the buffers made once each
/// update's gradient has landed (a running total, so the first k updates'
/// share is bytesAfter[k - 1]).
struct Landing {
  SmallVector<int> buffer;
  SmallVector<Type> types;
  SmallVector<uint64_t> bytesAfter;
};

/// The type of the pooled buffer `c`'s gradient lands in; null for none
/// (an accumulated gradient is its own stored tensor, a speculating
/// update's has a buffer of its own).
Type landingType(Candidate *c) {
  if (c->accumulated || c->speculateAfter)
    return Type();
  return c->update.getInputs()[c->gradient].getType();
}

/// The pools behind Landing: per tensor type, buffers taken in turn. A job
/// holds the buffers its gradients landed in until it has run; then they
/// are free again, least recently released first. A new buffer is made
/// while a type has fewer than `least` (kLandingBuffers or more), when
/// every one is held by the current job, and always for the types in
/// `own` (one buffer per update: no store of theirs waits for the CPU).
Landing planLanding(ArrayRef<Candidate *> chosen, ArrayRef<unsigned> jobOf,
                    size_t least, const llvm::DenseSet<Type> &own = {}) {
  struct Pool {
    size_t count = 0;
    SmallVector<int> held;
    std::deque<int> free;
  };
  llvm::MapVector<Type, Pool> pools;
  Landing out;
  uint64_t bytes = 0;
  for (auto [i, c] : llvm::enumerate(chosen)) {
    if (i > 0 && jobOf[i] != jobOf[i - 1])
      for (auto &[type, pool] : pools) {
        pool.free.insert(pool.free.end(), pool.held.begin(), pool.held.end());
        pool.held.clear();
      }
    int id = -1;
    if (Type type = landingType(c)) {
      Pool &pool = pools[type];
      if (pool.count < least || pool.free.empty() || own.contains(type)) {
        id = static_cast<int>(out.types.size());
        out.types.push_back(type);
        bytes += artifact::pagePadded(storageBytes(type));
        ++pool.count;
      } else {
        id = pool.free.front();
        pool.free.pop_front();
      }
      pool.held.push_back(id);
    }
    out.buffer.push_back(id);
    out.bytesAfter.push_back(bytes);
  }
  return out;
}

/// Moves a function's chosen updates to the CPU (the pass and the tier
/// planner's scoring share it).
struct Offloader {
  /// "cpu" or "auto".
  std::string mode;
  /// Updates moving fewer bytes than this are grouped into one CPU job
  /// with the updates after them (negative: cpuJobMinBytes).
  int64_t groupBytes = -1;
  /// Names the landing buffers of one function.
  unsigned landingCount = 0;
  /// Names the host buffers of sharded updates' parameter shards.
  unsigned shardCount = 0;
  /// The host memory budget (--cpu-mem; 0: none). In "auto" mode updates
  /// move only while the host tensors, with the buffers their gradients
  /// land in, stay within it.
  uint64_t hostBudget = 0;
  /// Whether updates whose scale is known only after the backward pass
  /// (exact clipping) run speculatively during it (artifact::Speculation).
  bool speculate = true;

  /// Bytes of the host tensors `body` holds: parameters and states placed
  /// there and swap space, each page-padded.
  static uint64_t hostTensorBytes(Block &body) {
    uint64_t bytes = 0;
    for (Operation &op : body) {
      Value v;
      if (auto p = dyn_cast<exec::ParamOp>(op);
          p && p.getTier() == exec::Tier::Host)
        v = p.getResult();
      else if (auto s = dyn_cast<exec::SwapSpaceOp>(op);
               s && s.getTier() == exec::Tier::Host)
        v = s.getResult();
      if (v)
        bytes += artifact::pagePadded(storageBytes(v.getType()));
    }
    return bytes;
  }

  void offload(func::FuncOp func, const MachineProfile &m) {
    Block &body = func.getBody().front();
    SmallVector<Candidate> candidates;
    // An update overlaps the backward pass when device kernels of it
    // follow: the CPU runs it while they do.
    Operation *lastBackward = nullptr;
    for (auto k : body.getOps<exec::KernelOp>()) {
      artifact::Kernel kernel;
      if (artifact::kernelByName(k.getKernel(), kernel) &&
          artifact::runsOnCpu(kernel))
        candidates.push_back(examine(k));
      if (markers::isBackward(k) && !isTransfer(k))
        lastBackward = k;
    }
    if (candidates.empty())
      return;
    // Why updates stayed, each reason once with its count and an example.
    Reasons stayed;
    unsigned costlier = 0, planned = 0;
    SmallVector<Candidate *> chosen;
    uint64_t host = hostBudget ? hostTensorBytes(body) : 0;
    unsigned overHost = 0;
    for (Candidate &c : candidates) {
      if (!c.blocked.empty()) {
        auto it = llvm::find_if(
            stayed, [&](const Reason &r) { return r.why == c.blocked; });
        if (it == stayed.end())
          stayed.push_back({c.blocked, 1, c.update});
        else
          ++it->count;
        continue;
      }
      if (mode == "auto") {
        // The tier planner's decision, where it made one (it scored the
        // whole step both ways); otherwise the two paths' costs.
        StringAttr on =
            getDeclaredAttr<exec::ExecDialect::UpdateOnAttrHelper>(c.update);
        if (on && on.getValue() == "device") {
          ++planned;
          continue;
        }
        double device, cpu;
        costs(c, m, device, cpu);
        if (!on && cpu >= device) {
          ++costlier;
          continue;
        }
      }
      chosen.push_back(&c);
    }
    // The host memory the gradients land in (pooled buffers per tensor
    // type, planLanding) and the scales (one each): in "auto" mode the
    // updates move in program order while kLandingBuffers per type keep it
    // within the budget; the rest stay on the device, where they need no
    // host memory. Grouping and pooling run left to right, so a prefix's
    // jobs and buffers are those of the whole list's first entries.
    SmallVector<unsigned> jobOf = group(chosen, m);
    // The pools' bytes at their least, before speculation takes its
    // gradients out of them.
    uint64_t poolLeast = 0;
    if (hostBudget && !chosen.empty()) {
      Landing land = planLanding(chosen, jobOf, kLandingBuffers);
      uint64_t scales = 0;
      llvm::DenseSet<Value> scalesLanded;
      size_t fit = 0;
      for (; fit < chosen.size(); ++fit) {
        Candidate *c = chosen[fit];
        Value scale = c->scale >= 0 ? c->update.getInputs()[c->scale] : Value();
        if (scale && scalesLanded.insert(scale).second)
          scales += artifact::pagePadded(storageBytes(scale.getType()));
        // And a sharded update's parameter shard, a buffer of its own.
        if (c->shard)
          scales += artifact::pagePadded(
              storageBytes(c->update.getInputs()[0].getType()));
        for (auto [i, v] : c->deviceShards)
          scales += artifact::pagePadded(storageBytes(v.getType()));
        if (mode == "auto" && host + land.bytesAfter[fit] + scales > hostBudget)
          break;
      }
      overHost = chosen.size() - fit;
      chosen.resize(fit);
      jobOf.resize(fit);
      host += scales;
      poolLeast = fit ? land.bytesAfter[fit - 1] : 0;
    }
    // Speculation's keeps and own landing buffers come next (counted beside
    // the pools at their least), then the pools grow to the most buffers
    // the rest of the budget holds, up to one per update: then no store
    // waits for the CPU.
    unsigned overHostKeeps = 0;
    if (speculate) {
      host += poolLeast;
      chooseSpeculation(body, chosen, lastBackward, host, overHostKeeps);
      host -= poolLeast;
    }
    size_t least = kLandingBuffers;
    llvm::DenseSet<Type> own;
    auto fits = [&](size_t n) {
      return host + planLanding(chosen, jobOf, n, own).bytesAfter.back() <=
             hostBudget;
    };
    if (hostBudget && !chosen.empty() && fits(least)) {
      size_t hi = std::max(least, chosen.size());
      if (fits(hi))
        least = hi;
      while (hi - least > 1) {
        size_t mid = least + (hi - least) / 2;
        (fits(mid) ? least : hi) = mid;
      }
      // What the uniform pools leave of the budget goes to the types whose
      // every update can have a buffer of its own, the cheapest first: a
      // layer's biases and norms share one small type, and with a few
      // buffers their stores wait for CPU jobs queued behind the large
      // updates' SSD reads, holding up the device (a 1B GPT with its
      // states on the SSD: 18 such waits of about 60 ms a step).
      llvm::MapVector<Type, uint64_t> allOwn;
      for (Candidate *c : chosen)
        if (Type type = landingType(c))
          allOwn[type] += artifact::pagePadded(storageBytes(type));
      SmallVector<std::pair<uint64_t, Type>> cheapest;
      for (auto [type, bytes] : allOwn)
        cheapest.push_back({bytes, type});
      std::stable_sort(
          cheapest.begin(), cheapest.end(),
          [](const auto &a, const auto &b) { return a.first < b.first; });
      for (auto [bytes, type] : cheapest) {
        own.insert(type);
        if (!fits(least)) {
          own.erase(type);
          break;
        }
      }
    }
    // A job runs where its last update stood; it overlaps the backward
    // pass when device kernels of the backward pass follow that point.
    SmallVector<exec::KernelOp> jobAt(jobOf.empty() ? 0 : jobOf.back() + 1);
    for (auto [c, job] : llvm::zip(chosen, jobOf))
      jobAt[job] = c->update;
    unsigned overlapping = 0, lateScale = 0, speculating = 0;
    for (auto [c, job] : llvm::zip(chosen, jobOf)) {
      Operation *runs = c->speculateAfter ? c->speculateAfter : jobAt[job];
      c->overlaps = lastBackward && runs->isBeforeInBlock(lastBackward);
      speculating += c->speculateAfter != nullptr;
      Operation *scale = c->scale >= 0
                             ? c->update.getInputs()[c->scale].getDefiningOp()
                             : nullptr;
      c->lateScale =
          scale && lastBackward && lastBackward->isBeforeInBlock(scale);
      overlapping += c->overlaps;
      lateScale += !c->overlaps && c->lateScale;
    }
    SmallVector<exec::KernelOp> moved =
        rewrite(body, chosen, jobOf, jobAt, least, own);
    report(func, moved, jobAt.size(), overlapping, lateScale, speculating,
           stayed, costlier, candidates.size());
    if (overHostKeeps)
      func->emitRemark() << overHostKeeps << " CPU update"
                         << (overHostKeeps == 1 ? "" : "s")
                         << " wait for the gradient norm instead of "
                            "speculating: the kept values would take host "
                            "memory past --cpu-mem";
    if (planned)
      func->emitRemark() << planned << " update" << (planned == 1 ? "" : "s")
                         << " stay on the device: the tier planner predicts "
                            "the step shorter with them there";
    if (overHost)
      func->emitRemark() << overHost << " update" << (overHost == 1 ? "" : "s")
                         << " stay on the device: their gradients would take "
                            "host memory past --cpu-mem";
  }

  /// Marks the chosen updates that run speculatively (see
  /// artifact::Speculation): those whose scale is computed after the
  /// backward pass (exact clipping), not over accumulated micro-batches,
  /// whose gradient and stored tensors are final before that. Each runs
  /// right after the last op its gradient or its stored tensors wait for,
  /// as if the step did not clip, keeping beside each tensor it writes a
  /// copy of its old value (in the tensor's tier); the update itself stays
  /// where it stood and redoes the work from the kept values when the
  /// step clipped. Its gradient then keeps a landing buffer of its own
  /// until the redo. `host` counts the host tensors, within the budget.
  void chooseSpeculation(Block &body, ArrayRef<Candidate *> chosen,
                         Operation *lastBackward, uint64_t &host,
                         unsigned &overHost) {
    // Which updates could speculate at all, whatever the program around
    // them: a plain SGD, momentum or AdamW step scaled by a factor (the
    // clipping coefficient), not over accumulated micro-batches, not
    // sharded.
    auto eligible = [](const Candidate *c) {
      exec::KernelOp u = c->update;
      using artifact::Kernel;
      // A sharded update's shard is a fresh copy each step: its
      // speculative run would need the copy first (not yet).
      return !c->accumulated && c->scale >= 0 && !c->shard &&
             c->deviceShards.empty() &&
             (u.isKernel(Kernel::UpdateSgd) ||
              u.isKernel(Kernel::UpdateMomentum) ||
              u.isKernel(Kernel::UpdateAdamW)) &&
             (u.getInts().empty() || u.getInts()[0] == 1);
    };
    // Without one (no clipping, say) the walk below is not made: the
    // planner offloads every placement it scores.
    if (llvm::none_of(chosen, eligible))
      return;
    // One pass: the last op (other than the chosen updates' own fetches,
    // write-backs and updates) touching each stored tensor, and the last
    // writing each value in place.
    llvm::DenseSet<Operation *> own;
    for (Candidate *c : chosen) {
      own.insert(c->update);
      for (Fetched &f : c->fetched) {
        own.insert(f.copy);
        own.insert(f.assign);
      }
    }
    llvm::DenseMap<Operation *, Operation *> lastTouch;
    llvm::DenseMap<Value, Operation *> lastWrite;
    for (Operation &op : body) {
      if (own.contains(&op))
        continue;
      for (Value v : op.getOperands())
        if (Operation *root = storedRoot(v))
          lastTouch[root] = &op;
      if (auto k = dyn_cast<exec::KernelOp>(op))
        for (unsigned i : writtenInputs(k))
          lastWrite[k.getInputs()[i]] = &op;
    }
    for (Candidate *c : chosen) {
      exec::KernelOp u = c->update;
      if (!eligible(c))
        continue;
      Operation *scale = u.getInputs()[c->scale].getDefiningOp();
      if (!scale || !lastBackward || !lastBackward->isBeforeInBlock(scale))
        continue; // Its scale is known before the backward pass ends.
      Value grad = u.getInputs()[c->gradient];
      Operation *after = grad.getDefiningOp();
      if (!after)
        continue;
      auto later = [&](Operation *op) {
        if (op && after->isBeforeInBlock(op))
          after = op;
      };
      later(lastWrite.lookup(grad));
      // Its gradient's own landing buffer (it leaves the pools, which then
      // make no more buffers than counted) and the keeps.
      uint64_t keeps = artifact::pagePadded(
          storageBytes(u.getInputs()[c->gradient].getType()));
      for (Fetched &f : c->fetched) {
        later(lastTouch.lookup(storedRoot(f.stored)));
        if (tierOf(f.stored) == exec::Tier::Host)
          keeps += artifact::pagePadded(storageBytes(f.stored.getType()));
      }
      if (!after->isBeforeInBlock(u) || !after->isBeforeInBlock(lastBackward))
        continue; // Nothing to overlap.
      if (hostBudget && host + keeps > hostBudget) {
        ++overHost;
        continue;
      }
      host += keeps;
      c->speculateAfter = after;
    }
  }

  /// The CPU job of each chosen update: consecutive updates share one
  /// until their bytes reach the threshold, so small tensors (biases,
  /// norms) do not pay a hand-off each. An update joins the job of the
  /// ones before it only when nothing between them touches their tensors:
  /// they then run later, where the job's last update stood.
  SmallVector<unsigned> group(ArrayRef<Candidate *> chosen,
                              const MachineProfile &m) {
    double minBytes =
        groupBytes >= 0 ? static_cast<double>(groupBytes) : cpuJobMinBytes(m);
    SmallVector<unsigned> jobOf;
    unsigned job = 0;
    double bytes = 0;
    llvm::DenseSet<Value> stored;
    llvm::DenseSet<Operation *> own;
    for (Candidate *c : chosen) {
      if (!jobOf.empty() &&
          (bytes >= minBytes || touchedBetween(chosen[jobOf.size() - 1]->update,
                                               c->update, stored, own))) {
        ++job;
        bytes = 0;
        stored.clear();
        own.clear();
      }
      jobOf.push_back(job);
      bytes += cpuUpdateBytes(c->update);
      own.insert(c->update);
      for (auto [i, v] : c->deviceShards)
        stored.insert(v);
      for (Fetched &f : c->fetched) {
        stored.insert(f.stored);
        own.insert(f.copy);
        own.insert(f.assign);
      }
    }
    return jobOf;
  }

  /// Whether an operation strictly between `from` and `to`, other than
  /// the job's own fetches, updates and write-backs, uses a tensor in
  /// `stored`.
  static bool touchedBetween(Operation *from, Operation *to,
                             const llvm::DenseSet<Value> &stored,
                             const llvm::DenseSet<Operation *> &own) {
    for (Operation *op = from->getNextNode(); op && op != to;
         op = op->getNextNode())
      if (!own.contains(op) && llvm::any_of(op->getOperands(), [&](Value v) {
            return stored.contains(v);
          }))
        return true;
    return false;
  }

  /// Stores each chosen update's gradient (and each scale, once) to host
  /// memory where the update stood, in pools of at least `least` buffers
  /// per tensor type (one per update for the types in `own`), and runs the
  /// updates on the stored tensors, a job's together where its last update
  /// stood.
  SmallVector<exec::KernelOp> rewrite(Block &body, ArrayRef<Candidate *> chosen,
                                      ArrayRef<unsigned> jobOf,
                                      ArrayRef<exec::KernelOp> jobAt,
                                      size_t least,
                                      const llvm::DenseSet<Type> &own) {
    auto hostSpace = [&](Value of, const std::string &name) {
      OpBuilder top(&body, body.begin());
      return top
          .create<exec::SwapSpaceOp>(
              of.getLoc(), of.getType(), top.getStringAttr(name),
              exec::TierAttr::get(top.getContext(), exec::Tier::Host),
              IntegerAttr())
          .getResult();
    };
    llvm::DenseMap<Value, Value> scaleSpace;
    // Gradients land in pooled host buffers per tensor type (planLanding),
    // reused by later jobs where the host budget holds fewer than one per
    // update: the store into a reused buffer waits for the CPU job that
    // last read it (a derived wait).
    Landing land = planLanding(chosen, jobOf, least, own);
    SmallVector<Value> buffers;
    landingCount = 0;
    shardCount = 0;
    // The speculative updates' gradient stores after each op, in turn (the
    // last one), and then their updates.
    llvm::DenseMap<Operation *, Operation *> storesAfter;
    SmallVector<SmallVector<Value>> operandsOf;
    for (auto [i, c] : llvm::enumerate(chosen)) {
      exec::KernelOp u = c->update;
      OpBuilder b(u);
      SmallVector<Value> operands(u.getInputs().begin(), u.getInputs().end());
      for (Fetched &f : c->fetched)
        operands[f.input] = f.stored;
      // This rank's shard of the parameter (and of its low-precision
      // copy), to host memory beside its gradient (its own buffer: it is
      // read again by the fetch that the all-gather reads, or that is
      // written back).
      auto toHost = [&](unsigned i) {
        Value ws = operands[i];
        Value wh =
            hostSpace(ws, "cpu-update.shard." + std::to_string(shardCount++));
        createTransfer(b, u.getLoc(), artifact::Kernel::Store, {}, {wh, ws});
        operands[i] = wh;
      };
      if (c->shard)
        toHost(0);
      for (auto [i, v] : c->deviceShards)
        toHost(i);
      if (c->speculateAfter) {
        // Its own landing buffer, stored as soon as the gradient is final
        // and read again by the redo.
        Value grad = operands[c->gradient];
        Value gs = hostSpace(grad, "cpu-update.grad." +
                                       std::to_string(landingCount++));
        Operation *&at = storesAfter[c->speculateAfter];
        OpBuilder sb(body.getParentOp()->getContext());
        sb.setInsertionPointAfter(at ? at : c->speculateAfter);
        at = createTransfer(sb, u.getLoc(), artifact::Kernel::Store, {},
                            {gs, grad});
        operands[c->gradient] = gs;
      } else if (int id = land.buffer[i]; id >= 0) {
        Value grad = operands[c->gradient];
        if (static_cast<size_t>(id) == buffers.size())
          buffers.push_back(hostSpace(
              grad, "cpu-update.grad." + std::to_string(landingCount++)));
        Value gs = buffers[id];
        createTransfer(b, u.getLoc(), artifact::Kernel::Store, {}, {gs, grad});
        operands[c->gradient] = gs;
      }
      if (c->scale >= 0) {
        Value scale = operands[c->scale];
        Value &ss = scaleSpace[scale];
        if (!ss) {
          ss = hostSpace(scale,
                         "cpu-update.scale" +
                             (scaleSpace.size() > 1
                                  ? "." + std::to_string(scaleSpace.size())
                                  : std::string()));
          createTransfer(b, u.getLoc(), artifact::Kernel::Store, {},
                         {ss, scale});
        }
        operands[c->scale] = ss;
      }
      operandsOf.push_back(std::move(operands));
    }
    // The updates, in program order, before the original update of their
    // job's last: after every store of the job.
    SmallVector<exec::KernelOp> moved;
    for (auto [c, job, operands] : llvm::zip(chosen, jobOf, operandsOf)) {
      exec::KernelOp u = c->update;
      OpBuilder b(jobAt[job]);
      auto m = b.create<exec::KernelOp>(u.getLoc(), TypeRange(), u.getKernel(),
                                        operands, u.getInts(), u.getFloats());
      // Keep the markers (strata.backward, ...); placement attributes are
      // derived again later.
      for (NamedAttribute a : u->getDiscardableAttrs())
        m->setAttr(a.getName(), a.getValue());
      moved.push_back(m);
    }
    // A sharded update's all-gather reads its shard back from host memory
    // once the CPU job has run: after the job's last update.
    SmallVector<exec::KernelOp> lastOfJob(jobAt.size());
    for (auto [job, m] : llvm::zip(jobOf, moved))
      lastOfJob[job] = m;
    llvm::DenseMap<Operation *, Operation *> gathersAfter;
    for (auto [c, job, m] : llvm::zip(chosen, jobOf, moved)) {
      if (!c->shard && c->deviceShards.empty())
        continue;
      Operation *&at = gathersAfter[lastOfJob[job]];
      OpBuilder gb(body.getParentOp()->getContext());
      gb.setInsertionPointAfter(at ? at : lastOfJob[job].getOperation());
      exec::KernelOp update = m; // (A lambda cannot capture a binding.)
      auto fetchBack = [&](unsigned i) {
        Value from = update.getInputs()[i];
        return createTransfer(gb, update.getLoc(), artifact::Kernel::Copy,
                              {from.getType()}, {from})
            ->getResult(0);
      };
      if (!c->shard) {
        // The stored shards take the updated values.
        for (auto [i, v] : c->deviceShards)
          at = createTransfer(gb, update.getLoc(), artifact::Kernel::Assign, {},
                              {v, fetchBack(i)});
        continue;
      }
      Value back = fetchBack(0);
      c->gather->moveAfter(back.getDefiningOp());
      c->gather.getInputsMutable()[1].set(back);
      at = c->gather;
    }
    for (Candidate *c : chosen) {
      c->update.erase();
      for (Fetched &f : c->fetched) {
        f.assign.erase();
        if (f.copy->use_empty())
          f.copy.erase();
      }
    }
    unsigned keepCount = 0;
    llvm::DenseMap<Operation *, Operation *> updatesAfter;
    for (auto [c, m] : llvm::zip(chosen, moved)) {
      if (!c->speculateAfter)
        continue;
      // A keep beside each tensor the update writes, in its tier.
      SmallVector<Value> keeps;
      for (unsigned i : writtenInputs(m)) {
        Value v = m.getInputs()[i];
        OpBuilder top(&body, body.begin());
        keeps.push_back(top.create<exec::SwapSpaceOp>(
                               v.getLoc(), v.getType(),
                               top.getStringAttr("speculation.keep." +
                                                 std::to_string(keepCount++)),
                               exec::TierAttr::get(top.getContext(), tierOf(v)),
                               IntegerAttr())
                            .getResult());
      }
      SmallVector<int64_t> ints(m.getInts().begin(), m.getInts().end());
      ints.resize(std::max<size_t>(ints.size(), 3), 0);
      ints[0] = 1;
      artifact::UpdateOperands at = updateOperandsOf(m);
      // The speculative update: no scale (1), after the gradient's store.
      SmallVector<Value> operands;
      for (auto [i, v] : llvm::enumerate(m.getInputs()))
        if (static_cast<int>(i) != at.scale)
          operands.push_back(v);
      operands.append(keeps.begin(), keeps.end());
      ints[2] = static_cast<int64_t>(artifact::Speculation::Speculate);
      Operation *&after = updatesAfter[c->speculateAfter];
      OpBuilder b(m);
      b.setInsertionPointAfter(after ? after : storesAfter[c->speculateAfter]);
      auto first =
          b.create<exec::KernelOp>(m.getLoc(), TypeRange(), m.getKernel(),
                                   operands, ints, m.getFloats());
      for (NamedAttribute a : m->getDiscardableAttrs())
        first->setAttr(a.getName(), a.getValue());
      after = first;
      // The update where it stood becomes the redo.
      ints[2] = static_cast<int64_t>(artifact::Speculation::Redo);
      m.getInputsMutable().append(keeps);
      m.setInts(ints);
    }
    return moved;
  }

  void report(func::FuncOp func, ArrayRef<exec::KernelOp> moved, size_t jobs,
              unsigned overlapping, unsigned lateScale, unsigned speculating,
              const Reasons &stayed, unsigned costlier, size_t total) {
    OpBuilder b(func.getContext());
    setDeclaredAttr<exec::ExecDialect::OffloadAttrHelper>(
        func,
        b.getDictionaryAttr(
            {b.getNamedAttr("cpu_updates", b.getI64IntegerAttr(moved.size())),
             b.getNamedAttr("cpu_jobs", b.getI64IntegerAttr(jobs)),
             b.getNamedAttr("overlapping_backward",
                            b.getI64IntegerAttr(overlapping)),
             b.getNamedAttr("speculative", b.getI64IntegerAttr(speculating)),
             b.getNamedAttr("device_updates",
                            b.getI64IntegerAttr(total - moved.size()))}));
    if (!moved.empty()) {
      auto diag = moved.front()->emitRemark()
                  << moved.size() << " of " << total
                  << " updates run on the CPU; " << overlapping
                  << " overlap the backward pass";
      if (speculating)
        diag << " (" << speculating
             << " speculatively: they run as if the step did not clip, "
                "keeping the old values, and are redone after it from "
                "those when it clips)";
      unsigned last = moved.size() - overlapping - lateScale;
      if (lateScale)
        diag << "; " << lateScale
             << " start only after it: their scale depends on every "
                "gradient of the step (exact clipping or the loss-scale "
                "overflow check; "
             << (speculate ? "speculating, they would overlap nothing: "
                             "their gradients are final at its end, or "
                             "their kind does not speculate"
                           : "--clip-mode previous-step lets them overlap, "
                             "and, without loss scaling, "
                             "--speculate-updates")
             << ")";
      if (last)
        diag << "; " << last
             << " after it: their gradients are final only when it ends";
      if (jobs < moved.size())
        diag << "; small ones grouped with the next: " << jobs << " CPU job"
             << (jobs == 1 ? "" : "s");
    }
    if (costlier)
      func->emitRemark() << costlier << " update" << (costlier == 1 ? "" : "s")
                         << " stay on the device: the cost model predicts "
                            "the device path faster on this machine";
    // Asked for explicitly (mode cpu): say why each kind of update stayed.
    if (mode != "cpu")
      return;
    for (const Reason &r : stayed)
      r.first->emitRemark() << r.count << " update" << (r.count == 1 ? "" : "s")
                            << " stay on the device: " << r.why;
  }
};

struct OffloadOptimizerPass
    : public strata::impl::OffloadOptimizerPassBase<OffloadOptimizerPass> {
  using OffloadOptimizerPassBase::OffloadOptimizerPassBase;

  void runOnOperation() override {
    if (placeUpdates != "device" && placeUpdates != "cpu" &&
        placeUpdates != "auto") {
      getOperation().emitError() << "--place-updates: '" << placeUpdates
                                 << "' is not one of device, cpu, auto";
      return signalPassFailure();
    }
    MachineProfile machine;
    if (failed(loadProfile(getOperation(), profile, machine)))
      return signalPassFailure();
    for (auto func : getOperation().getOps<func::FuncOp>())
      offloadOptimizerUpdates(func, placeUpdates, machine, cpuJobBytes, cpuMem,
                              speculateUpdates);
  }
};

} // namespace

void strata::offloadOptimizerUpdates(func::FuncOp func, StringRef mode,
                                     const MachineProfile &m,
                                     int64_t groupBytes, uint64_t hostBudget,
                                     bool speculate) {
  if (mode != "cpu" && mode != "auto")
    return;
  Offloader o;
  o.mode = mode.str();
  o.groupBytes = groupBytes;
  o.hostBudget = hostBudget;
  o.speculate = speculate;
  o.offload(func, m);
}
