//===- CostModel.cpp - Seconds per kernel and per transfer ----------------===//

#include "passes/analysis/CostModel.h"
#include "passes/analysis/ArenaRanges.h"

#include "dialects/Exec/ExecDialect.h"
#include "dialects/Strata/StrataDialect.h"
#include "dialects/Train/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "runtime/artifact/KernelContract.h"
#include "runtime/artifact/KernelTable.h"

#include "runtime/support/ThreadPool.h"
#include "runtime/tiers/SsdStore.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace strata {

namespace {

/// The runtime's rules, from its own headers: streaming kernels larger
/// than kParallelGrain elements run on several threads, and the SSD store
/// splits transfers at its stripe.
using strata::kParallelGrain;
constexpr double kSsdStripeBytes = tiers::kDefaultStripeBytes;

int64_t elements(Type type) { return cast<ShapedType>(type).getNumElements(); }

/// The profile's matrix-product rate for products of M*N*K = `mnk`: the
/// operands' typical dimension (its cube root) picks it.
double matmulGflops(double mnk, const MachineProfile &m) {
  double n = std::cbrt(mnk);
  return n < 128   ? m.matmulSmallGflops
         : n < 512 ? m.matmulMediumGflops
                   : m.matmulLargeGflops;
}

/// The count compact_rows expects of the rows `count` counts (its second
/// result, possibly swapped out and back: a copy of the swap space a store
/// filled), or nullopt when it made no estimate.
std::optional<int64_t> expectedCount(Value count) {
  for (int hops = 0; hops < 8 && count; ++hops) {
    Operation *def = count.getDefiningOp();
    if (auto view = dyn_cast_or_null<exec::ViewOp>(def)) {
      count = view.getInput();
      continue;
    }
    auto k = dyn_cast_or_null<exec::KernelOp>(def);
    if (!k)
      return std::nullopt;
    if (k.getKernel() == "compact_rows" || k.getKernel() == "group_rows")
      return k.getInts().empty() ? std::nullopt
                                 : std::optional<int64_t>(k.getInts()[0]);
    if (k.getKernel() != "copy" || k.getInputs().empty())
      return std::nullopt;
    Value from = k.getInputs()[0], stored;
    for (Operation *user : from.getUsers())
      if (auto store = dyn_cast<exec::KernelOp>(user))
        if (store.getKernel() == "store" && store.getInputs().size() == 2 &&
            store.getInputs()[0] == from)
          stored = store.getInputs()[1];
    count = stored ? stored : from;
  }
  return std::nullopt;
}

/// The rows a product over grouped rows (grouped_matmul, segment_matmul)
/// is expected to cover, per group, and the groups: group_rows' expected
/// count over its groups (every stored row when it made no estimate).
struct GroupedRows {
  double perGroup = 0;
  int64_t groups = 1;
};
GroupedRows groupedRows(exec::KernelOp k) {
  bool segment = k.getKernel() == "segment_matmul";
  Value offsets = k.getInputs()[segment ? 2 : 1];
  GroupedRows g;
  g.groups = std::max<int64_t>(
      1, cast<ShapedType>(offsets.getType()).getDimSize(0) - 1);
  double stored = cast<ShapedType>(k.getInputs()[0].getType()).getDimSize(0);
  double total = stored;
  if (std::optional<int64_t> expected = expectedCount(offsets))
    total = std::clamp<double>(double(*expected), 0.0, stored);
  g.perGroup = total / double(g.groups);
  return g;
}

/// A matrix product's FLOPs (2*M*N*K) and its M*N*K.
double matmulFlops(exec::KernelOp k) {
  if (k.getKernel() == "grouped_matmul" || k.getKernel() == "segment_matmul") {
    // grouped: rows x N x K over every group; segment: one group's rows
    // contracted into a K1 x K2 result.
    auto lhs = cast<ShapedType>(k.getInputs()[0].getType());
    auto out = cast<ShapedType>(k.getResult(0).getType());
    GroupedRows g = groupedRows(k);
    if (k.getKernel() == "segment_matmul")
      return 2.0 * g.perGroup * out.getNumElements();
    return 2.0 * g.perGroup * double(g.groups) * lhs.getDimSize(1) *
           out.getDimSize(1);
  }
  auto lhs = cast<ShapedType>(k.getInputs()[0].getType());
  auto out = cast<ShapedType>(k.getResult(0).getType());
  ArrayRef<int64_t> ints = k.getInts();
  bool ta = !ints.empty() && ints[0];
  int64_t K = lhs.getRank() == 1 ? lhs.getDimSize(0)
              : ta               ? lhs.getDimSize(lhs.getRank() - 2)
                                 : lhs.getDimSize(lhs.getRank() - 1);
  double flops = 2.0 * out.getNumElements() * K;
  // A count of live rows (NonZero's, compacted): the product covers the
  // count compact_rows expects of the lhs's stored rows (its dimension 0:
  // the result's rows, or the contraction when transposed).
  if (k.getInputs().size() == 3 && lhs.getRank() == 2 && lhs.getDimSize(0) > 0)
    if (std::optional<int64_t> expected = expectedCount(k.getInputs()[2]))
      flops *= std::clamp<double>(double(*expected) / double(lhs.getDimSize(0)),
                                  0.0, 1.0);
  return flops;
}

/// How much faster than the profile's fp32 rates a product of `k`'s
/// operand type runs: the ratio of the device's bf16 and fp32 GEMM peaks
/// for 16-bit operands when the profile has both, else 1.
double precisionSpeedup(exec::KernelOp k, const MachineProfile &m) {
  Type et = cast<ShapedType>(k.getInputs()[0].getType()).getElementType();
  if ((et.isBF16() || et.isF16()) && m.gemmPeakBf16Gflops > 0 &&
      m.gemmPeakF32Gflops > 0)
    return m.gemmPeakBf16Gflops / m.gemmPeakF32Gflops;
  return 1.0;
}

double matmulSeconds(exec::KernelOp k, const MachineProfile &m) {
  double flops = matmulFlops(k);
  // Grouped rows run as one product per group: a group's size picks the
  // rate.
  double mnk = flops / 2.0, launches = 0;
  if (k.getKernel() == "grouped_matmul") {
    int64_t groups = groupedRows(k).groups;
    mnk /= double(groups);
    launches = double(groups - 1) * m.launchUs * 1e-6;
  }
  return launches +
         flops / (matmulGflops(mnk, m) * precisionSpeedup(k, m) * 1e9);
}

/// Fused attention's shape: its scores (rows x keys, half of them under a
/// causal mask), their FLOPs (two products in the forward, five in the
/// gradient, which recomputes the scores) and the T*S*D that picks the
/// matmul rate.
struct AttentionWork {
  double scores = 0, flops = 0, mnk = 0;
};

AttentionWork attentionWork(exec::KernelOp k) {
  auto q = cast<ShapedType>(k.getInputs()[0].getType());
  auto v = cast<ShapedType>(k.getInputs()[2].getType());
  int64_t rank = q.getRank();
  double t = q.getDimSize(rank - 2), d = q.getDimSize(rank - 1),
         s = v.getDimSize(rank - 2), dv = v.getDimSize(rank - 1);
  double rows = q.getNumElements() / std::max(d, 1.0);
  ArrayRef<int64_t> ints = k.getInts();
  double kept = !ints.empty() && ints[0] ? 0.5 : 1.0;
  bool grad = k.isKernel(artifact::Kernel::AttentionGrad);
  AttentionWork w;
  w.scores = rows * s * kept;
  w.flops = 2.0 * w.scores * (grad ? 3 * d + 2 * dv : d + dv);
  w.mnk = t * s * std::max(d, 1.0);
  return w;
}

/// Fused attention: its products at the matmul rate of a T x S x D
/// product, and the exp of every score (twice in the gradient).
double attentionSeconds(exec::KernelOp k, const MachineProfile &m) {
  AttentionWork w = attentionWork(k);
  bool grad = k.isKernel(artifact::Kernel::AttentionGrad);
  return w.flops / (matmulGflops(w.mnk, m) * precisionSpeedup(k, m) * 1e9) +
         w.scores * (grad ? 2 : 1) * m.transcendentalNsPerElement * 1e-9;
}

/// A fused elementwise chain: what it reads and writes at the streaming
/// rate (a simple kernel moves three values an element), plus, per element,
/// each transcendental instruction's extra over a simple kernel; the other
/// instructions work in registers and cost nothing more. A single tanh
/// costs what the tanh kernel does, a single add what the add kernel does.
/// Negative for a program that does not decode (the caller falls back).
double fusedElementwiseSeconds(exec::KernelOp k, const MachineProfile &m) {
  artifact::ElementwiseProgram program;
  std::string why;
  std::vector<int64_t> ints(k.getInts().begin(), k.getInts().end());
  std::vector<double> floats(k.getFloats().begin(), k.getFloats().end());
  if (!artifact::elementwiseProgram(ints, floats, k.getInputs().size(),
                                    k.getResults().size(), program, why))
    return -1;
  double moved = 0;
  for (Value v : k.getInputs())
    moved += elements(v.getType());
  for (Value v : k.getResults())
    moved += elements(v.getType());
  double n = elements(k.getResult(0).getType());
  double extra = std::max(0.0, m.transcendentalNsPerElement -
                                   m.simpleNsPerElement * 2 / 3);
  double ns = moved * m.simpleNsPerElement / 3;
  for (const auto &in : program.instructions)
    if (artifact::kernelInfo(in.kernel).cost ==
        artifact::CostClass::Transcendental)
      ns += n * extra;
  return ns * 1e-9 + (n > kParallelGrain ? m.parallelLaunchUs * 1e-6 : 0);
}

} // namespace

