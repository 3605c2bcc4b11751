//===- ArtifactWriter.cpp - exec IR to an artifact directory --------------===//

#include "compiler/serialize/ArtifactWriter.h"
#include "dialects/Strata/StrataDialect.h"

#include "dialects/Exec/ExecDialect.h"
#include "runtime/artifact/MemoryReport.h"
#include "runtime/artifact/Plan.h"
#include "runtime/support/Crc32c.h"
#include "runtime/support/FileLock.h"
#include "runtime/support/FileUtil.h"
#include "runtime/support/Half.h"
#include "runtime/support/Size.h"
#include "llvm/Support/Format.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <cstring>
#include <map>

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using namespace strata;
using artifact::Plan;
using MemRegion = artifact::Region;
using artifact::Slot;

namespace {

std::optional<DType> dtypeOf(Type type) {
  if (type.isF32())
    return DType::F32;
  if (type.isF64())
    return DType::F64;
  if (type.isF16())
    return DType::F16;
  if (type.isBF16())
    return DType::BF16;
  if (type.isInteger(1))
    return DType::Bool;
  if (auto it = dyn_cast<IntegerType>(type)) {
    bool u = it.isUnsigned();
    switch (it.getWidth()) {
    case 8:
      return u ? DType::U8 : DType::I8;
    case 16:
      return u ? DType::U16 : DType::I16;
    case 32:
      return u ? DType::U32 : DType::I32;
    case 64:
      return u ? DType::U64 : DType::I64;
    }
  }
  return std::nullopt;
}

/// The bytes of an elements attribute as the runtime lays them out: dense
/// row-major, one byte per bool, splats expanded.
FailureOr<std::vector<char>> bytesOf(ElementsAttr attr, Operation *op) {
  auto type = cast<ShapedType>(attr.getType());
  int64_t n = type.getNumElements();
  std::vector<char> bytes;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return op->emitError("the data of '")
             << resource.getRawHandle().getKey()
             << "' is not available (IR printed with elided weights?)";
    ArrayRef<char> data = blob->getData();
    bytes.assign(data.begin(), data.end());
    return bytes;
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return op->emitError("unsupported constant attribute kind");
  if (type.getElementType().isInteger(1)) {
    for (bool b : dense.getValues<bool>())
      bytes.push_back(b ? 1 : 0);
    return bytes;
  }
  ArrayRef<char> raw = dense.getRawData();
  if (dense.isSplat()) {
    size_t elementBytes = raw.size();
    bytes.resize(elementBytes * n);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(bytes.data() + i * elementBytes, raw.data(), elementBytes);
    return bytes;
  }
  bytes.assign(raw.begin(), raw.end());
  return bytes;
}

std::string slotName(Operation *op, size_t index) {
  Location loc = op->getLoc();
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(l))
        return name.getName().str();
  return "t" + std::to_string(index);
}

/// The directory an artifact is written into, replaced file by file.
///
/// Compiling never deletes anything but the files of a previous artifact:
/// a target that exists and is not an artifact (a model file, a directory of
/// other things) is refused, and everything else inside a previous artifact
/// (its checkpoints above all) stays where it is. Each file is first staged
/// complete and fsynced beside its final name, then all are renamed into
/// place; a failure removes what was staged (and the directory, when this
/// compile created it), never anything that was there before. The directory
/// is locked for the whole time, so a compile cannot replace the plan of a
/// job that is training from it.
class ArtifactDirectory {
public:
  ~ArtifactDirectory() {
    if (committed_)
      return;
    for (const auto &[staged, final] : files_)
      ::unlink(staged.c_str());
    if (created_) {
      lock_.release();
      ::unlink((dir_ + "/" + kLockFileName).c_str());
      ::rmdir(dir_.c_str());
    }
  }

