// PlanIO.cpp - plan.bin: the codec, the validator and the synthetic fill.
//
// The plan's names and queries (what a step reads and writes, which queue
// runs it) are Plan.cpp's; the step-order rules (waits, the race check the
// validator runs) are StepOrder.cpp's, which reads those queries.

#include "runtime/artifact/KernelContract.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/artifact/Plan.h"
#include "runtime/artifact/StepOrder.h"
#include "runtime/support/Checked.h"
#include "runtime/support/Crc32c.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Half.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

namespace strata::artifact {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'P', 'L', 'A', 'N'};
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 4 + 4;

class Writer {
public:
  void u8(uint8_t v) { bytes_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string &s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  template <typename T, typename F> void vec(const std::vector<T> &v, F each) {
    u32(static_cast<uint32_t>(v.size()));
    for (const T &x : v)
      each(x);
  }
  void raw(const void *p, size_t n) {
    bytes_.insert(bytes_.end(), static_cast<const char *>(p),
                  static_cast<const char *>(p) + n);
  }
  std::string &bytes() { return bytes_; }

private:
  std::string bytes_;
};

class Reader {
public:
  Reader(const char *p, size_t n) : p_(p), end_(p + n) {}
  bool ok() const { return ok_; }
  uint8_t u8() {
    uint8_t v = 0;
    raw(&v, 1);
    return v;
  }
  uint16_t u16() {
    uint16_t v = 0;
    raw(&v, 2);
    return v;
  }
  uint32_t u32() {
    uint32_t v = 0;
    raw(&v, 4);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    raw(&v, 8);
    return v;
  }
  int64_t i64() {
    int64_t v = 0;
    raw(&v, 8);
    return v;
  }
  double f64() {
    double v = 0;
    raw(&v, 8);
    return v;
  }
  std::string str() {
    uint32_t n = u32();
    if (!check(n))
      return {};
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  template <typename T, typename F> std::vector<T> vec(F each) {
    uint32_t n = u32();
    std::vector<T> v;
    // Each item is at least one byte: a count beyond the rest is corrupt.
    if (!check(n))
      return v;
    v.reserve(n);
    for (uint32_t i = 0; i < n && ok_; ++i)
      v.push_back(each());
    return v;
  }
  bool atEnd() const { return p_ == end_; }

private:
  bool check(size_t n) {
    if (!ok_ || static_cast<size_t>(end_ - p_) < n)
      ok_ = false;
    return ok_;
  }
  void raw(void *out, size_t n) {
    if (!check(n))
      return;
    std::memcpy(out, p_, n);
    p_ += n;
  }
  const char *p_;
  const char *end_;
  bool ok_ = true;
};

std::string encodePayload(const Plan &plan) {
  Writer w;
  w.str(plan.producer);
  w.str(plan.sourceModel);
  w.u64(plan.sourceFingerprint);
  w.str(plan.mode);
  w.u64(plan.arenaBytes);
  w.u64(plan.paramsBytes);
  w.vec(plan.slots, [&](const Slot &s) {
    w.str(s.name);
    w.u8(static_cast<uint8_t>(s.dtype));
    w.vec(s.shape, [&](int64_t d) { w.i64(d); });
    w.u8(static_cast<uint8_t>(s.region));
    w.u64(s.offset);
    w.u64(s.bytes);
    w.u8(static_cast<uint8_t>(s.cls));
  });
  auto binding = [&](const Binding &b) {
    w.str(b.name);
    w.u32(b.slot);
  };
  w.vec(plan.inputs, binding);
  w.vec(plan.outputs, binding);
  w.vec(plan.params, [&](const ParamEntry &p) {
    w.str(p.name);
    w.u32(p.slot);
    w.u8(p.flags);
    w.u64(p.fileOffset);
    w.u64(p.bytes);
    w.u32(p.crc);
    w.f64(p.mean);
    w.f64(p.stddev);
    w.u32(p.shardRanks);
    w.vec(p.wholeShape, [&](int64_t d) { w.i64(d); });
  });
  w.vec(plan.steps, [&](const Step &s) {
    w.u16(static_cast<uint16_t>(s.kernel));
    w.vec(s.inputs, [&](uint32_t i) { w.u32(i); });
    w.vec(s.outputs, [&](uint32_t i) { w.u32(i); });
    w.vec(s.ints, [&](int64_t i) { w.i64(i); });
    w.vec(s.floats, [&](double f) { w.f64(f); });
    w.i64(s.issueAfter);
    w.u8(static_cast<uint8_t>(s.queue));
    w.vec(s.waits, [&](uint32_t i) { w.u32(i); });
  });
  w.u8(plan.schedule.kind);
  w.i64(plan.schedule.warmupSteps);
  w.i64(plan.schedule.totalSteps);
  w.f64(plan.schedule.minRatio);
  w.str(plan.optimizer);
  w.u32(plan.accumulate);
  w.str(plan.labels);
  w.vec(plan.memory, [&](const std::pair<std::string, uint64_t> &m) {
    w.str(m.first);
    w.u64(m.second);
  });
  w.u64(plan.hostBytes);
  w.u64(plan.ssdBytes);
  w.u64(plan.paramsFileBytes);
  w.vec(plan.ssdDirs, [&](const std::string &d) { w.str(d); });
  w.u64(plan.syntheticSeed);
  w.vec(plan.predicted, [&](const PredictedSpan &p) {
    w.u8(static_cast<uint8_t>(p.queue));
    w.u32(p.step);
    w.f64(p.startUs);
    w.f64(p.endUs);
  });
  return std::move(w.bytes());
}

bool decodePayload(const char *p, size_t n, Plan &plan) {
  Reader r(p, n);
  plan.producer = r.str();
  plan.sourceModel = r.str();
  plan.sourceFingerprint = r.u64();
  plan.mode = r.str();
  plan.arenaBytes = r.u64();
  plan.paramsBytes = r.u64();
  plan.slots = r.vec<Slot>([&] {
    Slot s;
    s.name = r.str();
    uint8_t dtype = r.u8();
    s.dtype = isValidDType(dtype) ? static_cast<DType>(dtype) : DType::F32;
    if (!isValidDType(dtype))
      s.bytes = ~0ull; // Caught by validation.
    s.shape = r.vec<int64_t>([&] { return r.i64(); });
    s.region = static_cast<Region>(r.u8());
    s.offset = r.u64();
    uint64_t bytes = r.u64();
    if (isValidDType(dtype))
      s.bytes = bytes;
    // An unknown class is caught by validation.
    s.cls = static_cast<SlotClass>(r.u8());
    return s;
  });
  auto binding = [&] {
    Binding b;
    b.name = r.str();
    b.slot = r.u32();
    return b;
  };
  plan.inputs = r.vec<Binding>(binding);
  plan.outputs = r.vec<Binding>(binding);
  plan.params = r.vec<ParamEntry>([&] {
    ParamEntry e;
    e.name = r.str();
    e.slot = r.u32();
    e.flags = r.u8();
    e.fileOffset = r.u64();
    e.bytes = r.u64();
    e.crc = r.u32();
    e.mean = r.f64();
    e.stddev = r.f64();
    e.shardRanks = r.u32();
    e.wholeShape = r.vec<int64_t>([&] { return r.i64(); });
    return e;
  });
  plan.steps = r.vec<Step>([&] {
    Step s;
    s.kernel = static_cast<Kernel>(r.u16());
    s.inputs = r.vec<uint32_t>([&] { return r.u32(); });
    s.outputs = r.vec<uint32_t>([&] { return r.u32(); });
    s.ints = r.vec<int64_t>([&] { return r.i64(); });
    s.floats = r.vec<double>([&] { return r.f64(); });
    s.issueAfter = r.i64();
    uint8_t queue = r.u8();
    // An unknown queue is caught by validation.
    s.queue = static_cast<Queue>(queue < kNumQueues ? queue : 255);
    s.waits = r.vec<uint32_t>([&] { return r.u32(); });
    return s;
  });
  uint8_t kind = r.u8();
  plan.schedule.kind = static_cast<Schedule::Kind>(kind <= 2 ? kind : 0);
  plan.schedule.warmupSteps = r.i64();
  plan.schedule.totalSteps = r.i64();
  plan.schedule.minRatio = r.f64();
  plan.optimizer = r.str();
  plan.accumulate = r.u32();
  plan.labels = r.str();
  plan.memory = r.vec<std::pair<std::string, uint64_t>>([&] {
    std::string name = r.str();
    return std::make_pair(name, r.u64());
  });
  plan.hostBytes = r.u64();
  plan.ssdBytes = r.u64();
  plan.paramsFileBytes = r.u64();
  plan.ssdDirs = r.vec<std::string>([&] { return r.str(); });
  plan.syntheticSeed = r.u64();
  plan.predicted = r.vec<PredictedSpan>([&] {
    PredictedSpan p;
    uint8_t queue = r.u8();
    p.queue = static_cast<Queue>(queue < kNumQueues ? queue : 255);
    p.step = r.u32();
    p.startUs = r.f64();
    p.endUs = r.f64();
    return p;
  });
  return r.ok() && r.atEnd() && kind <= 2 && plan.accumulate >= 1;
}

} // namespace

bool validatePlan(const Plan &plan, std::string &error) {
  auto fail = [&](const std::string &why) {
    error = "invalid plan: " + why;
    return false;
  };
  // Region sizes bound every allocation and offset the runtime makes; a
  // claim near 2^64 would wrap when padded to pages.
  for (auto [name, bytes] :
       {std::pair<const char *, uint64_t>{"device arena", plan.arenaBytes},
        {"parameter region", plan.paramsBytes},
        {"host region", plan.hostBytes},
        {"SSD store", plan.ssdBytes},
        {"params.bin", plan.paramsFileBytes}})
    if (bytes > kMaxRegionBytes)
      return fail(std::string("the ") + name + " claims " +
                  std::to_string(bytes) + " bytes, more than 2^56");
  if (!plan.labels.empty() && plan.labels != "next" && plan.labels != "same")
    return fail("labels '" + plan.labels + "' (next or same)");
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot &s = plan.slots[i];
    std::string where = "slot " + std::to_string(i) + " ('" + s.name + "')";
    if (s.region != Region::Arena && s.region != Region::Params &&
        s.region != Region::Host && s.region != Region::Ssd)
      return fail(where + " has an unknown region");
    if (!isValidDType(static_cast<uint8_t>(s.dtype)))
      return fail(where + " has an unknown element type");
    if (static_cast<uint8_t>(s.cls) >= kNumSlotClasses)
      return fail(where + " has an unknown class");
    std::optional<uint64_t> bytes =
        checkedByteSize(s.shape, dtypeSize(s.dtype));
    if (!bytes)
      return fail(where + " has a negative dimension or more bytes than "
                          "int64 can count");
    if (s.bytes != *bytes)
      return fail(where + " has the wrong byte size or element type");
    uint64_t limit = s.region == Region::Arena    ? plan.arenaBytes
                     : s.region == Region::Params ? plan.paramsBytes
                     : s.region == Region::Host   ? plan.hostBytes
                                                  : plan.ssdBytes;
    if (s.offset > limit || s.bytes > limit - s.offset)
      return fail(where + " lies outside its region");
  }
  auto checkSlot = [&](uint32_t slot, const std::string &what) {
    if (slot >= plan.slots.size())
      return fail(what + " refers to slot " + std::to_string(slot) + " of " +
                  std::to_string(plan.slots.size()));
    return true;
  };
  for (const Binding &b : plan.inputs)
    if (!checkSlot(b.slot, "input '" + b.name + "'"))
      return false;
  for (const Binding &b : plan.outputs)
    if (!checkSlot(b.slot, "output '" + b.name + "'"))
      return false;
  for (const ParamEntry &p : plan.params) {
    if (!checkSlot(p.slot, "parameter '" + p.name + "'"))
      return false;
    const Slot &s = plan.slots[p.slot];
    // A shard's file bytes are the whole tensor's (a synthetic one's, its
    // own: generated, never read).
    uint64_t fileBytes = s.bytes;
    if (p.flags & ParamEntry::Sharded) {
      std::optional<int64_t> whole = checkedNumElements(p.wholeShape);
      std::optional<uint64_t> wholeBytes =
          checkedByteSize(p.wholeShape, dtypeSize(s.dtype));
      if (p.shardRanks < 2 || !whole || !wholeBytes ||
          s.shape !=
              std::vector<int64_t>{(*whole + p.shardRanks - 1) / p.shardRanks})
        return fail("parameter '" + p.name +
                    "' is not a shard of its whole shape over its ranks");
      if (!(p.flags & ParamEntry::Synthetic))
        fileBytes = *wholeBytes;
    } else if (p.shardRanks != 0 || !p.wholeShape.empty()) {
      return fail("parameter '" + p.name +
                  "' has a whole shape but is not sharded");
    }
    if (p.flags & ParamEntry::Synthetic) {
      if (s.region == Region::Arena || s.bytes != p.bytes ||
          !isFloatDType(s.dtype) || !std::isfinite(p.mean) ||
          !std::isfinite(p.stddev) || p.stddev < 0 ||
          (s.region == Region::Ssd && s.offset % kParamAlignment != 0))
        return fail("synthetic parameter '" + p.name +
                    "' is not a float tensor in its slot, or has a bad mean "
                    "or deviation");
      continue;
    }
    if (s.region == Region::Arena || fileBytes != p.bytes ||
        p.fileOffset % kParamAlignment != 0 ||
        p.fileOffset > plan.paramsFileBytes ||
        p.bytes > plan.paramsFileBytes - p.fileOffset ||
        (s.region == Region::Ssd && s.offset % kParamAlignment != 0))
      return fail("parameter '" + p.name + "' is not laid out in its slot");
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step &s = plan.steps[i];
    std::string where = "step " + std::to_string(i);
    if (static_cast<uint16_t>(s.kernel) == 0 || s.kernel >= Kernel::NumKernels)
      return fail(where + " has an unknown kernel");
    const KernelInfo &info = kernelInfo(s.kernel);
    if (s.ints.size() < info.minInts || s.floats.size() < info.minFloats)
      return fail(where + " (" + info.name + ") needs " +
                  std::to_string(info.minInts) + " integer and " +
                  std::to_string(info.minFloats) + " float attributes");
    for (uint32_t slot : s.inputs)
      if (!checkSlot(slot, where))
        return false;
    for (uint32_t slot : s.outputs) {
      if (!checkSlot(slot, where))
        return false;
      if (plan.slots[slot].region != Region::Arena)
        return fail(where + " writes outside the arena");
    }
    // Operand counts (from the kernel table), types and shapes.
    std::string why;
    if (!checkKernelContract(plan, s, why))
      return fail(where + " (" + info.name + ") " + why);
    // Assign and store write back to any stored region from the device;
    // updates work on device memory (the parameter region or a fetched
    // copy in the arena).
    bool isWriteBack = writesBack(s.kernel);
    bool onCpu = isCpuUpdate(plan, s);
    for (unsigned k : writtenInputs(s.kernel, s.inputs.size(), s.ints)) {
      Region r = plan.slots[s.inputs[k]].region;
      bool ok = isWriteBack ? r != Region::Arena
                : onCpu     ? (r == Region::Host || r == Region::Ssd)
                            : (r == Region::Params || r == Region::Arena);
      if (!ok)
        return fail(where + " updates a value in the wrong region");
    }
    if (isWriteBack) {
      Region r = plan.slots[s.inputs[1]].region;
      if (r == Region::Ssd || r == Region::Host)
        return fail(where + " writes back from outside the device");
    }
  }
  // A fetch scheduled ahead (a copy from host memory or the SSD, or a
  // sharded parameter's gather) must not overtake anything that touches
  // its destination or writes its source.
  std::vector<std::vector<ArenaRange>> reads, writes;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step &s = plan.steps[i];
    if (s.issueAfter == kInProgramOrder)
      continue;
    if (reads.empty()) { // Every step's accesses, once.
      reads.resize(plan.steps.size());
      writes.resize(plan.steps.size());
      for (size_t k = 0; k < plan.steps.size(); ++k)
        arenaAccesses(plan, plan.steps[k], reads[k], writes[k]);
    }
    std::string where = "step " + std::to_string(i);
    bool fetch = (isTransfer(plan, s) && s.kernel == Kernel::Copy) ||
                 s.kernel == Kernel::Unshard;
    if (!fetch || s.issueAfter < -1 || s.issueAfter >= static_cast<int64_t>(i))
      return fail(where + " is scheduled ahead but is not a fetch, or is "
                          "scheduled after itself");
    for (size_t j = s.issueAfter + 1; j < i; ++j) {
      const Step &o = plan.steps[j];
      bool writesSource = isUpdateKernel(o.kernel) && !o.inputs.empty() &&
                          o.inputs[0] == s.inputs[0];
      if (writesSource ||
          accessesConflict(reads[i], writes[i], reads[j], writes[j]))
        return fail(where + " (fetch of '" + plan.slots[s.inputs[0]].name +
                    "') is scheduled before step " + std::to_string(j) +
                    ", which it conflicts with");
    }
  }
  // Each step on the queue that can run it; the waits order every pair of
  // conflicting accesses.
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step &s = plan.steps[i];
    if (static_cast<size_t>(s.queue) >= kNumQueues)
      return fail("step " + std::to_string(i) + " is on an unknown queue");
    Queue natural = naturalQueue(plan, s);
    if (s.queue != natural)
      return fail("step " + std::to_string(i) + " (" + kernelName(s.kernel) +
                  ") is on the " + queueName(s.queue) +
                  " queue; this runtime runs it on the " + queueName(natural) +
                  " queue");
  }
  // One world size for the whole plan.
  int64_t ranks = dataParallelRanks(plan);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step &s = plan.steps[i];
    if (isCollective(s.kernel) && !s.ints.empty() && s.ints[0] != ranks)
      return fail("step " + std::to_string(i) + " (" + kernelName(s.kernel) +
                  ") runs over " + std::to_string(s.ints[0]) +
                  " ranks, an earlier one over " + std::to_string(ranks));
  }
  for (size_t i = 0; i < plan.predicted.size(); ++i) {
    const PredictedSpan &p = plan.predicted[i];
    // NaN fails every comparison: the negation refuses it too.
    if (static_cast<size_t>(p.queue) >= kNumQueues ||
        p.step >= plan.steps.size() || !(p.startUs >= 0) ||
        !(p.endUs >= p.startUs) || !(p.endUs < 1e15))
      return fail("predicted span " + std::to_string(i) +
                  " names no step or queue, or has no sane times");
  }
  std::string why;
  if (!checkPlanRaceFree(plan, why))
    return fail(why);
  return true;
}

