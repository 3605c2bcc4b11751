//===- PlanReport.cpp - What a plan would do, without its weights ---------===//

#include "PlanReport.h"

#include "compiler/serialize/ArtifactWriter.h"
#include "dialects/Exec/ExecDialect.h"
#include "dialects/Strata/StrataDialect.h"
#include "passes/analysis/ArenaRanges.h"
#include "passes/analysis/CostModel.h"
#include "runtime/artifact/MemoryReport.h"
#include "runtime/support/Size.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <array>
#include <cstdio>

using namespace mlir;

namespace strata::compile {

namespace {

/// "812.345 ms" below ten seconds, "12.345 s" above.
std::string formatSeconds(double seconds) {
  char buf[32];
  if (seconds < 10)
    std::snprintf(buf, sizeof(buf), "%.3f ms", seconds * 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.3f s", seconds);
  return buf;
}

/// "6.738B", "354.6M", "12.3K".
std::string formatCount(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof(buf), "%.3fB", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof(buf), "%.1fM", n / 1e6);
  else if (n >= 1e3)
    std::snprintf(buf, sizeof(buf), "%.1fK", n / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f", n);
  return buf;
}

// The columns of the per-tier table.
enum Column { Params, States, Gradients, Activations, Constants, Columns };
constexpr std::array<const char *, Columns> kColumnNames = {
    "parameters", "opt. states", "gradients", "activations", "constants"};

int columnOf(artifact::SlotClass cls) {
  switch (cls) {
  case artifact::SlotClass::Parameter:
    return Params;
  case artifact::SlotClass::OptimizerState:
    return States;
  case artifact::SlotClass::Gradient:
    return Gradients;
  case artifact::SlotClass::Constant:
    return Constants;
  default:
    return Activations;
  }
}

} // namespace

StepFlops stepFlops(ModuleOp module, uint32_t accumulate) {
  StepFlops work;
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func)
    return work;
  func.walk([&](exec::KernelOp kernel) {
    (markers::isRecomputed(kernel) ? work.recomputed : work.model) +=
        kernelFlops(kernel);
  });
  work.model *= std::max<uint32_t>(1, accumulate);
  work.recomputed *= std::max<uint32_t>(1, accumulate);
  return work;
}

std::string formatPlanReport(ModuleOp module, const PlanReportInfo &info) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func || !exec::regionSizes(func).planned)
    return "error: no planned @main function to report on\n";
  artifact::Plan plan;
  summarizePlan(func, plan);

  // Stored tensors by tier and class; the model's work from its kernels.
  std::array<std::array<uint64_t, Columns>, 3> stored{};
  double trainable = 0, frozen = 0, stateElements = 0;
  std::string tokensFrom;
  double tokens = 0;
  for (Operation &op : func.getBody().front()) {
    if (auto param = dyn_cast<exec::ParamOp>(op)) {
      auto type = cast<ShapedType>(param.getType());
      int tier = static_cast<int>(param.getTier());
      stored[tier][columnOf(exec::classifyBuffer(param.getResult()))] +=
          storageBytes(type);
      if (param.getCopyOf())
        continue;
      if (param.getState())
        stateElements += type.getNumElements();
      else if (param.getTrainable())
        trainable += type.getNumElements();
      else if (!param.getConstant())
        frozen += type.getNumElements();
    } else if (auto space = dyn_cast<exec::SwapSpaceOp>(op)) {
      int tier = static_cast<int>(space.getTier());
      stored[tier][columnOf(exec::classifyBuffer(space.getResult()))] +=
          storageBytes(space.getType());
    } else if (auto input = dyn_cast<exec::InputOp>(op)) {
      auto type = cast<ShapedType>(input.getType());
      // The first integer input holds the tokens (ids; labels share them).
      if (tokensFrom.empty() && type.getElementType().isInteger(64)) {
        tokensFrom = input.getName().str();
        tokens = type.getNumElements();
      }
    }
  }
  tokens *= std::max<uint32_t>(1, info.accumulate);
  StepFlops work = stepFlops(module, info.accumulate);
  double flops = work.model, recomputedFlops = work.recomputed;

  std::string out;
  auto add = [&](const char *fmt, auto... args) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), fmt, args...);
    out += buf;
  };
  out += "Strata plan report (plan only: no weights were read or written)\n";
  out += "model: " + info.sourceModel + "\n";
  out += "  " + formatCount(trainable) + " trainable parameters";
  if (frozen > 0)
    out += ", " + formatCount(frozen) + " frozen";
  if (stateElements > 0)
    out += "; optimizer state " + formatCount(stateElements) + " elements";
  out += "\n  mode: " + info.mode;
  if (!info.optimizer.empty())
    out += " (" + info.optimizer + ")";
  out += "\n";
  int64_t ranks = 1;
  for (auto k : func.getBody().front().getOps<exec::KernelOp>())
    if (k.isCollective() && !k.getInts().empty())
      ranks = k.getInts()[0];
  if (ranks > 1) {
    add("  data parallel: %lld ranks, each on its own micro-batch; the figures "
        "below are one rank's (the global batch is %lld of its batches)\n",
        static_cast<long long>(ranks), static_cast<long long>(ranks));
    auto module = func->getParentOfType<ModuleOp>();
    auto shared =
        module ? getDeclaredAttr<StrataDialect::RanksPerNodeAttrHelper>(module)
               : IntegerAttr();
    DictionaryAttr machine =
        module ? getDeclaredAttr<exec::ExecDialect::MachineProfileAttrHelper>(
                     module)
               : DictionaryAttr();
    auto gpu = machine ? machine.getAs<FloatAttr>("gpu") : FloatAttr();
    bool gpuProfile = gpu && gpu.getValueAsDouble() != 0;
    if (shared && shared.getInt() > 1)
      add("  %lld ranks a machine: each is planned with its share of the "
          "machine's CPU updates and SSD bandwidth%s\n",
          static_cast<long long>(shared.getInt()),
          gpuProfile ? " (each GPU its own, and its own host link)"
                     : ", compute and copies (one CPU's cores)");
    auto comm = machine ? machine.getAs<FloatAttr>("comm_gbs") : FloatAttr();
    if (shared && ranks > shared.getInt() && comm)
      add("  %lld machines of %lld ranks: the collectives cross their "
          "network too, at %.4g GB/s (the lesser of comm_gbs and net_gbs)\n",
          static_cast<long long>((ranks + shared.getInt() - 1) /
                                 shared.getInt()),
          static_cast<long long>(shared.getInt()), comm.getValueAsDouble());
  }
  if (tokens > 0)
    add("  tokens per step: %.0f (input '%s'%s)\n", tokens, tokensFrom.c_str(),
        info.accumulate > 1 ? ", times --accumulate" : "");
  add("  matrix-product work per step: %.4g TFLOP (forward, backward; "
      "recomputation adds %.4g TFLOP)\n",
      flops / 1e12, recomputedFlops / 1e12);
  out += "machine: " +
         (info.profile.empty()
              ? std::string("the built-in default profile (not measured: "
                            "strata-calibrate measures this machine once, "
                            "and later compiles find it)")
          : info.profileRemembered
              ? "profile " + info.profile +
                    " (this machine's, as strata-calibrate measured it)"
              : "profile " + info.profile) +
         "\n  budgets: device " +
         (info.gpuMem ? formatSize(info.gpuMem) : std::string("none")) +
         ", host " +
         (info.cpuMem ? formatSize(info.cpuMem) : std::string("none")) + ", " +
         (info.ssdDrives ? std::to_string(info.ssdDrives) + " SSD director" +
                               (info.ssdDrives == 1 ? "y" : "ies")
                         : std::string("no SSD")) +
         "\n";

  out += "memory per tier (planned):\n";
  add("  %-7s %12s %12s", "tier", "total", "arena peak");
  for (const char *name : kColumnNames)
    add(" %12s", name);
  out += "\n";
  const uint64_t totals[3] = {plan.arenaBytes + plan.paramsBytes,
                              plan.hostBytes, plan.ssdBytes};
  const uint64_t budgets[3] = {info.gpuMem, info.cpuMem, 0};
  for (int tier = 0; tier < 3; ++tier) {
    add("  %-7s %12s %12s",
        exec::stringifyTier(static_cast<exec::Tier>(tier)).str().c_str(),
        formatSize(totals[tier]).c_str(),
        tier == 0 ? formatSize(plan.arenaBytes).c_str() : "-");
    for (uint64_t bytes : stored[tier])
      add(" %12s", bytes ? formatSize(bytes).c_str() : "-");
    if (budgets[tier])
      add("   (%.0f%% of the budget)",
          100.0 * double(totals[tier]) / double(budgets[tier]));
    out += "\n";
  }
  out += "  (the arena holds what is live at a time: activations, gradients "
         "and workspace in use, and the parameters and states streamed in "
         "for their kernels)\n";
  if (uint64_t staging = plan.memoryOf("predicted_cpu_staging_bytes"))
    out += "  CPU-update SSD staging: " + formatSize(staging) +
           " of host memory at run time, beside the host region (--cpu-mem "
           "does not count it)\n";

  double step = plan.memoryOf("predicted_step_us") * 1e-6;
  if (step <= 0) {
    out += "no predicted step (the plan was not timed)\n";
    return out;
  }
  double bound = plan.memoryOf("predicted_lower_bound_us") * 1e-6;
  out += "predicted step: " + formatSeconds(step);
  if (tokens > 0)
    add(", %.1f tokens/s", tokens / step);
  add(", %.2f model TFLOP/s\n", flops / step / 1e12);
  struct Busy {
    const char *name, *key;
  };
  std::vector<Busy> resources = {
      {"compute", "predicted_compute_us"},
      {"host->device", "predicted_host_to_device_us"},
      {"device->host", "predicted_device_to_host_us"},
      {"SSD reads", "predicted_ssd_read_us"},
      {"SSD writes", "predicted_ssd_write_us"},
      {"CPU optimizer", "predicted_cpu_update_us"}};
  // A data-parallel plan's collectives (--data-parallel).
  if (plan.memoryOf("predicted_comm_us") > 0)
    resources.push_back({"collectives", "predicted_comm_us"});
  const Busy *limiter = &resources[0];
  for (const Busy &r : resources)
    if (plan.memoryOf(r.key) > plan.memoryOf(limiter->key))
      limiter = &r;
  out += "lower bound: " + formatSeconds(bound) + ", set by " + limiter->name;
  if (bound > 0)
    add(" (the step is %.2fx the bound)", step / bound);
  out += "\n  busy per step:";
  const char *sep = " ";
  for (const Busy &r : resources) {
    out += sep + std::string(r.name) + " " +
           formatSeconds(plan.memoryOf(r.key) * 1e-6);
    sep = ", ";
  }
  out += "\n";
  if (bound > 0 && step > bound * 1.02)
    add("  %s of the step is not hidden behind the %s: transfers that "
        "wait for a kernel, or kernels that wait for a transfer\n",
        formatSeconds(step - bound).c_str(), limiter->name);
  // Where the step goes past its kernels: what the compute thread waited
  // for, and the time after its last kernel.
  double compute = plan.memoryOf("predicted_compute_us") * 1e-6;
  if (step > compute * 1.001) {
    add("  the step past its %s of kernels: the kernels waited for",
        formatSeconds(compute).c_str());
    const Busy waits[] = {{"host->device", "predicted_wait_host_to_device_us"},
                          {"device->host", "predicted_wait_device_to_host_us"},
                          {"SSD reads", "predicted_wait_ssd_read_us"},
                          {"SSD writes", "predicted_wait_ssd_write_us"},
                          {"the CPU optimizer", "predicted_wait_cpu_us"},
                          {"the all-reduces", "predicted_wait_comm_us"}};
    const char *between = " ";
    for (const Busy &w : waits)
      if (uint64_t us = plan.memoryOf(w.key); us >= 500) {
        out += between + std::string(w.name) + " " + formatSeconds(us * 1e-6);
        between = ", ";
        // Updates with SSD operands: their jobs are done once the drives
        // have read them and written them back.
        uint64_t ssd = plan.memoryOf("predicted_wait_cpu_ssd_us");
        if (std::string(w.key) == "predicted_wait_cpu_us" && ssd >= 500)
          out += " (" + formatSeconds(ssd * 1e-6) +
                 " of it for jobs with SSD operands, done once the drives "
                 "have read them and written them back)";
      }
    if (*between == ' ')
      out += " nothing";
    add("; %s passed after the last kernel (transfers and CPU updates "
        "finishing)\n",
        formatSeconds(plan.memoryOf("predicted_after_compute_us") * 1e-6)
            .c_str());
  }
  out += artifact::formatMemoryReport(plan);
  return out;
}

