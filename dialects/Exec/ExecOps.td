//===- ExecOps.td - Strata exec dialect --------------------*- tablegen -*-===//
//
// The exec dialect: what the runtime executes. Every value is a buffer at a
// fixed place (the device arena or the parameter region) and every op is a
// kernel launch the runtime knows by name.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECTS_EXEC_EXECOPS_TD
#define STRATA_DIALECTS_EXEC_EXECOPS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def Exec_Dialect : Dialect {
  let name = "exec";
  let summary = "Kernel launches on buffers at planned offsets";
  let description = [{
    The last IR before the artifact. Values are buffers: graph inputs
    (`exec.input`), parameters and constants stored in params.bin
    (`exec.param`), kernel results (`exec.kernel`) and re-shaped aliases of
    other buffers (`exec.view`). After `--strata-plan-memory` every buffer
    carries its `offset` in its region and the function carries the region
    sizes; serialization writes exactly that.

    ```mlir
    func.func @main() attributes {exec.arena_bytes = 128 : i64, exec.params_bytes = 4096 : i64} {
      %x = exec.input "x" {offset = 0 : i64} : tensor<2x4xf32>
      %w = exec.param "w" trainable {offset = 0 : i64, value = dense<1.0> : tensor<4x8xf32>} : tensor<4x8xf32>
      %y = exec.kernel "matmul"(%x, %w) {offset = 64 : i64} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
      exec.output "y" %y : tensor<2x8xf32>
      return
    }
    ```
  }];
  let cppNamespace = "::strata::exec";
  let useDefaultAttributePrinterParser = 1;
  // What passes record on the planned function, for the passes after them,
  // the artifact writer and the compile driver: the region sizes and the
  // prefetch window (--strata-plan-memory), the memory report
  // (--strata-plan-memory), the predicted step and its per-step schedule
  // (--strata-predict-time), the planner's and the recomputation's figures
  // (--strata-place-tiers), the updates moved to the CPU
  // (--strata-offload-optimizer). On an update kernel, `update_on` ("cpu"
  // or "device") is where the tier planner decided it runs, which
  // --strata-offload-optimizer follows in its auto mode. On the module,
  // `machine_profile` is the machine profile the first pass given one read
  // (its figures by name, and `source`, the file), which the later passes
  // read instead of the file.
  let discardableAttrs = (ins
    "::mlir::IntegerAttr":$arena_bytes,
    "::mlir::IntegerAttr":$params_bytes,
    "::mlir::IntegerAttr":$host_bytes,
    "::mlir::IntegerAttr":$ssd_bytes,
    "::mlir::IntegerAttr":$prefetch_window,
    "::mlir::FloatAttr":$prefetch_lead,
    "::mlir::DictionaryAttr":$memory,
    "::mlir::DictionaryAttr":$predicted,
    "::mlir::DenseF64ArrayAttr":$predicted_spans,
    "::mlir::DictionaryAttr":$planner,
    "::mlir::DictionaryAttr":$recomputed,
    "::mlir::DictionaryAttr":$offload,
    "::mlir::StringAttr":$update_on,
    "::mlir::DictionaryAttr":$machine_profile
  );
}

class Exec_Op<string mnemonic, list<Trait> traits = []>
    : Op<Exec_Dialect, mnemonic, traits>;

/// Where a stored tensor (exec.param, exec.swap_space) lives, printed
/// `#exec.tier<host>`.
def Exec_Tier : I32EnumAttr<"Tier", "where a stored tensor lives", [
    I32EnumAttrCase<"Device", 0, "device">,
    I32EnumAttrCase<"Host", 1, "host">,
    I32EnumAttrCase<"Ssd", 2, "ssd">]> {
  let cppNamespace = "::strata::exec";
  let genSpecializedAttr = 0;
}
def Exec_TierAttr : EnumAttr<Exec_Dialect, Exec_Tier, "tier"> {
  let assemblyFormat = "`<` $value `>`";
}

