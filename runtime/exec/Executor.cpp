// Executor.cpp - Runs a plan's steps on a backend.

#include "runtime/exec/Executor.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/artifact/StepOrder.h"
#include "runtime/backends/cpu/Kernels.h"
#include "runtime/exec/BackendRegistry.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace strata::runtime {

using artifact::Plan;
using artifact::Region;
using artifact::Slot;

namespace {
/// Bytes of each host staging buffer for SSD transfers (whole pages).
constexpr uint64_t kStagingBytes = 8 << 20;
} // namespace

bool DeviceArena::reserve(Backend &backend, uint64_t bytes, uint64_t budget,
                          std::string &error) {
  if (budget != 0 && bytes > budget) {
    error = "the plan needs " + std::to_string(bytes) +
            " bytes of device memory; the budget is " + std::to_string(budget);
    return false;
  }
  release();
  backend_ = &backend;
  base_ = static_cast<char *>(backend.allocDevice(bytes, error));
  if (!base_) {
    error = "cannot allocate the " + std::to_string(bytes) +
            "-byte device arena: " + error;
    return false;
  }
  size_ = bytes;
  peak_ = 0;
  return true;
}

void DeviceArena::release() {
  if (base_)
    backend_->freeDevice(base_);
  base_ = nullptr;
  size_ = 0;
}

Executor::~Executor() {
  if (backend_) {
    std::string ignored;
    backend_->synchronize(ignored);
    ssdMemory_.reset();
    arena_.release();
    if (ownsParams_)
      backend_->freeDevice(params_);
    if (hostRegistered_)
      backend_->unregisterHost(artifact_.host());
    for (auto &s : staging_)
      if (s.size())
        backend_->unregisterHost(s.data());
  }
}

