//===- PipelineOptions.h - The named pipelines' options ---------*- C++ -*-===//
//
// The options of the training step and of the tiers, each declared once:
// a plain struct whose bind() names every field with its flag and its help,
// as IREE's option binders do. strata-compile binds them to its command line
// (compiler/tools/strata-compile/DriverFlags.h) and the named pipelines to
// their option strings (PipelineOptionsOf below), so that
// `strata-compile --gpu-mem 24GiB --place-states ssd` and
// `strata-opt --strata-forward-to-exec="gpu-mem=24GiB place-states=ssd"`
// are the same options under the same names, with the same help and
// defaults. The passes take them from here too: at build time
// strata-options-td (OptionsTd.cpp) writes each as an ODS `Option` def
// (flag `place-params`: `PlaceParamsOption`, member `placeParams`) that
// Passes.td includes, so a pass run alone has the pipeline's name, type,
// default and help. A field is named as its flag in camel case, which the
// pipelines' copies into their passes (Pipelines.cpp) rely on; the compiler
// unit tests hold that every value a pipeline is given reaches every pass
// that takes it.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_PASSES_PIPELINEOPTIONS_H
#define STRATA_PASSES_PIPELINEOPTIONS_H

#include "mlir/Pass/PassOptions.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata {

/// A byte count as the options write them: a number, with KiB/MiB/GiB/TiB
/// or not; "" is 0 (none).
bool parseOptionSize(const std::string &text, uint64_t &bytes);

/// A byte count as a pass option (`b.size` fields): written as a number of
/// bytes or with KiB/MiB/GiB/TiB, as the pipelines and strata-compile take
/// it; printed in bytes; used as the number.
struct ByteCount {
  uint64_t bytes = 0;
  ByteCount(uint64_t bytes = 0) : bytes(bytes) {}
  operator uint64_t() const { return bytes; }
};

/// A ByteCount on any stream (raw_ostream, an MLIR Diagnostic) as its
/// number of bytes: without this a Diagnostic takes it as a char.
template <typename Stream>
auto operator<<(Stream &os, ByteCount count) -> decltype(os << count.bytes) {
  return os << count.bytes;
}

/// One option as bind() declares it.
struct OptionInfo {
  const char *name;
  const char *help;
  /// Offered by the named pipeline only: strata-compile sets it from other
  /// flags (has-ssd from --ssd-dir, gradients-only from --mode grad).
  bool pipelineOnly = false;
  /// Left out of strata-compile's --help (checks for developers).
  bool hidden = false;
};

/// Where stored tensors may go, and how the planner looks for it: the
/// options of the `strata-forward-to-exec` pipeline.
struct TierOptions {
  std::string placeParams = "auto", placeStates = "auto",
              placeActivations = "auto", placeGradients = "auto",
              placeUpdates = "auto";
  int64_t cpuJobBytes = -1;
  bool speculateUpdates = true;
  std::string lowCopies = "on";
  bool deferCopyValues = false;
  int64_t plannerEvaluations = 100, plannerThreads = 0;
  double prefetchLead = 3.0;
  bool plannerCheck = false, progress = false;
  /// Budgets in bytes (0: none); written with units where given as text.
  uint64_t gpuMem = 0, cpuMem = 0;
  bool hasSsd = false;
  std::string profile;

  /// Names every option: `b(field, info)`, and `b.size(field, info)` for
  /// byte counts (which take KiB/MiB/GiB/TiB).
  template <typename Binder> void bind(Binder &b);

  /// What no build can take (low-copies neither on nor off), as a message
  /// naming the option; "" when fine.
  std::string check() const;
};

/// The training step: the options of the `strata-training` pipeline.
struct TrainingOptions {
  std::string loss = "causal-lm", optimizer = "adamw";
  double lr = 1e-3, momentum = 0.9, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
         weightDecay = 0.0, clipGradNorm = 0.0;
  int64_t accumulate = 1, dataParallel = 1, ranksPerNode = 0;
  bool shardOptimizer = false, shardParameters = false;
  std::string clipMode = "exact", lossScale = "none";
  double lossScaleInit = 65536.0;
  int64_t lossScaleWindow = 2000;
  bool fuseUpdates = false;
  std::string precision = "fp32";
  bool gradientsOnly = false;

