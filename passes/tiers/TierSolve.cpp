//===- TierSolve.cpp - Layer configurations chosen by an integer programme ===//
//
// The tier planner's layer-structured stage. A transformer's stored tensors
// are mostly L near-identical layers, and what matters for the step is how
// many layers keep their weights, low-precision copies and optimizer
// states where, and how many update on the CPU, far more than which
// tensor goes where. So:
//
// 1. Groups. The automatic `exec.param`s by layer (layerOf: "h.3",
//    "model.layers.3"); the tensors of no layer form one group. Groups
//    whose tensors match (the same names past the layer, the same sizes
//    and roles) are one type: a GPT has one type of L layers and the rest.
// 2. Configurations (kConfigs): where a group's trainable parameters, its
//    low-precision copies (--precision bf16/fp16) and its optimizer states
//    live, and whether its updates run on the CPU (only when all three are
//    off the device: the CPU updates tensors in host memory or on the SSD).
//    Those that need an SSD are dropped without one, the CPU ones when
//    --place-updates is not auto, and a type keeps one of each set of
//    configurations that place its tensors alike.
// 3. Costs. From one choice of activations and gradients (a base: the
//    greedy starts' and the naive ones'), the placement with every group
//    on the device is scored (memory planned, the step replayed), then,
//    for each type and configuration, the placement with that type's
//    groups all in it. The difference, per group, is what one group in
//    that configuration adds to each queue's busy time, to the replayed
//    step and to the device's and the host's bytes.
// 4. The integer programme. How many groups of each type take each
//    configuration: minimise T, with T at least every queue's busy time
//    (linear in the counts) and at least the step, whose growth is not
//    linear (a few groups' transfers hide behind the compute, many do not):
//    each configuration's is measured at a quarter of the groups too and
//    modelled as convex and piecewise linear through both measurements
//    (Coefficients::step); the device's and the host's bytes within the
//    budgets, and the counts of a type summing to its groups. GLPK (glp_intopt,
//    branch and cut, depth first for the least T) solves it to proven
//    optimality within kMaxNodes nodes (a search stopped there keeps its
//    best counts, and the remark says so); a small tie-break prefers less
//    traffic in all. The counts are spread over each type's layers evenly,
//    and put on its last layers (whose updates come first in the backward
//    pass) as an alternative.
// 5. Checking. The placement is scored, and so is the programme's optimum
//    without the step's row (the queues alone), which sometimes places
//    better: the step is modelled from two measurements. Over a budget (the
//    model is linear, the arena's packing is not quite), the budget's row is
//    tightened by the excess and the programme solved again. Then single groups
//    move between configurations, the moves the model rates best first, while
//    the scored step drops; a move kept is made again for 2, 4, ... more
//    groups while that pays.
//
// What is exact and what is not: the programme's optimum is exact for the
// linear model over these configurations; the replayed step of what it
// gives is measured, never assumed; the local search of TierSearch.cpp
// continues from the best scored placement, and the planner keeps the best
// it scored. Without GLPK at build time the stage is skipped (a remark
// says so) and the local search alone plans.
//
//===----------------------------------------------------------------------===//

#include "passes/tiers/TierPlanner.h"

#include "dialects/Strata/StrataDialect.h"
#include "passes/analysis/ArenaRanges.h"

#include "llvm/Support/Debug.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

#ifdef STRATA_HAVE_GLPK
#include "passes/tiers/GlpkMatrix.h"
#endif

#define DEBUG_TYPE "strata-place-tiers"

using namespace mlir;
using namespace strata;
using namespace strata::tiers;

void TierPlanner::markUpdates(func::FuncOp func, const Placement &placement) {
  if (placement.updates.empty())
    return;
  Block &body = func.getBody().front();
  // One walk (every score makes it): a parameter is numbered before the
  // update that uses it, which it dominates.
  llvm::DenseMap<Operation *, unsigned> indexOf;
  Builder b(func.getContext());
  StringAttr onCpu = b.getStringAttr("cpu"),
             onDevice = b.getStringAttr("device");
  for (Operation &op : body) {
    if (auto p = dyn_cast<exec::ParamOp>(op)) {
      indexOf.try_emplace(p, indexOf.size());
      continue;
    }
    auto k = dyn_cast<exec::KernelOp>(op);
    if (!k || !k.isUpdate() || k.getInputs().empty())
      continue;
    // The parameter: through its fetch, or through the copy of this
    // rank's shard of it that a sharded update works on.
    Value v = k.getInputs()[0];
    if (auto copy = v.getDefiningOp<exec::KernelOp>();
        copy && (copy.isKernel(artifact::Kernel::Copy) ||
                 copy.isKernel(artifact::Kernel::Shard)))
      v = copy.getInputs()[0];
    auto it = indexOf.find(viewRoot(v).getDefiningOp());
    if (it == indexOf.end() || placement.updates[it->second] == UpdateOn::Auto)
      continue;
    setDeclaredAttr<exec::ExecDialect::UpdateOnAttrHelper>(
        k, placement.updates[it->second] == UpdateOn::Cpu ? onCpu : onDevice);
  }
}

#ifndef STRATA_HAVE_GLPK

