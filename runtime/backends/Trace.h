// Trace.h - Chrome-trace events of a run (chrome://tracing, Perfetto).

#ifndef STRATA_RUNTIME_EXEC_TRACE_H
#define STRATA_RUNTIME_EXEC_TRACE_H

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace strata::runtime {

/// The lanes events are drawn on.
enum class Lane : int {
  /// One event per run of the plan's steps (a micro-batch), from the first
  /// issue to the end of the synchronization after the last.
  Run = 0,
  Compute = 1,
  HostCopy = 2,
  SsdRead = 3,
  SsdWrite = 4,
  Cpu = 5,  // Optimizer updates on the host CPU.
  Comm = 6, // Collectives across data-parallel ranks.
};

class Trace {
public:
  Trace() : origin_(std::chrono::steady_clock::now()) {}

  /// Microseconds since the trace began.
  double now() const {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now() - origin_)
        .count();
  }

  /// Safe to call from the transfer queue's thread too. `step` is the
  /// plan step the event runs (-1: none), written as the event's
  /// args.step so a report can match it with the plan.
  void add(std::string name, const char *category, Lane lane, double start,
           double end, uint64_t bytes, int64_t step = -1) {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(
        {std::move(name), category, lane, start, end, bytes, step});
  }

  /// Writes the events as Chrome trace JSON; false with `error` on failure.
  bool write(const std::string &path, std::string &error) const;

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_.size();
  }

private:
  struct Event {
    std::string name;
    const char *category;
    Lane lane;
    double start, end;
    uint64_t bytes;
    int64_t step;
  };
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_EXEC_TRACE_H
