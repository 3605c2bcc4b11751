//===- strata-compile.cpp - The Strata compile driver ---------------------===//
//
// Imports an ONNX model and runs the compile pipeline on it. Each stage is a
// named pipeline; `--print-ir-after-all` and `--dump-ir DIR` show the IR
// after every pass.
//
//===----------------------------------------------------------------------===//

#include "CompileSupport.h"
#include "DriverFlags.h"
#include "PlanReport.h"
#include "dialects/Strata/StrataDialect.h"

#include "compiler/import/OnnxImporter.h"
#include "compiler/serialize/ArtifactWriter.h"
#include "dialects/Exec/ExecDialect.h"
#include "runtime/support/Npy.h"
#include "runtime/support/Size.h"

#include "runtime/artifact/MemoryReport.h"
#include <tuple>

#include "dialects/Graph/GraphDialect.h"
#include "passes/Passes.h"
#include "passes/analysis/ArenaRanges.h"
#include <cmath>
#include <filesystem>
#include <sstream>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "runtime/profile/MachineProfile.h"
#include "runtime/support/FileUtil.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("strata-compile options");

static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx|model.onnxtext>"),
                                      cl::cat(category));

enum class Emit { Default, Graph, Train, Exec, Artifact, PlanReport };
static cl::opt<Emit> emit(
    "emit",
    cl::desc("What to produce (default: the artifact when -o names a "
             "directory, the graph IR when the output is stdout or *.mlir)"),
    cl::init(Emit::Default),
    cl::values(clEnumValN(Emit::Graph, "graph",
                          "the imported graph-dialect IR, cleaned up"),
               clEnumValN(Emit::Train, "train",
                          "the training step (loss, gradients, updates)"),
               clEnumValN(Emit::Exec, "exec",
                          "the exec IR with its memory plan"),
               clEnumValN(Emit::Artifact, "artifact",
                          "the artifact directory (needs -o DIR)"),
               clEnumValN(Emit::PlanReport, "plan-report",
                          "plan only: the memory per tier, the predicted "
                          "step, tokens/s, model TFLOP/s and the lower "
                          "bound with what sets it (no weights read or "
                          "written; to stdout or -o FILE)")),
    cl::cat(category));

enum class Mode { Train, Forward, Grad };
static cl::opt<Mode>
    mode("mode", cl::desc("What the artifact computes"), cl::init(Mode::Train),
         cl::values(clEnumValN(Mode::Train, "train",
                               "a training step: loss, gradients, optimizer "
                               "update (default)"),
                    clEnumValN(Mode::Forward, "forward",
                               "inference/evaluation: the model's outputs"),
                    clEnumValN(Mode::Grad, "grad",
                               "the loss and the gradient of every trainable "
                               "parameter (outputs grad:<name>), no update")),
         cl::cat(category));

static cl::opt<std::string> fusion(
    "fusion",
    cl::desc("on (default): decomposed functions an exporter wrote as "
             "chains of elementwise ops (GELU, tanh and erf forms) become "
             "one fused op, and so do their gradients (--strata-fuse-"
             "patterns; a remark says what was fused); off: compile the "
             "graph as exported, for comparison"),
    cl::init("on"), cl::cat(category));

static cl::OptionCategory trainCategory("training options (--mode train)");

static cl::opt<std::string> labelsFeed(
    "labels",
    cl::desc("What strata-run --data feeds a 'labels' input shaped like the "
             "token ids: next (the tokens after them; always with --loss "
             "causal-lm) or same (the ids themselves, for a model exported "
             "with its own loss that shifts its labels, as HuggingFace "
             "models do: the default with --loss output)"),
    cl::init(""), cl::cat(trainCategory));
static cl::opt<bool> syntheticParams(
    "synthetic-params",
    cl::desc("Do not store trainable parameters: record each one's mean and "
             "deviation and generate values at load (deterministic, seed 1). "
             "A plan-only artifact to carry to another machine; not the "
             "model's weights"),
    cl::init(false));
