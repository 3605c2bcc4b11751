// ThreadPool.h - A fixed pool of worker threads for data-parallel kernels.

#ifndef STRATA_RUNTIME_CPU_THREADPOOL_H
#define STRATA_RUNTIME_CPU_THREADPOOL_H

#include <cstdint>
#include <functional>

namespace strata::cpu {

/// Streaming kernels split their elements across threads in chunks of at
/// least this many; the compiler's cost model charges a parallel launch to
/// kernels larger than it (passes/CostModel.cpp).
constexpr int64_t kParallelGrain = 16384;

/// Runs `body(begin, end)` over [0, n) split into contiguous chunks of at
/// least `grain` items, on the calling thread and the pool's workers. Small
/// ranges run inline. The pool size follows STRATA_NUM_THREADS, else the
/// number of CPUs.
void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body);

/// Threads parallelFor uses (including the caller).
int numThreads();

} // namespace strata::cpu

#endif // STRATA_RUNTIME_CPU_THREADPOOL_H
