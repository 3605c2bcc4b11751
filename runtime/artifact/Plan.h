// Plan.h - The execution plan of a Strata artifact.
//
// An artifact is a directory:
//
//   plan.bin      this structure, serialized (PlanIO.cpp) behind a header
//                 with magic, format version, payload size and CRC-32C
//   params.bin    parameters and constants, each 4 KiB-aligned, laid out as
//                 the runtime's parameter region (file offset = region offset)
//   manifest.txt  a short human-readable summary
//
// Schema of plan.bin (little-endian; str = u32 length + bytes; vec<T> =
// u32 count + items):
//
//   header:  char[8] "STRAPLAN", u32 version, u32 reserved,
//            u64 payload_bytes, u32 payload_crc32c, u32 header_crc32c
//   payload: str producer, str source_model, u64 source_fingerprint,
//            str mode,
//            u64 arena_bytes, u64 params_bytes,
//            vec<Slot>   slots    (str name, u8 dtype, vec<i64> shape,
//                                  u8 region, u64 offset, u64 bytes,
//                                  u8 class)
//            vec<Bind>   inputs   (str name, u32 slot)
//            vec<Bind>   outputs  (str name, u32 slot)
//            vec<Param>  params   (str name, u32 slot, u8 flags,
//                                  u64 file_offset, u64 bytes, u32 crc32c,
//                                  f64 mean, f64 stddev)
//            vec<Step>   steps    (u16 kernel, vec<u32> inputs,
//                                  vec<u32> outputs, vec<i64> ints,
//                                  vec<f64> floats, i64 issue_after,
//                                  u8 queue, vec<u32> waits)
//            u8 schedule_kind, i64 warmup_steps, i64 total_steps,
//            f64 min_ratio, str optimizer, u32 accumulate,
//            vec<(str class, u64 bytes)> memory,
//            u64 host_bytes, u64 ssd_bytes, u64 params_file_bytes,
//            vec<str> ssd_dirs, u64 synthetic_seed,
//            vec<Span>   predicted (u8 queue, u32 step, f64 start_us,
//                                  f64 end_us)
//
// Regions: 1 arena (device), 2 device parameters, 3 host, 4 SSD.
//
// A plan of another format version is refused, never reinterpreted.

#ifndef STRATA_RUNTIME_ARTIFACT_PLAN_H
#define STRATA_RUNTIME_ARTIFACT_PLAN_H

#include "runtime/support/DType.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::artifact {

constexpr uint32_t kPlanFormatVersion = 10;
constexpr uint64_t kParamAlignment = 4096;
constexpr uint64_t kArenaAlignment = 64;
/// The largest region (arena, parameters, host, SSD) a plan may claim:
/// 64 PiB, far above any machine, and far from wrapping when padded.
constexpr uint64_t kMaxRegionBytes = uint64_t(1) << 56;

