// Checkpoint.cpp - Saving and restoring a training run's state.

#include "runtime/train/Checkpoint.h"
#include "runtime/support/Crc32c.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Half.h"

#include <algorithm>
#include <cerrno>
#include <climits>
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

/// A checkpoint file being taken up by name: its header, and its index
/// once its region and index have been checked (indexSource).
struct Source {
  std::string path;
  int fd = -1;
  Header h;
  std::vector<Entry> entries;
  std::map<std::string, const Entry *> byName;

  uint64_t fileOffset(const Entry &e) const {
    uint64_t base = e.region == artifact::Region::Params ? 0
                    : e.region == artifact::Region::Host
                        ? h.paramsBytes
                        : h.paramsBytes + h.hostBytes;
    return sizeof(Header) + base + e.offset;
  }
  bool read(const Entry &e, std::vector<char> &out, std::string &error) const {
    out.resize(static_cast<size_t>(e.bytes));
    if (!preadAll(fd, out.data(), out.size(), fileOffset(e)))
      return (error = "'" + path + "' is truncated", false);
    return true;
  }
};

/// Checks a source's region and index checksums and reads its index.
bool indexSource(Source &src, std::string &error) {
  const Header &h = src.h;
  int fd = src.fd;
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
  if (!decodeIndex(index, h, src.entries, error))
    return false;
  for (const Entry &e : src.entries)
    src.byName[e.name] = &e;
  return true;
}

std::string describe(DType dtype, const std::vector<int64_t> &shape) {
  std::string text = dtypeName(dtype);
  text += "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "x" : "") + std::to_string(shape[i]);
  return text + "]";
}

/// The product of `shape`; -1 past int64.
int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d > 0 && n > INT64_MAX / d)
      return -1;
    n *= d;
  }
  return n;
}

/// The parameter of `plan` an optimizer state belongs to, as
/// AttachOptimizer names them ("w" of "w.exp_avg"): the longest name
/// before a '.' of `name` that is a parameter; null for others
/// (clip.previous_norm).
const artifact::ParamEntry *masterParameter(
    const std::map<std::string, const artifact::ParamEntry *> &params,
    const std::string &name) {
  for (size_t dot = name.rfind('.'); dot != std::string::npos && dot > 0;
       dot = name.rfind('.', dot - 1)) {
    auto it = params.find(name.substr(0, dot));
    if (it != params.end() &&
        !(it->second->flags &
          (artifact::ParamEntry::State | artifact::ParamEntry::Constant)))
      return it->second;
  }
  return nullptr;
}

/// The whole tensor's shape of a stored entry of `plan`: a sharded one's
/// whole shape, its own otherwise.
std::vector<int64_t> wholeShapeOf(const artifact::Plan &plan,
                                  const artifact::ParamEntry &p) {
  return (p.flags & artifact::ParamEntry::Sharded) ? p.wholeShape
                                                   : plan.slots[p.slot].shape;
}

/// The whole value of `name` (`dtype`, shape `whole`) from a checkpoint's
/// files: whole in files[0], or (sharded over the files.size() ranks that
/// wrote them) a shard of ceil(numel / files.size()) elements in each.
/// False with `error` when it is in neither form; `found` says whether
/// files[0] has it at all.
bool wholeFromFiles(const std::vector<Source> &files, const std::string &name,
                    DType dtype, const std::vector<int64_t> &whole,
                    std::vector<char> &out, bool &found, std::string &error) {
  const Source &src = files.front();
  auto it = src.byName.find(name);
  found = it != src.byName.end();
  if (!found)
    return false;
  const Entry &e = *it->second;
  int64_t n = elementsOf(whole);
  size_t size = dtypeSize(dtype);
  if (n < 0 || e.dtype != dtype)
    return (error = "'" + name + "' is " + describe(e.dtype, e.shape) +
                    " in the checkpoint and " + describe(dtype, whole) +
                    " (whole) in this plan",
            false);
  if (e.shape == whole) {
    if (e.bytes != static_cast<uint64_t>(n) * size)
      return (error = "'" + name + "' has " + std::to_string(e.bytes) +
                      " bytes in the checkpoint, " +
                      std::to_string(static_cast<uint64_t>(n) * size) +
                      " as its shape says",
              false);
    return src.read(e, out, error);
  }
  int64_t k = static_cast<int64_t>(files.size());
  int64_t chunk = (n + k - 1) / k;
  std::vector<int64_t> want{chunk};
  if (k < 2 || e.shape != want)
    return (error = "'" + name + "' is " + describe(e.dtype, e.shape) +
                    " in the checkpoint and " + describe(dtype, whole) +
                    " in this plan (another model?)",
            false);
  out.assign(static_cast<size_t>(n) * size, 0);
  std::vector<char> bytes;
  for (int64_t f = 0; f < k; ++f) {
    auto part = files[f].byName.find(name);
    if (part == files[f].byName.end() || part->second->dtype != dtype ||
        part->second->shape != want ||
        part->second->bytes != static_cast<uint64_t>(chunk) * size)
      return (error = "'" + name + "' of '" + files[f].path + "' is not " +
                      describe(dtype, want) + " (a shard of " +
                      describe(dtype, whole) + " over " + std::to_string(k) +
                      " ranks)",
              false);
    if (!files[f].read(*part->second, bytes, error))
      return false;
    int64_t from = std::min(n, f * chunk);
    int64_t have = std::min(chunk, n - from);
    std::memcpy(out.data() + from * size, bytes.data(),
                static_cast<size_t>(have) * size);
  }
  return true;
}

