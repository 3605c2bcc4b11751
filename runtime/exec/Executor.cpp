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
  return arena_.reserve(artifact_.plan().arenaBytes, options.deviceBudget,
                        error);
}

cpu::TensorRef Executor::ref(uint32_t slot) {
  const Slot &s = artifact_.plan().slots[slot];
  cpu::TensorRef t;
  t.dtype = s.dtype;
  t.shape = s.shape;
  char *base = s.region == Region::Arena ? arena_.base() : artifact_.params();
  t.data = base + s.offset;
  return t;
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
    ins.clear();
    outs.clear();
    for (uint32_t s : step.inputs)
      ins.push_back(ref(s));
    for (uint32_t s : step.outputs) {
      outs.push_back(ref(s));
      arena_.touch(plan.slots[s].offset, plan.slots[s].bytes);
    }
    if (!cpu::runKernel(step, ins, outs, context, error)) {
      std::string target = step.outputs.empty()
                               ? plan.slots[step.inputs[0]].name
                               : plan.slots[step.outputs[0]].name;
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
    const char *base = s.region == Region::Arena
                           ? const_cast<DeviceArena &>(arena_).base()
                           : artifact_.params();
    array.data.assign(base + s.offset, base + s.offset + s.bytes);
    return true;
  }
  error = "the model has no output '" + name + "'";
  return false;
}

} // namespace strata::exec
