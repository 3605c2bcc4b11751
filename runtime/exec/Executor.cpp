// Executor.cpp - Runs a forward plan on the CPU backend.

#include "runtime/exec/Executor.h"

#include <cstring>

namespace strata::exec {

using artifact::Plan;
using artifact::Region;
using artifact::Slot;

bool DeviceArena::reserve(uint64_t bytes, uint64_t budget,
                          std::string &error) {
  if (budget != 0 && bytes > budget) {
    error = "the plan needs " + std::to_string(bytes) +
            " bytes of device memory; the budget is " +
            std::to_string(budget);
    return false;
  }
  buffer_ = artifact::AlignedBuffer(bytes);
  if (!buffer_.valid()) {
    error = "cannot allocate the " + std::to_string(bytes) +
            "-byte device arena";
    return false;
  }
  peak_ = 0;
  return true;
}

bool Executor::prepare(const ExecutorOptions &options, std::string &error) {
  inputSet_.assign(artifact_.plan().inputs.size(), false);
  arena_.setAlignment(artifact_.plan().ssdBytes > 0 ? artifact::kParamAlignment
                                                    : artifact::kArenaAlignment);
  return arena_.reserve(artifact_.plan().arenaBytes, options.deviceBudget,
                        error);
}

cpu::TensorRef Executor::ref(uint32_t slot) {
  const Slot &s = artifact_.plan().slots[slot];
  cpu::TensorRef t;
  t.dtype = s.dtype;
  t.shape = s.shape;
  // SSD slots have no memory: only copies (fetch) and assigns (write back)
  // touch them, and run() serves those with the store.
  t.data = s.region == Region::Arena ? arena_.base() + s.offset
                                     : artifact_.memoryOf(s);
  return t;
}

bool Executor::ssdTransfer(const artifact::Step &step, std::string &error) {
  const Plan &plan = artifact_.plan();
  auto padded = [](uint64_t bytes) {
    return (bytes + artifact::kParamAlignment - 1) /
           artifact::kParamAlignment * artifact::kParamAlignment;
  };
  if (step.kernel == artifact::Kernel::Copy) {
    const Slot &src = plan.slots[step.inputs[0]];
    const Slot &dst = plan.slots[step.outputs[0]];
    arena_.touch(dst.offset, dst.bytes);
    links_.ssdToDevice += padded(src.bytes);
    return artifact_.ssd()->read(src.offset, arena_.base() + dst.offset,
                                 padded(src.bytes), error);
  }
  const Slot &dst = plan.slots[step.inputs[0]];
  const Slot &src = plan.slots[step.inputs[1]];
  if (src.region != Region::Arena) {
    error = "a write to the SSD must come from the device arena";
    return false;
  }
  links_.deviceToSsd += padded(dst.bytes);
  return artifact_.ssd()->write(dst.offset, arena_.base() + src.offset,
                                padded(dst.bytes), error);
}

bool Executor::setInput(const std::string &name, const npy::Array &array,
                        std::string &error) {
  const Plan &plan = artifact_.plan();
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (plan.inputs[i].name != name)
      continue;
    const Slot &s = plan.slots[plan.inputs[i].slot];
    if (array.dtype != s.dtype || array.shape != s.shape) {
      error = "input '" + name + "' must be " + dtypeName(s.dtype) + " " +
              npy::shapeString(s.shape) + ", got " +
              dtypeName(array.dtype) + " " + npy::shapeString(array.shape);
      return false;
    }
    std::memcpy(arena_.base() + s.offset, array.data.data(), s.bytes);
    arena_.touch(s.offset, s.bytes);
    inputSet_[i] = true;
    return true;
  }
  std::string names;
  for (const artifact::Binding &b : plan.inputs)
    names += (names.empty() ? "" : ", ") + b.name;
  error = "the model has no input '" + name + "' (inputs: " + names + ")";
  return false;
}