/// Opens, checks whole and indexes every other rank's file of the sharded
/// checkpoint whose rank 0 file is files[0] (indexed): files[k] is rank
/// k's. False with `error` naming the first missing or bad one (the files
/// opened so far stay in `files`, for the caller to close).
bool openOtherRanks(std::vector<Source> &files, std::string &error) {
  // Copies: files grows below, which moves files[0].
  const Header h = files.front().h;
  const std::string path = files.front().path;
  files.reserve(h.shardRanks);
  for (uint32_t k = 1; k < h.shardRanks; ++k) {
    files.emplace_back();
    Source &other = files.back();
    other.path = shardCheckpointPath(path, static_cast<int>(k),
                                     static_cast<int>(h.shardRanks), h.step);
    other.fd = ::open(other.path.c_str(), O_RDONLY | O_CLOEXEC);
    std::memset(&other.h, 0, sizeof(other.h));
    std::string why;
    if (other.fd < 0)
      why = std::string("is missing (") + std::strerror(errno) + ")";
    else if (!readExactly(other.fd, &other.h, sizeof(Header)))
      why = "is truncated";
    else if (std::memcmp(other.h.magic, kMagic, 8) != 0 ||
             other.h.version != kCheckpointVersion ||
             other.h.headerCrc != headerCrc(other.h))
      why = "is not a whole Strata checkpoint";
    else if (other.h.planCrc != h.planCrc || other.h.step != h.step ||
             other.h.shardRanks != h.shardRanks)
      why = "is of another run or step";
    else if (!indexSource(other, why))
      why = why.empty() ? "cannot be read" : why;
    if (!why.empty())
      return (error = "its rank " + std::to_string(k) + " shard '" +
                      other.path + "' " + why,
              false);
  }
  return true;
}

