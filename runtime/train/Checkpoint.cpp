// Checkpoint.cpp - Saving and restoring a training run's state.

#include "runtime/train/Checkpoint.h"
#include "runtime/support/Crc32c.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Half.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace strata::trainer {

std::string checkpointPath(const std::string &dir) {
  return dir + "/checkpoint.bin";
}

std::string shardCheckpointPath(const std::string &path, int rank, int ranks,
                                uint64_t step) {
  if (rank == 0)
    return path;
  return path + ".rank-" + std::to_string(rank) + "-of-" +
         std::to_string(ranks) + ".step-" + std::to_string(step);
}

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'C', 'K', 'P', 'T'};

/// Version 1's header (no index).
struct HeaderV1 {
  char magic[8];
  uint32_t version;
  uint32_t planCrc;
  uint64_t step;
  uint64_t regionBytes;
  uint32_t regionCrc;
  uint32_t headerCrc;
};
static_assert(sizeof(HeaderV1) == 40, "checkpoint header layout (v1)");

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t planCrc;
  uint64_t step;
  uint64_t regionBytes;
  uint32_t regionCrc;
  uint32_t indexCrc;
  uint64_t indexBytes;
  uint64_t paramsBytes;
  uint64_t hostBytes;
  uint32_t shardRanks;
  uint32_t headerCrc;
};
static_assert(sizeof(Header) == 72, "checkpoint header layout");

template <typename H> uint32_t headerCrc(const H &h) {
  return crc32c(&h, offsetof(H, headerCrc));
}

bool isStored(artifact::Region region) {
  return region == artifact::Region::Params ||
         region == artifact::Region::Host || region == artifact::Region::Ssd;
}

/// The index of a plan's stored slots (Checkpoint.h).
std::string encodeIndex(const artifact::Plan &plan) {
  std::string out;
  auto put = [&](const void *p, size_t n) {
    out.append(static_cast<const char *>(p), n);
  };
  for (const artifact::Slot &s : plan.slots) {
    if (!isStored(s.region))
      continue;
    uint32_t length = static_cast<uint32_t>(s.name.size());
    put(&length, 4);
    put(s.name.data(), s.name.size());
    uint8_t small[4] = {
        static_cast<uint8_t>(s.dtype), static_cast<uint8_t>(s.region),
        static_cast<uint8_t>(s.cls), static_cast<uint8_t>(s.shape.size())};
    put(small, 4);
    put(&s.offset, 8);
    put(&s.bytes, 8);
    for (int64_t d : s.shape)
      put(&d, 8);
  }
  return out;
}

/// A checkpoint's stored tensor, as its index says.
struct Entry {
  std::string name;
  DType dtype;
  artifact::Region region;
  artifact::SlotClass cls;
  std::vector<int64_t> shape;
  uint64_t offset, bytes;
};