/// `bytes` rounded up to a multiple of `alignment`.
constexpr uint64_t alignUp(uint64_t bytes, uint64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

/// `bytes` in whole 4 KiB pages: what a stored tensor takes in its region
/// and what direct I/O moves.
constexpr uint64_t pagePadded(uint64_t bytes) {
  return alignUp(bytes, kParamAlignment);
}

/// Where a slot's bytes live.
enum class Region : uint8_t {
  /// The activation/workspace arena of the device tier (a budgeted host
  /// arena on the CPU backend).
  Arena = 1,
  /// The device-resident parameter region, loaded from params.bin.
  Params = 2,
  /// Host memory (budget --cpu-mem): parameters and state kept off-device.
  Host = 3,
  /// The SSD store (--ssd-dir): parameters and state kept on drives.
  Ssd = 4,
};

const char *regionName(Region region);

/// What a tensor holds, for reports of memory by class. The numbers are
/// part of the format.
enum class SlotClass : uint8_t {
  /// Made by the forward pass (and kept for the backward pass, or not).
  Activation = 0,
  /// A gradient on its way to its update (on the device, or swapped to
  /// host memory or the SSD, or landed there for an update on the CPU).
  Gradient = 1,
  /// Made by the backward pass or the optimizer and not a gradient.
  Workspace = 2,
  /// A program input (token ids, labels).
  Input = 3,
  /// A stored tensor: a trainable or frozen weight, or its low-precision
  /// copy; the optimizer's states; a constant.
  Parameter = 4,
  OptimizerState = 5,
  Constant = 6,
};
constexpr uint8_t kNumSlotClasses = 7;
const char *slotClassName(SlotClass cls);

/// A tensor at a fixed place: every value of the program has one.
struct Slot {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  Region region = Region::Arena;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  SlotClass cls = SlotClass::Activation;

  int64_t numElements() const;
};

/// Kernels. The numeric values are part of the format: only append.
enum class Kernel : uint16_t {
  Add = 1,
  Sub,
  Mul,
  Div,
  Pow,
  Max,
  Min,
  And,
  Or,
  Equal,
  Less,
  Greater,
  Select,
  Neg,
  Exp,
  Log,
  Sqrt,
  Reciprocal,
  Tanh,
  Erf,
  Sigmoid,
  Relu,
  Gelu,
  Not,
  Cast,
  MatMul,
  ReduceSum,
  ReduceMean,
  ReduceMax,
  Softmax,
  LogSoftmax,
  LayerNorm,
  Transpose,
  Slice,
  Concat,
  Broadcast,
  Gather,
  Trilu,
  Copy,
  Abs,
  CrossEntropy,
  CrossEntropyGrad,
  GeluGrad,
  LayerNormGrad,
  GatherGrad,
  SliceGrad,
  UpdateSgd,
  UpdateMomentum,
  UpdateAdamW,
  Accumulate,
  UpdateAdaLomo,
  Assign,
  Sin,
  Cos,
  Store,
  Attention,
  AttentionGrad,
  Elementwise,
  ReduceSumSquare,
  AllReduce,
  ReduceScatter,
  Shard,
  AllGather,
  Unshard,
  CompactRows,
  GroupRows,
  GroupedMatMul,
  SegmentMatMul,
  // Add new kernels above this line.
  NumKernels
};

/// The kernel's name as the compiler and strata-inspect spell it ("matmul").
const char *kernelName(Kernel kernel);
/// kernelName's, its length known (no strlen where names are compared
/// often: the compiler's planner asks every kernel op what it is).
std::string_view kernelNameView(Kernel kernel);
/// Looks a kernel up by name; false if there is none.
bool kernelByName(std::string_view name, Kernel &kernel);

/// One kernel launch. The meaning of `ints`/`floats` is per kernel:
///   gelu: [tanh]; cast: -; reduce_* (reduce_sum_square too): axes...,
///   then keepdims as the last int;
///   softmax/log_softmax: [axis]; layer_norm: [axis, has_bias, (rms)],
///   [epsilon];
///   transpose: perm; slice: offsets..., strides...; concat/gather: [axis];
///   trilu: [upper, k]; broadcast/copy and elementwise kernels: -;
///   gelu_grad: [tanh]; layer_norm_grad: [axis, (rms)], [epsilon];
///   gather_grad: [axis]; slice_grad: offsets..., strides...;
///   update_sgd: [lr, weight_decay]; update_momentum: [lr, momentum,
///   weight_decay]; update_adamw: [lr, beta1, beta2, eps, weight_decay];
///   attention (q, k, v, [mask]) and attention_grad (q, k, v, grad,
///   [mask]; outputs dq, dk, dv): [causal, mask_kind], [scale, fill];
///   elementwise (fused chain; see ElementwiseProgram in KernelContract.h):
///   [instructions, (kernel, a, b, flag) per instruction, the register of
///   each output], [constants];
///   update_adalomo: [lr, weight_decay] with inputs (w, g, states...)
///   (floats), and ints [accumulate] (micro-batches summed into the gradient
///   input); accumulate: -. Update kernels have no outputs: they write their
///   parameter and state inputs (in the parameter region) in place.
///   all_reduce: [ranks]: the mean of its input over the data-parallel
///   ranks, run on the comm queue (runtime/comm/Communicator.h);
///   reduce_scatter: [ranks]: this rank's shard (ceil(numel / ranks)
///   elements of the flattened, zero-padded input) of that mean; shard:
///   [ranks]: a copy of this rank's shard; all_gather (w, shard): [ranks]:
///   w becomes every rank's shard, in rank order (both on the comm queue
///   but shard, a kernel).
///   compact_rows (mask) -> (order, count): [expected count] (the cost
///   model's); group_rows (masks...) -> (order, offsets, count): the same
///   for disjoint masks, [expected count]; grouped_matmul (a, offsets,
///   w...): [transpose w]; segment_matmul (a, b, offsets): [segment].
/// The queue a step runs on. Each queue runs its steps one after another in
/// issue order (see issueOrder); across queues only the steps' waits order
/// them. The numbers are part of the format.
enum class Queue : uint8_t {
  /// Kernels on the device.
  Compute = 0,
  /// Copies from host memory to the device, and back.
  HostToDevice = 1,
  DeviceToHost = 2,
  /// Reads from and writes to the SSD store.
  SsdRead = 3,
  SsdWrite = 4,
  /// Work of the host CPU (an optimizer update on host memory).
  Cpu = 5,
  /// Collectives across data-parallel ranks (all_reduce).
  Comm = 6,
};
constexpr size_t kNumQueues = 7;
const char *queueName(Queue queue);
/// Looks a queue up by name; false if there is none.
bool queueByName(const std::string &name, Queue &queue);

/// Step::issueAfter of a step issued at its place in the program.
constexpr int64_t kInProgramOrder = -2;

struct Step {
  Kernel kernel = Kernel::Copy;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  /// A fetch from host or SSD the compiler scheduled ahead: issued to the
  /// transfer queue right after step `issueAfter` (-1: when the step
  /// starts), so it runs while the steps in between compute. Those steps
  /// never touch its destination or write its source.
  int64_t issueAfter = kInProgramOrder;
  /// Where the step runs, and the steps (on other queues, issued before it)
  /// that must finish before it starts; decided by the compiler, checked
  /// race-free by validatePlan.
  Queue queue = Queue::Compute;
  std::vector<uint32_t> waits;
};

/// A stretch of work on one queue as the compiler's cost model predicts it
/// (--strata-predict-time), in microseconds from the start of a run of the
/// plan: a step's own run, or the SSD reads (staging) and write-backs of a
/// CPU job, which carry the job's first update as their step.
struct PredictedSpan {
  Queue queue = Queue::Compute;
  uint32_t step = 0;
  double startUs = 0, endUs = 0;
};

struct Binding {
  std::string name;
  uint32_t slot = 0;
};

/// A parameter or constant stored in params.bin, at `fileOffset` there;
/// its slot says where it lives at run time (device, host or SSD region).
struct ParamEntry {
  enum Flags : uint8_t {
    Trainable = 1,
    Constant = 2,
    State = 4,
    /// Not stored: generated at load from the plan's seed with `mean` and
    /// `stddev` (plan-only artifacts, strata-compile --synthetic-params).
    Synthetic = 8,
    /// The bf16 or fp16 copy of a trainable fp32 parameter that the model
    /// reads (mixed precision); its update writes it. Not a model weight:
    /// derived from one, and checkpointed with the rest.
    LowCopy = 16,
    /// This rank's shard of the tensor (sharded parameters,
    /// --shard-parameters, and their low-precision copies): the slot holds
    /// ceil(numel / shardRanks) elements of the whole one (`wholeShape`),
    /// which params.bin holds whole (`bytes`); rank r stores elements
    /// [r * c, (r + 1) * c), zeros past the end.
    Sharded = 32,
  };
  std::string name;
  uint32_t slot = 0;
  uint8_t flags = 0;
  uint64_t fileOffset = 0;
  uint64_t bytes = 0;
  uint32_t crc = 0;
  /// Sharded: the number of ranks and the whole tensor's shape.
  uint32_t shardRanks = 0;
  std::vector<int64_t> wholeShape = {};
  /// Synthetic values: uniform with this mean and standard deviation (the
  /// model's own values' figures).
  double mean = 0, stddev = 0;
};

/// The learning-rate schedule of a training plan: the factor the base rate
/// of every update is multiplied by at step t (from 1).
struct Schedule {
  enum Kind : uint8_t { Constant = 0, Warmup = 1, Cosine = 2 };
  Kind kind = Constant;
  /// Linear ramp from 0 over the first `warmupSteps` steps (all kinds).
  int64_t warmupSteps = 0;
  /// Cosine: decay over [warmupSteps, totalSteps] to `minRatio`.
  int64_t totalSteps = 0;
  double minRatio = 0.0;

  double factor(int64_t step) const;
};

struct Plan {
  std::string producer;
  std::string sourceModel;
  /// The source model's graph fingerprint (onnx::graphFingerprint): what
  /// strata-export checks a --model against. 0: not known.
  uint64_t sourceFingerprint = 0;
  /// "forward" for inference/evaluation plans, "train" for training steps.
  std::string mode = "forward";
  uint64_t arenaBytes = 0;
  /// Bytes of the device-resident parameter region.
  uint64_t paramsBytes = 0;
  /// Bytes of the host region and of the SSD store (0 when unused).
  uint64_t hostBytes = 0;
  uint64_t ssdBytes = 0;
  /// Size of params.bin.
  uint64_t paramsFileBytes = 0;
  /// Directories of the SSD store (one file per drive), as compiled.
  std::vector<std::string> ssdDirs;
  std::vector<Slot> slots;
  std::vector<Binding> inputs;
  std::vector<Binding> outputs;
  std::vector<ParamEntry> params;
  std::vector<Step> steps;
  /// Training plans only.
  Schedule schedule;
  /// Description of the optimizer, for people ("adamw lr=0.001 ...").
  std::string optimizer;
  /// Micro-batches per optimizer step.
  uint32_t accumulate = 1;
  /// What strata-run --data feeds a training plan's "labels" input: "next"
  /// (the tokens after the ids: --loss causal-lm) or "same" (the ids
  /// themselves: a model that computes its own loss shifts them, as
  /// HuggingFace models do). Empty for forward plans.
  std::string labels;
  /// The compiler's memory report: (class, bytes) pairs such as
  /// ("parameters", n), ("gradients_at_peak", n). See PlanMemory.cpp.
  std::vector<std::pair<std::string, uint64_t>> memory;

  /// The report's value for `name`, 0 if absent.
  uint64_t memoryOf(const std::string &name) const;
  /// The seed of synthetic parameters (ParamEntry::Synthetic).
  uint64_t syntheticSeed = 0;
  /// The predicted schedule of one run of the steps (empty for plans the
  /// cost model did not see: tools' and tests' own).
  std::vector<PredictedSpan> predicted;
  /// Set by readPlan: the payload's checksum, which identifies the plan.
  uint32_t payloadCrc = 0;
};

/// How many data-parallel ranks the plan's collectives (all_reduce,
/// reduce_scatter, all_gather) run over (strata-compile --data-parallel); 1
/// for a plan without them.
int64_t dataParallelRanks(const Plan &plan);

/// Whether a kernel is a collective over the data-parallel ranks, which the
/// executor runs on the communication queue through the communicator.
bool isCollective(Kernel kernel);

/// Whether the plan shards its optimizer over the ranks
/// (--shard-optimizer): each rank's states are its own.
bool shardsOptimizer(const Plan &plan);

/// Whether a kernel updates its inputs in place (and has no outputs).
bool isUpdateKernel(Kernel kernel);

/// Writes plan.bin atomically (temporary file, fsync, rename).
bool writePlan(const std::string &path, const Plan &plan, std::string &error);
/// The bytes of plan.bin for `plan` (validated first).
bool serializePlan(const Plan &plan, std::string &file, std::string &error);

/// A byte range [begin, end) of the device arena.
struct ArenaRange {
  uint64_t begin = 0, end = 0;
  bool overlaps(const ArenaRange &o) const {
    return begin < o.end && o.begin < end;
  }
};

/// Whether the step moves data between the device and the host or SSD
/// tier: a fetch (Copy from a stored region) or a write-back (Assign or
/// Store into one). These run on the transfer queue.
bool isTransfer(const Plan &plan, const Step &step);

/// Whether the step is an optimizer update the host CPU runs (the CPU
/// queue): SGD, momentum, AdamW or AdaLomo with every operand (parameter,
/// gradient, states, scale) in host memory or on the SSD, where
/// --strata-offload-optimizer puts them. Its gradient and scale arrive by
/// device-to-host stores; the runtime reads operands on the SSD into host
/// staging on the SSD read queue ahead of the update and writes the updated
/// ones back on the SSD write queue (cpuJobs).
bool isCpuUpdate(const Plan &plan, const Step &step);
/// The kernels that can run on the CPU queue.
bool runsOnCpu(Kernel kernel);

/// The arena bytes a step reads and writes (a transfer from or to the SSD
/// moves whole 4 KiB pages, so its arena range is padded to them).
void arenaAccesses(const Plan &plan, const Step &step,
                   std::vector<ArenaRange> &reads,
                   std::vector<ArenaRange> &writes);

/// Bytes of one region a step reads or writes (SSD: offsets in the store,
/// whole pages).
struct Access {
  Region region = Region::Arena;
  ArenaRange range;
  bool overlaps(const Access &o) const {
    return region == o.region && range.overlaps(o.range);
  }
};

/// The bytes of every region a step reads and writes: its inputs (the ones
/// the kernel table says it writes in place are written; assign and store
/// only write their destination) and its outputs. A transfer from or to the
/// SSD moves whole pages on both sides.
void stepAccesses(const Plan &plan, const Step &step,
                  std::vector<Access> &reads, std::vector<Access> &writes);

/// Whether two steps' arena accesses conflict, so one must finish before
/// the other starts: either writes bytes the other reads or writes.
bool accessesConflict(const std::vector<ArenaRange> &readsA,
                      const std::vector<ArenaRange> &writesA,
                      const std::vector<ArenaRange> &readsB,
                      const std::vector<ArenaRange> &writesB);

/// Reads and validates plan.bin: magic, version, checksums, and that every
/// slot, binding and step refers to something that exists and fits.
bool readPlan(const std::string &path, Plan &plan, std::string &error);
/// readPlan on bytes already in memory; `path` names them in errors.
bool parsePlan(const std::string &file, const std::string &path, Plan &plan,
               std::string &error);

/// Checks a plan's internal consistency (used by readPlan and before write).
bool validatePlan(const Plan &plan, std::string &error);

/// Fills `out` (the entry's bytes) with synthetic parameter `index` of
/// `plan`: counter-based, so every machine generates the same values. Of
/// a sharded entry, rank `rank`'s part of the whole tensor, or (`whole`)
/// all of it (then `out` holds the whole tensor's bytes).
void fillSynthetic(const Plan &plan, size_t index, char *out, int rank = 0,
                   bool whole = false);

} // namespace strata::artifact

#endif // STRATA_RUNTIME_ARTIFACT_PLAN_H
