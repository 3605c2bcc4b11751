// ReportData.cpp - What the HTML report draws besides the plan's own
// figures: a trace and a training log read from files, and the bytes live
// on each tier over the step.

#include "runtime/artifact/HtmlReport.h"
#include "runtime/artifact/KernelTable.h"
#include "runtime/artifact/StepOrder.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Json.h"
#include "runtime/support/Size.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace strata::artifact {

//===----------------------------------------------------------------------===//
// Inputs: the trace and the training log
//===----------------------------------------------------------------------===//

/// The most bytes of a trace or log the report reads (a trace of a few
/// steps of a large plan is tens of MiB).
constexpr uint64_t kMaxInputBytes = uint64_t(1) << 30;

bool readTrace(const std::string &path, std::vector<TraceEvent> &events,
               std::string &error) {
  std::string text;
  if (!readRegularFile(path, "trace", kMaxInputBytes, text, error))
    return false;
  json::Value doc;
  if (!json::parse(text, doc, error)) {
    error = "trace " + path + " is not JSON: " + error;
    return false;
  }
  // A trace is {"traceEvents": [...]} or the bare array.
  const json::Value *list = doc.isArray() ? &doc : doc.get("traceEvents");
  if (!list || !list->isArray()) {
    error = "trace " + path + " has no traceEvents array";
    return false;
  }
  events.clear();
  for (size_t i = 0; i < list->items.size(); ++i) {
    const json::Value &e = list->items[i];
    if (!e.isObject() || e.stringOr("ph") != "X")
      continue; // Metadata (thread names) and other phases.
    double tid = e.numberOr("tid", -1), ts = e.numberOr("ts", NAN),
           dur = e.numberOr("dur", NAN);
    if (!(tid >= 0 && tid < 1e6) || !std::isfinite(ts) || !std::isfinite(dur) ||
        dur < 0) {
      error = "trace " + path + ": event " + std::to_string(i) +
              " has no lane (tid), start (ts) or duration (dur), or a "
              "negative one";
      return false;
    }
    TraceEvent event;
    event.name = e.stringOr("name");
    event.category = e.stringOr("cat");
    event.lane = static_cast<int>(tid);
    event.startUs = ts;
    event.endUs = ts + dur;
    if (const json::Value *args = e.get("args")) {
      double step = args->numberOr("step", -1);
      if (step >= 0 && step < 4e9)
        event.step = static_cast<int64_t>(step);
    }
    events.push_back(std::move(event));
  }
  return true;
}

bool readTrainingLog(const std::string &path, std::vector<LogRow> &rows,
                     std::string &error) {
  std::string text;
  if (!readRegularFile(path, "training log", kMaxInputBytes, text, error))
    return false;
  rows.clear();
  size_t line = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos)
      end = text.size();
    ++line;
    std::string row = text.substr(begin, end - begin);
    begin = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    json::Value v;
    std::string why;
    if (!json::parse(row, v, why) || !v.isObject()) {
      error = "training log " + path + ", line " + std::to_string(line) + ": " +
              (why.empty() ? "not a JSON object" : why);
      return false;
    }
    const json::Value *step = v.get("step");
    const json::Value *loss = v.get("loss");
    if (!step || !step->isNumber() || !loss ||
        !(loss->isNumber() || loss->isNull())) {
      error = "training log " + path + ", line " + std::to_string(line) +
              ": no \"step\" or \"loss\" (strata-run --log-json writes both)";
      return false;
    }
    LogRow r;
    r.step = std::isfinite(step->number) && std::fabs(step->number) < 9e18
                 ? static_cast<int64_t>(step->number)
                 : 0;
    r.loss = loss->isNull() ? NAN : loss->number;
    r.stepSeconds = v.numberOr("step_s", 0);
    rows.push_back(r);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Memory over the step
//===----------------------------------------------------------------------===//

uint64_t MemoryOverStep::total(Tier tier, size_t position) const {
  uint64_t sum = 0;
  for (const std::vector<uint64_t> &v : live[static_cast<int>(tier)])
    sum += v[position];
  return sum;
}

uint64_t MemoryOverStep::peak(Tier tier) const {
  uint64_t best = 0;
  for (size_t p = 0; p < positions; ++p)
    best = std::max(best, total(tier, p));
  return best;
}

namespace {

int tierOf(Region region) {
  return region == Region::Host  ? static_cast<int>(Tier::Host)
         : region == Region::Ssd ? static_cast<int>(Tier::Ssd)
                                 : static_cast<int>(Tier::Device);
}

SlotClass storedClass(const ParamEntry &p) {
  return (p.flags & ParamEntry::State)      ? SlotClass::OptimizerState
         : (p.flags & ParamEntry::Constant) ? SlotClass::Constant
                                            : SlotClass::Parameter;
}

} // namespace

