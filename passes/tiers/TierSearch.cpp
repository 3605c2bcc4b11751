//===- TierSearch.cpp - Placements, their scores and the search -----------===//
//
// The starting placements (forced by the options, greedy, the naive ones,
// the least device memory), scoring a placement on a clone of the module
// (memory plan, transfer schedule, predicted step) and the local search.
//
//===----------------------------------------------------------------------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/tiers/TierPlanner.h"

#include "passes/analysis/ArenaRanges.h"

#include "runtime/artifact/Plan.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Threading.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <thread>

#define DEBUG_TYPE "strata-place-tiers"

using namespace mlir;
using namespace strata;
using namespace strata::tiers;

/// The placement the options force, with everything automatic kept on
/// the device.
Placement TierPlanner::forced(func::FuncOp func, size_t numCandidates,
                              size_t numGradients) {
  Placement out;
  out.label = "as forced";
  for (exec::ParamOp p : func.getBody().front().getOps<exec::ParamOp>()) {
    StringRef choice = mode(p.getState() ? Class::States : Class::Params);
    out.tiers.push_back(
        p.getConstant() || choice == "auto" ? p.getTier() : namedTier(choice));
  }
  StringRef a = mode(Class::Activations);
  Act act = a == "host"        ? Act::Host
            : a == "ssd"       ? Act::Ssd
            : a == "recompute" ? Act::Recompute
                               : Act::Keep;
  out.acts.assign(numCandidates, act);
  StringRef g = mode(Class::Gradients);
  out.grads.assign(numGradients, g == "host"  ? Act::Host
                                 : g == "ssd" ? Act::Ssd
                                              : Act::Keep);
  return out;
}

/// A greedy placement, built on `func` (a clone: it is rewritten):
/// optimizer state leaves the device first, then parameters, largest
/// first, to the host while the host budget lasts and then to the SSD;
/// then activations, largest first, until the arena estimate fits, each
/// recomputed or swapped as `policy` says.
Placement TierPlanner::greedy(func::FuncOp func, const Placement &start,
                              Policy policy) {
  Block &body = func.getBody().front();
  Placement out = start;
  out.label = policy == Policy::Cost   ? "greedy"
              : policy == Policy::Swap ? "greedy, swaps only"
                                       : "greedy, recomputation first";
  SmallVector<exec::ParamOp> all(body.getOps<exec::ParamOp>());
  for (auto [p, tier] : llvm::zip(all, start.tiers))
    p.setTier(tier);
  uint64_t arena = liveArenaEstimate(body, arenaAlignment());
  uint64_t resident = 0, largestMoved = 0, host = 0;
  for (exec::ParamOp p : all) {
    uint64_t bytes = artifact::pagePadded(storageBytes(p.getType()));
    if (p.getTier() == exec::Tier::Device)
      resident += bytes;
    else if (p.getTier() == exec::Tier::Host)
      host += bytes;
  }
  SmallVector<unsigned> order;
  for (auto [i, p] : llvm::enumerate(all))
    if (isAuto(p) && p.getTier() == exec::Tier::Device)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
    if (all[a].getState() != all[b].getState())
      return bool(all[a].getState());
    return storageBytes(all[a].getType()) > storageBytes(all[b].getType());
  });
  // A fetched tensor needs a device copy while in use: budget for two of
  // the largest (the one in use and the next).
  for (unsigned i : order) {
    if (arena + resident + 2 * largestMoved <= gpuMem)
      break;
    uint64_t bytes = artifact::pagePadded(storageBytes(all[i].getType()));
    bool toHost = cpuMem == 0 || host + bytes <= cpuMem || !hasSsd;
    out.tiers[i] = toHost ? Tier::Host : Tier::Ssd;
    all[i].setTier(out.tiers[i]);
    host += toHost ? bytes : 0;
    resident -= bytes;
    largestMoved = std::max(largestMoved, bytes);
  }
  insertFetches(func);
  if (mode(Class::Activations) == "auto")
    greedyActivations(func, out, policy, resident, host);
  else
    applyForcedActivations(func, out);
  if (mode(Class::Gradients) != "auto")
    return out;
  // Then gradients, largest first, until the estimate fits.
  SmallVector<Value> grads = gradientCandidates(body);
  auto byBytes = llvm::to_vector(llvm::seq<unsigned>(0, grads.size()));
  std::stable_sort(byBytes.begin(), byBytes.end(), [&](unsigned a, unsigned b) {
    return storageBytes(grads[a].getType()) > storageBytes(grads[b].getType());
  });
  ArenaFit fit(body, resident, gpuMem, arenaAlignment());
  for (unsigned i : byBytes) {
    if (fit.fits())
      break;
    uint64_t bytes = storageBytes(grads[i].getType());
    bool toHost = cpuMem == 0 || host + bytes <= cpuMem;
    if (!toHost && !hasSsd)
      continue;
    if (!swapGradient(body, grads[i], toHost ? Tier::Host : Tier::Ssd, i))
      continue;
    fit.moved(bytes);
    out.grads[i] = toHost ? Act::Host : Act::Ssd;
    host += toHost ? bytes : 0;
  }
  return out;
}

Placement TierPlanner::greedyOnClone(func::FuncOp func, const Placement &start,
                                     Policy policy) {
  OwningOpRef<ModuleOp> clone(cast<ModuleOp>(module->clone()));
  auto copy = clone->lookupSymbol<func::FuncOp>(func.getSymName());
  PlacementCounters saved = counters;
  Placement p = greedy(copy, start, policy);
  counters = saved;
  return p;
}

/// Rewrites `func` with the activation choices `out` already holds (the
/// forced ones), so that later greedy steps see them.
void TierPlanner::applyForcedActivations(func::FuncOp func,
                                         const Placement &out) {
  Block &body = func.getBody().front();
  OrderedRewrite ordered(*this, body);
  SmallVector<Value> candidates = swappable(body);
  llvm::DenseSet<Value> kept;
  for (auto [v, act] : llvm::zip(candidates, out.acts))
    if (act == Act::Keep)
      kept.insert(v);
  unsigned swaps = 0;
  for (auto [v, act] : llvm::zip(candidates, out.acts))
    if (act == Act::Host || act == Act::Ssd)
      applyAct(body, v, act, kept, swaps);
  for (auto [v, act] : llvm::zip(candidates, out.acts))
    if (act == Act::Recompute)
      applyAct(body, v, act, kept, swaps);
}

