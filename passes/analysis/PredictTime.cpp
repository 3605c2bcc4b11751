//===- PredictTime.cpp - Cost model of the planned program ----------------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/Passes.h"

#include "dialects/Exec/ExecDialect.h"
#include "passes/analysis/ArenaRanges.h"
#include "passes/analysis/CostModel.h"
#include "runtime/artifact/StepOrder.h"
#include "runtime/profile/MachineProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>
#include <cmath>

#define DEBUG_TYPE "strata-predict-time"

namespace strata {
#define GEN_PASS_DEF_PREDICTTIMEPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct PredictTimePass
    : public strata::impl::PredictTimePassBase<PredictTimePass> {
  using PredictTimePassBase::PredictTimePassBase;

  void runOnOperation() override {
    MachineProfile machine;
    if (failed(loadProfile(getOperation(), profile, machine)))
      return signalPassFailure();
    for (auto func : getOperation().getOps<func::FuncOp>())
      predict(func, machine, /*recordSpans=*/true);
  }

  /// Busy time per link: each host copy direction and the SSD (in all,
  /// and reads and writes apart).
  struct Links {
    double toDevice = 0, toHost = 0, ssd = 0, ssdRead = 0, ssdWrite = 0;
  };

  static double transferSeconds(exec::KernelOp k, const MachineProfile &m,
                                Links &links) {
    Value stored = k.getInputs()[0];
    bool ssd = tierOf(stored) == exec::Tier::Ssd;
    bool read = k.isKernel(artifact::Kernel::Copy);
    double s = strata::transferSeconds(storageBytes(stored.getType()),
                                       ssd ? exec::Tier::Ssd : exec::Tier::Host,
                                       read, m);
    (ssd ? links.ssd : read ? links.toDevice : links.toHost) += s;
    if (ssd)
      (read ? links.ssdRead : links.ssdWrite) += s;
    return s;
  }

  /// How long `work` seconds of work take when, for its first `busy`
  /// seconds, it runs `slow` times slower.
  static double stretched(double work, double slow, double busy) {
    return work * slow <= busy ? work * slow : busy + (work - busy / slow);
  }

  /// `work` seconds of one SSD direction's work from `from` while the
  /// other direction is busy until `other` (its work left then, at full
  /// rate): the two share the drives, each running its slowdown times
  /// slower while both run (1 + ssd_duplex_*_slowdown). Returns when this
  /// work ends and moves `other` to when the other's ends: the slowdown
  /// holds both ways over their whole overlap, whichever was issued
  /// first. (The other queue's steps already replayed keep their ends;
  /// what it runs next starts later.)
  static double sharedDrives(double from, double work, double slow,
                             double &other, double otherSlow) {
    double left = other - from;
    if (left <= 0)
      return from + work;
    if (work * slow <= left * otherSlow) {
      double end = from + work * slow;
      other = end + (left - work * slow / otherSlow);
      return end;
    }
    double both = from + left * otherSlow;
    other = both;
    return both + (work - left * otherSlow / slow);
  }

  /// Replays the runtime's schedule (runtime/exec/Executor.cpp on the CPU
  /// backend) with the plan's queues and waits (orderSteps): steps issued
  /// in issue order; kernels and host copies one after another on the
  /// compute thread, SSD reads and writes each in order on their own queue
  /// thread; a step starts once its queue is free and the steps it waits
  /// for have finished.
  static void
  predict(func::FuncOp func, const MachineProfile &m, bool recordSpans,
          const std::vector<artifact::StepAccesses> *accesses = nullptr) {
    SmallVector<exec::KernelOp> kernels;
    for (auto k : func.getBody().front().getOps<exec::KernelOp>())
      kernels.push_back(k);
    size_t n = kernels.size();
    StepOrdering ordering = orderSteps(kernels, accesses);
    std::vector<double> end(n, 0.0);
    // When each SSD queue (0: reads, 1: writes) is next free.
    double clock = 0, queueFree[2] = {0, 0}, compute = 0;
    Links links;
    // A sleeping thread (an idle queue worker, the compute thread waiting
    // for a transfer) takes half a queue round trip to wake up.
    double wake = m.queueRoundTripUs * 0.5e-6;
    // When step `i` can start, from `start`, after what it waits for;
    // `binding`, when given, is the wait that held it last (-1: none).
    auto waited = [&](size_t i, double start, int *binding = nullptr) {
      for (uint32_t w : ordering.waits[i])
        if (end[w] > start) {
          start = end[w] + wake;
          if (binding)
            *binding = static_cast<int>(w);
        }
      return start;
    };
    // On a GPU (a profile from strata-calibrate --backend cuda) host copies
    // run on their own copy engines beside the kernels, one a direction;
    // an SSD transfer holds its direction's engine too (staged through
    // host memory). `heldBySsd`: whether an engine's last holder is an
    // SSD transfer.
    double copyFree[2] = {0, 0};
    bool heldBySsd[2] = {false, false};
    // While both engines are busy the two directions share the host
    // link's duplex rate: each runs `linkSlow` times slower, whichever was
    // issued first (sharedDrives), so that together they never move more
    // than duplex_gbs (PlacementBound.cpp's link rows rely on it).
    const double linkSlow = hostDuplexSlowdown(m);
    // The least the drives slow an SSD transfer while the other direction
    // also runs: where it is at least linkSlow, two SSD transfers on the
    // two engines need no link slowdown on top.
    const double driveSlow =
        1 + std::max(0.0, std::min(m.ssdDuplexReadSlowdown,
                                   m.ssdDuplexWriteSlowdown));
    // SSD transfers' time that also counts as host-link time (GPU).
    double ssdOnHostLink = 0;
    // The CPU queue (optimizer updates on the host): when it is next free,
    // its busy time, and when the last device kernel ended.
    double cpuFree = 0, cpuBusy = 0, computeEnd = 0;
    auto onCpu = [&](size_t i) {
      return ordering.queues[i] == artifact::Queue::Cpu;
    };
    auto staged = [&](size_t step) {
      uint64_t bytes = 0;
      for (Value v : kernels[step].getInputs())
        if (tierOf(v) == exec::Tier::Ssd)
          bytes += artifact::pagePadded(
              static_cast<uint64_t>(storageBytes(v.getType())));
      return bytes;
    };
    // The CPU job the position is in ends before this position; its SSD
    // write-back's seconds; when each of the staging areas is free (its
    // last job written back), and the one the next job takes.
    size_t jobStart = 0, jobEnd = 0, area = 0;
    double jobWrite = 0, areaFree[artifact::kCpuStagingAreas] = {};
    // As many areas as the runtime gives the plan: from its largest job's
    // staged bytes and its host region (artifact::cpuStagingAreas).
    uint64_t largestJob = 0;
    for (size_t pos = 0; pos < n;) {
      if (!onCpu(ordering.order[pos])) {
        ++pos;
        continue;
      }
      size_t to = artifact::cpuJobEnd(ordering.order, pos, onCpu, staged);
      uint64_t bytes = 0;
      for (; pos < to; ++pos)
        bytes += staged(ordering.order[pos]);
      largestJob = std::max(largestJob, bytes);
    }
    size_t areas =
        artifact::cpuStagingAreas(largestJob, exec::regionSizes(func).host);
    // `work` seconds on SSD queue `mine` (0: reads, 1: writes) from
    // `from`, sharing the drives with the other queue's work (which it
    // delays in turn); when it ends.
    auto ssd = [&](int mine, double from, double work) {
      double slow[2] = {1 + m.ssdDuplexReadSlowdown,
                        1 + m.ssdDuplexWriteSlowdown};
      return sharedDrives(from, work, slow[mine], queueFree[1 - mine],
                          slow[1 - mine]);
    };
    // The predicted schedule, [queue, step, start us, end us] per span, for
    // the plan (artifact::PredictedSpan) and the HTML report.
    SmallVector<double> spans;
    // Every span (queue, from, to), for each queue's busy time after the
    // backward pass starts (which the tier planner's layer programme
    // bounds the step with), and when it starts.
    SmallVector<std::tuple<artifact::Queue, double, double>> busy;
    // The compute thread's idle time, by the queue it waited for; of its
    // waits for CPU updates, those for jobs with SSD operands.
    double waitedOn[artifact::kNumQueues] = {}, waitedOnDrives = 0;
    std::vector<char> onDrives(n, 0);
    // The communication queue (all_reduce across data-parallel ranks): when
    // it is next free, and its busy time.
    double commFree = 0, commBusy = 0;
    double backwardStart = -1;
    auto span = [&](artifact::Queue q, size_t step, double from, double to) {
      busy.push_back({q, from, to});
      if (recordSpans)
        spans.append({static_cast<double>(q), static_cast<double>(step),
                      from * 1e6, to * 1e6});
    };
    for (size_t pos = 0; pos < n; ++pos) {
      size_t i = ordering.order[pos];
      exec::KernelOp k = kernels[i];
      artifact::Queue q = ordering.queues[i];
      if (q == artifact::Queue::Cpu) {
        // A job (artifact::cpuJobEnd, as the runtime forms them) is issued
        // when the issuing thread reaches it. Its SSD operands are read on
        // the SSD read queue once the staging area it takes is free; its
        // updates run one after another with one hand-off once the CPU
        // worker is free, the reads are done and what each update waits
        // for (the stores of their gradients) is done; its SSD operands
        // are then written back on the SSD write queue, and that ends it.
        bool first = pos >= jobEnd;
        if (first) {
          jobStart = pos;
          jobEnd = artifact::cpuJobEnd(ordering.order, pos, onCpu, staged);
          double read = 0;
          jobWrite = 0;
          for (size_t p = pos; p < jobEnd; ++p) {
            read += cpuUpdateSsdSeconds(kernels[ordering.order[p]], m, true);
            jobWrite +=
                cpuUpdateSsdSeconds(kernels[ordering.order[p]], m, false);
          }
          double start = std::max(cpuFree, clock);
          for (size_t p = pos; p < jobEnd; ++p)
            start = waited(ordering.order[p], start);
          if (read > 0) {
            area = (area + 1) % areas;
            double from = std::max({queueFree[0], clock, areaFree[area]});
            // The drives are shared with the writes, as for the SSD
            // transfers below.
            queueFree[0] = ssd(0, from, read);
            span(artifact::Queue::SsdRead, i, from, queueFree[0]);
            links.ssd += read;
            links.ssdRead += read;
            start = std::max(start, queueFree[0]);
          }
          // A job with SSD operands is done once the drives have read
          // them and written them back.
          for (size_t p = pos; p < jobEnd; ++p)
            onDrives[ordering.order[p]] = read > 0 || jobWrite > 0;
          cpuFree = start;
        }
        double work = cpuUpdateSeconds(k, m, first, /*ssd=*/false);
        cpuBusy += work;
        span(q, i, cpuFree, cpuFree + work);
        cpuFree += work;
        end[i] = cpuFree;
        if (pos + 1 == jobEnd && jobWrite > 0) {
          double from = std::max(queueFree[1], cpuFree);
          queueFree[1] = ssd(1, from, jobWrite);
          span(artifact::Queue::SsdWrite, ordering.order[jobStart], from,
               queueFree[1]);
          links.ssd += jobWrite;
          links.ssdWrite += jobWrite;
          areaFree[area] = queueFree[1];
          for (size_t p = jobStart; p <= pos; ++p)
            end[ordering.order[p]] = queueFree[1];
        }
        continue;
      }
      if (q == artifact::Queue::Comm) {
        // A host thread runs the collectives one after another, each once
        // what it waits for (its gradient's kernel) is done.
        double start = waited(i, std::max(commFree, clock + wake));
        double work = kernelSeconds(k, m);
        // Staged through host memory, the collective's bytes cross the
        // GPU's host link both ways (its busy time in each direction):
        // while the copies issued before it still run, it shares the link
        // with them and runs at half its rate. (The copies are not slowed
        // in turn: the DMA engines interleave, and the collective's share
        // is the smaller.)
        if (m.gpu > 0 && m.commOnHostLink != 0) {
          links.toDevice += work;
          links.toHost += work;
          double busy =
              std::max(0.0, std::max(copyFree[0], copyFree[1]) - start);
          work = stretched(work, 2.0, busy);
        }
        commBusy += work;
        commFree = start + work;
        end[i] = commFree;
        span(q, i, start, commFree);
        continue;
      }
      if (m.gpu > 0 && (q == artifact::Queue::HostToDevice ||
                        q == artifact::Queue::DeviceToHost)) {
        // The issuing thread runs ahead of the GPU: a copy starts when its
        // engine is free and what it waits for is done.
        int mine = q == artifact::Queue::HostToDevice ? 0 : 1;
        double &free = copyFree[mine];
        double start = waited(i, free);
        // While the other direction's engine is busy the two share the
        // link's duplex rate: both run linkSlow times slower meanwhile.
        free = sharedDrives(start, transferSeconds(k, m, links), linkSlow,
                            copyFree[1 - mine], linkSlow);
        heldBySsd[mine] = false;
        end[i] = free;
        span(q, i, start, free);
        continue;
      }
      if (q == artifact::Queue::SsdRead || q == artifact::Queue::SsdWrite) {
        int mine = q == artifact::Queue::SsdRead ? 0 : 1;
        double start = queueFree[mine] > clock ? queueFree[mine] : clock + wake;
        start = waited(i, start);
        // On a GPU the bytes cross its host link as well, through host
        // memory: the transfer holds the copy engine of its direction,
        // which host copies then wait for.
        double *engine = m.gpu > 0 ? &copyFree[mine] : nullptr;
        if (engine)
          start = std::max(start, *engine);
        // While the other direction is busy the drives are shared: each
        // runs 1 + its direction's duplex slowdown times slower.
        double work = transferSeconds(k, m, links);
        if (engine) {
          (mine == 0 ? links.toDevice : links.toHost) += work;
          ssdOnHostLink += work;
        }
        double other = queueFree[1 - mine];
        queueFree[mine] = ssd(mine, start, work);
        if (engine) {
          // The other direction's engine, where its SSD transfer held it:
          // the drives' sharing slowed both.
          bool drivesShared =
              heldBySsd[1 - mine] && copyFree[1 - mine] == other;
          if (drivesShared)
            copyFree[1 - mine] = queueFree[1 - mine];
          // Where a host copy holds it, or the drives' slowdown is less
          // than the link's: the link is shared too, over the whole time
          // this transfer holds the engine (at least its bytes' time on
          // the link).
          if (!drivesShared || driveSlow < linkSlow)
            queueFree[mine] =
                sharedDrives(start, queueFree[mine] - start, linkSlow,
                             copyFree[1 - mine], linkSlow);
          *engine = queueFree[mine];
          heldBySsd[mine] = true;
        }
        end[i] = queueFree[mine];
        span(q, i, start, queueFree[mine]);
        continue;
      }
      // The compute thread idles until the last of its waits is done: that
      // time is charged to the queue of that wait.
      int binding = -1;
      double start = waited(i, clock, &binding);
      if (binding >= 0) {
        waitedOn[static_cast<int>(ordering.queues[binding])] += start - clock;
        if (onDrives[binding])
          waitedOnDrives += start - clock;
      }
      if (backwardStart < 0 && !isTransfer(k) && markers::isBackward(k))
        backwardStart = start;
      double seconds;
      if (isTransfer(k)) {
        seconds = transferSeconds(k, m, links);
      } else {
        double work = kernelSeconds(k, m);
        compute += work;
        // While a queue is busy (until queueFree) the kernel runs
        // 1 + overlapSlowdown times slower.
        double slow = 1 + m.overlapSlowdown;
        double busy =
            std::max(0.0, std::max(queueFree[0], queueFree[1]) - start);
        seconds = stretched(work, slow, busy);
      }
      clock = start + seconds;
      end[i] = clock;
      span(q, i, start, clock);
      if (!isTransfer(k))
        computeEnd = clock;
    }
    double step = std::max({clock, queueFree[0], queueFree[1], copyFree[0],
                            copyFree[1], cpuFree, commFree});
    // CPU update time past the last device kernel is exposed; the rest ran
    // behind the device's work.
    double cpuExposed = std::max(0.0, cpuFree - computeEnd);
    double hostLink = links.toDevice + links.toHost;
    double serial =
        compute + hostLink - ssdOnHostLink + links.ssd + cpuBusy + commBusy;
    // With perfect overlap the busiest resource sets the pace.
    double bound = std::max({compute, links.toDevice, links.toHost,
                             links.ssdRead, links.ssdWrite, cpuBusy, commBusy});
    // Each queue's busy time from the backward pass's start on: the step
    // is at least that start plus any of them.
    double after[artifact::kNumQueues] = {};
    if (backwardStart < 0)
      backwardStart = step;
    for (auto [q, from, to] : busy)
      after[static_cast<int>(q)] +=
          std::max(0.0, to - std::max(from, backwardStart));
    // This schedule's floor: the backward pass's start plus the busiest
    // queue's work from then on (CPU updates wait for their gradients,
    // and the step for the updates). What the step takes past it, the
    // queues spent waiting on one another after the backward pass began.
    size_t floorQueue = 0;
    for (size_t q = 1; q < artifact::kNumQueues; ++q)
      if (after[q] > after[floorQueue])
        floorQueue = q;
    double floor = std::min(step, backwardStart + after[floorQueue]);
    OpBuilder b(func.getContext());
    auto us = [&](double s) {
      return b.getI64IntegerAttr(static_cast<int64_t>(std::llround(s * 1e6)));
    };
    setDeclaredAttr<exec::ExecDialect::PredictedAttrHelper>(
        func,
        b.getDictionaryAttr({
            b.getNamedAttr("predicted_step_us", us(step)),
            b.getNamedAttr("predicted_serial_us", us(serial)),
            b.getNamedAttr("predicted_compute_us", us(compute)),
            b.getNamedAttr("predicted_host_link_us", us(hostLink)),
            b.getNamedAttr("predicted_host_to_device_us", us(links.toDevice)),
            b.getNamedAttr("predicted_device_to_host_us", us(links.toHost)),
            b.getNamedAttr("predicted_ssd_link_us", us(links.ssd)),
            b.getNamedAttr("predicted_ssd_read_us", us(links.ssdRead)),
            b.getNamedAttr("predicted_ssd_write_us", us(links.ssdWrite)),
            b.getNamedAttr("predicted_lower_bound_us", us(bound)),
            b.getNamedAttr("predicted_cpu_update_us", us(cpuBusy)),
            // The host memory the runtime stages CPU jobs' SSD operands in
            // (beside the host region; --cpu-mem does not count it).
            b.getNamedAttr(
                "predicted_cpu_staging_bytes",
                b.getI64IntegerAttr(static_cast<int64_t>(areas * largestJob))),
            b.getNamedAttr("predicted_cpu_exposed_us",
                           us(std::min(cpuExposed, cpuBusy))),
            // What the compute thread waited for, and the step past its
            // last kernel (other queues finishing).
            b.getNamedAttr("predicted_wait_host_to_device_us", us(waitedOn[1])),
            b.getNamedAttr("predicted_wait_device_to_host_us", us(waitedOn[2])),
            b.getNamedAttr("predicted_wait_ssd_read_us", us(waitedOn[3])),
            b.getNamedAttr("predicted_wait_ssd_write_us", us(waitedOn[4])),
            b.getNamedAttr("predicted_wait_cpu_us", us(waitedOn[5])),
            b.getNamedAttr("predicted_after_compute_us",
                           us(std::max(0.0, step - clock))),
            b.getNamedAttr("predicted_backward_start_us", us(backwardStart)),
            b.getNamedAttr("predicted_floor_us", us(floor)),
            b.getNamedAttr(
                "predicted_floor_queue",
                b.getI64IntegerAttr(static_cast<int64_t>(floorQueue))),
            // When the backward pass starts, then each queue's (by
            // artifact::Queue) busy time from then on.
            b.getNamedAttr("predicted_phases_us",
                           b.getDenseI64ArrayAttr({
                               us(backwardStart).getInt(),
                               us(after[0]).getInt(),
                               us(after[1]).getInt(),
                               us(after[2]).getInt(),
                               us(after[3]).getInt(),
                               us(after[4]).getInt(),
                               us(after[5]).getInt(),
                           })),
        }));
    // A data-parallel plan's all-reduces: their busy time, and how long
    // the compute thread waited for them.
    if (commBusy > 0) {
      NamedAttrList entries(
          getDeclaredAttr<exec::ExecDialect::PredictedAttrHelper>(func));
      entries.set("predicted_comm_us", us(commBusy));
      entries.set("predicted_wait_comm_us",
                  us(waitedOn[static_cast<int>(artifact::Queue::Comm)]));
      setDeclaredAttr<exec::ExecDialect::PredictedAttrHelper>(
          func, entries.getDictionary(func.getContext()));
    }
    if (waitedOnDrives > 0) {
      NamedAttrList entries(
          getDeclaredAttr<exec::ExecDialect::PredictedAttrHelper>(func));
      entries.set("predicted_wait_cpu_ssd_us", us(waitedOnDrives));
      setDeclaredAttr<exec::ExecDialect::PredictedAttrHelper>(
          func, entries.getDictionary(func.getContext()));
    }
    if (recordSpans)
      setDeclaredAttr<exec::ExecDialect::PredictedSpansAttrHelper>(
          func, b.getDenseF64ArrayAttr(spans));
  }
};

} // namespace

void strata::predictStepTime(
    func::FuncOp func, const MachineProfile &m,
    const std::vector<artifact::StepAccesses> *accesses) {
  PredictTimePass::predict(func, m, /*recordSpans=*/false, accesses);
}