static cl::list<std::string> syntheticInit(
    "synthetic-init",
    cl::desc("GLOB=MEAN,STD: parameters whose name matches GLOB (the first "
             "rule that matches) are not read from the model: they are "
             "generated at load, uniform with this mean and deviation "
             "(seed 1), as a freshly initialised model (e.g. "
             "'*norm.scale=1,0' '*=0,0.02'); optimizer states start from "
             "their initial value without being stored. For models whose "
             "weights were never written (test/models/synthetic.py); "
             "repeatable"),
    cl::value_desc("GLOB=MEAN,STD"));
static cl::opt<std::string> lrSchedule(
    "lr-schedule",
    cl::desc("constant (default), warmup (linear warmup, then constant) or "
             "cosine (warmup, then cosine decay to --min-lr-ratio)"),
    cl::init("constant"), cl::cat(trainCategory));
static cl::opt<int64_t> warmupSteps("warmup-steps",
                                    cl::desc("Linear warmup steps"),
                                    cl::init(0), cl::cat(trainCategory));
static cl::opt<int64_t>
    totalSteps("total-steps", cl::desc("Steps the cosine schedule decays over"),
               cl::init(0), cl::cat(trainCategory));
static cl::opt<double>
    minLrRatio("min-lr-ratio", cl::desc("Final learning rate / base (cosine)"),
               cl::init(0.0), cl::cat(trainCategory));

static cl::opt<std::string> outputFile(
    "o",
    cl::desc("Output: the artifact directory, or the IR file ('-' for "
             "stdout)"),
    cl::value_desc("path"), cl::init("-"), cl::cat(category));

static cl::list<std::string> inputShapes(
    "input-shape",
    cl::desc("Bind a dynamic input's shape (NAME=D0xD1x..., e.g. "
             "input_ids=4x128) or a symbolic dimension (batch=4); repeatable"),
    cl::value_desc("NAME=SHAPE"), cl::cat(category));

static cl::list<std::string> inputValues(
    "input-value",
    cl::desc("Fix a graph input to the value in FILE.npy at compile time "
             "(it becomes a constant; shapes computed from it are static); "
             "repeatable"),
    cl::value_desc("NAME=FILE.npy"), cl::cat(category));

static cl::list<std::string> freezeGlobs(
    "freeze",
    cl::desc("Freeze the float initializers whose name matches GLOB (no "
             "gradient, no update); repeatable"),
    cl::value_desc("GLOB"), cl::cat(category));

static cl::opt<std::string> nonzeroRows(
    "nonzero-rows",
    cl::desc("Rows whose count the data decide (a NonZero on the data path, "
             "as mixture-of-experts routing uses it; memory is planned at "
             "the bound): grouped (default: as compact, and a router's "
             "experts become one grouped product over one buffer of their "
             "rows where their computations match), compact (each "
             "NonZero's real rows first, matrix products stop at their "
             "count), bound (every candidate row computed: the exported "
             "graph run densely, for comparison)"),
    cl::value_desc("grouped|compact|bound"), cl::init("grouped"),
    cl::cat(category));

static cl::opt<bool>
    printIRAfterAll("print-ir-after-all",
                    cl::desc("Print the IR after every pass to stderr"),
                    cl::init(false), cl::cat(category));

static cl::opt<std::string> dumpIRDir(
    "dump-ir",
    cl::desc(
        "Write the IR after import and after every pass to DIR/NN-<pass>.mlir"),
    cl::value_desc("DIR"), cl::init(""), cl::cat(category));

static cl::opt<bool> printWeights(
    "print-weights",
    cl::desc("Print parameter values in full instead of eliding them"),
    cl::init(false), cl::cat(category));

static cl::opt<bool> printPipeline(
    "print-pipeline",
    cl::desc("Print the pass pipeline this compile would run, in "
             "strata-opt's --pass-pipeline syntax with every option "
             "resolved, and exit (strata-opt on the imported IR, e.g. from "
             "--dump-ir, then reproduces the compile)"),
    cl::init(false), cl::cat(category));

static cl::OptionCategory tierCategory("memory tiers");
static cl::list<std::string> ssdDirs(
    "ssd-dir",
    cl::desc("Directory of the SSD store, one per drive (repeatable: drives "
             "are striped)"),
    cl::cat(tierCategory));