/// The greedy activation step: largest first until the arena estimate
/// fits, each recomputed or swapped as `policy` says.
void TierPlanner::greedyActivations(func::FuncOp func, Placement &out,
                                    Policy policy, uint64_t resident,
                                    uint64_t &host) {
  Block &body = func.getBody().front();
  OrderedRewrite ordered(*this, body);
  SmallVector<Value> candidates = swappable(body);
  assert(candidates.size() == out.acts.size() && "candidates changed");
  llvm::DenseMap<Value, unsigned> indexOf;
  for (auto [i, v] : llvm::enumerate(candidates))
    indexOf[v] = i;
  llvm::DenseSet<Value> kept(candidates.begin(), candidates.end());
  SmallVector<Value> bySize = candidates;
  std::stable_sort(bySize.begin(), bySize.end(), [](Value a, Value b) {
    return storageBytes(a.getType()) > storageBytes(b.getType());
  });
  unsigned swaps = 0;
  ArenaFit fit(body, resident, gpuMem, arenaAlignment());
  for (Value v : bySize) {
    if (fit.fits())
      break;
    uint64_t bytes = storageBytes(v.getType());
    bool toHost = cpuMem == 0 || host + bytes <= cpuMem;
    Act moved = toHost ? Act::Host : Act::Ssd;
    SmallVector<Operation *> chain;
    if (policy != Policy::Swap)
      chain = chainFor(v, kept);
    double again = chain.empty() ? -1 : chainSeconds(chain);
    Tier to = moved == Act::Ssd ? Tier::Ssd : Tier::Host;
    double round = transferSeconds(bytes, to, false, machine) +
                   transferSeconds(bytes, to, true, machine);
    Act act = again >= 0 && (policy == Policy::Recompute || again < round)
                  ? Act::Recompute
              : moved == Act::Ssd && !hasSsd ? Act::Keep
                                             : moved;
    act = applyAct(body, v, act, kept, swaps, chain);
    if (act != Act::Keep)
      fit.moved(bytes);
    out.acts[indexOf[v]] = act;
    if (act == Act::Host)
      host += bytes;
  }
}

std::string TierPlanner::scoreKey(const Placement &placement) const {
  std::string key;
  key.reserve(placement.tiers.size() + placement.acts.size() +
              placement.grads.size() + placement.tiers.size() + 3);
  for (Tier t : placement.tiers)
    key.push_back(static_cast<char>(t));
  key.push_back('|');
  for (Act a : placement.acts)
    key.push_back(static_cast<char>(a));
  key.push_back('|');
  for (Act a : placement.grads)
    key.push_back(static_cast<char>(a));
  key.push_back('|');
  // No decisions and every decision Auto are the same placement.
  for (size_t i = 0; i < placement.tiers.size(); ++i) {
    UpdateOn u =
        placement.updates.empty() ? UpdateOn::Auto : placement.updates[i];
    key.push_back(u == UpdateOn::Cpu ? 'c' : u == UpdateOn::Device ? 'd' : 'a');
  }
  key += "|" + std::to_string(lead);
  return key;
}

/// Applies `placement` to a clone of the module, plans its memory and
/// predicts its step.
Score TierPlanner::score(func::FuncOp func, const Placement &placement) {
  ++evaluated;
  // Scoring is deterministic: a placement met again costs nothing (it
  // still counts as an evaluation, so a search takes the same path
  // whatever was scored before it, by it or by another search).
  std::string key = scoreKey(placement);
  std::unique_lock<std::mutex> lock(shared->mutex);
  if (evaluated > progressCounted) {
    progressCounted = evaluated;
    progressLine();
  }
  for (;;) {
    if (auto it = shared->scores.find(key); it != shared->scores.end()) {
      markUsed(it->second);
      return it->second.score;
    }
    if (!shared->inFlight.count(key))
      break;
    // Another thread scores it now: score a guess meanwhile, or wait.
    if (!scoreGuess(func, lock))
      shared->changed.wait(lock);
  }
  shared->inFlight.insert(key);
  lock.unlock();
  Score s = scoreOnClone(func, placement);
  lock.lock();
  storeScore(std::move(key), s, /*used=*/true, lock);
  return s;
}

void TierPlanner::storeScore(std::string key, const Score &s, bool used,
                             std::unique_lock<std::mutex> &lock) {
  (void)lock;
  shared->inFlight.erase(key);
  auto [it, added] =
      shared->scores.emplace(std::move(key), SharedScores::Entry{s, false});
  if (used)
    markUsed(it->second);
  shared->changed.notify_all();
}

void TierPlanner::markUsed(SharedScores::Entry &e) {
  if (e.used)
    return;
  e.used = true;
  if (e.score.fits() && (shared->bestUs < 0 || e.score.stepUs < shared->bestUs))
    shared->bestUs = e.score.stepUs;
}

bool TierPlanner::scoreGuess(func::FuncOp func,
                             std::unique_lock<std::mutex> &lock) {
  while (!shared->guesses.empty()) {
    SharedScores::Guess g = std::move(shared->guesses.front());
    shared->guesses.pop_front();
    if (shared->scores.count(g.key) || shared->inFlight.count(g.key))
      continue;
    shared->inFlight.insert(g.key);
    lock.unlock();
    double saved = lead;
    lead = g.lead;
    Score s = scoreOnClone(func, g.placement);
    lead = saved;
    lock.lock();
    storeScore(std::move(g.key), s, /*used=*/false, lock);
    return true;
  }
  return false;
}

void TierPlanner::scoreAhead(func::FuncOp func, std::vector<Placement> trials) {
  std::vector<std::string> keys;
  for (const Placement &p : trials)
    keys.push_back(scoreKey(p));
  std::unique_lock<std::mutex> lock(shared->mutex);
  for (auto [key, p] : llvm::zip(keys, trials))
    if (!shared->scores.count(key) && !shared->inFlight.count(key))
      shared->guesses.push_back({key, std::move(p), lead});
  shared->changed.notify_all();
  for (;;) {
    if (llvm::all_of(keys, [&](const std::string &k) {
          return shared->scores.count(k) > 0;
        }))
      return;
    if (!scoreGuess(func, lock))
      shared->changed.wait(lock);
  }
}

unsigned TierPlanner::scoreAheadWidth() {
  std::lock_guard<std::mutex> lock(shared->mutex);
  return shared->idle == 0 ? 0 : shared->idle + 1;
}

void TierPlanner::help(StringRef funcName,
                       function_ref<OwningOpRef<ModuleOp>()> makeClone,
                       const bool &stop) {
  OwningOpRef<ModuleOp> clone;
  func::FuncOp copy;
  std::unique_lock<std::mutex> lock(shared->mutex);
  while (!stop) {
    if (shared->guesses.empty()) {
      ++shared->idle;
      shared->changed.wait(lock);
      --shared->idle;
      continue;
    }
    if (!clone) {
      lock.unlock();
      clone = makeClone();
      module = *clone;
      candidatesOf = nullptr;
      copy = clone->lookupSymbol<func::FuncOp>(funcName);
      lock.lock();
      continue;
    }
    scoreGuess(copy, lock);
  }
}

