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
#include "mlir/Pass/PassOptions.h"
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
MemoryPlanStats planMemory(mlir::func::FuncOp func,
                           const PlanMemoryPassOptions &options = {},
                           const MachineProfile *machine = nullptr,
                           bool report = true);

/// --strata-schedule-transfers on one (memory-planned) function.
void scheduleTransfers(mlir::func::FuncOp func,
                       const ScheduleTransfersPassOptions &options = {});

/// Cleans up freshly imported graph IR: folds, canonicalizes and removes
/// duplicate and dead computations. Registered as `strata-graph-cleanup`.
void buildGraphCleanupPipeline(mlir::OpPassManager &pm);

/// Where stored tensors may go: the options of the `strata-forward-to-exec`
/// pipeline, which strata-compile's budget flags set (so that
/// `strata-opt --strata-forward-to-exec="gpu-mem=... place-states=ssd"`
/// lowers as strata-compile does).
struct TierOptions : public mlir::PassPipelineOptions<TierOptions> {
  template <typename T>
  using Opt = mlir::PassPipelineOptions<TierOptions>::Option<T>;
  Opt<std::string> params{*this, "place-params",
                          llvm::cl::desc("auto, device, host or ssd"),
                          llvm::cl::init("auto")};
  Opt<std::string> states{*this, "place-states",
                          llvm::cl::desc("auto, device, host or ssd"),
                          llvm::cl::init("auto")};
  Opt<std::string> activations{
      *this, "place-activations",
      llvm::cl::desc("auto, device, host, ssd or recompute"),
      llvm::cl::init("auto")};
  Opt<std::string> gradients{*this, "place-gradients",
                             llvm::cl::desc("auto, device, host or ssd"),
                             llvm::cl::init("auto")};
  Opt<std::string> updates{
      *this, "place-updates",
      llvm::cl::desc("Where updates of host-resident parameters run: auto, "
                     "device or cpu (--strata-offload-optimizer)"),
      llvm::cl::init("auto")};
  Opt<int64_t> cpuJobBytes{
      *this, "cpu-job-bytes",
      llvm::cl::desc("Updates on the CPU moving fewer bytes share a job with "
                     "the next (-1: from the profile)"),
      llvm::cl::init(-1)};
  Opt<bool> speculate{
      *this, "speculate-updates",
      llvm::cl::desc("CPU updates waiting for exact clipping's norm run "
                     "speculatively during the backward pass "
                     "(--strata-offload-optimizer speculate)"),
      llvm::cl::init(true)};
  Opt<bool> lowCopies{
      *this, "low-copies",
      llvm::cl::desc("Mixed-precision updates write the low-precision weight "
                     "copies the model reads (--strata-low-copies)"),
      llvm::cl::init(true)};
  Opt<bool> deferCopyValues{
      *this, "defer-copy-values",
      llvm::cl::desc("Low-precision copies get their values when the "
                     "artifact is written, not at compile time "
                     "(--strata-low-copies=\"defer-copy-values=1\")"),
      llvm::cl::init(false)};
  Opt<int64_t> maxEvaluations{
      *this, "planner-evaluations",
      llvm::cl::desc("How many placements one planner search may score"),
      llvm::cl::init(200)};
  Opt<int64_t> plannerThreads{
      *this, "planner-threads",
      llvm::cl::desc("How many of the planner's searches run at once (0: "
                     "one per core)"),
      llvm::cl::init(0)};
  Opt<double> prefetchLead{
      *this, "prefetch-lead",
      llvm::cl::desc("Fetches and write-backs get this many times their "
                     "transfer time of kernels to overlap "
                     "(--strata-plan-memory; 0: a window of 32 ops)"),
      llvm::cl::init(1.5)};
  Opt<bool> plannerCheck{
      *this, "planner-check",
      llvm::cl::desc("Check the planner by enumeration (small models)"),
      llvm::cl::init(false)};
  Opt<bool> progress{*this, "progress",
                     llvm::cl::desc("Print the planner's progress when it "
                                    "runs long"),
                     llvm::cl::init(false)};
  Opt<uint64_t> gpuMem{*this, "gpu-mem",
                       llvm::cl::desc("Device budget in bytes (0: none)"),
                       llvm::cl::init(0)};
  Opt<uint64_t> cpuMem{*this, "cpu-mem",
                       llvm::cl::desc("Host budget in bytes (0: none)"),
                       llvm::cl::init(0)};
  Opt<bool> hasSsd{*this, "has-ssd",
                   llvm::cl::desc("An SSD tier exists (--ssd-dir)"),
                   llvm::cl::init(false)};
  Opt<std::string> profile{
      *this, "profile",
      llvm::cl::desc("Machine profile for the cost model (empty: defaults)"),
      llvm::cl::init("")};
};

