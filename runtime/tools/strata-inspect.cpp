// strata-inspect.cpp - Shows what is in a compiled Strata artifact.
//
//   strata-inspect model.strata [--plan] [--ops]
//   strata-inspect model.strata --html report.html [--trace trace.json]
//                  [--log-json train.jsonl]
//
// Prints the manifest (inputs, outputs, parameters, arena sizes), and with
// --plan the memory plan (every slot, its region, offset and size), with
// --ops the kernel launches in order. With no flag, all three. With --html
// it writes one self-contained page instead (HtmlReport.h): memory over the
// step per tier, the predicted queues beside a measured run from a
// strata-run --trace file, the placement, the planner's choice and the
// loss curve of a strata-run --log-json file.

#include "runtime/artifact/Artifact.h"
#include "runtime/artifact/HtmlReport.h"
#include "runtime/artifact/MemoryReport.h"
#include "runtime/artifact/StepOrder.h"
#include "runtime/support/Checked.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Npy.h"
#include "runtime/support/Size.h"

#include <algorithm>
#include <cstdio>
#include <string>

using namespace strata;
using namespace strata::artifact;

static std::string describe(const Slot &s) {
  return std::string(dtypeName(s.dtype)) + npy::shapeString(s.shape);
}

static const char *kUsage =
    "usage: strata-inspect ARTIFACT [--plan] [--ops]\n"
    "       strata-inspect ARTIFACT --html REPORT.html [--trace TRACE.json]\n"
    "                      [--log-json TRAIN.jsonl]\n"
    "\n"
    "  --plan          the memory plan: every slot, its region and offset\n"
    "  --ops           the steps in order, with queue and waits\n"
    "  --html FILE     write one self-contained HTML page (no scripts, no\n"
    "                  network): memory over the step per tier, the predicted\n"
    "                  queues, the placement, the planner's choice\n"
    "  --trace FILE    with --html: a strata-run --trace file; its last run\n"
    "                  of the plan is drawn beside the prediction\n"
    "  --log-json FILE with --html: a strata-run --log-json file, drawn as\n"
    "                  the loss curve\n";

/// Writes the HTML report; the process's exit status.
static int writeHtml(const Plan &plan, const std::string &dir,
                     const std::string &htmlPath, const std::string &tracePath,
                     const std::string &logPath) {
  std::string error;
  std::vector<TraceEvent> trace;
  std::vector<LogRow> log;
  ReportInputs inputs;
  inputs.artifactPath = dir;
  if (!tracePath.empty()) {
    if (!readTrace(tracePath, trace, error)) {
      std::fprintf(stderr, "strata-inspect: error: %s\n", error.c_str());
      return 1;
    }
    inputs.trace = &trace;
    inputs.tracePath = tracePath;
  }
  if (!logPath.empty()) {
    if (!readTrainingLog(logPath, log, error)) {
      std::fprintf(stderr, "strata-inspect: error: %s\n", error.c_str());
      return 1;
    }
    inputs.log = &log;
    inputs.logPath = logPath;
  }
  std::string html = htmlReport(plan, inputs);
  if (!writeFileAtomically(htmlPath, html.data(), html.size(), error)) {
    std::fprintf(stderr, "strata-inspect: error: writing %s: %s\n",
                 htmlPath.c_str(), error.c_str());
    return 1;
  }
  std::printf("strata-inspect: wrote %s (%s)\n", htmlPath.c_str(),
              formatSize(html.size()).c_str());
  return 0;
}

