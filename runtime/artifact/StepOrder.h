// StepOrder.h - Queues, waits and the race check of a plan's steps.
//
// The runtime issues a plan's steps in issue order (program order, with
// each fetch scheduled ahead moved to right after its `issueAfter` step).
// Each queue runs its own steps in that order; a step on one queue is
// ordered after a step on another only through a wait (or a chain of them).
// The compiler picks each step's queue and the fewest waits that order
// every pair of conflicting accesses (deriveWaits); the plan validator
// proves that the waits a plan carries do (checkRaceFree), so a plan with
// a missing wait is refused before anything runs, naming the two steps.
//
// The accesses are plain (region, byte range) pairs so that the compiler's
// exec IR and the runtime's Plan share one algorithm.

#ifndef STRATA_RUNTIME_ARTIFACT_STEPORDER_H
#define STRATA_RUNTIME_ARTIFACT_STEPORDER_H

#include "runtime/artifact/Plan.h"

#include <functional>
#include <string>
#include <vector>

namespace strata::artifact {

/// What one step touches.
struct StepAccesses {
  std::vector<Access> reads, writes;
};

/// The order the runtime issues steps in: program order, with the fetches
/// scheduled ahead right after step `issueAfter` (or first, for -1).
/// `issueAfter[i]` is kInProgramOrder for steps issued at their place.
std::vector<size_t> issueOrder(const std::vector<int64_t> &issueAfter);
std::vector<size_t> issueOrder(const Plan &plan);

/// The most bytes of SSD operands a CPU job stages in host memory (its
/// first update's alone may be more); the runtime stages kCpuStagingAreas
/// jobs at once.
constexpr uint64_t kCpuJobMaxStagedBytes = uint64_t(64) << 20;

/// The runtime stages the SSD operands of up to this many CPU jobs at a
/// time, in areas taken in turn: a job's reads start once the job that
/// many before it is written back (cpuStagingAreas says how many a plan
/// gets).
constexpr size_t kCpuStagingAreas = 3;

/// How many staging areas (2 or kCpuStagingAreas) the runtime gives a
/// plan whose largest CPU job stages `stagingBytes` and whose host region
/// is `hostBytes`. With two, the CPU idles whenever a job's write-back and
/// the next but one's read take longer than the job between them: a third
/// of the CPU's time in GPT-3 175B's predicted backward pass on the RTX
/// 4090 profile (fourth areas gained nothing more there). A third area
/// costs host memory the budgets do not count, so it is taken only where
/// all of them are at most a sixteenth of the host memory the plan holds
/// anyway; small plans under tight budgets keep two.
inline size_t cpuStagingAreas(uint64_t stagingBytes, uint64_t hostBytes) {
  return stagingBytes > 0 && stagingBytes <= hostBytes / (16 * kCpuStagingAreas)
             ? kCpuStagingAreas
             : 2;
}

/// CPU-queue steps that follow one another in issue order run as one CPU
/// job, with one hand-off for all of them, once every step any of them
/// waits for is done (the compiler puts the updates it groups side by
/// side), unless their SSD operands would take the job's staged bytes past
/// kCpuJobMaxStagedBytes: the position in `order` just past the job that
/// starts at `order[pos]`. `isCpu(step)` says whether a step is on the CPU
/// queue, `stagedBytes(step)` what its operands on the SSD take in host
/// memory (each page-padded).
template <typename IsCpu, typename StagedBytes>
size_t cpuJobEnd(const std::vector<size_t> &order, size_t pos, IsCpu isCpu,
                 StagedBytes stagedBytes) {
  uint64_t staged = 0;
  size_t end = pos;
  for (; end < order.size() && isCpu(order[end]); ++end) {
    uint64_t bytes = stagedBytes(order[end]);
    if (end > pos && staged + bytes > kCpuJobMaxStagedBytes)
      break;
    staged += bytes;
  }
  return end;
}

/// A CPU job of a plan: the steps at order[from, to), and the bytes its
/// operands on the SSD take when staged in host memory (each page-padded).
struct CpuJobSpan {
  size_t from, to;
  uint64_t ssdBytes;
};

/// The plan's CPU jobs in `order` (cpuJobEnd): the runtime stages
/// kCpuStagingAreas jobs' SSD operands at a time, so its host memory for
/// them is that many times the largest `ssdBytes`.
std::vector<CpuJobSpan> cpuJobs(const Plan &plan,
                                const std::vector<size_t> &order);

/// The bytes of one of the runtime's staging areas for `jobs`: the
/// largest job's `ssdBytes`.
uint64_t cpuStagingBytes(const std::vector<CpuJobSpan> &jobs);

/// The queue of a transfer: by its tier (SSD or host) and direction (a fetch
/// to the device or a write-back from it).
Queue transferQueue(bool ssd, bool fetch);

/// The queue a step runs on, from where its operands are: fetches and
/// write-backs by their tier and direction, updates whose operands are all
/// in host memory on the CPU (isCpuUpdate), other kernels on Compute.
Queue naturalQueue(const Plan &plan, const Step &step);

/// For each step (indexed by step number), the fewest waits (step numbers
/// on other queues, issued before it) that order it after every earlier
/// issued step it conflicts with (one writes bytes the other reads or
/// writes) and that queue order and other waits do not already order.
std::vector<std::vector<uint32_t>>
deriveWaits(const std::vector<Queue> &queues,
            const std::vector<StepAccesses> &accesses,
            const std::vector<size_t> &order);

/// Whether `waits` order every pair of conflicting accesses. False with
/// `why` naming the first two steps that race (or a wait that is not on an
/// earlier issued step); `describe(i)` names step i in it.
bool checkRaceFree(const std::vector<Queue> &queues,
                   const std::vector<std::vector<uint32_t>> &waits,
                   const std::vector<StepAccesses> &accesses,
                   const std::vector<size_t> &order,
                   const std::function<std::string(size_t)> &describe,
                   std::string &why);

/// The accesses of every step of `plan` (stepAccesses).
std::vector<StepAccesses> planAccesses(const Plan &plan);

/// Sets every step's queue to its natural queue and its waits to
/// deriveWaits' (for plans built outside the compiler: tests, tools).
void scheduleSteps(Plan &plan);

/// checkRaceFree on the plan's own queues and waits.
bool checkPlanRaceFree(const Plan &plan, std::string &why);

} // namespace strata::artifact

#endif // STRATA_RUNTIME_ARTIFACT_STEPORDER_H