double kernelFlops(exec::KernelOp k) {
  const artifact::KernelInfo *info = artifact::kernelInfoByName(k.getKernel());
  if (!info)
    return 0;
  if (info->cost == artifact::CostClass::MatMul)
    return matmulFlops(k);
  if (info->cost == artifact::CostClass::Attention)
    return attentionWork(k).flops;
  return 0;
}

double kernelSeconds(exec::KernelOp k, const MachineProfile &m) {
  const artifact::KernelInfo *info = artifact::kernelInfoByName(k.getKernel());
  artifact::CostClass cost = info ? info->cost : artifact::CostClass::Simple;
  double seconds = m.launchUs * 1e-6;
  if (cost == artifact::CostClass::MatMul)
    return seconds + matmulSeconds(k, m);
  if (cost == artifact::CostClass::Attention)
    return seconds + attentionSeconds(k, m);
  if (cost == artifact::CostClass::Collective) {
    // A ring all-reduce: each rank's link carries 2(N-1)/N of the bytes
    // (a reduce-scatter, then an all-gather), after a fixed cost; a
    // reduce-scatter or an all-gather alone (of the whole tensor: input 0
    // of both, an unshard's result) carries (N-1)/N of them.
    double ranks = k.getInts().empty() ? 1 : double(k.getInts()[0]);
    if (ranks <= 1)
      return seconds;
    Value whole = k.isKernel(artifact::Kernel::Unshard) ? k.getResult(0)
                                                        : k.getInputs()[0];
    double bytes = static_cast<double>(storageBytes(whole.getType()));
    double passes = k.isKernel(artifact::Kernel::AllReduce) ? 2 : 1;
    return m.commLatencyUs * 1e-6 +
           passes * (ranks - 1) / ranks * bytes / (m.commGBs * 1e9);
  }
  if (k.isKernel(artifact::Kernel::Elementwise)) {
    double fused = fusedElementwiseSeconds(k, m);
    if (fused >= 0)
      return seconds + fused;
  }
  // A rank's shard of a parameter: one contiguous copy of the shard (a
  // simple kernel's traffic), not a gather over the whole input.
  if (k.isKernel(artifact::Kernel::Shard)) {
    double n = elements(k.getResult(0).getType());
    return seconds + n * m.simpleNsPerElement * 1e-9 +
           (n > kParallelGrain ? m.parallelLaunchUs * 1e-6 : 0);
  }
  // A gather reads the rows it gathers, not its whole table (an
  // embedding's: the 1B run measured 0.1 ms where the table's size
  // predicted 336 ms); its gradient zeroes the table, writes only (a third
  // of the simple kernel's traffic an element), and adds the rows in.
  if (k.isKernel(artifact::Kernel::Gather) && k.getNumResults() == 1) {
    double rows = static_cast<double>(elements(k.getResult(0).getType()));
    return seconds + rows * m.movementNsPerElement * 1e-9 +
           (rows > kParallelGrain ? m.parallelLaunchUs * 1e-6 : 0);
  }
  if (k.isKernel(artifact::Kernel::GatherGrad) && k.getNumResults() == 1 &&
      !k.getInputs().empty()) {
    double table = static_cast<double>(elements(k.getResult(0).getType()));
    double rows = static_cast<double>(elements(k.getInputs()[0].getType()));
    return seconds + (table / 3 + rows) * m.simpleNsPerElement * 1e-9 +
           (table > kParallelGrain ? m.parallelLaunchUs * 1e-6 : 0);
  }
  // Streaming kernels: the larger of what they read and write.
  int64_t n = 0;
  for (Value v : k.getInputs())
    n = std::max(n, elements(v.getType()));
  for (Value v : k.getResults())
    n = std::max(n, elements(v.getType()));
  // A reduction reads each element once and writes little: a third of
  // what the simple kernel the profile times (an add: two reads and a
  // write an element) moves. The 1B out-of-core run measured its
  // gradients' norm (reduce_sum_square of every gradient) at about 0.3 s
  // a step against 1.0 s predicted at the simple kernel's rate.
  double moved = static_cast<double>(n);
  if (k.isKernel(artifact::Kernel::ReduceSum) ||
      k.isKernel(artifact::Kernel::ReduceMean) ||
      k.isKernel(artifact::Kernel::ReduceMax) ||
      k.isKernel(artifact::Kernel::ReduceSumSquare)) {
    int64_t out = 0;
    for (Value v : k.getResults())
      out += elements(v.getType());
    if (out < n)
      moved = static_cast<double>(n + out) / 3;
  }
  double perElement =
      cost == artifact::CostClass::Transcendental ? m.transcendentalNsPerElement
      : cost == artifact::CostClass::Movement     ? m.movementNsPerElement
                                                  : m.simpleNsPerElement;
  seconds += moved * perElement * 1e-9;
  // Kernels past the runtime's grain are split across threads.
  if (n > kParallelGrain)
    seconds += m.parallelLaunchUs * 1e-6;
  return seconds;
}

