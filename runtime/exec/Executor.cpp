// Executor.cpp - Runs a forward plan on the CPU backend.

#include "runtime/exec/Executor.h"

#include <algorithm>
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
  const Plan &plan = artifact_.plan();
  inputSet_.assign(plan.inputs.size(), false);
  arena_.setAlignment(plan.ssdBytes > 0 ? artifact::kParamAlignment
                                        : artifact::kArenaAlignment);
  overlap_ = options.overlapTransfers;
  size_t n = plan.steps.size();
  reads_.assign(n, {});
  writes_.assign(n, {});
  issueAt_.assign(n + 1, {});
  isTransfer_.assign(n, false);
  bool anyTransfer = false;
  for (size_t i = 0; i < n; ++i) {
    const artifact::Step &step = plan.steps[i];
    artifact::arenaAccesses(plan, step, reads_[i], writes_[i]);
    isTransfer_[i] = artifact::isTransfer(plan, step);
    anyTransfer |= isTransfer_[i];
    if (overlap_ && step.issueAfter != artifact::kInProgramOrder)
      issueAt_[step.issueAfter + 1].push_back(i);
  }
  if (anyTransfer && overlap_)
    for (auto &queue : queues_)
      queue = std::make_unique<TransferQueue>();
  return arena_.reserve(plan.arenaBytes, options.deviceBudget, error);
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

bool Executor::transfer(size_t index, std::string &error) {
  const Plan &plan = artifact_.plan();
  const artifact::Step &step = plan.steps[index];
  const Slot &stored = plan.slots[step.inputs[0]];
  bool fetch = step.kernel == artifact::Kernel::Copy;
  const Slot &device = plan.slots[fetch ? step.outputs[0] : step.inputs[1]];
  double start = trace_ ? trace_->now() : 0;
  bool ok = true;
  if (device.region != Region::Arena) {
    error = "a transfer must go to or from the device arena";
    ok = false;
  } else if (stored.region == Region::Ssd) {
    uint64_t padded = artifact::pagePadded(stored.bytes);
    char *arena = arena_.base() + device.offset;
    ok = fetch ? artifact_.ssd()->read(stored.offset, arena, padded, error)
               : artifact_.ssd()->write(stored.offset, arena, padded, error);
  } else {
    char *host = artifact_.memoryOf(stored);
    char *arena = arena_.base() + device.offset;
    if (fetch)
      std::memcpy(arena, host, device.bytes);
    else
      std::memcpy(host, arena, stored.bytes);
  }
  if (trace_) {
    bool ssd = stored.region == Region::Ssd;
    trace_->add(stored.name,
                ssd ? (fetch ? "ssd-read" : "ssd-write")
                    : (fetch ? "h2d" : "d2h"),
                ssd ? (fetch ? Lane::SsdRead : Lane::SsdWrite)
                    : Lane::HostCopy,
                start, trace_->now(),
                stored.bytes);
  }
  if (!ok)
    error = "step " + std::to_string(index) + " (" +
            (stored.region == Region::Ssd ? "SSD" : "host") +
            " transfer of '" + stored.name + "'): " + error;
  return ok;
}

bool Executor::submitTransfer(size_t index, const cpu::KernelContext &context,
                              std::string &error) {
  const Plan &plan = artifact_.plan();
  const artifact::Step &step = plan.steps[index];
  // Without updates (gradient-only micro-batches) nothing is written back.
  if (step.kernel == artifact::Kernel::Assign && !context.applyUpdates)
    return true;
  const Slot &stored = plan.slots[step.inputs[0]];
  uint64_t bytes = stored.region == Region::Ssd
                       ? artifact::pagePadded(stored.bytes)
                       : stored.bytes;
  bool fetch = step.kernel == artifact::Kernel::Copy;
  if (fetch) {
    const Slot &dst = plan.slots[step.outputs[0]];
    arena_.touch(dst.offset, dst.bytes);
  }
  uint64_t &link = stored.region == Region::Ssd
                       ? (fetch ? links_.ssdToDevice : links_.deviceToSsd)
                       : (fetch ? links_.hostToDevice : links_.deviceToHost);
  link += bytes;
  // Host copies are memcpy on the CPU backend, which shares the memory
  // system with its "device": a queue would only add hand-offs, so they run
  // on this thread (after the queued transfers they conflict with). SSD
  // transfers wait on the drive and go on the queue.
  if (!overlap_ || stored.region == Region::Host)
    return (!queues_[kReads] || waitForConflicts(index, error)) &&
           transfer(index, error);
  // Each direction is first in, first out; across them a transfer waits
  // (on its worker) for the other direction's queued transfers it depends
  // on: the same stored tensor, or arena bytes one reads and the other
  // writes.
  int mine = fetch ? kReads : kWrites;
  TransferQueue *other = queues_[1 - mine].get();
  uint64_t otherDone = other->finished(), after = 0;
  for (const Queued &q : queued_)
    if (q.queue != mine && q.id > otherDone && q.id > after &&
        (plan.steps[q.step].inputs[0] == step.inputs[0] ||
         artifact::accessesConflict(reads_[q.step], writes_[q.step],
                                    reads_[index], writes_[index])))
      after = q.id;
  uint64_t id = queues_[mine]->submit(
      [this, index, other, after](std::string &error) {
        return (!after || other->waitFor(after, error)) &&
               transfer(index, error);
      });
  queued_.push_back({id, index, mine});
  return true;
}

