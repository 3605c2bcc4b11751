//===- TierPlanner.h - Where stored tensors live ----------------*- C++ -*-===//
//
// The planner behind --strata-place-tiers, in three parts:
//
//  - TierIR.cpp: queries on exec IR the placement needs (swap candidates,
//    gradient candidates, uses through views, a live-arena estimate);
//  - TierRewrites.cpp: applying a Placement to a function (fetches and
//    write-backs for off-device parameters, activation and gradient swaps,
//    recomputation);
//  - TierSearch.cpp: building placements (forced, greedy, naive, least
//    device memory), scoring them on clones with the memory planner, the
//    transfer scheduler and the cost model, and the local search;
//  - TierSolve.cpp: the layer-structured stage: each transformer layer
//    given one of a few configurations (where its parameters, low copies
//    and optimizer states live, where its updates run), the counts chosen
//    by an integer programme (GLPK) over costs measured by scoring, then
//    checked and refined by scoring.
//
// PlaceTiers.cpp is the pass: it checks the options and runs place() on
// every function.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_PASSES_TIERS_TIERPLANNER_H
#define STRATA_PASSES_TIERS_TIERPLANNER_H

#include "passes/Passes.h"
#include "passes/analysis/CostModel.h"

#include "dialects/Exec/ExecDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace strata::tiers {

//===----------------------------------------------------------------------===//
// Placements
//===----------------------------------------------------------------------===//

/// Where one stored tensor lives.
using exec::Tier;

/// The tier a placement option names ("host", "ssd"; anything else is the
/// device: "auto" has been resolved by then).
Tier namedTier(llvm::StringRef name);

/// What happens to a forward activation the backward pass reads.
enum class Act : uint8_t { Keep, Host, Ssd, Recompute };

const char *actName(Act a);

/// Where a placement runs an update.
enum class UpdateOn : uint8_t { Auto, Cpu, Device };

/// One placement of a function: the tier of each `exec.param` and the fate
/// of each swap candidate, both in program order. Applying it to the same
/// function always gives the same program, so the planner can compare
/// placements on clones and apply the best one to the original.
struct Placement {
  std::string label;
  llvm::SmallVector<Tier> tiers;
  llvm::SmallVector<Act> acts;
  /// Per gradient candidate: Keep, Host or Ssd.
  llvm::SmallVector<Act> grads;
  /// Per `exec.param`, in program order: where the update of this
  /// trainable parameter runs (on the CPU only where the parameter, its
  /// low-precision copy and its states are off the device). Auto, or
  /// empty for all: --strata-offload-optimizer compares the two paths
  /// itself, for that update alone.
  llvm::SmallVector<UpdateOn> updates;
};

/// What a scored placement uses: each queue's busy seconds and the bytes
/// of each memory tier, as the memory plan and the replay find them.
struct Usage {
  double step = 0, compute = 0, toDevice = 0, toHost = 0, ssdRead = 0,
         ssdWrite = 0, cpu = 0;
  /// When the backward pass starts plus each queue's (artifact::Queue)
  /// busy time from then on: the step is at least each.
  double phase[6] = {0, 0, 0, 0, 0, 0};
  double device = 0, host = 0;
};

/// How good a placement is: the bytes by which it misses the budgets (0
/// when it fits), then the predicted step.
struct Score {
  uint64_t overBytes = std::numeric_limits<uint64_t>::max();
  int64_t stepUs = std::numeric_limits<int64_t>::max();
  /// What the placement uses (zero when it could not be applied).
  Usage usage;
  bool fits() const { return overBytes == 0; }
  bool operator<(const Score &o) const {
    return overBytes != o.overBytes ? overBytes < o.overBytes
                                    : stepUs < o.stepUs;
  }
};

/// The counts of each layer type's groups in each of its configurations
/// (TierSolve.cpp).
using LayerCounts = llvm::SmallVector<llvm::SmallVector<int64_t>>;

/// What the layer stage's integer programme (TierSolve.cpp) gave.
struct SolvedProgramme {
  /// None when no counts meet the limits.
  std::optional<LayerCounts> counts;
  double optimum = 0;
  /// The search stopped at its node limit before proving them optimal.
  bool unproven = false;
};

/// Greedy orders for activations: by the cost model, never recompute, or
/// recompute wherever it is free.
enum class Policy { Cost, Swap, Recompute };

/// The classes a placement option covers.
enum class Class { Params, States, Activations, Gradients };

