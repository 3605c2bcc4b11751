// Artifact.cpp - Opening a compiled artifact directory.

#include "runtime/artifact/Artifact.h"
#include "runtime/support/Checked.h"
#include "runtime/support/Crc32c.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace strata::artifact {

namespace {
/// The size of a transparent huge page on x86-64 and most arm64 kernels.
constexpr size_t kHugePage = size_t(2) << 20;
} // namespace

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  if (bytes > kMaxRegionBytes)
    return; // Padding would wrap; left empty, so not valid().
  // At least one page, even for 0 bytes: kernels of empty tensors get a
  // real pointer (memcpy and memset must never see null, even for 0 bytes).
  size_t used = std::max<size_t>(pagePadded(bytes), kParamAlignment);
  // Buffers of a huge page or more start on one and ask for huge pages:
  // an SSD request of 1 MiB into 4 KiB pages has 256 segments, more than a
  // virtio or NVMe request takes (the drive then sees two requests, one of
  // a few pages), while a huge page is one segment; the bulk reads of
  // bench/ssd_vs_fio.py run about twice as fast. The tail past the last
  // whole huge page may cost up to one huge page of resident memory.
  bool huge = used >= kHugePage;
  size_t alignment = huge ? kHugePage : kParamAlignment;
  size_t allocated = alignUp(used, alignment);
  data_ = static_cast<char *>(std::aligned_alloc(alignment, allocated));
  if (data_ && huge)
    ::madvise(data_, allocated, MADV_HUGEPAGE); // Advice: failure is fine.
  // Zeroed, so the gaps between tensors are deterministic: two runs that
  // reach the same state write byte-identical checkpoints.
  if (data_)
    std::memset(data_, 0, used);
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer &&other) noexcept
    : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

AlignedBuffer &AlignedBuffer::operator=(AlignedBuffer &&other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

bool Artifact::open(const std::string &dir, std::string &error,
                    const std::vector<std::string> &ssdDirs, Access access,
                    int rank) {
  dir_ = dir;
  access_ = access;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    error = "'" + dir +
            "' is not an artifact directory (compile one with "
            "strata-compile model.onnx -o " +
            dir + ")";
    return false;
  }
  if (!readPlan(dir + "/plan.bin", plan_, error))
    return false;
  std::string path = dir + "/params.bin";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  if (::fstat(fd, &st) != 0 ||
      static_cast<uint64_t>(st.st_size) != plan_.paramsFileBytes) {
    ::close(fd);
    error = "'" + path + "' is " + std::to_string(st.st_size) +
            " bytes, the plan expects " +
            std::to_string(plan_.paramsFileBytes) +
            " (truncated or from another compile)";
    return false;
  }
  params_ = AlignedBuffer(plan_.paramsBytes);
  host_ = AlignedBuffer(plan_.hostBytes);
  if (!params_.valid() || !host_.valid()) {
    ::close(fd);
    error = "out of memory for the parameter regions (" +
            std::to_string(plan_.paramsBytes + plan_.hostBytes) + " bytes)";
    return false;
  }
  ssdFileOffset_.assign(plan_.slots.size(), UINT64_MAX);
  ssdSynthetic_.assign(plan_.slots.size(), -1);
  if (plan_.ssdBytes > 0 && access == Access::ReadWrite) {
    const std::vector<std::string> &dirs =
        ssdDirs.empty() ? plan_.ssdDirs : ssdDirs;
    ssd_ =
        tiers::SsdStore::open(dirs, plan_.ssdBytes, tiers::SsdOptions(), error);
    if (!ssd_) {
      ::close(fd);
      return false;
    }
  }
  // Each stored tensor goes from params.bin to its region.
  AlignedBuffer bounce;
  std::vector<char> whole;
  for (size_t index = 0; index < plan_.params.size(); ++index) {
    const ParamEntry &p = plan_.params[index];
    const Slot &slot = plan_.slots[p.slot];
    uint64_t padded = pagePadded(p.bytes);
    char *dst = slot.region == Region::Ssd ? nullptr : memoryOf(slot);
    if (slot.region == Region::Ssd) {
      if (bounce.size() < padded)
        bounce = AlignedBuffer(padded);
      std::memset(bounce.data(), 0, padded);
      dst = bounce.data();
    }
    bool synthetic = p.flags & ParamEntry::Synthetic;
    // A shard: the whole tensor is read and checked, and this rank's part
    // of it kept.
    bool shard = (p.flags & ParamEntry::Sharded) && !synthetic;
    char *read = dst;
    if (shard) {
      whole.resize(p.bytes);
      read = whole.data();
    }
    if (synthetic)
      fillSynthetic(plan_, index, dst, rank);
    size_t done = synthetic ? p.bytes : 0;
    while (done < p.bytes) {
      ssize_t r = ::pread(fd, read + done, p.bytes - done,
                          static_cast<off_t>(p.fileOffset + done));
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0) {
        ::close(fd);
        error = "cannot read '" + path + "': " +
                (r < 0 ? std::strerror(errno) : "unexpected end of file");
        return false;
      }
      done += static_cast<size_t>(r);
    }
    if (!synthetic && crc32c(read, p.bytes) != p.crc) {
      ::close(fd);
      error = "'" + path + "': parameter '" + p.name +
              "' is corrupted (checksum mismatch)";
      return false;
    }
    if (shard) {
      uint64_t from =
          std::min<uint64_t>(p.bytes, static_cast<uint64_t>(rank) * slot.bytes);
      uint64_t have = std::min<uint64_t>(slot.bytes, p.bytes - from);
      std::memcpy(dst, whole.data() + from, have);
      std::memset(dst + have, 0, slot.bytes - have);
    }
    if (slot.region == Region::Ssd && !ssd_) {
      // ReadOnly: read it from here (synthetic: generate it again).
      if (synthetic)
        ssdSynthetic_[p.slot] = static_cast<int64_t>(index);
      else
        ssdFileOffset_[p.slot] = p.fileOffset;
      if (ssdImage_.get() < 0)
        ssdImage_.reset(::dup(fd));
      continue;
    }
    if (slot.region == Region::Ssd &&
        !ssd_->write(slot.offset, dst, padded, error)) {
      ::close(fd);
      return false;
    }
  }
  ::close(fd);
  return true;
}

