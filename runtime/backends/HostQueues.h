// HostQueues.h - The queues a backend runs on host threads, and their
// events.
//
// Each such queue (the SSD reads and writes on every backend that is not
// the test backend) is one worker thread running its jobs first in, first
// out; an event recorded on it marks the last job given to it so far. A
// wait for such an event from another host queue is a job there; from any
// other queue it holds the issuing thread until the job is done (what that
// queue was given before keeps running). The CPU and CUDA backends share
// this; events recorded elsewhere are theirs to handle (`clear`).

#ifndef STRATA_RUNTIME_EXEC_HOSTQUEUES_H
#define STRATA_RUNTIME_EXEC_HOSTQUEUES_H

#include "runtime/backends/Backend.h"
#include "runtime/backends/TransferQueue.h"

#include <functional>
#include <memory>

namespace strata::runtime {

class HostQueues {
public:
  /// `onHost(q)`: whether queue q runs on a worker thread here.
  explicit HostQueues(std::function<bool(Queue)> onHost)
      : onHost_(std::move(onHost)) {}

  bool onHost(Queue q) const { return onHost_(q); }
  void setEventCount(size_t events) { marks_.assign(events, Mark()); }

  /// Gives `task` to `queue`'s worker (a host queue).
  void submit(Queue queue, Backend::HostTask task);
  /// Records `event` on host queue `queue`: it marks the last job so far.
  void record(Queue queue, uint32_t event);
  /// `event` was recorded on a queue that is not one of these.
  void clear(uint32_t event) { marks_[event] = Mark(); }
  /// Whether `event` marks a job of these queues.
  bool marks(uint32_t event) const { return marks_[event].queue >= 0; }
  /// Orders what `queue` is given next after the job `event` marks: a
  /// waiting job on another host queue, the issuing thread held otherwise.
  /// False with `error` when a job this waits for failed.
  bool wait(Queue queue, uint32_t event, std::string &error);
  /// Waits for every job; false with the first failure.
  bool drain(std::string &error);

private:
  TransferQueue *worker(Queue queue);

  std::function<bool(Queue)> onHost_;
  std::unique_ptr<TransferQueue> workers_[artifact::kNumQueues];
  uint64_t lastJob_[artifact::kNumQueues] = {};
  struct Mark {
    int queue = -1;
    uint64_t job = 0;
  };
  std::vector<Mark> marks_;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_EXEC_HOSTQUEUES_H