bool Executor::waitForConflicts(size_t index, std::string &error) {
  uint64_t finished[2], wait[2] = {0, 0};
  for (int q : {kReads, kWrites})
    finished[q] = queues_[q]->finished();
  for (const Queued &q : queued_) {
    if (q.id <= finished[q.queue] || q.id <= wait[q.queue])
      continue;
    if (artifact::accessesConflict(reads_[q.step], writes_[q.step],
                                   reads_[index], writes_[index]))
      wait[q.queue] = q.id;
  }
  for (int q : {kReads, kWrites}) {
    if (wait[q] && !queues_[q]->waitFor(wait[q], error))
      return false;
    finished[q] = std::max(finished[q], wait[q]);
  }
  queued_.erase(std::remove_if(queued_.begin(), queued_.end(),
                               [&](const Queued &q) {
                                 return q.id <= finished[q.queue];
                               }),
                queued_.end());
  return true;
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
    if (s.bytes > 0) // An empty array may have no storage at all.
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
  queued_.clear();
  bool ok = runSteps(error, context);
  // Outputs, checkpoints and the next step see every transfer finished;
  // after a failure too, so nothing is still writing.
  for (auto &queue : queues_) {
    std::string queueError;
    if (queue && !queue->drain(queueError) && ok) {
      error = queueError;
      ok = false;
    }
  }
  queued_.clear();
  return ok;
}

bool Executor::runSteps(std::string &error,
                        const cpu::KernelContext &context) {
  const Plan &plan = artifact_.plan();
  std::vector<cpu::TensorRef> ins, outs;
  // The fetches scheduled to start after step `i - 1` (0: at the start).
  auto issueAhead = [&](size_t i) {
    for (size_t f : issueAt_[i])
      if (!submitTransfer(f, context, error))
        return false;
    return true;
  };
  if (!issueAhead(0))
    return false;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const artifact::Step &step = plan.steps[i];
    if (isTransfer_[i]) {
      if ((!overlap_ || step.issueAfter == artifact::kInProgramOrder) &&
          !submitTransfer(i, context, error))
        return false;
    } else {
      if (queues_[kReads] && !waitForConflicts(i, error))
        return false;
      double start = trace_ ? trace_->now() : 0;
      ins.clear();
      outs.clear();
      for (uint32_t s : step.inputs)
        ins.push_back(ref(s));
      for (uint32_t s : step.outputs) {
        outs.push_back(ref(s));
        arena_.touch(plan.slots[s].offset, plan.slots[s].bytes);
      }
      bool ok = cpu::runKernel(step, ins, outs, context, error);
      const std::string &target = step.outputs.empty()
                                      ? plan.slots[step.inputs[0]].name
                                      : plan.slots[step.outputs[0]].name;
      if (trace_)
        trace_->add(target, artifact::kernelName(step.kernel), Lane::Compute,
                    start, trace_->now(),
                    step.outputs.empty() ? 0
                                         : plan.slots[step.outputs[0]].bytes);
      if (!ok) {
        error = "step " + std::to_string(i) + " (" +
                artifact::kernelName(step.kernel) + " -> '" + target +
                "'): " + error;
        return false;
      }
    }
    if (!issueAhead(i + 1))
      return false;
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
      if (s.bytes > 0)
        std::memcpy(array.data.data(), base, s.bytes);
      return true;
    }
    return artifact_.readSlot(s, array.data.data(), error);
  }
  error = "the model has no output '" + name + "'";
  return false;
}

} // namespace strata::exec