bool TierPlanner::certainlyOver(const Placement &placement) const {
  // The memory plan lays the parameter region and the host region out
  // from the stored tensors of each tier, each aligned as here, and adds
  // to them (the arena beside the device region; swap spaces, landing
  // buffers and staging to the host's).
  uint64_t device = 0, host = 0;
  for (auto [tier, bytes] : llvm::zip(placement.tiers, storedBytes)) {
    if (tier == Tier::Host)
      host += bytes;
    else if (tier == Tier::Device)
      device += bytes;
  }
  return (gpuMem > 0 && device > uint64_t(gpuMem)) ||
         (cpuMem > 0 && host > uint64_t(cpuMem));
}

std::optional<Score> TierPlanner::scoreAgainst(func::FuncOp func,
                                               const Placement &placement,
                                               const Score &incumbent) {
  if (!incumbent.fits() || !certainlyOver(placement))
    return score(func, placement);
  // --planner-check scores it anyway: it must not fit.
  if (plannerCheck) {
    if (score(func, placement).fits()) {
      searchFailed = true;
      func.emitError("planner check: a placement whose stored tensors "
                     "alone exceed a budget was scored within the budgets");
    }
  } else {
    ++evaluated;
  }
  return std::nullopt;
}

/// With `progress`: a line every few seconds, only when planning runs
/// that long (called with the shared lock held, once per evaluation).
void TierPlanner::progressLine() {
  // Scores beyond a budget (the layer stage's) add to the total as they
  // are made, so the line never counts past it.
  if (beyondBudget)
    ++shared->total;
  if (!progress)
    return;
  auto now = std::chrono::steady_clock::now();
  if (shared->evaluated++ == 0) {
    shared->lastReport = now;
    return;
  }
  if (now - shared->lastReport <= std::chrono::seconds(3))
    return;
  shared->lastReport = now;
  llvm::errs() << "strata-compile: planning placement: " << shared->evaluated
               << "/" << shared->total << " placements scored";
  if (shared->bestUs >= 0)
    llvm::errs() << ", best so far "
                 << llvm::format("%.2f", shared->bestUs / 1e3)
                 << " ms predicted";
  llvm::errs() << "\n";
}

/// Applies `placement` to a clone of the module, plans its memory and
/// predicts its step (score() without the cache).
Score TierPlanner::scoreOnClone(func::FuncOp func, const Placement &placement) {
  MLIRContext *ctx = module.getContext();
  // What the passes say about a candidate is not the user's business; the
  // other searches' diagnostics (running at once) pass on.
  ScopedDiagnosticHandler quiet(
      ctx, [self = std::this_thread::get_id()](Diagnostic &) {
        return success(std::this_thread::get_id() == self);
      });
  // The candidates are found once on `func` and mapped into each clone:
  // the rewrites insert transfers and recomputations, which are neither,
  // and leave the order of the rest (apply() found them on the clone
  // after inserting its fetches: 6% of a score at GPT-3 175B).
  if (candidatesOf != func.getOperation()) {
    Block &body = func.getBody().front();
    candidates.acts = swappable(body);
    candidates.grads = gradientCandidates(body);
    candidatesOf = func.getOperation();
  }
  IRMapping mapping;
  OwningOpRef<ModuleOp> clone(cast<ModuleOp>(module->clone(mapping)));
  auto copy = clone->lookupSymbol<func::FuncOp>(func.getSymName());
  auto inClone = [&](ArrayRef<Value> values) {
    return llvm::to_vector(
        llvm::map_range(values, [&](Value v) { return mapping.lookup(v); }));
  };
  PlacementCounters saved = counters;
  LogicalResult applied =
      apply(copy, placement,
            Candidates{inClone(candidates.acts), inClone(candidates.grads)});
  counters = saved;
  if (failed(applied))
    return Score();
  markUpdates(copy, placement);
  // Updates that would run on the CPU change the host link's traffic and
  // the host memory (landing buffers): score the plan they make.
  offloadOptimizerUpdates(copy, placeUpdates, machine, cpuJobBytes, cpuMem,
                          speculateUpdates);
  // The memory plan and the transfer schedule the pipeline makes next,
  // called directly (no nested pass manager per candidate).
  PlanMemoryPassOptions memory;
  memory.gpuMem = gpuMem;
  memory.prefetchLead = lead;
  planMemory(copy, memory, &machine, /*report=*/false, &memoryCache);
  // What each kernel reads and writes, found once for both.
  std::vector<artifact::StepAccesses> accesses;
  scheduleTransfers(copy, {}, &accesses);
  // The profile this pass read already, not the file again per score.
  predictStepTime(copy, machine, &accesses);
  exec::RegionSizes regions = exec::regionSizes(copy);
  Score s;
  uint64_t device = regions.device(), host = regions.host;
  s.overBytes = (gpuMem && device > gpuMem ? device - gpuMem : 0) +
                (cpuMem && host > cpuMem ? host - cpuMem : 0);
  auto predicted =
      getDeclaredAttr<exec::ExecDialect::PredictedAttrHelper>(copy);
  auto us = [&](StringRef key) {
    return cast<IntegerAttr>(predicted.get(key)).getInt();
  };
  s.stepUs = us("predicted_step_us");
  s.usage.step = s.stepUs * 1e-6;
  s.usage.compute = us("predicted_compute_us") * 1e-6;
  s.usage.toDevice = us("predicted_host_to_device_us") * 1e-6;
  s.usage.toHost = us("predicted_device_to_host_us") * 1e-6;
  s.usage.ssdRead = us("predicted_ssd_read_us") * 1e-6;
  s.usage.ssdWrite = us("predicted_ssd_write_us") * 1e-6;
  s.usage.cpu = us("predicted_cpu_update_us") * 1e-6;
  auto phases = cast<DenseI64ArrayAttr>(predicted.get("predicted_phases_us"));
  for (int q = 0; q < 6; ++q)
    s.usage.phase[q] = (phases[0] + phases[q + 1]) * 1e-6;
  s.usage.device = static_cast<double>(device);
  s.usage.host = static_cast<double>(host);
  return s;
}

/// Moves `choices` (indexed like `bytes`) off the device: to the host
/// while `host` stays within the host budget, then to the SSD.
void TierPlanner::offDevice(ArrayRef<uint64_t> bytes,
                            SmallVectorImpl<Act> &choices,
                            uint64_t &host) const {
  for (auto [n, act] : llvm::zip(bytes, choices)) {
    bool toHost = cpuMem == 0 || host + n <= cpuMem || !hasSsd;
    act = toHost ? Act::Host : Act::Ssd;
    host += toHost ? n : 0;
  }
}

SmallVector<std::pair<Class, std::string>> TierPlanner::forcedOptions() const {
  SmallVector<std::pair<Class, std::string>> out;
  SmallVector<StringRef> tiers{"device", "host"};
  if (hasSsd)
    tiers.push_back("ssd");
  for (Class c :
       {Class::Params, Class::States, Class::Activations, Class::Gradients}) {
    if (mode(c) != "auto")
      continue;
    for (StringRef t : tiers)
      out.push_back({c, t.str()});
    if (c == Class::Activations)
      out.push_back({c, "recompute"});
  }
  return out;
}