namespace {

/// The name of the stored tensor (parameter, state, swap space) a kernel
/// moves or updates, looking through the copy that fetched it; empty when
/// it touches none.
std::string storedTensorOf(exec::KernelOp kernel) {
  for (Value v : kernel.getInputs()) {
    if (auto copy = v.getDefiningOp<exec::KernelOp>();
        copy && copy.isKernel(artifact::Kernel::Copy) &&
        !copy.getInputs().empty())
      v = copy.getInputs()[0];
    if (StringRef name = storedName(v); !name.empty())
      return name.str();
  }
  return "";
}

/// `text` as a JSON string's contents.
std::string jsonEscaped(StringRef text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      continue;
    out += c;
  }
  return out;
}

} // namespace

std::string formatPredictedTrace(ModuleOp module) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  auto spans =
      func ? getDeclaredAttr<exec::ExecDialect::PredictedSpansAttrHelper>(func)
           : DenseF64ArrayAttr();
  if (!spans)
    return "";
  SmallVector<exec::KernelOp> kernels;
  for (auto k : func.getBody().front().getOps<exec::KernelOp>())
    kernels.push_back(k);
  std::string out = "{\"traceEvents\":[\n";
  char buf[128];
  for (size_t q = 0; q < artifact::kNumQueues; ++q) {
    std::snprintf(buf, sizeof(buf),
                  "{\"ph\":\"M\",\"pid\":1,\"tid\":%zu,\"name\":"
                  "\"thread_name\",\"args\":{\"name\":\"",
                  q);
    out += buf;
    out += artifact::queueName(static_cast<artifact::Queue>(q));
    out += "\"}},\n";
  }
  ArrayRef<double> v = spans.asArrayRef();
  for (size_t i = 0; i + 3 < v.size(); i += 4) {
    auto step = static_cast<size_t>(v[i + 1]);
    std::string name = step < kernels.size() ? kernels[step].getKernel().str()
                                             : std::string("?");
    if (step < kernels.size())
      if (std::string stored = storedTensorOf(kernels[step]); !stored.empty())
        name += " " + stored;
    std::snprintf(buf, sizeof(buf),
                  "{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,"
                  "\"dur\":%.3f,\"args\":{\"step\":%zu},\"name\":\"",
                  static_cast<int>(v[i]), v[i + 2],
                  std::max(0.0, v[i + 3] - v[i + 2]), step);
    out += buf;
    out += jsonEscaped(name);
    out += i + 7 < v.size() ? "\"},\n" : "\"}\n";
  }
  out += "]}\n";
  return out;
}

} // namespace strata::compile