/// The index's entries; false with `error` when it is malformed or an
/// entry lies outside its region.
bool decodeIndex(const std::string &in, const Header &h,
                 std::vector<Entry> &entries, std::string &error) {
  size_t at = 0;
  auto get = [&](void *p, size_t n) {
    if (in.size() - at < n)
      return false;
    std::memcpy(p, in.data() + at, n);
    at += n;
    return true;
  };
  uint64_t ssdBytes = h.regionBytes - h.paramsBytes - h.hostBytes;
  while (at < in.size()) {
    Entry e;
    uint32_t length = 0;
    uint8_t small[4];
    if (!get(&length, 4) || length > in.size() - at)
      return (error = "malformed tensor index", false);
    e.name.assign(in.data() + at, length);
    at += length;
    if (!get(small, 4) || !get(&e.offset, 8) || !get(&e.bytes, 8))
      return (error = "malformed tensor index", false);
    e.dtype = static_cast<DType>(small[0]);
    e.region = static_cast<artifact::Region>(small[1]);
    e.cls = static_cast<artifact::SlotClass>(small[2]);
    e.shape.resize(small[3]);
    for (int64_t &d : e.shape)
      if (!get(&d, 8) || d < 0)
        return (error = "malformed tensor index", false);
    uint64_t size = e.region == artifact::Region::Params ? h.paramsBytes
                    : e.region == artifact::Region::Host ? h.hostBytes
                    : e.region == artifact::Region::Ssd  ? ssdBytes
                                                         : 0;
    if (!isStored(e.region) || e.offset > size || e.bytes > size - e.offset)
      return (error = "tensor index entry '" + e.name +
                      "' lies outside the checkpoint's state",
              false);
    entries.push_back(std::move(e));
  }
  return true;
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
  const artifact::Plan &plan = art.plan();
  std::string index = encodeIndex(plan);
  Header h;
  std::memset(&h, 0, sizeof(h));
  std::memcpy(h.magic, kMagic, 8);
  h.version = kCheckpointVersion;
  h.planCrc = info.planCrc;
  h.step = info.step;
  h.regionBytes = art.stateBytes();
  h.regionCrc = 0;
  h.indexBytes = index.size();
  h.indexCrc = crc32c(index.data(), index.size());
  h.paramsBytes = plan.paramsBytes;
  h.hostBytes = plan.hostBytes;
  h.shardRanks = info.shardRanks;
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
  if (ok && !writeAll(fd, index.data(), index.size())) {
    savedErrno = errno;
    ok = false;
  }
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

namespace {

/// A low-precision copy's master: "w" of "w.bf16" or "w.fp16" (or of
/// "w.bf16.2", when the name was taken), as --strata-low-copies names them.
std::string masterOf(const std::string &name) {
  for (const char *suffix : {".bf16", ".fp16"}) {
    size_t at = name.rfind(suffix);
    if (at == std::string::npos || at == 0)
      continue;
    std::string rest = name.substr(at + std::strlen(suffix));
    bool numbered = rest.size() > 1 && rest[0] == '.' &&
                    rest.find_first_not_of("0123456789", 1) == rest.npos;
    if (rest.empty() || numbered)
      return name.substr(0, at);
  }
  return {};
}

bool endsWith(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// State that holds nothing across a step's end: the gradient
/// accumulators (zeroed by the last micro-batch's updates) and
/// speculation's spare copies (rewritten before they are read).
bool emptyBetweenSteps(const std::string &name) {
  return endsWith(name, ".grad_accum") || name.rfind("speculation.", 0) == 0;
}

/// Takes up a checkpoint of another plan by name (loadCheckpoint).
bool remapByName(int fd, const Header &h, artifact::Artifact &art,
                 RemapSummary &summary, std::string &error) {
  if (h.paramsBytes > h.regionBytes ||
      h.hostBytes > h.regionBytes - h.paramsBytes)
    return (error = "corrupted header (region sizes)", false);
  // The whole region's checksum first: nothing is taken from a damaged one.
  constexpr uint64_t kPiece = uint64_t(64) << 20;
  std::vector<char> piece(static_cast<size_t>(
      std::min<uint64_t>(kPiece, std::max<uint64_t>(h.regionBytes, 1))));
  uint32_t crc = 0;
  for (uint64_t at = 0; at < h.regionBytes; at += kPiece) {
    size_t n = static_cast<size_t>(std::min(kPiece, h.regionBytes - at));
    if (!preadAll(fd, piece.data(), n, sizeof(Header) + at))
      return (error = "truncated", false);
    crc = crc32c(piece.data(), n, crc);
  }
  if (crc != h.regionCrc)
    return (error = "corrupted (checksum mismatch)", false);
  // An index entry is at least 24 bytes and names a slot: far below 4 GiB.
  if (h.indexBytes > (uint64_t(1) << 32))
    return (error = "corrupted header (tensor index size)", false);
  std::string index(static_cast<size_t>(h.indexBytes), '\0');
  if (!preadAll(fd, index.data(), index.size(), sizeof(Header) + h.regionBytes))
    return (error = "truncated tensor index", false);
  if (crc32c(index.data(), index.size()) != h.indexCrc)
    return (error = "corrupted tensor index (checksum mismatch)", false);
  std::vector<Entry> entries;
  if (!decodeIndex(index, h, entries, error))
    return false;
  std::map<std::string, const Entry *> byName;
  for (const Entry &e : entries)
    byName[e.name] = &e;
  auto fileOffset = [&](const Entry &e) {
    uint64_t base = e.region == artifact::Region::Params ? 0
                    : e.region == artifact::Region::Host
                        ? h.paramsBytes
                        : h.paramsBytes + h.hostBytes;
    return sizeof(Header) + base + e.offset;
  };
  auto read = [&](const Entry &e, std::vector<char> &out) {
    out.resize(static_cast<size_t>(e.bytes));
    if (!preadAll(fd, out.data(), out.size(), fileOffset(e)))
      return (error = "truncated", false);
    return true;
  };
  auto describe = [](DType dtype, const std::vector<int64_t> &shape) {
    std::string text = dtypeName(dtype);
    text += "[";
    for (size_t i = 0; i < shape.size(); ++i)
      text += (i ? "x" : "") + std::to_string(shape[i]);
    return text + "]";
  };
  const artifact::Plan &plan = art.plan();
  std::set<std::string> taken;
  std::vector<char> bytes;
  for (const artifact::Slot &slot : plan.slots) {
    if (!isStored(slot.region) ||
        (slot.cls != artifact::SlotClass::Parameter &&
         slot.cls != artifact::SlotClass::OptimizerState &&
         slot.cls != artifact::SlotClass::Constant))
      continue;
    auto it = byName.find(slot.name);
    if (it != byName.end()) {
      const Entry &e = *it->second;
      if (e.dtype != slot.dtype || e.shape != slot.shape)
        return (error = "'" + slot.name + "' is " + describe(e.dtype, e.shape) +
                        " in the checkpoint and " +
                        describe(slot.dtype, slot.shape) +
                        " in this plan (another model?)",
                false);
      if (e.bytes != slot.bytes)
        return (error = "'" + slot.name + "' has " + std::to_string(e.bytes) +
                        " bytes in the checkpoint, " +
                        std::to_string(slot.bytes) + " in this plan",
                false);
      if (!read(e, bytes) || !art.writeSlot(slot, bytes.data(), error))
        return (error = "'" + slot.name + "': " + error, false);
      taken.insert(slot.name);
      ++summary.copied;
      continue;
    }
    // Not in the checkpoint: a low-precision copy is made from its master
    // (rounded as the updates round it); what is empty between steps, and
    // constants, keep the artifact's own values.
    std::string master = masterOf(slot.name);
    auto m = master.empty() ? byName.end() : byName.find(master);
    bool half = slot.dtype == DType::BF16 || slot.dtype == DType::F16;
    if (m != byName.end() && half && m->second->dtype == DType::F32 &&
        m->second->shape == slot.shape &&
        m->second->bytes == static_cast<uint64_t>(slot.numElements()) * 4) {
      if (!read(*m->second, bytes))
        return false;
      std::vector<uint16_t> low(static_cast<size_t>(slot.numElements()));
      narrowFloats(reinterpret_cast<const float *>(bytes.data()), low.data(),
                   slot.numElements(), slot.dtype == DType::BF16);
      if (!art.writeSlot(slot, reinterpret_cast<const char *>(low.data()),
                         error))
        return (error = "'" + slot.name + "': " + error, false);
      ++summary.narrowed;
      continue;
    }
    if (slot.cls == artifact::SlotClass::Constant ||
        emptyBetweenSteps(slot.name))
      continue;
    return (error = "has no '" + slot.name + "' (" +
                    (slot.cls == artifact::SlotClass::Parameter
                         ? "a parameter"
                         : "an optimizer state") +
                    " of this plan): it is of another model or optimizer",
            false);
  }
  for (const Entry &e : entries) {
    if (taken.count(e.name) || e.cls == artifact::SlotClass::Constant ||
        emptyBetweenSteps(e.name))
      continue;
    if (e.cls == artifact::SlotClass::Parameter && masterOf(e.name).empty())
      return (error = "holds the parameter '" + e.name +
                      "', which this plan does not have: it is of another "
                      "model",
              false);
    if (e.cls == artifact::SlotClass::OptimizerState)
      summary.unused.push_back(e.name);
  }
  summary.otherPlan = true;
  return true;
}

} // namespace

bool loadCheckpoint(const std::string &path, artifact::Artifact &art,
                    CheckpointInfo &info, std::string &error, bool byName,
                    RemapSummary *remap) {
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
  // Both versions start with the magic and the version.
  Header h;
  std::memset(&h, 0, sizeof(h));
  if (!readExactly(fd, &h, 12) || std::memcmp(h.magic, kMagic, 8) != 0)
    return fail("not a Strata checkpoint");
  uint64_t dataStart = sizeof(Header);
  if (h.version == 1) {
    HeaderV1 old;
    std::memcpy(&old, &h, 12);
    if (!readExactly(fd, reinterpret_cast<char *>(&old) + 12, sizeof(old) - 12))
      return fail("truncated header");
    if (old.headerCrc != headerCrc(old))
      return fail("corrupted header (checksum mismatch)");
    h.planCrc = old.planCrc;
    h.step = old.step;
    h.regionBytes = old.regionBytes;
    h.regionCrc = old.regionCrc;
    dataStart = sizeof(HeaderV1);
  } else if (h.version == kCheckpointVersion) {
    if (!readExactly(fd, reinterpret_cast<char *>(&h) + 12, sizeof(h) - 12))
      return fail("truncated header");
    if (h.headerCrc != headerCrc(h))
      return fail("corrupted header (checksum mismatch)");
  } else {
    return fail("format version " + std::to_string(h.version) +
                ", this runtime reads 1 and " +
                std::to_string(kCheckpointVersion));
  }
  if (h.planCrc != art.plan().payloadCrc) {
    // A shard holds 1/N of each optimizer state; taking it up by name
    // would need every rank's file re-cut for another number of ranks.
    if (byName && h.version != 1 && h.shardRanks > 0)
      return fail("holds one rank's shard of the optimizer states of a run "
                  "of " +
                  std::to_string(h.shardRanks) +
                  " ranks (--shard-optimizer): only the plan that wrote it, "
                  "on as many ranks, resumes from it (re-sharding for "
                  "another plan or number of ranks is not supported yet)");
    if (byName && artifact::shardsOptimizer(art.plan()))
      return fail("is of another plan, and this plan shards its optimizer "
                  "states (--shard-optimizer): it resumes only from its own "
                  "checkpoints (taking states up by name into shards is not "
                  "supported yet)");
    if (!byName)
      return fail("belongs to another plan (the artifact was recompiled); "
                  "take it up by tensor name with --resume-by-name, or start "
                  "without --resume");
    if (h.version == 1)
      return fail("is of format version 1, which has no tensor index: only "
                  "the plan that wrote it can resume from it");
    if (art.readOnly())
      return fail("belongs to another plan; read it with the artifact that "
                  "wrote it");
    RemapSummary summary;
    if (!remapByName(fd, h, art, summary, error))
      return fail(error);
    if (remap)
      *remap = std::move(summary);
    info.planCrc = h.planCrc;
    info.step = h.step;
    ::close(fd);
    return true;
  }
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
  info.shardRanks = h.version == 1 ? 0 : h.shardRanks;
  if (art.readOnly())
    art.setSsdImage(UniqueFd(::dup(fd)),
                    dataStart + art.plan().paramsBytes + art.plan().hostBytes);
  ::close(fd);
  return true;
}

} // namespace strata::trainer