/// How many threads the planner's work may take at once (--planner-
/// threads; 1 without the context's multithreading).
static unsigned plannerThreadCount(MLIRContext *ctx, int64_t option) {
  if (!ctx->isMultithreadingEnabled())
    return 1;
  return llvm::hardware_concurrency(
             static_cast<unsigned>(std::max<int64_t>(0, option)))
      .compute_thread_count();
}

/// Makes every tier and queue attribute a search may set, before threads
/// start. The uniquer makes a new attribute's storage behind atomics in
/// uninstrumented MLIR, so the thread that made one first and the threads
/// that then find it would look unsynchronised; made before the threads
/// start, every search only finds them.
static void makeSharedAttributes(MLIRContext *ctx) {
  for (unsigned v = 0; v <= exec::getMaxEnumValForTier(); ++v)
    if (std::optional<exec::Tier> tier = exec::symbolizeTier(v))
      (void)exec::TierAttr::get(ctx, *tier);
  for (unsigned v = 0; v <= exec::getMaxEnumValForQueue(); ++v)
    if (std::optional<exec::Queue> queue = exec::symbolizeQueue(v))
      (void)exec::QueueAttr::get(ctx, *queue);
}

/// The planner's search (see place()). With every class left to it, the
/// search a run forcing one class would make (--place-states ssd, ...) is
/// made too, with the same start and the same budget, for every such
/// option, and the best result of all is taken: no one-class forced
/// placement can then end up predicted faster than the planner's choice.
/// Each of those searches costs up to --planner-evaluations scores, so
/// planning takes up to 10 searches (14 with an SSD directory)
/// (the score cache makes it less where they meet).
///
/// The searches are independent: each is made by a copy of the planner
/// on a clone of its own (runSearches), so they run at once on
/// --planner-threads cores, in two rounds (the planner's own searches,
/// then the forced classes' with the lead that won). Their results are
/// compared in the order a single thread makes them, ties to the first,
/// so the plan is the same for any number of threads.
Placement TierPlanner::search(func::FuncOp func, const Placement &start) {
  bool allAuto = llvm::all_of(
      std::initializer_list<Class>{Class::Params, Class::States,
                                   Class::Activations, Class::Gradients},
      [&](Class c) { return mode(c) == "auto"; });
  SmallVector<std::pair<Class, std::string>> replicas;
  if (allAuto)
    replicas = forcedOptions();
  {
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->total = plannerEvaluations * (2 + replicas.size());
  }
  // The planner's own search with the timed windows, and (with a lead)
  // the same search with PlanMemory's windows in ops: the timed windows
  // take device memory that some plans do better to spend on keeping
  // tensors there (GPT-3 13B at batch 1 on the RTX 4090 profile: 5.94 s
  // a step this way, 6.81 s with them), while others need them
  // (LLaMA-7B on the A100 profile: 1.34 s with them). The lead is the
  // plan's, like its placement.
  SmallVector<std::optional<std::pair<Class, std::string>>> own{std::nullopt};
  SmallVector<double> ownLeads{prefetchLead};
  if (prefetchLead > 0) {
    own.push_back(std::nullopt);
    ownLeads.push_back(0);
  }
  std::vector<Run> runs = runSearches(func, start, own, ownLeads);
  size_t won = 0;
  for (size_t i = 1; i < runs.size(); ++i)
    if (runs[i].score < runs[won].score)
      won = i;
  Placement result = std::move(runs[won].placement);
  Score resultScore = runs[won].score;
  auto ownNaive = std::move(runs[won].naive);
  chosenLead = ownLeads[won];
  // What the layer stage said, as the last of them left it.
  layerStage = runs.back().layerStage;
  checkBestUs = runs.back().checkBestUs;
  for (const Run &r : runs)
    evaluated += r.evaluated;
  // The forced classes' searches with the lead that won. Where the tensors
  // a forced class holds on one tier alone exceed that tier's budget,
  // every placement of its search is over the budgets, and cannot beat a
  // placement within them: that search is left out. Parameters or states
  // held on the device (the parameter region holds them) or on the host
  // (the host region does); activations all kept on the device, each of
  // which the forward pass makes and the backward pass reads, so that all
  // are live in the arena at once when the backward pass starts.
  SmallVector<std::optional<std::pair<Class, std::string>>> held;
  for (auto &option : replicas) {
    uint64_t budget = option.second == "device" ? uint64_t(gpuMem)
                      : option.second == "host" ? uint64_t(cpuMem)
                                                : 0;
    uint64_t bytes = 0;
    if (option.first == Class::Params || option.first == Class::States)
      bytes = residentBytes(func, option.first);
    else if (option.first == Class::Activations && option.second == "device")
      bytes = boundaryBytes(func);
    if (resultScore.fits() && budget > 0 && bytes > budget) {
      ++skippedSearches;
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->total -= plannerEvaluations;
      continue;
    }
    held.push_back(option);
  }
  SmallVector<double> leads(held.size(), chosenLead);
  runs = runSearches(func, start, held, leads, resultScore.fits());
  for (auto [option, run] : llvm::zip(held, runs)) {
    unfitSearches += run.unfit;
    LLVM_DEBUG(llvm::dbgs()
               << "as forced (class " << int(option->first) << " at "
               << option->second << "): over " << run.score.overBytes << " B, "
               << run.score.stepUs << " us\n");
    evaluated += run.evaluated;
    if (run.score < resultScore) {
      result = std::move(run.placement);
      resultScore = run.score;
    }
  }
  // The choice searched again locally with two thirds of its lead. The
  // memory plan halves a lead until the plan fits (3, 1.5, 0.75, ...)
  // and every search settles on placements that fit the windows it was
  // scored with, so a lead between the halvings is never tried; from
  // the windows it gives, the local search reaches placements it could
  // not step to before (LLaMA-7B on the A100 profile: 1.122 s a step
  // before, 1.048 s after, with less recomputation). One more search's
  // budget, on one thread; none where the choice has no lead (the
  // windows in ops).
  if (chosenLead > 0) {
    {
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->total += plannerEvaluations;
    }
    lead = chosenLead * 2 / 3;
    // The other threads score its guesses (improve()), each as a copy of
    // the planner on a clone of its own, both made here before any runs.
    unsigned helpers =
        plannerThreadCount(module.getContext(), plannerThreads) - 1;
    if (helpers > 0)
      makeSharedAttributes(module.getContext());
    std::vector<std::unique_ptr<TierPlanner>> copies;
    std::vector<OwningOpRef<ModuleOp>> clones;
    for (unsigned t = 0; t < helpers; ++t) {
      copies.push_back(std::make_unique<TierPlanner>(*this));
      clones.emplace_back(cast<ModuleOp>(module->clone()));
    }
    bool stop = false;
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < helpers; ++t)
      pool.emplace_back([&, t] {
        copies[t]->help(
            func.getSymName(), [&] { return std::move(clones[t]); }, stop);
      });
    Placement polished = improve(func, result, score(func, result),
                                 evaluated + plannerEvaluations);
    {
      std::lock_guard<std::mutex> lock(shared->mutex);
      stop = true;
      shared->changed.notify_all();
    }
    for (std::thread &t : pool)
      t.join();
    if (chosen < resultScore) {
      result = std::move(polished);
      resultScore = chosen;
      chosenLead = lead;
    }
  }
  lead = chosenLead;
  naive = std::move(ownNaive);
  chosen = resultScore;
  return result;
}

