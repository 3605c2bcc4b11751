// Plan.cpp - The plan's names and the queries on its steps.
//
// What the plan format means, beside Plan.h's types: the name tables of
// kernels, queues, regions and slot classes, and which bytes a step reads
// and writes, whether it is a transfer or a CPU update. The codec and the
// validator (PlanIO.cpp) and the step-order rules (StepOrder.cpp) use
// these; nothing here calls either.

#include "runtime/artifact/Plan.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/support/Checked.h"

#include <cmath>

namespace strata::artifact {

int64_t Slot::numElements() const {
  // Plans are validated (checked shapes) before anything counts elements.
  return checkedNumElements(shape).value_or(-1);
}

const char *kernelName(Kernel kernel) {
  auto k = static_cast<size_t>(kernel);
  if (k == 0 || k >= static_cast<size_t>(Kernel::NumKernels))
    return "invalid";
  return kernelInfo(kernel).name;
}

std::string_view kernelNameView(Kernel kernel) {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (size_t k = 0; k < static_cast<size_t>(Kernel::NumKernels); ++k)
      out.push_back(kernelName(static_cast<Kernel>(k)));
    return out;
  }();
  auto k = static_cast<size_t>(kernel);
  return k < names.size() ? names[k] : names[0];
}

bool kernelByName(std::string_view name, Kernel &kernel) {
  const KernelInfo *info = kernelInfoByName(name);
  if (info)
    kernel = info->kernel;
  return info != nullptr;
}

const char *queueName(Queue queue) {
  switch (queue) {
  case Queue::Compute:
    return "compute";
  case Queue::HostToDevice:
    return "h2d";
  case Queue::DeviceToHost:
    return "d2h";
  case Queue::SsdRead:
    return "ssd-read";
  case Queue::SsdWrite:
    return "ssd-write";
  case Queue::Cpu:
    return "cpu";
  case Queue::Comm:
    return "comm";
  }
  return "invalid";
}

bool queueByName(const std::string &name, Queue &queue) {
  for (size_t q = 0; q < kNumQueues; ++q)
    if (name == queueName(static_cast<Queue>(q))) {
      queue = static_cast<Queue>(q);
      return true;
    }
  return false;
}

const char *regionName(Region region) {
  switch (region) {
  case Region::Arena:
    return "device arena";
  case Region::Params:
    return "device";
  case Region::Host:
    return "host";
  case Region::Ssd:
    return "ssd";
  }
  return "invalid";
}

const char *slotClassName(SlotClass cls) {
  switch (cls) {
  case SlotClass::Activation:
    return "activations";
  case SlotClass::Gradient:
    return "gradients";
  case SlotClass::Workspace:
    return "workspace";
  case SlotClass::Input:
    return "inputs";
  case SlotClass::Parameter:
    return "parameters";
  case SlotClass::OptimizerState:
    return "optimizer state";
  case SlotClass::Constant:
    return "constants";
  }
  return "invalid";
}

uint64_t Plan::memoryOf(const std::string &name) const {
  for (const auto &m : memory)
    if (m.first == name)
      return m.second;
  return 0;
}

bool isUpdateKernel(Kernel kernel) { return kernelInfo(kernel).outputs == 0; }

bool isCollective(Kernel kernel) {
  return kernelInfo(kernel).cost == CostClass::Collective;
}

int64_t dataParallelRanks(const Plan &plan) {
  for (const Step &s : plan.steps)
    if (isCollective(s.kernel) && !s.ints.empty())
      return s.ints[0];
  return 1;
}

bool shardsOptimizer(const Plan &plan) {
  for (const Step &s : plan.steps)
    if (s.kernel == Kernel::ReduceScatter)
      return true;
  return false;
}

double Schedule::factor(int64_t step) const {
  if (warmupSteps > 0 && step <= warmupSteps)
    return static_cast<double>(step) / static_cast<double>(warmupSteps);
  if (kind != Cosine || totalSteps <= warmupSteps)
    return 1.0;
  double progress = static_cast<double>(step - warmupSteps) /
                    static_cast<double>(totalSteps - warmupSteps);
  if (progress > 1.0)
    progress = 1.0;
  const double pi = 3.14159265358979323846;
  return minRatio + (1.0 - minRatio) * 0.5 * (1.0 + std::cos(pi * progress));
}

bool accessesConflict(const std::vector<ArenaRange> &readsA,
                      const std::vector<ArenaRange> &writesA,
                      const std::vector<ArenaRange> &readsB,
                      const std::vector<ArenaRange> &writesB) {
  auto any = [](const std::vector<ArenaRange> &xs,
                const std::vector<ArenaRange> &ys) {
    for (const ArenaRange &x : xs)
      for (const ArenaRange &y : ys)
        if (x.overlaps(y))
          return true;
    return false;
  };
  return any(writesA, readsB) || any(writesA, writesB) || any(readsA, writesB);
}

bool isTransfer(const Plan &plan, const Step &step) {
  if (step.inputs.empty())
    return false;
  Region r = plan.slots[step.inputs[0]].region;
  bool stored = r == Region::Host || r == Region::Ssd;
  return stored &&
         (step.kernel == Kernel::Copy || step.kernel == Kernel::Assign ||
          step.kernel == Kernel::Store);
}

bool runsOnCpu(Kernel kernel) {
  return kernel == Kernel::UpdateSgd || kernel == Kernel::UpdateMomentum ||
         kernel == Kernel::UpdateAdamW || kernel == Kernel::UpdateAdaLomo;
}

bool isCpuUpdate(const Plan &plan, const Step &step) {
  if (!runsOnCpu(step.kernel) || step.inputs.empty())
    return false;
  for (uint32_t slot : step.inputs) {
    if (slot >= plan.slots.size())
      return false;
    Region r = plan.slots[slot].region;
    if (r != Region::Host && r != Region::Ssd)
      return false;
  }
  return true;
}

void stepAccesses(const Plan &plan, const Step &step,
                  std::vector<Access> &reads, std::vector<Access> &writes) {
  reads.clear();
  writes.clear();
  // A transfer from or to the SSD moves whole pages, on both sides.
  bool ssd = isTransfer(plan, step) &&
             plan.slots[step.inputs[0]].region == Region::Ssd;
  auto access = [&](uint32_t slot) {
    const Slot &s = plan.slots[slot];
    uint64_t bytes =
        ssd || s.region == Region::Ssd ? pagePadded(s.bytes) : s.bytes;
    return Access{s.region, {s.offset, s.offset + bytes}};
  };
  std::vector<InputUse> uses =
      inputUses(step.kernel, step.inputs.size(), step.ints);
  for (size_t k = 0; k < step.inputs.size(); ++k) {
    uint32_t slot = step.inputs[k];
    if (slot >= plan.slots.size())
      continue;
    if (uses[k].read)
      reads.push_back(access(slot));
    if (uses[k].written)
      writes.push_back(access(slot));
  }
  for (uint32_t slot : step.outputs)
    if (slot < plan.slots.size())
      writes.push_back(access(slot));
}

void arenaAccesses(const Plan &plan, const Step &step,
                   std::vector<ArenaRange> &reads,
                   std::vector<ArenaRange> &writes) {
  std::vector<Access> r, w;
  stepAccesses(plan, step, r, w);
  reads.clear();
  writes.clear();
  for (const Access &a : r)
    if (a.region == Region::Arena)
      reads.push_back(a.range);
  for (const Access &a : w)
    if (a.region == Region::Arena)
      writes.push_back(a.range);
}

} // namespace strata::artifact
