// Artifact.h - Opening a compiled artifact directory.

#ifndef STRATA_RUNTIME_ARTIFACT_ARTIFACT_H
#define STRATA_RUNTIME_ARTIFACT_ARTIFACT_H

#include "runtime/artifact/Plan.h"

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

/// A loaded artifact: its plan, and its parameter region read from
/// params.bin with every parameter's checksum verified.
class Artifact {
public:
  /// Opens `dir`; false with `error` naming the file and the problem
  /// (missing, truncated, corrupted, other format version).
  bool open(const std::string &dir, std::string &error);

  const Plan &plan() const { return plan_; }
  const std::string &dir() const { return dir_; }
  char *params() { return params_.data(); }
  const char *params() const { return params_.data(); }

private:
  std::string dir_;
  Plan plan_;
  AlignedBuffer params_;
};

} // namespace strata::artifact

#endif // STRATA_RUNTIME_ARTIFACT_ARTIFACT_H
