// strata-run.cpp - Runs a compiled Strata artifact.
//
//   strata-run model.strata --input NAME=FILE.npy ... --output-dir DIR
//
// Each output is written as DIR/<output name>.npy.

#include "runtime/backends/cuda/CudaBackend.h"
#include "runtime/exec/BackendRegistry.h"
#include "runtime/exec/Executor.h"
#include "runtime/support/Checked.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Size.h"
#include "runtime/train/DataParallel.h"
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/resource.h>
#include <vector>

using namespace strata;

/// The process's peak resident memory, as the kernel counts it.
static uint64_t maxResidentBytes() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return 0;
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

/// What the run really used, beside what the plan reserved: the device
/// memory the backend allocated (and the device's own count, where there
/// is a driver to ask), the process's peak resident set split into what
/// it held before loading the artifact, the plan's host-side memory, and
/// the rest.
static void printMemoryUse(const artifact::Plan &plan,
                           const runtime::Executor &executor,
                           uint64_t rssAtStart) {
  uint64_t staging = executor.stagingBytes();
  uint64_t hostPlanned = plan.hostBytes + staging;
  std::fprintf(stderr,
               "strata-run: memory planned: device arena %s, parameter "
               "region %s, host region %s, SSD %s; run-time staging %s\n",
               formatSize(plan.arenaBytes).c_str(),
               formatSize(plan.paramsBytes).c_str(),
               formatSize(plan.hostBytes).c_str(),
               formatSize(plan.ssdBytes).c_str(), formatSize(staging).c_str());
  uint64_t devicePlanned = plan.arenaBytes + plan.paramsBytes;
  runtime::Backend::DeviceMemoryUse device;
  if (executor.backend().deviceMemoryUse(device)) {
    std::string extra =
        device.allocated >= devicePlanned
            ? "+" + formatSize(device.allocated - devicePlanned)
            : "-" + formatSize(devicePlanned - device.allocated);
    std::fprintf(stderr,
                 "strata-run: device memory used: %s allocated (the plan's "
                 "%s %s: the backend's workspaces)",
                 formatSize(device.allocated).c_str(),
                 formatSize(devicePlanned).c_str(), extra.c_str());
    if (device.total > 0)
      std::fprintf(stderr,
                   "; %s of the device's %s in use by all processes (the "
                   "driver's count, with the CUDA context)",
                   formatSize(device.inUse).c_str(),
                   formatSize(device.total).c_str());
    std::fprintf(stderr, "\n");
  } else {
    hostPlanned += devicePlanned; // The device is host memory.
  }
  uint64_t rss = maxResidentBytes();
  uint64_t accounted = rssAtStart + hostPlanned;
  std::string rest =
      rss >= accounted
          ? formatSize(rss - accounted) +
                " other (the data set, allocator slack, thread stacks, "
                "kernel scratch)"
          : formatSize(accounted - rss) +
                " of the planned memory never resident (pages not touched)";
  std::fprintf(stderr,
               "strata-run: host memory used: peak RSS %s = %s at start "
               "(code, libraries) + %s planned host memory + %s\n",
               formatSize(rss).c_str(), formatSize(rssAtStart).c_str(),
               formatSize(hostPlanned).c_str(), rest.c_str());
}