bool Executor::prepare(const ExecutorOptions &options, std::string &error) {
  const Plan &plan = artifact_.plan();
  backend_ = makeBackend(options.backend, error);
  if (!backend_)
    return false;
  std::string why;
  if (!backend_->supports(plan, why)) {
    error = "the " + std::string(backend_->name()) +
            " backend cannot run this plan: " + why;
    return false;
  }
  // A data-parallel plan runs on as many ranks as it was compiled for,
  // and a plan for one process on one.
  int64_t ranks = artifact::dataParallelRanks(plan);
  comm_ = options.communicator;
  if (!comm_) {
    ownComm_ = comm::selfCommunicator();
    comm_ = ownComm_.get();
  }
  if (ranks != comm_->size()) {
    error = ranks > 1
                ? "the plan was compiled for " + std::to_string(ranks) +
                      " data-parallel ranks (--data-parallel " +
                      std::to_string(ranks) + "); this run has " +
                      std::to_string(comm_->size()) + " (mpirun -np " +
                      std::to_string(ranks) + " strata-run ...)"
                : "the plan was compiled for one process, and this run has " +
                      std::to_string(comm_->size()) +
                      " ranks: compile it with --data-parallel " +
                      std::to_string(comm_->size()) +
                      ", or run it without mpirun";
    return false;
  }
  // A collective over host memory on a device that is not: its operand
  // and its result staged in host memory.
  uint64_t largestStaged = 0;
  if (!backend_->deviceIsHost() && !comm_->takesDeviceMemory())
    for (const artifact::Step &step : plan.steps)
      if (artifact::isCollective(step.kernel))
        largestStaged =
            std::max(largestStaged,
                     plan.slots[step.inputs[0]].bytes +
                         plan.slots[step.outputs.empty() ? step.inputs.back()
                                                         : step.outputs[0]]
                             .bytes);
  commStaging_.assign(largestStaged, 0);
  inputSet_.assign(plan.inputs.size(), false);
  arena_.setAlignment(plan.ssdBytes > 0 ? artifact::kParamAlignment
                                        : artifact::kArenaAlignment);
  overlap_ = options.overlapTransfers;
  size_t n = plan.steps.size();
  isTransfer_.assign(n, false);
  waitedFor_.assign(n, false);
  labels_.assign(n, StepLabel());
  for (size_t i = 0; i < n; ++i) {
    const artifact::Step &step = plan.steps[i];
    isTransfer_[i] = artifact::isTransfer(plan, step);
    for (uint32_t w : step.waits)
      waitedFor_[w] = true;
    StepLabel &label = labels_[i];
    label.index = i;
    const Slot &named =
        plan.slots[step.outputs.empty() ? step.inputs[0] : step.outputs[0]];
    label.target = named.name;
    label.text = std::string(artifact::kernelName(step.kernel)) + " -> '" +
                 named.name + "'";
    label.bytes = step.outputs.empty() ? 0 : named.bytes;
  }
  // Without overlap every step goes in program order, which the waits
  // allow too: a step never waits for one after it in the program.
  if (overlap_) {
    order_ = artifact::issueOrder(plan);
  } else {
    order_.resize(n);
    for (size_t i = 0; i < n; ++i)
      order_[i] = i;
  }
  position_.assign(n, 0);
  for (size_t p = 0; p < n; ++p)
    position_[order_[p]] = p;
  // The CPU jobs, and the two areas their SSD operands are staged in.
  cpuJobs_ = artifact::cpuJobs(plan, order_);
  for (const artifact::Step &step : plan.steps)
    speculates_ |=
        artifact::isUpdateKernel(step.kernel) &&
        artifact::updateOperands(step.kernel, step.inputs.size(), step.ints)
                .speculation == artifact::Speculation::Redo;
  // Speculation's alternating pairs: an SSD tensor and its SSD keep that no
  // step but the speculative update and its redo touch.
  flipKeep_.assign(plan.slots.size(), -1);
  flipHome_.assign(plan.slots.size(), -1);
  flipped_.reset(new std::atomic<bool>[plan.slots.size()]);
  for (size_t s = 0; s < plan.slots.size(); ++s)
    flipped_[s] = false;
  if (speculates_) {
    std::vector<uint32_t> touches(plan.slots.size(), 0);
    for (const artifact::Step &step : plan.steps) {
      for (uint32_t s : step.inputs)
        ++touches[s];
      for (uint32_t s : step.outputs)
        ++touches[s];
    }
    for (const artifact::Step &step : plan.steps) {
      if (!artifact::isUpdateKernel(step.kernel))
        continue;
      artifact::UpdateOperands at =
          artifact::updateOperands(step.kernel, step.inputs.size(), step.ints);
      if (at.speculation != artifact::Speculation::Speculate)
        continue;
      std::vector<size_t> written = artifact::keptInputs(at);
      for (size_t j = 0; j < written.size(); ++j) {
        uint32_t home = step.inputs[written[j]];
        uint32_t keep = step.inputs[static_cast<size_t>(at.keeps) + j];
        if (plan.slots[home].region == Region::Ssd &&
            plan.slots[keep].region == Region::Ssd && touches[home] == 2 &&
            touches[keep] == 2 && flipKeep_[home] < 0 && flipHome_[keep] < 0) {
          flipKeep_[home] = keep;
          flipHome_[keep] = home;
        }
      }
    }
  }
  cpuJobAt_.assign(n, 0);
  for (size_t j = 0; j < cpuJobs_.size(); ++j)
    cpuJobAt_[cpuJobs_[j].from] = j + 1;
  uint64_t staging = artifact::cpuStagingBytes(cpuJobs_);
  cpuStagingAreas_ = artifact::cpuStagingAreas(staging, plan.hostBytes);
  // Test hook: STRATA_CPU_STAGING_AREAS=N (2 up to kCpuStagingAreas) takes
  // N areas whatever the plan's sizes, so that the suites run every count
  // on models small enough that the rule gives them two.
  if (const char *v = std::getenv("STRATA_CPU_STAGING_AREAS")) {
    char *end = nullptr;
    unsigned long areas = std::strtoul(v, &end, 10);
    if (end == v || *end || areas < 2 || areas > artifact::kCpuStagingAreas) {
      error = "STRATA_CPU_STAGING_AREAS must be 2 to " +
              std::to_string(artifact::kCpuStagingAreas) + ", not '" + v + "'";
      return false;
    }
    cpuStagingAreas_ = areas;
  }
  if (staging > 0)
    for (size_t a = 0; a < cpuStagingAreas_; ++a) {
      artifact::AlignedBuffer &area = cpuStaging_[a];
      area = artifact::AlignedBuffer(staging);
      if (!area.valid()) {
        error = "cannot allocate the " + std::to_string(cpuStagingAreas_) +
                " " + std::to_string(staging) +
                "-byte host areas that stage the SSD tensors of optimizer "
                "updates on the CPU";
        return false;
      }
    }
  // Each step's event, then the staging areas' (stagedEvent).
  backend_->setEventCount(n + 3 * artifact::kCpuStagingAreas);
  backend_->setTrace(trace_);
  if (!arena_.reserve(*backend_, plan.arenaBytes, options.deviceBudget, error))
    return false;
  // The parameter region lives on the device.
  if (backend_->deviceIsHost()) {
    params_ = artifact_.params();
  } else {
    params_ =
        static_cast<char *>(backend_->allocDevice(plan.paramsBytes, error));
    if (!params_) {
      error = "cannot allocate the " + std::to_string(plan.paramsBytes) +
              "-byte device parameter region: " + error;
      return false;
    }
    ownsParams_ = true;
    if (!parametersToDevice(error))
      return false;
    if (plan.hostBytes > 0)
      hostRegistered_ =
          backend_->registerHost(artifact_.host(), plan.hostBytes);
    if (plan.ssdBytes > 0)
      for (auto &s : staging_) {
        s = artifact::AlignedBuffer(kStagingBytes);
        if (!s.valid()) {
          error = "cannot allocate SSD staging buffers";
          return false;
        }
        backend_->registerHost(s.data(), s.size());
      }
  }
  // SSD transfers into memory the kernel has pinned once skip pinning the
  // pages of every request (io_uring fixed buffers).
  if (tiers::SsdStore *ssd = artifact_.ssd()) {
    std::vector<std::pair<void *, uint64_t>> areas;
    if (backend_->deviceIsHost())
      areas.push_back({arena_.base(), arena_.size()});
    for (auto &area : staging_)
      areas.push_back({area.data(), area.size()});
    for (auto &area : cpuStaging_)
      areas.push_back({area.data(), area.size()});
    ssdMemory_ = ssd->registerMemory(areas);
  }
  return true;
}

