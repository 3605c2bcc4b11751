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
  place.placeParams = tiers.placeParams;
  place.placeStates = tiers.placeStates;
  place.placeActivations = tiers.placeActivations;
  place.placeGradients = tiers.placeGradients;
  place.plannerEvaluations = tiers.plannerEvaluations;
  place.progress = tiers.progress;
  place.gpuMem = tiers.gpuMem;
  place.cpuMem = tiers.cpuMem;
  place.hasSsd = tiers.hasSsd;
  place.profile = tiers.profile;
  place.placeUpdates = tiers.placeUpdates;
  place.cpuJobBytes = tiers.cpuJobBytes;
  place.speculateUpdates = tiers.speculateUpdates;
  place.prefetchLead = tiers.prefetchLead;
  place.plannerCheck = tiers.plannerCheck;
  place.plannerThreads = tiers.plannerThreads;
  pm.addPass(createPlaceTiersPass(place));
  OffloadOptimizerPassOptions offload;
  offload.placeUpdates = tiers.placeUpdates;
  offload.profile = tiers.profile;
  offload.cpuJobBytes = tiers.cpuJobBytes;
  offload.cpuMem = tiers.cpuMem;
  offload.speculateUpdates = tiers.speculateUpdates;
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
  if (options.dataParallel > 1) {
    DataParallelPassOptions dp;
    dp.dataParallel = options.dataParallel;
    dp.ranksPerNode = options.ranksPerNode;
    dp.shardOptimizer = options.shardOptimizer || options.shardParameters;
    dp.shardParameters = options.shardParameters;
    pm.addPass(createDataParallelPass(dp));
  }
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

bool llvm::cl::parser<strata::ByteCount>::parse(Option &o, StringRef,
                                                StringRef arg,
                                                strata::ByteCount &value) {
  uint64_t bytes = 0;
  if (!strata::parseOptionSize(arg.str(), bytes))
    return o.error("'" + arg + "' is not a byte count (e.g. 24GiB)");
  value = bytes;
  return false;
}

void llvm::cl::parser<strata::ByteCount>::printOptionDiff(
    const Option &o, strata::ByteCount value,
    const OptionValue<strata::ByteCount> &initial, size_t width) const {
  printOptionName(o, width);
  llvm::outs() << "= " << value.bytes;
  if (initial.hasValue() && initial.getValue().bytes != value.bytes)
    llvm::outs() << " (default: " << initial.getValue().bytes << ")";
  llvm::outs() << "\n";
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