  bool open(const std::string &dir, std::string &error) {
    dir_ = dir;
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        error = "'" + dir +
                "' exists and is not a directory; refusing to "
                "replace it with an artifact (an artifact is a directory)";
        return false;
      }
      struct stat plan;
      if (::stat((dir + "/plan.bin").c_str(), &plan) != 0 && !isEmpty(dir)) {
        error = "'" + dir +
                "' is a directory that holds no Strata artifact "
                "(no plan.bin); refusing to write into it. Name a new "
                "directory, or an artifact to replace";
        return false;
      }
    } else if (errno == ENOENT) {
      if (!makeDirectories(dir, error))
        return false;
      created_ = true;
    } else {
      error = "cannot use '" + dir + "': " + std::strerror(errno);
      return false;
    }
    if (!lock_.lockDirectory(dir, FileLock::Mode::Exclusive,
                             "compiling into it", error)) {
      error = "artifact " + error;
      return false;
    }
    return true;
  }

  /// Writes `name`'s new contents beside it, complete and fsynced.
  bool stage(const std::string &name, const std::vector<FilePiece> &pieces,
             std::string &error) {
    std::string staged = dir_ + "/." + name + ".new";
    files_.emplace_back(staged, dir_ + "/" + name);
    return writeFileAtomically(staged, pieces, error);
  }

  /// Renames every staged file into place (the plan after the parameters:
  /// a reader between the two sees a plan whose parameter file does not
  /// match and refuses it, never a wrong model).
  bool commit(std::string &error) {
    for (const auto &[staged, final] : files_)
      if (::rename(staged.c_str(), final.c_str()) != 0) {
        error = "cannot move '" + staged + "' to '" + final +
                "': " + std::strerror(errno);
        return false;
      }
    committed_ = true; // In place now, whatever the sync says.
    if (!syncDirectory(dir_)) {
      error = "wrote the artifact '" + dir_ +
              "' but cannot make it durable (fsync): " + std::strerror(errno);
      return false;
    }
    return true;
  }

private:
  static bool isEmpty(const std::string &dir) {
    DIR *d = ::opendir(dir.c_str());
    if (!d)
      return false;
    bool empty = true;
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != ".." && name != kLockFileName) {
        empty = false;
        break;
      }
    }
    ::closedir(d);
    return empty;
  }

  std::string dir_;
  bool created_ = false;
  bool committed_ = false;
  FileLock lock_;
  std::vector<std::pair<std::string, std::string>> files_;
};

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "scalar" : s;
}

} // namespace

void strata::summarizePlan(func::FuncOp func, Plan &plan) {
  for (llvm::StringRef report :
       {exec::ExecDialect::MemoryAttrHelper::getNameStr(),
        exec::ExecDialect::PredictedAttrHelper::getNameStr(),
        exec::ExecDialect::RecomputedAttrHelper::getNameStr(),
        exec::ExecDialect::PlannerAttrHelper::getNameStr(),
        exec::ExecDialect::OffloadAttrHelper::getNameStr()})
    if (auto dict = func->getAttrOfType<DictionaryAttr>(report))
      for (NamedAttribute entry : dict)
        if (auto v = dyn_cast<IntegerAttr>(entry.getValue()))
          plan.memory.push_back(
              {entry.getName().str(), static_cast<uint64_t>(v.getInt())});
  exec::RegionSizes regions = exec::regionSizes(func);
  plan.arenaBytes = regions.arena;
  plan.paramsBytes = regions.params;
  plan.hostBytes = regions.host;
  plan.ssdBytes = regions.ssd;
}