// The training and tier options as given (passes/PipelineOptions.h
// declares them, with their flags' names and help; main binds them).
static strata::TrainingOptions training;
static strata::TierOptions tiers;
static strata::compile::DriverFlags trainingFlags(trainCategory);
static strata::compile::DriverFlags tierFlags(tierCategory);

/// --loss-scale as the step uses it: fp16 without an explicit choice
/// scales dynamically (its narrow range underflows small gradients).
static std::string effectiveLossScale() {
  if (training.precision == "fp16" && !trainingFlags.given("loss-scale"))
    return "dynamic";
  return training.lossScale;
}

/// Whether each update runs as soon as its gradient is final: asked for,
/// implied by LOMO/AdaLomo, or for updates that may run on the CPU (which
/// overlap the backward pass only then), unless loss scaling would then
/// need a second backward pass or updates wait for accumulated gradients.
static bool fusingUpdates() {
  // Updates may run on the CPU when parameters or states are off the
  // device: forced there, or left to the planner under a device budget
  // (which scores placements with the updates fused, so that gradients die
  // as soon as their update has run).
  auto offDevice = [](const std::string &place) {
    return place == "host" || place == "ssd" ||
           (place == "auto" && tierFlags.given("gpu-mem"));
  };
  bool offloading =
      tiers.placeUpdates == "cpu" ||
      (tiers.placeUpdates == "auto" &&
       (offDevice(tiers.placeParams) || offDevice(tiers.placeStates)));
  if (training.optimizer == "lomo" || training.optimizer == "adalomo")
    return true;
  // --fuse-updates=false keeps the updates after the backward pass.
  if (trainingFlags.given("fuse-updates"))
    return training.fuseUpdates;
  // Data parallel takes the same rule: a fused update goes after the
  // all-reduces issued after its gradient's (--strata-fuse-grad-update),
  // so the compute does not wait for its collective.
  return offloading && effectiveLossScale() == "none" &&
         training.accumulate <= 1;
}

/// The profile a compile plans for: --profile, else the remembered one
/// when it exists, else none (the built-in defaults; also for
/// --profile=builtin). `remembered` says which.
static std::string resolvedProfile(bool &remembered) {
  remembered = false;
  if (tiers.profile == "builtin")
    return "";
  if (!tiers.profile.empty())
    return tiers.profile;
  std::string path = strata::rememberedProfilePath();
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec))
    return "";
  remembered = true;
  return path;
}

static cl::opt<std::string> predictedTrace(
    "predicted-trace",
    cl::desc("Write the predicted schedule of the plan as a Chrome trace "
             "(chrome://tracing, Perfetto): one track per queue (compute, "
             "host copies, SSD reads and writes, CPU updates, collectives), "
             "one event per kernel, transfer or update, named by the "
             "tensor it moves; with --emit=plan-report too, where no "
             "artifact exists to draw it from"),
    cl::value_desc("FILE"), cl::init(""), cl::cat(category));

static cl::opt<bool> report(
    "report",
    cl::desc("Print the plan's memory by class (parameters, gradients, "
             "optimizer states, activations, workspace) after compiling"),
    cl::init(false), cl::cat(category));

static cl::opt<bool> listOps(
    "list-ops",
    cl::desc("List the supported ONNX ops (with the first supported opset) "
             "and exit"),
    cl::init(false), cl::cat(category));

static cl::opt<bool> listOpsets(
    "list-opsets",
    cl::desc("Print the lowest and highest supported opset and exit"),
    cl::init(false), cl::cat(category));

/// Every hyperparameter's domain, checked before any work: an out-of-domain
/// value would otherwise train with meaningless numbers. Empty when fine.
/// --synthetic-init's GLOB=MEAN,STD rules; an error names the bad one.
static std::string
parseInitRules(std::vector<strata::ArtifactInfo::InitRule> &rules) {
  for (const std::string &spec : syntheticInit) {
    strata::ArtifactInfo::InitRule rule;
    size_t eq = spec.rfind('=');
    size_t comma = eq == std::string::npos ? eq : spec.find(',', eq);
    bool ok = eq != std::string::npos && eq > 0 && comma != std::string::npos;
    if (ok) {
      rule.glob = spec.substr(0, eq);
      std::string mean = spec.substr(eq + 1, comma - eq - 1),
                  stddev = spec.substr(comma + 1);
      char *end = nullptr;
      rule.mean = std::strtod(mean.c_str(), &end);
      ok = !mean.empty() && *end == '\0';
      rule.stddev = std::strtod(stddev.c_str(), &end);
      ok = ok && !stddev.empty() && *end == '\0' && std::isfinite(rule.mean) &&
           std::isfinite(rule.stddev) && rule.stddev >= 0;
    }
    if (!ok)
      return "--synthetic-init '" + spec +
             "': expected GLOB=MEAN,STD with finite numbers and STD >= 0 "
             "(e.g. '*=0,0.02')";
    rules.push_back(rule);
  }
  return "";
}

