// ThreadPoolTest.cpp - Stress tests of the CPU thread pool: every chunk of
// every job runs exactly once, under oversubscription and injected delays,
// with a watchdog that turns a hang into a failure.

#include "runtime/support/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace strata::cpu {
namespace {

/// Fails the process (a hang becomes a test failure with a message instead
/// of a ctest timeout) when `progress` stops moving for `limit`.
class Watchdog {
public:
  Watchdog(const std::atomic<int64_t> &progress, const char *what,
           std::chrono::seconds limit = std::chrono::seconds(60))
      : thread_([&progress, what, limit, this] {
          int64_t last = -1;
          auto since = std::chrono::steady_clock::now();
          while (!stop_.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            int64_t now = progress.load();
            if (now != last) {
              last = now;
              since = std::chrono::steady_clock::now();
            } else if (std::chrono::steady_clock::now() - since > limit) {
              std::fprintf(stderr,
                           "watchdog: %s made no progress for %llds at %lld: "
                           "the pool hung\n",
                           what, static_cast<long long>(limit.count()),
                           static_cast<long long>(now));
              std::_Exit(3);
            }
          }
        }) {}
  ~Watchdog() {
    stop_ = true;
    thread_.join();
  }

private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// A delay of a random kind: none, a yield, or a short sleep. Injected into
/// chunks so that workers fall behind the caller and each other, which is
/// where the old pool let a lagging worker take the next job's chunks.
void jitter(std::minstd_rand &rng) {
  switch (rng() % 8) {
  case 0:
    std::this_thread::yield();
    break;
  case 1:
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));
    break;
  default:
    break;
  }
}

// Many short jobs of varying chunk counts, back to back, on a pool with more
// threads than the machine has cores and a busy thread beside it: every
// chunk index runs exactly once per job, and only while its job is running.
// Fails (or hangs, caught by the watchdog) on the pool that kept one job's
// state in fields the next job reused.
TEST(ThreadPool, ManyShortJobsRunEveryChunkOnce) {
  ThreadPool pool(8);
  constexpr int kJobs = 40000;
  constexpr int kMaxChunks = 40;
  std::atomic<int64_t> progress{0};
  Watchdog dog(progress, "ManyShortJobsRunEveryChunkOnce");
  std::atomic<bool> loaded{true};
  std::thread load([&] {
    while (loaded.load())
      std::this_thread::yield();
  });
  std::vector<std::atomic<uint8_t>> hits(size_t(kJobs) * kMaxChunks);
  std::vector<int> chunksOf(kJobs);
  std::atomic<int> current{-1};
  std::atomic<int64_t> strays{0};
  std::minstd_rand jobRng(7);
  for (int j = 0; j < kJobs; ++j) {
    // Alternate large and small jobs: an index left over from a large job
    // is what a lagging worker could take into a smaller one.
    int chunks = j % 2 ? 2 + static_cast<int>(jobRng() % 6)
                       : 16 + static_cast<int>(jobRng() % (kMaxChunks - 15));
    chunksOf[j] = chunks;
    current.store(j);
    pool.run(chunks, [&, j](int64_t c) {
      thread_local std::minstd_rand rng(std::random_device{}());
      if (current.load() != j)
        strays.fetch_add(1);
      jitter(rng);
      hits[size_t(j) * kMaxChunks + c].fetch_add(1);
    });
    progress.fetch_add(1);
  }
  loaded = false;
  load.join();
  for (int j = 0; j < kJobs; ++j)
    for (int c = 0; c < kMaxChunks; ++c)
      ASSERT_EQ(hits[size_t(j) * kMaxChunks + c].load(),
                c < chunksOf[j] ? 1 : 0)
          << "job " << j << " of " << chunksOf[j] << " chunks, chunk " << c;
  EXPECT_EQ(strays.load(), 0) << "chunks ran outside their job";
}

// Callers on several threads share one pool: their jobs take turns, and
// each sees its own chunks, once each.
TEST(ThreadPool, ConcurrentCallersEachGetTheirChunks) {
  ThreadPool pool(4);
  std::atomic<int64_t> progress{0};
  Watchdog dog(progress, "ConcurrentCallersEachGetTheirChunks");
  std::atomic<int64_t> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      std::minstd_rand rng(t);
      for (int j = 0; j < 3000; ++j) {
        int chunks = 1 + static_cast<int>(rng() % 24);
        std::vector<std::atomic<int>> hits(chunks);
        pool.run(chunks, [&](int64_t c) { hits[c].fetch_add(1); });
        for (auto &h : hits)
          if (h.load() != 1)
            wrong.fetch_add(1);
        progress.fetch_add(1);
      }
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// A kernel body that itself calls parallelFor (on a worker or on the caller)
// runs the inner loop inline instead of waiting for workers that are busy
// with the outer job.
TEST(ThreadPool, NestedParallelForRunsInline) {
  ThreadPool pool(4);
  std::atomic<int64_t> progress{0};
  Watchdog dog(progress, "NestedParallelForRunsInline",
               std::chrono::seconds(20));
  std::vector<std::atomic<int>> hits(64 * 1000);
  parallelFor(pool, 64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallelFor(pool, 1000, 10, [&](int64_t ib, int64_t ie) {
        for (int64_t k = ib; k < ie; ++k)
          hits[i * 1000 + k].fetch_add(1);
      });
    progress.fetch_add(1);
  });
  for (auto &h : hits)
    ASSERT_EQ(h.load(), 1);
}

// A chunk that throws: the others still run, the caller gets the exception
// after all of them finished, and the pool keeps working.
TEST(ThreadPool, ExceptionReachesTheCallerAfterEveryChunk) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(32);
  EXPECT_THROW(pool.run(32,
                        [&](int64_t c) {
                          std::this_thread::sleep_for(
                              std::chrono::microseconds(100));
                          hits[c].fetch_add(1);
                          if (c == 5)
                            throw std::runtime_error("chunk 5");
                        }),
               std::runtime_error);
  for (auto &h : hits)
    EXPECT_EQ(h.load(), 1);
  std::atomic<int> after{0};
  pool.run(16, [&](int64_t) { after.fetch_add(1); });
  EXPECT_EQ(after.load(), 16);
}

// parallelFor's ranges tile [0, n) for sizes around the chunking's edges.
TEST(ThreadPool, ParallelForTilesTheRange) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 11, 12, 13, 100, 1001, 65537})
    for (int64_t grain : {1, 2, 7, 64, 100000}) {
      std::vector<std::atomic<int>> hits(n);
      parallelFor(pool, n, grain, [&](int64_t b, int64_t e) {
        ASSERT_LT(b, e);
        for (int64_t i = b; i < e; ++i)
          hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " grain=" << grain;
    }
}

} // namespace
} // namespace strata::cpu
