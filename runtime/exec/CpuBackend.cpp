// CpuBackend.cpp - The CPU backend: the "device" is host memory.

#include "runtime/exec/CpuBackend.h"
#include "runtime/exec/Trace.h"

#include <cstring>

namespace strata::exec {

void *CpuBackend::allocDevice(uint64_t bytes, std::string &error) {
  artifact::AlignedBuffer buffer(bytes);
  if (!buffer.valid()) {
    error = "cannot allocate " + std::to_string(bytes) +
            " bytes of (host) device memory";
    return nullptr;
  }
  char *p = buffer.data();
  memory_.emplace(p, std::move(buffer));
  return p;
}

void CpuBackend::freeDevice(void *p) { memory_.erase(static_cast<char *>(p)); }

bool CpuBackend::copyToDevice(void *device, const void *host, uint64_t bytes,
                              std::string &) {
  if (bytes)
    std::memcpy(device, host, bytes);
  return true;
}

bool CpuBackend::copyFromDevice(void *host, const void *device,
                                uint64_t bytes, std::string &) {
  if (bytes)
    std::memcpy(host, device, bytes);
  return true;
}

void CpuBackend::setEventCount(size_t events) {
  events_.assign(events, Mark());
}

TransferQueue *CpuBackend::worker(Queue queue) {
  auto q = static_cast<size_t>(queue);
  if (!onWorker(queue))
    return nullptr;
  if (!workers_[q])
    workers_[q] = std::make_unique<TransferQueue>();
  return workers_[q].get();
}

void CpuBackend::fail(const std::string &error) {
  if (!failed_) {
    failed_ = true;
    error_ = error;
  }
}

bool CpuBackend::launch(Queue, const artifact::Step &step,
                        std::vector<cpu::TensorRef> inputs,
                        std::vector<cpu::TensorRef> outputs,
                        const cpu::KernelContext &context,
                        const StepLabel &label) {
  if (failed_)
    return false;
  double start = trace_ ? trace_->now() : 0;
  std::string error;
  bool ok = cpu::runKernel(step, inputs, outputs, context, error);
  if (trace_)
    trace_->add(label.target, artifact::kernelName(step.kernel),
                Lane::Compute, start, trace_->now(), label.bytes);
  if (!ok)
    fail("step " + std::to_string(label.index) + " (" + label.text +
         "): " + error);
  return ok;
}

bool CpuBackend::copy(Queue, void *dst, const void *src, uint64_t bytes,
                      bool toDevice, const StepLabel &label) {
  if (failed_)
    return false;
  double start = trace_ ? trace_->now() : 0;
  if (bytes)
    std::memcpy(dst, src, bytes);
  if (trace_)
    trace_->add(label.target, toDevice ? "h2d" : "d2h", Lane::HostCopy, start,
                trace_->now(), bytes);
  return true;
}

bool CpuBackend::hostTask(Queue queue, HostTask task) {
  if (failed_)
    return false;
  TransferQueue *w = worker(queue);
  if (!w) {
    std::string error;
    if (!task(error))
      fail(error);
    return !failed_;
  }
  lastJob_[static_cast<size_t>(queue)] = w->submit(std::move(task));
  return true;
}

void CpuBackend::record(Queue queue, uint32_t event) {
  Mark &m = events_[event];
  if (onWorker(queue) && workers_[static_cast<size_t>(queue)]) {
    m.queue = static_cast<int>(queue);
    m.job = lastJob_[static_cast<size_t>(queue)];
  } else {
    m.queue = -1; // Work on this thread is done when it returns.
  }
}

void CpuBackend::wait(Queue queue, uint32_t event) {
  Mark m = events_[event];
  if (m.queue < 0 || m.queue == static_cast<int>(queue) || m.job == 0)
    return; // Complete, or earlier on the same first-in-first-out queue.
  TransferQueue *other = workers_[m.queue].get();
  if (!onWorker(queue)) {
    std::string error;
    if (!other->waitFor(m.job, error))
      fail(error);
    return;
  }
  uint64_t job = m.job;
  lastJob_[static_cast<size_t>(queue)] = worker(queue)->submit(
      [other, job](std::string &error) { return other->waitFor(job, error); });
}

bool CpuBackend::synchronize(std::string &error) {
  for (auto &w : workers_) {
    std::string queueError;
    if (w && !w->drain(queueError))
      fail(queueError);
  }
  if (failed_)
    error = error_;
  return !failed_;
}

} // namespace strata::exec