static std::string checkTrainingOptions() {
  auto finite = [](double v) { return std::isfinite(v); };
  struct Range {
    const char *flag;
    double value;
    bool ok;
    const char *domain;
  };
  const Range ranges[] = {
      {"--lr", training.lr, finite(training.lr) && training.lr > 0,
       "a positive number"},
      {"--momentum", training.momentum,
       finite(training.momentum) && training.momentum >= 0 &&
           training.momentum < 1,
       "in [0, 1)"},
      {"--beta1", training.beta1,
       finite(training.beta1) && training.beta1 >= 0 && training.beta1 < 1,
       "in [0, 1)"},
      {"--beta2", training.beta2,
       finite(training.beta2) && training.beta2 >= 0 && training.beta2 < 1,
       "in [0, 1)"},
      {"--eps", training.eps, finite(training.eps) && training.eps > 0,
       "a positive number"},
      {"--weight-decay", training.weightDecay,
       finite(training.weightDecay) && training.weightDecay >= 0,
       "a non-negative number"},
      {"--clip-grad-norm", training.clipGradNorm,
       finite(training.clipGradNorm) && training.clipGradNorm >= 0,
       "a non-negative number (0: off)"},
      {"--min-lr-ratio", minLrRatio,
       finite(minLrRatio) && minLrRatio >= 0 && minLrRatio <= 1, "in [0, 1]"},
      {"--loss-scale-init", training.lossScaleInit,
       finite(training.lossScaleInit) && training.lossScaleInit > 0,
       "a positive number"},
  };
  for (const Range &r : ranges)
    if (!r.ok)
      return std::string(r.flag) + " must be " + r.domain + ", not " +
             std::to_string(r.value);
  if (warmupSteps < 0 || totalSteps < 0)
    return "--warmup-steps and --total-steps must be non-negative";
  if (training.accumulate < 1 || training.accumulate > (int64_t(1) << 31))
    return "--accumulate must be between 1 and 2^31, not " +
           std::to_string(training.accumulate);
  if (training.lossScaleWindow < 1)
    return "--loss-scale-window must be at least 1";
  if (training.dataParallel < 1 || training.dataParallel > (1 << 20))
    return "--data-parallel must be between 1 and 2^20 ranks, not " +
           std::to_string(training.dataParallel);
  if (training.dataParallel > 1 && mode == Mode::Forward)
    return "--data-parallel averages gradients: it goes with --mode train "
           "or grad";
  if (training.shardParameters && training.dataParallel < 2)
    return "--shard-parameters shards the parameters over the data-parallel "
           "ranks: it needs --data-parallel of 2 or more";
  if (training.shardParameters && mode != Mode::Train)
    return "--shard-parameters goes with --mode train (a --mode grad plan "
           "returns whole gradients of whole parameters)";
  if (training.shardOptimizer && training.dataParallel < 2)
    return "--shard-optimizer shards the optimizer over the data-parallel "
           "ranks: it needs --data-parallel of 2 or more";
  if (training.shardOptimizer && mode != Mode::Train)
    return "--shard-optimizer shards the optimizer's states and updates: it "
           "goes with --mode train (a --mode grad plan returns whole "
           "gradients)";
  if (training.ranksPerNode != 0 &&
      (training.ranksPerNode < 1 ||
       training.ranksPerNode > training.dataParallel))
    return "--ranks-per-node must be 0 (all ranks on one machine) or 1 to "
           "--data-parallel (" +
           std::to_string(training.dataParallel) + "), not " +
           std::to_string(training.ranksPerNode);
  if (tiers.plannerEvaluations < 1)
    return "--planner-evaluations must be at least 1";
  if (tiers.plannerThreads < 0 || tiers.plannerThreads > 4096)
    return "--planner-threads must be between 0 (one per core) and 4096";
  if (!(tiers.prefetchLead >= 0 && tiers.prefetchLead <= 1000))
    return "--prefetch-lead must be between 0 and 1000";
  if (fusion != "on" && fusion != "off")
    return "--fusion must be on or off, not '" + fusion + "'";
  if (training.precision != "fp32" && training.precision != "bf16" &&
      training.precision != "fp16")
    return "--precision must be fp32, bf16 or fp16, not '" +
           training.precision + "'";
  if (std::string why = tiers.check(); !why.empty())
    return "--" + why;
  if (!labelsFeed.empty() && labelsFeed != "next" && labelsFeed != "same")
    return "--labels must be next or same, not '" + labelsFeed + "'";
  if (labelsFeed == "same" && training.loss == "causal-lm")
    return "--labels same with --loss causal-lm would train the model to "
           "copy its input (the causal-LM loss compares each position with "
           "its label); it is for --loss output";
  if (tiers.cpuJobBytes < -1)
    return "--cpu-job-bytes must be a byte count (0: one job per update), "
           "not " +
           std::to_string(tiers.cpuJobBytes);
  return "";
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  strata::ignoreFileSizeSignal();
  training.bind(trainingFlags);
  tiers.bind(tierFlags);
  cl::HideUnrelatedOptions({&category, &trainCategory, &tierCategory});
  // --list-ops needs no model; let it through the Required positional.
  for (int i = 1; i < argc; ++i) {
    if (llvm::StringRef(argv[i]) == "--list-ops") {
      for (const auto &[op, since] : strata::supportedOnnxOps())
        llvm::outs() << op << " " << since << "\n";
      return 0;
    }
    if (llvm::StringRef(argv[i]) == "--list-opsets") {
      llvm::outs() << strata::kMinOpset << " " << strata::kMaxOpset << "\n";
      return 0;
    }
  }
  cl::ParseCommandLineOptions(
      argc, argv,
      "Strata: ahead-of-time training compiler for ONNX transformers\n\n"
      "  strata-compile model.onnx --input-shape input_ids=4x128 "
      "--emit=graph\n");

  // A flag given an empty value ('--ssd-dir=', an unset shell variable)
  // would read as "not given" (no budget, the working directory): refuse.
  std::string emptyFlag = tierFlags.emptySize();
  if (!emptyFlag.empty())
    emptyFlag = "--" + emptyFlag;
  else if (tierFlags.given("profile") && tiers.profile.empty())
    emptyFlag = "--profile";
  for (auto [flag, opt] :
       {std::pair{"-o", &outputFile}, std::pair{"--dump-ir", &dumpIRDir}})
    if (emptyFlag.empty() && opt->getNumOccurrences() > 0 && opt->empty())
      emptyFlag = flag;
  if (!emptyFlag.empty()) {
    llvm::errs() << "strata-compile: error: " << emptyFlag << ": empty value\n";
    return 1;
  }
  for (const std::string &d : ssdDirs)
    if (d.empty()) {
      llvm::errs() << "strata-compile: error: --ssd-dir: empty value\n";
      return 1;
    }

  // Nothing the user did not name as the output is ever overwritten.
  if (outputFile != "-" && llvm::sys::fs::exists(outputFile) &&
      llvm::sys::fs::equivalent(inputFile, outputFile)) {
    llvm::errs() << "strata-compile: error: -o '" << outputFile
                 << "' is the input model; refusing to overwrite it (name "
                    "a new artifact directory)\n";
    return 1;
  }
  if (std::string why = checkTrainingOptions(); !why.empty()) {
    llvm::errs() << "strata-compile: error: " << why << "\n";
    return 1;
  }
  std::vector<strata::ArtifactInfo::InitRule> initRules;
  if (std::string why = parseInitRules(initRules); !why.empty()) {
    llvm::errs() << "strata-compile: error: " << why << "\n";
    return 1;
  }

  strata::ImportOptions options;
  options.freezeGlobs.assign(freezeGlobs.begin(), freezeGlobs.end());
  if (nonzeroRows != "grouped" && nonzeroRows != "compact" &&
      nonzeroRows != "bound") {
    llvm::errs() << "strata-compile: error: --nonzero-rows must be grouped, "
                    "compact or bound, not '"
                 << nonzeroRows << "'\n";
    return 1;
  }
  options.compactRows = nonzeroRows != "bound";
  if (std::string error; !strata::compile::addInputSpecs(
          inputShapes, inputValues, options, error)) {
    llvm::errs() << "strata-compile: error: " << error << "\n";
    return 1;
  }

  strata::onnx::Model model;
  std::string error;
  if (!strata::onnx::loadModel(inputFile, model, error)) {
    llvm::errs() << "strata-compile: error: " << error << "\n";
    return 1;
  }

  MLIRContext context;
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    const char *kind = diag.getSeverity() == DiagnosticSeverity::Error ? "error"
                       : diag.getSeverity() == DiagnosticSeverity::Warning
                           ? "warning"
                           : "note";
    std::string file;
    if (auto fileLoc = diag.getLocation()->findInstanceOf<FileLineColLoc>())
      file = fileLoc.getFilename().str() + ": ";
    llvm::errs() << "strata-compile: " << file << kind << ": " << diag << "\n";
    return success();
  });

  OwningOpRef<ModuleOp> module =
      strata::importOnnxModel(context, model, options);
  if (!module)
    return 1;

  std::unique_ptr<strata::compile::DumpIRInstrumentation> dumper;
  if (!dumpIRDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(dumpIRDir)) {
      llvm::errs() << "strata-compile: error: cannot create " << dumpIRDir
                   << ": " << ec.message() << "\n";
      return 1;
    }
    dumper = std::make_unique<strata::compile::DumpIRInstrumentation>(
        dumpIRDir, printWeights);
    dumper->write(*module, "import");
  }

  PassManager pm(&context);
  if (printIRAfterAll) {
    context.disableMultithreading();
    pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                        [](Pass *, Operation *) { return true; },
                        /*printModuleScope=*/true,
                        /*printAfterOnlyOnChange=*/false,
                        /*printAfterOnlyOnFailure=*/false, llvm::errs(),
                        strata::compile::printingFlags(printWeights));
  }
  if (dumper) {
    context.disableMultithreading();
    pm.addInstrumentation(std::move(dumper));
  }
  Emit what = emit;
  if (what == Emit::Default)
    what = outputFile == "-" || llvm::StringRef(outputFile).ends_with(".mlir")
               ? Emit::Graph
               : Emit::Artifact;
  if (what == Emit::Artifact && outputFile == "-") {
    llvm::errs() << "strata-compile: error: --emit=artifact needs -o DIR\n";
    return 1;
  }
  strata::artifact::Schedule schedule;
  std::string optimizerText;
  if (mode == Mode::Train) {
    if (lrSchedule == "constant" || lrSchedule == "warmup") {
      schedule.kind = lrSchedule == "constant"
                          ? strata::artifact::Schedule::Constant
                          : strata::artifact::Schedule::Warmup;
    } else if (lrSchedule == "cosine") {
      schedule.kind = strata::artifact::Schedule::Cosine;
      if (totalSteps <= warmupSteps) {
        llvm::errs() << "strata-compile: error: --lr-schedule cosine needs "
                        "--total-steps greater than --warmup-steps\n";
        return 1;
      }
    } else {
      llvm::errs() << "strata-compile: error: unknown --lr-schedule '"
                   << lrSchedule << "' (constant, warmup or cosine)\n";
      return 1;
    }
    if (warmupSteps < 0 || training.lr <= 0) {
      llvm::errs() << "strata-compile: error: --lr must be positive and "
                      "--warmup-steps non-negative\n";
      return 1;
    }
    schedule.warmupSteps = warmupSteps;
    schedule.totalSteps = totalSteps;
    schedule.minRatio = minLrRatio;
    std::ostringstream text;
    text << training.optimizer << " lr=" << training.lr
         << " schedule=" << lrSchedule.getValue();
    if (warmupSteps > 0)
      text << " warmup=" << warmupSteps.getValue();
    if (schedule.kind == strata::artifact::Schedule::Cosine)
      text << " total=" << totalSteps.getValue()
           << " min_ratio=" << minLrRatio.getValue();
    if (training.optimizer == "momentum")
      text << " momentum=" << training.momentum;
    if (training.optimizer == "adamw")
      text << " betas=(" << training.beta1 << ", " << training.beta2
           << ") eps=" << training.eps;
    text << " weight_decay=" << training.weightDecay;
    if (training.clipGradNorm > 0)
      text << " clip_grad_norm=" << training.clipGradNorm
           << " clip_mode=" << training.clipMode;
    if (training.accumulate > 1)
      text << " accumulate=" << training.accumulate;
    if (training.dataParallel > 1)
      text << " data_parallel=" << training.dataParallel;
    if (training.shardParameters)
      text << " shard_parameters";
    else if (training.shardOptimizer)
      text << " shard_optimizer";
    if (effectiveLossScale() != "none")
      text << " loss_scale=" << effectiveLossScale();
    if (training.precision != "fp32")
      text << " precision=" << training.precision;
    if (fusingUpdates())
      text << " fused";
    optimizerText = text.str();
  }
  strata::buildGraphCleanupPipeline(pm);
  if (nonzeroRows == "grouped") {
    pm.addPass(strata::createGroupExpertsPass());
    strata::buildGraphCleanupPipeline(pm);
  }
  if (fusion == "on" && what != Emit::Graph) {
    pm.addPass(strata::createFusePatternsPass());
    strata::buildGraphCleanupPipeline(pm);
  }
  if (what != Emit::Graph && mode != Mode::Forward) {
    // The step as built: the options given, with what they imply.
    strata::TrainingOptions step = training;
    step.fuseUpdates = fusingUpdates();
    step.lossScale = effectiveLossScale();
    if (training.precision == "fp16" && training.lossScale == "none")
      llvm::errs() << (trainingFlags.given("loss-scale")
                           ? "strata-compile: warning: --precision fp16 with "
                             "--loss-scale none: small gradients may "
                             "underflow to zero\n"
                           : "strata-compile: note: --precision fp16 trains "
                             "with --loss-scale dynamic\n");
    // The overflow check needs every gradient; fused updates then need the
    // norm from a first backward pass so that a skipped step skips them all.
    if (step.fuseUpdates && step.lossScale != "none" &&
        step.clipMode != "two-pass") {
      if (step.clipGradNorm > 0 && step.clipMode == "previous-step") {
        llvm::errs() << "strata-compile: error: loss scaling with fused "
                        "updates needs --clip-mode two-pass\n";
        return 1;
      }
      llvm::errs() << "strata-compile: note: loss scaling with fused "
                      "updates: the overflow check runs in a first backward "
                      "pass (two-pass)\n";
      step.clipMode = "two-pass";
    }
    step.gradientsOnly = mode == Mode::Grad;
    strata::buildTrainingPipeline(pm, step);
  }
  // Elementwise chains of the whole step, the backward pass's included.
  if (fusion == "on" && what != Emit::Graph)
    pm.addPass(strata::createFuseElementwisePass());
  // The tiers as planned: the options given, with what they imply.
  if (std::string why = tierFlags.finish(); !why.empty()) {
    llvm::errs() << "strata-compile: error: " << why << "\n";
    return 1;
  }
  strata::TierOptions plan = tiers;
  // Under loss scaling a step's scale is never 1 (it unscales), so an
  // update run as if it were would always be redone.
  plan.speculateUpdates =
      tiers.speculateUpdates && effectiveLossScale() == "none";
  if (tierFlags.given("speculate-updates") && tiers.speculateUpdates &&
      !plan.speculateUpdates)
    llvm::errs() << "strata-compile: note: --speculate-updates has no "
                    "effect with loss scaling (a step's scale is never 1)\n";
  // The copies' values are made when the artifact is written: compiling
  // (and a plan-only compile, which writes none) never reads the weights.
  plan.deferCopyValues = true;
  plan.progress = true;
  plan.hasSsd = !ssdDirs.empty();
  bool rememberedProfile = false;
  plan.profile = resolvedProfile(rememberedProfile);
  bool planned =
      what == Emit::Exec || what == Emit::Artifact || what == Emit::PlanReport;
  if (planned)
    strata::buildForwardToExecPipeline(pm, plan);
  if (printPipeline) {
    pm.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  if (failed(pm.run(*module)))
    return 1;

  if (planned && (failed(strata::compile::checkDeviceBudget(*module, plan)) ||
                  (plan.cpuMem > 0 &&
                   failed(strata::compile::checkHostBudget(*module, plan)))))
    return 1;
  if (!predictedTrace.empty()) {
    std::string trace =
        planned ? strata::compile::formatPredictedTrace(*module) : "";
    if (trace.empty()) {
      llvm::errs() << "strata-compile: error: --predicted-trace: no "
                      "predicted schedule (only --emit=exec, artifact and "
                      "plan-report plan and time the step)\n";
      return 1;
    }
    std::string traceError;
    auto traceFile = openOutputFile(predictedTrace, &traceError);
    if (!traceFile) {
      llvm::errs() << "strata-compile: error: --predicted-trace: " << traceError
                   << "\n";
      return 1;
    }
    traceFile->os() << trace;
    traceFile->keep();
  }
  if (what == Emit::Artifact) {
    strata::ArtifactInfo info;
    // Recorded absolute: every tool finds the same SSD directory, whatever
    // its working directory.
    for (const std::string &d : ssdDirs) {
      llvm::SmallString<256> path(d);
      llvm::sys::fs::make_absolute(path);
      llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
      info.ssdDirs.push_back(path.str().str());
    }

    if (auto producer = strata::getDeclaredAttr<
            strata::graph::GraphDialect::ProducerAttrHelper>(*module))
      info.producer = producer.getValue().str();
    info.mode = mode == Mode::Train ? "train" : "forward";
    // Recorded absolute, so strata-export finds the model from anywhere.
    llvm::SmallString<256> source(inputFile);
    llvm::sys::fs::make_absolute(source);
    info.sourceModel = source.str().str();
    info.sourceFingerprint = model.fingerprint;
    strata::compile::StepFlops work = strata::compile::stepFlops(
        *module,
        static_cast<uint32_t>(std::max<int64_t>(1, training.accumulate)));
    info.stepFlops = work.model;
    info.recomputedFlops = work.recomputed;
    info.schedule = schedule;
    info.optimizer = optimizerText;
    if (mode == Mode::Train)
      info.labels = !labelsFeed.empty()         ? labelsFeed.getValue()
                    : training.loss == "output" ? std::string("same")
                                                : std::string("next");
    info.accumulate =
        static_cast<uint32_t>(std::max<int64_t>(1, training.accumulate));
    info.syntheticParams = syntheticParams;
    info.syntheticInit = initRules;
    if (failed(strata::writeArtifact(*module, outputFile, info)))
      return 1;
    if (report) {
      strata::artifact::Plan plan;
      std::string error;
      if (!strata::artifact::readPlan(outputFile + "/plan.bin", plan, error)) {
        llvm::errs() << "strata-compile: error: " << error << "\n";
        return 1;
      }
      llvm::outs() << strata::artifact::formatMemoryReport(plan);
    }
    return 0;
  }

  std::string openError;
  auto output = openOutputFile(outputFile, &openError);
  if (!output) {
    llvm::errs() << "strata-compile: error: " << openError << "\n";
    return 1;
  }
  if (what == Emit::PlanReport) {
    strata::compile::PlanReportInfo info;
    llvm::SmallString<256> source(inputFile);
    llvm::sys::fs::make_absolute(source);
    info.sourceModel = source.str().str();
    info.mode = mode == Mode::Train  ? "train"
                : mode == Mode::Grad ? "grad"
                                     : "forward";
    info.optimizer = optimizerText;
    info.profile = plan.profile;
    info.profileRemembered = rememberedProfile;
    info.gpuMem = plan.gpuMem;
    info.cpuMem = plan.cpuMem;
    info.ssdDrives = ssdDirs.size();
    info.accumulate =
        static_cast<uint32_t>(std::max<int64_t>(1, training.accumulate));
    output->os() << strata::compile::formatPlanReport(*module, info);
    output->keep();
    return 0;
  }
  module->print(output->os(), strata::compile::printingFlags(printWeights));
  output->os() << "\n";
  output->keep();
  return 0;
}
