// AsyncTestBackend.h - A backend that behaves like a GPU, on the CPU.
//
// It runs the CPU kernels but keeps everything a GPU makes asynchronous
// asynchronous, so the ordering logic (the plan's queues and waits, the
// executor's events) is tested on every machine:
//
//   * one worker thread per queue, compute included;
//   * device memory the host cannot touch: its addresses lie in a reserved,
//     inaccessible range and are translated to real storage only inside
//     the queues' jobs, so a host access faults, and a kernel or copy given
//     an address that is not device memory fails;
//   * CUDA's event semantics: a wait binds to the latest record made before
//     it is issued; a wait on an event never recorded passes at once;
//   * random delays before jobs (STRATA_ASYNC_CHAOS=SEED; 0 turns them off),
//     so a missing wait shows up as a wrong result, not as luck.

#ifndef STRATA_RUNTIME_BACKENDS_ASYNC_TEST_ASYNCTESTBACKEND_H
#define STRATA_RUNTIME_BACKENDS_ASYNC_TEST_ASYNCTESTBACKEND_H

#include "runtime/artifact/Artifact.h"
#include "runtime/backends/Backend.h"
#include "runtime/backends/TransferQueue.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace strata::runtime {

/// The registry's entry (Backend.h).
BackendEntry asyncTestBackendEntry();

class AsyncTestBackend : public Backend {
public:
  AsyncTestBackend();
  ~AsyncTestBackend() override;

  const char *name() const override { return "async-test"; }

  void *allocDevice(uint64_t bytes, std::string &error) override;
  void freeDevice(void *p) override;
  bool deviceMemoryUse(DeviceMemoryUse &use) const override;
  bool copyToDevice(void *device, const void *host, uint64_t bytes,
                    std::string &error) override;
  bool copyFromDevice(void *host, const void *device, uint64_t bytes,
                      std::string &error) override;

  void setEventCount(size_t events) override;
  bool launch(Queue queue, const artifact::Step &step,
              std::vector<TensorRef> inputs, std::vector<TensorRef> outputs,
              const KernelContext &context, const StepLabel &label) override;
  bool copy(Queue queue, void *dst, const void *src, uint64_t bytes,
            bool toDevice, const StepLabel &label) override;
  bool hostTask(Queue queue, HostTask task) override;
  void record(Queue queue, uint32_t event) override;
  void wait(Queue queue, uint32_t event) override;
  bool synchronize(std::string &error) override;

  /// The real storage behind `bytes` of device memory at `device`, or null
  /// when that is not (all) device memory.
  char *translate(const void *device, uint64_t bytes);

private:
  struct Allocation {
    char *address = nullptr; // Reserved, inaccessible.
    uint64_t reserved = 0;
    artifact::AlignedBuffer storage;
  };
  void submit(Queue queue, TransferQueue::Job job);
  void delay(Queue queue);
  void fail(const std::string &error);

  mutable std::mutex memoryMutex_;
  std::vector<Allocation> memory_;
  std::unique_ptr<TransferQueue> workers_[artifact::kNumQueues];

  /// Per event: records made (at issue) and records reached (on a queue).
  std::mutex eventMutex_;
  std::condition_variable eventReached_;
  std::vector<uint64_t> recorded_, reached_;
  std::atomic<bool> failed_{false};
  std::string error_;

  uint64_t chaosSeed_ = 1;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_BACKENDS_ASYNC_TEST_ASYNCTESTBACKEND_H
