// Artifact.h - Opening a compiled artifact directory.

#ifndef STRATA_RUNTIME_ARTIFACT_ARTIFACT_H
#define STRATA_RUNTIME_ARTIFACT_ARTIFACT_H

#include "runtime/artifact/Plan.h"
#include "runtime/support/FileUtil.h"
#include "runtime/tiers/SsdStore.h"

#include <functional>
#include <memory>
#include <string>

namespace strata::artifact {

/// Page-aligned heap memory (RAII); suitable for direct I/O.
class AlignedBuffer {
public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer &&other) noexcept;
  AlignedBuffer &operator=(AlignedBuffer &&other) noexcept;
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;

  char *data() { return data_; }
  const char *data() const { return data_; }
  size_t size() const { return size_; }
  bool valid() const { return data_ != nullptr || size_ == 0; }

private:
  char *data_ = nullptr;
  size_t size_ = 0;
};

/// A loaded artifact: its plan, and its stored tensors read from params.bin
/// (every parameter's checksum verified) into the regions the plan places
/// them in: the device parameter region, the host region, the SSD store.
class Artifact {
public:
  /// ReadWrite opens the SSD store (creating, locking and filling its
  /// files): for running the plan. ReadOnly never touches the SSD
  /// directories: SSD-resident tensors are read where they are stored
  /// (params.bin, or the checkpoint last loaded), so inspecting or
  /// exporting beside a training job cannot disturb it.
  enum class Access { ReadWrite, ReadOnly };

  /// Opens `dir`; false with `error` naming the file and the problem
  /// (missing, truncated, corrupted, other format version). `ssdDirs`, when
  /// given, replaces the SSD directories the plan was compiled with.
  /// `rank` is this process's data-parallel rank: of a sharded parameter
  /// (ParamEntry::Sharded) it stores that rank's part.
  bool open(const std::string &dir, std::string &error,
            const std::vector<std::string> &ssdDirs = {},
            Access access = Access::ReadWrite, int rank = 0);
  /// A stored tensor's value as params.bin holds it (a shard's whole
  /// tensor), checked against its checksum; synthetic ones generated.
  bool readInitial(const ParamEntry &entry, std::vector<char> &out,
                   std::string &error) const;
  bool readOnly() const { return access_ == Access::ReadOnly; }

  /// ReadOnly: the SSD region's bytes now come from the open file `fd`
  /// (owned from now on), starting at byte `base`: a checkpoint just loaded
  /// and verified. The descriptor keeps that very file readable even if a
  /// training job replaces the checkpoint meanwhile.
  void setSsdImage(UniqueFd fd, uint64_t base) {
    ssdImage_ = std::move(fd);
    ssdImageBase_ = base;
    ssdImageIsParams_ = false;
  }

  const Plan &plan() const { return plan_; }
  const std::string &dir() const { return dir_; }
  char *params() { return params_.data(); }
  const char *params() const { return params_.data(); }
  char *host() { return host_.data(); }
  tiers::SsdStore *ssd() { return ssd_.get(); }

  /// Memory of a slot in the device parameter or host region.
  char *memoryOf(const Slot &slot);

  /// Copies a stored slot's bytes out of / into whatever region holds it.
  bool readSlot(const Slot &slot, char *out, std::string &error);
  bool writeSlot(const Slot &slot, const char *in, std::string &error);

  /// Bytes of all mutable state (device parameters, host region, SSD).
  uint64_t stateBytes() const {
    return plan_.paramsBytes + plan_.hostBytes + plan_.ssdBytes;
  }
  /// Streams all state to `sink` in 64 MiB pieces (checkpoints).
  bool readState(const std::function<bool(const char *, size_t)> &sink,
                 std::string &error);
  /// Reads all state back from `source` (fills the buffer it is given).
  bool writeState(const std::function<bool(char *, size_t)> &source,
                  std::string &error);

private:
  std::string dir_;
  Plan plan_;
  AlignedBuffer params_;
  AlignedBuffer host_;
  std::unique_ptr<tiers::SsdStore> ssd_;
  Access access_ = Access::ReadWrite;
  /// ReadOnly: where SSD-resident bytes are read from: params.bin at each
  /// stored tensor's file offset (ssdFileOffset_, by slot), or a checkpoint.
  UniqueFd ssdImage_;
  bool ssdImageIsParams_ = true;
  uint64_t ssdImageBase_ = 0;
  std::vector<uint64_t> ssdFileOffset_;
  /// ReadOnly: the synthetic parameter (index) behind an SSD slot, or -1.
  std::vector<int64_t> ssdSynthetic_;
  bool readSsdImage(const Slot &slot, char *out, std::string &error);
};

} // namespace strata::artifact

#endif // STRATA_RUNTIME_ARTIFACT_ARTIFACT_H
