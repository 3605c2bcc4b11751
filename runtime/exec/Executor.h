// Executor.h - Runs a plan's steps on a backend.
//
// The executor resolves slots to memory, issues the steps in issue order to
// the queues the plan gives them, turns the plan's waits into events, and
// keeps the budgets and traffic figures. It has no code path of its own for
// any machine: the backend (runtime/backends/Backend.h) runs the work.

#ifndef STRATA_RUNTIME_EXEC_EXECUTOR_H
#define STRATA_RUNTIME_EXEC_EXECUTOR_H

#include "runtime/artifact/Artifact.h"
#include "runtime/artifact/StepOrder.h"
#include "runtime/backends/Backend.h"
#include "runtime/backends/Trace.h"
#include "runtime/comm/Communicator.h"
#include "runtime/support/Npy.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime {

/// The device tier's arena, with the budget accounting a GPU's memory gets.
/// It records the highest byte any slot reaches, which must equal the
/// plan's arena size.
class DeviceArena {
public:
  /// Fails (false, `error`) when `bytes` exceeds `budget` or the backend
  /// has not that much device memory.
  bool reserve(Backend &backend, uint64_t bytes, uint64_t budget,
               std::string &error);
  void release();
  char *base() { return base_; }
  /// Records that [offset, offset + bytes) is in use; buffers are counted
  /// with the plan's padding (64 bytes, or 4 KiB with an SSD tier).
  void touch(uint64_t offset, uint64_t bytes) {
    bytes = (bytes + alignment_ - 1) / alignment_ * alignment_;
    peak_ = std::max(peak_, offset + bytes);
  }
  void setAlignment(uint64_t alignment) { alignment_ = alignment; }
  uint64_t peak() const { return peak_; }
  uint64_t size() const { return size_; }

private:
  Backend *backend_ = nullptr;
  char *base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t peak_ = 0;
  uint64_t alignment_ = artifact::kArenaAlignment;
};

struct ExecutorOptions {
  /// Device-memory budget in bytes; 0 means unlimited.
  uint64_t deviceBudget = 0;
  /// Run transfers between the tiers on their queues beside the compute,
  /// with the fetches the compiler scheduled ahead issued early. Off: every
  /// step is issued in program order and a transfer completes before the
  /// next step.
  bool overlapTransfers = true;
  /// The backend: "cpu", "async-test", "cuda" (see backendNames()).
  std::string backend = "cpu";
  /// The ranks of a data-parallel plan's collectives (null: this process
  /// alone). Must outlive the executor.
  comm::Communicator *communicator = nullptr;
};

class Executor {
public:
  explicit Executor(artifact::Artifact &artifact) : artifact_(artifact) {}
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Starts the backend, checks it can run every step, allocates the arena
  /// within the budget and puts the parameter region on the device.
  bool prepare(const ExecutorOptions &options, std::string &error);

  /// Copies an input in, checking its element type and shape.
  bool setInput(const std::string &name, const npy::Array &array,
                std::string &error);

  /// Runs every step; all inputs must have been set. `context` feeds the
  /// update kernels of training plans. Returns once all work is done.
  /// With `through` >= 0, only the steps up to that index and none of the
  /// CPU jobs: a training plan's forward pass, up to its loss, for
  /// evaluation (the steps after it are never waited for by those before,
  /// and the next full run starts from the same state).
  bool run(std::string &error, const KernelContext &context = KernelContext(),
           int64_t through = -1);

  /// Copies an output out.
  bool getOutput(const std::string &name, npy::Array &array,
                 std::string &error);

  /// The device's parameter region to the artifact's copy (before a
  /// checkpoint reads it), and back (after one was loaded into it). No-ops
  /// when the device is host memory.
  bool parametersToHost(std::string &error);
  bool parametersToDevice(std::string &error);