bool writePlan(const std::string &path, const Plan &plan, std::string &error) {
  std::string file;
  return serializePlan(plan, file, error) &&
         writeFileAtomically(path, file.data(), file.size(), error);
}

bool serializePlan(const Plan &plan, std::string &file, std::string &error) {
  if (!validatePlan(plan, error))
    return false;
  std::string payload = encodePayload(plan);
  Writer header;
  header.raw(kMagic, 8);
  header.u32(kPlanFormatVersion);
  header.u32(0);
  header.u64(payload.size());
  header.u32(crc32c(payload.data(), payload.size()));
  header.u32(crc32c(header.bytes().data(), header.bytes().size()));
  file = std::move(header.bytes());
  file += payload;
  return true;
}

bool readPlan(const std::string &path, Plan &plan, std::string &error) {
  std::string file;
  return readRegularFile(path, "plan", uint64_t(1) << 32, file, error) &&
         parsePlan(file, path, plan, error);
}

bool parsePlan(const std::string &file, const std::string &path, Plan &plan,
               std::string &error) {
  auto fail = [&](const std::string &why) {
    error = "'" + path + "': " + why;
    return false;
  };
  if (file.size() < kHeaderBytes || std::memcmp(file.data(), kMagic, 8) != 0)
    return fail("not a Strata plan (bad magic or too short)");
  Reader r(file.data() + 8, kHeaderBytes - 8);
  uint32_t version = r.u32();
  r.u32();
  uint64_t payloadBytes = r.u64();
  uint32_t payloadCrc = r.u32();
  uint32_t headerCrc = r.u32();
  if (crc32c(file.data(), kHeaderBytes - 4) != headerCrc)
    return fail("corrupted header (checksum mismatch)");
  if (version != kPlanFormatVersion)
    return fail("plan format version " + std::to_string(version) +
                ", this runtime reads version " +
                std::to_string(kPlanFormatVersion) +
                "; recompile the model with this version of strata-compile");
  if (file.size() - kHeaderBytes != payloadBytes)
    return fail("truncated or padded: payload is " +
                std::to_string(file.size() - kHeaderBytes) +
                " bytes, the header says " + std::to_string(payloadBytes));
  const char *payload = file.data() + kHeaderBytes;
  if (crc32c(payload, payloadBytes) != payloadCrc)
    return fail("corrupted (payload checksum mismatch)");
  plan = Plan();
  if (!decodePayload(payload, payloadBytes, plan))
    return fail("malformed payload");
  plan.payloadCrc = payloadCrc;
  if (!validatePlan(plan, error)) {
    error = "'" + path + "': " + error;
    return false;
  }
  return true;
}