/// What applying a placement inserted (the pass's statistics).
struct PlacementCounters {
  int64_t fetches = 0, writebacks = 0, swapped = 0, gradientsSwapped = 0;
  int64_t recomputed = 0, recomputedBytes = 0;
};

//===----------------------------------------------------------------------===//
// Queries on exec IR (TierIR.cpp)
//===----------------------------------------------------------------------===//

/// The operands an update-type kernel writes in place (not counting the
/// destinations of transfers: assign and store).
llvm::SmallVector<unsigned> inPlaceOperands(exec::KernelOp kernel);

/// Each op's index in `body`.
llvm::DenseMap<mlir::Operation *, unsigned> positions(mlir::Block &body);

/// The uses of `value`, looking through views (a use of a view of `value`
/// is a use of `value`).
llvm::SmallVector<mlir::OpOperand *> usesThroughViews(mlir::Value value);

/// The uses of `value` (through views) in the backward pass.
llvm::SmallVector<mlir::OpOperand *> backwardUsesOf(mlir::Value value);

/// Program order within one block while a placement is applied to it.
/// MLIR's Operation::isBeforeInBlock renumbers the whole block whenever
/// it compares an op inserted where its numbering has no room (a few
/// inserts at one place), and a placement inserts at every swap and
/// recomputation: with tens of thousands of ops (a mixture of experts)
/// that renumbering was half of each score. Here ops inserted since are
/// spaced between their nearest numbered neighbours when first compared,
/// and the block is renumbered only when that room runs out. The ops
/// that existed when it was made must stay in place (none is moved); an
/// op must be forgotten before it is erased (its address may be reused).
class BlockOrder {
public:
  explicit BlockOrder(mlir::Block &block) : block(block) { renumber(); }
  /// Whether `a` comes before `b` (both in the block).
  bool before(mlir::Operation *a, mlir::Operation *b) {
    return position(a) < position(b);
  }
  /// `op` is about to be erased.
  void forget(mlir::Operation *op) { positions.erase(op); }

private:
  double position(mlir::Operation *op);
  void renumber();
  mlir::Block &block;
  llvm::DenseMap<mlir::Operation *, double> positions;
};

/// Whether `a` comes before `b` in their block: by `order` when given,
/// else by MLIR's own numbering.
inline bool before(BlockOrder *order, mlir::Operation *a, mlir::Operation *b) {
  return order ? order->before(a, b) : a->isBeforeInBlock(b);
}

/// The first (in program order) owner of `uses` (all in one block).
mlir::Operation *earliestUser(llvm::ArrayRef<mlir::OpOperand *> uses,
                              BlockOrder *order = nullptr);

/// Whether `value` (through views) is used at `op` or after it.
bool usedFrom(mlir::Value value, mlir::Operation *op,
              BlockOrder *order = nullptr);

/// Whether `op` runs after the backward pass, in the optimizer step.
bool isOptimizerPhase(mlir::Operation *op);

/// Whether `use` writes its value in place.
bool writesInPlace(mlir::OpOperand *use);

/// Forward values the backward pass reads: the candidates for swapping.
llvm::SmallVector<mlir::Value> swappable(mlir::Block &body);
/// The first kernel of the backward pass in `body` (null without one).
mlir::Operation *firstBackwardKernel(mlir::Block &body);

/// Gradients the optimizer step reads after the backward pass is done
/// with them (see TierIR.cpp).
llvm::SmallVector<mlir::Value> gradientCandidates(mlir::Block &body);

/// Bytes the device arena needs, without any placement (a lower bound of
/// the real plan's): the largest sum of live buffers at any op.
uint64_t liveArenaEstimate(mlir::Block &body, uint64_t alignment);

/// Whether liveArenaEstimate(body) plus `resident` fits `limit`, asked
/// again after each value a greedy step moves off the arena. Moving one
/// value lowers the estimate's peak by at most that value's aligned
/// bytes, so while the bytes moved since the last estimate are less than
/// its excess the answer is still no, and the estimate (a walk of the
/// whole body) is not recomputed: the greedy steps make the choices they
/// would with an estimate after every move, in far fewer walks.
class ArenaFit {
public:
  ArenaFit(mlir::Block &body, uint64_t resident, uint64_t limit,
           uint64_t alignment)
      : body(body), resident(resident), limit(limit), alignment(alignment) {}
  bool fits();
  /// `bytes` of one value left the arena.
  void moved(uint64_t bytes);

private:
  mlir::Block &body;
  uint64_t resident, limit, alignment;
  /// The excess of the last estimate, less the bytes moved since; zero
  /// when the estimate must be made.
  uint64_t excess = 0;
};