namespace {
/// Where the search running on this thread keeps its diagnostics (null
/// outside runSearches).
thread_local std::vector<TierPlanner::Deferred> *deferredDiagnostics = nullptr;
} // namespace

std::vector<TierPlanner::Run> TierPlanner::runSearches(
    func::FuncOp func, const Placement &start,
    ArrayRef<std::optional<std::pair<Class, std::string>>> held,
    ArrayRef<double> leads, bool incumbentFits) {
  std::vector<Run> runs(held.size());
  // A search's own diagnostics are kept with its result and emitted in
  // the searches' order, whichever finished first.
  MLIRContext *ctx = module.getContext();
  ScopedDiagnosticHandler collect(ctx, [](Diagnostic &d) {
    if (!deferredDiagnostics)
      return failure();
    deferredDiagnostics->push_back({d.getLocation(), d.getSeverity(), d.str()});
    return success();
  });
  // Clones are made one at a time (each reads the whole module) and live
  // while their search runs.
  std::mutex cloning;
  auto one = [&](size_t i) {
    deferredDiagnostics = &runs[i].diagnostics;
    auto done = llvm::make_scope_exit([] { deferredDiagnostics = nullptr; });
    OwningOpRef<ModuleOp> clone;
    {
      std::lock_guard<std::mutex> lock(cloning);
      clone = cast<ModuleOp>(module->clone());
    }
    TierPlanner worker(*this);
    worker.module = *clone;
    worker.evaluated = worker.progressCounted = 0;
    worker.candidatesOf = nullptr;
    worker.lead = leads[i];
    auto copy = clone->lookupSymbol<func::FuncOp>(func.getSymName());
    Placement from = start;
    if (held[i]) {
      worker.overrides.push_back(*held[i]);
      from = worker.forced(copy, actBytes.size(), gradBytes.size());
    }
    Run &r = runs[i];
    // The held class's least-device placement, as the search's own starts
    // make it (forcedStarts: the same placement, so its score is the
    // search's to reuse). When even it needs more device memory than the
    // budget, that search is taken to fit nowhere, and so not to beat an
    // incumbent that fits: it is the planner's minimum for the class (the
    // one the error for a budget nothing fits quotes), though not a proven
    // one (where its updates run, for one, stays as the start has it).
    // --planner-check searches anyway and fails the compile if that search
    // fits. Only the device's need: the placement fills the host first,
    // so a miss there may be another placement's fit (activations swapped
    // to a host full of parameters is GPT-3 175B b8's best search).
    std::optional<Score> least;
    if (held[i] && incumbentFits) {
      Placement p = worker.leastDevice(
          copy, worker.greedyOnClone(copy, from, Policy::Cost));
      Score s = worker.score(copy, p);
      if (s.usage.device > static_cast<double>(gpuMem))
        least = s;
      if (least && !plannerCheck) {
        r.placement = std::move(p);
        r.score = s;
        r.evaluated = worker.evaluated;
        r.unfit = true;
        std::lock_guard<std::mutex> lock(shared->mutex);
        shared->total -= plannerEvaluations - worker.evaluated;
        return;
      }
    }
    r.placement = worker.searchFrom(copy, from, plannerEvaluations);
    if (least && worker.chosen.fits()) {
      copy.emitError("planner check: a forced class's search fits where its "
                     "least-device placement needs ")
          << static_cast<uint64_t>(least->usage.device)
          << " B of device memory, over the budget";
    }
    r.score = worker.chosen;
    r.naive = std::move(worker.naive);
    r.evaluated = worker.evaluated;
    r.layerStage = std::move(worker.layerStage);
    r.checkBestUs = worker.checkBestUs;
  };
  // Each search reads and rewrites only its own clone; what they share is
  // the context (whose uniquing is thread-safe when its multithreading is
  // on) and the score cache (under its lock).
  unsigned threads =
      std::min<unsigned>(plannerThreadCount(ctx, plannerThreads), held.size());
  if (threads <= 1) {
    for (size_t i = 0; i < held.size(); ++i)
      one(i);
  } else {
    // Plain threads taking the next search until none is left (the
    // searches differ in length; the order of results does not depend on
    // which thread made which). Not LLVM's thread pool: its futures
    // synchronise inside the uninstrumented C++ library, where
    // ThreadSanitizer cannot see it.
    makeSharedAttributes(ctx);
    // The longest searches first, so that no thread is left with a long
    // one at the end while the others idle: those that run the layer
    // stage from several bases (the planner's own, gradients forced),
    // then those from one (activations forced), then the rest.
    auto rank = [&](size_t i) {
      if (!held[i] || held[i]->first == Class::Gradients)
        return 0;
      return held[i]->first == Class::Activations ? 1 : 2;
    };
    std::vector<size_t> schedule(held.size());
    std::iota(schedule.begin(), schedule.end(), size_t(0));
    std::stable_sort(schedule.begin(), schedule.end(),
                     [&](size_t a, size_t b) { return rank(a) < rank(b); });
    // A thread with no search left to start scores the running searches'
    // guesses (help()) until the last search ends.
    std::atomic<size_t> next{0};
    size_t finished = 0;
    bool allFinished = false;
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (size_t k; (k = next.fetch_add(1)) < held.size();) {
          one(schedule[k]);
          std::lock_guard<std::mutex> lock(shared->mutex);
          if (++finished == held.size()) {
            allFinished = true;
            shared->changed.notify_all();
          }
        }
        TierPlanner helper(*this);
        helper.help(
            func.getSymName(),
            [&] {
              std::lock_guard<std::mutex> lock(cloning);
              return OwningOpRef<ModuleOp>(cast<ModuleOp>(module->clone()));
            },
            allFinished);
      });
    for (std::thread &t : pool)
      t.join();
  }
  // The searches often say the same (the layer stage's remarks, made by
  // each search that runs it): each is emitted once a compile.
  for (Run &r : runs)
    for (Deferred &d : r.diagnostics) {
      if (!emitted.insert({static_cast<int>(d.severity), d.message}).second)
        continue;
      switch (d.severity) {
      case DiagnosticSeverity::Error:
        emitError(d.loc) << d.message;
        searchFailed = true;
        break;
      case DiagnosticSeverity::Warning:
        emitWarning(d.loc) << d.message;
        break;
      default:
        emitRemark(d.loc) << d.message;
      }
    }
  return runs;
}

