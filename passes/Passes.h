//===- Passes.h - Strata passes and pipelines ------------------*- C++ -*-===//

#ifndef STRATA_PASSES_PASSES_H
#define STRATA_PASSES_PASSES_H

#include "dialects/Exec/ExecDialect.h"
#include "dialects/Graph/GraphDialect.h"
#include "dialects/Strata/StrataDialect.h"
#include "dialects/Train/TrainDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/scheduling/ArenaPacking.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "passes/PipelineOptions.h"
#include "runtime/artifact/Plan.h"

#include <optional>
#include <vector>

namespace strata::artifact {
struct StepAccesses;
} // namespace strata::artifact

namespace strata {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// The kernel `op` runs as, an instruction of a fused elementwise chain
/// (artifact::elementwiseInstruction, with as many operands as it takes),
/// or nullopt: what --strata-fuse-elementwise groups and what the lowering
/// of graph.fused encodes (FuseElementwise.cpp).
std::optional<artifact::Kernel> elementwiseInstructionOf(mlir::Operation *op);

struct MachineProfile;

/// What --strata-plan-memory did to one function.
struct MemoryPlanStats {
  size_t buffers = 0;
  uint64_t arenaBytes = 0, unsharedBytes = 0;
};

/// --strata-plan-memory on one function: offsets for every buffer, the
/// region sizes and the memory report. The tier planner scores candidate
/// placements with it (and scheduleTransfers) without a pass manager.
/// `machine` times the windows when options.prefetchLead > 0 (the pass
/// loads options.profile for it). Without `report` the memory report
/// (exec.memory, which only the artifact writer reads) is not made: the
/// planner's scores need the offsets and region sizes alone.
/// `cache`: what a caller that plans many programs keeps between them
/// (the planner: its candidates' plans mostly repeat), one per thread.
struct MemoryPlanCache {
  /// The offset attributes made before, by value (a lookup here is
  /// cheaper than the context's); they must belong to `func`'s context.
  llvm::DenseMap<uint64_t, mlir::IntegerAttr> offsets;
  /// The last arena packings.
  arena::PackingCache packings;
};
MemoryPlanStats planMemory(mlir::func::FuncOp func,
                           const PlanMemoryPassOptions &options = {},
                           const MachineProfile *machine = nullptr,
                           bool report = true,
                           MemoryPlanCache *cache = nullptr);

/// --strata-schedule-transfers on one (memory-planned) function. With
/// `accesses`, leaves there what each kernel reads and writes
/// (kernelAccesses, which it works from; the schedule changes none), for
/// predictStepTime to take rather than find again.
void scheduleTransfers(mlir::func::FuncOp func,
                       const ScheduleTransfersPassOptions &options = {},
                       std::vector<artifact::StepAccesses> *accesses = nullptr);

/// Cleans up freshly imported graph IR: folds, canonicalizes and removes
/// duplicate and dead computations. Registered as `strata-graph-cleanup`.
void buildGraphCleanupPipeline(mlir::OpPassManager &pm);

/// Lowers cleaned-up graph IR to planned exec IR: kernels, tier placement,
/// memory plan. Registered as `strata-forward-to-exec` (default tiers).
void buildForwardToExecPipeline(mlir::OpPassManager &pm,
                                const TierOptions &tiers = TierOptions());

/// Builds the training step from cleaned-up graph IR: loss, autodiff,
/// optimizer and a cleanup. Lower the result with buildForwardToExecPipeline.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingOptions &options);

/// Registers every Strata pass and named pipeline with the global registry
/// (for strata-opt).
void registerPassesAndPipelines();

} // namespace strata

#endif // STRATA_PASSES_PASSES_H