  /// Bytes moved so far on each link between the tiers.
  struct LinkBytes {
    uint64_t hostToDevice = 0, deviceToHost = 0;
    uint64_t ssdToDevice = 0, deviceToSsd = 0;
  };
  LinkBytes linkBytes() const {
    LinkBytes l = links_;
    l.ssdToDevice += redoStaged_[0].load();
    l.deviceToSsd += redoStaged_[1].load();
    return l;
  }
  /// Speculative updates undone and redone so far, after the norm showed
  /// that their step clipped (artifact::Speculation); whether the plan has
  /// any to redo.
  int64_t redoneUpdates() const { return redone_.load(); }
  bool speculates() const { return speculates_; }
  /// Whether the last run's updates speculated: they do unless the step
  /// before clipped (steps that clip tend to follow one another, and a
  /// step that clips pays for the speculation and the redo), and whether
  /// that run's step clipped.
  bool lastRunSpeculated() const { return lastSpeculated_; }
  bool lastRunClipped() const { return lastClipped_; }

  /// Records an event per step into `trace` (null: stop recording).
  void setTrace(Trace *trace);

  /// The highest arena offset any step touched: a check of the executor
  /// against the plan (equal by construction when it follows it), not a
  /// measurement of memory; Backend::deviceMemoryUse and the process's
  /// resident set are.
  uint64_t arenaPeak() const { return arena_.peak(); }
  /// Host memory the executor allocated beside the plan's regions: the
  /// staging buffers of SSD transfers and of CPU jobs' SSD operands.
  uint64_t stagingBytes() const {
    uint64_t bytes = staging_[0].size() + staging_[1].size();
    for (const artifact::AlignedBuffer &area : cpuStaging_)
      bytes += area.size();
    return bytes;
  }
  bool overlapsTransfers() const { return overlap_; }
  const Backend &backend() const { return *backend_; }

private:
  TensorRef ref(uint32_t slot);
  /// Device memory of an arena or parameter slot.
  char *deviceMemory(const artifact::Slot &slot);
  /// Gives step `index` to its queue; false once the backend failed.
  bool issue(size_t index, const KernelContext &context);
  bool issueTransfer(size_t index, const KernelContext &context);
  /// A collective step (all_reduce, reduce_scatter, all_gather) on the
  /// communication queue: in device memory where the device is host memory
  /// or the communicator takes device memory, else through a host buffer.
  bool issueCollective(size_t index);
  /// An operand of a CPU job on the SSD: its slot, where it is staged,
  /// whether the update writes it (it goes back), and the update's step.
  struct SsdOperand {
    uint32_t slot;
    uint64_t offset;
    bool written;
    size_t step;
    /// Whether the update reads it (a speculative update's keeps are only
    /// written); whether it belongs to a redo, staged only when the redo
    /// is needed.
    bool read = true, redo = false;
    /// Where it is on the SSD (speculation's alternating pairs, see
    /// flipKeep_): the location of `home` now; a speculative update writes
    /// its new values to the other one (`writeAlt`) and leaves its keep
    /// (`skip`) alone, the old values staying where they were.
    uint32_t home = 0;
    bool writeAlt = false, skip = false;
  };
  /// Where a slot's current value is on the SSD (its own offset, or its
  /// partner's while the pair is flipped); `alt`: the other one.
  uint64_t ssdOffset(uint32_t slot, bool alt) const;
  /// Makes every flipped pair's own slot current again (an SSD copy each),
  /// before the artifact's image is read.
  bool settleSpeculation(std::string &error);
  /// Gives a CPU job to the CPU queue. Its SSD operands are read into one
  /// of the staging areas (artifact::kCpuStagingAreas) on the SSD read
  /// queue ahead of it and written back on the SSD write queue after it,
  /// so that one job's reads, the previous ones' updates and write-backs
  /// overlap.
  bool issueCpuJob(const artifact::CpuJobSpan &job,
                   const KernelContext &context);
  /// Reads or writes back a CPU job's SSD operands (on an SSD queue).
  bool stageCpuJob(const std::vector<SsdOperand> &operands, char *area,
                   bool read, const std::vector<size_t> &idleRedos,
                   std::string &error);
  /// An SSD transfer (run on the SSD queue's thread).
  bool ssdTransfer(size_t index, bool fetch, std::string &error);
  const artifact::Slot *inputSlot(const std::string &name) const;