/// Takes up a checkpoint of another plan by name (loadCheckpoint). Its
/// parameters and optimizer states may be sharded over files.size() ranks
/// (--shard-optimizer, --shard-parameters: file k holds rank k's shard of
/// each), and this plan's over its own ranks, of which this process is
/// `rank`: each tensor is put together whole from the files (wholeFromFiles)
/// and, where this plan shards it, this rank's part cut from it.
bool remapByName(const std::vector<Source> &files, artifact::Artifact &art,
                 int rank, RemapSummary &summary, std::string &error) {
  const Source &src = files.front();
  const artifact::Plan &plan = art.plan();
  std::map<std::string, const artifact::ParamEntry *> params;
  for (const artifact::ParamEntry &p : plan.params)
    params[p.name] = &p;
  std::set<std::string> taken;
  std::vector<char> whole, part;
  for (const artifact::ParamEntry &p : plan.params) {
    const artifact::Slot &slot = plan.slots[p.slot];
    if (slot.cls != artifact::SlotClass::Parameter &&
        slot.cls != artifact::SlotClass::OptimizerState &&
        slot.cls != artifact::SlotClass::Constant)
      continue;
    // The whole tensor this slot is of: a state's shards are of its
    // parameter's shape.
    std::vector<int64_t> wholeShape = wholeShapeOf(plan, p);
    if (slot.cls == artifact::SlotClass::OptimizerState &&
        !emptyBetweenSteps(slot.name) && slot.shape.size() == 1)
      if (const artifact::ParamEntry *m = masterParameter(params, slot.name)) {
        std::vector<int64_t> of = wholeShapeOf(plan, *m);
        int64_t n = elementsOf(of);
        if (n > 0 && slot.shape != of) {
          int64_t ranks = artifact::dataParallelRanks(plan);
          if (ranks > 1 && slot.shape[0] == (n + ranks - 1) / ranks)
            wholeShape = of;
        }
      }
    bool sharded = slot.shape != wholeShape;
    bool found = false;
    std::string why;
    bool have = wholeFromFiles(files, slot.name, slot.dtype, wholeShape, whole,
                               found, why);
    if (!have && found)
      return (error = why, false);
    if (!have) {
      // Not in the checkpoint: a low-precision copy is made from its
      // master (rounded as the updates round it); what is empty between
      // steps, and constants, keep the artifact's own values.
      std::string masterName = masterOf(slot.name);
      bool half = slot.dtype == DType::BF16 || slot.dtype == DType::F16;
      if (!masterName.empty() && half &&
          wholeFromFiles(files, masterName, DType::F32, wholeShape, whole,
                         found, why)) {
        std::vector<uint16_t> low(whole.size() / 4);
        narrowFloats(reinterpret_cast<const float *>(whole.data()), low.data(),
                     static_cast<int64_t>(low.size()),
                     slot.dtype == DType::BF16);
        whole.assign(reinterpret_cast<const char *>(low.data()),
                     reinterpret_cast<const char *>(low.data()) +
                         low.size() * 2);
        ++summary.narrowed;
      } else if (found) {
        return (error = why, false);
      } else if (slot.cls == artifact::SlotClass::Constant ||
                 emptyBetweenSteps(slot.name)) {
        continue;
      } else {
        return (error = "has no '" + slot.name + "' (" +
                        (slot.cls == artifact::SlotClass::Parameter
                             ? "a parameter"
                             : "an optimizer state") +
                        " of this plan): it is of another model or optimizer",
                false);
      }
    } else {
      taken.insert(slot.name);
      ++summary.copied;
    }
    summary.resharded |= sharded || files.size() > 1;
    const std::vector<char> *value = &whole;
    if (sharded) {
      // This rank's part (zeros past the end).
      part.assign(static_cast<size_t>(slot.bytes), 0);
      uint64_t from = std::min<uint64_t>(
          whole.size(), static_cast<uint64_t>(rank) * slot.bytes);
      uint64_t count = std::min<uint64_t>(slot.bytes, whole.size() - from);
      std::memcpy(part.data(), whole.data() + from, count);
      value = &part;
    }
    if (value->size() != slot.bytes)
      return (error = "'" + slot.name + "' has " + std::to_string(slot.bytes) +
                      " bytes in this plan, " + std::to_string(value->size()) +
                      " as its shape says",
              false);
    if (!art.writeSlot(slot, value->data(), error))
      return (error = "'" + slot.name + "': " + error, false);
  }
  for (const Entry &e : src.entries) {
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
                    RemapSummary *remap, int rank) {
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
  if (h.planCrc != art.plan().payloadCrc || (byName && rank > 0)) {
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
    // A checkpoint of sharded optimizer states: every rank's file of it,
    // each checked whole before anything is taken.
    std::vector<Source> files(1);
    files[0].path = path;
    files[0].fd = fd;
    files[0].h = h;
    auto closeOthers = [&] {
      for (size_t k = 1; k < files.size(); ++k)
        if (files[k].fd >= 0)
          ::close(files[k].fd);
    };
    if (!indexSource(files[0], error))
      return fail(error);
    if (!openOtherRanks(files, error)) {
      closeOthers();
      return fail(error);
    }
    RemapSummary summary;
    bool ok = remapByName(files, art, rank, summary, error);
    closeOthers();
    if (!ok)
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

struct ShardedCheckpoint::Files {
  std::vector<Source> files;
  ~Files() {
    for (Source &f : files)
      if (f.fd >= 0)
        ::close(f.fd);
  }
};

ShardedCheckpoint::ShardedCheckpoint() = default;
ShardedCheckpoint::~ShardedCheckpoint() = default;

bool ShardedCheckpoint::open(const std::string &path, std::string &error) {
  files_ = std::make_unique<Files>();
  files_->files.resize(1);
  Source &first = files_->files.front();
  first.path = path;
  first.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  auto fail = [&](const std::string &why) {
    files_.reset();
    return (error = "checkpoint '" + path + "': " + why, false);
  };
  if (first.fd < 0)
    return fail(std::string("cannot open it: ") + std::strerror(errno));
  std::memset(&first.h, 0, sizeof(first.h));
  if (!readExactly(first.fd, &first.h, sizeof(Header)) ||
      std::memcmp(first.h.magic, kMagic, 8) != 0 ||
      first.h.version != kCheckpointVersion ||
      first.h.headerCrc != headerCrc(first.h))
    return fail("not a whole Strata checkpoint of version " +
                std::to_string(kCheckpointVersion));
  std::string why;
  if (!indexSource(first, why) || !openOtherRanks(files_->files, why))
    return fail(why);
  return true;
}

bool ShardedCheckpoint::readWhole(const artifact::Plan &plan,
                                  const artifact::ParamEntry &p,
                                  std::vector<char> &out,
                                  std::string &error) const {
  if (!files_)
    return (error = "no checkpoint is open", false);
  bool found = false;
  if (wholeFromFiles(files_->files, p.name, plan.slots[p.slot].dtype,
                     wholeShapeOf(plan, p), out, found, error))
    return true;
  if (!found)
    error = "'" + p.name + "' is not in " + files_->files.front().path;
  return false;
}

} // namespace strata::trainer
