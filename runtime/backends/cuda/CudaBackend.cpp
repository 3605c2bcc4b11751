// CudaBackend.cpp - The CUDA backend.

#include "runtime/backends/cuda/CudaBackend.h"
#include "runtime/backends/HostQueues.h"
#include "runtime/backends/Trace.h"
#include "runtime/backends/cuda/Kernels.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <map>
#include <set>

namespace strata::runtime {

namespace {

constexpr uint64_t kWorkspaceBytes = 32 << 20;

bool cudaOk(cudaError_t e, const std::string &what, std::string &error) {
  if (e == cudaSuccess)
    return true;
  error = what + ": " + cudaGetErrorString(e);
  return false;
}

bool onDevice(Queue q) {
  return q == Queue::Compute || q == Queue::HostToDevice ||
         q == Queue::DeviceToHost;
}

class CudaBackend : public Backend {
public:
  ~CudaBackend() override {
    std::string ignored;
    synchronize(ignored); // No host job is left to use an event.
    if (anchor_)
      cudaEventDestroy(anchor_);
    for (cudaEvent_t e : events_)
      if (e)
        cudaEventDestroy(e);
    for (cudaStream_t s : streams_)
      if (s)
        cudaStreamDestroy(s);
    if (launch_.workspace)
      cudaFree(launch_.workspace);
    if (launch_.errorFlag)
      cudaFree(launch_.errorFlag);
    if (launch_.cublasLt)
      cublasLtDestroy(static_cast<cublasLtHandle_t>(launch_.cublasLt));
  }

  bool start(std::string &error) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      error =
          std::string("no GPU: ") +
          (e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device found");
      return false;
    }
    // One GPU per local rank of a data-parallel run, in turn.
    device_ = localDevice(count);
    if (!cudaOk(cudaSetDevice(device_), "cudaSetDevice", error))
      return false;
    for (Queue q : {Queue::Compute, Queue::HostToDevice, Queue::DeviceToHost})
      if (!cudaOk(cudaStreamCreateWithFlags(&streams_[static_cast<size_t>(q)],
                                            cudaStreamNonBlocking),
                  "cudaStreamCreate", error))
        return false;
    cublasLtHandle_t handle;
    if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
      error = "no GPU: cuBLASLt cannot start";
      return false;
    }
    launch_.cublasLt = handle;
    launch_.stream = streams_[0];
    launch_.workspaceBytes = kWorkspaceBytes;
    return cudaOk(cudaMalloc(&launch_.workspace, kWorkspaceBytes),
                  "the cuBLASLt workspace", error) &&
           cudaOk(cudaMalloc(&launch_.errorFlag, sizeof(int)),
                  "the device error flag", error) &&
           cudaOk(cudaMemset(launch_.errorFlag, 0, sizeof(int)),
                  "the device error flag", error);
  }

  const char *name() const override { return "cuda"; }

  void setTrace(Trace *trace) override {
    flushTrace();
    if (anchor_)
      cudaEventDestroy(anchor_);
    anchor_ = nullptr; // Re-anchored on the new trace's clock.
    trace_ = trace;
  }

  bool supports(const artifact::Plan &plan, std::string &why) const override {
    std::set<std::string> missing;
    for (const artifact::Step &step : plan.steps) {
      // The executor runs collectives itself, through the communicator.
      if (artifact::isTransfer(plan, step) ||
          artifact::isCollective(step.kernel))
        continue;
      std::string reason;
      if (!cuda::supportsStep(plan, step, reason))
        missing.insert(reason);
    }
    for (const std::string &m : missing)
      why += (why.empty() ? "no kernel for " : ", ") + m;
    return missing.empty();
  }