LogicalResult strata::writeArtifact(ModuleOp module, const std::string &dir,
                                    const ArtifactInfo &info) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func)
    return module.emitError("no @main function to serialize");
  exec::RegionSizes regions = exec::regionSizes(func);
  if (!regions.planned)
    return func.emitError("the function has no memory plan (run "
                          "--strata-plan-memory first)");
  Plan plan;
  plan.producer = info.producer;
  plan.sourceModel = info.sourceModel;
  plan.sourceFingerprint = info.sourceFingerprint;
  plan.mode = info.mode;
  plan.schedule = info.schedule;
  plan.optimizer = info.optimizer;
  plan.labels = info.labels;
  plan.accumulate = info.accumulate;
  summarizePlan(func, plan);
  plan.ssdDirs = info.ssdDirs;
  if (plan.ssdBytes > 0 && plan.ssdDirs.empty())
    return func.emitError("the plan keeps tensors on the SSD but no "
                          "--ssd-dir was given");
  // params.bin holds every stored tensor, 4 KiB-aligned, in program order,
  // whatever region it lives in at run time.
  std::vector<char> params;

  llvm::DenseMap<Value, uint32_t> slotOf;
  auto addSlot = [&](Value v, Operation *op, MemRegion region,
                     uint64_t offset) -> FailureOr<uint32_t> {
    auto type = cast<ShapedType>(v.getType());
    std::optional<DType> dtype = dtypeOf(type.getElementType());
    if (!dtype)
      return op->emitError("unsupported element type ")
             << type.getElementType();
    Slot s;
    s.name = slotName(op, plan.slots.size());
    s.dtype = *dtype;
    s.shape.assign(type.getShape().begin(), type.getShape().end());
    s.region = region;
    s.offset = offset;
    s.bytes = static_cast<uint64_t>(s.numElements()) * dtypeSize(*dtype);
    s.cls = exec::classifyBuffer(v);
    plan.slots.push_back(s);
    slotOf[v] = plan.slots.size() - 1;
    return static_cast<uint32_t>(plan.slots.size() - 1);
  };
  auto offsetOf = [](Operation *op) -> FailureOr<uint64_t> {
    auto attr = op->getAttrOfType<IntegerAttr>("offset");
    if (!attr)
      return op->emitError("buffer has no planned offset");
    return static_cast<uint64_t>(attr.getInt());
  };

  // Stored tensors by name: the masters of deferred copies.
  std::map<std::string, exec::ParamOp> masters;
  std::vector<llvm::GlobPattern> initGlobs;
  for (const ArtifactInfo::InitRule &rule : info.syntheticInit) {
    llvm::Expected<llvm::GlobPattern> glob =
        llvm::GlobPattern::create(rule.glob);
    if (!glob)
      return module.emitError("--synthetic-init: invalid glob '")
             << rule.glob << "': " << llvm::toString(glob.takeError());
    initGlobs.push_back(std::move(*glob));
  }
  for (Operation &op : func.getBody().front()) {
    if (auto input = dyn_cast<exec::InputOp>(op)) {
      FailureOr<uint64_t> offset = offsetOf(&op);
      if (failed(offset))
        return failure();
      FailureOr<uint32_t> slot =
          addSlot(input.getResult(), &op, MemRegion::Arena, *offset);
      if (failed(slot))
        return failure();
      plan.slots[*slot].name = input.getName().str();
      plan.inputs.push_back({input.getName().str(), *slot});
    } else if (auto param = dyn_cast<exec::ParamOp>(op)) {
      FailureOr<uint64_t> offset = offsetOf(&op);
      if (failed(offset))
        return failure();
      MemRegion region = param.getTier() == exec::Tier::Host ? MemRegion::Host
                         : param.getTier() == exec::Tier::Ssd
                             ? MemRegion::Ssd
                             : MemRegion::Params;
      FailureOr<uint32_t> slot =
          addSlot(param.getResult(), &op, region, *offset);
      if (failed(slot))
        return failure();
      Slot &s = plan.slots[*slot];
      s.name = param.getName().str();
      masters[s.name] = param;
      artifact::ParamEntry entry;
      entry.name = s.name;
      entry.slot = *slot;
      entry.flags =
          (param.getTrainable() ? artifact::ParamEntry::Trainable : 0) |
          (param.getConstant() ? artifact::ParamEntry::Constant : 0) |
          (param.getState() ? artifact::ParamEntry::State : 0) |
          (param.getCopyOf() ? artifact::ParamEntry::LowCopy : 0);
      entry.bytes = s.bytes;
      // A shard (sharded parameters): params.bin holds the whole tensor,
      // of which each rank stores its part.
      uint64_t storedBytes = s.bytes;
      if (std::optional<uint64_t> ranks = param.getShardRanks()) {
        auto whole = cast<ShapedType>(param.getValue().getType());
        entry.flags |= artifact::ParamEntry::Sharded;
        entry.shardRanks = static_cast<uint32_t>(*ranks);
        entry.wholeShape.assign(whole.getShape().begin(),
                                whole.getShape().end());
        storedBytes =
            static_cast<uint64_t>(whole.getNumElements()) * dtypeSize(s.dtype);
      }
      bool mayBeSynthetic =
          (param.getTrainable() || param.getState() || param.getCopyOf()) &&
          isFloatDType(s.dtype) && s.bytes > 0;
      // A --synthetic-init rule gives the values of the parameters it
      // names (a low-precision copy goes by its master's name); with
      // rules, optimizer states are synthetic too (their start value).
      const ArtifactInfo::InitRule *rule = nullptr;
      if (mayBeSynthetic && !param.getState()) {
        std::string master =
            param.getCopyOf() ? param.getCopyOf()->str() : s.name;
        for (size_t r = 0; r < info.syntheticInit.size() && !rule; ++r)
          if (initGlobs[r].match(master))
            rule = &info.syntheticInit[r];
      }
      bool synthetic =
          mayBeSynthetic && (info.syntheticParams || rule ||
                             (param.getState() && !info.syntheticInit.empty()));
      // A deferred copy's splat is a placeholder, not its values.
      auto splat = param->hasAttr(exec::kDeferredCopyAttr)
                       ? DenseElementsAttr()
                       : dyn_cast<DenseElementsAttr>(param.getValue());
      if (synthetic && (rule || (splat && splat.isSplat()))) {
        // Never read (nor expanded, for a splat): the rule's values, or
        // the splat's.
        entry.mean = rule ? rule->mean
                          : loadAsDouble(s.dtype, splat.getRawData().data());
        entry.stddev = rule ? rule->stddev : 0.0;
        entry.fileOffset = 0;
        entry.crc = 0;
        entry.flags |= artifact::ParamEntry::Synthetic;
        plan.params.push_back(entry);
        continue;
      }
      FailureOr<std::vector<char>> data = failure();
      if (param.getCopyOf() && param->hasAttr(exec::kDeferredCopyAttr)) {
        // A deferred low-precision copy: its master's values, rounded.
        auto master = masters.find(param.getCopyOf()->str());
        if (master == masters.end())
          return param.emitError("low-precision copy of '")
                 << *param.getCopyOf() << "', which is not stored before it";
        data = bytesOf(master->second.getValue(), &op);
        if (failed(data))
          return failure();
        if (data->size() != 2 * storedBytes ||
            !(s.dtype == DType::BF16 || s.dtype == DType::F16))
          return param.emitError("a deferred copy must be bf16 or fp16 of "
                                 "an fp32 master");
        std::vector<char> narrow(storedBytes);
        narrowFloats(reinterpret_cast<const float *>(data->data()),
                     reinterpret_cast<uint16_t *>(narrow.data()),
                     static_cast<int64_t>(storedBytes / 2),
                     s.dtype == DType::BF16);
        *data = std::move(narrow);
      } else {
        data = bytesOf(param.getValue(), &op);
        if (failed(data))
          return failure();
      }
      if (data->size() != storedBytes)
        return param.emitError("stored value has ")
               << data->size() << " bytes, expected " << storedBytes;
      uint64_t fileOffset = synthetic ? 0 : params.size();
      if (synthetic) {
        // Keep the values' mean and spread, so LayerNorm scales stay near
        // one and biases near zero.
        double sum = 0, squares = 0;
        size_t n = data->size() / dtypeSize(s.dtype);
        for (size_t i = 0; i < n; ++i) {
          double v =
              loadAsDouble(s.dtype, data->data() + i * dtypeSize(s.dtype));
          sum += v;
          squares += v * v;
        }
        entry.mean = n ? sum / double(n) : 0.0;
        entry.stddev = n ? std::sqrt(std::max(0.0, squares / double(n) -
                                                       entry.mean * entry.mean))
                         : 0.0;
        if (!std::isfinite(entry.mean) || !std::isfinite(entry.stddev))
          entry.mean = entry.stddev = 0;
      } else {
        params.insert(params.end(), data->begin(), data->end());
        params.resize(artifact::pagePadded(params.size()), '\0');
      }
      entry.fileOffset = fileOffset;
      if (!synthetic)
        entry.bytes = storedBytes;
      entry.crc = synthetic ? 0 : crc32c(data->data(), data->size());
      if (synthetic)
        entry.flags |= artifact::ParamEntry::Synthetic;
      plan.params.push_back(entry);
    } else if (auto space = dyn_cast<exec::SwapSpaceOp>(op)) {
      FailureOr<uint64_t> offset = offsetOf(&op);
      if (failed(offset))
        return failure();
      FailureOr<uint32_t> slot = addSlot(
          space.getResult(), &op,
          space.getTier() == exec::Tier::Ssd ? MemRegion::Ssd : MemRegion::Host,
          *offset);
      if (failed(slot))
        return failure();
      plan.slots[*slot].name = space.getName().str();
    } else if (auto view = dyn_cast<exec::ViewOp>(op)) {
      const Slot base = plan.slots[slotOf.at(view.getInput())];
      FailureOr<uint32_t> slot =
          addSlot(view.getResult(), &op, base.region, base.offset);
      if (failed(slot))
        return failure();
    } else if (auto kernel = dyn_cast<exec::KernelOp>(op)) {
      artifact::Step step;
      artifact::kernelByName(kernel.getKernel(), step.kernel);
      for (Value v : kernel.getInputs())
        step.inputs.push_back(slotOf.at(v));
      SmallVector<int64_t> offsets;
      if (auto all = kernel.getOffsetsAttr())
        offsets.assign(all.asArrayRef().begin(), all.asArrayRef().end());
      else if (kernel.getNumResults() == 1) {
        FailureOr<uint64_t> offset = offsetOf(&op);
        if (failed(offset))
          return failure();
        offsets.push_back(*offset);
      }
      if (offsets.size() != kernel.getNumResults())
        return kernel.emitError("results have no planned offsets");
      for (auto [r, offset] : llvm::zip(kernel.getResults(), offsets)) {
        FailureOr<uint32_t> slot = addSlot(r, &op, MemRegion::Arena, offset);
        if (failed(slot))
          return failure();
        step.outputs.push_back(*slot);
      }
      step.ints.assign(kernel.getInts().begin(), kernel.getInts().end());
      step.floats.assign(kernel.getFloats().begin(), kernel.getFloats().end());
      if (std::optional<int64_t> after = kernel.getIssueAfter())
        step.issueAfter = *after;
      // Queues and waits come from --strata-assign-queues (the plan
      // validator refuses a program without the waits it needs).
      if (std::optional<exec::Queue> queue = kernel.getQueue())
        step.queue = exec::planQueue(*queue);
      if (DenseI64ArrayAttr waits = kernel.getWaitsAttr())
        for (int64_t w : waits.asArrayRef()) {
          if (w < 0 || w > UINT32_MAX)
            return kernel.emitError("wait on a step that does not exist");
          step.waits.push_back(static_cast<uint32_t>(w));
        }
      plan.steps.push_back(std::move(step));
    } else if (auto output = dyn_cast<exec::OutputOp>(op)) {
      plan.outputs.push_back(
          {output.getName().str(), slotOf.at(output.getValue())});
    } else if (!isa<func::ReturnOp>(op)) {
      return op.emitError("cannot serialize ") << op.getName();
    }
  }

  // The predicted schedule (--strata-predict-time), four numbers a span.
  if (auto spans =
          getDeclaredAttr<exec::ExecDialect::PredictedSpansAttrHelper>(func)) {
    ArrayRef<double> v = spans.asArrayRef();
    for (size_t i = 0; i + 3 < v.size(); i += 4) {
      artifact::PredictedSpan p;
      if (!(v[i] >= 0 && v[i] < artifact::kNumQueues && v[i + 1] >= 0 &&
            v[i + 1] < static_cast<double>(plan.steps.size())))
        return func.emitError("predicted span names no queue or step");
      p.queue = static_cast<artifact::Queue>(static_cast<int>(v[i]));
      p.step = static_cast<uint32_t>(v[i + 1]);
      p.startUs = v[i + 2];
      p.endUs = v[i + 3];
      plan.predicted.push_back(p);
    }
  }
  plan.paramsFileBytes = params.size();
  if (info.syntheticParams || !info.syntheticInit.empty())
    plan.syntheticSeed = 1;
  std::string error;
  ArtifactDirectory target;
  if (!target.open(dir, error))
    return module.emitError(error);
  if (!target.stage("params.bin", {{params.data(), params.size()}}, error))
    return module.emitError(error);
  std::string planBytes;
  if (!artifact::serializePlan(plan, planBytes, error) ||
      !target.stage("plan.bin", {{planBytes.data(), planBytes.size()}}, error))
    return module.emitError(error);

  uint64_t trainable = 0, frozen = 0, constants = 0;
  for (const artifact::ParamEntry &p : plan.params) {
    int64_t n = plan.slots[p.slot].numElements();
    (p.flags & artifact::ParamEntry::Constant    ? constants
     : p.flags & artifact::ParamEntry::Trainable ? trainable
                                                 : frozen) += n;
  }
  std::string manifest;
  llvm::raw_string_ostream os(manifest);
  os << "Strata artifact (plan format " << artifact::kPlanFormatVersion
     << ")\nsource: " << plan.sourceModel << "\nproducer: " << plan.producer
     << "\nmode: " << plan.mode << "\n";
  if (plan.mode == "train")
    os << "optimizer: " << plan.optimizer
       << "\nlabels (--data): " << plan.labels << "\n";
  os << "inputs:\n";
  for (const artifact::Binding &b : plan.inputs)
    os << "  " << b.name << ": " << dtypeName(plan.slots[b.slot].dtype) << " "
       << shapeString(plan.slots[b.slot].shape) << "\n";
  os << "outputs:\n";
  for (const artifact::Binding &b : plan.outputs)
    os << "  " << b.name << ": " << dtypeName(plan.slots[b.slot].dtype) << " "
       << shapeString(plan.slots[b.slot].shape) << "\n";
  uint64_t states = 0, copies = 0;
  for (const artifact::ParamEntry &p : plan.params) {
    if (p.flags & artifact::ParamEntry::State)
      states += plan.slots[p.slot].numElements();
    if (p.flags & artifact::ParamEntry::LowCopy)
      copies += plan.slots[p.slot].numElements();
  }
  frozen -= states + copies;
  os << "parameters: " << trainable << " trainable, " << frozen
     << " frozen elements; optimizer state: " << states
     << " elements; constants: " << constants << " elements\n";
  if (copies)
    os << "low-precision copies of trainable parameters: " << copies
       << " elements\n";
  os << "arena sizes per tier:\n  device: " << formatSize(plan.arenaBytes)
     << " (" << plan.arenaBytes << " bytes) + resident parameters "
     << formatSize(plan.paramsBytes) << " (" << plan.paramsBytes
     << " bytes)\n  host: " << formatSize(plan.hostBytes) << " ("
     << plan.hostBytes << " bytes)\n  ssd: " << formatSize(plan.ssdBytes)
     << " (" << plan.ssdBytes << " bytes)";
  for (const std::string &d : plan.ssdDirs)
    os << " " << d;
  os << "\nsteps: " << plan.steps.size() << "\n";
  if (info.stepFlops > 0)
    os << "matrix-product work per step: "
       << llvm::format("%.6g", info.stepFlops)
       << " FLOP (forward and backward); recomputation adds "
       << llvm::format("%.6g", info.recomputedFlops) << " FLOP\n";
  if (!plan.memory.empty())
    os << artifact::formatMemoryReport(plan);
  os.flush();
  if (!target.stage("manifest.txt", {{manifest.data(), manifest.size()}},
                    error) ||
      !target.commit(error))
    return module.emitError(error);
  return success();
}
