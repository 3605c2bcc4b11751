//===- PlanMemory.cpp - Static memory plan with liveness-based reuse ------===//

#include "dialects/Strata/StrataDialect.h"
#include "passes/Passes.h"
#include "passes/analysis/ArenaRanges.h"
#include "passes/analysis/CostModel.h"

#include "dialects/Exec/ExecDialect.h"
#include "passes/scheduling/ArenaPacking.h"
#include "runtime/artifact/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>

#define DEBUG_TYPE "strata-plan-memory"

namespace strata {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// What a buffer holds, for the memory report.
enum class Kind { Activation, Gradient, Workspace };

/// An arena buffer and its lifetime in op indices (inclusive).
struct Buffer {
  Value value;
  Operation *def;
  Kind kind = Kind::Activation;
  uint64_t bytes;
  int64_t start;
  int64_t end;
  uint64_t offset = 0;
};

/// Places every buffer (sets `offset`) and returns the arena size
/// (arena::placeBuffers on their lifetimes; `enough`: an arena size
/// that meets the budget; with `overMayStop`, a result over it is only
/// that, its offsets no packing).
uint64_t placeBuffers(std::vector<Buffer> &buffers, uint64_t alignment,
                      uint64_t enough, bool overMayStop,
                      arena::PackingCache &packings) {
  std::vector<arena::Lifetime> lifetimes;
  lifetimes.reserve(buffers.size());
  for (const Buffer &b : buffers)
    lifetimes.push_back({b.bytes, b.start, b.end});
  uint64_t arena =
      packings.place(lifetimes, alignment, 50000, enough, overMayStop);
  for (auto [b, l] : llvm::zip(buffers, lifetimes))
    b.offset = l.offset;
  return arena;
}

} // namespace