  template <typename Binder> void bind(Binder &b);
};

template <typename Binder> void TierOptions::bind(Binder &b) {
  b(placeParams, {"place-params", "Force the parameters' tier: auto (default), "
                                  "device, host, ssd"});
  b(placeStates, {"place-states",
                  "Force the optimizer state's tier: auto, device, host, ssd"});
  b(placeActivations,
    {"place-activations",
     "Where forward activations wait for the backward pass: auto, device "
     "(kept), host or ssd (swapped out and back), recompute (rerun before "
     "the backward pass, with the chain of up to 8 kernels that needs, from "
     "values the backward pass keeps)"});
  b(placeGradients, {"place-gradients",
                     "Where gradients wait between the backward pass and the "
                     "optimizer step: auto, device, host or ssd (swapped out "
                     "after their last backward use, fetched for the update)"});
  b(placeUpdates,
    {"place-updates",
     "Where optimizer updates of parameters kept off the device run: auto "
     "(default: the CPU when the cost model predicts it faster), device "
     "(fetch, update, write back), cpu (the gradient goes to the host and "
     "the CPU updates the parameter and states in host memory or on the "
     "SSD, beside the backward pass; says why any update cannot)"});
  b(cpuJobBytes,
    {"cpu-job-bytes",
     "Updates on the CPU moving fewer bytes than this are grouped with the "
     "updates after them into one CPU job, so that small tensors do not pay "
     "a hand-off each (default: enough that the hand-off is at most 5% of a "
     "job, from the machine profile; 0: one job per update)"});
  b(speculateUpdates,
    {"speculate-updates",
     "With exact clipping (--clip-grad-norm, --clip-mode exact), CPU "
     "updates run during the backward pass as if the step did not clip, "
     "keeping the old values beside the new ones (in their tier: host "
     "memory or the SSD), and are redone after it when it clips: bit for "
     "bit the same training, with the update time hidden on steps that do "
     "not clip (default on; =false: they wait for the norm)"});
  b(lowCopies,
    {"low-copies",
     "With --precision bf16 or fp16, on (default): the model reads a stored "
     "bf16/fp16 copy of each fp32 master that its update writes, instead of "
     "casting the master (half the weight bytes on the device and over the "
     "bus; --strata-low-copies); off: the casts, for comparison (same "
     "numbers)"});
  b(deferCopyValues,
    {"defer-copy-values",
     "Low-precision copies get their values when the artifact is written, "
     "not at compile time (--strata-low-copies)",
     /*pipelineOnly=*/true});
  b(plannerEvaluations,
    {"planner-evaluations",
     "How many placements one planner search may score under a budget "
     "(each is memory planned and its step predicted; more can find a "
     "faster plan, at compile time; its starting placements are always "
     "scored). With every --place-* option auto, the planner also makes "
     "the search each one-class forced placement would: up to 14 searches "
     "with --ssd-dir"});
  b(plannerThreads,
    {"planner-threads",
     "How many threads the planner uses (default 0: one per core; 1: one "
     "at a time): its searches run at once, and a thread with no search "
     "left scores the next placements of those still running. The plan is "
     "the same for any number; each thread holds a copy of the program"});
  b(prefetchLead,
    {"prefetch-lead",
     "How far ahead fetches are issued and how long write-backs keep their "
     "device copy, in multiples of the transfer's own predicted time of "
     "kernels, its link's queue included (default 3; halved under "
     "--gpu-mem until the plan fits; 0: a fixed window of 32 ops)"});
  b(plannerCheck,
    {"planner-check",
     "Check the tier planner by enumeration on a small model: GLPK's "
     "optimum of the layer programme against every count vector, the "
     "proven bound against every layer placement (scored) and every "
     "placement the search scored; fails when either check does, remarks "
     "the figures",
     /*pipelineOnly=*/false, /*hidden=*/true});
  b(progress, {"progress", "Print the planner's progress when it runs long",
               /*pipelineOnly=*/true});
  b.size(gpuMem, {"gpu-mem", "Device memory budget (bytes, or with "
                             "KiB/MiB/GiB/TiB); tensors move to host memory "
                             "or SSD to fit"});
  b.size(cpuMem,
         {"cpu-mem", "Host memory budget for tensors moved off the device"});
  b(hasSsd, {"has-ssd", "An SSD tier exists (strata-compile: --ssd-dir)",
             /*pipelineOnly=*/true});
  b(profile,
    {"profile",
     "Machine profile for the cost model (from strata-calibrate). Without "
     "it, strata-compile takes the profile strata-calibrate remembered on "
     "this machine ($STRATA_PROFILE, else ~/.config/strata/machine.profile) "
     "when there is one, and a pass the figures an earlier pass recorded "
     "on the module (exec.machine_profile); else the built-in defaults. "
     "'builtin': the defaults"});
}

