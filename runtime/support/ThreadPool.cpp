// ThreadPool.cpp - A fixed pool of worker threads (see ThreadPool.h for why
// it is correct).

#include "runtime/support/ThreadPool.h"
#include "runtime/support/Checked.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>

namespace strata {

struct ThreadPool::Job {
  Job(int64_t chunks, const std::function<void(int64_t)> &task)
      : chunks(chunks), task(task) {}
  const int64_t chunks;
  const std::function<void(int64_t)> &task;
  std::atomic<int64_t> next{0}; // The next chunk index to claim.
  // Guarded by the pool's mutex_.
  int64_t finished = 0; // Chunks whose call has returned (or thrown).
  int joined = 0;       // Workers inside this job.
  std::exception_ptr error;
};

namespace {
/// The pool whose job the current thread is running, if any: a nested run()
/// goes inline instead of waiting for workers that are all busy with (or
/// blocked behind) the outer job.
thread_local const ThreadPool *insideJobOf = nullptr;
} // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i)
    workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

void ThreadPool::run(int64_t chunks, const std::function<void(int64_t)> &task) {
  if (chunks <= 0)
    return;
  if (workers_.empty() || chunks == 1 || insideJobOf) {
    for (int64_t c = 0; c < chunks; ++c)
      task(c);
    return;
  }
  std::unique_lock<std::mutex> runLock(runMutex_);
  Job job(chunks, task);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    ++generation_;
  }
  wake_.notify_all();
  insideJobOf = this;
  drain(job, /*worker=*/false);
  insideJobOf = nullptr;
  std::unique_lock<std::mutex> lock(mutex_);
  // Every chunk is claimed: workers that have not joined yet must not.
  job_ = nullptr;
  done_.wait(lock, [&] { return job.finished == chunks && job.joined == 0; });
  lock.unlock();
  if (job.error)
    std::rethrow_exception(job.error);
}

void ThreadPool::drain(Job &job, bool worker) {
  int64_t finished = 0;
  std::exception_ptr error;
  while (true) {
    int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.chunks)
      break;
    try {
      job.task(c);
    } catch (...) {
      if (!error)
        error = std::current_exception();
    }
    ++finished;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  job.finished += finished;
  if (error && !job.error)
    job.error = error;
  if (worker)
    --job.joined;
  if (job.finished == job.chunks && job.joined == 0)
    done_.notify_all();
}

void ThreadPool::work() {
  insideJobOf = this;
  uint64_t seen = 0;
  while (true) {
    Job *job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        return stop_ || (job_ != nullptr && generation_ != seen);
      });
      if (stop_)
        return;
      seen = generation_;
      job = job_;
      ++job->joined;
    }
    drain(*job, /*worker=*/true);
  }
}

namespace {
int configuredThreads() {
  if (const char *env = std::getenv("STRATA_NUM_THREADS")) {
    int64_t n = 0;
    if (parseInt64(env, n, 1, 4096))
      return static_cast<int>(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}
} // namespace

ThreadPool &defaultPool() {
  static ThreadPool pool(configuredThreads());
  return pool;
}

int numThreads() { return defaultPool().size(); }

void parallelFor(ThreadPool &pool, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int threads = pool.size();
  int64_t chunks = std::min<int64_t>((n - 1) / grain + 1, threads * 4);
  if (chunks <= 1 || threads == 1) {
    body(0, n);
    return;
  }
  int64_t per = (n - 1) / chunks + 1;
  pool.run(chunks, [&](int64_t c) {
    int64_t begin = c * per, end = std::min(n, begin + per);
    if (begin < end)
      body(begin, end);
  });
}

} // namespace strata
