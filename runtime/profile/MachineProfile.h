// MachineProfile.h - What the machine can do, for the compiler's cost model.
//
// strata-calibrate measures it with the runtime's own kernels and I/O
// engine; without a profile the documented defaults below are used. The
// file is plain `key value` lines.

#ifndef STRATA_RUNTIME_PROFILE_MACHINEPROFILE_H
#define STRATA_RUNTIME_PROFILE_MACHINEPROFILE_H

#include <string>
#include <utility>
#include <vector>

namespace strata {

struct MachineProfile {
  /// Matrix products, GFLOP/s, for small (~64), medium (~256) and large
  /// (~1024) operands.
  double matmulSmallGflops = 5, matmulMediumGflops = 30, matmulLargeGflops = 60;
  /// Streaming kernels: nanoseconds per element for simple arithmetic,
  /// transcendental functions and data movement, plus a fixed cost per
  /// kernel launch (microseconds).
  double simpleNsPerElement = 0.5, transcendentalNsPerElement = 4,
         movementNsPerElement = 1, launchUs = 3;
  /// The extra fixed cost of a kernel large enough to be split across
  /// threads (microseconds).
  double parallelLaunchUs = 10;
  /// Links: host<->device copies and SSD reads/writes in GB/s, and the
  /// fixed cost of one SSD read and one SSD write (microseconds);
  /// transfers of a stripe or more run at the bulk rates.
  double copyGBs = 5, ssdReadGBs = 1.5, ssdWriteGBs = 1.0,
         ssdReadLatencyUs = 100, ssdWriteLatencyUs = 100;
  /// A single request smaller than a stripe gets no parallelism across
  /// requests: its own rate (GB/s).
  double ssdSmallReadGBs = 0.5, ssdSmallWriteGBs = 0.5;
  /// How much longer kernels take while the transfer queue is busy beside
  /// them (0.25: 25% longer); the I/O thread competes for the CPU.
  double overlapSlowdown = 0.1;
  /// How much longer an SSD read takes while a write runs, and a write
  /// while a read runs (the read and write queues share the drives).
  double ssdDuplexReadSlowdown = 0.5, ssdDuplexWriteSlowdown = 0.5;
  /// Handing a transfer to an idle queue worker, and waking the compute
  /// thread when a transfer it waits for ends, each cost about half of a
  /// queue round trip (microseconds).
  double queueRoundTripUs = 20;
  /// 1 when the figures above describe a GPU (strata-calibrate --backend
  /// cuda): host copies then run on their own copy engines (streams) beside
  /// the kernels instead of on the compute thread.
  double gpu = 0;
  /// GPU only: pinned host->device and device->host GB/s, the two together
  /// (GB/s moved in both directions at once), and the largest measured
  /// matrix-product rates (GFLOP/s, fp32 and bf16 with fp32 accumulate):
  /// the peak a step's rate is quoted against.
  double h2dGBs = 0, d2hGBs = 0, duplexGBs = 0;
  double gemmPeakF32Gflops = 0, gemmPeakBf16Gflops = 0;
  /// The host CPU's optimizer updates on the CPU queue (StreamingUpdates):
  /// GB/s of the bytes they read and write (fp32 AdamW: 28 a parameter).
  double cpuUpdateGBs = 20;
  /// Data-parallel training: the all-reduce's bus rate across the ranks
  /// (GB/s; a ring all-reduce of B bytes over N ranks moves 2(N-1)/N * B
  /// through each rank's link) and its fixed cost (microseconds). The
  /// defaults are of MPI between processes of one machine over shared
  /// memory; strata-calibrate does not measure them yet.
  double commGBs = 10, commLatencyUs = 20;
  /// GPU only: 1 when the collectives cross each GPU's host link (GPUs
  /// without NVLink or peer-to-peer: NCCL stages them through host memory),
  /// so that they count on the link both ways and share it with the
  /// copies.
  double commOnHostLink = 0;
  /// Data parallel over several machines (more ranks than
  /// --ranks-per-node): each machine's network link (GB/s each way) and
  /// its fixed cost a collective (microseconds). A ring crosses every
  /// machine's link once each way, so a collective's bus rate is the lesser
  /// of comm_gbs and net_gbs, after both fixed costs. The defaults are
  /// assumptions: 100 Gb/s (EDR InfiniBand, 100 GbE) and 50 us.
  double netGBs = 12.5, netLatencyUs = 50;

  /// Reads a profile; false with `error` naming the file and line.
  bool read(const std::string &path, std::string &error);
  bool write(const std::string &path, std::string &error) const;
  std::string text() const;

  /// Every figure by its name in the profile file ("h2d_gbs"), the order
  /// text() writes them in.
  static const std::vector<std::pair<const char *, double MachineProfile::*>> &
  fields();
};

/// Where strata-calibrate remembers this machine's profile when it is given
/// no -o, and where strata-compile finds it when it is given no --profile:
/// $STRATA_PROFILE when set (empty: none is remembered), else
/// $XDG_CONFIG_HOME/strata/machine.profile, else
/// $HOME/.config/strata/machine.profile; empty when none of them is set.
std::string rememberedProfilePath();

} // namespace strata

#endif // STRATA_RUNTIME_PROFILE_MACHINEPROFILE_H