/// Bytes the tensors of class `c` (parameters or optimizer states, not
/// constants) that the options leave to the planner take on the device
/// when all of them are there: the device region holds at least these.
uint64_t TierPlanner::residentBytes(func::FuncOp func, Class c) const {
  uint64_t bytes = 0;
  for (exec::ParamOp p : func.getBody().front().getOps<exec::ParamOp>())
    if (isAuto(p) && !p.getConstant() &&
        bool(p.getState()) == (c == Class::States))
      bytes += storageBytes(p.getType());
  return bytes;
}

/// Bytes of the activations the backward pass reads that the forward
/// pass makes before the first backward kernel: kept on the device, all
/// of them are in the arena at once when the backward pass starts.
uint64_t TierPlanner::boundaryBytes(func::FuncOp func) const {
  Block &body = func.getBody().front();
  Operation *firstBackward = firstBackwardKernel(body);
  if (!firstBackward)
    return 0;
  uint64_t bytes = 0;
  for (Value v : swappable(body))
    if (v.getDefiningOp()->isBeforeInBlock(firstBackward))
      bytes += storageBytes(v.getType());
  return bytes;
}

/// One search from `start` with `budget` scores: the greedy and naive
/// starting placements, then local searches from the best of them.
Placement TierPlanner::searchFrom(func::FuncOp func, const Placement &start,
                                  int64_t budget) {
  int64_t limit = evaluated + budget;
  std::vector<std::pair<Placement, Score>> tried;
  auto consider = [&](Placement p) {
    Score s = score(func, p);
    LLVM_DEBUG(llvm::dbgs() << p.label << ": over " << s.overBytes << " B, "
                            << s.stepUs << " us\n");
    tried.push_back({std::move(p), s});
  };
  bool activationsAuto = mode(Class::Activations) == "auto";
  for (Policy policy : {Policy::Cost, Policy::Swap, Policy::Recompute}) {
    consider(greedyOnClone(func, start, policy));
    if (!activationsAuto)
      break;
  }
  naive.clear();
  naive.push_back({"planner_greedy", tried.front().second});
  if (activationsAuto) {
    // The naive plans, with the first greedy plan's parameters: every
    // activation swapped (to the host while the host budget lasts), and
    // every one that can be recomputed recomputed.
    Placement swapAll = tried.front().first;
    swapAll.label = "swap all activations";
    uint64_t host = hostBytes(func, swapAll);
    offDevice(actBytes, swapAll.acts, host);
    Placement recomputeAll = tried.front().first;
    recomputeAll.label = "recompute all activations";
    recomputeAll.acts.assign(recomputeAll.acts.size(), Act::Recompute);
    consider(swapAll);
    naive.push_back({"planner_swap_all", tried.back().second});
    consider(recomputeAll);
    naive.push_back({"planner_recompute_all", tried.back().second});
  }
  size_t numBases = tried.size();
  // The least device memory the options allow. When nothing fits, this
  // is the plan whose need the error reports as the minimum.
  Placement least = leastDevice(func, tried.front().first);
  consider(least);
  SmallVector<std::pair<Class, std::string>> forcedClasses =
      forcedStarts(func, consider);
  // The layer stage (TierSolve.cpp), from the activation and gradient
  // choices of the greedy and naive starts, wherever parameters and
  // states are both left to it (solveLayers checks): in the planner's own
  // search, and in the search of a run that forces activations or
  // gradients, which a compile given that option makes too (without it
  // such a run could end up faster than the planner's choice).
  {
    std::vector<Placement> bases;
    std::set<std::string> seen;
    // Each base costs a score per layer configuration (about a second
    // each at 175B).
    for (size_t i = 0; i < numBases; ++i) {
      const Placement &p = tried[i].first;
      std::string key;
      for (Act a : p.acts)
        key.push_back(static_cast<char>(a));
      key.push_back('|');
      for (Act a : p.grads)
        key.push_back(static_cast<char>(a));
      if (seen.insert(key).second)
        bases.push_back(p);
    }
    // Its scores come on top of the search's budget: it is a start, and
    // the local search from the best start keeps all it had.
    int64_t before = evaluated;
    beyondBudget = true;
    if (auto solved = solveLayers(func, bases))
      tried.push_back(std::move(*solved));
    beyondBudget = false;
    limit += evaluated - before;
  }
  auto bestIt =
      std::min_element(tried.begin(), tried.end(),
                       [](auto &a, auto &b) { return a.second < b.second; });
  // Part of what is left to the best start; the rest to one search per
  // class, as a run forcing that class would do it: from the best
  // placement tried that has the whole class on one tier (or one
  // activation choice), with the class held there (a local search from
  // the best start alone can settle where one of those runs does better).
  SmallVector<std::pair<size_t, std::pair<Class, std::string>>> order;
  for (Class c :
       {Class::Params, Class::States, Class::Activations, Class::Gradients}) {
    if (mode(c) != "auto")
      continue;
    std::optional<size_t> pick;
    std::string value;
    for (const auto &[forcedClass, forcedValue] : forcedClasses) {
      if (forcedClass != c)
        continue;
      for (size_t i = 0; i < tried.size(); ++i)
        if (uniform(func, tried[i].first, c, forcedValue) &&
            (!pick || tried[i].second < tried[*pick].second)) {
          pick = i;
          value = forcedValue;
        }
    }
    if (pick)
      order.push_back({*pick, {c, value}});
  }
  // What is left (none when the starts and the layer stage spent it all:
  // a signed share, or the search would run without a limit).
  int64_t left = std::max<int64_t>(0, limit - evaluated);
  Placement result =
      improve(func, bestIt->first, bestIt->second,
              evaluated + left / (1 + static_cast<int64_t>(order.size()) / 2));
  Score resultScore = chosen;
  for (auto [k, entry] : llvm::enumerate(order)) {
    int64_t share =
        (limit - evaluated) / static_cast<int64_t>(order.size() - k);
    if (share <= 0)
      break;
    overrides.push_back(entry.second);
    Placement p = improve(func, tried[entry.first].first,
                          tried[entry.first].second, evaluated + share);
    Score ps = chosen;
    overrides.pop_back();
    if (ps < resultScore) {
      result = std::move(p);
      resultScore = ps;
    }
  }
  chosen = resultScore;
  return result;
}