static void usage(FILE *out) {
  std::fprintf(out,
               "usage: strata-run ARTIFACT --input NAME=FILE.npy ... "
               "--output-dir DIR [options]\n"
               "       strata-run ARTIFACT --data FILE --steps N [options]\n\n"
               "Runs a compiled Strata artifact (a directory written by "
               "strata-compile -o): a forward plan once, a training plan "
               "for N steps.\n\n"
               "options:\n"
               "  --input NAME=FILE.npy  an input of the model (one per "
               "input)\n"
               "  --output-dir DIR       write each output as "
               "DIR/<name>.npy\n"
               "  --device-mem SIZE      device-memory budget (e.g. 2GiB); "
               "the run fails if the plan needs more\n"
               "  --quiet                no summary on stderr\n"
               "training (plans compiled with --mode train):\n"
               "  --data FILE            token data: .npy int32/int64 [N, "
               "T+1] rows, or a .bin uint16 token stream\n"
               "  --labels FILE          labels for the rows of a .npy --data "
               "(same shape, aligned\n"
               "                         with the tokens as HuggingFace gives "
               "them; negative, e.g.\n"
               "                         -100: left out of the loss)\n"
               "  --segments FILE        packed rows' segment ids (.npy of "
               "--data's shape: each\n"
               "                         example of a row a number, padding "
               "-1), for a plan with\n"
               "                         position_ids and segment_ids inputs\n"
               "  --steps N              train until step N\n"
               "  --epochs E             instead of --steps: E passes over "
               "the rows of --data\n"
               "  --shuffle SEED         the rows in a new order each epoch "
               "(the same for a seed\n"
               "                         on every machine, and after "
               "--resume)\n"
               "  --eval-data FILE       held-out rows (.npy or .bin, as "
               "--data): their loss and\n"
               "                         perplexity, every --eval-every N "
               "steps and at the end\n"
               "  --eval-every N         evaluate every N steps (default: at "
               "the end only)\n"
               "  --eval-labels FILE     labels for --eval-data (as --labels)\n"
               "  --eval-segments FILE   segment ids for --eval-data (as "
               "--segments)\n"
               "  --keep-last K          keep each checkpoint as "
               "CHECKPOINT_DIR/step-N.bin too,\n"
               "                         the latest K of them (older ones "
               "are removed)\n"
               "  --keep-best            keep the checkpoint of the lowest "
               "held-out loss in\n"
               "                         CHECKPOINT_DIR/best/ (best.json: its "
               "step and loss)\n"
               "  --tensorboard DIR      TensorBoard event files in DIR "
               "(train/loss, learning_rate,\n"
               "                         grad_norm, tokens_per_s, step_s; "
               "eval/loss, perplexity)\n"
               "  --save-every K         checkpoint every K steps (and at the "
               "end)\n"
               "  --no-checkpoint        save no checkpoint, not even at the "
               "end (benchmarks)\n"
               "  --checkpoint-dir DIR   where checkpoints go (default: "
               "ARTIFACT/checkpoint)\n"
               "  --resume               continue from the last checkpoint\n"
               "  --resume-by-name       --resume from a checkpoint that "
               "may be of another plan\n"
               "                         of the same model (recompiled with "
               "other budgets, another\n"
               "                         --data-parallel N, another lr): "
               "tensors matched by name\n"
               "  --log-json FILE        one JSON object per step (step, "
               "loss, lr, grad_norm, tokens_per_s, step_s; speculated and "
               "redone_updates with speculative CPU updates); a write "
               "error stops the run\n"
               "  --on-nan stop|skip     a non-finite loss or gradient norm "
               "stops the run\n"
               "                         without saving (stop, default) or "
               "skips the step (skip;\n"
               "                         plans compiled with --loss-scale "
               "only)\n"
               "  --trace FILE           Chrome-trace JSON of every kernel, "
               "copy and I/O (chrome://tracing, Perfetto);\n"
               "                         under mpirun rank 0's (rank R's in "
               "FILE.rankR)\n"
               "  --trace-steps N        training steps to trace (default 2)\n"
               "  --ssd-dir DIR          SSD store directories (default: as "
               "compiled; repeatable)\n"
               "  --no-overlap           run transfers between tiers in "
               "program order, not beside the compute\n"
               "  --backend NAME         cpu, async-test (the CPU kernels "
               "with a GPU's asynchrony,\n"
               "                         for testing) or cuda; default: "
               "$STRATA_BACKEND, else cuda when\n"
               "                         a GPU is present, else cpu\n"
               "  --help                 this text\n");
}

/// Output names may hold characters a file name cannot.
static std::string fileNameFor(const std::string &name) {
  std::string out = name;
  for (char &c : out)
    if (c == '/' || c == '\0')
      c = '_';
  return out;
}

