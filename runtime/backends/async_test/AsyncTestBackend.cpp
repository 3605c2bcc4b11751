// AsyncTestBackend.cpp - A backend that behaves like a GPU, on the CPU.

#include "runtime/backends/async_test/AsyncTestBackend.h"
#include "runtime/backends/Trace.h"
#include "runtime/backends/cpu/Kernels.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sys/mman.h>
#include <thread>

namespace strata::runtime {

BackendEntry asyncTestBackendEntry() {
  return {"async-test", [](std::string &) -> std::unique_ptr<Backend> {
            return std::make_unique<AsyncTestBackend>();
          }};
}

AsyncTestBackend::AsyncTestBackend() {
  if (const char *seed = std::getenv("STRATA_ASYNC_CHAOS")) {
    char *end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(seed, &end, 10);
    if (errno == 0 && end != seed && *end == '\0')
      chaosSeed_ = v;
    else
      std::fprintf(stderr,
                   "strata: warning: STRATA_ASYNC_CHAOS='%s' is not a number; "
                   "using seed 1\n",
                   seed);
  }
}

AsyncTestBackend::~AsyncTestBackend() {
  std::string ignored;
  synchronize(ignored);
  for (auto &w : workers_)
    w.reset();
  for (Allocation &a : memory_)
    munmap(a.address, a.reserved);
}

void *AsyncTestBackend::allocDevice(uint64_t bytes, std::string &error) {
  Allocation a;
  a.reserved = artifact::alignUp(std::max<uint64_t>(bytes, 1), 4096);
  // Addresses nobody can read or write: the host faulting on one is the
  // point.
  void *address = mmap(nullptr, a.reserved, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  a.storage = artifact::AlignedBuffer(bytes);
  if (address == MAP_FAILED || !a.storage.valid()) {
    if (address != MAP_FAILED)
      munmap(address, a.reserved);
    error = "cannot allocate " + std::to_string(bytes) +
            " bytes of (test) device memory";
    return nullptr;
  }
  a.address = static_cast<char *>(address);
  std::lock_guard<std::mutex> lock(memoryMutex_);
  memory_.push_back(std::move(a));
  return memory_.back().address;
}

bool AsyncTestBackend::deviceMemoryUse(DeviceMemoryUse &use) const {
  std::lock_guard<std::mutex> lock(memoryMutex_);
  use = DeviceMemoryUse();
  for (const Allocation &a : memory_)
    use.allocated += a.storage.size();
  use.inUse = use.allocated;
  return true;
}

void AsyncTestBackend::freeDevice(void *p) {
  std::lock_guard<std::mutex> lock(memoryMutex_);
  for (size_t i = 0; i < memory_.size(); ++i)
    if (memory_[i].address == p) {
      munmap(memory_[i].address, memory_[i].reserved);
      memory_.erase(memory_.begin() + i);
      return;
    }
}

char *AsyncTestBackend::translate(const void *device, uint64_t bytes) {
  auto p = static_cast<const char *>(device);
  std::lock_guard<std::mutex> lock(memoryMutex_);
  for (Allocation &a : memory_) {
    uint64_t size = a.storage.size();
    if (p >= a.address && p <= a.address + size &&
        bytes <= size - static_cast<uint64_t>(p - a.address))
      return a.storage.data() + (p - a.address);
  }
  return nullptr;
}

bool AsyncTestBackend::copyToDevice(void *device, const void *host,
                                    uint64_t bytes, std::string &error) {
  char *real = translate(device, bytes);
  if (!real || translate(host, 0)) {
    error = "copy to device: the destination is not device memory or the "
            "source is";
    return false;
  }
  if (bytes)
    std::memcpy(real, host, bytes);
  return true;
}

bool AsyncTestBackend::copyFromDevice(void *host, const void *device,
                                      uint64_t bytes, std::string &error) {
  char *real = translate(device, bytes);
  if (!real || translate(host, 0)) {
    error = "copy from device: the source is not device memory or the "
            "destination is";
    return false;
  }
  if (bytes)
    std::memcpy(host, real, bytes);
  return true;
}

void AsyncTestBackend::setEventCount(size_t events) {
  std::lock_guard<std::mutex> lock(eventMutex_);
  recorded_.assign(events, 0);
  reached_.assign(events, 0);
}

void AsyncTestBackend::fail(const std::string &error) {
  std::lock_guard<std::mutex> lock(eventMutex_);
  if (!failed_) {
    error_ = error;
    failed_ = true;
  }
  eventReached_.notify_all(); // Waiters give up rather than hang.
}

void AsyncTestBackend::delay(Queue queue) {
  if (chaosSeed_ == 0)
    return;
  thread_local std::mt19937_64 rng(chaosSeed_ * 7919 +
                                   static_cast<uint64_t>(queue));
  if (rng() % 3 == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
}

void AsyncTestBackend::submit(Queue queue, TransferQueue::Job job) {
  auto &w = workers_[static_cast<size_t>(queue)];
  if (!w)
    w = std::make_unique<TransferQueue>();
  w->submit([this, queue, job = std::move(job)](std::string &error) {
    delay(queue);
    if (failed_)
      return true; // Skipped: the first failure is what is reported.
    if (job(error))
      return true;
    fail(error);
    return false;
  });
}

bool AsyncTestBackend::launch(Queue queue, const artifact::Step &step,
                              std::vector<TensorRef> inputs,
                              std::vector<TensorRef> outputs,
                              const KernelContext &context,
                              const StepLabel &label) {
  if (failed_)
    return false;
  submit(queue,
         [this, &step, inputs = std::move(inputs), outputs = std::move(outputs),
          context, &label](std::string &error) mutable {
           for (auto *list : {&inputs, &outputs})
             for (TensorRef &t : *list) {
               uint64_t bytes =
                   static_cast<uint64_t>(t.numElements()) * dtypeSize(t.dtype);
               char *real = translate(t.data, bytes);
               if (!real) {
                 error = "step " + std::to_string(label.index) + " (" +
                         label.text + "): an operand is not device memory";
                 return false;
               }
               t.data = real;
             }
           double start = trace_ ? trace_->now() : 0;
           bool ok = cpu::runKernel(step, inputs, outputs, context, error);
           if (trace_)
             trace_->add(label.target, artifact::kernelName(step.kernel),
                         Lane::Compute, start, trace_->now(), label.bytes,
                         static_cast<int64_t>(label.index));
           if (!ok)
             error = "step " + std::to_string(label.index) + " (" + label.text +
                     "): " + error;
           return ok;
         });
  return true;
}

bool AsyncTestBackend::copy(Queue queue, void *dst, const void *src,
                            uint64_t bytes, bool toDevice,
                            const StepLabel &label) {
  if (failed_)
    return false;
  submit(queue, [=, &label](std::string &error) {
    double start = trace_ ? trace_->now() : 0;
    bool ok = toDevice ? copyToDevice(dst, src, bytes, error)
                       : copyFromDevice(dst, src, bytes, error);
    if (trace_)
      trace_->add(label.target, toDevice ? "h2d" : "d2h", Lane::HostCopy, start,
                  trace_->now(), bytes, static_cast<int64_t>(label.index));
    if (!ok)
      error = "step " + std::to_string(label.index) + " (" + label.text +
              "): " + error;
    return ok;
  });
  return true;
}

bool AsyncTestBackend::hostTask(Queue queue, HostTask task) {
  if (failed_)
    return false;
  submit(queue, std::move(task));
  return true;
}

void AsyncTestBackend::record(Queue queue, uint32_t event) {
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(eventMutex_);
    generation = ++recorded_[event];
  }
  submit(queue, [this, event, generation](std::string &) {
    std::lock_guard<std::mutex> lock(eventMutex_);
    reached_[event] = std::max(reached_[event], generation);
    eventReached_.notify_all();
    return true;
  });
}

void AsyncTestBackend::wait(Queue queue, uint32_t event) {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(eventMutex_);
    target = recorded_[event]; // The latest record at the time of the call.
  }
  if (target == 0)
    return; // Never recorded: CUDA treats it as complete.
  submit(queue, [this, event, target](std::string &) {
    std::unique_lock<std::mutex> lock(eventMutex_);
    eventReached_.wait(lock,
                       [&] { return reached_[event] >= target || failed_; });
    return true;
  });
}

bool AsyncTestBackend::synchronize(std::string &error) {
  for (auto &w : workers_) {
    std::string ignored;
    if (w)
      w->drain(ignored);
  }
  if (failed_) {
    std::lock_guard<std::mutex> lock(eventMutex_);
    error = error_;
    return false;
  }
  return true;
}

} // namespace strata::runtime
