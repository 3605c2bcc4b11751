//===- Pipelines.cpp - Named Strata pass pipelines ------------------------===//
//
// Every compile stage is one named pipeline, so `strata-opt --<name>` runs
// exactly what `strata-compile` runs for that stage.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "runtime/support/Size.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace strata {
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"
} // namespace strata

void strata::buildGraphCleanupPipeline(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createCSEPass());
}

void strata::buildForwardToExecPipeline(OpPassManager &pm,
                                        const TierOptions &tiers) {
  pm.addPass(createLowerGraphToExecPass());
  if (tiers.lowCopies != "off") {
    LowPrecisionCopiesPassOptions copies;
    copies.deferCopyValues = tiers.deferCopyValues;
    pm.addPass(createLowPrecisionCopiesPass(copies));
  }
  pm.addPass(createStoreNarrowPass());
  PlaceTiersPassOptions place;
  place.params = tiers.params;
  place.states = tiers.states;
  place.activations = tiers.activations;
  place.gradients = tiers.gradients;
  place.maxEvaluations = tiers.maxEvaluations;
  place.progress = tiers.progress;
  place.gpuMem = tiers.gpuMem;
  place.cpuMem = tiers.cpuMem;
  place.hasSsd = tiers.hasSsd;
  place.profile = tiers.profile;
  place.updates = tiers.updates;
  place.cpuJobBytes = tiers.cpuJobBytes;
  place.speculate = tiers.speculate;
  place.prefetchLead = tiers.prefetchLead;
  place.plannerCheck = tiers.plannerCheck;
  place.plannerThreads = tiers.plannerThreads;
  pm.addPass(createPlaceTiersPass(place));
  OffloadOptimizerPassOptions offload;
  offload.updates = tiers.updates;
  offload.profile = tiers.profile;
  offload.cpuJobBytes = tiers.cpuJobBytes;
  offload.cpuMem = tiers.cpuMem;
  offload.speculate = tiers.speculate;
  pm.addPass(createOffloadOptimizerPass(offload));
  PlanMemoryPassOptions memory;
  memory.gpuMem = tiers.gpuMem;
  memory.prefetchLead = tiers.prefetchLead;
  memory.profile = tiers.profile;
  pm.addPass(createPlanMemoryPass(memory));
  pm.addPass(createScheduleTransfersPass());
  pm.addPass(createAssignQueuesPass());
  PredictTimePassOptions predict;
  predict.profile = tiers.profile;
  pm.addPass(createPredictTimePass(predict));
}

void strata::buildTrainingPipeline(OpPassManager &pm,
                                   const TrainingOptions &options) {
  AppendLossPassOptions loss;
  loss.loss = options.loss;
  pm.addPass(createAppendLossPass(loss));
  AutocastPassOptions autocast;
  autocast.precision = options.precision;
  pm.addPass(createAutocastPass(autocast));
  pm.addPass(createAutodiffPass());
  if (options.gradientsOnly) {
    buildGraphCleanupPipeline(pm);
    return;
  }
  AttachOptimizerPassOptions opt;
  opt.optimizer = options.optimizer;
  opt.lr = options.lr;
  opt.momentum = options.momentum;
  opt.beta1 = options.beta1;
  opt.beta2 = options.beta2;
  opt.eps = options.eps;
  opt.weightDecay = options.weightDecay;
  opt.clipGradNorm = options.clipGradNorm;
  opt.accumulate = options.accumulate;
  opt.clipMode = options.clipMode;
  opt.lossScale = options.lossScale;
  opt.lossScaleInit = options.lossScaleInit;
  opt.lossScaleWindow = options.lossScaleWindow;
  pm.addPass(createAttachOptimizerPass(opt));
  buildGraphCleanupPipeline(pm);
  if (options.fuseUpdates)
    pm.addPass(createFuseGradUpdatePass());
}

bool strata::parseOptionSize(const std::string &text, uint64_t &bytes) {
  bytes = 0;
  return text.empty() || parseSize(text, bytes);
}

namespace {
/// Registers `build` as the pipeline `arg`, its options made from
/// `Options::bind`; `check` (if any) refuses values no build can take.
template <typename Options>
void registerPipeline(llvm::StringRef arg, llvm::StringRef description,
                      void (*build)(OpPassManager &, const Options &),
                      std::string (*check)(const Options &) = nullptr) {
  registerPassPipeline(
      arg, description,
      [=](OpPassManager &pm, llvm::StringRef text,
          llvm::function_ref<LogicalResult(const llvm::Twine &)> error) {
        strata::PipelineOptionsOf<Options> parsed;
        if (failed(parsed.parseFromString(text)))
          return failure();
        Options options;
        std::string why;
        if (!parsed.get(options, why) ||
            (check && !(why = check(options)).empty()))
          return error(arg + ": " + why);
        build(pm, options);
        return success();
      },
      [](llvm::function_ref<void(const detail::PassOptions &)> help) {
        help(strata::PipelineOptionsOf<Options>());
      });
}

std::string checkTiers(const strata::TierOptions &tiers) {
  return tiers.check();
}
} // namespace

std::string strata::TierOptions::check() const {
  if (lowCopies != "on" && lowCopies != "off")
    return "low-copies must be on or off, not '" + lowCopies + "'";
  return "";
}

void strata::registerPassesAndPipelines() {
  registerStrataPasses();
  PassPipelineRegistration<>(
      "strata-graph-cleanup",
      "Fold, canonicalize and deduplicate imported graph IR",
      buildGraphCleanupPipeline);
  registerPipeline<TrainingOptions>(
      "strata-training",
      "Loss, autodiff and the optimizer on graph IR (strata-compile's "
      "training flags as options)",
      buildTrainingPipeline);
  registerPipeline<TierOptions>(
      "strata-forward-to-exec",
      "Lower a graph program to exec IR with tiers and a memory plan "
      "(strata-compile's budget flags as options)",
      buildForwardToExecPipeline, checkTiers);
}
