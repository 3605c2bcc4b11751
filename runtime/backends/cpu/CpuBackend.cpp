// CpuBackend.cpp - The CPU backend: the "device" is host memory.

#include "runtime/backends/cpu/CpuBackend.h"
#include "runtime/backends/Trace.h"
#include "runtime/backends/cpu/Kernels.h"

#include <cstring>

namespace strata::runtime {

BackendEntry cpuBackendEntry() {
  return {"cpu", [](std::string &) -> std::unique_ptr<Backend> {
            return std::make_unique<CpuBackend>();
          }};
}

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

bool CpuBackend::copyFromDevice(void *host, const void *device, uint64_t bytes,
                                std::string &) {
  if (bytes)
    std::memcpy(host, device, bytes);
  return true;
}

void CpuBackend::setEventCount(size_t events) { host_.setEventCount(events); }

void CpuBackend::fail(const std::string &error) {
  if (!failed_) {
    failed_ = true;
    error_ = error;
  }
}

bool CpuBackend::launch(Queue, const artifact::Step &step,
                        std::vector<TensorRef> inputs,
                        std::vector<TensorRef> outputs,
                        const KernelContext &context, const StepLabel &label) {
  if (failed_)
    return false;
  double start = trace_ ? trace_->now() : 0;
  std::string error;
  bool ok = cpu::runKernel(step, inputs, outputs, context, error);
  if (trace_)
    trace_->add(label.target, artifact::kernelName(step.kernel), Lane::Compute,
                start, trace_->now(), label.bytes,
                static_cast<int64_t>(label.index));
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
                trace_->now(), bytes, static_cast<int64_t>(label.index));
  return true;
}

bool CpuBackend::hostTask(Queue queue, HostTask task) {
  if (failed_)
    return false;
  if (host_.onHost(queue)) {
    host_.submit(queue, std::move(task));
    return true;
  }
  std::string error;
  if (!task(error))
    fail(error);
  return !failed_;
}

void CpuBackend::record(Queue queue, uint32_t event) {
  // Work on the issuing thread is done when it returns.
  if (host_.onHost(queue))
    host_.record(queue, event);
  else
    host_.clear(event);
}

void CpuBackend::wait(Queue queue, uint32_t event) {
  std::string error;
  if (!host_.wait(queue, event, error))
    fail(error);
}

bool CpuBackend::synchronize(std::string &error) {
  std::string queueError;
  if (!host_.drain(queueError))
    fail(queueError);
  if (failed_)
    error = error_;
  return !failed_;
}

} // namespace strata::runtime