/// The queue a kernel runs on (--strata-assign-queues), printed
/// `#exec.queue<h2d>`; the same cases in the same order as the plan's
/// artifact::Queue.
def Exec_Queue : I32EnumAttr<"Queue", "the queue a kernel runs on", [
    I32EnumAttrCase<"Compute", 0, "compute">,
    I32EnumAttrCase<"HostToDevice", 1, "h2d">,
    I32EnumAttrCase<"DeviceToHost", 2, "d2h">,
    I32EnumAttrCase<"SsdRead", 3, "ssd_read">,
    I32EnumAttrCase<"SsdWrite", 4, "ssd_write">,
    I32EnumAttrCase<"Cpu", 5, "cpu">,
    I32EnumAttrCase<"Comm", 6, "comm">]> {
  let cppNamespace = "::strata::exec";
  let genSpecializedAttr = 0;
}
def Exec_QueueAttr : EnumAttr<Exec_Dialect, Exec_Queue, "queue"> {
  let assemblyFormat = "`<` $value `>`";
}

def Exec_InputOp : Exec_Op<"input"> {
  let summary = "A graph input, copied into the device arena before a run";
  let description = [{
    ```mlir
    %ids = exec.input "input_ids" {offset = 0 : i64} : tensor<4x128xi64>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<I64Attr>:$offset);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Exec_ParamOp : Exec_Op<"param"> {
  let summary = "A parameter or constant stored in the artifact";
  let description = [{
    Lives in the parameter region at `offset` (4 KiB-aligned), initialised
    from `value`. `constant` marks compile-time constants; `trainable`
    parameters are updated by training plans; `state` is optimizer state.
    `tier` says where it lives: `device` (the parameter region), `host` or
    `ssd`; off-device tensors are only read through fetches (`copy`) and
    written through `assign`. `copy_of` names the trainable fp32 parameter
    this one is the bf16 or fp16 copy of (mixed precision): the model reads
    the copy, and the parameter's update writes it (--strata-low-copies).
    With `shard_ranks` (sharded parameters) the result is this rank's shard
    (ceil(numel / shard_ranks) elements) of the whole tensor `value`: each
    rank stores its own part of it.

    ```mlir
    %w = exec.param "fc.weight" trainable {offset = 4096 : i64, value = dense<0.5> : tensor<4x8xf32>} : tensor<4x8xf32>
    %c = exec.param "fc.weight.bf16" {copy_of = "fc.weight", value = dense<0.5> : tensor<4x8xbf16>} : tensor<4x8xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$trainable, UnitAttr:$constant,
                       UnitAttr:$state, ElementsAttr:$value,
                       OptionalAttr<I64Attr>:$offset,
                       DefaultValuedAttr<Exec_TierAttr,
                                         "::strata::exec::Tier::Device">:$tier,
                       OptionalAttr<StrAttr>:$copy_of,
                       OptionalAttr<I64Attr>:$shard_ranks);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $name (`trainable` $trainable^)? (`constant` $constant^)?
    (`state` $state^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Exec_SwapSpaceOp : Exec_Op<"swap_space"> {
  let summary = "Room on the host or SSD for a swapped-out activation";
  let description = [{
    Holds no initial value and is not part of checkpoints' meaning: a
    forward activation is stored here (`exec.kernel "store"`) after its last
    forward use and fetched back (`exec.kernel "copy"`) before the backward
    pass needs it, freeing its device memory in between.

    ```mlir
    %s = exec.swap_space "swap.3" {tier = #exec.tier<ssd>, offset = 0 : i64} : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Exec_TierAttr:$tier,
                       OptionalAttr<I64Attr>:$offset);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Exec_KernelOp : Exec_Op<"kernel"> {
  let summary = "One kernel launch";
  let description = [{
    Runs the runtime kernel `kernel` (see runtime/artifact/Plan.h for the
    list and for what `ints`/`floats` mean to each) on its operands, writing
    its result buffers at `offset` (and `offsets` for further results) in
    the device arena. Update kernels have no result: they write their first
    operands (parameter, optimizer state) in place.

    The schedule, set by later passes and read by the cost model and the
    artifact writer: `issue_after` (--strata-schedule-transfers) is the
    index of the kernel after which a fetch is issued (-1: at the start of
    the step; absent: in program order); `queue` and `waits`
    (--strata-assign-queues) name the queue the kernel runs on and the
    kernels (by index) it waits for.

    ```mlir
    %p = exec.kernel "softmax"(%s) {ints = array<i64: 2>, offset = 256 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$kernel, Variadic<AnyStaticShapeTensor>:$inputs,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$ints,
                       DefaultValuedAttr<DenseF64ArrayAttr, "{}">:$floats,
                       OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets,
                       OptionalAttr<I64Attr>:$issue_after,
                       OptionalAttr<Exec_QueueAttr>:$queue,
                       OptionalAttr<DenseI64ArrayAttr>:$waits);
  let results = (outs Variadic<AnyStaticShapeTensor>:$results);
  let assemblyFormat = [{
    $kernel `(` $inputs `)` attr-dict `:` functional-type($inputs, results)
  }];
  let builders = [
    // A kernel with nothing planned or scheduled yet.
    OpBuilder<(ins "::mlir::TypeRange":$results, "::llvm::StringRef":$kernel,
                   "::mlir::ValueRange":$inputs,
                   CArg<"::llvm::ArrayRef<int64_t>", "{}">:$ints,
                   CArg<"::llvm::ArrayRef<double>", "{}">:$floats), [{
      build($_builder, $_state, results, $_builder.getStringAttr(kernel),
            inputs, $_builder.getDenseI64ArrayAttr(ints),
            $_builder.getDenseF64ArrayAttr(floats), ::mlir::IntegerAttr(),
            ::mlir::DenseI64ArrayAttr(), ::mlir::IntegerAttr(),
            ::strata::exec::QueueAttr(), ::mlir::DenseI64ArrayAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether this launches `kind`: its name as the kernel table spells
    /// it, so that a pass names kernels by the table's enum, not by text.
    bool isKernel(::strata::artifact::Kernel kind) {
      return getKernel() ==
             ::llvm::StringRef(::strata::artifact::kernelNameView(kind));
    }
    /// An optimizer update: writes its parameter and states in place, reads
    /// the gradient as its second operand (not a store or accumulate). The
    /// kernel table's update_* kernels, exactly those whose in-place class
    /// is ParamAndStates (the runtime unit test
    /// Kernel.UpdatesAreTheUpdateNamedKernels).
    bool isUpdate() { return getKernel().starts_with("update_"); }
    /// A collective over the data-parallel ranks (all_reduce,
    /// reduce_scatter, all_gather): the communication queue's.
    bool isCollective() {
      using ::strata::artifact::Kernel;
      return isKernel(Kernel::AllReduce) || isKernel(Kernel::ReduceScatter) ||
             isKernel(Kernel::AllGather) || isKernel(Kernel::Unshard);
    }
    /// Whether this moves a value between the arena and a stored region:
    /// a fetch (copy), a write-back or swap-out (assign, store).
    bool isTransferKernel() {
      using ::strata::artifact::Kernel;
      return isKernel(Kernel::Copy) || isKernel(Kernel::Store) ||
             isKernel(Kernel::Assign);
    }
  }];
  let hasVerifier = 1;
}

def Exec_ViewOp : Exec_Op<"view"> {
  let summary = "The same bytes with another shape (no copy)";
  let description = [{
    ```mlir
    %v = exec.view %x : tensor<2x16x64xf32> -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Exec_OutputOp : Exec_Op<"output"> {
  let summary = "Names a buffer as a graph output";
  let description = [{
    ```mlir
    exec.output "logits" %y : tensor<4x128x256xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, AnyStaticShapeTensor:$value);
  let assemblyFormat = "$name $value attr-dict `:` type($value)";
}

#endif // STRATA_DIALECTS_EXEC_EXECOPS_TD
