// Executor.h - Runs a forward plan on the CPU backend.

#ifndef STRATA_RUNTIME_EXEC_EXECUTOR_H
#define STRATA_RUNTIME_EXEC_EXECUTOR_H

#include "runtime/artifact/Artifact.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/exec/Trace.h"
#include "runtime/exec/TransferQueue.h"
#include "runtime/support/Npy.h"

#include <memory>
#include <string>
#include <vector>

namespace strata::exec {

/// The device tier on the CPU backend: a host arena with the same budget
/// accounting a GPU's memory gets. It records the highest byte any slot
/// reaches, which must equal the plan's arena size.
class DeviceArena {
public:
  /// Fails (false, `error`) when `bytes` exceeds `budget`.
  bool reserve(uint64_t bytes, uint64_t budget, std::string &error);
  char *base() { return buffer_.data(); }
  /// Records that [offset, offset + bytes) is in use; buffers are counted
  /// with the plan's padding (64 bytes, or 4 KiB with an SSD tier).
  void touch(uint64_t offset, uint64_t bytes) {
    bytes = (bytes + alignment_ - 1) / alignment_ * alignment_;
    peak_ = std::max(peak_, offset + bytes);
  }
  void setAlignment(uint64_t alignment) { alignment_ = alignment; }
  uint64_t peak() const { return peak_; }
  uint64_t size() const { return buffer_.size(); }

private:
  artifact::AlignedBuffer buffer_;
  uint64_t peak_ = 0;
  uint64_t alignment_ = artifact::kArenaAlignment;
};

struct ExecutorOptions {
  /// Device-memory budget in bytes; 0 means unlimited.
  uint64_t deviceBudget = 0;
  /// Run transfers between the tiers on a queue beside the compute, with
  /// the fetches the compiler scheduled ahead issued early. Off: every
  /// transfer runs in program order and completes before the next step.
  bool overlapTransfers = true;
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

  /// Bytes moved so far on each link between the tiers.
  struct LinkBytes {
    uint64_t hostToDevice = 0, deviceToHost = 0;
    uint64_t ssdToDevice = 0, deviceToSsd = 0;
  };
  const LinkBytes &linkBytes() const { return links_; }

  /// Records an event per step into `trace` (null: stop recording).
  void setTrace(Trace *trace) { trace_ = trace; }

  uint64_t arenaPeak() const { return arena_.peak(); }
  bool overlapsTransfers() const { return overlap_; }

private:
  cpu::TensorRef ref(uint32_t slot);
  bool runSteps(std::string &error, const cpu::KernelContext &context);
  /// Starts step `index`, a transfer (see artifact::isTransfer): on the
  /// queue, or here for host copies and without overlap; false with
  /// `error` when one run here fails.
  bool submitTransfer(size_t index, const cpu::KernelContext &context,
                      std::string &error);
  /// Waits for the queued transfers step `index` conflicts with.
  bool waitForConflicts(size_t index, std::string &error);
  /// Runs one transfer (on the queue's thread).
  bool transfer(size_t index, std::string &error);
  const artifact::Slot *inputSlot(const std::string &name) const;

  artifact::Artifact &artifact_;
  DeviceArena arena_;
  std::vector<bool> inputSet_;
  LinkBytes links_;
  Trace *trace_ = nullptr;

  bool overlap_ = true;
  /// SSD reads (fetches) and writes (write-backs, swap-outs) each on their
  /// own queue, so a fetch never waits behind unrelated write-backs.
  enum { kReads = 0, kWrites = 1 };
  std::unique_ptr<TransferQueue> queues_[2];
  /// Whether each step moves data between tiers (artifact::isTransfer).
  std::vector<bool> isTransfer_;
  /// Arena bytes each step reads and writes.
  std::vector<std::vector<artifact::ArenaRange>> reads_, writes_;
  /// Fetches to issue after step i - 1 (index 0: at the start).
  std::vector<std::vector<size_t>> issueAt_;
  struct Queued {
    uint64_t id;
    size_t step;
    int queue;
  };
  std::vector<Queued> queued_;
};

} // namespace strata::exec

#endif // STRATA_RUNTIME_EXEC_EXECUTOR_H