/// Host bytes the stored tensors `placement` puts on the host take.
uint64_t hostBytes(mlir::func::FuncOp func, const Placement &placement);

/// The layer a stored tensor belongs to, from its name: the name up to and
/// including its first all-digit component ("h.3" of "h.3.attn.c_attn.
/// weight.exp_avg"); empty when it has none.
std::string layerOf(llvm::StringRef name);

/// Orders layers (layerOf's keys) as they stand in the model, their
/// numbers compared as numbers: "h.2" before "h.10".
struct LayerOrder {
  bool operator()(const std::string &a, const std::string &b) const {
    return llvm::StringRef(a).compare_numeric(b) < 0;
  }
};

/// A swap space `name` on `tier` for `value`, which is stored into it
/// right after `after`. Returns the space.
mlir::Value storeAfter(mlir::Block &body, mlir::Operation *after,
                       mlir::Value value, const std::string &name, Tier tier);

/// Points `uses` of `value` (possibly through views) at `replacement`,
/// rebuilding the views in between.
/// (Views left unused are erased, and forgotten by `order`.)
void replaceUses(llvm::ArrayRef<mlir::OpOperand *> uses, mlir::Value value,
                 mlir::Value replacement, BlockOrder *order = nullptr);

//===----------------------------------------------------------------------===//
// The planner
//===----------------------------------------------------------------------===//

/// A lower bound on the predicted step of every placement of a program
/// that meets the budgets, by resource (seconds; see PlacementBound.cpp).
struct PlacementBound {
  double compute = 0, toDevice = 0, toHost = 0, ssdRead = 0, ssdWrite = 0;
  /// The collectives (data parallel), one after another on their queue.
  double comm = 0;
  /// On a GPU, the host link both ways: the two directions share its
  /// duplex rate while both run (PlacementBound.cpp).
  double link = 0;
  /// The passes' fetches and the updates' reads, over the host link and
  /// the CPU optimizer together.
  double updates = 0;
  /// The memory relaxation's optimum (0 where it was not solved: no GPU,
  /// no device budget, or no GLPK): a linear programme over the fraction
  /// of each stored tensor kept, fetched or updated on the CPU and of each
  /// activation kept, swapped or recomputed, with the device budget at the
  /// boundary of the passes (see PlacementBound.cpp).
  double relaxed = 0;
  /// At the relaxation's optimum: each resource's busy seconds, and the
  /// device bytes taken off by each way of freeing memory.
  struct Relaxation {
    double compute = 0, toDevice = 0, toHost = 0, cpu = 0;
    /// On a GPU: the host link both ways (its busier row of the two).
    double link = 0;
    /// Without a GPU (hostOnly): the SSD's reads and writes, and the
    /// drives' busy time with both sharing them; compute is then the
    /// compute thread's, host copies included.
    double ssdRead = 0, ssdWrite = 0, ssdShared = 0;
    bool hostOnly = false;
    double recomputed = 0, swapped = 0, fetched = 0, cpuUpdated = 0;
  } relaxation;
  /// The busiest resource's.
  double seconds() const;
};

/// The bound for `func` before placement, under the profile `m`, a device
/// budget `gpuMem` (0: none), a host budget `cpuMem` (0: none) and an SSD
/// tier when `hasSsd`.
PlacementBound placementBound(mlir::func::FuncOp func, const MachineProfile &m,
                              uint64_t gpuMem, uint64_t cpuMem, bool hasSsd);

/// Plans one module's functions under the pass's options.
class TierPlanner : public PlaceTiersPassOptions {
public:
  TierPlanner(mlir::ModuleOp module, const PlaceTiersPassOptions &options,
              const MachineProfile &machine)
      : PlaceTiersPassOptions(options), module(module), machine(machine) {}

  /// Plans `func` and rewrites it. With a device budget and something left
  /// to the planner, it scores the greedy placements and the two naive
  /// ones (every activation swapped, every one recomputed), the layer
  /// programme's placement (TierSolve.cpp; its scores on top of the
  /// budget), then improves
  /// the best by moving one tensor at a time while the predicted step
  /// drops (or, over budget, while the excess does); each placement is
  /// scored by planning its memory and replaying its schedule. With every
  /// class automatic it also makes each one-class forced run's search
  /// (see search()) and keeps the best.
  mlir::LogicalResult place(mlir::func::FuncOp func);

