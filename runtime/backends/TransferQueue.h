// TransferQueue.h - Transfers between the tiers, beside the compute.
//
// One worker thread runs jobs (host copies, SSD reads and writes) in the
// order they are submitted; the executor waits for a job only when a kernel
// needs its bytes. Jobs are numbered from 1; waiting for job n waits for
// every job before it too (first in, first out).

#ifndef STRATA_RUNTIME_EXEC_TRANSFERQUEUE_H
#define STRATA_RUNTIME_EXEC_TRANSFERQUEUE_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace strata::runtime {

class TransferQueue {
public:
  /// A job returns false with `error` set when the transfer failed.
  using Job = std::function<bool(std::string &error)>;

  TransferQueue();
  ~TransferQueue();
  TransferQueue(const TransferQueue &) = delete;
  TransferQueue &operator=(const TransferQueue &) = delete;

  /// Queues a job; returns its number.
  uint64_t submit(Job job);
  /// Waits until job `id` (and all before it) finished. False with the
  /// first failure's message once any job failed; later jobs are skipped.
  bool waitFor(uint64_t id, std::string &error);
  /// Waits for every job submitted so far.
  bool drain(std::string &error) { return waitFor(submitted_, error); }
  /// Jobs finished so far (a cheap check, no waiting).
  uint64_t finished() const;

private:
  void work();

  mutable std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Job> jobs_;
  uint64_t submitted_ = 0, finished_ = 0;
  bool stop_ = false, failed_ = false;
  std::string error_;
  std::thread worker_;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_EXEC_TRANSFERQUEUE_H