void Executor::setTrace(Trace *trace) {
  trace_ = trace;
  if (backend_)
    backend_->setTrace(trace);
}

char *Executor::deviceMemory(const Slot &s) {
  return (s.region == Region::Arena ? arena_.base() : params_) + s.offset;
}

TensorRef Executor::ref(uint32_t slot) {
  const Slot &s = artifact_.plan().slots[slot];
  TensorRef t;
  t.dtype = s.dtype;
  t.shape = s.shape;
  // Kernels only see device memory (arena and parameter region): stored
  // tensors elsewhere reach them through transfers.
  t.data = deviceMemory(s);
  return t;
}

uint64_t Executor::ssdOffset(uint32_t slot, bool alt) const {
  const Plan &plan = artifact_.plan();
  int64_t keep = flipKeep_.empty() ? -1 : flipKeep_[slot];
  if (keep < 0)
    return plan.slots[slot].offset;
  bool keepCurrent = flipped_[slot].load() != alt;
  return plan.slots[keepCurrent ? static_cast<size_t>(keep) : slot].offset;
}

bool Executor::settleSpeculation(std::string &error) {
  const Plan &plan = artifact_.plan();
  if (!speculates_)
    return true;
  if (!backend_->synchronize(error))
    return false;
  for (size_t s = 0; s < flipKeep_.size(); ++s) {
    if (flipKeep_[s] < 0 || !flipped_[s])
      continue;
    uint64_t padded = artifact::pagePadded(plan.slots[s].bytes);
    artifact::AlignedBuffer buffer(padded);
    const Slot &keep = plan.slots[static_cast<size_t>(flipKeep_[s])];
    if (!artifact_.ssd()->read(keep.offset, buffer.data(), padded, error) ||
        !artifact_.ssd()->write(plan.slots[s].offset, buffer.data(), padded,
                                error))
      return (error = "moving '" + plan.slots[s].name +
                      "' back to its place on the SSD: " + error,
              false);
    flipped_[s] = false;
  }
  return true;
}

bool Executor::parametersToHost(std::string &error) {
  if (!settleSpeculation(error))
    return false;
  if (!ownsParams_)
    return true;
  return backend_->synchronize(error) &&
         backend_->copyFromDevice(artifact_.params(), params_,
                                  artifact_.plan().paramsBytes, error);
}