char *Artifact::memoryOf(const Slot &slot) {
  if (slot.region == Region::Params)
    return params_.data() + slot.offset;
  if (slot.region == Region::Host)
    return host_.data() + slot.offset;
  return nullptr;
}

bool Artifact::readSlot(const Slot &slot, char *out, std::string &error) {
  if (slot.bytes == 0)
    return true;
  if (slot.region != Region::Ssd) {
    std::memcpy(out, memoryOf(slot), slot.bytes);
    return true;
  }
  if (readOnly())
    return readSsdImage(slot, out, error);
  uint64_t padded = pagePadded(slot.bytes);
  AlignedBuffer bounce(padded);
  if (!ssd_ || !ssd_->read(slot.offset, bounce.data(), padded, error))
    return error.empty() ? (error = "no SSD store", false) : false;
  std::memcpy(out, bounce.data(), slot.bytes);
  return true;
}

bool Artifact::writeSlot(const Slot &slot, const char *in, std::string &error) {
  if (slot.bytes == 0)
    return true;
  if (slot.region != Region::Ssd) {
    std::memcpy(memoryOf(slot), in, slot.bytes);
    return true;
  }
  if (readOnly())
    return (error = "'" + dir_ + "' is open read-only: cannot change '" +
                    slot.name + "' on the SSD tier",
            false);
  uint64_t padded = pagePadded(slot.bytes);
  AlignedBuffer bounce(padded);
  std::memset(bounce.data(), 0, padded);
  std::memcpy(bounce.data(), in, slot.bytes);
  if (!ssd_)
    return (error = "no SSD store", false);
  return ssd_->write(slot.offset, bounce.data(), padded, error);
}

namespace {

/// Calls `each(offset, bytes, buffer)` for the SSD store's `total` bytes in
/// chunks of up to 64 MiB through one aligned buffer; stops at the first
/// false.
template <typename F> bool forEachSsdChunk(uint64_t total, F &&each) {
  const uint64_t chunk = uint64_t(64) << 20;
  AlignedBuffer buffer(std::min<uint64_t>(chunk, total));
  for (uint64_t off = 0; off < total; off += chunk)
    if (!each(off, std::min(chunk, total - off), buffer.data()))
      return false;
  return true;
}

} // namespace