/// `base` with everything automatic off the device (to the host while
/// the host budget lasts, then the SSD), every automatic activation and
/// gradient swapped.
Placement TierPlanner::leastDevice(func::FuncOp func, const Placement &base) {
  Placement least = base;
  least.label = "everything off the device";
  uint64_t host = 0;
  for (auto [i, p] :
       llvm::enumerate(func.getBody().front().getOps<exec::ParamOp>())) {
    uint64_t bytes = artifact::pagePadded(storageBytes(p.getType()));
    if (isAuto(p)) {
      bool toHost = cpuMem == 0 || host + bytes <= cpuMem || !hasSsd;
      least.tiers[i] = toHost ? Tier::Host : Tier::Ssd;
    }
    host += least.tiers[i] == Tier::Host ? bytes : 0;
  }
  if (mode(Class::Activations) == "auto")
    offDevice(actBytes, least.acts, host);
  if (mode(Class::Gradients) == "auto")
    offDevice(gradBytes, least.grads, host);
  return least;
}

/// Whether `p` has every tensor of class `c` the planner may move at
/// `value` ("device", "host", "ssd", or "recompute" for activations), as
/// forcing the class would (constants stay where they are then).
bool TierPlanner::uniform(func::FuncOp func, const Placement &p, Class c,
                          StringRef value) {
  if (c == Class::Activations || c == Class::Gradients) {
    Act want = value == "host"        ? Act::Host
               : value == "ssd"       ? Act::Ssd
               : value == "recompute" ? Act::Recompute
                                      : Act::Keep;
    const SmallVector<Act> &acts = c == Class::Activations ? p.acts : p.grads;
    return llvm::all_of(acts, [&](Act a) { return a == want; });
  }
  Tier want = namedTier(value);
  for (auto [i, op] :
       llvm::enumerate(func.getBody().front().getOps<exec::ParamOp>()))
    if (isAuto(op) && !op.getConstant() &&
        bool(op.getState()) == (c == Class::States) && p.tiers[i] != want)
      return false;
  return true;
}

/// The greedy start of every placement a user can force for one class
/// the options leave to the planner (--place-states ssd, ...), so the
/// search begins where such a run would and cannot end up worse than its
/// first candidate.
SmallVector<std::pair<Class, std::string>>
TierPlanner::forcedStarts(func::FuncOp func,
                          function_ref<void(Placement)> consider) {
  SmallVector<std::pair<Class, std::string>> starts = forcedOptions();
  for (const auto &option : starts) {
    overrides.push_back(option);
    Placement start = forced(func, actBytes.size(), gradBytes.size());
    Placement p = greedyOnClone(func, start, Policy::Cost);
    // The greedy start and the least-device plan of that run.
    Placement least = leastDevice(func, p);
    overrides.pop_back();
    p.label = "forced start";
    consider(std::move(p));
    least.label = "forced start, everything else off the device";
    consider(std::move(least));
  }
  return starts;
}