  artifact::Artifact &artifact_;
  std::unique_ptr<Backend> backend_;
  comm::Communicator *comm_ = nullptr;
  std::unique_ptr<comm::Communicator> ownComm_;
  /// Host copies of an all_reduce's input and result (a device that is
  /// not host memory), sized for the largest; only the queue's thread
  /// uses them.
  std::vector<char> commStaging_;
  DeviceArena arena_;
  /// The parameter region on the device (the artifact's own memory when
  /// the device is host memory).
  char *params_ = nullptr;
  bool ownsParams_ = false;
  bool hostRegistered_ = false;
  std::vector<bool> inputSet_;
  LinkBytes links_;
  Trace *trace_ = nullptr;

  bool overlap_ = true;
  /// The order steps are issued in, their labels, whether each moves data
  /// between tiers, and whether some step waits for it (it records an
  /// event).
  std::vector<size_t> order_;
  /// Each step's position in order_.
  std::vector<size_t> position_;
  std::vector<StepLabel> labels_;
  /// The CPU jobs (optimizer updates on host memory, artifact::cpuJobs)
  /// in order_, and the position each starts at (cpuJobAt_[p]: the job's
  /// index + 1, 0 where none starts).
  std::vector<artifact::CpuJobSpan> cpuJobs_;
  std::vector<size_t> cpuJobAt_;
  /// The staging areas CPU jobs' SSD operands go through, taken in turn
  /// (artifact::kCpuStagingAreas), and the events of each (after the
  /// plan's steps' own): read into, updated, written back.
  artifact::AlignedBuffer cpuStaging_[artifact::kCpuStagingAreas];
  size_t cpuStagingAreas_ = 2, cpuStagingNext_ = 0;
  /// The SSD slots CPU jobs of the current run write back, and the
  /// staging area of the latest job that writes any (-1: none yet).
  std::vector<bool> cpuWrittenThisRun_;
  /// Counted on the CPU and SSD queues: redone updates, and the SSD bytes
  /// staged for them (read, written).
  std::atomic<int64_t> redone_{0};
  std::atomic<uint64_t> redoStaged_[2] = {{0}, {0}};
  bool speculates_ = false, lastSpeculated_ = false, lastClipped_ = false;
  /// A tensor on the SSD that only a speculative update and its redo touch
  /// alternates with its keep, also on the SSD: the speculative update
  /// writes its result to whichever of the two is not current, so that the
  /// old values stay where they are; a step that does not clip then only
  /// flips which one is current. flipKeep_[slot]: the keep of such a
  /// tensor (-1: none); flipHome_[keep]: the tensor; flipped_[slot]: the
  /// keep is current (set on the SSD queues, read there and by
  /// settleSpeculation after a synchronise).
  std::vector<int64_t> flipKeep_, flipHome_;
  std::unique_ptr<std::atomic<bool>[]> flipped_;
  /// Set on the CPU queue when a redo finds its scale is not 1.
  std::atomic<bool> runClipped_{false};
  int cpuLastWriteArea_ = -1;
  uint32_t stagedEvent(int what, size_t area) const {
    return static_cast<uint32_t>(artifact_.plan().steps.size() +
                                 what * artifact::kCpuStagingAreas + area);
  }
  std::vector<bool> isTransfer_, waitedFor_;
  /// Host staging for SSD transfers when the device is not host memory:
  /// one buffer per SSD queue.
  artifact::AlignedBuffer staging_[2];
  /// The memory SSD transfers go to and from (the arena when it is host
  /// memory, the staging areas), registered with the SSD store; released
  /// before that memory is.
  tiers::SsdStore::Registration ssdMemory_;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_EXEC_EXECUTOR_H