bool Artifact::readInitial(const ParamEntry &p, std::vector<char> &out,
                           std::string &error) const {
  size_t index = static_cast<size_t>(&p - plan_.params.data());
  if (index >= plan_.params.size())
    return (error = "not a stored tensor of this plan", false);
  if (p.flags & ParamEntry::Synthetic) {
    uint64_t bytes = p.bytes;
    if (p.flags & ParamEntry::Sharded)
      bytes =
          checkedByteSize(p.wholeShape, dtypeSize(plan_.slots[p.slot].dtype))
              .value_or(0);
    out.assign(static_cast<size_t>(bytes), 0);
    fillSynthetic(plan_, index, out.data(), 0, /*whole=*/true);
    return true;
  }
  out.assign(static_cast<size_t>(p.bytes), 0);
  std::string path = dir_ + "/params.bin";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0 || !preadAll(fd.get(), out.data(), out.size(), p.fileOffset))
    return (error = "cannot read '" + p.name + "' from '" + path +
                    "': " + (errno ? std::strerror(errno) : "truncated"),
            false);
  if (crc32c(out.data(), out.size()) != p.crc)
    return (error = "'" + path + "': parameter '" + p.name +
                    "' is corrupted (checksum mismatch)",
            false);
  return true;
}

bool Artifact::readSsdImage(const Slot &slot, char *out, std::string &error) {
  uint64_t offset = ssdImageBase_ + slot.offset;
  if (ssdImageIsParams_) {
    size_t index = static_cast<size_t>(&slot - plan_.slots.data());
    if (index < ssdSynthetic_.size() && ssdSynthetic_[index] >= 0) {
      fillSynthetic(plan_, static_cast<size_t>(ssdSynthetic_[index]), out);
      return true;
    }
    if (index >= ssdFileOffset_.size() || ssdFileOffset_[index] == UINT64_MAX)
      return (error = "'" + slot.name +
                      "' lives on the SSD tier and is not "
                      "a stored tensor; it is only readable during a run",
              false);
    offset = ssdFileOffset_[index];
  }
  if (!preadAll(ssdImage_.get(), out, slot.bytes, offset))
    return (error = "cannot read '" + slot.name + "' (SSD tier) from " +
                    (ssdImageIsParams_ ? "'" + dir_ + "/params.bin'"
                                       : std::string("the checkpoint")) +
                    ": " +
                    (errno ? std::strerror(errno) : "unexpected end of file"),
            false);
  return true;
}

bool Artifact::readState(const std::function<bool(const char *, size_t)> &sink,
                         std::string &error) {
  if (readOnly() && plan_.ssdBytes > 0)
    return (error = "'" + dir_ + "' is open read-only (no SSD store)", false);
  // The sink is a write to a file: errno says why it failed (disk full,
  // past the file-size limit).
  auto failed = [&] {
    error = std::string("cannot write the state: ") +
            (errno ? std::strerror(errno) : "short write");
    return false;
  };
  errno = 0;
  if (!sink(params_.data(), plan_.paramsBytes) ||
      !sink(host_.data(), plan_.hostBytes))
    return failed();
  return forEachSsdChunk(plan_.ssdBytes, [&](uint64_t off, uint64_t n,
                                             char *buffer) {
    return ssd_->read(off, buffer, n, error) && (sink(buffer, n) || failed());
  });
}

bool Artifact::writeState(const std::function<bool(char *, size_t)> &source,
                          std::string &error) {
  auto failed = [&] {
    error = std::string("cannot read the state: ") +
            (errno ? std::strerror(errno) : "unexpected end of file");
    return false;
  };
  errno = 0;
  if (!source(params_.data(), plan_.paramsBytes) ||
      !source(host_.data(), plan_.hostBytes))
    return failed();
  return forEachSsdChunk(
      plan_.ssdBytes, [&](uint64_t off, uint64_t n, char *buffer) {
        // ReadOnly: the bytes are only checked (the caller's checksum); reads
        // of SSD slots then go to the file they came from (setSsdImage).
        return (source(buffer, n) || failed()) &&
               (readOnly() || ssd_->write(off, buffer, n, error));
      });
}

} // namespace strata::artifact
