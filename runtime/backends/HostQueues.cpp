// HostQueues.cpp - The queues a backend runs on host threads.

#include "runtime/backends/HostQueues.h"

namespace strata::runtime {

TransferQueue *HostQueues::worker(Queue queue) {
  auto &w = workers_[static_cast<size_t>(queue)];
  if (!w)
    w = std::make_unique<TransferQueue>();
  return w.get();
}

void HostQueues::submit(Queue queue, Backend::HostTask task) {
  lastJob_[static_cast<size_t>(queue)] = worker(queue)->submit(std::move(task));
}

void HostQueues::record(Queue queue, uint32_t event) {
  auto q = static_cast<size_t>(queue);
  // Nothing given to the queue yet: there is nothing to wait for.
  marks_[event] = lastJob_[q] ? Mark{static_cast<int>(q), lastJob_[q]} : Mark();
}

bool HostQueues::wait(Queue queue, uint32_t event, std::string &error) {
  Mark m = marks_[event];
  if (m.queue < 0 || m.queue == static_cast<int>(queue))
    return true; // Nothing, or earlier on the same first-in-first-out queue.
  TransferQueue *other = workers_[m.queue].get();
  if (!onHost(queue))
    return other->waitFor(m.job, error);
  uint64_t job = m.job;
  submit(queue, [other, job](std::string &error) {
    return other->waitFor(job, error);
  });
  return true;
}

bool HostQueues::drain(std::string &error) {
  bool ok = true;
  for (auto &w : workers_) {
    std::string e;
    if (w && !w->drain(e) && ok) {
      error = e;
      ok = false;
    }
  }
  return ok;
}

} // namespace strata::runtime
