// ThreadPool.h - A fixed pool of worker threads for data-parallel kernels.

#ifndef STRATA_RUNTIME_SUPPORT_THREADPOOL_H
#define STRATA_RUNTIME_SUPPORT_THREADPOOL_H

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata {

/// Streaming kernels split their elements across threads in chunks of at
/// least this many; the compiler's cost model charges a parallel launch to
/// kernels larger than it (passes/analysis/CostModel.cpp).
constexpr int64_t kParallelGrain = 16384;

/// A fixed set of worker threads that run one job at a time: `run(chunks,
/// task)` calls `task(c)` exactly once for every c in [0, chunks), on the
/// caller and the workers, and returns when every call has returned.
///
/// Why it is correct (the earlier pool was not): every job's state (its
/// task, chunk count, next-chunk counter and completion counts) lives in a
/// `Job` of its own, never in fields the next job reuses. A worker touches a
/// job only between joining it and leaving it, both under `mutex_`, and only
/// while `job_` points at it; the caller withdraws `job_` once every chunk is
/// claimed and returns only when every chunk has finished and every worker
/// that joined has left. So no worker can take a chunk index of one job and
/// run it against another, and no call outlives its job. (The earlier pool
/// kept `task_`, `chunks_`, `next_` and `pending_` in the pool: a worker still
/// looping in the previous job's drain could take an index from the old
/// counter after `run()` had installed the next job's count but before it
/// reset the counter, so a chunk ran twice, `pending_` went past zero to -1,
/// and the caller's wait for `pending_ == 0` never ended.)
///
/// A task that throws does not stop the other chunks; the first exception is
/// rethrown from `run()` after they finish. `run()` called from inside a job
/// (a kernel body calling parallelFor) runs its chunks inline on the calling
/// thread. Several threads may call `run()`; their jobs take turns.
class ThreadPool {
public:
  /// `threads` counts the caller: a pool of 1 runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// Threads a job runs on, the caller included.
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t chunks, const std::function<void(int64_t)> &task);

private:
  struct Job;
  void work();
  /// Runs chunks of `job` until none is left, then records what it finished.
  /// `worker`: whether the caller is a worker that joined the job.
  void drain(Job &job, bool worker);

  std::vector<std::thread> workers_;
  std::mutex runMutex_; // One job at a time.
  std::mutex mutex_;    // Guards everything below and each Job's counts.
  std::condition_variable wake_, done_;
  Job *job_ = nullptr;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

/// The process's pool; its size follows STRATA_NUM_THREADS, else the number
/// of CPUs.
ThreadPool &defaultPool();

/// Runs `body(begin, end)` over [0, n) split into contiguous chunks of at
/// least `grain` items, on the calling thread and the pool's workers. Small
/// ranges run inline.
void parallelFor(ThreadPool &pool, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body);
inline void parallelFor(int64_t n, int64_t grain,
                        const std::function<void(int64_t, int64_t)> &body) {
  parallelFor(defaultPool(), n, grain, body);
}

/// Threads parallelFor uses (including the caller).
int numThreads();

} // namespace strata

#endif // STRATA_RUNTIME_SUPPORT_THREADPOOL_H