bool Executor::parametersToDevice(std::string &error) {
  // The artifact's image was just loaded (a checkpoint): every tensor is at
  // its own place.
  for (size_t s = 0; s < flipKeep_.size(); ++s)
    flipped_[s] = false;
  if (!ownsParams_)
    return true;
  return backend_->synchronize(error) &&
         backend_->copyToDevice(params_, artifact_.params(),
                                artifact_.plan().paramsBytes, error);
}

bool Executor::ssdTransfer(size_t index, bool fetch, std::string &error) {
  const Plan &plan = artifact_.plan();
  const artifact::Step &step = plan.steps[index];
  const Slot &stored = plan.slots[step.inputs[0]];
  const Slot &device = plan.slots[fetch ? step.outputs[0] : step.inputs[1]];
  double start = trace_ ? trace_->now() : 0;
  uint64_t padded = artifact::pagePadded(stored.bytes);
  char *dst = deviceMemory(device);
  bool ok = true;
  if (backend_->deviceIsHost()) {
    ok = fetch ? artifact_.ssd()->read(stored.offset, dst, padded, error)
               : artifact_.ssd()->write(stored.offset, dst, padded, error);
  } else {
    // SSD -> host staging -> device, a staging buffer at a time.
    artifact::AlignedBuffer &stage = staging_[fetch ? 0 : 1];
    for (uint64_t done = 0; ok && done < padded; done += stage.size()) {
      uint64_t n = std::min<uint64_t>(stage.size(), padded - done);
      ok = fetch
               ? artifact_.ssd()->read(stored.offset + done, stage.data(), n,
                                       error) &&
                     backend_->copyToDevice(dst + done, stage.data(), n, error)
               : backend_->copyFromDevice(stage.data(), dst + done, n, error) &&
                     artifact_.ssd()->write(stored.offset + done, stage.data(),
                                            n, error);
    }
  }
  if (trace_)
    trace_->add(stored.name, fetch ? "ssd-read" : "ssd-write",
                fetch ? Lane::SsdRead : Lane::SsdWrite, start, trace_->now(),
                stored.bytes, static_cast<int64_t>(index));
  if (!ok)
    error = "step " + std::to_string(index) + " (SSD transfer of '" +
            stored.name + "'): " + error;
  return ok;
}

bool Executor::issueTransfer(size_t index, const KernelContext &context) {
  const Plan &plan = artifact_.plan();
  const artifact::Step &step = plan.steps[index];
  // Without updates (gradient-only micro-batches) nothing is written back.
  if (step.kernel == artifact::Kernel::Assign && !context.applyUpdates)
    return true;
  const Slot &stored = plan.slots[step.inputs[0]];
  bool fetch = step.kernel == artifact::Kernel::Copy;
  const Slot &device = plan.slots[fetch ? step.outputs[0] : step.inputs[1]];
  if (fetch)
    arena_.touch(device.offset, device.bytes);
  bool ssd = stored.region == Region::Ssd;
  uint64_t bytes = ssd ? artifact::pagePadded(stored.bytes) : stored.bytes;
  (ssd ? (fetch ? links_.ssdToDevice : links_.deviceToSsd)
       : (fetch ? links_.hostToDevice : links_.deviceToHost)) += bytes;
  if (ssd)
    return backend_->hostTask(step.queue,
                              [this, index, fetch](std::string &error) {
                                return ssdTransfer(index, fetch, error);
                              });
  char *host = artifact_.memoryOf(stored);
  char *dev = deviceMemory(device);
  return fetch ? backend_->copy(step.queue, dev, host, device.bytes, true,
                                labels_[index])
               : backend_->copy(step.queue, host, dev, stored.bytes, false,
                                labels_[index]);
}

