// CpuBackend.h - The CPU backend: the "device" is host memory.
//
// Kernels and host copies run on the thread that issues them (a copy
// between two parts of the same memory gains nothing from a queue); SSD
// reads and writes each run on a worker thread, so they overlap the
// compute. Events on the issuing thread are complete when recorded; events
// on a worker are its job numbers.

#ifndef STRATA_RUNTIME_BACKENDS_CPU_CPUBACKEND_H
#define STRATA_RUNTIME_BACKENDS_CPU_CPUBACKEND_H

#include "runtime/artifact/Artifact.h"
#include "runtime/backends/Backend.h"
#include "runtime/backends/HostQueues.h"

#include <map>

namespace strata::runtime {

/// The registry's entry (Backend.h).
BackendEntry cpuBackendEntry();

class CpuBackend : public Backend {
public:
  const char *name() const override { return "cpu"; }
  bool deviceIsHost() const override { return true; }

  void *allocDevice(uint64_t bytes, std::string &error) override;
  void freeDevice(void *p) override;
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

private:
  void fail(const std::string &error);

  std::map<char *, artifact::AlignedBuffer> memory_;
  /// The SSD queues', the CPU optimizer queue's and the communication
  /// queue's workers (the CPU updates and the collectives run beside the
  /// "device" compute, as on a GPU machine); everything else runs on the
  /// issuing thread.
  HostQueues host_{[](Queue q) {
    return q == Queue::SsdRead || q == Queue::SsdWrite || q == Queue::Cpu ||
           q == Queue::Comm;
  }};
  bool failed_ = false;
  std::string error_;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_BACKENDS_CPU_CPUBACKEND_H