std::optional<std::pair<Placement, Score>>
TierPlanner::solveLayers(func::FuncOp, ArrayRef<Placement> bases) {
  // Said only where the stage would have run.
  if (mode(Class::Params) != "auto" || mode(Class::States) != "auto" ||
      bases.empty())
    return std::nullopt;
  layerStage = "skipped: the compiler was built without GLPK (install "
               "libglpk-dev and rebuild); the local search alone planned";
  return std::nullopt;
}

#else

namespace {

/// What a stored tensor is to its group's configuration.
enum class Role : uint8_t { Master, Low, State, Other };

/// Where a group's tensors live and where its updates run.
struct Config {
  const char *name;
  Tier master, low, state;
  bool cpu;
};

constexpr Tier kD = Tier::Device, kH = Tier::Host, kS = Tier::Ssd;

/// Index 0 (everything on the device) is the reference the costs are
/// measured from.
constexpr Config kConfigs[] = {
    {"device", kD, kD, kD, false},
    {"states on the host", kD, kD, kH, false},
    {"masters and states on the host", kH, kD, kH, false},
    {"host", kH, kH, kH, false},
    {"host, CPU updates", kH, kH, kH, true},
    {"states on the SSD", kD, kD, kS, false},
    {"masters on the host, states on the SSD", kH, kD, kS, false},
    {"masters and states on the SSD", kS, kD, kS, false},
    {"host, states on the SSD, CPU updates", kH, kH, kS, true},
    {"SSD, low copies on the host, CPU updates", kS, kH, kS, true},
    {"SSD, CPU updates", kS, kS, kS, true},
    // Masters on the device and CPU updates: only where updates work on
    // this rank's shard (--shard-optimizer, --shard-parameters), which
    // goes to host memory beside its gradient and comes back.
    {"states on the host, CPU updates", kD, kD, kH, true},
    {"states on the SSD, CPU updates", kD, kD, kS, true},
};
constexpr unsigned kNumConfigs = std::size(kConfigs);

Tier tierFor(Role r, const Config &c) {
  switch (r) {
  case Role::Low:
    return c.low;
  case Role::State:
    return c.state;
  case Role::Master:
  case Role::Other:
    return c.master;
  }
  return c.master;
}

/// The times the programme bounds T with, read from a Usage: the step
/// (index 0; modelled by Coefficients::step), each queue's busy time, and the
/// backward pass's start plus each queue's busy time after it.
constexpr unsigned kNumTimes = 13;
double &timeOf(Usage &u, unsigned r) {
  double *all[kNumTimes] = {&u.step,     &u.compute,  &u.toDevice, &u.toHost,
                            &u.ssdRead,  &u.ssdWrite, &u.cpu,      &u.phase[0],
                            &u.phase[1], &u.phase[2], &u.phase[3], &u.phase[4],
                            &u.phase[5]};
  return *all[r];
}
double timeOf(const Usage &u, unsigned r) {
  return timeOf(const_cast<Usage &>(u), r);
}

/// One group's cost in one configuration, over the reference.
struct Coefficients {
  double time[kNumTimes] = {};
  double device = 0, host = 0;
  /// The replayed step's growth is not linear in the count: a few groups'
  /// transfers and CPU work hide behind the compute, many do not. It is
  /// measured at two counts, `at` groups and all of them (time[0] is per
  /// group over all), and modelled as the larger of two lines, one through
  /// the origin and (at, stepAt), the other through (at, stepAt) and (all,
  /// all * time[0]): step(n) = max(n * stepAt / at, stepAt + (n - at) *
  /// steeper), convex, and through both points when the growth is.
  int64_t at = 0;
  double stepAt = 0, steeper = 0;
  double step(int64_t n) const {
    if (at <= 0)
      return n * time[0];
    double first = n * (stepAt / static_cast<double>(at));
    return std::max(first, stepAt + (n - at) * steeper);
  }
};

struct Group {
  SmallVector<unsigned> params;
};

struct GroupType {
  SmallVector<unsigned> groups;
  /// Usable configurations (indices into kConfigs), 0 first.
  SmallVector<unsigned> configs;
  /// Per entry of `configs`.
  SmallVector<Coefficients> cost;
};

/// The counts of each type's groups in each of its configurations.
using Counts = LayerCounts;

} // namespace