bool Executor::issueCpuJob(const artifact::CpuJobSpan &job,
                           const KernelContext &context) {
  const Plan &plan = artifact_.plan();
  // Every operand is in host memory or on the SSD (isCpuUpdate). The job
  // starts once every step any of its updates waits for is done (the
  // stores that brought their gradients and scales); a wait for an update
  // of the job itself is met already, the CPU queue running in order.
  auto forEachWait = [&](auto &&f) {
    for (size_t p = job.from; p < job.to; ++p)
      for (uint32_t w : plan.steps[order_[p]].waits)
        if (position_[w] < job.from || position_[w] >= job.to)
          f(w);
  };
  // The operands: host memory where they live; those on the SSD in the
  // staging area this job takes. Without updates (a gradient-only
  // micro-batch) there is nothing to run, only the waits and events.
  bool stages = context.applyUpdates && job.ssdBytes > 0;
  size_t area = stages ? cpuStagingNext_++ % cpuStagingAreas_ : 0;
  char *staged = stages ? cpuStaging_[area].data() : nullptr;
  struct Update {
    size_t index;
    std::vector<TensorRef> ins;
    artifact::Speculation mode = artifact::Speculation::None;
  };
  std::vector<Update> updates;
  std::vector<SsdOperand> ssd;
  uint64_t at = 0;
  bool writesSsd = false, readsWritten = false, redoes = false;
  for (size_t p = job.from; p < job.to && context.applyUpdates; ++p) {
    size_t index = order_[p];
    const artifact::Step &step = plan.steps[index];
    std::vector<artifact::InputUse> uses =
        artifact::inputUses(step.kernel, step.inputs.size(), step.ints);
    artifact::UpdateOperands operands;
    if (artifact::isUpdateKernel(step.kernel))
      operands =
          artifact::updateOperands(step.kernel, step.inputs.size(), step.ints);
    artifact::Speculation mode = operands.speculation;
    // Not speculating this step: the speculative updates do not run, and
    // the redos are the plain updates, which leave the keeps alone.
    if (mode == artifact::Speculation::Speculate && !context.speculating)
      continue;
    bool redo = mode == artifact::Speculation::Redo && context.speculating;
    size_t unusedFrom = mode == artifact::Speculation::Redo && !redo
                            ? static_cast<size_t>(operands.keeps)
                            : step.inputs.size();
    redoes |= redo;
    Update u{index, {}, mode};
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      uint32_t slot = step.inputs[i];
      const Slot &s = plan.slots[slot];
      if (i >= unusedFrom) {
        u.ins.push_back({s.dtype, s.shape, nullptr});
        continue;
      }
      if (s.region != Region::Ssd) {
        u.ins.push_back({s.dtype, s.shape, artifact_.memoryOf(s)});
        continue;
      }
      u.ins.push_back({s.dtype, s.shape, staged + at});
      SsdOperand o{slot,         at, uses[i].written, index, uses[i].read,
                   /*redo=*/redo};
      o.home = slot;
      bool keepInput = operands.keeps >= 0 && i >= size_t(operands.keeps);
      if (keepInput && flipHome_[slot] >= 0) {
        // The keep of an alternating pair: the old values stay at the
        // tensor's current place, which a redo reads them from.
        o.home = static_cast<uint32_t>(flipHome_[slot]);
        o.skip = mode == artifact::Speculation::Speculate;
      } else if (!keepInput && flipKeep_[slot] >= 0 &&
                 mode == artifact::Speculation::Speculate) {
        o.writeAlt = uses[i].written;
      }
      ssd.push_back(o);
      at += artifact::pagePadded(s.bytes);
      if (o.skip)
        continue;
      writesSsd |= uses[i].written;
      // Counted here, on the issuing thread: SSD -> host and back. A
      // redo's are counted where they are staged, only if it runs.
      if (redo)
        continue;
      if (uses[i].read)
        links_.ssdToDevice += artifact::pagePadded(s.bytes);
      if (uses[i].written)
        links_.deviceToSsd += artifact::pagePadded(s.bytes);
    }
    updates.push_back(std::move(u));
  }
  for (const SsdOperand &o : ssd)
    readsWritten |= cpuWrittenThisRun_[o.slot];
  for (const SsdOperand &o : ssd)
    if (o.written)
      cpuWrittenThisRun_[o.slot] = true;
  // The redos of the job that turn out not to be needed (their scale is
  // 1: the step did not clip), found before staging: their operands are
  // neither read nor written back. Filled on the SSD read queue, read on
  // the CPU and SSD write queues after it (ordered by the job's events).
  auto idle = std::make_shared<std::vector<size_t>>();
  if (!ssd.empty()) {
    // Read ahead on the SSD read queue, once the area is free (the job
    // that used it before is written back) and, for a tensor an earlier
    // job of this run writes back, once the latest write-back is done (the
    // SSD write queue runs in order); and after what the updates wait for
    // that can write the SSD (other CPU jobs, SSD write-backs), not after
    // the stores of their gradients. A job with redos waits for all of it:
    // whether a redo runs depends on its scale, stored from the device.
    backend_->wait(Queue::SsdRead, stagedEvent(2, area));
    if (readsWritten && cpuLastWriteArea_ >= 0)
      backend_->wait(Queue::SsdRead, stagedEvent(2, cpuLastWriteArea_));
    forEachWait([&](uint32_t w) {
      if (redoes || plan.steps[w].queue == Queue::Cpu ||
          plan.steps[w].queue == Queue::SsdWrite)
        backend_->wait(Queue::SsdRead, w);
    });
    std::vector<Update> redos;
    if (redoes)
      for (const Update &u : updates)
        if (u.mode == artifact::Speculation::Redo && context.speculating)
          redos.push_back(u);
    if (!backend_->hostTask(Queue::SsdRead, [this, ssd, staged, idle,
                                             redos](std::string &error) {
          for (const Update &u : redos)
            if (!cpu::redoNeeded(artifact_.plan().steps[u.index], u.ins))
              idle->push_back(u.index);
          // The speculative updates of idle redos stand: their results, at
          // the other place of each alternating pair, become current.
          for (const SsdOperand &o : ssd)
            if (o.redo && o.home == o.slot && flipKeep_[o.slot] >= 0 &&
                std::find(idle->begin(), idle->end(), o.step) != idle->end())
              flipped_[o.slot] = !flipped_[o.slot];
          return stageCpuJob(ssd, staged, true, *idle, error);
        }))
      return false;
    backend_->record(Queue::SsdRead, stagedEvent(0, area));
    backend_->wait(Queue::Cpu, stagedEvent(0, area));
  }
  forEachWait([&](uint32_t w) { backend_->wait(Queue::Cpu, w); });
  if (!updates.empty() &&
      !backend_->hostTask(Queue::Cpu, [this, updates = std::move(updates),
                                       context](std::string &error) mutable {
        for (Update &u : updates) {
          const artifact::Step &step = artifact_.plan().steps[u.index];
          const StepLabel &label = labels_[u.index];
          // A redo runs only when its step clipped (cpu::redoNeeded);
          // otherwise the speculative update stands. Without speculation
          // it is the update.
          if (u.mode == artifact::Speculation::Redo) {
            bool clipped = cpu::redoNeeded(step, u.ins);
            if (clipped)
              runClipped_ = true;
            if (context.speculating && !clipped)
              continue;
            if (context.speculating)
              redone_.fetch_add(1);
          }
          double start = trace_ ? trace_->now() : 0;
          bool ok = cpu::runKernel(step, u.ins, {}, context, error);
          if (trace_)
            trace_->add(label.target, artifact::kernelName(step.kernel),
                        Lane::Cpu, start, trace_->now(), label.bytes,
                        static_cast<int64_t>(label.index));
          if (!ok) {
            error = "step " + std::to_string(label.index) + " (" + label.text +
                    "): " + error;
            return false;
          }
        }
        return true;
      }))
    return false;
  // The updates are done when their SSD operands are written back.
  Queue done = Queue::Cpu;
  if (writesSsd) {
    backend_->record(Queue::Cpu, stagedEvent(1, area));
    backend_->wait(Queue::SsdWrite, stagedEvent(1, area));
    if (!backend_->hostTask(
            Queue::SsdWrite,
            [this, ssd = std::move(ssd), staged, idle](std::string &error) {
              return stageCpuJob(ssd, staged, false, *idle, error);
            }))
      return false;
    done = Queue::SsdWrite;
    cpuLastWriteArea_ = static_cast<int>(area);
  }
  if (staged)
    backend_->record(done, stagedEvent(2, area));
  for (size_t p = job.from; p < job.to; ++p)
    if (waitedFor_[order_[p]])
      backend_->record(done, static_cast<uint32_t>(order_[p]));
  return true;
}