bool Executor::run(std::string &error, const cpu::KernelContext &context) {
  const Plan &plan = artifact_.plan();
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (!inputSet_[i]) {
      const Slot &s = plan.slots[plan.inputs[i].slot];
      error = "input '" + plan.inputs[i].name + "' (" + dtypeName(s.dtype) +
              " " + npy::shapeString(s.shape) + ") was not given";
      return false;
    }
  }
  std::vector<cpu::TensorRef> ins, outs;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const artifact::Step &step = plan.steps[i];
    bool ssd = (step.kernel == artifact::Kernel::Copy &&
                plan.slots[step.inputs[0]].region == Region::Ssd) ||
               ((step.kernel == artifact::Kernel::Assign ||
                 step.kernel == artifact::Kernel::Store) &&
                plan.slots[step.inputs[0]].region == Region::Ssd);
    double start = trace_ ? trace_->now() : 0;
    if (ssd) {
      if (!context.applyUpdates && step.kernel == artifact::Kernel::Assign)
        continue;
      bool ok = ssdTransfer(step, error);
      if (trace_)
        trace_->add(plan.slots[step.inputs[0]].name,
                    step.kernel == artifact::Kernel::Copy ? "ssd-read"
                                                          : "ssd-write",
                    Lane::Ssd, start, trace_->now(),
                    plan.slots[step.inputs[0]].bytes);
      if (!ok) {
        error = "step " + std::to_string(i) + " (SSD transfer of '" +
                plan.slots[step.inputs[0]].name + "'): " + error;
        return false;
      }
      continue;
    }
    ins.clear();
    outs.clear();
    for (uint32_t s : step.inputs)
      ins.push_back(ref(s));
    for (uint32_t s : step.outputs) {
      outs.push_back(ref(s));
      arena_.touch(plan.slots[s].offset, plan.slots[s].bytes);
    }
    // Copies between the host region and the device are the host link.
    bool hostLink = false;
    if (step.kernel == artifact::Kernel::Copy &&
        plan.slots[step.inputs[0]].region == Region::Host) {
      links_.hostToDevice += plan.slots[step.inputs[0]].bytes;
      hostLink = true;
    } else if ((step.kernel == artifact::Kernel::Assign ||
                step.kernel == artifact::Kernel::Store) &&
               plan.slots[step.inputs[0]].region == Region::Host &&
               (context.applyUpdates ||
                step.kernel == artifact::Kernel::Store)) {
      links_.deviceToHost += plan.slots[step.inputs[0]].bytes;
      hostLink = true;
    }
    bool ok = cpu::runKernel(step, ins, outs, context, error);
    std::string target = step.outputs.empty()
                             ? plan.slots[step.inputs[0]].name
                             : plan.slots[step.outputs[0]].name;
    if (trace_)
      trace_->add(target,
                  hostLink ? (step.kernel == artifact::Kernel::Copy ? "h2d"
                                                                    : "d2h")
                           : artifact::kernelName(step.kernel),
                  hostLink ? Lane::HostCopy : Lane::Compute, start,
                  trace_->now(),
                  step.outputs.empty() ? 0 : plan.slots[step.outputs[0]].bytes);
    if (!ok) {
      error = "step " + std::to_string(i) + " (" +
              artifact::kernelName(step.kernel) + " -> '" + target +
              "'): " + error;
      return false;
    }
  }
  return true;
}

bool Executor::getOutput(const std::string &name, npy::Array &array,
                         std::string &error) const {
  const Plan &plan = artifact_.plan();
  for (const artifact::Binding &b : plan.outputs) {
    if (b.name != name)
      continue;
    const Slot &s = plan.slots[b.slot];
    array.dtype = s.dtype;
    array.shape = s.shape;
    array.data.resize(s.bytes);
    if (s.region == Region::Arena) {
      const char *base = const_cast<DeviceArena &>(arena_).base() + s.offset;
      std::memcpy(array.data.data(), base, s.bytes);
      return true;
    }
    return artifact_.readSlot(s, array.data.data(), error);
  }
  error = "the model has no output '" + name + "'";
  return false;
}

} // namespace strata::exec
