// FileUtil.h - Small file helpers: atomic writes, directory handling.

#ifndef STRATA_RUNTIME_SUPPORT_FILEUTIL_H
#define STRATA_RUNTIME_SUPPORT_FILEUTIL_H

#include <cstddef>
#include <string>
#include <vector>

namespace strata {

/// Writes `size` bytes to `path` through a temporary file in the same
/// directory, fsync and rename, so readers see the old or the new file,
/// never a partial one. Returns false with `error` set (disk full included).
bool writeFileAtomically(const std::string &path, const void *data,
                         size_t size, std::string &error);

/// Like writeFileAtomically, with the contents given as several pieces.
struct FilePiece {
  const void *data;
  size_t size;
};
bool writeFileAtomically(const std::string &path,
                         const std::vector<FilePiece> &pieces,
                         std::string &error);

/// Writes all of `size` bytes to `fd`, retrying on EINTR/short writes.
bool writeAll(int fd, const void *data, size_t size);

/// Creates `path` and its parents; false with `error` set on failure.
bool makeDirectories(const std::string &path, std::string &error);

/// fsyncs a directory so that renames inside it are durable.
bool syncDirectory(const std::string &path);

} // namespace strata

#endif // STRATA_RUNTIME_SUPPORT_FILEUTIL_H
