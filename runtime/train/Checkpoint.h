// Checkpoint.h - Saving and restoring a training run's state.
//
// A checkpoint holds all training state (parameters and optimizer state, in
// whichever regions the plan keeps them: device, host, SSD) and the number
// of completed steps, tied to the plan it belongs to.
// It is written to a temporary file, fsynced and renamed over the previous
// one, so a crash or kill -9 at any moment leaves the last complete
// checkpoint in place.
//
//   char[8] "STRACKPT", u32 version, u32 plan_crc, u64 step,
//   u64 region_bytes, u32 region_crc, u32 header_crc, region bytes

#ifndef STRATA_RUNTIME_TRAIN_CHECKPOINT_H
#define STRATA_RUNTIME_TRAIN_CHECKPOINT_H

#include "runtime/artifact/Artifact.h"

#include <cstdint>
#include <string>

namespace strata::trainer {

/// The checkpoint file of a checkpoint directory.
std::string checkpointPath(const std::string &dir);

constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointInfo {
  uint32_t planCrc = 0;
  uint64_t step = 0;
};

/// Writes the artifact's state with `info` to `path` atomically.
bool saveCheckpoint(const std::string &path, const CheckpointInfo &info,
                    artifact::Artifact &artifact, std::string &error);

/// Reads `path` into the artifact's state, checking the format, that it
/// belongs to the artifact's plan, the size and the checksum. On failure the
/// state is undefined: the caller must not continue with it.
bool loadCheckpoint(const std::string &path, artifact::Artifact &artifact,
                    CheckpointInfo &info, std::string &error);

} // namespace strata::trainer

#endif // STRATA_RUNTIME_TRAIN_CHECKPOINT_H