bool Executor::stageCpuJob(const std::vector<SsdOperand> &operands, char *area,
                           bool read, const std::vector<size_t> &idleRedos,
                           std::string &error) {
  const Plan &plan = artifact_.plan();
  for (const SsdOperand &o : operands) {
    if (o.skip || (read ? !o.read : !o.written))
      continue;
    if (o.redo) {
      if (std::find(idleRedos.begin(), idleRedos.end(), o.step) !=
          idleRedos.end())
        continue;
      redoStaged_[read ? 0 : 1] +=
          artifact::pagePadded(plan.slots[o.slot].bytes);
    }
    const Slot &s = plan.slots[o.slot];
    uint64_t padded = artifact::pagePadded(s.bytes);
    double start = trace_ ? trace_->now() : 0;
    // At its place now; a speculative update's result goes to the other
    // place of an alternating pair.
    uint64_t where = ssdOffset(o.home, !read && o.writeAlt);
    bool ok =
        read ? artifact_.ssd()->read(where, area + o.offset, padded, error)
             : artifact_.ssd()->write(where, area + o.offset, padded, error);
    if (trace_)
      trace_->add(s.name, read ? "ssd-read" : "ssd-write",
                  read ? Lane::SsdRead : Lane::SsdWrite, start, trace_->now(),
                  s.bytes, static_cast<int64_t>(o.step));
    if (!ok) {
      const StepLabel &label = labels_[o.step];
      error = "step " + std::to_string(label.index) + " (" + label.text +
              "): " + (read ? "reading '" : "writing '") + s.name +
              "' on the SSD: " + error;
      return false;
    }
  }
  return true;
}