namespace {

/// Branch and cut stops after this many nodes (GPT-3 13B's layer
/// programmes take up to about 23,000 to prove their optimum, about two
/// seconds depth first). A count, not a time: the plan must not depend on
/// how fast or how busy the machine is.
constexpr int kMaxNodes = 100000;

/// GLPK's callback: stops the search once it has made kMaxNodes nodes,
/// and notes it in `*info` (a bool).
void stopAfterNodes(glp_tree *tree, void *info) {
  if (glp_ios_reason(tree) != GLP_ISELECT)
    return;
  int active = 0, current = 0, total = 0;
  glp_ios_tree_size(tree, &active, &current, &total);
  if (total > kMaxNodes) {
    *static_cast<bool *>(info) = true;
    glp_ios_terminate(tree);
  }
}

/// The programme of step 4 for `types`, with the reference's usage `base`
/// and the byte limits `deviceLimit` and `hostLimit` (0: none), with the
/// step's row or without it (`stepRow`). Returns the optimal counts, or
/// nothing when no counts meet the limits; the best counts found when the
/// search stopped at kMaxNodes before proving them optimal (`*unproven`
/// is then set).
std::optional<Counts> solveCounts(ArrayRef<GroupType> types, const Usage &base,
                                  double deviceLimit, double hostLimit,
                                  double *optimum = nullptr,
                                  bool stepRow = true,
                                  bool *unproven = nullptr) {
  glp_term_out(GLP_OFF);
  glp_prob *lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  // Rows: one per type (its counts sum to its groups), one per time, the
  // device and the host.
  int typeRows = static_cast<int>(types.size());
  int timeRow0 = typeRows + 1;
  int deviceRow = timeRow0 + kNumTimes, hostRow = deviceRow + 1;
  glp_add_rows(lp, hostRow);
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  for (int t = 0; t < typeRows; ++t)
    glp_set_row_bnds(lp, t + 1, GLP_FX,
                     static_cast<double>(types[t].groups.size()),
                     static_cast<double>(types[t].groups.size()));
  // The replayed step (time 0) is the base's plus each column's convex
  // piecewise-linear growth (Coefficients::step), an auxiliary column y
  // each with a row per line (line - y <= 0): T >= base + sum y.
  if (stepRow)
    glp_set_row_bnds(lp, timeRow0, GLP_UP, 0, -base.step);
  else
    glp_set_row_bnds(lp, timeRow0, GLP_FR, 0, 0);
  for (unsigned r = 1; r < kNumTimes; ++r)
    glp_set_row_bnds(lp, timeRow0 + r, GLP_UP, 0, -timeOf(base, r));
  if (deviceLimit > 0)
    glp_set_row_bnds(lp, deviceRow, GLP_UP, 0,
                     (deviceLimit - base.device) / kGiB);
  else
    glp_set_row_bnds(lp, deviceRow, GLP_FR, 0, 0);
  if (hostLimit > 0)
    glp_set_row_bnds(lp, hostRow, GLP_UP, 0, (hostLimit - base.host) / kGiB);
  else
    glp_set_row_bnds(lp, hostRow, GLP_FR, 0, 0);
  // Columns: T, then each type's counts.
  GlpkMatrix matrix;
  auto entry = [&](int row, int col, double value) {
    matrix.add(row, col, value);
  };
  int numCols = 1, numCounts = 0;
  for (const GroupType &t : types)
    numCounts += static_cast<int>(t.configs.size());
  numCols += 2 * numCounts;
  glp_add_cols(lp, numCols);
  glp_set_col_bnds(lp, 1, GLP_LO, 0, 0);
  glp_set_obj_coef(lp, 1, 1);
  for (unsigned r = 0; r < kNumTimes; ++r)
    entry(timeRow0 + r, 1, -1);
  int lineRow = glp_add_rows(lp, 2 * numCounts);
  // The second stage's objective: among counts with the least T, the
  // least busy time in all (per column).
  std::vector<double> tieBreak;
  int col = 2;
  for (auto [t, type] : llvm::enumerate(types))
    for (const Coefficients &c : type.cost) {
      glp_set_col_kind(lp, col, GLP_IV);
      glp_set_col_bnds(lp, col, GLP_DB, 0,
                       static_cast<double>(type.groups.size()));
      entry(static_cast<int>(t) + 1, col, 1);
      double total = 0;
      for (unsigned r = 1; r < kNumTimes; ++r) {
        entry(timeRow0 + r, col, c.time[r]);
        total += c.time[r];
      }
      tieBreak.push_back(total);
      entry(deviceRow, col, c.device / kGiB);
      entry(hostRow, col, c.host / kGiB);
      // The step's growth y (column col + numCounts): at least each line.
      int y = col + numCounts;
      glp_set_col_bnds(lp, y, GLP_FR, 0, 0);
      entry(timeRow0, y, 1);
      double first =
          c.at > 0 ? c.stepAt / static_cast<double>(c.at) : c.time[0];
      entry(lineRow, col, first);
      entry(lineRow, y, -1);
      glp_set_row_bnds(lp, lineRow++, GLP_UP, 0, 0);
      if (c.at > 0) {
        // steeper * n - y <= steeper * at - stepAt
        entry(lineRow, col, c.steeper);
        entry(lineRow, y, -1);
        glp_set_row_bnds(lp, lineRow, GLP_UP, 0,
                         c.steeper * static_cast<double>(c.at) - c.stepAt);
      } else {
        glp_set_row_bnds(lp, lineRow, GLP_FR, 0, 0);
      }
      ++lineRow;
      ++col;
    }
  matrix.load(lp);
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  // Stage one depth first: on these programmes it visits the same nodes
  // as GLPK's default order (best local bound) and proves the same optimum
  // about three times faster, without a long list of open nodes to keep.
  // Stage two in the default order, which proves its optimum within
  // milliseconds where depth first took seconds.
  parm.bt_tech = GLP_BT_DFS;
  bool stopped = false;
  parm.cb_func = stopAfterNodes;
  parm.cb_info = &stopped;
  // Stage one: the least T, to optimality (GLPK's branch and cut with no
  // gap allowed). Stage two: T held within a hair of it, the least
  // traffic. Either stopped at kMaxNodes keeps the best it found.
  auto solved = [&] {
    int rc = glp_intopt(lp, &parm);
    int status = glp_mip_status(lp);
    return (rc == 0 && status == GLP_OPT) ||
           (rc == GLP_ESTOP && stopped && status == GLP_FEAS);
  };
  bool ok = solved();
  if (ok) {
    double best = glp_mip_obj_val(lp);
    glp_set_col_bnds(lp, 1, GLP_DB, 0, best * (1 + 1e-9) + 1e-12);
    parm.bt_tech = GLP_BT_BLB;
    glp_set_obj_coef(lp, 1, 0);
    for (size_t i = 0; i < tieBreak.size(); ++i)
      glp_set_obj_coef(lp, static_cast<int>(i) + 2, tieBreak[i]);
    ok = solved();
    if (optimum)
      *optimum = best;
  }
  if (ok && stopped && unproven)
    *unproven = true;
  std::optional<Counts> out;
  if (ok) {
    out.emplace();
    col = 2;
    for (const GroupType &type : types) {
      out->emplace_back();
      for (size_t c = 0; c < type.configs.size(); ++c)
        out->back().push_back(
            static_cast<int64_t>(std::llround(glp_mip_col_val(lp, col++))));
    }
  }
  glp_delete_prob(lp);
  return out;
}

/// solveCounts() through `cache` (under `mutex`), keyed by every number
/// the programme is made of, bit for bit.
std::optional<Counts>
solveCountsOnce(std::mutex &mutex,
                std::unordered_map<std::string, SolvedProgramme> &cache,
                ArrayRef<GroupType> types, const Usage &base,
                double deviceLimit, double hostLimit, double *optimum = nullptr,
                bool stepRow = true, bool *unproven = nullptr) {
  std::string key;
  auto add = [&](auto v) {
    key.append(reinterpret_cast<const char *>(&v), sizeof(v));
  };
  for (const GroupType &t : types) {
    add(static_cast<int64_t>(t.groups.size()));
    add(static_cast<int64_t>(t.configs.size()));
    for (const Coefficients &c : t.cost) {
      for (double v : c.time)
        add(v);
      for (double v : {c.device, c.host, c.stepAt, c.steeper})
        add(v);
      add(c.at);
    }
  }
  for (unsigned r = 0; r < kNumTimes; ++r)
    add(timeOf(base, r));
  for (double v : {base.device, base.host, deviceLimit, hostLimit})
    add(v);
  key.push_back(stepRow ? 'S' : 'Q');
  SolvedProgramme known;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) {
      known = it->second;
      found = true;
    }
  }
  if (!found) {
    bool stopped = false;
    std::optional<Counts> solved = solveCounts(
        types, base, deviceLimit, hostLimit, &known.optimum, stepRow, &stopped);
    known.unproven = stopped;
    known.counts = std::move(solved);
    std::lock_guard<std::mutex> lock(mutex);
    cache.emplace(std::move(key), known);
  }
  if (optimum && known.counts)
    *optimum = known.optimum;
  if (unproven && known.unproven)
    *unproven = true;
  return known.counts;
}

