// StepOrder.cpp - Queues, waits and the race check of a plan's steps.

#include "runtime/artifact/StepOrder.h"
#include "runtime/artifact/KernelTable.h"

#include <algorithm>
#include <array>
#include <map>

namespace strata::artifact {

namespace {

constexpr int64_t kNone = -1;

/// Who touched a run of bytes last: the last writer, and the latest reader
/// on each queue since that write (earlier readers on a queue are ordered
/// before the latest by queue order, so the latest stands for them all).
struct Segment {
  uint64_t end = 0;
  int64_t writer = kNone;
  std::array<int64_t, kNumQueues> readers;
  Segment() { readers.fill(kNone); }
};

/// Disjoint segments per region, split as accesses arrive.
class History {
public:
  /// Calls `fn(Segment &)` for every segment of [begin, end) in `region`,
  /// creating and splitting segments so they cover exactly that range.
  template <typename Fn> void forEach(const Access &a, Fn fn) {
    if (a.range.begin >= a.range.end)
      return;
    auto &map = maps_[static_cast<size_t>(a.region) % maps_.size()];
    uint64_t begin = a.range.begin, end = a.range.end;
    split(map, begin);
    split(map, end);
    uint64_t at = begin;
    auto it = map.lower_bound(begin);
    while (at < end) {
      if (it == map.end() || it->first > at) {
        // A gap nobody touched yet.
        uint64_t gapEnd = it == map.end() ? end : std::min(end, it->first);
        Segment fresh;
        fresh.end = gapEnd;
        it = map.emplace_hint(it, at, fresh);
      }
      fn(it->second);
      at = it->second.end;
      ++it;
    }
  }

private:
  using Map = std::map<uint64_t, Segment>;
  /// Makes `point` a segment boundary.
  static void split(Map &map, uint64_t point) {
    auto it = map.upper_bound(point);
    if (it == map.begin())
      return;
    --it;
    if (it->first < point && point < it->second.end) {
      Segment tail = it->second;
      it->second.end = point;
      map.emplace(point, tail);
    }
  }
  std::array<Map, 8> maps_;
};

using Clock = std::array<uint32_t, kNumQueues>;

/// The sweep both deriveWaits and checkRaceFree make: per step in issue
/// order, the earlier steps it conflicts with and the vector clocks that say
/// which of them are ordered before it.
class Sweep {
public:
  Sweep(const std::vector<Queue> &queues, const std::vector<size_t> &order)
      : queues_(queues), pos_(queues.size()), issued_(queues.size()),
        clock_(queues.size()), byQueue_(kNumQueues) {
    for (size_t k = 0; k < order.size(); ++k) {
      size_t s = order[k];
      issued_[s] = k;
      auto q = static_cast<size_t>(queues[s]);
      pos_[s] = static_cast<uint32_t>(byQueue_[q].size());
      byQueue_[q].push_back(s);
    }
  }

  size_t queueOf(size_t s) const { return static_cast<size_t>(queues_[s]); }

  /// Starts step `s`: its clock from its queue predecessor.
  void begin(size_t s) {
    size_t q = queueOf(s);
    Clock c{};
    if (pos_[s] > 0)
      c = clock_[byQueue_[q][pos_[s] - 1]];
    c[q] = pos_[s];
    clock_[s] = c;
  }
  /// Orders `s` after `w`.
  void join(size_t s, size_t w) {
    Clock done = clock_[w];
    done[queueOf(w)] = pos_[w] + 1;
    for (size_t q = 0; q < kNumQueues; ++q)
      clock_[s][q] = std::max(clock_[s][q], done[q]);
  }
  bool ordered(size_t before, size_t s) const {
    return clock_[s][queueOf(before)] > pos_[before];
  }
  size_t stepAt(size_t q, uint32_t pos) const { return byQueue_[q][pos]; }
  uint32_t pos(size_t s) const { return pos_[s]; }
  /// Where step s stands in the issue order.
  size_t issued(size_t s) const { return issued_[s]; }
  const Clock &clock(size_t s) const { return clock_[s]; }