int main(int argc, char **argv) {
  strata::ignoreFileSizeSignal();
  std::string artifactDir, outputDir;
  std::vector<std::pair<std::string, std::string>> inputs;
  uint64_t budget = 0;
  bool quiet = false;
  trainer::TrainerOptions trainOptions;
  bool stepsGiven = false;
  std::string tracePath;
  std::vector<std::string> ssdDirs;
  bool overlap = true;
  std::string backendName;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char *flag) -> std::string {
      std::string prefix = std::string(flag) + "=";
      std::string v;
      if (arg.rfind(prefix, 0) == 0) {
        v = arg.substr(prefix.size());
      } else if (i + 1 < argc) {
        v = argv[++i];
      } else {
        std::fprintf(stderr, "strata-run: error: %s needs a value\n", flag);
        std::exit(2);
      }
      // An empty value ('--ssd-dir=', a variable that was not set) would
      // otherwise mean the working directory or "no limit".
      if (v.empty()) {
        std::fprintf(stderr, "strata-run: error: %s: empty value\n", flag);
        std::exit(2);
      }
      return v;
    };
    // The options whose value is taken as given (files, directories, a
    // backend name).
    const std::pair<const char *, std::string *> strings[] = {
        {"--output-dir", &outputDir},
        {"--data", &trainOptions.dataPath},
        {"--labels", &trainOptions.labelsPath},
        {"--eval-data", &trainOptions.evalData},
        {"--segments", &trainOptions.segmentsPath},
        {"--eval-segments", &trainOptions.evalSegments},
        {"--eval-labels", &trainOptions.evalLabels},
        {"--tensorboard", &trainOptions.tensorboardDir},
        {"--checkpoint-dir", &trainOptions.checkpointDir},
        {"--trace", &tracePath},
        {"--backend", &backendName},
        {"--log-json", &trainOptions.logJson},
    };
    auto named = [&](const char *flag) {
      return arg == flag || arg.rfind(std::string(flag) + "=", 0) == 0;
    };
    auto *given = std::find_if(std::begin(strings), std::end(strings),
                               [&](const auto &o) { return named(o.first); });
    if (given != std::end(strings)) {
      *given->second = value(given->first);
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    } else if (named("--input")) {
      std::string spec = value("--input");
      size_t eq = spec.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr,
                     "strata-run: error: --input expects NAME=FILE.npy, got "
                     "'%s'\n",
                     spec.c_str());
        return 2;
      }
      inputs.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
    } else if (named("--device-mem")) {
      std::string text = value("--device-mem");
      if (!parseSize(text, budget) || budget == 0) {
        std::fprintf(stderr,
                     "strata-run: error: invalid size '%s' (e.g. 512MiB, "
                     "2GiB)\n",
                     text.c_str());
        return 2;
      }
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (named("--epochs")) {
      std::string text = value("--epochs");
      if (!parseFiniteDouble(text, trainOptions.epochs) ||
          !(trainOptions.epochs > 0)) {
        std::fprintf(stderr,
                     "strata-run: error: --epochs expects a positive number, "
                     "got '%s'\n",
                     text.c_str());
        return 2;
      }
      stepsGiven = true;
    } else if (named("--shuffle")) {
      std::string text = value("--shuffle");
      int64_t seed = 0;
      if (!parseInt64(text, seed, 0)) {
        std::fprintf(stderr,
                     "strata-run: error: --shuffle expects a seed (a "
                     "non-negative integer), got '%s'\n",
                     text.c_str());
        return 2;
      }
      trainOptions.shuffle = true;
      trainOptions.shuffleSeed = static_cast<uint64_t>(seed);
    } else if (arg == "--keep-best") {
      trainOptions.keepBest = true;
    } else if (named("--steps") || named("--save-every") ||
               named("--eval-every") || named("--keep-last")) {
      bool steps = arg.rfind("--steps", 0) == 0,
           save = arg.rfind("--save-every", 0) == 0,
           keep = arg.rfind("--keep-last", 0) == 0;
      const char *flag = steps  ? "--steps"
                         : save ? "--save-every"
                         : keep ? "--keep-last"
                                : "--eval-every";
      std::string text = value(flag);
      int64_t n = 0;
      if (!parseInt64(text, n, 0)) {
        std::fprintf(stderr,
                     "strata-run: error: %s expects a non-negative "
                     "integer, got '%s'\n",
                     flag, text.c_str());
        return 2;
      }
      (steps  ? trainOptions.steps
       : save ? trainOptions.saveEvery
       : keep ? trainOptions.keepLast
              : trainOptions.evalEvery) = n;
      stepsGiven |= steps;
    } else if (named("--trace-steps")) {
      std::string text = value("--trace-steps");
      if (!parseInt64(text, trainOptions.traceSteps, 0)) {
        std::fprintf(stderr,
                     "strata-run: error: --trace-steps expects a "
                     "non-negative integer, got '%s'\n",
                     text.c_str());
        return 2;
      }
    } else if (named("--on-nan")) {
      std::string text = value("--on-nan");
      if (text == "stop")
        trainOptions.onNan = trainer::TrainerOptions::OnNan::Stop;
      else if (text == "skip")
        trainOptions.onNan = trainer::TrainerOptions::OnNan::Skip;
      else {
        std::fprintf(stderr,
                     "strata-run: error: --on-nan expects stop or "
                     "skip, got '%s'\n",
                     text.c_str());
        return 2;
      }
    } else if (named("--ssd-dir")) {
      ssdDirs.push_back(value("--ssd-dir"));
    } else if (arg == "--no-overlap") {
      overlap = false;
    } else if (arg == "--no-checkpoint") {
      trainOptions.checkpoints = false;
    } else if (arg == "--resume") {
      trainOptions.resume = true;
    } else if (arg == "--resume-by-name") {
      trainOptions.resume = true;
      trainOptions.resumeByName = true;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "strata-run: error: unknown option '%s'\n",
                   arg.c_str());
      usage(stderr);
      return 2;
    } else if (artifactDir.empty()) {
      artifactDir = arg;
    } else {
      std::fprintf(stderr, "strata-run: error: unexpected argument '%s'\n",
                   arg.c_str());
      return 2;
    }
  }
  if (artifactDir.empty()) {
    usage(stderr);
    return 2;
  }

  uint64_t rssAtStart = maxResidentBytes();
  std::string error;
  // Started by mpirun (or another MPI launcher): one rank of a
  // data-parallel run.
  std::unique_ptr<comm::Communicator> world = comm::worldCommunicator(error);
  if (!world) {
    std::fprintf(stderr, "strata-run: error: %s\n", error.c_str());
    return 1;
  }
  int rank = world->rank();
  auto fail = [&](const std::string &what) {
    if (world->size() > 1)
      std::fprintf(stderr, "strata-run: error: rank %d of %d: %s\n", rank,
                   world->size(), what.c_str());
    else
      std::fprintf(stderr, "strata-run: error: %s\n", what.c_str());
    return 1;
  };
  if (!trainer::rankSsdDirs(artifactDir, *world, ssdDirs, error))
    return fail(error);
  // On GPUs the all-reduces go through NCCL where this build has it
  // (made below, once the backend is known; it outlives the executor).
  std::unique_ptr<comm::Communicator> nccl;
  if (world->size() > 1) {
    // Rank 0 speaks for all; the others' traces go beside its own.
    quiet |= rank != 0;
    if (!tracePath.empty() && rank != 0)
      tracePath += ".rank" + std::to_string(rank);
  }
  artifact::Artifact art;
  if (!art.open(artifactDir, error, ssdDirs,
                artifact::Artifact::Access::ReadWrite, world->rank()))
    return fail(error);
  runtime::Executor executor(art);
  runtime::ExecutorOptions options;
  options.deviceBudget = budget;
  options.overlapTransfers = overlap;
  if (backendName.empty()) {
    const char *env = std::getenv("STRATA_BACKEND");
    backendName = env && *env ? env : runtime::defaultBackendName();
  }
  options.backend = backendName;
  if (world->size() > 1 && backendName == "cuda") {
    nccl = runtime::makeNcclCommunicator(*world, error);
    if (!nccl && !quiet)
      std::fprintf(stderr,
                   "strata-run: note: %s; the all-reduces go through host "
                   "memory and MPI\n",
                   error.c_str());
  }
  options.communicator = nccl ? nccl.get() : world.get();
  trainOptions.comm = world.get();
  if (!executor.prepare(options, error))
    return fail(error);
  bool training = art.plan().mode == "train";
  if (!training &&
      (stepsGiven || !trainOptions.dataPath.empty() ||
       !trainOptions.labelsPath.empty() || !trainOptions.evalData.empty() ||
       !trainOptions.tensorboardDir.empty())) {
    std::fprintf(stderr,
                 "strata-run: error: '%s' is a forward plan; "
                 "--data/--labels/--steps/--eval-data/--tensorboard need one "
                 "compiled with --mode "
                 "train\n",
                 artifactDir.c_str());
    return 2;
  }
  runtime::Trace trace;
  if (!tracePath.empty()) {
    executor.setTrace(&trace);
    trainOptions.trace = &trace;
  }
  auto writeTrace = [&] {
    if (tracePath.empty())
      return true;
    if (!trace.write(tracePath, error)) {
      std::fprintf(stderr, "strata-run: error: %s\n", error.c_str());
      return false;
    }
    if (!quiet)
      std::fprintf(stderr, "strata-run: trace of %zu events in %s\n",
                   trace.size(), tracePath.c_str());
    return true;
  };
  for (const auto &[name, file] : inputs) {
    npy::Array array;
    if (!npy::readFile(file, array, error) ||
        !executor.setInput(name, array, error)) {
      std::fprintf(stderr, "strata-run: error: %s\n", error.c_str());
      return 1;
    }
    if (training)
      trainOptions.fixedInputs.emplace_back(name, std::move(array));
  }
  if (training) {
    if (trainOptions.checkpointDir.empty())
      trainOptions.checkpointDir = artifactDir + "/checkpoint";
    trainOptions.quiet = quiet;
    if (!trainer::runTraining(art, executor, trainOptions, error)) {
      fail(error);
      writeTrace();
      return 1;
    }
    if (!writeTrace())
      return 1;
    if (!quiet) {
      std::fprintf(stderr,
                   "strata-run: arena offsets touched up to %s (plan: %s)\n",
                   formatSize(executor.arenaPeak()).c_str(),
                   formatSize(art.plan().arenaBytes).c_str());
      printMemoryUse(art.plan(), executor, rssAtStart);
    }
    return 0;
  }
  auto start = std::chrono::steady_clock::now();
  if (!executor.run(error)) {
    std::fprintf(stderr, "strata-run: error: %s\n", error.c_str());
    return 1;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!writeTrace())
    return 1;
  if (!outputDir.empty()) {
    if (!makeDirectories(outputDir, error)) {
      std::fprintf(stderr, "strata-run: error: %s\n", error.c_str());
      return 1;
    }
    for (const artifact::Binding &b : art.plan().outputs) {
      npy::Array array;
      std::string path = outputDir + "/" + fileNameFor(b.name) + ".npy";
      if (!executor.getOutput(b.name, array, error) ||
          !npy::writeFile(path, array, error)) {
        std::fprintf(stderr, "strata-run: error: %s\n", error.c_str());
        return 1;
      }
    }
  }
  if (!quiet) {
    std::fprintf(stderr,
                 "strata-run: %zu steps in %.3f ms; arena offsets touched "
                 "up to %s (plan: %s)\n",
                 art.plan().steps.size(), seconds * 1e3,
                 formatSize(executor.arenaPeak()).c_str(),
                 formatSize(art.plan().arenaBytes).c_str());
    printMemoryUse(art.plan(), executor, rssAtStart);
  }
  return 0;
}