  void *allocDevice(uint64_t bytes, std::string &error) override {
    void *p = nullptr;
    if (!cudaOk(cudaMalloc(&p, std::max<uint64_t>(bytes, 1)),
                "cudaMalloc of " + std::to_string(bytes) + " bytes", error))
      return nullptr;
    allocated_[p] = std::max<uint64_t>(bytes, 1);
    if (!cudaOk(cudaMemset(p, 0, bytes), "cudaMemset", error)) {
      freeDevice(p);
      return nullptr;
    }
    return p;
  }
  void freeDevice(void *p) override {
    allocated_.erase(p);
    cudaFree(p);
  }
  bool deviceMemoryUse(DeviceMemoryUse &use) const override {
    use = DeviceMemoryUse();
    // The backend's own blocks: the cuBLASLt workspace, the error flag.
    use.allocated = (launch_.workspace ? kWorkspaceBytes : 0) +
                    (launch_.errorFlag ? sizeof(int) : 0);
    for (const auto &[p, bytes] : allocated_)
      use.allocated += bytes;
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
      use.inUse = total - free;
      use.total = total;
    }
    return true;
  }
  bool registerHost(void *p, uint64_t bytes) override {
    return bytes > 0 &&
           cudaHostRegister(p, bytes, cudaHostRegisterDefault) == cudaSuccess;
  }
  void unregisterHost(void *p) override { cudaHostUnregister(p); }

  bool copyToDevice(void *device, const void *host, uint64_t bytes,
                    std::string &error) override {
    return bytes == 0 ||
           cudaOk(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice),
                  "copy to the device", error);
  }
  bool copyFromDevice(void *host, const void *device, uint64_t bytes,
                      std::string &error) override {
    return bytes == 0 ||
           cudaOk(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost),
                  "copy from the device", error);
  }

  void setEventCount(size_t events) override {
    for (cudaEvent_t e : events_)
      if (e)
        cudaEventDestroy(e);
    events_.assign(events, nullptr);
    deviceQueue_.assign(events, -1);
    host_.setEventCount(events);
  }

  bool launch(Queue queue, const artifact::Step &step,
              std::vector<TensorRef> inputs, std::vector<TensorRef> outputs,
              const KernelContext &context, const StepLabel &label) override {
    if (failed_)
      return false;
    cuda::LaunchContext l = launch_;
    l.stream = stream(queue);
    std::string error;
    cudaEvent_t begin = traceBegin(queue);
    if (!cuda::launchKernel(step, inputs, outputs, context, l, error))
      fail("step " + std::to_string(label.index) + " (" + label.text +
           "): " + error);
    traceEnd(queue, begin, label.target, artifact::kernelName(step.kernel),
             Lane::Compute, label.bytes, label.index);
    return !failed_;
  }

  bool copy(Queue queue, void *dst, const void *src, uint64_t bytes,
            bool toDevice, const StepLabel &label) override {
    if (failed_)
      return false;
    std::string error;
    cudaEvent_t begin = traceBegin(queue);
    if (bytes && !cudaOk(cudaMemcpyAsync(dst, src, bytes,
                                         toDevice ? cudaMemcpyHostToDevice
                                                  : cudaMemcpyDeviceToHost,
                                         stream(queue)),
                         "copy", error))
      fail("step " + std::to_string(label.index) + " (" + label.text +
           "): " + error);
    traceEnd(queue, begin, label.target, toDevice ? "h2d" : "d2h",
             Lane::HostCopy, bytes, label.index);
    return !failed_;
  }

  bool hostTask(Queue queue, HostTask task) override {
    if (failed_)
      return false;
    if (onDevice(queue)) { // Not used by plans; kept correct anyway.
      std::string error;
      if (!cudaOk(cudaStreamSynchronize(stream(queue)), "synchronize", error) ||
          !task(error))
        fail(error);
      return !failed_;
    }
    // The host queues' threads copy to and from this backend's device
    // (the current device is a thread's own).
    host_.submit(
        queue, [device = device_, task = std::move(task)](std::string &error) {
          return cudaOk(cudaSetDevice(device), "cudaSetDevice", error) &&
                 task(error);
        });
    return true;
  }

  void record(Queue queue, uint32_t event) override {
    if (!onDevice(queue)) {
      deviceQueue_[event] = -1;
      host_.record(queue, event);
      return;
    }
    deviceQueue_[event] = static_cast<int>(queue);
    host_.clear(event);
    std::string error;
    if (!events_[event] && !cudaOk(cudaEventCreateWithFlags(
                                       &events_[event], cudaEventDisableTiming),
                                   "cudaEventCreate", error)) {
      fail(error);
      return;
    }
    if (!cudaOk(cudaEventRecord(events_[event], stream(queue)),
                "cudaEventRecord", error))
      fail(error);
  }

  void wait(Queue queue, uint32_t event) override {
    if (failed_)
      return;
    std::string error;
    if (deviceQueue_[event] < 0) {
      // Host work (an SSD read): a job on another host queue, or the
      // issuing thread held until it is done (the GPU keeps running what
      // it was given).
      if (!host_.wait(queue, event, error))
        fail(error);
      return;
    }
    if (deviceQueue_[event] == static_cast<int>(queue))
      return; // Earlier on the same stream.
    cudaEvent_t e = events_[event];
    if (onDevice(queue)) {
      if (!cudaOk(cudaStreamWaitEvent(stream(queue), e, 0),
                  "cudaStreamWaitEvent", error))
        fail(error);
      return;
    }
    hostTask(queue, [e](std::string &error) {
      return cudaOk(cudaEventSynchronize(e), "waiting for the device", error);
    });
  }

  bool synchronize(std::string &error) override {
    for (cudaStream_t s : streams_) {
      std::string e;
      if (s && !cudaOk(cudaStreamSynchronize(s), "the GPU", e))
        fail(e);
    }
    {
      std::string e;
      if (!host_.drain(e))
        fail(e);
    }
    flushTrace();
    int flag = 0;
    std::string e;
    if (launch_.errorFlag &&
        cudaOk(cudaMemcpy(&flag, launch_.errorFlag, sizeof(int),
                          cudaMemcpyDeviceToHost),
               "the device error flag", e) &&
        flag) {
      fail(std::string("a kernel met bad data: ") +
           (flag & cuda::kIndexOutOfRange ? "a gather index out of range "
                                          : "") +
           (flag & cuda::kLabelOutOfRange ? "a label out of range " : "") +
           (flag & cuda::kIntegerDivisionByZero ? "integer division by zero "
                                                : "") +
           (flag & cuda::kGroupsOverlap
                ? "group_rows' masks holding at one position"
                : ""));
      cudaMemset(launch_.errorFlag, 0, sizeof(int));
    }
    if (failed_)
      error = error_;
    return !failed_;
  }

