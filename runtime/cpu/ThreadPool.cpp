// ThreadPool.cpp - A fixed pool of worker threads.

#include "runtime/cpu/ThreadPool.h"
#include "runtime/support/Checked.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::cpu {

namespace {

class Pool {
public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i)
      workers_.emplace_back([this] { work(); });
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread &t : workers_)
      t.join();
  }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t chunks, const std::function<void(int64_t)> &task) {
    std::unique_lock<std::mutex> runLock(runMutex_); // One job at a time.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      chunks_ = chunks;
      next_.store(0);
      pending_ = chunks;
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    task_ = nullptr;
  }

private:
  void drain() {
    while (true) {
      int64_t c = next_.fetch_add(1);
      if (c >= chunks_)
        return;
      (*task_)(c);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0)
        done_.notify_all();
    }
  }

  void work() {
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_)
          return;
        seen = generation_;
        if (!task_)
          continue;
      }
      drain();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex runMutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)> *task_ = nullptr;
  int64_t chunks_ = 0;
  std::atomic<int64_t> next_{0};
  int64_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

int configuredThreads() {
  if (const char *env = std::getenv("STRATA_NUM_THREADS")) {
    int64_t n = 0;
    if (parseInt64(env, n, 1, 4096))
      return static_cast<int>(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Pool &pool() {
  static Pool p(configuredThreads());
  return p;
}

} // namespace

int numThreads() { return pool().size(); }

void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int threads = numThreads();
  int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, threads * 4);
  if (chunks <= 1 || threads == 1) {
    body(0, n);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
  std::function<void(int64_t)> task = [&](int64_t c) {
    int64_t begin = c * per, end = std::min(n, begin + per);
    if (begin < end)
      body(begin, end);
  };
  pool().run(chunks, task);
}

} // namespace strata::cpu
