//===- PlacementBound.cpp - No placement can be predicted faster ----------===//
//
// A lower bound on the predicted step of every placement that meets the
// budgets, from the program before placement: the planner's result is
// reported against it, so the gap its search leaves is known, not guessed.
//
// Under the cost model the step is at least each queue's busy time:
// * compute: every kernel but the updates (an update, fused or not, may
//   move to the CPU; the rest of the optimizer step, the gradients' norm,
//   stays on the device; recomputation only adds) and the collectives;
// * the collectives (data parallel): one after another on their own
//   queue;
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
// * the host link both ways (a GPU): the replay (PredictTime.cpp) runs
//   the two copy engines' transfers (host copies, and SSD transfers,
//   which hold their direction's engine) s = hostDuplexSlowdown times
//   slower while both engines are busy, whichever was issued first (or
//   slower still: the drives' duplex slowdown, where it is the larger).
//   With a and b each direction's work at its own rate, o the time both
//   engines are busy and U the time either is: each direction does at
//   most o / s of its work during o, so its busy time is at least its
//   work plus o (1 - 1/s), and U, the two busy times less o, is at least
//   a + b + o (1 - 2/s) and at least b + o (1 - 1/s). For s <= 2 the
//   first falls as o grows and the second rises; at o = s a they meet,
//   so U >= b + (s - 1) a whatever o is, and likewise U >= a + (s - 1) b.
//   (For s > 2, U >= a + b from the first: the rows use min(s - 1, 1).)
//   Each is increasing in a and b, so the least work of each direction
//   gives a bound;
// * SSD: what the device and the host budget cannot hold is read every
//   time it is fetched or updated (the least-read tensors there) and, but
//   for frozen tensors and constants, written back.
// Each is at the link's best rate, without latencies.
//
// On a GPU those rows price memory only through the stored tensors: a
// plan could keep every activation and still meet them. The memory
// relaxation (with GLPK) prices all of it. Its variables are fractions:
// of each stored tensor kept on the device (k), off it and read there
// (d), or off it with its update on the CPU (c, one per update, shared by
// the tensors the update reads); and of each activation (a forward
// kernel's result the backward pass reads) kept, swapped or recomputed.
// Every placement is one choice of 0s and 1s, so the programme's least T
// is at most its step, given that each of these holds for every
// placement within the budgets:
// * device memory: the parameter region holds the tensors kept, the arena
//   at least the largest kernel's operands and results (as above); and
//   between the forward and the backward pass every activation kept is
//   live, beside the parameter region. So sum(k * bytes) + arena and
//   sum(k * bytes) + sum(kept activation bytes) are within the budget;
// * compute: the passes' kernels, an update on the device where it is not
//   on the CPU, and a recomputation at least the kernel that made the
//   activation (shared out among that kernel's activations);
// * host->device: a tensor off the device is fetched for each pass kernel
//   that reads it and, updated on the device, for the update (unless the
//   update only writes it); a swapped activation comes back once;
// * device->host: a tensor updated in place on the device but kept off it
//   is written back; an update on the CPU gets its gradient; a swapped
//   activation goes out once (through the host link to the SSD too);
// * the CPU: each CPU update's bytes at the CPU optimizer's rate;
// * the host link both ways: the two rows above, from the host->device
//   and device->host rows (and the same before and after the boundary,
//   where the argument holds over [0, B] and [B, T] alike);
// * before and after the boundary: B, when the first backward kernel
//   starts, is at least the forward pass's compute (the device runs its
//   kernels in program order), and each link's work that must be done
//   before it is at most B: the fetches for the forward kernels' reads,
//   and a swapped activation's store (until it is done the activation is
//   on the device). What waits for the backward pass takes at most T - B
//   on each resource: an update whose gradient a backward kernel makes,
//   on the CPU with the gradient's transfer, on the device with its
//   write-back; a swapped activation's return (a copy fetched before B
//   would be on the device at the boundary); and a late update's fetch of
//   a tensor off the device, unless it was fetched before B (its own
//   column, which then counts in the memory between the passes).
// T is at least each, and at least every row above. Host capacity and the
// order in which things happen are left out (the programme only gets
// looser).
//
// Without a GPU (the CPU backend) a second programme prices the same
// choices on that backend's queues (relaxHostOnly). The device is a
// budgeted arena and parameter region in host memory; a stored tensor off
// it lives in host memory or on the SSD, so it has a share of each: in
// host memory and read there (h), on the SSD and read there (s), or off
// the device with its update on the CPU (c, as above), of which a share
// on the SSD (cs <= c). For every placement within the budgets:
// * the compute thread runs the kernels and the host copies one after
//   another (PredictTime.cpp): the passes' kernels, the updates on the
//   device and the recomputations as above, and a copy (at the copy rate)
//   for each pass kernel that reads a tensor in host memory, for its
//   update on the device, and back for that update's writes; a swapped
//   activation's store and its return, when it is swapped to host memory;
// * the SSD's reads: each read by a pass kernel or an update (on either
//   side) of a tensor there, and a swapped activation's return from it;
//   its writes: each write by an update of a tensor there, and the swap's
//   store; each the time of one transfer of that size (the SSD store's
//   latency and its rate at that size: PredictTime.cpp moves each tensor
//   in one transfer, a CPU job each of its operands); and the two
//   directions together, which share the drives (each slower while both
//   run, the profile's ssd_duplex_*_slowdown: two rows, argued where they
//   are made);
// * host memory: the tensors there, sum((h + c - cs) * bytes), within the
//   host budget (a placement's host region holds at least them); device
//   memory as above;
// * B is at least the forward kernels and every copy for the forward
//   kernels' reads (the thread runs them before the first backward
//   kernel), and at least the SSD reads of the forward kernels (each ends
//   before its kernel starts); what the thread runs from the first
//   backward kernel on, the backward pass's kernels and the updates on the
//   device whose gradients it makes, takes at most T - B; and so does the
//   SSD work of the CPU updates whose gradients it makes (their jobs'
//   staging reads and write-backs, on the drives shared as above).
// Gradients' landing copies and the rest of the SSD's order are left out.
// --planner-check compares the bound with every placement it scores, and
// with every layer placement of a small instance.
//
//===----------------------------------------------------------------------===//

