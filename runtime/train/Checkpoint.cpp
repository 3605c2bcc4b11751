// Checkpoint.cpp - Saving and restoring a training run's state.

#include "runtime/train/Checkpoint.h"
#include "runtime/support/Crc32c.h"
#include "runtime/support/FileUtil.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace strata::train {

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
                    const char *region, uint64_t bytes, std::string &error) {
  Header h;
  std::memcpy(h.magic, kMagic, 8);
  h.version = kCheckpointVersion;
  h.planCrc = info.planCrc;
  h.step = info.step;
  h.regionBytes = bytes;
  h.regionCrc = crc32c(region, bytes);
  h.headerCrc = headerCrc(h);
  return writeFileAtomically(path, {{&h, sizeof(h)}, {region, bytes}},
                             error);
}

bool loadCheckpoint(const std::string &path, uint32_t planCrc, char *region,
                    uint64_t bytes, CheckpointInfo &info, std::string &error) {
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
  if (h.planCrc != planCrc)
    return fail("belongs to another plan (the artifact was recompiled); "
                "start without --resume");
  if (h.regionBytes != bytes)
    return fail("holds " + std::to_string(h.regionBytes) +
                " bytes of state, the plan has " + std::to_string(bytes));
  if (!readExactly(fd, region, bytes))
    return fail("truncated");
  ::close(fd);
  if (crc32c(region, bytes) != h.regionCrc) {
    error = "checkpoint '" + path + "': corrupted (checksum mismatch)";
    return false;
  }
  info.planCrc = h.planCrc;
  info.step = h.step;
  return true;
}

} // namespace strata::train