bool Executor::issueCollective(size_t index) {
  const Plan &plan = artifact_.plan();
  const artifact::Step &step = plan.steps[index];
  // all_reduce, reduce_scatter and unshard: (in) -> out; all_gather:
  // (w, shard), writing w: `src` is read, `dst` written.
  artifact::Kernel kernel = step.kernel;
  bool gather = kernel == artifact::Kernel::AllGather;
  const Slot &in = plan.slots[step.inputs[gather ? 1 : 0]];
  const Slot &out = plan.slots[gather ? step.inputs[0] : step.outputs[0]];
  if (out.region == artifact::Region::Arena)
    arena_.touch(out.offset, out.bytes);
  char *src = deviceMemory(in);
  char *dst = deviceMemory(out);
  return backend_->hostTask(step.queue, [this, index, kernel, src, dst, &in,
                                         &out](std::string &error) {
    double start = trace_ ? trace_->now() : 0;
    // Through the communicator, on host memory or (NCCL) device memory.
    auto run = [&](const char *from, char *to) {
      switch (kernel) {
      case artifact::Kernel::ReduceScatter:
        return comm_->reduceScatterMean(from, in.numElements(), to,
                                        out.numElements(), in.dtype, error);
      case artifact::Kernel::AllGather:
      case artifact::Kernel::Unshard:
        return comm_->allGather(from, in.numElements(), to, out.numElements(),
                                in.dtype, error);
      default:
        return comm_->allReduceMean(from, to, in.numElements(), in.dtype,
                                    error);
      }
    };
    bool ok;
    if (backend_->deviceIsHost() || comm_->takesDeviceMemory()) {
      ok = run(src, dst);
    } else {
      char *hostIn = commStaging_.data();
      char *hostOut = hostIn + in.bytes;
      ok = backend_->copyFromDevice(hostIn, src, in.bytes, error) &&
           run(hostIn, hostOut) &&
           backend_->copyToDevice(dst, hostOut, out.bytes, error);
    }
    const char *name = artifact::kernelName(kernel);
    if (trace_)
      trace_->add(in.name,
                  kernel == artifact::Kernel::AllReduce       ? "all-reduce"
                  : kernel == artifact::Kernel::ReduceScatter ? "reduce-scatter"
                                                              : "all-gather",
                  Lane::Comm, start, trace_->now(), in.bytes,
                  static_cast<int64_t>(index));
    if (!ok)
      error = "step " + std::to_string(index) + " (" + name + " of '" +
              in.name + "' over " + std::to_string(comm_->size()) +
              " ranks): " + error;
    return ok;
  });
}

