// FileLock.h - Advisory locks between Strata processes.
//
// A training run locks its artifact, its checkpoint directory and every SSD
// directory it uses, so that a second process pointed at the same files is
// refused with a clear error instead of silently overwriting tensors. The
// locks are flock(2) locks on a small file (`.strata.lock`) that holds the
// holder's pid and purpose for the message the next process prints; the
// kernel drops them when the process exits, killed or not, so nothing is
// ever left to clean up by hand.

#ifndef STRATA_RUNTIME_SUPPORT_FILELOCK_H
#define STRATA_RUNTIME_SUPPORT_FILELOCK_H

#include <cstdint>
#include <string>

namespace strata {

class FileLock {
public:
  enum class Mode { Shared, Exclusive };

  FileLock() = default;
  ~FileLock();
  FileLock(FileLock &&other) noexcept;
  FileLock &operator=(FileLock &&other) noexcept;
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;

  /// Locks directory `dir` (through `dir/.strata.lock`) without waiting.
  /// `purpose` says what this process does there ("training", "compiling
  /// into it"); it is recorded for the error another process prints. False
  /// with `error` naming the directory, the holder's pid and purpose when
  /// another process holds a conflicting lock.
  bool lockDirectory(const std::string &dir, Mode mode,
                     const std::string &purpose, std::string &error);

  bool held() const { return held_; }
  void release();

private:
  /// The lock file's identity. Locks are per process: a directory this
  /// process holds already (an SSD directory that is also the checkpoint
  /// directory) is shared, not refused; the flock goes when the last holder
  /// releases it.
  uint64_t device_ = 0, inode_ = 0;
  bool held_ = false;
};

/// The name of the lock file inside a locked directory.
constexpr const char *kLockFileName = ".strata.lock";

} // namespace strata

#endif // STRATA_RUNTIME_SUPPORT_FILELOCK_H
