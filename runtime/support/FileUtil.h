// FileUtil.h - Small file helpers: atomic writes, directory handling.

#ifndef STRATA_RUNTIME_SUPPORT_FILEUTIL_H
#define STRATA_RUNTIME_SUPPORT_FILEUTIL_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

/// Writes `size` bytes to `path` through a temporary file in the same
/// directory, fsync and rename, so readers see the old or the new file,
/// never a partial one. Returns false with `error` set (disk full included).
bool writeFileAtomically(const std::string &path, const void *data, size_t size,
                         std::string &error);

/// Like writeFileAtomically, with the contents given as several pieces.
struct FilePiece {
  const void *data;
  size_t size;
};
bool writeFileAtomically(const std::string &path,
                         const std::vector<FilePiece> &pieces,
                         std::string &error);

/// A file written piece by piece through a temporary beside it (for
/// contents too large to hold in memory), made visible by commit() (fsync,
/// rename, fsync of the directory). Until then, and if any write failed,
/// `path` keeps its old contents; the temporary is removed when the writer
/// is destroyed uncommitted.
class AtomicFileWriter {
public:
  AtomicFileWriter() = default;
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;
  ~AtomicFileWriter();

  bool open(const std::string &path, std::string &error);
  bool write(const void *data, size_t size, std::string &error);
  bool commit(std::string &error);
  /// Bytes written so far.
  uint64_t size() const { return size_; }

private:
  void discard();

  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// For a tool's main(): a write past the file-size limit (ulimit -f) then
/// fails with EFBIG, reported as an error naming the file like a full disk,
/// instead of SIGXFSZ killing the process mid-write.
void ignoreFileSizeSignal();

/// Writes all of `size` bytes to `fd`, retrying on EINTR/short writes.
bool writeAll(int fd, const void *data, size_t size);

/// Owns a file descriptor: closes it when destroyed.
class UniqueFd {
public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd &&other) noexcept : fd_(other.release()) {}
  UniqueFd &operator=(UniqueFd &&other) noexcept {
    if (this != &other)
      reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd &) = delete;
  UniqueFd &operator=(const UniqueFd &) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

private:
  int fd_ = -1;
};

/// Reads exactly `size` bytes at `offset`; false on an error or a short
/// file (errno 0 then).
bool preadAll(int fd, void *out, size_t size, uint64_t offset);

/// Opens `path` for reading when it is a regular file (not a FIFO, device
/// or directory, which would block or mislead a reader); `size` gets its
/// length. An invalid UniqueFd with `error` naming `what` and the path
/// otherwise.
UniqueFd openRegularFile(const std::string &path, const std::string &what,
                         uint64_t &size, std::string &error);

/// Reads all of the regular file `path` into `out` when it is at most
/// `maxBytes`; false with `error` naming `what` and the path otherwise (not
/// a regular file, too large, unreadable).
bool readRegularFile(const std::string &path, const std::string &what,
                     uint64_t maxBytes, std::string &out, std::string &error);

/// Whether anything exists at `path` (a file, a directory, ...).
bool pathExists(const std::string &path);

/// Creates `path` and its parents; false with `error` set on failure.
bool makeDirectories(const std::string &path, std::string &error);

/// fsyncs a directory so that renames inside it are durable.
bool syncDirectory(const std::string &path);

} // namespace strata

#endif // STRATA_RUNTIME_SUPPORT_FILEUTIL_H