  /// Calls `fn(p, access)` for each earlier step p that conflicts with `s`;
  /// with `andRecord`, records `s`'s accesses too (record()) in the same
  /// walk over each access's segments: the same conflicts, bar a reader on
  /// `s`'s own queue that `s` read after (recorded over it) and then
  /// writes, which queue order orders already.
  template <typename Fn>
  void conflicts(size_t s, const StepAccesses &a, Fn fn,
                 bool andRecord = false) {
    size_t q = queueOf(s);
    for (const Access &r : a.reads)
      history_.forEach(r, [&](Segment &seg) {
        if (seg.writer != kNone && static_cast<size_t>(seg.writer) != s)
          fn(static_cast<size_t>(seg.writer), r);
        if (andRecord)
          seg.readers[q] = static_cast<int64_t>(s);
      });
    for (const Access &w : a.writes)
      history_.forEach(w, [&](Segment &seg) {
        if (seg.writer != kNone && static_cast<size_t>(seg.writer) != s)
          fn(static_cast<size_t>(seg.writer), w);
        for (int64_t reader : seg.readers)
          if (reader != kNone && static_cast<size_t>(reader) != s)
            fn(static_cast<size_t>(reader), w);
        if (andRecord) {
          seg.writer = static_cast<int64_t>(s);
          seg.readers.fill(kNone);
        }
      });
  }
  /// Records `s`'s accesses.
  void record(size_t s, const StepAccesses &a) {
    size_t q = queueOf(s);
    for (const Access &r : a.reads)
      history_.forEach(
          r, [&](Segment &seg) { seg.readers[q] = static_cast<int64_t>(s); });
    for (const Access &w : a.writes)
      history_.forEach(w, [&](Segment &seg) {
        seg.writer = static_cast<int64_t>(s);
        seg.readers.fill(kNone);
      });
  }

private:
  const std::vector<Queue> &queues_;
  std::vector<uint32_t> pos_;
  std::vector<size_t> issued_;
  std::vector<Clock> clock_;
  std::vector<std::vector<size_t>> byQueue_;
  History history_;
};

std::string rangeText(const Access &a) {
  return std::string(regionName(a.region)) + " bytes [" +
         std::to_string(a.range.begin) + ", " + std::to_string(a.range.end) +
         ")";
}

} // namespace

std::vector<size_t> issueOrder(const std::vector<int64_t> &issueAfter) {
  size_t n = issueAfter.size();
  std::vector<std::vector<size_t>> ahead(n + 1);
  for (size_t i = 0; i < n; ++i)
    if (issueAfter[i] != kInProgramOrder && issueAfter[i] >= -1 &&
        issueAfter[i] < static_cast<int64_t>(n))
      ahead[issueAfter[i] + 1].push_back(i);
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t f : ahead[0])
    order.push_back(f);
  for (size_t i = 0; i < n; ++i) {
    if (issueAfter[i] == kInProgramOrder || issueAfter[i] < -1 ||
        issueAfter[i] >= static_cast<int64_t>(n))
      order.push_back(i);
    for (size_t f : ahead[i + 1])
      order.push_back(f);
  }
  return order;
}

std::vector<size_t> issueOrder(const Plan &plan) {
  std::vector<int64_t> after;
  after.reserve(plan.steps.size());
  for (const Step &s : plan.steps)
    after.push_back(s.issueAfter);
  return issueOrder(after);
}

std::vector<CpuJobSpan> cpuJobs(const Plan &plan,
                                const std::vector<size_t> &order) {
  auto onCpu = [&](size_t i) {
    return plan.steps[i].queue == Queue::Cpu &&
           !isTransfer(plan, plan.steps[i]);
  };
  auto staged = [&](size_t i) {
    uint64_t bytes = 0;
    for (uint32_t slot : plan.steps[i].inputs)
      if (plan.slots[slot].region == Region::Ssd)
        bytes += pagePadded(plan.slots[slot].bytes);
    return bytes;
  };
  std::vector<CpuJobSpan> jobs;
  for (size_t p = 0; p < order.size();) {
    if (!onCpu(order[p])) {
      ++p;
      continue;
    }
    CpuJobSpan job{p, cpuJobEnd(order, p, onCpu, staged), 0};
    // A job stages each SSD tensor once: one that a second update of the
    // job would read (never in a compiled plan) starts the next job.
    std::vector<uint32_t> seen;
    for (size_t q = job.from; q < job.to; ++q) {
      std::vector<uint32_t> ssd;
      for (uint32_t slot : plan.steps[order[q]].inputs)
        if (plan.slots[slot].region == Region::Ssd)
          ssd.push_back(slot);
      if (std::any_of(ssd.begin(), ssd.end(), [&](uint32_t slot) {
            return std::find(seen.begin(), seen.end(), slot) != seen.end();
          })) {
        job.to = q;
        break;
      }
      seen.insert(seen.end(), ssd.begin(), ssd.end());
      job.ssdBytes += staged(order[q]);
    }
    jobs.push_back(job);
    p = job.to;
  }
  return jobs;
}

uint64_t cpuStagingBytes(const std::vector<CpuJobSpan> &jobs) {
  uint64_t bytes = 0;
  for (const CpuJobSpan &job : jobs)
    bytes = std::max(bytes, job.ssdBytes);
  return bytes;
}

Queue transferQueue(bool ssd, bool fetch) {
  if (ssd)
    return fetch ? Queue::SsdRead : Queue::SsdWrite;
  return fetch ? Queue::HostToDevice : Queue::DeviceToHost;
}

