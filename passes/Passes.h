//===- Passes.h - Strata passes and pipelines ------------------*- C++ -*-===//

#ifndef STRATA_PASSES_PASSES_H
#define STRATA_PASSES_PASSES_H

#include "dialects/Exec/ExecDialect.h"
#include "dialects/Graph/GraphDialect.h"
#include "dialects/Train/TrainDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "runtime/artifact/Plan.h"

#include <optional>

namespace strata {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// The kernel `op` runs as, an instruction of a fused elementwise chain
/// (artifact::elementwiseInstruction, with as many operands as it takes),
/// or nullopt: what --strata-fuse-elementwise groups and what the lowering
/// of graph.fused encodes (FuseElementwise.cpp).
std::optional<artifact::Kernel> elementwiseInstructionOf(mlir::Operation *op);

/// What --strata-plan-memory did to one function.
struct MemoryPlanStats {
  size_t buffers = 0;
  uint64_t arenaBytes = 0, unsharedBytes = 0;
};

/// --strata-plan-memory on one function: offsets for every buffer, the
/// region sizes and the memory report. The tier planner scores candidate
/// placements with it (and scheduleTransfers) without a pass manager.
MemoryPlanStats planMemory(mlir::func::FuncOp func,
                           const PlanMemoryPassOptions &options = {});

/// --strata-schedule-transfers on one (memory-planned) function.
void scheduleTransfers(mlir::func::FuncOp func,
                       const ScheduleTransfersPassOptions &options = {});

/// Cleans up freshly imported graph IR: folds, canonicalizes and removes
/// duplicate and dead computations. Registered as `strata-graph-cleanup`.
void buildGraphCleanupPipeline(mlir::OpPassManager &pm);

/// Where stored tensors may go (strata-compile's budget flags).
struct TierOptions {
  std::string params = "auto", states = "auto", activations = "auto",
              gradients = "auto";
  /// Where updates of host-resident parameters run: auto, device or cpu
  /// (--strata-offload-optimizer).
  std::string updates = "auto";
  /// Updates on the CPU moving fewer bytes share a job with the next (-1:
  /// from the profile).
  int64_t cpuJobBytes = -1;
  /// Whether mixed-precision updates write the low-precision weight copies
  /// the model reads (--strata-low-copies) instead of it casting masters.
  bool lowCopies = true;
  /// How many placements the planner may score.
  int64_t maxEvaluations = 200;
  /// Print the planner's progress when it runs long.
  bool progress = false;
  uint64_t gpuMem = 0, cpuMem = 0;
  bool hasSsd = false;
  /// Machine profile for the cost model (empty: defaults).
  std::string profile;
};

/// Lowers cleaned-up graph IR to planned exec IR: kernels, tier placement,
/// memory plan. Registered as `strata-forward-to-exec` (default tiers).
void buildForwardToExecPipeline(mlir::OpPassManager &pm,
                                const TierOptions &tiers = TierOptions());

/// Options of the training pipeline (strata-compile's training flags).
struct TrainingOptions {
  std::string loss = "causal-lm";
  std::string optimizer = "adamw";
  double lr = 1e-3, momentum = 0.9, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0.0, clipGradNorm = 0.0;
  int64_t accumulate = 1;
  std::string clipMode = "exact";
  std::string lossScale = "none";
  double lossScaleInit = 65536.0;
  int64_t lossScaleWindow = 2000;
  /// Move each update right after its gradient (LOMO's schedule).
  bool fuseUpdates = false;
  /// fp32, bf16 or fp16 (strata-autocast, before autodiff).
  std::string precision = "fp32";
  /// Stop after autodiff: return the loss and every gradient (named
  /// "grad:<parameter>") instead of applying an optimizer.
  bool gradientsOnly = false;
};

/// Builds the training step from cleaned-up graph IR: loss, autodiff,
/// optimizer and a cleanup. Lower the result with buildForwardToExecPipeline.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingOptions &options);

/// Registers every Strata pass and named pipeline with the global registry
/// (for strata-opt).
void registerPassesAndPipelines();

} // namespace strata

#endif // STRATA_PASSES_PASSES_H
