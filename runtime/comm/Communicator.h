// Communicator.h - The processes of one data-parallel training, and the
// collectives its plans need.
//
// A plan compiled with --data-parallel N has `all_reduce` steps: each rank
// runs the same program on its own slice of the global batch, and the
// gradients are averaged over the ranks before any update reads them. With
// --shard-optimizer they are `reduce_scatter` steps instead (each rank keeps
// its shard of the mean, updates its shard of each parameter) and
// `all_gather` steps put the updated shards together again. The
// executor runs those steps on the communication queue through this
// interface; the trainer uses it to agree on the plan and to average the
// logged loss.
//
// Every rank makes the same calls in the same order (the plan fixes it), and
// calls on one communicator never overlap in time: the executor issues
// collectives to one queue, which runs them one at a time, and the trainer
// calls only while that queue is idle (between runs).
//
// MPI (OpenMPI, from Debian's packages) when the build found it; one
// process otherwise.

#ifndef STRATA_RUNTIME_COMM_COMMUNICATOR_H
#define STRATA_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/support/DType.h"

#include <cstdint>
#include <memory>
#include <string>

namespace strata::comm {

class Communicator {
public:
  virtual ~Communicator() = default;

  /// "mpi" or "self".
  virtual const char *name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// `out` = the mean over the ranks of every rank's `in` (`count`
  /// elements of `dtype`; `in` may be `out`). f32 is summed in f32;
  /// bf16 and f16 are summed in f32 and rounded once. Every rank gets the
  /// same bits, and the same inputs give the same bits run to run.
  virtual bool allReduceMean(const void *in, void *out, int64_t count,
                             DType dtype, std::string &error) = 0;
  /// Sharded optimizer state: `in` (`count` elements of `dtype`, read as
  /// zero-padded to size() * `chunk`) averaged over the ranks as
  /// allReduceMean averages, and only this rank's `chunk` elements of the
  /// mean (from rank() * `chunk`) written to `out`, which does not overlap
  /// `in`.
  virtual bool reduceScatterMean(const void *in, int64_t count, void *out,
                                 int64_t chunk, DType dtype,
                                 std::string &error) = 0;
  /// The inverse: every rank's `chunk` elements at `in`, in rank order,
  /// with the first `count` (at most size() * `chunk`) of them written to
  /// `out`, which does not overlap `in`. Any element type.
  virtual bool allGather(const void *in, int64_t chunk, void *out,
                         int64_t count, DType dtype, std::string &error) = 0;
  /// Sums `count` doubles over the ranks, in place.
  virtual bool allReduceSum(double *values, int64_t count,
                            std::string &error) = 0;
  /// Whether every rank gave the same `value`; false with an error naming
  /// `what` and a rank that differs from rank 0.
  virtual bool agree(const std::string &what, uint64_t value,
                     std::string &error) = 0;
  /// `bytes` at `data` (host memory) from rank `root` to every rank.
  virtual bool broadcast(void *data, uint64_t bytes, int root,
                         std::string &error) = 0;
  /// Whether allReduceMean, reduceScatterMean and allGather take device
  /// memory (NCCL's, on a GPU) rather than host memory.
  virtual bool takesDeviceMemory() const { return false; }
};

/// One process: the mean of one rank is its input.
std::unique_ptr<Communicator> selfCommunicator();

/// Whether this process was started by a launcher of several processes
/// (mpirun: OMPI_COMM_WORLD_SIZE or PMI_SIZE in the environment), and how
/// many it started (1 when not).
int launchedWorldSize();

/// The world this process was launched in: MPI when a launcher started it
/// and this build has MPI, else one process. Null with `error` when a
/// launcher started several processes and this build has no MPI, MPI does
/// not start, or no MPI launcher started it but WORLD_SIZE (torchrun's)
/// says it is one of several.
std::unique_ptr<Communicator> worldCommunicator(std::string &error);

/// Whether this build has MPI.
bool haveMpi();

} // namespace strata::comm

#endif // STRATA_RUNTIME_COMM_COMMUNICATOR_H
