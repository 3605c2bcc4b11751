//===- PlaceTiers.cpp - Parameters and state on device, host or SSD -------===//
//
// The pass: checks the placement options, reads the machine profile and
// runs the tier planner (TierPlanner.h) on every function.
//
//===----------------------------------------------------------------------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/tiers/TierPlanner.h"

#include <cmath>

#include "passes/analysis/ArenaRanges.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"

namespace strata {
#define GEN_PASS_DEF_PLACETIERSPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::tiers;

uint64_t TierPlanner::arenaAlignment() const {
  return hasSsd ? artifact::kParamAlignment : artifact::kArenaAlignment;
}

/// Constants (a forward program's weights, masks) follow the parameters'
/// option: they are only read, so off the device they are fetched and
/// never written back.
bool TierPlanner::isAuto(exec::ParamOp p) const {
  return mode(p.getState() ? Class::States : Class::Params) == "auto";
}

StringRef TierPlanner::mode(Class c) const {
  for (const auto &[held, value] : llvm::reverse(overrides))
    if (held == c)
      return value;
  switch (c) {
  case Class::Params:
    return placeParams;
  case Class::States:
    return placeStates;
  case Class::Activations:
    return placeActivations;
  case Class::Gradients:
    return placeGradients;
  }
  return "auto";
}

LogicalResult TierPlanner::place(func::FuncOp func) {
  Block &body = func.getBody().front();
  // The candidates do not depend on where parameters live, so they are
  // listed once, on the unplaced program.
  actBytes.clear();
  gradBytes.clear();
  for (Value v : swappable(body))
    actBytes.push_back(storageBytes(v.getType()));
  for (Value g : gradientCandidates(body))
    gradBytes.push_back(storageBytes(g.getType()));
  storedBytes.clear();
  for (exec::ParamOp p : body.getOps<exec::ParamOp>())
    storedBytes.push_back(artifact::alignUp(storageBytes(p.getType()),
                                            artifact::kParamAlignment));
  Placement best = forced(func, actBytes.size(), gradBytes.size());
  bool anyAuto = placeActivations == "auto" || placeParams == "auto" ||
                 placeStates == "auto" || placeGradients == "auto";
  evaluated = progressCounted = 0;
  skippedSearches = unfitSearches = 0;
  shared = std::make_shared<SharedScores>();
  chosen = Score();
  PlacementBound bound;
  lead = prefetchLead;
  if (gpuMem > 0 && anyAuto) {
    bound = proven = placementBound(func, machine, gpuMem, cpuMem, hasSsd);
    layerStage.clear();
    checkBestUs = -1;
    searchFailed = false;
    emitted.clear();
    best = search(func, best);
    if (searchFailed || (plannerCheck && failed(checkScores(func))))
      return failure();
    // The lead the chosen plan was scored with, for --strata-plan-memory.
    setDeclaredAttr<exec::ExecDialect::PrefetchLeadAttrHelper>(
        func, Builder(func.getContext()).getF64FloatAttr(chosenLead));
    if (!layerStage.empty())
      func->emitRemark() << "planner's layer stage: " << layerStage;
    auto searchesRemark = [&](int64_t count, StringRef why) {
      if (count > 0)
        func->emitRemark() << "planner: " << count << " forced-class search"
                           << (count == 1 ? "" : "es") << " " << why;
    };
    searchesRemark(skippedSearches,
                   "left out: the tensors the forced class holds on one tier "
                   "alone exceed that tier's budget");
    searchesRemark(unfitSearches,
                   "stopped at the start: with everything else off the "
                   "device, the forced class needs more device memory than "
                   "the budget");
    // A device budget that cannot be met is reported after memory
    // planning, with the minimum; a full host tier is reported here.
    uint64_t host = hostBytes(func, best);
    if (cpuMem > 0 && host > cpuMem && !hasSsd)
      return func.emitError("the device budget (")
             << gpuMem << " bytes) needs " << host
             << " bytes of tensors on the host, over the host budget ("
             << cpuMem << " bytes), and no --ssd-dir was given";
  }
  // The counters of the trials are gone; these are what the final
  // placement inserts.
  counters = PlacementCounters();
  if (failed(apply(func, best)))
    return failure();
  markUpdates(func, best);
  Builder b(func.getContext());
  if (counters.recomputed > 0)
    setDeclaredAttr<exec::ExecDialect::RecomputedAttrHelper>(
        func, b.getDictionaryAttr({
                  b.getNamedAttr("recomputed_activations",
                                 b.getI64IntegerAttr(counters.recomputed)),
                  b.getNamedAttr("recomputed_bytes",
                                 b.getI64IntegerAttr(counters.recomputedBytes)),
              }));
  if (evaluated > 0) {
    // Rounded down: a bound stays a bound in microseconds.
    auto usFloor = [&](double s) {
      return b.getI64IntegerAttr(static_cast<int64_t>(std::floor(s * 1e6)));
    };
    SmallVector<NamedAttribute> entries{
        b.getNamedAttr("planner_evaluated", b.getI64IntegerAttr(evaluated)),
        // The placements scored anew (the rest met again, from the cache).
        b.getNamedAttr(
            "planner_distinct",
            b.getI64IntegerAttr(static_cast<int64_t>(llvm::count_if(
                shared->scores, [](auto &e) { return e.second.used; })))),
        b.getNamedAttr("planner_bound_us", usFloor(bound.seconds())),
        b.getNamedAttr("planner_bound_compute_us", usFloor(bound.compute)),
        b.getNamedAttr("planner_bound_to_device_us", usFloor(bound.toDevice)),
        b.getNamedAttr("planner_bound_to_host_us", usFloor(bound.toHost)),
        b.getNamedAttr("planner_bound_updates_us", usFloor(bound.updates)),
        b.getNamedAttr("planner_bound_ssd_read_us", usFloor(bound.ssdRead)),
        b.getNamedAttr("planner_bound_ssd_write_us", usFloor(bound.ssdWrite))};
    if (bound.comm > 0)
      entries.push_back(
          b.getNamedAttr("planner_bound_comm_us", usFloor(bound.comm)));
    if (bound.link > 0)
      entries.push_back(
          b.getNamedAttr("planner_bound_link_us", usFloor(bound.link)));
    if (bound.relaxed > 0) {
      const PlacementBound::Relaxation &r = bound.relaxation;
      auto bytes = [&](double v) {
        return b.getI64IntegerAttr(static_cast<int64_t>(std::llround(v)));
      };
      for (auto [key, value] :
           {std::pair{"planner_bound_relaxed_us", usFloor(bound.relaxed)},
            std::pair{"planner_relaxed_compute_us", usFloor(r.compute)},
            std::pair{"planner_relaxed_to_device_us", usFloor(r.toDevice)},
            std::pair{"planner_relaxed_to_host_us", usFloor(r.toHost)},
            std::pair{"planner_relaxed_cpu_us", usFloor(r.cpu)},
            std::pair{"planner_relaxed_recomputed_bytes", bytes(r.recomputed)},
            std::pair{"planner_relaxed_swapped_bytes", bytes(r.swapped)},
            std::pair{"planner_relaxed_fetched_bytes", bytes(r.fetched)},
            std::pair{"planner_relaxed_cpu_bytes", bytes(r.cpuUpdated)}})
        entries.push_back(b.getNamedAttr(key, value));
      if (!r.hostOnly)
        entries.push_back(
            b.getNamedAttr("planner_relaxed_link_us", usFloor(r.link)));
      else
        for (auto [key, value] :
             {std::pair{"planner_relaxed_host_only", b.getI64IntegerAttr(1)},
              std::pair{"planner_relaxed_ssd_read_us", usFloor(r.ssdRead)},
              std::pair{"planner_relaxed_ssd_write_us", usFloor(r.ssdWrite)},
              std::pair{"planner_relaxed_ssd_shared_us", usFloor(r.ssdShared)}})
          entries.push_back(b.getNamedAttr(key, value));
    }
    for (auto &[key, s] : naive)
      entries.push_back(b.getNamedAttr(
          s.fits() ? key + "_us" : key + "_over_bytes",
          b.getI64IntegerAttr(s.fits() ? s.stepUs
                                       : static_cast<int64_t>(s.overBytes))));
    setDeclaredAttr<exec::ExecDialect::PlannerAttrHelper>(
        func, b.getDictionaryAttr(entries));
  }
  return success();
}

LogicalResult TierPlanner::checkScores(func::FuncOp func) {
  // Every placement scored within the budgets is predicted at or over the
  // proven bound.
  int64_t boundUs = static_cast<int64_t>(std::floor(proven.seconds() * 1e6));
  size_t fit = 0;
  // Every score is checked, the guesses scored ahead that no search asked
  // for too; the remark counts those asked for (the same for any number
  // of threads).
  size_t used = 0;
  for (const auto &[key, e] : shared->scores) {
    const Score &s = e.score;
    used += e.used;
    if (!s.fits())
      continue;
    fit += e.used;
    if (s.stepUs < boundUs)
      return func.emitError("planner check: a scored placement is predicted "
                            "at ")
             << s.stepUs << " us, under the proven bound " << boundUs << " us";
  }
  auto diag = func.emitRemark()
              << "planner check: the bound holds for all " << fit << " of "
              << used << " placements scored within the budgets";
  if (checkBestUs >= 0 && chosen.fits())
    diag << "; the choice is "
         << llvm::formatv("{0:F4}", double(chosen.stepUs) / double(checkBestUs))
         << "x the fastest enumerated layer placement";
  return success();
}

namespace {

struct PlaceTiersPass
    : public strata::impl::PlaceTiersPassBase<PlaceTiersPass> {
  using PlaceTiersPassBase::PlaceTiersPassBase;

  MachineProfile machine;

  PlaceTiersPassOptions options() const {
    PlaceTiersPassOptions o;
    o.placeParams = placeParams;
    o.placeStates = placeStates;
    o.placeActivations = placeActivations;
    o.placeGradients = placeGradients;
    o.gpuMem = gpuMem;
    o.cpuMem = cpuMem;
    o.hasSsd = hasSsd;
    o.profile = profile;
    o.placeUpdates = placeUpdates;
    o.cpuJobBytes = cpuJobBytes;
    o.speculateUpdates = speculateUpdates;
    o.plannerEvaluations = plannerEvaluations;
    o.progress = progress;
    o.prefetchLead = prefetchLead;
    o.plannerCheck = plannerCheck;
    o.plannerThreads = plannerThreads;
    return o;
  }

  void runOnOperation() override {
    for (StringRef opt : {StringRef(placeParams), StringRef(placeStates),
                          StringRef(placeGradients)})
      if (opt != "auto" && opt != "device" && opt != "host" && opt != "ssd") {
        getOperation().emitError("unknown tier '")
            << opt << "' (auto, device, host or ssd)";
        return signalPassFailure();
      }
    StringRef acts = placeActivations;
    if (acts != "auto" && acts != "device" && acts != "host" && acts != "ssd" &&
        acts != "recompute") {
      getOperation().emitError("unknown activation placement '")
          << acts << "' (auto, device, host, ssd or recompute)";
      return signalPassFailure();
    }
    for (auto [what, opt] : {std::pair{"activations", acts},
                             std::pair{"gradients", StringRef(placeGradients)}})
      if (opt == "ssd" && !hasSsd) {
        getOperation().emitError(what) << " on the SSD need --ssd-dir";
        return signalPassFailure();
      }
    if (failed(loadProfile(getOperation(), profile, machine)))
      return signalPassFailure();
    TierPlanner planner(getOperation(), options(), machine);
    SmallVector<func::FuncOp> funcs(getOperation().getOps<func::FuncOp>());
    for (auto func : funcs) {
      if (failed(planner.place(func)))
        return signalPassFailure();
      const PlacementCounters &c = planner.counters;
      numFetches += c.fetches;
      numWritebacks += c.writebacks;
      numSwapped += c.swapped;
      numRecomputed += c.recomputed;
      numGradientsSwapped += c.gradientsSwapped;
    }
  }
};

} // namespace
