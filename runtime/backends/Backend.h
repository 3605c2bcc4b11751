// Backend.h - What the executor needs from a machine: memory, work on
// queues, and the events that order the queues.
//
// The executor issues a plan's steps in issue order from one thread. Work
// given to a queue runs in the order given; `record` and `wait` order the
// queues with CUDA's event semantics: a wait binds to the latest record of
// the event made before the wait is issued (a wait on an event never
// recorded is satisfied at once). Errors are sticky: after the first
// failure every later call may do nothing, and `synchronize` reports it.
//
// Device memory is only for kernels and copies: on the CUDA backend and the
// async test backend the host cannot read it (the test backend faults when
// the host tries). The CPU backend's device memory is host memory.
//
// This header includes no CUDA or MLIR headers.

#ifndef STRATA_RUNTIME_BACKENDS_BACKEND_H
#define STRATA_RUNTIME_BACKENDS_BACKEND_H

#include "runtime/artifact/Plan.h"
#include "runtime/kernels/TensorRef.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime {

class Trace;
using artifact::Queue;

/// How a step is named in errors and traces, fixed at prepare.
struct StepLabel {
  size_t index = 0;
  /// "matmul -> 'h.0.attn'".
  std::string text;
  /// The slot named in traces.
  std::string target;
  uint64_t bytes = 0;
};

class Backend {
public:
  virtual ~Backend() = default;

  /// "cpu", "async-test" or "cuda".
  virtual const char *name() const = 0;
  /// False with `why` listing every kernel and element type of `plan` this
  /// backend cannot run, all at once, before anything runs.
  virtual bool supports(const artifact::Plan &plan, std::string &why) const;
  /// Whether device memory is ordinary host memory (the CPU backend).
  virtual bool deviceIsHost() const { return false; }

  // -- memory ----------------------------------------------------------------
  /// Zeroed device memory; null with `error` when there is not enough.
  virtual void *allocDevice(uint64_t bytes, std::string &error) = 0;
  virtual void freeDevice(void *p) = 0;
  /// Device memory really in use, as the machine counts it: `allocated`,
  /// what this backend holds now (its allocDevice blocks and its own
  /// workspaces); `inUse` and `total`, the device's memory in use by every
  /// process (the CUDA context included) and its size, where the driver
  /// tells (0 otherwise). False when the device is host memory: the
  /// process's resident set counts it.
  struct DeviceMemoryUse {
    uint64_t allocated = 0, inUse = 0, total = 0;
  };
  virtual bool deviceMemoryUse(DeviceMemoryUse &use) const { return false; }
  /// Asks for [p, p + bytes) of host memory to be usable by asynchronous
  /// copies (pinned); returns false when it is not (copies still work,
  /// slower).
  virtual bool registerHost(void *p, uint64_t bytes) {
    (void)p;
    (void)bytes;
    return true;
  }
  virtual void unregisterHost(void *p) { (void)p; }

  /// Synchronous copies between host memory and device memory; safe to call
  /// from host tasks (each waits only for itself).
  virtual bool copyToDevice(void *device, const void *host, uint64_t bytes,
                            std::string &error) = 0;
  virtual bool copyFromDevice(void *host, const void *device, uint64_t bytes,
                              std::string &error) = 0;

  // -- work
  // --------------------------------------------------------------------
  /// How many events the plan uses (step numbers index them).
  virtual void setEventCount(size_t events) = 0;
  /// Where kernels and copies record trace events (null: nowhere).
  virtual void setTrace(Trace *trace) { trace_ = trace; }

  /// A kernel on `queue` over device memory. False once a failure is known.
  virtual bool launch(Queue queue, const artifact::Step &step,
                      std::vector<TensorRef> inputs,
                      std::vector<TensorRef> outputs,
                      const KernelContext &context, const StepLabel &label) = 0;
  /// A copy on `queue` between host memory and device memory.
  virtual bool copy(Queue queue, void *dst, const void *src, uint64_t bytes,
                    bool toDevice, const StepLabel &label) = 0;
  /// Host work on `queue` (SSD I/O): returns false with an error to fail.
  using HostTask = std::function<bool(std::string &error)>;
  virtual bool hostTask(Queue queue, HostTask task) = 0;

  /// Marks the point in `queue` that `wait(other, event)` orders after.
  virtual void record(Queue queue, uint32_t event) = 0;
  /// Work given to `queue` after this waits for the event's latest record.
  virtual void wait(Queue queue, uint32_t event) = 0;
  /// Waits for all work given so far; false with the first failure.
  virtual bool synchronize(std::string &error) = 0;

protected:
  Trace *trace_ = nullptr;
};

/// A backend as the registry (runtime/exec/BackendRegistry.h) lists it:
/// each backend's folder (backends/<name>/) declares its entry, and the
/// registry lists every entry this build has, so adding a backend is a
/// folder and a line.
struct BackendEntry {
  /// What --backend and STRATA_BACKEND say: "cpu".
  const char *name;
  /// Makes it; null with `error` when it cannot start (no GPU: the
  /// driver's message).
  std::unique_ptr<Backend> (*make)(std::string &error);
  /// Whether it is the one to run on when the user names none and it
  /// starts (the CUDA backend on a machine with a GPU); the first entry
  /// that starts is the fallback.
  bool preferred = false;
  /// False where this build lacks it (CUDA without nvcc): `make` then says
  /// why, and backendNames leaves it out.
  bool built = true;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_BACKENDS_BACKEND_H