MemoryPlanStats strata::planMemory(func::FuncOp func,
                                   const PlanMemoryPassOptions &options,
                                   const MachineProfile *machine, bool report,
                                   MemoryPlanCache *cache) {
  Block &body = func.getBody().front();
  llvm::DenseMap<Value, size_t> bufferOf;
  std::vector<Buffer> buffers;
  // Stored tensors: each tier's region laid out in order, 4 KiB-aligned
  // (SSD tensors also padded to 4 KiB: they move by direct I/O).
  uint64_t paramsBytes = 0, hostBytes = 0, ssdBytes = 0;
  bool usesSsd = false;
  for (Operation &op : body) {
    if (auto param = dyn_cast<exec::ParamOp>(op))
      usesSsd |= param.getTier() == exec::Tier::Ssd;
    else if (auto space = dyn_cast<exec::SwapSpaceOp>(op))
      usesSsd |= space.getTier() == exec::Tier::Ssd;
    if (usesSsd)
      break;
  }
  // Device buffers that SSD transfers land in must be 4 KiB-aligned and
  // padded; with an SSD tier every arena buffer is.
  uint64_t alignment =
      usesSsd ? artifact::kParamAlignment : artifact::kArenaAlignment;
  int64_t index = 0, last = 0;
  // Fetches from host or SSD (buffer, earliest start), and the index of
  // the last write-back into each stored tensor so far.
  std::vector<std::pair<size_t, int64_t>> fetches;
  // Timed windows (with a lead): each op's kernel seconds (transfers
  // none), each fetch and each write-back. The tier planner records the
  // lead its chosen plan was scored with.
  double wantedLead = options.prefetchLead;
  if (auto chosen =
          getDeclaredAttr<exec::ExecDialect::PrefetchLeadAttrHelper>(func))
    wantedLead = chosen.getValueAsDouble();
  bool timed = wantedLead > 0 && machine;
  std::vector<double> work;
  // A fetch (its buffer) or a write-back (the buffer it reads, at op
  // `at`) on link `link` taking `seconds`; `time` is filled in below.
  struct Transfer {
    size_t buffer;
    int64_t at;
    int link;
    double seconds, time = 0;
  };
  std::vector<Transfer> timedFetches, drains;
  // Links 0-3 are linkOf's; collectives have their own.
  constexpr int kCommLink = 4;
  // Which link a transfer holds: on a GPU its copy engine of that
  // direction (SSD transfers pass through host memory and hold it too);
  // without one, host copies run on the compute thread (nothing to
  // overlap: -1) and SSD transfers on the SSD queue of their direction.
  auto linkOf = [&](Value stored, bool read) {
    if (machine->gpu > 0)
      return read ? 0 : 1;
    return tierOf(stored) == exec::Tier::Ssd ? (read ? 2 : 3) : -1;
  };
  llvm::DenseMap<Operation *, int64_t> lastWrite;
  SmallVector<exec::OutputOp> outputs;
  IntegerType i64Type = IntegerType::get(func.getContext(), 64);
  MemoryPlanCache ownCache;
  MemoryPlanCache &caches = cache ? *cache : ownCache;
  llvm::DenseMap<uint64_t, IntegerAttr> &attrs = caches.offsets;
  auto offsetAttr = [&](uint64_t offset) {
    IntegerAttr &attr = attrs[offset];
    if (!attr)
      attr = IntegerAttr::get(i64Type, static_cast<int64_t>(offset));
    return attr;
  };
  for (Operation &op : body) {
    if (auto param = dyn_cast<exec::ParamOp>(op)) {
      uint64_t &region = param.getTier() == exec::Tier::Host  ? hostBytes
                         : param.getTier() == exec::Tier::Ssd ? ssdBytes
                                                              : paramsBytes;
      param.setOffsetAttr(offsetAttr(region));
      region = artifact::alignUp(region + storageBytes(param.getType()),
                                 artifact::kParamAlignment);
    } else if (auto space = dyn_cast<exec::SwapSpaceOp>(op)) {
      uint64_t &region =
          space.getTier() == exec::Tier::Ssd ? ssdBytes : hostBytes;
      space.setOffsetAttr(offsetAttr(region));
      region = artifact::alignUp(region + storageBytes(space.getType()),
                                 artifact::kParamAlignment);
    } else if (isa<exec::InputOp, exec::KernelOp>(op)) {
      auto kernel = dyn_cast<exec::KernelOp>(op);
      Operation *stored = kernel && !kernel.getInputs().empty()
                              ? storedRoot(kernel.getInputs()[0])
                              : nullptr;
      // A fetch may start as soon as its source was last written.
      if (stored && kernel.isKernel(artifact::Kernel::Copy)) {
        auto it = lastWrite.find(stored);
        fetches.push_back(
            {buffers.size(), it == lastWrite.end() ? 0 : it->second + 1});
        Value from = kernel.getInputs()[0];
        if (timed && linkOf(from, true) >= 0)
          timedFetches.push_back(
              {buffers.size(), index, linkOf(from, true),
               transferSeconds(storageBytes(from.getType()), tierOf(from),
                               /*read=*/true, *machine)});
      }
      // A sharded parameter's gather is a fetch on the communication
      // link, of its whole result, from wherever its shard was last
      // written (ScheduleTransfers issues it ahead).
      if (kernel && kernel.isKernel(artifact::Kernel::Unshard)) {
        Operation *source = storedRoot(kernel.getInputs()[0]);
        int64_t earliest = 0;
        if (auto it = bufferOf.find(viewRoot(kernel.getInputs()[0]));
            it != bufferOf.end())
          earliest = buffers[it->second].start + 1;
        else if (auto it = lastWrite.find(source); it != lastWrite.end())
          earliest = it->second + 1;
        fetches.push_back({buffers.size(), earliest});
        if (timed)
          timedFetches.push_back({buffers.size(), index, kCommLink,
                                  kernelSeconds(kernel, *machine)});
      }
      if (stored && kernel.getNumResults() == 0) {
        lastWrite[stored] = index;
        Value to = kernel.getInputs()[0];
        if (timed && kernel.getInputs().size() > 1 && linkOf(to, false) >= 0)
          if (auto it = bufferOf.find(viewRoot(kernel.getInputs()[1]));
              it != bufferOf.end())
            drains.push_back(
                {it->second, index, linkOf(to, false),
                 transferSeconds(storageBytes(to.getType()), tierOf(to),
                                 /*read=*/false, *machine)});
      }
      // A collective runs on the communication queue, beside the kernels,
      // and reads its input until it is done: that buffer drains like a
      // write-back, on the communication link (one collective at a time),
      // so the ops after it do not take its bytes (and wait for it) while
      // it still runs.
      bool collective = kernel && kernel.isCollective();
      // An all-gather reads its shard (input 1) and writes its target.
      if (timed && collective)
        if (auto it = bufferOf.find(viewRoot(kernel.getInputs().back()));
            it != bufferOf.end())
          drains.push_back(
              {it->second, index, kCommLink, kernelSeconds(kernel, *machine)});
      if (timed) {
        work.resize(index + 1, 0.0);
        if (kernel && !isTransfer(kernel) && !collective)
          work[index] = kernelSeconds(kernel, *machine);
      }
      for (Value r : op.getResults()) {
        bufferOf[r] = buffers.size();
        buffers.push_back(
            {r, &op, Kind::Activation,
             artifact::alignUp(storageBytes(r.getType()), alignment), index,
             index});
      }
    }
    // Extend the lifetime of every buffer this op reads.
    for (Value operand : op.getOperands()) {
      auto it = bufferOf.find(viewRoot(operand));
      if (it != bufferOf.end())
        buffers[it->second].end = std::max(buffers[it->second].end, index);
    }
    if (auto output = dyn_cast<exec::OutputOp>(op))
      outputs.push_back(output);
    last = index++;
  }
  // Outputs are read after the run: they live to the end.
  for (exec::OutputOp output : outputs) {
    auto it = bufferOf.find(viewRoot(output.getValue()));
    if (it != bufferOf.end())
      buffers[it->second].end = last + 1;
  }

  // Kernel seconds before each op index (prefix sums), for the timed
  // windows.
  std::vector<double> before;
  if (timed) {
    work.resize(last + 1, 0.0);
    before.assign(last + 2, 0.0);
    for (int64_t i = 0; i <= last; ++i)
      before[i + 1] = before[i] + work[i];
  }
  std::vector<int64_t> lastRead(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i)
    lastRead[i] = buffers[i].end;
  // Each link serves its transfers one at a time, in order. A write-back
  // starts when the kernels reach it and its link is free (`time`: when
  // it ends). Fetches are timed as late as they can start and still all
  // arrive by their uses, the last first (`time`: that start).
  if (timed) {
    double free[kCommLink + 1] = {0, 0, 0, 0, 0};
    for (Transfer &d : drains) {
      double start = std::max(before[d.at], free[d.link]);
      d.time = free[d.link] = start + d.seconds;
    }
    double due[kCommLink + 1];
    std::fill(std::begin(due), std::end(due),
              std::numeric_limits<double>::infinity());
    for (Transfer &f : llvm::reverse(timedFetches)) {
      double by = std::min(before[f.at], due[f.link]);
      f.time = due[f.link] = std::max(0.0, by - f.seconds);
    }
  }

  // The arena the budget leaves beside the parameters: where the bytes
  // live at one step already exceed it, no placement fits, and the
  // size-ordered packing (quadratic in the buffers that overlap, most of a
  // large model's scoring) is not run (arena::placeBuffers).
  uint64_t enough =
      options.gpuMem > paramsBytes ? options.gpuMem - paramsBytes : 0;
  // Two windows often give the same lifetimes (a lead that moves no
  // fetch start): the cache's packing is reused for them. With
  // `overMayStop` the plan is dropped when it is over the budget, so that
  // packing may stop as soon as it is (arena::placeBuffers).
  auto place = [&](bool overMayStop) {
    return placeBuffers(buffers, alignment, enough, overMayStop,
                        caches.packings);
  };
  // Fetch destinations reserved up to `window` ops before their fetch, so
  // the fetch can run while those compute; halved until the arena and
  // the resident parameters fit the device budget.
  std::vector<int64_t> defined(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i)
    defined[i] = buffers[i].start;
  auto withWindow = [&](int64_t window, bool overMayStop) {
    for (auto [i, earliest] : fetches)
      buffers[i].start = std::max(earliest, defined[i] - window);
    return place(overMayStop);
  };
  // The timed windows with lead `lead` (1: as timed above; 2: twice as
  // far ahead of the use, twice as long after the write-back's op).
  llvm::DenseMap<size_t, int64_t> earliestOf;
  for (auto [i, earliest] : fetches)
    earliestOf[i] = earliest;
  auto withLead = [&](double lead, bool overMayStop) {
    for (auto [i, earliest] : fetches)
      buffers[i].start = defined[i];
    for (const Transfer &f : timedFetches) {
      double target = before[f.at] - lead * (before[f.at] - f.time);
      // The last op that starts by then.
      auto it =
          std::upper_bound(before.begin(), before.begin() + f.at + 1, target);
      int64_t s = std::max<int64_t>(0, (it - before.begin()) - 1);
      buffers[f.buffer].start =
          std::max(earliestOf.lookup(f.buffer), std::min(f.at, s));
    }
    for (size_t i = 0; i < buffers.size(); ++i)
      buffers[i].end = lastRead[i];
    for (const Transfer &d : drains) {
      double target = before[d.at] + lead * (d.time - before[d.at]);
      // Every op that starts before then.
      auto it = std::lower_bound(before.begin() + d.at, before.end(), target);
      int64_t e = std::min<int64_t>(last, (it - before.begin()) - 1);
      buffers[d.buffer].end = std::max(buffers[d.buffer].end, e);
    }
    return place(overMayStop);
  };
  auto over = [&](uint64_t arena) {
    return options.gpuMem > 0 && arena + paramsBytes > options.gpuMem;
  };
  // The plan with `wanted` when it fits the budget; else none when even
  // that does not fit (kept without placing every halving in between: the
  // planner scores thousands of plans that do not fit); else the first of
  // `halvings` that fits, or none. The plans dropped when over the
  // budget (`planWith`'s second argument) may stop packing once they are.
  auto fitted = [&](double wanted, ArrayRef<double> halvings,
                    function_ref<uint64_t(double, bool)> planWith) {
    uint64_t arena = planWith(wanted, wanted != 0);
    if (!over(arena) || wanted == 0)
      return std::pair(wanted, arena);
    arena = planWith(0, false);
    if (over(arena))
      return std::pair(0.0, arena);
    for (double h : halvings)
      if (uint64_t a = planWith(h, true); !over(a))
        return std::pair(h, a);
    return std::pair(0.0, planWith(0, false));
  };
  int64_t window = 0;
  double lead = 0;
  uint64_t arenaBytes = 0;
  SmallVector<double> halvings;
  if (timed && (!timedFetches.empty() || !drains.empty())) {
    for (double l = wantedLead / 2; l >= 1.0 / 16; l /= 2)
      halvings.push_back(l);
    std::tie(lead, arenaBytes) = fitted(wantedLead, halvings, withLead);
  } else {
    // Over the budget, the window halves until the plan fits.
    int64_t wanted = fetches.empty() ? 0 : options.prefetchWindow;
    for (int64_t w = wanted / 2; w > 0; w /= 2)
      halvings.push_back(static_cast<double>(w));
    double used;
    std::tie(used, arenaBytes) = fitted(
        static_cast<double>(wanted), halvings, [&](double w, bool overMayStop) {
          return withWindow(static_cast<int64_t>(w), overMayStop);
        });
    window = static_cast<int64_t>(used);
  }
  uint64_t unshared = 0;
  for (const Buffer &b : buffers)
    unshared += artifact::alignUp(b.bytes, alignment);
  OpBuilder builder(func.getContext());
  // The first result's offset is `offset`; all results' are `offsets`.
  // An op's buffers are made together, in result order. The planner
  // plans thousands of candidates' memory: the names are made once here
  // and the offsets' attributes taken from `attrs`, rather than looked up
  // in the context for every op.
  StringAttr offsetName = builder.getStringAttr("offset"),
             offsetsName = builder.getStringAttr("offsets");
  SmallVector<int64_t> offsets;
  for (size_t i = 0; i < buffers.size();) {
    Operation *op = buffers[i].def;
    offsets.clear();
    for (; i < buffers.size() && buffers[i].def == op; ++i)
      offsets.push_back(static_cast<int64_t>(buffers[i].offset));
    IntegerAttr first = offsetAttr(static_cast<uint64_t>(offsets.front()));
    DenseI64ArrayAttr all;
    if (offsets.size() > 1)
      all = builder.getDenseI64ArrayAttr(offsets);
    if (auto kernel = dyn_cast<exec::KernelOp>(op)) {
      kernel.setOffsetAttr(first);
      if (all)
        kernel.setOffsetsAttr(all);
      continue;
    }
    op->setAttr(offsetName, first);
    if (all)
      op->setAttr(offsetsName, all);
  }
  setDeclaredAttr<exec::ExecDialect::PrefetchWindowAttrHelper>(
      func, builder.getI64IntegerAttr(window));
  if (timed)
    setDeclaredAttr<exec::ExecDialect::PrefetchLeadAttrHelper>(
        func, builder.getF64FloatAttr(lead));
  setDeclaredAttr<exec::ExecDialect::ArenaBytesAttrHelper>(
      func, builder.getI64IntegerAttr(static_cast<int64_t>(arenaBytes)));
  setDeclaredAttr<exec::ExecDialect::ParamsBytesAttrHelper>(
      func, builder.getI64IntegerAttr(static_cast<int64_t>(paramsBytes)));
  setDeclaredAttr<exec::ExecDialect::HostBytesAttrHelper>(
      func, builder.getI64IntegerAttr(static_cast<int64_t>(hostBytes)));
  setDeclaredAttr<exec::ExecDialect::SsdBytesAttrHelper>(
      func, builder.getI64IntegerAttr(static_cast<int64_t>(ssdBytes)));
  if (!report)
    return {buffers.size(), arenaBytes, unshared};
  // The memory report: what is live when the arena is fullest, by class.
  for (Buffer &b : buffers) {
    artifact::SlotClass cls = exec::classifyBuffer(b.value);
    b.kind = cls == artifact::SlotClass::Gradient    ? Kind::Gradient
             : cls == artifact::SlotClass::Workspace ? Kind::Workspace
                                                     : Kind::Activation;
  }
  uint64_t peakLive = 0;
  uint64_t atPeak[3] = {0, 0, 0}, classPeak[3] = {0, 0, 0};
  uint64_t largestGradient = 0;
  for (const Buffer &b : buffers)
    if (b.kind == Kind::Gradient)
      largestGradient = std::max(largestGradient, b.bytes);
  // Live bytes per class over time, by a sweep over start/end deltas.
  std::vector<std::array<int64_t, 3>> delta(last + 3, {0, 0, 0});
  for (const Buffer &b : buffers) {
    int k = static_cast<int>(b.kind);
    delta[b.start][k] += static_cast<int64_t>(b.bytes);
    delta[b.end + 1][k] -= static_cast<int64_t>(b.bytes);
  }
  uint64_t live[3] = {0, 0, 0};
  int64_t peakAt = -1;
  for (int64_t t = 0; t <= last + 1; ++t) {
    for (int k = 0; k < 3; ++k)
      live[k] += delta[t][k];
    uint64_t total = live[0] + live[1] + live[2];
    for (int k = 0; k < 3; ++k)
      classPeak[k] = std::max(classPeak[k], live[k]);
    if (total > peakLive) {
      peakLive = total;
      peakAt = t;
      std::copy(live, live + 3, atPeak);
    }
  }
  // Each class's bytes, and the same split by element type
  // ("activations_at_peak:bf16") for the report's split by precision.
  std::map<std::string, uint64_t> byType;
  auto typeKey = [](StringRef cls, Type type) {
    std::string key = cls.str() + ":";
    llvm::raw_string_ostream os(key);
    cast<ShapedType>(type).getElementType().print(os);
    return os.str();
  };
  const char *peakNames[3] = {"activations_at_peak", "gradients_at_peak",
                              "workspace_at_peak"};
  for (const Buffer &b : buffers)
    if (b.start <= peakAt && peakAt <= b.end)
      byType[typeKey(peakNames[static_cast<int>(b.kind)], b.value.getType())] +=
          b.bytes;
  uint64_t params = 0, states = 0, constants = 0;
  uint64_t onHost = 0, onSsd = 0;
  for (auto p : body.getOps<exec::ParamOp>()) {
    uint64_t bytes = storageBytes(p.getType());
    (p.getState() ? states : p.getConstant() ? constants : params) += bytes;
    byType[typeKey(p.getState()      ? "optimizer_states"
                   : p.getConstant() ? "constants"
                                     : "parameters",
                   p.getType())] += bytes;
    if (p.getTier() == exec::Tier::Host)
      onHost += bytes;
    else if (p.getTier() == exec::Tier::Ssd)
      onSsd += bytes;
  }
  auto i64 = [&](uint64_t v) {
    return builder.getI64IntegerAttr(static_cast<int64_t>(v));
  };
  SmallVector<NamedAttribute> memory = {
      builder.getNamedAttr("parameters", i64(params)),
      builder.getNamedAttr("optimizer_states", i64(states)),
      builder.getNamedAttr("constants", i64(constants)),
      builder.getNamedAttr("activations_at_peak", i64(atPeak[0])),
      builder.getNamedAttr("gradients_at_peak", i64(atPeak[1])),
      builder.getNamedAttr("workspace_at_peak", i64(atPeak[2])),
      builder.getNamedAttr("activations_max", i64(classPeak[0])),
      builder.getNamedAttr("gradients_max", i64(classPeak[1])),
      builder.getNamedAttr("workspace_max", i64(classPeak[2])),
      builder.getNamedAttr("largest_gradient", i64(largestGradient)),
      builder.getNamedAttr("live_peak", i64(peakLive)),
      builder.getNamedAttr("stored_on_host", i64(onHost)),
      builder.getNamedAttr("stored_on_ssd", i64(onSsd)),
  };
  for (auto &[key, bytes] : byType)
    memory.push_back(builder.getNamedAttr(key, i64(bytes)));
  setDeclaredAttr<exec::ExecDialect::MemoryAttrHelper>(
      func, builder.getDictionaryAttr(memory));
  return {buffers.size(), arenaBytes, unshared};
}

namespace {

struct PlanMemoryPass
    : public strata::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    PlanMemoryPassOptions options;
    options.prefetchWindow = prefetchWindow;
    options.gpuMem = gpuMem;
    options.prefetchLead = prefetchLead;
    MachineProfile machine;
    if (prefetchLead > 0 &&
        failed(loadProfile(getOperation(), profile, machine)))
      return signalPassFailure();
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      MemoryPlanStats stats = planMemory(func, options, &machine);
      numBuffers += stats.buffers;
      arenaBytes += stats.arenaBytes;
      unsharedBytes += stats.unsharedBytes;
    }
  }
};

} // namespace