MemoryOverStep memoryOverStep(const Plan &plan) {
  MemoryOverStep m;
  std::vector<size_t> order = issueOrder(plan);
  size_t n = order.size();
  m.positions = n;
  m.capacity[0] = plan.arenaBytes + plan.paramsBytes;
  m.capacity[1] = plan.hostBytes;
  m.capacity[2] = plan.ssdBytes;
  for (auto &tier : m.live)
    for (std::vector<uint64_t> &v : tier)
      v.assign(n, 0);
  if (n == 0)
    return m;
  size_t slots = plan.slots.size();
  std::vector<bool> stored(slots, false), input(slots, false);
  // Bytes added at each position and removed after it, per tier and class
  // (summed at the end: linear in the plan's size).
  std::vector<int64_t> delta[kNumTiers][kNumSlotClasses];
  for (auto &tier : delta)
    for (std::vector<int64_t> &d : tier)
      d.assign(n + 1, 0);
  auto liveFor = [&](Region region, SlotClass cls, int64_t from, int64_t to,
                     uint64_t bytes) {
    // A tensor on the SSD takes whole pages of the store.
    if (region == Region::Ssd)
      bytes = pagePadded(bytes);
    std::vector<int64_t> &d = delta[tierOf(region)][static_cast<int>(cls)];
    d[from] += static_cast<int64_t>(bytes);
    d[to + 1] -= static_cast<int64_t>(bytes);
  };
  for (const ParamEntry &p : plan.params) {
    stored[p.slot] = true;
    const Slot &s = plan.slots[p.slot];
    liveFor(s.region, storedClass(p), 0, static_cast<int64_t>(n) - 1, s.bytes);
  }
  for (const Binding &b : plan.inputs)
    input[b.slot] = true;
  // Live range of every other slot, in positions; -1: not seen.
  std::vector<int64_t> first(slots, -1), last(slots, -1);
  // The slot last written at a (region, offset, bytes): what a view of the
  // same bytes reads.
  std::map<std::tuple<int, uint64_t, uint64_t>, uint32_t> occupant;
  auto key = [&](uint32_t s) {
    const Slot &slot = plan.slots[s];
    return std::make_tuple(static_cast<int>(slot.region), slot.offset,
                           slot.bytes);
  };
  auto resolve = [&](uint32_t s) {
    if (first[s] >= 0 || input[s])
      return s;
    auto it = occupant.find(key(s));
    return it == occupant.end() ? s : it->second;
  };
  auto read = [&](uint32_t s, int64_t pos) {
    if (stored[s])
      return;
    s = resolve(s);
    if (first[s] < 0)
      first[s] = 0; // Read before any write: it carries over.
    last[s] = std::max(last[s], pos);
  };
  auto write = [&](uint32_t s, int64_t pos) {
    if (stored[s])
      return;
    if (first[s] < 0)
      first[s] = pos;
    last[s] = std::max(last[s], pos);
    occupant[key(s)] = s;
  };
  for (size_t p = 0; p < n; ++p) {
    const Step &step = plan.steps[order[p]];
    std::vector<unsigned> written =
        writtenInputs(step.kernel, step.inputs.size(), step.ints);
    int64_t pos = static_cast<int64_t>(p);
    // Assign and store only write their destination (stepAccesses).
    bool writeOnlyFirst =
        step.kernel == Kernel::Assign || step.kernel == Kernel::Store;
    for (size_t k = writeOnlyFirst ? 1 : 0; k < step.inputs.size(); ++k)
      read(step.inputs[k], pos);
    for (unsigned k : written)
      if (k < step.inputs.size())
        write(step.inputs[k], pos);
    for (uint32_t s : step.outputs)
      write(s, pos);
  }
  for (const Binding &b : plan.outputs)
    if (!stored[b.slot]) {
      uint32_t s = resolve(b.slot);
      if (first[s] < 0)
        first[s] = 0;
      last[s] = static_cast<int64_t>(n) - 1;
    }
  for (uint32_t s = 0; s < slots; ++s) {
    if (stored[s] || first[s] < 0)
      continue;
    const Slot &slot = plan.slots[s];
    liveFor(slot.region, input[s] ? SlotClass::Input : slot.cls, first[s],
            last[s], slot.bytes);
  }
  for (int t = 0; t < kNumTiers; ++t)
    for (int c = 0; c < kNumSlotClasses; ++c) {
      int64_t live = 0;
      for (size_t p = 0; p < n; ++p) {
        live += delta[t][c][p];
        m.live[t][c][p] = static_cast<uint64_t>(live);
      }
    }
  return m;
}

} // namespace strata::artifact
