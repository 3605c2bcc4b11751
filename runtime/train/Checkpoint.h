// Checkpoint.h - Saving and restoring a training run's state.
//
// A checkpoint holds the whole parameter region (parameters and optimizer
// state) and the number of completed steps, tied to the plan it belongs to.
// It is written to a temporary file, fsynced and renamed over the previous
// one, so a crash or kill -9 at any moment leaves the last complete
// checkpoint in place.
//
//   char[8] "STRACKPT", u32 version, u32 plan_crc, u64 step,
//   u64 region_bytes, u32 region_crc, u32 header_crc, region bytes

#ifndef STRATA_RUNTIME_TRAIN_CHECKPOINT_H
#define STRATA_RUNTIME_TRAIN_CHECKPOINT_H

#include <cstdint>
#include <string>

namespace strata::train {

constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointInfo {
  uint32_t planCrc = 0;
  uint64_t step = 0;
};

/// Writes `region` with `info` to `path` atomically.
bool saveCheckpoint(const std::string &path, const CheckpointInfo &info,
                    const char *region, uint64_t bytes, std::string &error);

/// Reads `path` into `region` (of `bytes` bytes), checking the format, that
/// it belongs to the plan with `planCrc`, the size and the checksum.
bool loadCheckpoint(const std::string &path, uint32_t planCrc, char *region,
                    uint64_t bytes, CheckpointInfo &info, std::string &error);

} // namespace strata::train

#endif // STRATA_RUNTIME_TRAIN_CHECKPOINT_H