private:
  /// Every block allocDevice handed out, with its size.
  std::map<void *, uint64_t> allocated_;
  // Tracing: a pair of events around each kernel and copy while a trace is
  // on; their times become trace events (on the host clock, anchored at an
  // event recorded with the first of them) when the backend synchronizes.
  struct Traced {
    cudaEvent_t begin, end;
    std::string name;
    const char *category;
    Lane lane;
    uint64_t bytes;
    int64_t step;
  };
  cudaEvent_t traceBegin(Queue queue) {
    if (!trace_)
      return nullptr;
    if (!anchor_) {
      cudaEventCreate(&anchor_);
      cudaEventRecord(anchor_, stream(queue));
      cudaEventSynchronize(anchor_);
      anchorUs_ = trace_->now();
    }
    cudaEvent_t e = nullptr;
    cudaEventCreate(&e);
    cudaEventRecord(e, stream(queue));
    return e;
  }
  void traceEnd(Queue queue, cudaEvent_t begin, const std::string &name,
                const char *category, Lane lane, uint64_t bytes, size_t step) {
    if (!begin)
      return;
    cudaEvent_t e = nullptr;
    cudaEventCreate(&e);
    cudaEventRecord(e, stream(queue));
    traced_.push_back(
        {begin, e, name, category, lane, bytes, static_cast<int64_t>(step)});
  }
  void flushTrace() {
    for (Traced &t : traced_) {
      float a = 0, b = 0;
      if (trace_ && cudaEventElapsedTime(&a, anchor_, t.begin) == cudaSuccess &&
          cudaEventElapsedTime(&b, anchor_, t.end) == cudaSuccess)
        trace_->add(t.name, t.category, t.lane, anchorUs_ + a * 1e3,
                    anchorUs_ + b * 1e3, t.bytes, t.step);
      cudaEventDestroy(t.begin);
      cudaEventDestroy(t.end);
    }
    traced_.clear();
  }
  std::vector<Traced> traced_;
  cudaEvent_t anchor_ = nullptr;
  double anchorUs_ = 0;

  cudaStream_t stream(Queue q) {
    cudaStream_t s = streams_[static_cast<size_t>(q)];
    return s ? s : streams_[0];
  }
  void fail(const std::string &error) {
    if (!failed_) {
      failed_ = true;
      error_ = error;
    }
  }

  cudaStream_t streams_[artifact::kNumQueues] = {};
  /// The SSD (and CPU) queues: host threads.
  /// The GPU this backend runs on (localDevice).
  int device_ = 0;
  HostQueues host_{[](Queue q) { return !onDevice(q); }};
  /// The device queue (stream) each event was last recorded on, -1 when on
  /// a host queue (host_) or never.
  std::vector<int> deviceQueue_;
  std::vector<cudaEvent_t> events_;
  cuda::LaunchContext launch_;
  bool failed_ = false;
  std::string error_;
};

} // namespace

BackendEntry cudaBackendEntry() {
  return {"cuda", makeCudaBackend, /*preferred=*/true, /*built=*/true};
}

std::unique_ptr<Backend> makeCudaBackend(std::string &error) {
  auto backend = std::make_unique<CudaBackend>();
  if (!backend->start(error))
    return nullptr;
  return backend;
}

} // namespace strata::runtime
