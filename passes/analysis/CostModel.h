//===- CostModel.h - Seconds per kernel and per transfer -------*- C++ -*-===//
//
// The compiler's cost model, from a machine profile (strata-calibrate):
// matrix products by FLOPs at a size-dependent rate, streaming kernels by
// elements plus launch and thread-dispatch costs, transfers by bytes and
// latency on their link. --strata-predict-time sums it over the runtime's
// schedule; --strata-place-tiers weighs recomputing against swapping.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_PASSES_ANALYSIS_COSTMODEL_H
#define STRATA_PASSES_ANALYSIS_COSTMODEL_H

#include "dialects/Exec/ExecDialect.h"
#include "runtime/profile/MachineProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <vector>

namespace strata::artifact {
struct StepAccesses;
} // namespace strata::artifact

namespace strata {

/// The machine profile for a pass into `m`, parsed once per compile: the
/// first pass given a file (`path`) reads it and records its figures on the
/// module (exec.machine_profile); a pass given no file or the same one reads
/// that record, one given another file reads that file. The documented
/// defaults (`m` as it came) when there is neither, or for "builtin".
/// Failure with an error on `op` naming the file and line.
mlir::LogicalResult loadProfile(mlir::Operation *op, llvm::StringRef path,
                                MachineProfile &m);

/// How many data-parallel ranks the program under `root` averages over
/// (its all-reduces'), 1 without any.
int64_t dataParallelRanks(mlir::Operation *root);

/// The floating-point operations of a kernel's matrix products (a matmul's
/// 2*M*N*K, fused attention's score and value products); 0 for streaming
/// kernels.
double kernelFlops(exec::KernelOp kernel);

/// Seconds one compute kernel takes.
double kernelSeconds(exec::KernelOp kernel, const MachineProfile &m);

/// Seconds an optimizer update takes on the host CPU (the CPU queue): the
/// bytes it reads and writes at the profile's CPU update rate, its SSD
/// operands' reads and write-backs (unless `ssd` is false: they run on the
/// SSD queues), and (unless it joins the job of the update before it) the
/// hand-off of one CPU job.
double cpuUpdateSeconds(exec::KernelOp update, const MachineProfile &m,
                        bool handOff = true, bool ssd = true);

/// Seconds to read an update's SSD operands into host memory (`read`) or
/// to write the ones it updates back.
double cpuUpdateSsdSeconds(exec::KernelOp update, const MachineProfile &m,
                           bool read);

/// Bytes an update reads and writes on the CPU: each operand once, the
/// in-place ones twice.
double cpuUpdateBytes(exec::KernelOp update);

/// Seconds of one CPU job's hand-off: queueing it to the CPU worker and
/// waking what waits for it.
double cpuHandOffSeconds(const MachineProfile &m);

/// The bytes of updates under which a CPU job is not worth its hand-off:
/// smaller updates are grouped with the next so that the hand-off is at
/// most 5% of the job.
double cpuJobMinBytes(const MachineProfile &m);

/// Seconds to move `bytes` between the device and `tier` (host or SSD;
/// device counts as host); `read` is towards the device. On a GPU an SSD
/// transfer is no faster than the host link in its direction.
double transferSeconds(double bytes, exec::Tier tier, bool read,
                       const MachineProfile &m);

/// GB/s of host copies towards the device (`toDevice`) or back.
double hostLinkGBs(bool toDevice, const MachineProfile &m);

/// How many times slower a host copy runs while the other direction is
/// busy: the two directions share the link's `duplex_gbs` (when the
/// profile gives it) where their own rates add up to more; 1 otherwise.
double hostDuplexSlowdown(const MachineProfile &m);

/// The SSD store's best rate (GB/s) reading (`read`) or writing: the bulk
/// rate, or the single-request one when that is higher.
double ssdPeakGBs(bool read, const MachineProfile &m);

/// Seconds to read (`read`) or write `bytes` of the SSD store from or into
/// host memory (the CPU optimizer's staging).
double ssdSeconds(double bytes, bool read, const MachineProfile &m);

/// --strata-offload-optimizer on one function: with `mode` "cpu" or "auto",
/// moves the chosen updates to the CPU (see OffloadOptimizerPass); the tier
/// planner scores placements with it.
/// `groupBytes` overrides cpuJobMinBytes when not negative (0: a job per
/// update); in "auto" mode, updates stay on the device when their landing
/// buffers would take the host tensors past `hostBudget` (0: no budget).
/// `speculate`: see the pass's option.
void offloadOptimizerUpdates(mlir::func::FuncOp func, llvm::StringRef mode,
                             const MachineProfile &m, int64_t groupBytes = -1,
                             uint64_t hostBudget = 0, bool speculate = true);

/// Replays the planned `func` (memory planned, transfers scheduled) on the
/// runtime's schedule and records the predicted step in `exec.predicted`:
/// what --strata-predict-time does for each function, less the per-step
/// schedule (`exec.predicted_spans`) the placer's scoring has no use for.
/// `accesses`: kernelAccesses of `func` as it stands, when known.
void predictStepTime(
    mlir::func::FuncOp func, const MachineProfile &m,
    const std::vector<artifact::StepAccesses> *accesses = nullptr);

} // namespace strata

#endif // STRATA_PASSES_ANALYSIS_COSTMODEL_H