int main(int argc, char **argv) {
  strata::ignoreFileSizeSignal();
  std::string dir, htmlPath, tracePath, logPath;
  bool showPlan = false, showOps = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    // "--opt VALUE" or "--opt=VALUE"; false (with a message) when missing.
    auto value = [&](const char *name, std::string &out) {
      std::string prefix = std::string(name) + "=";
      if (arg.rfind(prefix, 0) == 0)
        out = arg.substr(prefix.size());
      else if (i + 1 < argc)
        out = argv[++i];
      else
        out.clear();
      if (out.empty())
        std::fprintf(stderr, "strata-inspect: error: %s expects a file\n",
                     name);
      return !out.empty();
    };
    auto is = [&](const char *name) {
      return arg == name || arg.rfind(std::string(name) + "=", 0) == 0;
    };
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (arg == "--plan") {
      showPlan = true;
    } else if (arg == "--ops") {
      showOps = true;
    } else if (is("--html")) {
      if (!value("--html", htmlPath))
        return 2;
    } else if (is("--trace")) {
      if (!value("--trace", tracePath))
        return 2;
    } else if (is("--log-json")) {
      if (!value("--log-json", logPath))
        return 2;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "strata-inspect: error: unknown option '%s'\n",
                   arg.c_str());
      return 2;
    } else {
      dir = arg;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  if (htmlPath.empty() && (!tracePath.empty() || !logPath.empty())) {
    std::fprintf(stderr, "strata-inspect: error: --trace and --log-json go "
                         "into the HTML report: give --html FILE too\n");
    return 2;
  }
  if (!showPlan && !showOps)
    showPlan = showOps = true;
  Artifact art;
  std::string error;
  if (!art.open(dir, error, {}, Artifact::Access::ReadOnly)) {
    std::fprintf(stderr, "strata-inspect: error: %s\n", error.c_str());
    return 1;
  }
  const Plan &plan = art.plan();
  if (!htmlPath.empty())
    return writeHtml(plan, dir, htmlPath, tracePath, logPath);
  uint64_t trainable = 0, frozen = 0, constants = 0, states = 0, copies = 0;
  // Sharded parameters (--shard-parameters): this rank's elements, and
  // the whole model's.
  uint64_t shardedWhole = 0, shardedHere = 0;
  for (const ParamEntry &p : plan.params) {
    int64_t n = plan.slots[p.slot].numElements();
    if ((p.flags & ParamEntry::Sharded) && (p.flags & ParamEntry::Trainable)) {
      shardedHere += static_cast<uint64_t>(n);
      shardedWhole +=
          static_cast<uint64_t>(checkedNumElements(p.wholeShape).value_or(0));
    }
    if (p.flags & ParamEntry::Constant)
      constants += n;
    else if (p.flags & ParamEntry::State)
      states += n;
    else if (p.flags & ParamEntry::Trainable)
      trainable += n;
    else if (p.flags & ParamEntry::LowCopy)
      copies += n;
    else
      frozen += n;
  }
  std::printf("artifact: %s\n", dir.c_str());
  std::printf("source:   %s\n", plan.sourceModel.c_str());
  std::printf("producer: %s\n", plan.producer.c_str());
  std::printf("mode:     %s\n", plan.mode.c_str());
  std::printf("inputs:\n");
  for (const Binding &b : plan.inputs)
    std::printf("  %s: %s\n", b.name.c_str(),
                describe(plan.slots[b.slot]).c_str());
  std::printf("outputs:\n");
  for (const Binding &b : plan.outputs)
    std::printf("  %s: %s\n", b.name.c_str(),
                describe(plan.slots[b.slot]).c_str());
  if (plan.mode == "train")
    std::printf("optimizer: %s\nlabels (--data): %s\n", plan.optimizer.c_str(),
                plan.labels == "same" ? "the token ids themselves (the model "
                                        "shifts them)"
                                      : "the tokens after the ids");
  std::printf("parameters: %llu trainable, %llu frozen elements; %llu "
              "optimizer-state elements; %llu constant elements\n",
              static_cast<unsigned long long>(trainable),
              static_cast<unsigned long long>(frozen),
              static_cast<unsigned long long>(states),
              static_cast<unsigned long long>(constants));
  if (shardedHere)
    std::printf("sharded parameters: each rank stores %llu elements of "
                "parameters of %llu elements in all, gathered whole before "
                "their readers (unshard)\n",
                static_cast<unsigned long long>(shardedHere),
                static_cast<unsigned long long>(shardedWhole));
  if (copies)
    std::printf("low-precision copies: %llu elements (the bf16/fp16 weights "
                "the model reads, written by the updates of their fp32 "
                "masters)\n",
                static_cast<unsigned long long>(copies));
  size_t synthetic = 0;
  for (const artifact::ParamEntry &p : plan.params)
    synthetic += (p.flags & artifact::ParamEntry::Synthetic) != 0;
  if (synthetic)
    std::printf("synthetic: %zu stored tensors are generated at load (seed "
                "%llu) from their mean and deviation: a plan-only artifact, "
                "not the model's weights\n",
                synthetic, static_cast<unsigned long long>(plan.syntheticSeed));
  std::printf("memory:\n");
  auto region = [](const char *label, uint64_t bytes, const char *end) {
    std::printf("  %-39s%s (%llu bytes)%s", label, formatSize(bytes).c_str(),
                static_cast<unsigned long long>(bytes), end);
  };
  region("device arena (activations, workspace):", plan.arenaBytes, "\n");
  region("device parameter region:", plan.paramsBytes, "\n");
  region("host region:", plan.hostBytes, "\n");
  region("ssd store:", plan.ssdBytes, "");
  for (const std::string &d : plan.ssdDirs)
    std::printf(" %s", d.c_str());
  std::printf("\n");
  // Placement by class and tier.
  uint64_t byTier[3][3] = {}; // [params, states, constants][device, host, ssd]
  for (const ParamEntry &p : plan.params) {
    const Slot &s = plan.slots[p.slot];
    int cls = (p.flags & ParamEntry::Constant) ? 2
              : (p.flags & ParamEntry::State)  ? 1
                                               : 0;
    int tier = s.region == Region::Host ? 1 : s.region == Region::Ssd ? 2 : 0;
    byTier[cls][tier] += s.bytes;
  }
  std::printf("placement (bytes)      %14s %14s %14s\n", "device", "host",
              "ssd");
  const char *classes[3] = {"parameters", "optimizer state", "constants"};
  for (int c = 0; c < 3; ++c)
    std::printf("  %-20s %14llu %14llu %14llu\n", classes[c],
                static_cast<unsigned long long>(byTier[c][0]),
                static_cast<unsigned long long>(byTier[c][1]),
                static_cast<unsigned long long>(byTier[c][2]));
  // Activations swapped out between the forward and the backward pass,
  // gradients between the backward pass and the optimizer step, and the
  // host buffers gradients land in for updates on the CPU: the stored
  // slots that belong to no parameter (the compiler names the gradients'
  // "grad.N" and the landing buffers "cpu-update.*").
  std::vector<bool> isParam(plan.slots.size(), false);
  for (const ParamEntry &p : plan.params)
    isParam[p.slot] = true;
  uint64_t swapped[3][2] = {};
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot &s = plan.slots[i];
    if (isParam[i] || (s.region != Region::Host && s.region != Region::Ssd))
      continue;
    int kind = s.name.rfind("grad.", 0) == 0         ? 1
               : s.name.rfind("cpu-update.", 0) == 0 ? 2
                                                     : 0;
    swapped[kind][s.region == Region::Ssd] += s.bytes;
  }
  const char *kinds[3] = {"activations swapped", "gradients swapped",
                          "CPU-update buffers"};
  for (int kind : {0, 1, 2})
    if (kind < 2 || swapped[kind][0] + swapped[kind][1] > 0)
      std::printf("  %-20s %14s %14llu %14llu\n", kinds[kind], "in arena",
                  static_cast<unsigned long long>(swapped[kind][0]),
                  static_cast<unsigned long long>(swapped[kind][1]));
  // Updates on the CPU stage their SSD operands in host memory, two or
  // three jobs at a time (artifact::cpuStagingAreas; the runtime allocates
  // this when the plan starts).
  uint64_t staging = artifact::cpuStagingBytes(
      artifact::cpuJobs(plan, artifact::issueOrder(plan)));
  size_t areas = artifact::cpuStagingAreas(staging, plan.hostBytes);
  if (staging > 0)
    std::printf("  CPU-update SSD staging: %s of host memory at run time "
                "(%zu CPU jobs' SSD operands, %s each)\n",
                formatSize(areas * staging).c_str(), areas,
                formatSize(staging).c_str());
  if (uint64_t n = plan.memoryOf("recomputed_activations"))
    std::printf("  activations recomputed before the backward pass: %llu "
                "(%s), kept nowhere\n",
                static_cast<unsigned long long>(n),
                formatSize(plan.memoryOf("recomputed_bytes")).c_str());
  std::printf("steps: %zu\n", plan.steps.size());
  size_t transfers = 0, ahead = 0, distance = 0;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step &step = plan.steps[i];
    if (!artifact::isTransfer(plan, step))
      continue;
    ++transfers;
    if (step.issueAfter != artifact::kInProgramOrder) {
      ++ahead;
      distance += i - 1 - step.issueAfter;
    }
  }
  if (transfers > 0)
    std::printf("transfers: %zu between tiers; %zu fetches issued ahead of "
                "their place (on average %.1f steps ahead)\n",
                transfers, ahead,
                ahead ? static_cast<double>(distance) / ahead : 0.0);
  if (!plan.memory.empty())
    std::printf("%s", formatMemoryReport(plan).c_str());

  if (showPlan) {
    std::printf("\nmemory plan (device arena, by offset):\n");
    std::vector<size_t> order;
    for (size_t i = 0; i < plan.slots.size(); ++i)
      if (plan.slots[i].region == Region::Arena)
        order.push_back(i);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return plan.slots[a].offset < plan.slots[b].offset;
    });
    for (size_t i : order) {
      const Slot &s = plan.slots[i];
      std::printf("  [%10llu, %10llu) %-28s %s (%s)\n",
                  static_cast<unsigned long long>(s.offset),
                  static_cast<unsigned long long>(s.offset + s.bytes),
                  describe(s).c_str(), s.name.c_str(), slotClassName(s.cls));
    }
    // Room on the host and the SSD for tensors that are there for part of
    // a step: swapped activations and gradients, CPU updates' gradients.
    bool header = false;
    for (size_t i = 0; i < plan.slots.size(); ++i) {
      const Slot &s = plan.slots[i];
      if (isParam[i] || (s.region != Region::Host && s.region != Region::Ssd))
        continue;
      if (!header)
        std::printf("\nswap and landing space (offset in their tier's "
                    "region):\n");
      header = true;
      std::printf("  [%10llu, %10llu) %-28s %s (%s, %s)\n",
                  static_cast<unsigned long long>(s.offset),
                  static_cast<unsigned long long>(s.offset + s.bytes),
                  describe(s).c_str(), s.name.c_str(), slotClassName(s.cls),
                  regionName(s.region));
    }
    std::printf("\nstored tensors (offset in their tier's region):\n");
    for (const ParamEntry &p : plan.params) {
      const Slot &s = plan.slots[p.slot];
      const char *kind = (p.flags & ParamEntry::Constant)    ? "constant"
                         : (p.flags & ParamEntry::State)     ? "optimizer state"
                         : (p.flags & ParamEntry::Trainable) ? "trainable"
                         : (p.flags & ParamEntry::LowCopy)
                             ? "low-precision copy"
                             : "frozen";
      std::printf("  [%10llu, %10llu) %-28s %s (%s, %s)\n",
                  static_cast<unsigned long long>(s.offset),
                  static_cast<unsigned long long>(s.offset + s.bytes),
                  describe(s).c_str(), p.name.c_str(), kind,
                  s.region == Region::Params ? "device" : regionName(s.region));
    }
  }
  if (showOps) {
    std::printf("\nops:\n");
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const Step &step = plan.steps[i];
      std::string ins;
      for (uint32_t s : step.inputs)
        ins += (ins.empty() ? "" : ", ") + plan.slots[s].name;
      // Where it runs and what it waits for: "[h2d, after 3 12]".
      std::string order = std::string("  [") + queueName(step.queue);
      if (!step.waits.empty()) {
        order += ", after";
        for (uint32_t w : step.waits)
          order += " " + std::to_string(w);
      }
      order += "]";
      if (step.outputs.empty()) {
        std::printf("  %4zu %-12s (%s)  [in place]%s\n", i,
                    kernelName(step.kernel), ins.c_str(), order.c_str());
        continue;
      }
      std::string outs;
      for (uint32_t s : step.outputs)
        outs += (outs.empty() ? "" : ", ") + plan.slots[s].name + ": " +
                describe(plan.slots[s]);
      std::string ahead;
      if (step.issueAfter != artifact::kInProgramOrder)
        ahead = step.issueAfter < 0 ? "  [issued at the start of the step]"
                                    : "  [issued after step " +
                                          std::to_string(step.issueAfter) + "]";
      std::printf("  %4zu %-12s %s = (%s)%s%s\n", i, kernelName(step.kernel),
                  outs.c_str(), ins.c_str(), order.c_str(), ahead.c_str());
    }
  }
  return 0;
}