  /// What the last place() inserted into its function.
  PlacementCounters counters;
  /// The order of the block a placement is being applied to (apply and
  /// the greedy steps set it while they rewrite; see BlockOrder).
  BlockOrder *order = nullptr;
  /// Sets `order` to one of `block` for its lifetime.
  class OrderedRewrite {
  public:
    OrderedRewrite(TierPlanner &planner, mlir::Block &block)
        : planner(planner), blockOrder(block) {
      planner.order = &blockOrder;
    }
    ~OrderedRewrite() { planner.order = nullptr; }

  private:
    TierPlanner &planner;
    BlockOrder blockOrder;
  };

  /// A diagnostic a search raised outside scoring (the layer stage's
  /// check), emitted once every search of its round is done.
  struct Deferred {
    mlir::Location loc;
    mlir::DiagnosticSeverity severity;
    std::string message;
  };
  /// What one search made by a copy of the planner found (runSearches).
  struct Run {
    Placement placement;
    Score score;
    std::vector<std::pair<std::string, Score>> naive;
    int64_t evaluated = 0, checkBestUs = -1;
    std::string layerStage;
    std::vector<Deferred> diagnostics;
    /// A forced class's search that stopped at its start: the least
    /// device memory that class allows is over the device budget.
    bool unfit = false;
  };

private:
  //===--- Options
  //---------------------------------------------------------===//

  uint64_t arenaAlignment() const;
  /// Whether the planner may choose the tier of `p`.
  bool isAuto(exec::ParamOp p) const;
  /// What a class is left to: its option, or the override.
  llvm::StringRef mode(Class c) const;

  //===--- Rewrites (TierRewrites.cpp)
  //-------------------------------------===//

  void insertFetches(mlir::func::FuncOp func);
  bool swap(mlir::Block &body, mlir::Value value, Tier tier, unsigned index);
  bool swapGradient(mlir::Block &body, mlir::Value value, Tier tier,
                    unsigned index);
  llvm::SmallVector<mlir::Operation *>
  recomputeChain(mlir::Value value, mlir::Operation *at,
                 const llvm::DenseSet<mlir::Value> &kept);
  llvm::SmallVector<mlir::Operation *>
  chainFor(mlir::Value value, const llvm::DenseSet<mlir::Value> &kept);
  double chainSeconds(llvm::ArrayRef<mlir::Operation *> chain);
  void recompute(mlir::Value value, llvm::ArrayRef<mlir::Operation *> chain);
  Act applyAct(mlir::Block &body, mlir::Value value, Act act,
               llvm::DenseSet<mlir::Value> &kept, unsigned &swaps,
               llvm::ArrayRef<mlir::Operation *> chain = {});
  /// A function's swap and gradient candidates (swappable(),
  /// gradientCandidates()), in their order.
  struct Candidates {
    llvm::SmallVector<mlir::Value> acts, grads;
  };
  /// Rewrites `func` as `placement` says; with `known`, `func`'s
  /// candidates, found before (neither list depends on the placement).
  mlir::LogicalResult apply(mlir::func::FuncOp func, const Placement &placement,
                            std::optional<Candidates> known = std::nullopt);

  //===--- Placements and search (TierSearch.cpp)
  //--------------------------===//