/// Lowers cleaned-up graph IR to planned exec IR: kernels, tier placement,
/// memory plan. Registered as `strata-forward-to-exec` (default tiers).
void buildForwardToExecPipeline(mlir::OpPassManager &pm,
                                const TierOptions &tiers = TierOptions());

/// The options of the `strata-training` pipeline, which strata-compile's
/// training flags set (the passes' own options describe each).
struct TrainingOptions : public mlir::PassPipelineOptions<TrainingOptions> {
  template <typename T>
  using Opt = mlir::PassPipelineOptions<TrainingOptions>::Option<T>;
  Opt<std::string> loss{*this, "loss", llvm::cl::desc("causal-lm or output"),
                        llvm::cl::init("causal-lm")};
  Opt<std::string> optimizer{*this, "optimizer",
                             llvm::cl::desc("sgd, momentum, adamw, lomo or "
                                            "adalomo"),
                             llvm::cl::init("adamw")};
  Opt<double> lr{*this, "lr", llvm::cl::desc("Base learning rate"),
                 llvm::cl::init(1e-3)};
  Opt<double> momentum{*this, "momentum", llvm::cl::desc("Momentum"),
                       llvm::cl::init(0.9)};
  Opt<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                    llvm::cl::init(0.9)};
  Opt<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                    llvm::cl::init(0.999)};
  Opt<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                  llvm::cl::init(1e-8)};
  Opt<double> weightDecay{*this, "weight-decay",
                          llvm::cl::desc("Decoupled weight decay"),
                          llvm::cl::init(0.0)};
  Opt<double> clipGradNorm{*this, "clip-grad-norm",
                           llvm::cl::desc("Gradient norm clip (0: off)"),
                           llvm::cl::init(0.0)};
  Opt<int64_t> accumulate{*this, "accumulate",
                          llvm::cl::desc("Micro-batches per step"),
                          llvm::cl::init(1)};
  Opt<std::string> clipMode{*this, "clip-mode",
                            llvm::cl::desc("exact, previous-step or two-pass"),
                            llvm::cl::init("exact")};
  Opt<std::string> lossScale{*this, "loss-scale",
                             llvm::cl::desc("none, dynamic or a number"),
                             llvm::cl::init("none")};
  Opt<double> lossScaleInit{*this, "loss-scale-init",
                            llvm::cl::desc("Initial dynamic loss scale"),
                            llvm::cl::init(65536.0)};
  Opt<int64_t> lossScaleWindow{
      *this, "loss-scale-window",
      llvm::cl::desc("Steps without overflow before the scale grows"),
      llvm::cl::init(2000)};
  Opt<bool> fuseUpdates{
      *this, "fuse-updates",
      llvm::cl::desc("Move each update right after its gradient (LOMO's "
                     "schedule)"),
      llvm::cl::init(false)};
  Opt<std::string> precision{*this, "precision",
                             llvm::cl::desc("fp32, bf16 or fp16 "
                                            "(--strata-autocast)"),
                             llvm::cl::init("fp32")};
  Opt<bool> gradientsOnly{
      *this, "gradients-only",
      llvm::cl::desc("Stop after autodiff: return the loss and every "
                     "gradient (named \"grad:<parameter>\")"),
      llvm::cl::init(false)};
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