/// What the linear model predicts for `counts`.
Usage modelled(ArrayRef<GroupType> types, const Usage &base,
               const Counts &counts) {
  double time[kNumTimes];
  for (unsigned r = 0; r < kNumTimes; ++r)
    time[r] = timeOf(base, r);
  Usage u = base;
  for (auto [type, n] : llvm::zip(types, counts))
    for (auto [c, k] : llvm::zip(type.cost, n)) {
      time[0] += c.step(k);
      for (unsigned r = 1; r < kNumTimes; ++r)
        time[r] += k * c.time[r];
      u.device += k * c.device;
      u.host += k * c.host;
    }
  for (unsigned r = 0; r < kNumTimes; ++r)
    timeOf(u, r) = time[r];
  return u;
}

/// The programme's objective for a modelled usage.
double objective(const Usage &u) {
  double t = 0;
  for (unsigned r = 0; r < kNumTimes; ++r)
    t = std::max(t, timeOf(u, r));
  return t;
}

} // namespace

std::optional<std::pair<Placement, Score>>
TierPlanner::solveLayers(func::FuncOp func, ArrayRef<Placement> bases) {
  if (mode(Class::Params) != "auto" || mode(Class::States) != "auto" ||
      bases.empty())
    return std::nullopt;
  Block &body = func.getBody().front();
  SmallVector<exec::ParamOp> all(body.getOps<exec::ParamOp>());
  // Whether a programme's search stopped at kMaxNodes (said in the remark).
  bool unproven = false;
  // Step 1: the groups and their types.
  std::map<std::string, Group, LayerOrder> byKey;
  SmallVector<Role> roles(all.size(), Role::Other);
  for (auto [i, p] : llvm::enumerate(all)) {
    if (!isAuto(p) || p->use_empty())
      continue;
    roles[i] = p.getState()       ? Role::State
               : p.getCopyOf()    ? Role::Low
               : p.getTrainable() ? Role::Master
                                  : Role::Other;
    byKey[layerOf(p.getName())].params.push_back(i);
  }
  // A type's signature: each tensor's name past the layer, bytes and role.
  std::map<std::string, GroupType> bySignature;
  SmallVector<Group> groups;
  for (auto &[key, group] : byKey) {
    std::string sig = key.empty() ? std::string("\x01rest") : std::string();
    for (unsigned i : group.params) {
      StringRef name = all[i].getName();
      sig += name.drop_front(key.size()).str() + "\x02" +
             std::to_string(storageBytes(all[i].getType())) + "\x02" +
             std::to_string(static_cast<int>(roles[i])) + "\x03";
    }
    bySignature[sig].groups.push_back(groups.size());
    groups.push_back(group);
  }
  std::vector<GroupType> types;
  for (auto &[sig, type] : bySignature)
    types.push_back(std::move(type));
  size_t repeated = 0;
  for (const GroupType &t : types)
    repeated = std::max(repeated, t.groups.size());
  if (repeated < 2) {
    layerStage = "skipped: no repeated layers in the parameters' names";
    return std::nullopt;
  }
  // Step 2: each type's configurations, one per distinct placement.
  bool cpuAllowed = placeUpdates == "auto";
  // The CPU updates a parameter on the device only through this rank's
  // shard of it: a sharded parameter, or the shard copy a sharded
  // optimizer's update works on (OffloadOptimizer).
  bool cpuUpdatesDeviceMasters =
      llvm::any_of(all, [](exec::ParamOp p) { return p.getShardRanks(); }) ||
      llvm::any_of(body.getOps<exec::KernelOp>(), [](exec::KernelOp k) {
        return k.isKernel(artifact::Kernel::Shard);
      });
  for (GroupType &t : types) {
    const Group &g = groups[t.groups.front()];
    bool hasMaster = llvm::any_of(
        g.params, [&](unsigned i) { return roles[i] == Role::Master; });
    std::set<std::string> seen;
    for (unsigned c = 0; c < kNumConfigs; ++c) {
      const Config &cfg = kConfigs[c];
      bool ssd = cfg.master == kS || cfg.low == kS || cfg.state == kS;
      if ((ssd && !hasSsd) || (cfg.cpu && (!cpuAllowed || !hasMaster)) ||
          (cfg.cpu && cfg.master == kD && !cpuUpdatesDeviceMasters))
        continue;
      std::string placed;
      for (unsigned i : g.params)
        placed.push_back(static_cast<char>(tierFor(roles[i], cfg)));
      placed.push_back(cfg.cpu ? 'c' : 'd');
      if (seen.insert(placed).second)
        t.configs.push_back(c);
    }
  }
  // A placement from `base` with group configurations `of` (per group,
  // an index into kConfigs).
  auto build = [&](const Placement &base, ArrayRef<unsigned> of) {
    Placement p = base;
    p.updates.assign(all.size(), UpdateOn::Device);
    for (auto [g, c] : llvm::zip(groups, of))
      for (unsigned i : g.params) {
        p.tiers[i] = tierFor(roles[i], kConfigs[c]);
        if (kConfigs[c].cpu && roles[i] == Role::Master)
          p.updates[i] = UpdateOn::Cpu;
      }
    return p;
  };
  // The group configurations that spread `counts` over each type's groups
  // (evenly, or the configurations further from the device on the last
  // layers).
  auto spread = [&](const Counts &counts, bool lastLayers) {
    SmallVector<unsigned> of(groups.size(), 0);
    for (auto [type, n] : llvm::zip(types, counts)) {
      int64_t total = static_cast<int64_t>(type.groups.size());
      if (lastLayers) {
        size_t g = 0;
        for (size_t c = 0; c < n.size(); ++c)
          for (int64_t k = 0; k < n[c]; ++k)
            of[type.groups[g++]] = type.configs[c];
        continue;
      }
      // Smooth weighted round robin.
      SmallVector<int64_t> credit(n.size(), 0);
      for (unsigned g : type.groups) {
        size_t pick = 0;
        for (size_t c = 0; c < n.size(); ++c) {
          credit[c] += n[c];
          if (credit[c] > credit[pick])
            pick = c;
        }
        credit[pick] -= total;
        of[g] = type.configs[pick];
      }
    }
    return of;
  };
  // --planner-check: on a small instance, enumerate (1) every count
  // vector of the programme, to confirm GLPK's optimum, and (2) every
  // configuration of every group, scored, to confirm the proven bound
  // under each placement within the budgets and to report the best.
  auto checkProgramme = [&](ArrayRef<GroupType> measured, const Usage &ref,
                            const Placement &base) -> LogicalResult {
    double solverOptimum = -1;
    auto solved = solveCountsOnce(shared->mutex, shared->programmes, measured,
                                  ref, static_cast<double>(gpuMem),
                                  static_cast<double>(cpuMem), &solverOptimum);
    // (1) Every composition of each type's groups over its configurations.
    double enumerated = std::numeric_limits<double>::infinity();
    int64_t vectors = 0;
    Counts counts;
    for (const GroupType &t : measured)
      counts.emplace_back(t.configs.size(), 0);
    std::function<void(size_t)> visit = [&](size_t t) {
      if (vectors > 2000000)
        return;
      if (t == measured.size()) {
        ++vectors;
        Usage u = modelled(measured, ref, counts);
        if ((!gpuMem || u.device <= gpuMem) && (!cpuMem || u.host <= cpuMem))
          enumerated = std::min(enumerated, objective(u));
        return;
      }
      int64_t n = static_cast<int64_t>(measured[t].groups.size());
      std::function<void(size_t, int64_t)> split = [&](size_t c, int64_t left) {
        if (c + 1 == counts[t].size()) {
          counts[t][c] = left;
          visit(t + 1);
          return;
        }
        for (int64_t k = 0; k <= left; ++k) {
          counts[t][c] = k;
          split(c + 1, left - k);
        }
      };
      split(0, n);
    };
    visit(0);
    // Too large to enumerate: said, and the check of every scored
    // placement against the bound (checkScores) still runs.
    if (vectors > 2000000) {
      func.emitRemark("planner check: the layer programme is too large to "
                      "enumerate (over 2,000,000 count vectors); only the "
                      "scored placements are checked against the bound");
      return success();
    }
    // Within GLPK's tolerances: its optimum can sit a few parts in a
    // million under the best vector (a bound row met to within its
    // feasibility tolerance), never further either way.
    bool agree = solved ? std::fabs(solverOptimum - enumerated) <=
                              1e-5 * std::max(1.0, enumerated)
                        : std::isinf(enumerated);
    if (!agree)
      return func.emitError("planner check: GLPK's optimum ")
             << solverOptimum * 1e3 << " ms differs from the enumerated "
             << enumerated * 1e3 << " ms over " << vectors << " count vectors";
    // (2) Every configuration of every group, scored.
    double placements = 1;
    for (const GroupType &t : measured)
      placements *= std::pow(static_cast<double>(t.configs.size()),
                             static_cast<double>(t.groups.size()));
    if (placements > 20000) {
      func.emitRemark("planner check: the layer placements are too many to "
                      "enumerate (")
          << placements
          << "); only the scored placements are checked against the bound";
      return success();
    }
    SmallVector<unsigned> of(groups.size(), 0);
    SmallVector<const SmallVector<unsigned> *> choicesOf(groups.size());
    for (const GroupType &t : measured)
      for (unsigned g : t.groups)
        choicesOf[g] = &t.configs;
    int64_t scored = 0, fit = 0;
    Score bestEnumerated;
    std::optional<int64_t> underBound;
    int64_t boundUs = static_cast<int64_t>(std::floor(proven.seconds() * 1e6));
    std::function<void(size_t)> each = [&](size_t g) {
      if (g == groups.size()) {
        Score s = score(func, build(base, of));
        ++scored;
        if (!s.fits())
          return;
        ++fit;
        if (s.stepUs < boundUs && !underBound)
          underBound = s.stepUs;
        if (s < bestEnumerated)
          bestEnumerated = s;
        return;
      }
      for (unsigned c : *choicesOf[g]) {
        of[g] = c;
        each(g + 1);
      }
    };
    each(0);
    if (underBound)
      return func.emitError("planner check: a placement within the budgets "
                            "is predicted at ")
             << *underBound << " us, under the proven bound " << boundUs
             << " us";
    auto diag = func.emitRemark()
                << "planner check: GLPK's optimum of the layer programme ("
                << llvm::formatv("{0:F3}", solverOptimum * 1e3)
                << " ms) matches the enumeration of " << vectors
                << " count vectors; " << scored
                << " layer placements enumerated and scored, " << fit
                << " within the budgets";
    if (fit)
      diag << ", the fastest "
           << llvm::formatv("{0:F3}", bestEnumerated.stepUs / 1e3)
           << " ms; the bound (" << llvm::formatv("{0:F3}", boundUs / 1e3)
           << " ms) is under every one";
    checkBestUs = fit ? bestEnumerated.stepUs : -1;
    return success();
  };
  // Each base's solution, scored.
  struct Solution {
    const Placement *base;
    std::vector<GroupType> measured;
    Usage ref;
    Counts counts;
    Placement placed;
    Score score;
  };
  std::vector<Solution> solutions;
  for (const Placement &base : bases) {
    // Step 3: the costs from this base.
    SmallVector<unsigned> reference(groups.size(), 0);
    // Configuration `c` of type `t` in all its groups, or (`few`) in the
    // last quarter of them (where spread() puts the configurations
    // further from the device): the placements measured; the groups in
    // it (0: none measured).
    auto withConfig = [&](const GroupType &t, size_t c, bool few) {
      size_t n = t.groups.size(), at = few ? n / 4 : n;
      SmallVector<unsigned> of = reference;
      for (size_t g = n - at; g < n; ++g)
        of[t.groups[g]] = t.configs[c];
      return std::make_pair(build(base, of), static_cast<int64_t>(at));
    };
    // Every placement it measures, scored at once where other threads
    // wait for work (none depends on another's score).
    if (scoreAheadWidth() > 0) {
      std::vector<Placement> batch{build(base, reference)};
      for (const GroupType &t : types)
        for (size_t c = 1; c < t.configs.size(); ++c)
          for (bool few : {false, true})
            if (auto [p, at] = withConfig(t, c, few); at > 0)
              batch.push_back(std::move(p));
      scoreAhead(func, std::move(batch));
    }
    Score ref = score(func, build(base, reference));
    if (ref.usage.device == 0)
      continue;
    std::vector<GroupType> measured = types;
    for (GroupType &t : measured) {
      t.cost.assign(t.configs.size(), Coefficients());
      for (size_t c = 1; c < t.configs.size(); ++c) {
        Score s = score(func, withConfig(t, c, false).first);
        double n = static_cast<double>(t.groups.size());
        Coefficients &k = t.cost[c];
        if (s.usage.device == 0) {
          // Not applicable: priced out of the programme.
          k.time[0] = 1e9;
          continue;
        }
        for (unsigned r = 0; r < kNumTimes; ++r)
          k.time[r] = (timeOf(s.usage, r) - timeOf(ref.usage, r)) / n;
        k.device = (s.usage.device - ref.usage.device) / n;
        k.host = (s.usage.host - ref.usage.host) / n;
        // The step's growth at a quarter of the groups.
        auto [few, at] = withConfig(t, c, true);
        if (at < 1)
          continue;
        Score f = score(func, few);
        if (f.usage.device == 0)
          continue;
        k.at = at;
        k.stepAt = f.usage.step - ref.usage.step;
        k.steeper = (k.time[0] * n - k.stepAt) / (n - static_cast<double>(at));
      }
    }
    if (plannerCheck && &base == &bases.front() &&
        failed(checkProgramme(measured, ref.usage, base)))
      return std::nullopt;
    // Steps 4 and 5: solve, check, tighten what the placement overran.
    double deviceLimit = static_cast<double>(gpuMem);
    double hostLimit = static_cast<double>(cpuMem);
    std::optional<Counts> counts;
    Placement placed;
    Score placedScore;
    // Scores `solved` spread evenly and on the last layers; keeps each
    // that beats the placement kept (or where none is); whether one did.
    auto keepSpreads = [&](const Counts &solved) {
      bool kept = false;
      for (bool last : {false, true}) {
        Placement p = build(base, spread(solved, last));
        p.label = last ? "layer programme (last layers off the device)"
                       : "layer programme";
        Score s = score(func, p);
        if (s < placedScore || !counts) {
          placed = std::move(p);
          placedScore = s;
          counts = solved;
          kept = true;
        }
      }
      return kept;
    };
    for (int attempt = 0; attempt < 4; ++attempt) {
      // With the step's modelled growth and without it (the queues alone):
      // the model of the step is measured at two counts only, so either
      // can place better; both are scored.
      bool anySolved = false;
      for (bool stepRow : {true, false}) {
        std::optional<Counts> solved = solveCountsOnce(
            shared->mutex, shared->programmes, measured, ref.usage, deviceLimit,
            hostLimit, nullptr, stepRow, &unproven);
        if (!solved)
          continue;
        anySolved = true;
        keepSpreads(*solved);
      }
      if (!anySolved)
        break;
      if (placedScore.fits())
        break;
      const Usage &u = placedScore.usage;
      constexpr double kMargin = 64.0 * 1024 * 1024;
      if (gpuMem && u.device > gpuMem)
        deviceLimit -= (u.device - gpuMem) + kMargin;
      if (cpuMem && u.host > cpuMem)
        hostLimit -= (u.host - cpuMem) + kMargin;
    }
    if (!counts) {
      LLVM_DEBUG(llvm::dbgs() << "layer programme: no counts fit\n");
      continue;
    }
    // The step's row adds up each configuration's growth as measured with
    // every group of its type in it. Groups in different configurations
    // load different queues, which overlap, so for a mix the sum can
    // overstate the step by far (GPT-3 13B at batch 1 on the RTX 4090
    // profile: 11.6 s modelled, 7.9 s replayed), and the programme then
    // trades the queues' balance for less growth. Where the replayed
    // growth is well under the modelled one, the growths are scaled by
    // their ratio and the programme solved again (twice at most); a
    // placement it gives is kept if it scores better, and the refinement
    // below works with the scaled model.
    for (int round = 0; round < 2 && placedScore.fits(); ++round) {
      double modelledGrowth =
          modelled(measured, ref.usage, *counts).step - ref.usage.step;
      double replayedGrowth = placedScore.usage.step - ref.usage.step;
      if (modelledGrowth <= 0 || replayedGrowth <= 0 ||
          replayedGrowth > 0.9 * modelledGrowth)
        break;
      double ratio = replayedGrowth / modelledGrowth;
      std::vector<GroupType> scaled = measured;
      for (GroupType &t : scaled)
        for (Coefficients &k : t.cost) {
          if (k.time[0] >= 1e9)
            continue;
          k.time[0] *= ratio;
          k.stepAt *= ratio;
          k.steeper *= ratio;
        }
      std::optional<Counts> solved =
          solveCountsOnce(shared->mutex, shared->programmes, scaled, ref.usage,
                          deviceLimit, hostLimit, nullptr,
                          /*stepRow=*/true, &unproven);
      if (!solved || *solved == *counts)
        break;
      bool better = keepSpreads(*solved);
      measured = std::move(scaled);
      if (!better)
        break;
    }
    LLVM_DEBUG(llvm::dbgs()
               << "layer programme: modelled "
               << objective(modelled(measured, ref.usage, *counts)) * 1e3
               << " ms, scored " << placedScore.stepUs / 1e3 << " ms, over "
               << placedScore.overBytes << " B\n");
    solutions.push_back({&base, std::move(measured), ref.usage, *counts,
                         std::move(placed), placedScore});
  }
  if (solutions.empty()) {
    layerStage = "found no placement within the budgets";
    return std::nullopt;
  }
  // Refinement of each base's solution: one group moved at a time, the
  // moves the model rates best first, while the score drops; half the
  // search's evaluations in all (a score takes about a second at 175B).
  const int refineScores = static_cast<int>(std::max<int64_t>(
      16, plannerEvaluations / (2 * static_cast<int64_t>(solutions.size()))));
  constexpr int kTriesPerRound = 6;
  // A move that pays off for one group usually does for several (the
  // programme's linear model of the step misses by a few groups either
  // way): once kept, it is made for 2 more groups at once, then 4, ...,
  // while each is kept.
  struct Move {
    double modelled;
    size_t type, from, to;
  };
  // `counts` with `n` groups of type `m.type` moved as `m` says.
  auto moved = [](Counts counts, const Move &m, int64_t n) {
    counts[m.type][m.from] -= n;
    counts[m.type][m.to] += n;
    return counts;
  };
  for (Solution &sol : solutions) {
    bool last = sol.placed.label.find("last") != std::string::npos;
    auto keepIfBetter = [&](Counts counts) {
      Placement p = build(*sol.base, spread(counts, last));
      p.label = sol.placed.label;
      std::optional<Score> scored = scoreAgainst(func, p, sol.score);
      if (!scored || !(*scored < sol.score))
        return false;
      Score s = *scored;
      sol.placed = std::move(p);
      sol.score = s;
      sol.counts = std::move(counts);
      return true;
    };
    for (int spent = 0; spent < refineScores;) {
      SmallVector<Move> moves;
      bool over = !sol.score.fits();
      for (auto [t, type] : llvm::enumerate(sol.measured))
        for (size_t from = 0; from < type.configs.size(); ++from) {
          if (sol.counts[t][from] == 0)
            continue;
          for (size_t to = 0; to < type.configs.size(); ++to) {
            if (to == from || type.cost[to].time[0] >= 1e9)
              continue;
            // Over a budget, only moves that free what is over.
            if (over && type.cost[to].device >= type.cost[from].device)
              continue;
            Move m{0, t, from, to};
            Usage u = modelled(sol.measured, sol.ref, moved(sol.counts, m, 1));
            m.modelled = over ? u.device : objective(u);
            moves.push_back(m);
          }
        }
      llvm::stable_sort(moves, [](const Move &a, const Move &b) {
        return a.modelled < b.modelled;
      });
      bool improved = false;
      for (size_t k = 0;
           k < moves.size() && k < kTriesPerRound && spent < refineScores;
           ++k) {
        ++spent;
        const Move &m = moves[k];
        if (!keepIfBetter(moved(sol.counts, m, 1)))
          continue;
        improved = true;
        for (int64_t more = 2; spent < refineScores; more *= 2) {
          int64_t n = std::min(more, sol.counts[m.type][m.from]);
          if (n == 0)
            break;
          ++spent;
          if (!keepIfBetter(moved(sol.counts, m, n)))
            break;
        }
        break;
      }
      if (!improved)
        break;
    }
  }
  Solution &sol = *std::min_element(
      solutions.begin(), solutions.end(),
      [](const Solution &a, const Solution &b) { return a.score < b.score; });
  // Say what was chosen: the counts by configuration, for the biggest
  // type.
  size_t biggest = 0;
  for (size_t t = 0; t < sol.measured.size(); ++t)
    if (sol.measured[t].groups.size() > sol.measured[biggest].groups.size())
      biggest = t;
  std::string chosen;
  for (auto [c, n] :
       llvm::zip(sol.measured[biggest].configs, sol.counts[biggest]))
    if (n > 0)
      chosen += (chosen.empty() ? "" : ", ") + std::to_string(n) + " " +
                kConfigs[c].name;
  layerStage = std::to_string(sol.measured[biggest].groups.size()) +
               " repeated layers: " + chosen + " (predicted " +
               llvm::formatv("{0:F3}", sol.score.stepUs / 1e3).str() + " ms)";
  if (unproven)
    layerStage += "; a layer programme's search stopped at " +
                  std::to_string(kMaxNodes) +
                  " branch-and-cut nodes, its best counts not proven optimal";
  return std::pair<Placement, Score>(std::move(sol.placed), sol.score);
}

#endif // STRATA_HAVE_GLPK