bool Executor::issue(size_t index, const KernelContext &context) {
  const Plan &plan = artifact_.plan();
  const artifact::Step &step = plan.steps[index];
  for (uint32_t w : step.waits)
    backend_->wait(step.queue, w);
  bool ok;
  if (isTransfer_[index]) {
    ok = issueTransfer(index, context);
  } else if (artifact::isCollective(step.kernel)) {
    ok = issueCollective(index);
  } else {
    std::vector<TensorRef> ins, outs;
    for (uint32_t s : step.inputs)
      ins.push_back(ref(s));
    for (uint32_t s : step.outputs) {
      outs.push_back(ref(s));
      arena_.touch(plan.slots[s].offset, plan.slots[s].bytes);
    }
    ok = backend_->launch(step.queue, step, std::move(ins), std::move(outs),
                          context, labels_[index]);
  }
  if (waitedFor_[index])
    backend_->record(step.queue, static_cast<uint32_t>(index));
  return ok;
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
              npy::shapeString(s.shape) + ", got " + dtypeName(array.dtype) +
              " " + npy::shapeString(array.shape);
      return false;
    }
    // An empty array may have no storage at all.
    if (s.bytes > 0 && !backend_->copyToDevice(
                           deviceMemory(s), array.data.data(), s.bytes, error))
      return false;
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

bool Executor::run(std::string &error, const KernelContext &given,
                   int64_t through) {
  const Plan &plan = artifact_.plan();
  // A step's updates speculate unless the step before clipped.
  KernelContext context = given;
  context.rank = comm_->rank();
  bool updates = speculates_ && context.applyUpdates && through < 0;
  context.speculating = updates && !lastClipped_;
  runClipped_ = false;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (!inputSet_[i]) {
      const Slot &s = plan.slots[plan.inputs[i].slot];
      error = "input '" + plan.inputs[i].name + "' (" + dtypeName(s.dtype) +
              " " + npy::shapeString(s.shape) + ") was not given";
      return false;
    }
  }
  // Which SSD tensors CPU jobs of this run write back (all earlier runs'
  // writes are done: each run ends synchronized).
  cpuWrittenThisRun_.assign(plan.slots.size(), false);
  cpuLastWriteArea_ = -1;
  double runStart = trace_ ? trace_->now() : 0;
  size_t end = order_.size();
  if (through >= 0 && static_cast<size_t>(through) < position_.size())
    end = position_[through] + 1;
  for (size_t p = 0; p < end;) {
    size_t i = order_[p];
    if (through >= 0 && (i > static_cast<size_t>(through) || cpuJobAt_[p])) {
      // A fetch for a later step issued early, or a CPU job (updates).
      ++p;
      continue;
    }
    if (size_t job = cpuJobAt_[p]) {
      if (!issueCpuJob(cpuJobs_[job - 1], context))
        break; // The backend has the failure; synchronize reports it.
      p = cpuJobs_[job - 1].to;
      continue;
    }
    if (!issue(i, context))
      break;
    if (!overlap_ && isTransfer_[i] && !backend_->synchronize(error))
      break;
    ++p;
  }
  // Outputs, checkpoints and the next step see all work finished; after a
  // failure too, so nothing is still writing.
  bool ok = backend_->synchronize(error);
  if (trace_)
    trace_->add("run", "run", Lane::Run, runStart, trace_->now(), 0);
  if (updates) {
    lastSpeculated_ = context.speculating;
    lastClipped_ = runClipped_.load();
  }
  return ok;
}

bool Executor::getOutput(const std::string &name, npy::Array &array,
                         std::string &error) {
  const Plan &plan = artifact_.plan();
  for (const artifact::Binding &b : plan.outputs) {
    if (b.name != name)
      continue;
    const Slot &s = plan.slots[b.slot];
    array.dtype = s.dtype;
    array.shape = s.shape;
    array.data.resize(s.bytes);
    if (s.region == Region::Arena || s.region == Region::Params)
      return s.bytes == 0 ||
             backend_->copyFromDevice(array.data.data(), deviceMemory(s),
                                      s.bytes, error);
    return artifact_.readSlot(s, array.data.data(), error);
  }
  error = "the model has no output '" + name + "'";
  return false;
}

} // namespace strata::runtime