Queue naturalQueue(const Plan &plan, const Step &step) {
  if (isCollective(step.kernel))
    return Queue::Comm;
  if (isCpuUpdate(plan, step))
    return Queue::Cpu;
  if (!isTransfer(plan, step))
    return Queue::Compute;
  return transferQueue(plan.slots[step.inputs[0]].region == Region::Ssd,
                       step.kernel == Kernel::Copy);
}

std::vector<std::vector<uint32_t>>
deriveWaits(const std::vector<Queue> &queues,
            const std::vector<StepAccesses> &accesses,
            const std::vector<size_t> &order) {
  std::vector<std::vector<uint32_t>> waits(queues.size());
  Sweep sweep(queues, order);
  for (size_t s : order) {
    sweep.begin(s);
    // The latest conflicting step on each queue; the earlier ones on that
    // queue finish before it.
    std::array<int64_t, kNumQueues> need;
    need.fill(kNone);
    // Recorded at once: the waits below depend on the conflicts alone,
    // and those on its own queue (all the fused walk can miss) are
    // ordered anyway.
    sweep.conflicts(
        s, accesses[s],
        [&](size_t p, const Access &) {
          size_t q = sweep.queueOf(p);
          if (static_cast<int64_t>(sweep.pos(p)) > need[q])
            need[q] = sweep.pos(p);
        },
        /*andRecord=*/true);
    // The latest issued first: a step issued later can order the earlier
    // ones (through its own waits), never the other way round, so each
    // wait added is one nothing else provides.
    size_t own = sweep.queueOf(s);
    std::vector<size_t> candidates;
    for (size_t q = 0; q < kNumQueues; ++q)
      if (q != own && need[q] != kNone)
        candidates.push_back(sweep.stepAt(q, static_cast<uint32_t>(need[q])));
    std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
      return sweep.issued(a) > sweep.issued(b);
    });
    for (size_t w : candidates) {
      if (sweep.ordered(w, s))
        continue;
      waits[s].push_back(static_cast<uint32_t>(w));
      sweep.join(s, w);
    }
    std::sort(waits[s].begin(), waits[s].end());
  }
  return waits;
}

bool checkRaceFree(const std::vector<Queue> &queues,
                   const std::vector<std::vector<uint32_t>> &waits,
                   const std::vector<StepAccesses> &accesses,
                   const std::vector<size_t> &order,
                   const std::function<std::string(size_t)> &describe,
                   std::string &why) {
  Sweep sweep(queues, order);
  for (size_t s : order) {
    sweep.begin(s);
    for (uint32_t w : waits[s]) {
      if (w >= queues.size() || sweep.issued(w) >= sweep.issued(s)) {
        why = describe(s) + " waits for " +
              (w >= queues.size()
                   ? "step " + std::to_string(w) + ", which does not exist"
                   : describe(w) + ", which is issued after "
                                   "it");
        return false;
      }
      sweep.join(s, w);
    }
    bool ok = true;
    sweep.conflicts(s, accesses[s], [&](size_t p, const Access &a) {
      if (ok && !sweep.ordered(p, s)) {
        why = describe(p) + " and " + describe(s) + " race: both touch " +
              rangeText(a) + ", one writes, and no wait orders them";
        ok = false;
      }
    });
    if (!ok)
      return false;
    sweep.record(s, accesses[s]);
  }
  return true;
}

std::vector<StepAccesses> planAccesses(const Plan &plan) {
  std::vector<StepAccesses> all(plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i)
    stepAccesses(plan, plan.steps[i], all[i].reads, all[i].writes);
  return all;
}

void scheduleSteps(Plan &plan) {
  std::vector<Queue> queues;
  for (const Step &s : plan.steps)
    queues.push_back(naturalQueue(plan, s));
  std::vector<std::vector<uint32_t>> waits =
      deriveWaits(queues, planAccesses(plan), issueOrder(plan));
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    plan.steps[i].queue = queues[i];
    plan.steps[i].waits = std::move(waits[i]);
  }
}

bool checkPlanRaceFree(const Plan &plan, std::string &why) {
  std::vector<Queue> queues;
  std::vector<std::vector<uint32_t>> waits;
  for (const Step &s : plan.steps) {
    queues.push_back(s.queue);
    waits.push_back(s.waits);
  }
  auto describe = [&](size_t i) {
    const Step &s = plan.steps[i];
    uint32_t named = !s.outputs.empty()  ? s.outputs[0]
                     : !s.inputs.empty() ? s.inputs[0]
                                         : 0;
    std::string target =
        named < plan.slots.size() ? plan.slots[named].name : "?";
    return "step " + std::to_string(i) + " (" + kernelName(s.kernel) + " '" +
           target + "' on " + queueName(s.queue) + ")";
  };
  return checkRaceFree(queues, waits, planAccesses(plan), issueOrder(plan),
                       describe, why);
}

} // namespace strata::artifact