void fillSynthetic(const Plan &plan, size_t index, char *out, int rank,
                   bool whole) {
  const ParamEntry &p = plan.params[index];
  const Slot &s = plan.slots[p.slot];
  size_t size = dtypeSize(s.dtype);
  uint64_t n = p.bytes / size;
  // A shard: its elements are those of the whole tensor from rank * n on
  // (zeros past its end), so that every number of ranks trains the same
  // values.
  uint64_t base = 0, total = n;
  if (p.flags & ParamEntry::Sharded) {
    total = static_cast<uint64_t>(checkedNumElements(p.wholeShape).value_or(0));
    if (whole)
      n = total;
    else
      base = static_cast<uint64_t>(rank) * n;
  }
  // Uniform on [-sqrt(3), sqrt(3)): unit variance.
  double spread = p.stddev * 1.7320508075688772;
  uint64_t stream = plan.syntheticSeed * 0x9E3779B97F4A7C15ull +
                    (uint64_t(index) + 1) * 0xD1B54A32D192ED03ull;
  auto fill = [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (base + i >= total) {
        storeFromDouble(s.dtype, 0.0, out + i * size);
        continue;
      }
      // splitmix64 of (stream, i): any element is computable on its own.
      uint64_t z = stream + (base + i + 1) * 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      double u = static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0;
      // Validation admits float types only.
      storeFromDouble(s.dtype, p.mean + spread * u, out + i * size);
    }
  };
  // Large tensors on every core: each element depends only on its index.
  const uint64_t grain = uint64_t(1) << 20;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  if (n < 2 * grain || threads == 1) {
    fill(0, n);
    return;
  }
  std::vector<std::thread> pool;
  uint64_t per = (n + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t) {
    uint64_t begin = t * per, end = std::min(n, begin + per);
    if (begin < end)
      pool.emplace_back(fill, begin, end);
  }
  for (std::thread &t : pool)
    t.join();
}

} // namespace strata::artifact