/// Local search from `best`: one choice changed at a time, largest
/// tensor first, a change kept when it lowers the score, until a round
/// changes nothing or the evaluations run out. Within the budgets only
/// moves toward the device can pay off (recomputing instead of a round
/// trip counts); over them, only moves away from it.
Placement TierPlanner::improve(func::FuncOp func, Placement best,
                               Score bestScore, int64_t limit) {
  chosen = bestScore;
  auto bySize = [](ArrayRef<uint64_t> bytes, bool enabled) {
    SmallVector<std::pair<uint64_t, unsigned>> order;
    if (enabled)
      for (auto [i, n] : llvm::enumerate(bytes))
        order.push_back({n, static_cast<unsigned>(i)});
    llvm::sort(order, std::greater<>());
    return order;
  };
  SmallVector<uint64_t> paramBytes;
  SmallVector<bool> paramAuto;
  for (exec::ParamOp p : func.getBody().front().getOps<exec::ParamOp>()) {
    paramBytes.push_back(isAuto(p) ? storageBytes(p.getType()) : 0);
    paramAuto.push_back(isAuto(p));
  }
  auto paramOrder = bySize(paramBytes, true);
  llvm::erase_if(paramOrder, [&](auto &e) { return !paramAuto[e.second]; });
  auto actOrder = bySize(actBytes, mode(Class::Activations) == "auto");
  auto gradOrder = bySize(gradBytes, mode(Class::Gradients) == "auto");
  // How far from the device each choice is.
  auto rank = [](Act a) {
    return a == Act::Keep        ? 0
           : a == Act::Host      ? 1
           : a == Act::Recompute ? 2
                                 : 3;
  };
  bool improved = true;
  // Scoring ahead, while other threads wait for guesses: the round's
  // next trials as if none were kept (`ahead`, from the first trial not
  // yet scored) are scored at once, then the round is made again from
  // its start, its trials now found scored. Every choice is made on the
  // scores in the order a single thread makes them (the trials a kept
  // move makes stale are simply not asked for), so the search takes the
  // same path with any number of threads.
  std::vector<Placement> ahead;
  unsigned aheadWidth = 0;
  // While collecting: the evaluations the trials so far would have made
  // (none is collected past the limit).
  int64_t aheadEvaluated = 0;
  auto scoredAlready = [&](const Placement &p) {
    std::string key = scoreKey(p);
    std::lock_guard<std::mutex> lock(shared->mutex);
    return shared->scores.count(key) > 0;
  };
  // Whether the round can stop making trials: its guesses are collected.
  auto aheadFull = [&] {
    return aheadWidth > 0 &&
           (ahead.size() >= aheadWidth || aheadEvaluated >= limit);
  };
  auto attempt = [&](Placement trial) {
    bool skipped = bestScore.fits() && certainlyOver(trial) && !plannerCheck;
    if (aheadWidth > 0) {
      if (ahead.size() < aheadWidth && aheadEvaluated < limit) {
        ++aheadEvaluated;
        if (!skipped && !scoredAlready(trial))
          ahead.push_back(std::move(trial));
      }
      return false;
    }
    if (evaluated >= limit)
      return false;
    if (!skipped) {
      // No thread waiting: the trial is scored here, as without them.
      unsigned width = scoreAheadWidth();
      if (width > 0 && !scoredAlready(trial)) {
        aheadWidth = width;
        aheadEvaluated = evaluated + 1;
        ahead.push_back(std::move(trial));
        return false;
      }
    }
    std::optional<Score> scored = scoreAgainst(func, trial, bestScore);
    if (!scored || !(*scored < bestScore))
      return false;
    Score s = *scored;
    best = std::move(trial);
    bestScore = chosen = s;
    improved = true;
    return true;
  };
  // Tries the alternatives of choice `i` of `field`, first improvement.
  auto moves = [&](auto field, ArrayRef<std::pair<uint64_t, unsigned>> order,
                   auto alternatives, auto useful) {
    for (auto [bytes, i] : order) {
      if (aheadFull())
        return;
      for (auto alt : alternatives) {
        auto cur = (best.*field)[i];
        if (alt == cur || !useful(cur, alt))
          continue;
        Placement trial = best;
        (trial.*field)[i] = alt;
        if (attempt(std::move(trial)))
          break;
      }
    }
  };
  auto towardIfFits = [&](auto cur, auto alt) {
    return bestScore.fits() == (rank(alt) < rank(cur));
  };
  // Whole classes and whole layers of stored tensors (the indices of
  // the automatic ones).
  SmallVector<unsigned> paramIdx, stateIdx;
  // Per layer, its automatic tensors and, of them, the trainable
  // parameters (whose updates run on the CPU or the device).
  std::map<std::string, std::pair<SmallVector<unsigned>, SmallVector<unsigned>>,
           LayerOrder>
      layers;
  for (auto [i, p] :
       llvm::enumerate(func.getBody().front().getOps<exec::ParamOp>())) {
    if (!isAuto(p))
      continue;
    (p.getState() ? stateIdx : paramIdx).push_back(i);
    std::string key = layerOf(p.getName());
    if (key.empty())
      continue;
    layers[key].first.push_back(i);
    if (p.getTrainable() && !p.getState() && !p.getCopyOf() && !p.getConstant())
      layers[key].second.push_back(i);
  }
  SmallVector<ArrayRef<unsigned>> layerList, masterList;
  for (auto &entry : layers) {
    layerList.push_back(entry.second.first);
    masterList.push_back(entry.second.second);
  }
  // Where the updates run is the placement's to say (markUpdates) once a
  // move sets it for a layer; until then --strata-offload-optimizer
  // compares each update's two paths alone, which can load the CPU with
  // more updates than the backward pass hides while the host link idles.
  bool updatesAuto =
      placeUpdates == "auto" &&
      llvm::any_of(masterList, [](auto m) { return !m.empty(); });
  if (updatesAuto && best.updates.empty())
    best.updates.assign(best.tiers.size(), UpdateOn::Auto);
  // Sets every choice of `field` at `indices` (all when empty) to `value`
  // and scores that, unless nothing changes; whether it was kept.
  auto setAll = [&](auto field, ArrayRef<unsigned> indices,
                    auto value) -> bool {
    if (aheadFull())
      return false;
    Placement trial = best;
    bool changed = false;
    auto set = [&](unsigned i) {
      changed |= (trial.*field)[i] != value;
      (trial.*field)[i] = value;
    };
    if (indices.empty())
      for (unsigned i = 0; i < (trial.*field).size(); ++i)
        set(i);
    else
      llvm::for_each(indices, set);
    return changed && attempt(std::move(trial));
  };
  auto round = [&] {
    SmallVector<Act> actAlternatives{Act::Keep, Act::Host, Act::Recompute};
    SmallVector<Act> gradAlternatives{Act::Keep, Act::Host};
    SmallVector<Tier> tierAlternatives{Tier::Device, Tier::Host};
    if (hasSsd) {
      actAlternatives.push_back(Act::Ssd);
      gradAlternatives.push_back(Act::Ssd);
      tierAlternatives.push_back(Tier::Ssd);
    }
    // Whole classes first: each placement a user can force for one class
    // (--place-states ssd, ...) is one such move from here, so the search
    // does not stop short of one its own score prefers. Then whole layers
    // (a layer's parameters and states together), then single tensors.
    for (Tier t : tierAlternatives) {
      if (!paramIdx.empty())
        setAll(&Placement::tiers, paramIdx, t);
      if (!stateIdx.empty())
        setAll(&Placement::tiers, stateIdx, t);
    }
    if (mode(Class::Activations) == "auto" && !best.acts.empty())
      for (Act a : actAlternatives)
        setAll(&Placement::acts, {}, a);
    if (mode(Class::Gradients) == "auto" && !best.grads.empty())
      for (Act g : gradAlternatives)
        setAll(&Placement::grads, {}, g);
    // Whole layers, in model order: where their updates run, then their
    // tiers. A transformer's layers are alike, so a move that pays off on
    // one usually pays off on the next ones too, each a small step (at
    // 175B a step of 0.15% per layer, two scores each, ran the search out
    // of its budget while still descending):
    // once a layer's move is kept, the same move is tried on the next 2
    // layers at once, then the next 4, 8, ..., while each is kept, so k
    // layers take about log2(k) scores; the main loop goes on after the
    // last layer moved.
    auto layerMoves = [&](auto field, ArrayRef<ArrayRef<unsigned>> lists,
                          auto alternatives, auto applies) {
      for (size_t l = 0; l < lists.size(); ++l)
        for (auto value : alternatives) {
          if (!applies(lists[l]) || !setAll(field, lists[l], value))
            continue;
          size_t next = l + 1;
          for (size_t batch = 2; next < lists.size(); batch *= 2) {
            size_t end = std::min(lists.size(), next + batch);
            SmallVector<unsigned> indices;
            for (size_t k = next; k < end; ++k)
              if (applies(lists[k]))
                indices.append(lists[k].begin(), lists[k].end());
            if (indices.empty() || !setAll(field, indices, value))
              break;
            next = end;
          }
          if (next > l + 1) {
            l = next - 1;
            break;
          }
        }
    };
    if (layerList.size() > 1) {
      // Where each layer's updates run, on the CPU or on the device, for
      // its parameters off the device (the others update on the device).
      if (updatesAuto) {
        SmallVector<SmallVector<unsigned>> offDevice(masterList.size());
        for (auto [masters, off] : llvm::zip(masterList, offDevice))
          for (unsigned i : masters)
            if (best.tiers[i] != Tier::Device)
              off.push_back(i);
        SmallVector<ArrayRef<unsigned>> lists(offDevice.begin(),
                                              offDevice.end());
        layerMoves(
            &Placement::updates, lists,
            std::initializer_list<UpdateOn>{UpdateOn::Device, UpdateOn::Cpu},
            [](ArrayRef<unsigned> off) { return !off.empty(); });
      }
      layerMoves(&Placement::tiers, layerList, tierAlternatives,
                 [](ArrayRef<unsigned>) { return true; });
    }
    moves(&Placement::acts, actOrder, actAlternatives, [&](Act cur, Act alt) {
      if (alt == Act::Recompute)
        return bestScore.fits() ? cur != Act::Keep : cur == Act::Keep;
      return towardIfFits(cur, alt);
    });
    moves(&Placement::grads, gradOrder, gradAlternatives, towardIfFits);
    moves(&Placement::tiers, paramOrder, tierAlternatives,
          [&](Tier cur, Tier alt) { return bestScore.fits() == (alt < cur); });
  };
  while (improved && evaluated < limit) {
    Placement roundBest = best;
    Score roundScore = bestScore;
    int64_t roundEvaluated = evaluated;
    for (;;) {
      improved = false;
      ahead.clear();
      aheadWidth = 0;
      round();
      if (ahead.empty())
        break;
      scoreAhead(func, std::move(ahead));
      best = roundBest;
      bestScore = chosen = roundScore;
      evaluated = roundEvaluated;
    }
  }
  chosen = bestScore;
  LLVM_DEBUG(llvm::dbgs() << "chosen: over " << bestScore.overBytes << " B, "
                          << bestScore.stepUs << " us after " << evaluated
                          << " placements\n");
  return best;
}