template <typename Binder> void TrainingOptions::bind(Binder &b) {
  b(loss, {"loss", "causal-lm (default: mean next-token cross-entropy of a "
                   "model mapping ids [B,T] to logits [B,T,V]) or output "
                   "(the model's first output is the loss)"});
  b(optimizer, {"optimizer", "sgd, momentum, adamw, lomo (SGD with each "
                             "update fused into the backward pass) or "
                             "adalomo (AdaLomo, fused)"});
  b(fuseUpdates,
    {"fuse-updates",
     "Apply each update as soon as its gradient is final (implied by lomo "
     "and adalomo; the default when updates may run on the CPU: parameters "
     "or states forced off the device, or left to the planner under "
     "--gpu-mem; =false keeps them after the backward pass)"});
  b(lr, {"lr", "Base learning rate"});
  b(momentum, {"momentum", "Momentum (--optimizer momentum)"});
  b(beta1, {"beta1", "AdamW beta1"});
  b(beta2, {"beta2", "AdamW beta2"});
  b(eps, {"eps", "AdamW epsilon"});
  b(weightDecay, {"weight-decay",
                  "Weight decay (decoupled for AdamW, L2 for SGD/momentum)"});
  b(clipGradNorm,
    {"clip-grad-norm", "Clip gradients to this global norm (0: off)"});
  b(clipMode,
    {"clip-mode",
     "With --clip-grad-norm: exact (this step's norm; fused updates wait "
     "for the last gradient), two-pass (this step's norm from a first "
     "backward pass, as LOMO; fused updates stay fused) or previous-step "
     "(the previous step's norm; cheapest)"});
  b(lossScale,
    {"loss-scale", "none (default), dynamic (halve on overflow and skip the "
                   "step, double after --loss-scale-window good steps) or a "
                   "fixed factor"});
  b(lossScaleInit, {"loss-scale-init", "First dynamic loss scale"});
  b(lossScaleWindow,
    {"loss-scale-window", "Good steps before the dynamic loss scale doubles"});
  b(precision,
    {"precision",
     "fp32 (default), bf16 or fp16: matrix products and attention in the "
     "low precision (fp32 accumulation), activations and their gradients "
     "stored in it; softmax, norms, reductions and the loss in fp32; fp32 "
     "parameters and optimizer states (--strata-autocast). fp16 turns on "
     "--loss-scale dynamic"});
  b(accumulate, {"accumulate", "Accumulate gradients over N micro-batches "
                               "(of the bound input shape) per optimizer "
                               "step"});
  b(dataParallel,
    {"data-parallel",
     "Train on N processes (mpirun -np N strata-run ...), each on its own "
     "micro-batch of the bound input shape (the global batch is N of them): "
     "every gradient is averaged over the ranks (all_reduce, on the "
     "communication queue) before the optimizer reads it"});
  b(ranksPerNode,
    {"ranks-per-node",
     "With --data-parallel: how many of the ranks share one machine (its "
     "CPU, host memory bandwidth and SSDs; the profile describes the whole "
     "machine, each GPU its own); 0: all of them"});
  b(shardOptimizer,
    {"shard-optimizer",
     "With --data-parallel: shard the optimizer over the ranks (ZeRO stages "
     "1 and 2): each gradient is reduce-scattered instead of all-reduced, "
     "each rank keeps 1/N of every optimizer state (in device memory, host "
     "memory or on the SSD) and updates only its shard of each parameter "
     "(on the device), and the updated shards are all-gathered; each rank "
     "writes its own checkpoint file. Not with adalomo"});
  b(shardParameters,
    {"shard-parameters",
     "With --data-parallel: shard the parameters too (ZeRO stage 3; implies "
     "--shard-optimizer): each rank stores 1/N of every trainable parameter "
     "(and of its low-precision copy), and each whole parameter is gathered "
     "into a temporary just before its readers, once in the forward pass "
     "and again in the backward pass; each rank's update writes its own "
     "shard"});
  b(gradientsOnly,
    {"gradients-only",
     "Stop after autodiff: return the loss and every gradient (named "
     "\"grad:<parameter>\"; strata-compile: --mode grad)",
     /*pipelineOnly=*/true});
}