int64_t dataParallelRanks(Operation *root) {
  int64_t ranks = 1;
  root->walk([&](Operation *op) {
    if (auto r = dyn_cast<train::AllReduceOp>(op))
      ranks = static_cast<int64_t>(r.getRanks());
    else if (auto k = dyn_cast<exec::KernelOp>(op);
             k && k.isCollective() && !k.getInts().empty())
      ranks = k.getInts()[0];
    else
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  return ranks;
}

/// Data parallel: the ranks of one machine (strata.ranks_per_node) share its
/// CPU, memory bandwidth and SSDs, so each rank gets its share of the
/// figures for them: the CPU's optimizer updates and the SSDs' bulk rates
/// (every rank stripes over every drive), and on a profile of the CPU
/// backend also the compute and the copies (the ranks' kernels run on the
/// same cores). A GPU's figures are its own, and so is its host link (each
/// GPU on its own PCIe slot: an assumption the report states).
///
/// With more ranks than a machine holds, the collectives also cross the
/// machines' network: at the lesser of the two rates, after both fixed
/// costs.
static void shareAmongRanks(ModuleOp module, MachineProfile &m) {
  auto shared =
      module ? getDeclaredAttr<StrataDialect::RanksPerNodeAttrHelper>(module)
             : IntegerAttr();
  if (!shared)
    return;
  if (dataParallelRanks(module) > shared.getInt()) {
    m.commGBs = std::min(m.commGBs, m.netGBs);
    m.commLatencyUs += m.netLatencyUs;
  }
  if (shared.getInt() <= 1)
    return;
  double n = static_cast<double>(shared.getInt());
  m.cpuUpdateGBs /= n;
  m.ssdReadGBs /= n;
  m.ssdWriteGBs /= n;
  if (m.gpu != 0)
    return;
  for (double *rate :
       {&m.matmulSmallGflops, &m.matmulMediumGflops, &m.matmulLargeGflops,
        &m.gemmPeakF32Gflops, &m.gemmPeakBf16Gflops, &m.copyGBs})
    *rate /= n;
  for (double *ns : {&m.simpleNsPerElement, &m.transcendentalNsPerElement,
                     &m.movementNsPerElement})
    *ns *= n;
}

LogicalResult loadProfile(Operation *op, StringRef path, MachineProfile &m) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  if (path == "builtin") { // The documented defaults, as strata-compile's.
    shareAmongRanks(module, m);
    return success();
  }
  using Helper = exec::ExecDialect::MachineProfileAttrHelper;
  DictionaryAttr recorded = module ? getDeclaredAttr<Helper>(module) : nullptr;
  auto source = recorded ? recorded.getAs<StringAttr>("source") : StringAttr();
  if (recorded && (path.empty() || (source && source.getValue() == path))) {
    for (auto &[key, member] : MachineProfile::fields()) {
      auto value = recorded.getAs<FloatAttr>(key);
      if (!value)
        return op->emitError("the module's ")
               << declaredName<Helper>(op->getContext()) << " has no '" << key
               << "'";
      m.*member = value.getValueAsDouble();
    }
    return success();
  }
  if (path.empty()) {
    shareAmongRanks(module, m);
    return success();
  }
  std::string error;
  if (!m.read(path.str(), error))
    return op->emitError(error);
  // Recorded as this rank's share: the later passes read it as is.
  shareAmongRanks(module, m);
  if (!module)
    return success();
  // Read once: the later passes take the figures from the module.
  Builder b(op->getContext());
  SmallVector<NamedAttribute> entries{
      b.getNamedAttr("source", b.getStringAttr(path))};
  for (auto &[key, member] : MachineProfile::fields())
    entries.push_back(b.getNamedAttr(key, b.getF64FloatAttr(m.*member)));
  setDeclaredAttr<Helper>(module, b.getDictionaryAttr(entries));
  return success();
}

namespace {

/// How `update` uses each input (artifact::inputUses); none for the redo
/// of a speculative update, which the cost model takes to find the step
/// unclipped and do nothing (its work on a step that clips is not in the
/// prediction).
std::vector<artifact::InputUse> cpuUpdateUses(exec::KernelOp update) {
  artifact::Kernel kernel;
  if (!artifact::kernelByName(update.getKernel(), kernel))
    return {};
  std::vector<int64_t> ints(update.getInts().begin(), update.getInts().end());
  size_t n = update.getInputs().size();
  if (artifact::updateOperands(kernel, n, ints).speculation ==
      artifact::Speculation::Redo)
    return std::vector<artifact::InputUse>(n, {false, false});
  return artifact::inputUses(kernel, n, ints);
}

} // namespace

double cpuUpdateBytes(exec::KernelOp update) {
  double bytes = 0;
  std::vector<artifact::InputUse> uses = cpuUpdateUses(update);
  for (auto [v, use] : llvm::zip(update.getInputs(), uses))
    bytes += storageBytes(v.getType()) * (use.read + use.written);
  return bytes;
}

double cpuHandOffSeconds(const MachineProfile &m) {
  return m.queueRoundTripUs * 0.5e-6;
}

double cpuJobMinBytes(const MachineProfile &m) {
  return 20 * cpuHandOffSeconds(m) * m.cpuUpdateGBs * 1e9;
}

double cpuUpdateSsdSeconds(exec::KernelOp update, const MachineProfile &m,
                           bool read) {
  double seconds = 0;
  std::vector<artifact::InputUse> uses = cpuUpdateUses(update);
  for (auto [v, use] : llvm::zip(update.getInputs(), uses))
    if ((read ? use.read : use.written) && tierOf(v) == exec::Tier::Ssd)
      seconds += ssdSeconds(storageBytes(v.getType()), read, m);
  return seconds;
}

double cpuUpdateSeconds(exec::KernelOp update, const MachineProfile &m,
                        bool handOff, bool ssd) {
  // Every operand read once (the scale is a few bytes), the in-place ones
  // written back; operands on the SSD are read first and the updated ones
  // written back.
  double io = ssd ? cpuUpdateSsdSeconds(update, m, true) +
                        cpuUpdateSsdSeconds(update, m, false)
                  : 0;
  return io + cpuUpdateBytes(update) / (m.cpuUpdateGBs * 1e9) +
         (handOff ? cpuHandOffSeconds(m) : 0);
}

/// The SSD store's rate (GB/s) for one transfer of `bytes`: it splits a
/// transfer at stripes and keeps the pieces in flight together, so one
/// piece moves at the single-request rate, several at up to that many
/// times it, capped by the bulk (queue depth 32) rate.
double ssdRate(double bytes, bool read, const MachineProfile &m) {
  double pieces = std::max(1.0, std::ceil(bytes / kSsdStripeBytes));
  double single = read ? m.ssdSmallReadGBs : m.ssdSmallWriteGBs;
  return std::min(single * pieces, ssdPeakGBs(read, m));
}

double ssdSeconds(double bytes, bool read, const MachineProfile &m) {
  double latencyUs = read ? m.ssdReadLatencyUs : m.ssdWriteLatencyUs;
  return latencyUs * 1e-6 + bytes / (ssdRate(bytes, read, m) * 1e9);
}

double transferSeconds(double bytes, exec::Tier tier, bool read,
                       const MachineProfile &m) {
  if (tier == exec::Tier::Ssd) {
    double rate = ssdRate(bytes, read, m);
    // A GPU's SSD transfers cross its host link too (staged through host
    // memory): no faster than a pinned copy in that direction.
    double link = !m.gpu ? 0 : read ? m.h2dGBs : m.d2hGBs;
    if (link > 0)
      rate = std::min(rate, link);
    double latencyUs = read ? m.ssdReadLatencyUs : m.ssdWriteLatencyUs;
    return latencyUs * 1e-6 + bytes / (rate * 1e9);
  }
  return bytes / (hostLinkGBs(read, m) * 1e9);
}

double hostLinkGBs(bool toDevice, const MachineProfile &m) {
  // A GPU's pinned copies have a rate per direction.
  return toDevice && m.h2dGBs > 0    ? m.h2dGBs
         : !toDevice && m.d2hGBs > 0 ? m.d2hGBs
                                     : m.copyGBs;
}

double hostDuplexSlowdown(const MachineProfile &m) {
  double both = hostLinkGBs(true, m) + hostLinkGBs(false, m);
  return m.duplexGBs > 0 && both > m.duplexGBs ? both / m.duplexGBs : 1;
}

double ssdPeakGBs(bool read, const MachineProfile &m) {
  return read ? std::max(m.ssdReadGBs, m.ssdSmallReadGBs)
              : std::max(m.ssdWriteGBs, m.ssdSmallWriteGBs);
}

} // namespace strata
