// Checkpoint.cpp - Saving and restoring a training run's state.

#include "runtime/train/Checkpoint.h"
#include "runtime/support/Crc32c.h"
#include "runtime/support/FileUtil.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace strata::trainer {

std::string checkpointPath(const std::string &dir) {
  return dir + "/checkpoint.bin";
}

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'C', 'K', 'P', 'T'};

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t planCrc;
  uint64_t step;
  uint64_t regionBytes;
  uint32_t regionCrc;
  uint32_t headerCrc;
};
static_assert(sizeof(Header) == 40, "checkpoint header layout");

uint32_t headerCrc(const Header &h) {
  return crc32c(&h, offsetof(Header, headerCrc));
}

bool readExactly(int fd, void *out, size_t size) {
  char *p = static_cast<char *>(out);
  while (size > 0) {
    ssize_t r = ::read(fd, p, size);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    size -= static_cast<size_t>(r);
  }
  return true;
}

} // namespace

bool saveCheckpoint(const std::string &path, const CheckpointInfo &info,
                    artifact::Artifact &art, std::string &error) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot create '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  Header h;
  std::memcpy(h.magic, kMagic, 8);
  h.version = kCheckpointVersion;
  h.planCrc = info.planCrc;
  h.step = info.step;
  h.regionBytes = art.stateBytes();
  h.regionCrc = 0;
  bool ok = writeAll(fd, &h, sizeof(h));
  int savedErrno = 0;
  ok = ok && art.readState(
                 [&](const char *data, size_t n) {
                   h.regionCrc = crc32c(data, n, h.regionCrc);
                   if (writeAll(fd, data, n))
                     return true;
                   savedErrno = errno;
                   return false;
                 },
                 error);
  h.headerCrc = headerCrc(h);
  ok = ok && ::pwrite(fd, &h, sizeof(h), 0) == sizeof(h) && ::fsync(fd) == 0;
  if (!ok && !savedErrno)
    savedErrno = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot write checkpoint '" + path + "': " +
            (error.empty() ? std::strerror(savedErrno ? savedErrno : errno)
                           : error) +
            (savedErrno == ENOSPC ? " (the disk is full)" : "");
    ::unlink(tmp.c_str());
    return false;
  }
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (!syncDirectory(dir)) {
    error = "wrote checkpoint '" + path + "' but cannot make it durable " +
            "(fsync of " + dir + "): " + std::strerror(errno);
    return false;
  }
  return true;
}

bool loadCheckpoint(const std::string &path, artifact::Artifact &art,
                    CheckpointInfo &info, std::string &error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open checkpoint '" + path + "': " + std::strerror(errno);
    return false;
  }
  auto fail = [&](const std::string &why) {
    ::close(fd);
    error = "checkpoint '" + path + "': " + why;
    return false;
  };
  Header h;
  if (!readExactly(fd, &h, sizeof(h)) || std::memcmp(h.magic, kMagic, 8) != 0)
    return fail("not a Strata checkpoint");
  if (h.headerCrc != headerCrc(h))
    return fail("corrupted header (checksum mismatch)");
  if (h.version != kCheckpointVersion)
    return fail("format version " + std::to_string(h.version) +
                ", this runtime reads " + std::to_string(kCheckpointVersion));
  if (h.planCrc != art.plan().payloadCrc)
    return fail("belongs to another plan (the artifact was recompiled); "
                "start without --resume");
  if (h.regionBytes != art.stateBytes())
    return fail("holds " + std::to_string(h.regionBytes) +
                " bytes of state, the plan has " +
                std::to_string(art.stateBytes()));
  uint32_t crc = 0;
  bool truncated = false;
  bool ok = art.writeState(
      [&](char *data, size_t n) {
        if (!readExactly(fd, data, n)) {
          truncated = true;
          return false;
        }
        crc = crc32c(data, n, crc);
        return true;
      },
      error);
  if (!ok)
    return fail(truncated ? "truncated" : error);
  if (crc != h.regionCrc)
    return fail("corrupted (checksum mismatch)");
  info.planCrc = h.planCrc;
  info.step = h.step;
  if (art.readOnly())
    art.setSsdImage(UniqueFd(::dup(fd)), sizeof(Header) +
                                             art.plan().paramsBytes +
                                             art.plan().hostBytes);
  ::close(fd);
  return true;
}

} // namespace strata::trainer