#include "passes/tiers/TierPlanner.h"

#include "dialects/Strata/StrataDialect.h"
#include "passes/analysis/ArenaRanges.h"
#include "passes/analysis/CostModel.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#ifdef STRATA_HAVE_GLPK
#include "passes/tiers/GlpkMatrix.h"
#endif

using namespace mlir;

namespace strata::tiers {

namespace {

/// The optimizer step's kernels and every update (fused updates run inside
/// the backward pass): they may run on the CPU instead.
bool isOptimizerKernel(exec::KernelOp k) {
  return markers::isOptimizer(k) || k.isUpdate();
}

/// The share of one direction's link work that counts on the other's
/// row of the link both ways (the top of the file): s - 1, at most 1.
double linkOther(const MachineProfile &m) {
  return std::clamp(hostDuplexSlowdown(m) - 1, 0.0, 1.0);
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
  return std::max({compute, toDevice, toHost, updates, ssdRead, ssdWrite, comm,
                   link, relaxed});
}

#ifdef STRATA_HAVE_GLPK
namespace {

/// A stored tensor as the relaxations price it: the passes' reads (the
/// forward pass's among them), its update (-1: none), the reads and
/// writes by that update.
struct Tensor {
  double bytes = 0, reads = 0, forwardReads = 0, updateReads = 0,
         updateWrites = 0;
  int update = -1, updaters = 0;
  /// A trainable parameter, an optimizer state or a low-precision copy:
  /// what a CPU update needs off the device.
  bool updatable = false;
};
struct Update {
  double device = 0, cpu = 0, gradient = 0;
  /// Its gradient comes from a kernel of the backward pass.
  bool late = false;
};
/// What both relaxations read off the program before placement.
struct Instance {
  std::vector<Tensor> tensors;
  std::vector<Update> updates;
  /// Activations (what a forward kernel makes and the backward pass
  /// reads): bytes and the share of their kernel's time.
  std::vector<std::pair<double, double>> acts;
  /// The forward pass's compute: the backward pass starts no earlier.
  double forward = 0;
  /// The passes' kernels from the first backward kernel on (the device
  /// runs them after it starts).
  double backward = 0;
};

/// Solves `lp` (a relaxation, T its objective) and sets `b.relaxed` a hair
/// under its optimum (the simplex's tolerances); false when it has none.
bool solved(glp_prob *lp, PlacementBound &b) {
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  if (glp_simplex(lp, &parm) != 0 || glp_get_status(lp) != GLP_OPT)
    return false;
  b.relaxed = std::max(0.0, glp_get_obj_val(lp) * (1 - 1e-6));
  return true;
}

/// The tensors, updates and activations of `func` under `m`, with the
/// passes' reads of each stored tensor `passReads`.
Instance collect(func::FuncOp func, const MachineProfile &m,
                 const llvm::DenseMap<Operation *, double> &passReads) {
  Block &body = func.getBody().front();
  double cpuRate = m.cpuUpdateGBs > 0 ? m.cpuUpdateGBs * 1e9 : 0;
  Instance in;
  std::vector<Tensor> &tensors = in.tensors;
  llvm::DenseMap<Operation *, size_t> tensorOf;
  for (auto p : body.getOps<exec::ParamOp>()) {
    if (p->use_empty())
      continue;
    tensorOf[p] = tensors.size();
    Tensor t;
    t.bytes = static_cast<double>(storageBytes(p.getType()));
    t.reads = passReads.lookup(p);
    t.updatable = p.getTrainable() || p.getState() || p.getCopyOf();
    tensors.push_back(t);
  }
  std::vector<Update> &updates = in.updates;
  std::vector<std::pair<double, double>> &acts = in.acts;
  Operation *firstBackward = firstBackwardKernel(body);
  double &forward = in.forward;
  for (auto k : body.getOps<exec::KernelOp>()) {
    if (k.isUpdate()) {
      int u = static_cast<int>(updates.size());
      Update up;
      up.device = kernelSeconds(k, m);
      up.cpu = cpuRate > 0 ? cpuUpdateBytes(k) / cpuRate
                           : std::numeric_limits<double>::infinity();
      std::vector<artifact::InputUse> uses = inputUses(k);
      artifact::UpdateOperands at = updateOperandsOf(k);
      for (auto [i, v] : llvm::enumerate(k.getInputs())) {
        auto it = tensorOf.find(viewRoot(v).getDefiningOp());
        if (it == tensorOf.end()) {
          if (i == 1) {
            up.gradient += storageBytes(v.getType());
            Operation *def = viewRoot(v).getDefiningOp();
            up.late = def && markers::isBackward(def);
          }
          continue;
        }
        Tensor &t = tensors[it->second];
        t.update = u;
        ++t.updaters;
        bool low = at.low >= 0 && static_cast<int64_t>(i) == at.low;
        if (i < uses.size()) {
          t.updateReads += uses[i].read && !low ? 1 : 0;
          t.updateWrites += uses[i].written ? 1 : 0;
        }
      }
      updates.push_back(up);
      continue;
    }
    // The device runs the rest in program order (the optimizer step's
    // kernels but the updates too: the gradients' norm stays there).
    if (k.isTransferKernel() || k.isCollective() || !firstBackward)
      continue;
    if (markers::isBackward(k) || !k->isBeforeInBlock(firstBackward)) {
      in.backward += kernelSeconds(k, m);
      continue;
    }
    forward += kernelSeconds(k, m);
    if (markers::isOptimizer(k))
      continue;
    llvm::DenseSet<Operation *> distinct;
    for (Value v : k->getOperands()) {
      Operation *def = viewRoot(v).getDefiningOp();
      auto it = tensorOf.find(def);
      if (it != tensorOf.end() && distinct.insert(def).second)
        tensors[it->second].forwardReads += 1;
    }
  }
  // The swap candidates the forward pass makes, each with its share of
  // its kernel's time.
  SmallVector<Value> candidates = swappable(body);
  llvm::DenseMap<Operation *, unsigned> perKernel;
  for (Value v : candidates)
    ++perKernel[v.getDefiningOp()];
  for (Value v : candidates) {
    auto k = cast<exec::KernelOp>(v.getDefiningOp());
    if (firstBackward && k->isBeforeInBlock(firstBackward))
      acts.push_back({storageBytes(v.getType()),
                      kernelSeconds(k, m) / perKernel.lookup(k)});
  }
  // What several updates read (a loss scale, a step count) or what is not
  // the update's own tensor is priced as read by none and ties no update
  // to the CPU: the programme only gets looser.
  for (Tensor &t : tensors)
    if (t.update >= 0 && (t.updaters > 1 || !t.updatable)) {
      t.update = -1;
      t.updateReads = t.updateWrites = 0;
    }
  return in;
}

/// The memory relaxation (see the top of the file) for `func` under `m`,
/// the device budget `gpuMem` and the largest kernel working set
/// `deviceArena`, with the passes' reads of each stored tensor
/// `passReads` and the compute of the passes `passCompute`. Fills `b`'s
/// relaxed and relaxation, or leaves them 0 when the programme is not
/// solved.
void relax(func::FuncOp func, const MachineProfile &m, double gpuMem,
           double deviceArena, double passCompute,
           const llvm::DenseMap<Operation *, double> &passReads,
           PlacementBound &b) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  double h2d = hostLinkGBs(true, m) * 1e9, d2h = hostLinkGBs(false, m) * 1e9;
  Instance in = collect(func, m, passReads);
  std::vector<Tensor> &tensors = in.tensors;
  std::vector<Update> &updates = in.updates;
  std::vector<std::pair<double, double>> &acts = in.acts;
  double forward = in.forward;
  glp_prob *lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  // Rows: compute, host->device, device->host and CPU (each at most T);
  // each link's work before the backward pass starts (at most B, a column
  // at least the forward pass's compute) and each resource's after it (at
  // most T - B); the two memory rows; then one per tensor and one per
  // activation (fractions summing to 1).
  enum {
    kCompute = 1,
    kToDevice,
    kToHost,
    kCpu,
    kEarlyToDevice,
    kEarlyToHost,
    kLateToDevice,
    kLateToHost,
    kLateCpu,
    kParams,
    kBoundary,
    // The link both ways, as a whole and before and after the boundary:
    // each direction's row plus (s - 1) times the other's (the top of
    // the file), two rows each.
    kLink,
    kLinkToo,
    kEarlyLink,
    kEarlyLinkToo,
    kLateLink,
    kLateLinkToo
  };
  int tensorRow0 = kLateLinkToo + 1;
  int actRow0 = tensorRow0 + static_cast<int>(tensors.size());
  glp_add_rows(lp, actRow0 - 1 + static_cast<int>(acts.size()));
  double allDevice = 0;
  for (const Update &u : updates)
    allDevice += u.device;
  glp_set_row_bnds(lp, kCompute, GLP_UP, 0, -(passCompute + allDevice));
  for (int r : {kToDevice, kToHost, kCpu})
    glp_set_row_bnds(lp, r, GLP_UP, 0, 0);
  for (int r :
       {kEarlyToDevice, kEarlyToHost, kLateToDevice, kLateToHost, kLateCpu,
        kLink, kLinkToo, kEarlyLink, kEarlyLinkToo, kLateLink, kLateLinkToo})
    glp_set_row_bnds(lp, r, GLP_UP, 0, 0);
  glp_set_row_bnds(lp, kParams, GLP_UP, 0,
                   std::max(0.0, gpuMem - deviceArena) / kGiB);
  glp_set_row_bnds(lp, kBoundary, GLP_UP, 0, gpuMem / kGiB);
  for (int r = tensorRow0; r <= glp_get_num_rows(lp); ++r)
    glp_set_row_bnds(lp, r, GLP_FX, 1, 1);
  GlpkMatrix matrix;
  // A column's seconds on one direction of the link count on the rows of
  // both directions together too: in full on its own direction's, (s - 1)
  // times on the other's.
  // Per span (the step, before and after the boundary): its rows of each
  // direction and its two rows of both, the first led by device->host.
  struct LinkRows {
    int toDevice, toHost, link, linkToo;
  };
  constexpr LinkRows kLinkRows[] = {
      {kToDevice, kToHost, kLink, kLinkToo},
      {kEarlyToDevice, kEarlyToHost, kEarlyLink, kEarlyLinkToo},
      {kLateToDevice, kLateToHost, kLateLink, kLateLinkToo}};
  double other = linkOther(m);
  auto entry = [&](int row, int col, double value) {
    matrix.add(row, col, value);
    for (const LinkRows &r : kLinkRows) {
      if (row == r.toHost || row == r.toDevice) {
        bool out = row == r.toHost;
        matrix.add(r.link, col, out ? value : other * value);
        matrix.add(r.linkToo, col, out ? other * value : value);
      }
    }
  };
  auto column = [&](double lo, double hi) {
    int c = glp_add_cols(lp, 1);
    glp_set_col_bnds(lp, c, lo == hi ? GLP_FX : GLP_DB, lo, hi);
    return c;
  };
  // T and B go on the rows one by one (not through entry: a row of both
  // directions bounds their sum by T once).
  int T = glp_add_cols(lp, 1);
  glp_set_col_bnds(lp, T, GLP_LO, 0, 0);
  glp_set_obj_coef(lp, T, 1);
  for (int r : {kCompute, kToDevice, kToHost, kCpu, kLateToDevice, kLateToHost,
                kLateCpu, kLink, kLinkToo, kLateLink, kLateLinkToo})
    matrix.add(r, T, -1);
  int B = glp_add_cols(lp, 1);
  glp_set_col_bnds(lp, B, GLP_LO, forward, 0);
  for (int r : {kEarlyToDevice, kEarlyToHost, kEarlyLink, kEarlyLinkToo})
    matrix.add(r, B, -1);
  for (int r : {kLateToDevice, kLateToHost, kLateCpu, kLateLink, kLateLinkToo})
    matrix.add(r, B, 1);
  // The CPU columns, with what a CPU update moves and costs.
  std::vector<int> cpuCol(updates.size());
  for (auto [u, up] : llvm::enumerate(updates)) {
    bool possible = std::isfinite(up.cpu);
    cpuCol[u] = column(0, possible ? 1 : 0);
    entry(kCompute, cpuCol[u], -up.device);
    entry(kCpu, cpuCol[u], possible ? up.cpu : 0);
    entry(kToHost, cpuCol[u], up.gradient / d2h);
    if (up.late) {
      entry(kLateCpu, cpuCol[u], possible ? up.cpu : 0);
      entry(kLateToHost, cpuCol[u], up.gradient / d2h);
    }
  }
  // A tensor off the device that a late update reads is fetched for it
  // either before the backward pass starts, and is then on the device
  // between the passes, or after (one more column: fetched early).
  std::vector<int> keptCol(tensors.size()), fetchedCol(tensors.size()),
      earlyCol(tensors.size(), 0);
  for (auto [i, t] : llvm::enumerate(tensors)) {
    int row = tensorRow0 + static_cast<int>(i);
    bool late = t.update >= 0 && updates[t.update].late;
    keptCol[i] = column(0, 1);
    entry(row, keptCol[i], 1);
    entry(kParams, keptCol[i], t.bytes / kGiB);
    entry(kBoundary, keptCol[i], t.bytes / kGiB);
    fetchedCol[i] = column(0, 1);
    if (late && t.updateReads > 0)
      earlyCol[i] = column(0, 1);
    for (int c : {fetchedCol[i], earlyCol[i]}) {
      if (!c)
        continue;
      entry(row, c, 1);
      entry(kToDevice, c, t.bytes * (t.reads + t.updateReads) / h2d);
      entry(kEarlyToDevice, c, t.bytes * t.forwardReads / h2d);
      entry(kToHost, c, t.bytes * t.updateWrites / d2h);
      if (late)
        entry(kLateToHost, c, t.bytes * t.updateWrites / d2h);
    }
    if (earlyCol[i]) {
      entry(kBoundary, earlyCol[i], t.bytes / kGiB);
      entry(kLateToDevice, fetchedCol[i], t.bytes * t.updateReads / h2d);
    }
    if (t.update >= 0) {
      entry(row, cpuCol[t.update], 1);
      entry(kToDevice, cpuCol[t.update], t.bytes * t.reads / h2d);
      entry(kEarlyToDevice, cpuCol[t.update], t.bytes * t.forwardReads / h2d);
    }
  }
  std::vector<int> actCols(3 * acts.size());
  for (auto [i, a] : llvm::enumerate(acts)) {
    int row = actRow0 + static_cast<int>(i);
    auto [bytes, seconds] = a;
    int keep = column(0, 1), swap = column(0, 1), again = column(0, 1);
    actCols[3 * i] = keep;
    actCols[3 * i + 1] = swap;
    actCols[3 * i + 2] = again;
    for (int c : {keep, swap, again})
      entry(row, c, 1);
    entry(kBoundary, keep, bytes / kGiB);
    entry(kToDevice, swap, bytes / h2d);
    entry(kToHost, swap, bytes / d2h);
    entry(kEarlyToHost, swap, bytes / d2h);
    entry(kLateToDevice, swap, bytes / h2d);
    entry(kCompute, again, seconds);
  }
  matrix.load(lp);
  if (solved(lp, b)) {
    PlacementBound::Relaxation &r = b.relaxation;
    r.compute = passCompute + allDevice + glp_get_row_prim(lp, kCompute) +
                glp_get_col_prim(lp, T);
    r.toDevice = glp_get_row_prim(lp, kToDevice) + glp_get_col_prim(lp, T);
    r.toHost = glp_get_row_prim(lp, kToHost) + glp_get_col_prim(lp, T);
    r.cpu = glp_get_row_prim(lp, kCpu) + glp_get_col_prim(lp, T);
    r.link =
        std::max(glp_get_row_prim(lp, kLink), glp_get_row_prim(lp, kLinkToo)) +
        glp_get_col_prim(lp, T);
    for (auto [i, t] : llvm::enumerate(tensors)) {
      double c = t.update >= 0 ? glp_get_col_prim(lp, cpuCol[t.update]) : 0;
      r.cpuUpdated += c * t.bytes;
      r.fetched += glp_get_col_prim(lp, fetchedCol[i]) * t.bytes;
      if (earlyCol[i])
        r.fetched += glp_get_col_prim(lp, earlyCol[i]) * t.bytes;
    }
    for (auto [i, a] : llvm::enumerate(acts)) {
      r.swapped += glp_get_col_prim(lp, actCols[3 * i + 1]) * a.first;
      r.recomputed += glp_get_col_prim(lp, actCols[3 * i + 2]) * a.first;
    }
  }
  glp_delete_prob(lp);
}

/// The memory relaxation without a GPU (see the top of the file) for
/// `func` under `m`, the device budget `gpuMem` (the budgeted arena and
/// parameter region), the host budget `cpuMem` (0: none), an SSD tier when
/// `hasSsd`, and the largest kernel working set `deviceArena`. Fills `b`'s
/// relaxed and relaxation, or leaves them 0 when the programme is not
/// solved.
void relaxHostOnly(func::FuncOp func, const MachineProfile &m, double gpuMem,
                   double cpuMem, bool hasSsd, double deviceArena,
                   const llvm::DenseMap<Operation *, double> &passReads,
                   PlacementBound &b) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  // Host copies run on the compute thread, at the copy rate each way; a
  // tensor's SSD transfer takes what one transfer of its size does.
  double copyIn = hostLinkGBs(true, m) * 1e9,
         copyOut = hostLinkGBs(false, m) * 1e9;
  Instance in = collect(func, m, passReads);
  if (copyIn <= 0 || copyOut <= 0 ||
      (hasSsd && (ssdPeakGBs(true, m) <= 0 || ssdPeakGBs(false, m) <= 0)))
    return;
  auto ssdIn = [&](double bytes) { return ssdSeconds(bytes, true, m); };
  auto ssdOut = [&](double bytes) { return ssdSeconds(bytes, false, m); };
  glp_prob *lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  // Rows: the compute thread (kernels and host copies), SSD reads, SSD
  // writes, the drives both ways (two) and the CPU, each at most T; the
  // compute thread's work before the first backward kernel (at most B) and
  // its kernels after (at most T - B); the SSD reads of the forward pass
  // (at most B); the late CPU updates' SSD work (four rows as above, at
  // most T - B); device memory
  // (parameter region, and at the boundary), host memory; then one row
  // per tensor (its fractions summing to 1), one tying its share on the
  // SSD to its update's share on the CPU, and one per activation.
  enum {
    kThread = 1,
    kSsdRead,
    kSsdWrite,
    kSsdShared,
    kSsdSharedToo,
    kCpu,
    kEarlyThread,
    kLateThread,
    kEarlySsdRead,
    kLateSsdRead,
    kLateSsdWrite,
    kLateSsdShared,
    kLateSsdSharedToo,
    kParams,
    kBoundary,
    kHost
  };
  int tensorRow0 = kHost + 1;
  int tieRow0 = tensorRow0 + static_cast<int>(in.tensors.size());
  int actRow0 = tieRow0 + static_cast<int>(in.tensors.size());
  glp_add_rows(lp, actRow0 - 1 + static_cast<int>(in.acts.size()));
  double allDevice = 0, lateDevice = 0;
  for (const Update &u : in.updates) {
    allDevice += u.device;
    lateDevice += u.late ? u.device : 0;
  }
  glp_set_row_bnds(lp, kThread, GLP_UP, 0,
                   -(in.forward + in.backward + allDevice));
  for (int r : {kSsdRead, kSsdWrite, kSsdShared, kSsdSharedToo, kCpu,
                kEarlyThread, kEarlySsdRead, kLateSsdRead, kLateSsdWrite,
                kLateSsdShared, kLateSsdSharedToo})
    glp_set_row_bnds(lp, r, GLP_UP, 0, 0);
  glp_set_row_bnds(lp, kLateThread, GLP_UP, 0, -(in.backward + lateDevice));
  glp_set_row_bnds(lp, kParams, GLP_UP, 0,
                   std::max(0.0, gpuMem - deviceArena) / kGiB);
  glp_set_row_bnds(lp, kBoundary, GLP_UP, 0, gpuMem / kGiB);
  if (cpuMem > 0)
    glp_set_row_bnds(lp, kHost, GLP_UP, 0, cpuMem / kGiB);
  else
    glp_set_row_bnds(lp, kHost, GLP_FR, 0, 0);
  for (int r = tensorRow0; r < tieRow0; ++r)
    glp_set_row_bnds(lp, r, GLP_FX, 1, 1);
  for (int r = tieRow0; r < actRow0; ++r)
    glp_set_row_bnds(lp, r, GLP_UP, 0, 0);
  for (int r = actRow0; r <= glp_get_num_rows(lp); ++r)
    glp_set_row_bnds(lp, r, GLP_FX, 1, 1);
  GlpkMatrix matrix;
  auto column = [&](bool possible) {
    int c = glp_add_cols(lp, 1);
    glp_set_col_bnds(lp, c, possible ? GLP_DB : GLP_FX, 0, possible ? 1 : 0);
    return c;
  };
  int T = glp_add_cols(lp, 1);
  glp_set_col_bnds(lp, T, GLP_LO, 0, 0);
  glp_set_obj_coef(lp, T, 1);
  for (int r : {kThread, kSsdRead, kSsdWrite, kSsdShared, kSsdSharedToo, kCpu,
                kLateThread, kLateSsdRead, kLateSsdWrite, kLateSsdShared,
                kLateSsdSharedToo})
    matrix.add(r, T, -1);
  // The drives' two directions: while both run, reads run sR and writes
  // sW times slower (1 + ssd_duplex_*_slowdown; PredictTime.cpp replays
  // it so). With R seconds of reads and W of writes at full rate, of
  // which both directions run together for a seconds, the drives are busy
  // R + W - a * c, where c = 1/sR + 1/sW - 1 (what running together gains,
  // none when it is not faster than one after the other), and a is at
  // most sR * R and sW * W: T >= R + W - c * sR * R and
  // T >= R + W - c * sW * W, two rows linear in the columns.
  double sR = 1 + std::max(0.0, m.ssdDuplexReadSlowdown),
         sW = 1 + std::max(0.0, m.ssdDuplexWriteSlowdown);
  double gain = std::max(0.0, 1 / sR + 1 / sW - 1);
  // `readSeconds` and `writeSeconds` of column `col` on the SSD rows from
  // `rows` on: reads, writes, and the two rows of the drives shared.
  auto drives = [&](int rows, int col, double readSeconds,
                    double writeSeconds) {
    matrix.add(rows, col, readSeconds);
    matrix.add(rows + 1, col, writeSeconds);
    matrix.add(rows + 2, col, readSeconds * (1 - gain * sR) + writeSeconds);
    matrix.add(rows + 3, col, readSeconds + writeSeconds * (1 - gain * sW));
  };
  static_assert(kSsdSharedToo == kSsdRead + 3 &&
                    kLateSsdSharedToo == kLateSsdRead + 3,
                "drives() takes each set of SSD rows in this order");
  auto ssdRead = [&](int col, double seconds) {
    drives(kSsdRead, col, seconds, 0);
  };
  auto ssdWrite = [&](int col, double seconds) {
    drives(kSsdRead, col, 0, seconds);
  };
  // The same rows over the SSD work that waits for the backward pass: a
  // CPU update whose gradient a backward kernel makes is issued after
  // that kernel (CPU steps keep their place in the issue order; only
  // fetches are issued early), and its job's staging reads start no
  // earlier than the issue reaches it, its write-backs after its update.
  // The drives' busy time over R and W grows with both (its slope in R is
  // sR * (1 - 1/sW) >= 0, in W alike), so whatever else they carry then,
  // this work takes at most T - B.
  int B = glp_add_cols(lp, 1);
  glp_set_col_bnds(lp, B, GLP_LO, in.forward, 0);
  for (int r : {kEarlyThread, kEarlySsdRead})
    matrix.add(r, B, -1);
  for (int r : {kLateThread, kLateSsdRead, kLateSsdWrite, kLateSsdShared,
                kLateSsdSharedToo})
    matrix.add(r, B, 1);
  // An update on the CPU: its work there, and no kernel on the device.
  std::vector<int> cpuCol(in.updates.size());
  for (auto [u, up] : llvm::enumerate(in.updates)) {
    bool possible = std::isfinite(up.cpu);
    cpuCol[u] = column(possible);
    matrix.add(kThread, cpuCol[u], -up.device);
    if (up.late)
      matrix.add(kLateThread, cpuCol[u], -up.device);
    matrix.add(kCpu, cpuCol[u], possible ? up.cpu : 0);
  }
  // Per tensor: kept on the device; in host memory or on the SSD and read
  // there by the passes (and by its update on the device, which writes it
  // back); or off the device with its update on the CPU (its share of the
  // update's column), that share on the SSD no more than the whole.
  std::vector<int> hostCol(in.tensors.size()), ssdCol(in.tensors.size()),
      cpuSsdCol(in.tensors.size());
  for (auto [i, t] : llvm::enumerate(in.tensors)) {
    int row = tensorRow0 + static_cast<int>(i);
    double gib = t.bytes / kGiB;
    int kept = column(true);
    matrix.add(row, kept, 1);
    matrix.add(kParams, kept, gib);
    matrix.add(kBoundary, kept, gib);
    hostCol[i] = column(true);
    matrix.add(row, hostCol[i], 1);
    matrix.add(kHost, hostCol[i], gib);
    matrix.add(kThread, hostCol[i],
               t.bytes * (t.reads + t.updateReads) / copyIn +
                   t.bytes * t.updateWrites / copyOut);
    matrix.add(kEarlyThread, hostCol[i], t.bytes * t.forwardReads / copyIn);
    ssdCol[i] = column(hasSsd);
    matrix.add(row, ssdCol[i], 1);
    if (hasSsd) {
      ssdRead(ssdCol[i], (t.reads + t.updateReads) * ssdIn(t.bytes));
      ssdWrite(ssdCol[i], t.updateWrites * ssdOut(t.bytes));
      matrix.add(kEarlySsdRead, ssdCol[i], t.forwardReads * ssdIn(t.bytes));
    }
    cpuSsdCol[i] = column(hasSsd && t.update >= 0);
    int tie = tieRow0 + static_cast<int>(i);
    matrix.add(tie, cpuSsdCol[i], 1);
    if (t.update < 0)
      continue;
    int c = cpuCol[t.update];
    matrix.add(row, c, 1);
    matrix.add(tie, c, -1);
    // In host memory: the passes copy it in; on the SSD they read it
    // from there, and so does its update, which writes it back.
    matrix.add(kHost, c, gib);
    matrix.add(kThread, c, t.bytes * t.reads / copyIn);
    matrix.add(kEarlyThread, c, t.bytes * t.forwardReads / copyIn);
    if (!hasSsd)
      continue;
    matrix.add(kHost, cpuSsdCol[i], -gib);
    matrix.add(kThread, cpuSsdCol[i], -t.bytes * t.reads / copyIn);
    matrix.add(kEarlyThread, cpuSsdCol[i], -t.bytes * t.forwardReads / copyIn);
    ssdRead(cpuSsdCol[i], (t.reads + t.updateReads) * ssdIn(t.bytes));
    ssdWrite(cpuSsdCol[i], t.updateWrites * ssdOut(t.bytes));
    if (in.updates[t.update].late)
      drives(kLateSsdRead, cpuSsdCol[i], t.updateReads * ssdIn(t.bytes),
             t.updateWrites * ssdOut(t.bytes));
    matrix.add(kEarlySsdRead, cpuSsdCol[i], t.forwardReads * ssdIn(t.bytes));
  }
  // Activations: kept (on the device at the boundary), swapped to host
  // memory (out and back on the compute thread) or to the SSD, or
  // recomputed (at least their share of the kernel that made them).
  std::vector<int> actCols(4 * in.acts.size());
  for (auto [i, a] : llvm::enumerate(in.acts)) {
    int row = actRow0 + static_cast<int>(i);
    auto [bytes, seconds] = a;
    int keep = column(true), toHost = column(true), toSsd = column(hasSsd),
        again = column(true);
    int cols[] = {keep, toHost, toSsd, again};
    for (int j = 0; j < 4; ++j) {
      matrix.add(row, cols[j], 1);
      actCols[4 * i + j] = cols[j];
    }
    matrix.add(kBoundary, keep, bytes / kGiB);
    matrix.add(kThread, toHost, bytes / copyOut + bytes / copyIn);
    if (hasSsd) {
      ssdWrite(toSsd, ssdOut(bytes));
      ssdRead(toSsd, ssdIn(bytes));
    }
    matrix.add(kThread, again, seconds);
  }
  matrix.load(lp);
  if (solved(lp, b)) {
    PlacementBound::Relaxation &r = b.relaxation;
    double t = glp_get_col_prim(lp, T);
    r.hostOnly = true;
    r.compute = in.forward + in.backward + allDevice +
                glp_get_row_prim(lp, kThread) + t;
    r.ssdRead = glp_get_row_prim(lp, kSsdRead) + t;
    r.ssdWrite = glp_get_row_prim(lp, kSsdWrite) + t;
    r.ssdShared = std::max(glp_get_row_prim(lp, kSsdShared),
                           glp_get_row_prim(lp, kSsdSharedToo)) +
                  t;
    r.cpu = glp_get_row_prim(lp, kCpu) + t;
    for (auto [i, tensor] : llvm::enumerate(in.tensors)) {
      double c =
          tensor.update >= 0 ? glp_get_col_prim(lp, cpuCol[tensor.update]) : 0;
      r.cpuUpdated += c * tensor.bytes;
      r.fetched +=
          (glp_get_col_prim(lp, hostCol[i]) + glp_get_col_prim(lp, ssdCol[i])) *
          tensor.bytes;
    }
    for (auto [i, a] : llvm::enumerate(in.acts)) {
      r.swapped += (glp_get_col_prim(lp, actCols[4 * i + 1]) +
                    glp_get_col_prim(lp, actCols[4 * i + 2])) *
                   a.first;
      r.recomputed += glp_get_col_prim(lp, actCols[4 * i + 3]) * a.first;
    }
  }
  glp_delete_prob(lp);
}

} // namespace
#endif

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
    // Collectives run on the communication queue, beside the device.
    if (k.isCollective()) {
      b.comm += kernelSeconds(k, m);
      continue;
    }
    if (isOptimizerKernel(k)) {
      // Only the updates may move to the CPU: the rest of the optimizer
      // step (the gradients' norm) stays on the device.
      if (!k.isUpdate()) {
        b.compute += kernelSeconds(k, m);
        continue;
      }
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
  // A GPU's copy engines share the link's duplex rate (the top of the
  // file): each direction's least plus (s - 1) times the other's.
  if (m.gpu) {
    double other = linkOther(m);
    b.link =
        std::max(b.toHost + other * b.toDevice, b.toDevice + other * b.toHost);
  }
  if (hasSsd && cpuMem > 0) {
    // At best the SSD holds the least-read tensors: what is not kept when
    // the device and the host keep the most-read ones.
    double onSsd = std::max(0.0, stored - kept - double(cpuMem));
    b.ssdRead =
        readsNotKept(read, stored - onSsd) / (ssdPeakGBs(true, m) * 1e9);
    b.ssdWrite =
        std::max(0.0, onSsd - unwritten) / (ssdPeakGBs(false, m) * 1e9);
  }
#ifdef STRATA_HAVE_GLPK
  if (m.gpu && gpuMem > 0)
    relax(func, m, static_cast<double>(gpuMem), deviceArena, b.compute,
          passReads, b);
  else if (gpuMem > 0)
    relaxHostOnly(func, m, static_cast<double>(gpuMem),
                  static_cast<double>(cpuMem), hasSsd, deviceArena, passReads,
                  b);
#endif
  return b;
}

} // namespace strata::tiers