/// The options of a named pipeline, made from `Options::bind`: one pass
/// option per field, with the field's default. `get` reads them back.
template <typename Options>
class PipelineOptionsOf
    : public mlir::PassPipelineOptions<PipelineOptionsOf<Options>> {
  using Base = mlir::PassPipelineOptions<PipelineOptionsOf<Options>>;
  template <typename T> using Opt = typename Base::template Option<T>;

public:
  PipelineOptionsOf() {
    Options defaults;
    Maker make{*this};
    defaults.bind(make);
  }

  /// The options as given; false with `error` set when a byte count does
  /// not parse.
  bool get(Options &out, std::string &error) const {
    Reader read{*this, 0, &error};
    out.bind(read);
    return error.empty();
  }

private:
  struct Maker {
    PipelineOptionsOf &self;
    template <typename T> void operator()(T &field, const OptionInfo &info) {
      self.held.push_back(std::make_shared<Opt<T>>(
          self, info.name, llvm::cl::desc(info.help), llvm::cl::init(field)));
    }
    void size(uint64_t &field, const OptionInfo &info) {
      self.held.push_back(std::make_shared<Opt<std::string>>(
          self, info.name, llvm::cl::desc(info.help),
          llvm::cl::init(std::to_string(field))));
    }
  };
  struct Reader {
    const PipelineOptionsOf &self;
    size_t next;
    std::string *error;
    template <typename T> void operator()(T &field, const OptionInfo &) {
      field = static_cast<const Opt<T> *>(self.held[next++].get())->getValue();
    }
    void size(uint64_t &field, const OptionInfo &info) {
      const std::string &text =
          static_cast<const Opt<std::string> *>(self.held[next++].get())
              ->getValue();
      if (!parseOptionSize(text, field) && error->empty())
        *error = std::string(info.name) + "='" + text +
                 "' is not a byte count (e.g. 24GiB)";
    }
  };
  friend struct Maker;
  friend struct Reader;

  /// The options, in bind()'s order (each is registered with this struct).
  std::vector<std::shared_ptr<void>> held;
};

} // namespace strata

/// How a pass's ByteCount option reads its text (Pipelines.cpp).
template <>
class llvm::cl::parser<strata::ByteCount>
    : public llvm::cl::basic_parser<strata::ByteCount> {
public:
  parser(Option &o) : basic_parser(o) {}
  /// False when `arg` is a byte count; else an error naming the option.
  bool parse(Option &o, StringRef name, StringRef arg,
             strata::ByteCount &value);
  StringRef getValueName() const override { return "bytes"; }
  /// For --print-options: the value, and the default when it differs.
  void printOptionDiff(const Option &o, strata::ByteCount value,
                       const OptionValue<strata::ByteCount> &initial,
                       size_t width) const;
};

#endif // STRATA_PASSES_PIPELINEOPTIONS_H