  Placement forced(mlir::func::FuncOp func, size_t numCandidates,
                   size_t numGradients);
  Placement greedy(mlir::func::FuncOp func, const Placement &start,
                   Policy policy);
  void applyForcedActivations(mlir::func::FuncOp func, const Placement &out);
  void greedyActivations(mlir::func::FuncOp func, Placement &out, Policy policy,
                         uint64_t resident, uint64_t &host);
  Score score(mlir::func::FuncOp func, const Placement &placement);
  /// Whether `placement` is over a budget whatever the memory plan makes
  /// of it: the stored tensors it puts on the device, or those it puts
  /// on the host, take more than that tier's budget by themselves.
  bool certainlyOver(const Placement &placement) const;
  /// The score of `placement` when it could be kept over `incumbent` (a
  /// score within the budgets, which no placement over them beats);
  /// nullopt, without scoring, where it is certainly over a budget. It
  /// counts as an evaluation either way, so a search takes the same path
  /// as if every candidate were scored.
  std::optional<Score> scoreAgainst(mlir::func::FuncOp func,
                                    const Placement &placement,
                                    const Score &incumbent);
  void progressLine();
  Score scoreOnClone(mlir::func::FuncOp func, const Placement &placement);
  /// The score cache's key of `placement` scored with the current lead.
  std::string scoreKey(const Placement &placement) const;
  /// Stores a score made by this thread (and no longer in flight).
  void storeScore(std::string key, const Score &s, bool used,
                  std::unique_lock<std::mutex> &lock);
  /// Scores the oldest guess not yet scored or in flight, on `func`, with
  /// `lock` (shared->mutex) held on entry and on return; false when there
  /// was none.
  bool scoreGuess(mlir::func::FuncOp func, std::unique_lock<std::mutex> &lock);
  /// Posts `trials` as guesses and scores guesses until each of `trials`
  /// is scored.
  void scoreAhead(mlir::func::FuncOp func, std::vector<Placement> trials);
  /// How many placements a local search should have scored at once now:
  /// 0 when no thread waits for guesses, else the waiting threads and
  /// this one.
  unsigned scoreAheadWidth();
  /// Scores guesses, as a copy of the planner of its own, on a clone of
  /// the module made by `makeClone` when the first one comes, until
  /// `stop` (read under shared->mutex).
  void help(llvm::StringRef funcName,
            llvm::function_ref<mlir::OwningOpRef<mlir::ModuleOp>()> makeClone,
            const bool &stop);
  void offDevice(llvm::ArrayRef<uint64_t> bytes,
                 llvm::SmallVectorImpl<Act> &choices, uint64_t &host) const;
  Placement search(mlir::func::FuncOp func, const Placement &start);
  /// One search per entry of `held` (a class held at a value, or none:
  /// the planner's own search from `start`), each with prefetch lead
  /// `leads[i]`, made by a copy of the planner on its own clone of the
  /// module, up to --planner-threads at once; the results in order. With
  /// `incumbentFits`, a class held whose least-device placement is over
  /// the device budget is not searched (Run::unfit).
  std::vector<Run>
  runSearches(mlir::func::FuncOp func, const Placement &start,
              llvm::ArrayRef<std::optional<std::pair<Class, std::string>>> held,
              llvm::ArrayRef<double> leads, bool incumbentFits = false);
  Placement searchFrom(mlir::func::FuncOp func, const Placement &start,
                       int64_t budget);
  /// The one-class placements a user can force (--place-params host, ...)
  /// for the classes the options leave to the planner.
  llvm::SmallVector<std::pair<Class, std::string>> forcedOptions() const;
  Placement leastDevice(mlir::func::FuncOp func, const Placement &base);
  uint64_t residentBytes(mlir::func::FuncOp func, Class c) const;
  uint64_t boundaryBytes(mlir::func::FuncOp func) const;
  bool uniform(mlir::func::FuncOp func, const Placement &p, Class c,
               llvm::StringRef value);
  llvm::SmallVector<std::pair<Class, std::string>>
  forcedStarts(mlir::func::FuncOp func,
               llvm::function_ref<void(Placement)> consider);
  Placement improve(mlir::func::FuncOp func, Placement best, Score bestScore,
                    int64_t limit);
  /// A greedy placement built on a clone of the module, leaving the
  /// counters as they were.
  Placement greedyOnClone(mlir::func::FuncOp func, const Placement &start,
                          Policy policy);

  //===--- The layer-structured stage (TierSolve.cpp)
  //----------------------===//

  /// The best placement the layer stage finds from the activation and
  /// gradient choices of `bases` (see TierSolve.cpp), scored; nullopt when
  /// it does not apply (no repeated layers, a class forced, no solver).
  std::optional<std::pair<Placement, Score>>
  solveLayers(mlir::func::FuncOp func, llvm::ArrayRef<Placement> bases);
  /// Marks each update of `func` with where `placement` runs it
  /// (exec.update_on), when the placement decides it.
  void markUpdates(mlir::func::FuncOp func, const Placement &placement);
  /// --planner-check: every placement scored within the budgets is
  /// predicted at or over the proven bound (an error if not).
  mlir::LogicalResult checkScores(mlir::func::FuncOp func);

  //===--- State
  //-----------------------------------------------------------===//

