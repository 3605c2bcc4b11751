// Checkpoint.h - Saving and restoring a training run's state.
//
// A checkpoint holds all training state (parameters and optimizer state, in
// whichever regions the plan keeps them: device, host, SSD) and the number
// of completed steps, tied to the plan it belongs to, and an index of its
// stored tensors (name, dtype, shape, where in the region bytes), so that
// another plan of the same model (recompiled with other budgets, another
// world size, another learning rate) can take it up by name.
// It is written to a temporary file, fsynced and renamed over the previous
// one, so a crash or kill -9 at any moment leaves the last complete
// checkpoint in place. A plan that shards its optimizer states over N ranks
// writes N files (shardCheckpointPath); shard_ranks is N in each.
//
//   char[8] "STRACKPT", u32 version, u32 plan_crc, u64 step,
//   u64 region_bytes, u32 region_crc, u32 index_crc, u64 index_bytes,
//   u64 params_bytes, u64 host_bytes, u32 shard_ranks, u32 header_crc,
//   region bytes (device parameters, host region, SSD region), index
//
// The index, one entry a stored slot: u32 name length, name, u8 dtype,
// u8 region, u8 class, u8 rank, u64 offset in its region, u64 bytes,
// i64 dims[rank]. Version 1 (before the index: a 40-byte header ending at
// region_crc, header_crc) is read for its own plan only.

#ifndef STRATA_RUNTIME_TRAIN_CHECKPOINT_H
#define STRATA_RUNTIME_TRAIN_CHECKPOINT_H

#include "runtime/artifact/Artifact.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::trainer {

/// The checkpoint file of a checkpoint directory.
std::string checkpointPath(const std::string &dir);

constexpr uint32_t kCheckpointVersion = 2;

struct CheckpointInfo {
  uint32_t planCrc = 0;
  uint64_t step = 0;
  /// Of a plan that shards its optimizer (--shard-optimizer): the number of
  /// ranks, each of whose files holds the parameters and that rank's shard
  /// of the optimizer states (the header's reserved word); 0 otherwise.
  uint32_t shardRanks = 0;
};

/// Rank `rank`'s file of a sharded checkpoint (CheckpointInfo::shardRanks)
/// of `ranks` at `step`, beside `path`: rank 0's is `path` itself, written
/// last, once every other rank's is: a checkpoint at a step exists only
/// when all its files do.
std::string shardCheckpointPath(const std::string &path, int rank, int ranks,
                                uint64_t step);

/// Writes the artifact's state with `info` to `path` atomically.
bool saveCheckpoint(const std::string &path, const CheckpointInfo &info,
                    artifact::Artifact &artifact, std::string &error);

/// How a checkpoint of another plan was taken up (loadCheckpoint's
/// `byName`): tensors copied from it, low-precision copies made from their
/// masters, and the checkpoint's own tensors this plan has no use for.
struct RemapSummary {
  bool otherPlan = false;
  /// Optimizer states were put together from the checkpoint's shards or
  /// cut into this plan's (another number of ranks, --shard-optimizer).
  bool resharded = false;
  int64_t copied = 0, narrowed = 0;
  std::vector<std::string> unused;
};

/// Reads `path` into the artifact's state, checking the format, the size
/// and the checksums, and that it belongs to the artifact's plan; with
/// `byName` a checkpoint of another plan is taken up by tensor name
/// instead: every parameter and optimizer state of this plan must be in it
/// with the same dtype and shape (a low-precision copy may be made from its
/// master; gradient accumulators and speculation's spare copies start
/// empty, as at any step's end), and every parameter of it must be in this
/// plan. Sharded optimizer states (--shard-optimizer) are re-cut by name:
/// a checkpoint of N ranks' shards is read from all N files, and a plan
/// that shards its states takes rank `rank`'s part of each (with `byName`,
/// also from its own plan's checkpoint). On failure the state is
/// undefined: the caller must not continue with it.
bool loadCheckpoint(const std::string &path, artifact::Artifact &artifact,
                    CheckpointInfo &info, std::string &error,
                    bool byName = false, RemapSummary *remap = nullptr,
                    int rank = 0);

/// A sharded checkpoint's tensors put together whole (strata-export of a
/// plan with sharded parameters): rank 0's file and every other rank's of
/// its step, each checked whole when opened.
class ShardedCheckpoint {
public:
  ShardedCheckpoint();
  ~ShardedCheckpoint();
  /// Opens rank 0's file `path` and the other ranks' beside it.
  bool open(const std::string &path, std::string &error);
  /// The whole value of stored tensor `p` of `plan`: whole in rank 0's
  /// file, or its shard from each rank's.
  bool readWhole(const artifact::Plan &plan, const artifact::ParamEntry &p,
                 std::vector<char> &out, std::string &error) const;

private:
  struct Files;
  std::unique_ptr<Files> files_;
};

} // namespace strata::trainer

#endif // STRATA_RUNTIME_TRAIN_CHECKPOINT_H
