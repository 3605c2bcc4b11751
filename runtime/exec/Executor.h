// Executor.h - Runs a forward plan on the CPU backend.

#ifndef STRATA_RUNTIME_EXEC_EXECUTOR_H
#define STRATA_RUNTIME_EXEC_EXECUTOR_H

#include "runtime/artifact/Artifact.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/support/Npy.h"

#include <string>

namespace strata::exec {

/// The device tier on the CPU backend: a host arena with the same budget
/// accounting a GPU's memory gets. It records the highest byte any slot
/// reaches, which must equal the plan's arena size.
class DeviceArena {
public:
  /// Fails (false, `error`) when `bytes` exceeds `budget`.
  bool reserve(uint64_t bytes, uint64_t budget, std::string &error);
  char *base() { return buffer_.data(); }
  void touch(uint64_t offset, uint64_t bytes) {
    peak_ = std::max(peak_, offset + bytes);
  }
  uint64_t peak() const { return peak_; }
  uint64_t size() const { return buffer_.size(); }

private:
  artifact::AlignedBuffer buffer_;
  uint64_t peak_ = 0;
};

struct ExecutorOptions {
  /// Device-memory budget in bytes; 0 means unlimited.
  uint64_t deviceBudget = 0;
};

class Executor {
public:
  explicit Executor(artifact::Artifact &artifact) : artifact_(artifact) {}

  /// Allocates the arena within the budget.
  bool prepare(const ExecutorOptions &options, std::string &error);

  /// Copies an input in, checking its element type and shape.
  bool setInput(const std::string &name, const npy::Array &array,
                std::string &error);

  /// Runs every step in order; all inputs must have been set. `context`
  /// feeds the update kernels of training plans.
  bool run(std::string &error,
           const cpu::KernelContext &context = cpu::KernelContext());

  /// Copies an output out.
  bool getOutput(const std::string &name, npy::Array &array,
                 std::string &error) const;

  /// Bytes moved between the SSD store and the device arena so far.
  uint64_t ssdBytesRead() const { return bytesRead_; }
  uint64_t ssdBytesWritten() const { return bytesWritten_; }

  uint64_t arenaPeak() const { return arena_.peak(); }

private:
  cpu::TensorRef ref(uint32_t slot);
  bool ssdTransfer(const artifact::Step &step, std::string &error);
  const artifact::Slot *inputSlot(const std::string &name) const;

  artifact::Artifact &artifact_;
  DeviceArena arena_;
  std::vector<bool> inputSet_;
  uint64_t bytesRead_ = 0;
  uint64_t bytesWritten_ = 0;
};

} // namespace strata::exec

#endif // STRATA_RUNTIME_EXEC_EXECUTOR_H