  mlir::ModuleOp module;
  const MachineProfile &machine;
  /// The classes held at a value while the search builds or searches
  /// what forcing them would give (--place-states ssd, ...), innermost
  /// last; mode() answers with them.
  llvm::SmallVector<std::pair<Class, std::string>> overrides;
  /// What every search of one place() shares, under its lock: scores
  /// already computed, by placement (searches from different starts meet
  /// the same placements; scoring is deterministic, so a search takes the
  /// same path whatever another one has cached), and the progress line's
  /// figures.
  ///
  /// Threads with no search of their own left (the last searches of a
  /// round, the polish) score placements a local search will probably
  /// ask for next (improve()): its next moves, as if the one it scores now
  /// is not kept. They go into the cache unused; a search that asks for
  /// one uses it. A placement being scored is scored by one thread only:
  /// a search that needs it scores a guess meanwhile, or waits.
  struct SharedScores {
    std::mutex mutex;
    /// A score, and whether an evaluation of some search took it (a
    /// guess no search asked for does not count: the report's distinct
    /// placements are the same with any number of threads).
    struct Entry {
      Score score;
      bool used = false;
    };
    std::unordered_map<std::string, Entry> scores;
    /// The keys of the placements being scored now.
    std::unordered_set<std::string> inFlight;
    /// A placement posted for scoring ahead, with the lead it is scored
    /// with (its key's).
    struct Guess {
      std::string key;
      Placement placement;
      double lead;
    };
    std::deque<Guess> guesses;
    /// Threads waiting for guesses (helpers with nothing to score).
    unsigned idle = 0;
    /// A score was stored, a guess posted, or the helpers may stop.
    std::condition_variable changed;
    /// The layer stage's integer programmes solved so far (TierSolve.cpp),
    /// by their coefficients: the searches of a compile pose many alike
    /// (their scores come from the same cache), and GLPK gives the same
    /// answer to the same programme.
    std::unordered_map<std::string, SolvedProgramme> programmes;
    /// Evaluations made and those the whole search may make; the fastest
    /// placement within the budgets scored so far (us).
    int64_t evaluated = 0, total = 0, bestUs = -1;
    std::chrono::steady_clock::time_point lastReport;
  };
  std::shared_ptr<SharedScores> shared = std::make_shared<SharedScores>();
  /// Counts `e` as taken by an evaluation (the progress line's best).
  void markUsed(SharedScores::Entry &e);
  /// Sizes of the activation and gradient swap candidates, by index.
  llvm::SmallVector<uint64_t> actBytes, gradBytes;
  /// What each `exec.param` (in program order) takes in its region.
  llvm::SmallVector<uint64_t> storedBytes;
  int64_t evaluated = 0;
  /// The evaluations the progress line has counted: a local search
  /// replaying a round (improve()) meets its own again.
  int64_t progressCounted = 0;
  /// The forced classes' searches left out: their class alone is over
  /// the device budget (search()), or their least-device placement is
  /// over it (runSearches()).
  int64_t skippedSearches = 0, unfitSearches = 0;
  /// While the layer stage scores (on top of the search's budget).
  bool beyondBudget = false;
  /// The candidates of the function scoreOnClone last scored (each score
  /// maps them into its clone rather than finding them again).
  mlir::Operation *candidatesOf = nullptr;
  Candidates candidates;
  /// What this planner's memory plans keep between scores (planMemory's
  /// offset attributes and last packings): each copy of the planner (a
  /// search on its own thread) its own.
  MemoryPlanCache memoryCache;
  Score chosen;
  /// What the layer stage did (for a remark).
  std::string layerStage;
  /// The prefetch lead placements are scored with now, and the chosen
  /// plan's (recorded on the function for --strata-plan-memory).
  double lead = 0, chosenLead = 0;
  /// The proven bound of the function being planned.
  PlacementBound proven;
  /// With `check`: the fastest enumerated layer placement's step (us; -1:
  /// none fits or none enumerated).
  int64_t checkBestUs = -1;
  /// A search emitted an error (a --planner-check that failed or could
  /// not run): the pass fails once every search has said its part.
  bool searchFailed = false;
  /// The searches' diagnostics emitted so far (severity, message): each
  /// is said once.
  std::set<std::pair<int, std::string>> emitted;
  std::vector<std::pair<std::string, Score>> naive;
};

} // namespace strata::tiers

#endif // STRATA_PASSES_TIERS_TIERPLANNER_H
