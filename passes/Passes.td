//===- Passes.td - Strata passes ---------------------------*- tablegen -*-===//

#ifndef STRATA_PASSES_PASSES_TD
#define STRATA_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

// The options the pipelines and their passes share, declared once in
// passes/PipelineOptions.h and written as ODS defs at build time
// (strata-options-td): `PlaceParamsOption` for --place-params, its pass
// member `placeParams`. The options below that a pass declares itself are
// its own (no pipeline has them).
include "passes/PipelineOptions.td"

def AppendLossPass : Pass<"strata-append-loss", "mlir::ModuleOp"> {
  let summary = "Make the model's function compute a scalar training loss";
  let description = [{
    `kind=causal-lm` (for models mapping token ids [B, T] to logits
    [B, T, V]): adds a `labels` input shaped like the token ids and returns
    the mean cross-entropy over all B*T positions, as
    `torch.nn.functional.cross_entropy(logits.view(-1, V), labels.view(-1))`.
    `kind=output`: the model's first output already is the scalar loss.

    Before:
    ```mlir
    func.func @main(%ids: tensor<2x8xi64> {graph.name = "input_ids"}) -> (tensor<2x8x96xf32> {graph.name = "logits"})
    ```
    After:
    ```mlir
    func.func @main(%ids: tensor<2x8xi64> {graph.name = "input_ids"}, %labels: tensor<2x8xi64> {graph.name = "labels"}) -> (tensor<f32> {graph.name = "loss"}) {
      ...
      %l2 = graph.reshape %logits : tensor<2x8x96xf32> -> tensor<16x96xf32>
      %y2 = graph.reshape %labels : tensor<2x8xi64> -> tensor<16xi64>
      %loss = graph.cross_entropy %l2, %y2 : (tensor<16x96xf32>, tensor<16xi64>) -> tensor<f32>
      return %loss : tensor<f32>
    }
    ```
  }];
  let options = [
    LossOption
  ];
  let dependentDialects = ["::strata::graph::GraphDialect"];
}

def AutodiffPass : Pass<"strata-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of the loss";
  let description = [{
    Differentiates the function's first result (a scalar loss) with respect
    to every trainable `graph.param`, walking the ops in reverse and asking
    each for its rule (GradientOpInterface). Values used more than once sum
    their gradients (tied embeddings); frozen parameters and integer values
    get none, and ops that do not lead from a trainable parameter to the loss
    are not differentiated. The gradients become extra results, each marked
    with `graph.grad_of = "<parameter>"`; a parameter the loss does not
    depend on gets no gradient (and, as in PyTorch, no update).

    ```mlir
    // After: func.func @main(...) -> (tensor<f32> {graph.name = "loss"},
    //                                 tensor<4x8xf32> {graph.grad_of = "w"})
    ```
  }];
  let dependentDialects = ["::strata::graph::GraphDialect"];
  let statistics = [
    Statistic<"numGradients", "gradients", "Parameters given a gradient">
  ];
}

def AttachOptimizerPass : Pass<"strata-attach-optimizer", "mlir::ModuleOp"> {
  let summary = "Turn gradient results into in-place optimizer updates";
  let description = [{
    Consumes the `graph.grad_of` results left by autodiff: creates the
    optimizer state (`train.state`), computes the global gradient norm
    (returned as `grad_norm`, and used to clip when `clip-grad-norm` > 0,
    as torch.nn.utils.clip_grad_norm_), and applies one `train.update_*` per
    parameter before the return. With `clip-mode=two-pass` the backward
    ops are cloned ahead of the original ones to compute the norm first, so
    that fused updates need not wait; with `previous-step` the scale comes
    from the norm saved by the previous step.

    ```mlir
    %m = train.state "w.exp_avg" : tensor<4x8xf32>
    %v = train.state "w.exp_avg_sq" : tensor<4x8xf32>
    ...
    train.update_adamw %w, %gw, %m, %v {...} : tensor<4x8xf32>
    return %loss, %norm : tensor<f32>, tensor<f32>
    ```
  }];
  let options = [
    OptimizerOption,
    LrOption,
    MomentumOption,
    Beta1Option,
    Beta2Option,
    EpsOption,
    WeightDecayOption,
    ClipGradNormOption,
    AccumulateOption,
    ClipModeOption,
    LossScaleOption,
    LossScaleInitOption,
    LossScaleWindowOption
  ];
  let dependentDialects = ["::strata::train::TrainDialect"];
}

def DataParallelPass : Pass<"strata-data-parallel", "mlir::ModuleOp"> {
  let summary = "Average every gradient over the data-parallel ranks";
  let description = [{
    Runs after autodiff, before the optimizer is attached. Each of
    `data-parallel` processes runs the step on its own slice of the global
    batch; a `train.all_reduce` (with `shard-optimizer`, a
    `train.reduce_scatter`: this rank's shard of the mean) right after each
    gradient's last
    contribution replaces it with its mean over the ranks, so that the
    norm, clipping, accumulation and the updates all see the global
    batch's gradient. The all-reduces run on the communication queue
    beside the rest of the backward pass. With one rank it changes nothing.
    With `shard-parameters` (which implies `shard-optimizer`) each trainable
    parameter becomes this rank's shard of it (`graph.param` with
    `shard_ranks`), and a `train.unshard` gathers it whole just before its
    readers: once before the forward pass's first, again before the
    backward pass's. It records on the module how many ranks share a machine
    (`strata.ranks_per_node`), which the cost model divides the machine's
    shared figures by.

    ```mlir
    %gw = graph.matmul ...               // this rank's gradient of w
    %gw.mean = train.all_reduce %gw {ranks = 2 : i64} : tensor<4x8xf32>
    return %loss, %gw.mean : ...
    ```
  }];
  let options = [ DataParallelOption, RanksPerNodeOption, ShardOptimizerOption,
                  ShardParametersOption ];
  let dependentDialects = ["::strata::train::TrainDialect"];
}

def GroupExpertsPass : Pass<"strata-group-experts", "mlir::ModuleOp"> {
  let summary = "Routed experts as one grouped product over their rows";
  let description = [{
    Runs on graph IR after import. A mixture of experts as transformers
    exports it routes with one NonZero per expert (`torch.where(
    expert_mask[e])`), which the importer holds at its bound with the real
    rows first (`graph.compact_rows`, one per expert): every expert's rows
    are a buffer of tokens x top-k rows, E buffers where the real rows of
    all experts together fill one.

    The pass finds compact_rows ops whose masks are classes of one one-hot
    (a `graph.gather` of one class index from the same one-hot, through the
    same views, tested against its "off" value): such masks never hold at
    the same position, so every expert's real rows fit one buffer of the
    candidates' length. When the experts' computations are the same ops
    (one expert's, checked op by op against every other's) but for the
    matrices of their products (the experts' weights), and each expert's
    rows are scatter-added into one running total and into nothing else
    (the `index_add_` chain: the sum over one buffer of every expert's rows
    is then the same total; every other op the importer lets touch such
    rows treats them one by one), the
    experts become one computation over that buffer: `graph.group_rows`
    orders the candidates expert by expert (their `offsets`), the
    products by per-expert weights become `graph.grouped_matmul`, every
    other op runs once over the buffer, and one combine replaces the
    chain. The same numbers (the rows of each expert are the same rows, and
    each token's outputs are added in expert order), a single buffer where
    there were E, and one kernel per op where there were E. Anything that
    does not match (another use of an expert's values, an op that differs
    between experts) leaves the experts as they are. A remark says what
    was grouped.
  }];
}

def FusePatternsPass : Pass<"strata-fuse-patterns", "mlir::ModuleOp"> {
  let summary = "Replace decomposed functions (GELU, attention) with fused ops";
  let description = [{
    Runs on graph IR before autodiff, so the gradients of what it fuses
    are fused too. Exporters write a GELU as a chain of elementwise ops
    (`pow` or multiplies, adds, `tanh` or `erf`), each a full pass over
    memory forward and more backward. The pass finds every closed subgraph
    of elementwise ops whose inputs are one tensor x and scalar constants
    and evaluates it (in double) at probe points; one that computes the
    tanh or the erf GELU of x, however it is associated or ordered, becomes
    one `graph.gelu` (its kernel and its gradient kernel are one pass each).
    A `pow` by a constant 2 or 3 becomes multiplies, by 0.5 a square root.
    Attention written as `matmul(q, kT)`, an optional scaling by a scalar,
    an optional mask (`select` with a scalar fill, or an added float mask),
    `softmax` over the keys and `matmul` with v becomes one
    `graph.attention` whose kernels never store the T x S scores; a
    constant causal mask becomes its `causal` attribute (FuseAttention.cpp).
    A remark says what was fused.

    ```mlir
    %t = graph.tanh ... (eight elementwise ops of %x) ...
    %y = graph.mul %v, %c : ...
    // becomes
    %y = graph.gelu %x tanh : tensor<4x16xf32>
    ```
  }];
}

def AutocastPass : Pass<"strata-autocast", "mlir::ModuleOp"> {
  let summary = "Mixed precision: matrix products in bf16 or fp16, casts in the IR";
  let description = [{
    Runs on the loss function before autodiff, so the gradients follow the
    same precisions. With `precision=bf16` or `fp16` (fp32: nothing
    changes), ops are visited in program order:
    - matrix products and attention take low-precision operands (the
      kernels accumulate in fp32) and give low-precision results;
    - softmax, log-softmax, layer/RMS norms, reductions, exp, log, pow and
      the cross-entropy take fp32 operands and give fp32 results;
    - every other op runs in its operands' precision: mixed activations
      widen to fp32, and weights (parameters and constants, through
      reshapes, transposes, broadcasts and slices) take the activations'
      precision, as a bias inside PyTorch's autocast linear does.
    Each change of precision is an explicit `graph.cast`; parameters stay
    fp32 (the optimizer updates these masters; the cast of a parameter is
    its low-precision copy), and so does each function result. The
    gradient of a cast is the cast back, so activation gradients are low
    precision and parameter gradients fp32. Whatever the precision, a
    trainable fp16 or bf16 parameter (a model exported in half precision)
    becomes an fp32 master read through a cast to its own type.

    Before (`precision=bf16`):
    ```mlir
    %n = graph.layer_norm %x, %g, %beta axis = 1 epsilon = 1.0E-5 : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %y = graph.matmul %n, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    ```
    After:
    ```mlir
    %n = graph.layer_norm %x, %g, %beta axis = 1 epsilon = 1.0E-5 : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %n16 = graph.cast %n : tensor<4x8xf32> -> tensor<4x8xbf16>
    %w16 = graph.cast %w : tensor<8x8xf32> -> tensor<8x8xbf16>
    %y = graph.matmul %n16, %w16 : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
    ```
  }];
  let options = [
    PrecisionOption
  ];
}

def FuseElementwisePass : Pass<"strata-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Group chains of elementwise ops into graph.fused kernels";
  let description = [{
    Runs on the whole step (forward, backward and optimizer arithmetic)
    before lowering, so the chains the backward pass creates are fused too.
    Elementwise float ops of one result shape (add, sub, mul, div, pow,
    max, min, the unary math ops, gelu and gelu_grad) join the group of an
    operand's producer when that keeps the program order valid: every use
    of the group's values outside it must come after the op. A group of two
    or more ops becomes one `graph.fused` whose kernel reads each input once
    and writes each result once; values used only inside never reach
    memory. Splat constants become the kernel's constants. A remark says how
    many chains and ops were fused.

    Before:
    ```mlir
    %x = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %g = graph.gelu %x tanh : tensor<4x8xf32>
    %s = graph.add %g, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %sum = graph.reduce_sum %x axes = [0] : tensor<4x8xf32> -> tensor<8xf32>
    ```
    After (%x is used outside, so it is a result too):
    ```mlir
    %f:2 = graph.fused %a, %b, %r : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    ^bb0(%a0: tensor<4x8xf32>, %b0: tensor<8xf32>, %r0: tensor<4x8xf32>):
      %x = graph.add %a0, %b0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %g = graph.gelu %x tanh : tensor<4x8xf32>
      %s = graph.add %g, %r0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      graph.yield %x, %s : tensor<4x8xf32>, tensor<4x8xf32>
    }
    %sum = graph.reduce_sum %f#0 axes = [0] : tensor<4x8xf32> -> tensor<8xf32>
    ```
  }];
}

def FuseGradUpdatePass : Pass<"strata-fuse-grad-update", "mlir::ModuleOp"> {
  let summary = "Apply each update as soon as its gradient is final (LOMO)";
  let description = [{
    Moves every `train.update_*` (and `train.accumulate`) to just after the
    last op it depends on: the final contribution to its gradient, its
    state, and the last read of the parameter's old value (through views).
    The gradient's last use is then the update, so the memory plan frees it
    at once: at no moment do more than a few parameters' gradients exist,
    which is LOMO's memory saving, done as a schedule the IR shows.

    The gradient-norm computation is moved next to each gradient too. An
    update whose clipping scale depends on every gradient (global-norm
    clipping of this step) cannot move before the last gradient; the pass
    says so for each such update.

    Before (all updates after the backward pass):
    ```mlir
    %gw2 = graph.matmul ...          // gradient of w2, final
    %gw1 = graph.matmul ...          // gradient of w1, final
    train.update_sgd %w2, %gw2 {...}
    train.update_sgd %w1, %gw1 {...}
    ```
    After:
    ```mlir
    %gw2 = graph.matmul ...
    train.update_sgd %w2, %gw2 {...}
    %gw1 = graph.matmul ...
    train.update_sgd %w1, %gw1 {...}
    ```
  }];
  let statistics = [
    Statistic<"numFused", "fused", "Updates moved next to their gradient">,
    Statistic<"numBlocked", "blocked",
              "Updates that must wait for every gradient">
  ];
}

def PlaceTiersPass : Pass<"strata-place-tiers", "mlir::ModuleOp"> {
  let summary = "Place stored tensors, activations and gradients on tiers";
  let description = [{
    Decides where each parameter and optimizer state lives (the device
    parameter region, host memory or the SSD store), what happens to each
    forward activation the backward pass reads (kept, swapped out to host
    or SSD after its last forward use and fetched back before its first
    backward use, or recomputed right before that use by rerunning its
    kernel and, for inputs the backward pass does not keep, their kernels in
    turn, up to a chain of eight), and whether each gradient
    waits for the optimizer step on the device or is swapped out after its
    last backward use and fetched before each optimizer-step reader.

    Each class is forced (`params=ssd`, `activations=recompute`, ...) or
    left to the planner (`auto`). Without a device budget `auto` keeps
    everything on the device. With one (`gpu-mem`), the planner scores
    whole placements -- each applied to a clone, memory planned with
    `--strata-plan-memory`, scheduled and predicted with
    `--strata-predict-time` -- starting from three greedy placements, the
    naive swap-all and recompute-all plans, the least-device plan and the
    greedy and least-device starts of every one-class forced placement
    (`states=ssd`, ...), then moves whole classes, whole layers (a move
    kept is tried on the next 2, 4, 8, ... layers at once), where each
    layer's updates run, and single tensors while the score (bytes over
    the budgets, then predicted step) improves; with what is left, it searches once more per class from the
    best start with that class on one tier, holding it there. Up to
    `planner-evaluations` scores. With every class left to it, the planner
    then also makes, for every one-class forced placement, the same search
    a run forcing it would make (same start, same budget) and keeps the
    best result of all, so no such placement can be predicted faster than
    its choice; scores are cached by placement. The searches run at once
    (`threads`), each on its own clone of the module, and are compared in
    a fixed order, so the plan does not depend on the number of threads.
    It records what it scored in `exec.planner`.

    Every read of an off-device tensor gets a fetch into the device arena
    just before it (`exec.kernel "copy"`), and every in-place update of one
    runs on a fetched copy that is written back (`exec.kernel "assign"`).

    ```mlir
    %w = exec.param "w" trainable {tier = "ssd", value = ...} : tensor<4x8xf32>
    %f = exec.kernel "copy"(%w) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = exec.kernel "matmul"(%x, %f) ...
    ```
  }];
  let options = [
    PlaceParamsOption,
    PlaceStatesOption,
    PlaceActivationsOption,
    PlaceGradientsOption,
    GpuMemOption,
    CpuMemOption,
    HasSsdOption,
    ProfileOption,
    PlaceUpdatesOption,
    CpuJobBytesOption,
    SpeculateUpdatesOption,
    PlannerEvaluationsOption,
    ProgressOption,
    PrefetchLeadOption,
    PlannerThreadsOption,
    PlannerCheckOption
  ];
  let statistics = [
    Statistic<"numFetches", "fetches", "Fetches into the device arena">,
    Statistic<"numWritebacks", "writebacks", "Write-backs after updates">,
    Statistic<"numSwapped", "swapped", "Activations swapped out and back">,
    Statistic<"numRecomputed", "recomputed",
              "Activations recomputed before the backward pass">,
    Statistic<"numGradientsSwapped", "gradients-swapped",
              "Gradients swapped out until the optimizer step">
  ];
  // The op markers (strata.backward, ...) are read through the loaded
  // dialect's names, not looked up in the context for every op.
  let dependentDialects = ["::strata::StrataDialect"];
}

def OffloadOptimizerPass : Pass<"strata-offload-optimizer", "mlir::ModuleOp"> {
  let summary = "Run optimizer updates on the host CPU, beside the backward pass";
  let description = [{
    After tier placement, moves each chosen SGD, momentum, AdamW or AdaLomo
    update
    whose parameter and states live in host memory or on the SSD to the CPU
    queue: instead
    of fetching the parameter and states to the device, updating them there
    and writing them back (about 24 bytes a parameter each way in fp32), the
    gradient is stored to host memory as soon as it is final, the update
    runs on the CPU on the host-resident parameter and states, and the next
    step's forward fetches the new parameter as before. Updates that
    --strata-fuse-grad-update placed inside the backward pass then run on
    the CPU while the device computes the rest of it. Gradients land in
    host buffers per tensor type, taken in turn: at least three of each
    shape, and more while `cpu-mem` has room (up to one per update, when
    no gradient's store waits for the CPU to free a buffer). With
    `place-updates=auto` updates move only while the host tensors and the
    buffers at their least stay within `cpu-mem`.
    Small updates (biases, norms) are grouped with the updates after them
    into one CPU job, which runs where the job's last update stood, so that
    each pays no hand-off of its own (`cpu-job-bytes`). States on the SSD
    are read ahead into host staging on the SSD read queue and written back
    on the SSD write queue, beside the CPU jobs that update them.

    With exact clipping an update's scale is known only once every gradient
    is, after the backward pass. With `speculate-updates` a CPU update then runs
    twice in the program: right after its gradient, as if the step did not
    clip (scale 1), first copying each tensor it writes into a keep in the
    same tier (`speculation.keep.N`); and where it stood, as a redo that
    does nothing when the scale is exactly 1 and otherwise copies the keeps
    back and updates with the scale. The result is bit for bit that of the
    update after the backward pass; the cost is the keeps' capacity and,
    on steps that clip, the update's work again after the backward pass.

    `place-updates`: `device` keeps every update on the device; `cpu` moves
    every update that can move; `auto` (the default) moves one when the cost model
    predicts less time for the gradient's trip and the CPU update than for
    the fetches, the device update and the write-backs. A remark says how
    many moved, how many of those overlap the backward pass (and why the
    others cannot: a scale that depends on every gradient), and why any
    update stayed (its parameter or a state in device memory, an
    accumulated gradient).

    ```mlir
    %gs = exec.swap_space "cpu-update.grad.0" {tier = "host"} : tensor<4x4xf32>
    exec.kernel "store"(%gs, %gw) : ...
    exec.kernel "update_adamw"(%w, %gs, %m, %v, %ss) {floats = ...} : ...
    ```
  }];
  let options = [
    PlaceUpdatesOption,
    ProfileOption,
    CpuJobBytesOption,
    CpuMemOption,
    SpeculateUpdatesOption,
  ];
  // The op markers (strata.backward, ...) are read through the loaded
  // dialect's names, not looked up in the context for every op.
  let dependentDialects = ["::strata::StrataDialect"];
}

def ScheduleTransfersPass : Pass<"strata-schedule-transfers", "mlir::ModuleOp"> {
  let summary = "Issue fetches from host and SSD ahead of their use";
  let description = [{
    After memory planning, marks each fetch (a `copy` of a value stored on
    the host or the SSD) with `issue_after`: the last kernel before it that
    reads or writes its destination bytes or writes its source. The runtime
    issues the fetch to its transfer queue right after that kernel, so it
    overlaps the kernels in between; the memory plan already guarantees
    those never touch the destination. `lookahead` bounds how many kernels
    ahead a fetch may start.

    Before (the fetch's destination, offset 64, was %a's bytes):
    ```mlir
    %a = exec.kernel "exp"(%x) {offset = 64 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %b = exec.kernel "exp"(%a) {offset = 128 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %c = exec.kernel "exp"(%b) {offset = 192 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %wf = exec.kernel "copy"(%w) {offset = 64 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    ```
    After (issued once kernel 1, the last reader of %a, is done; it
    overlaps kernel 2):
    ```mlir
    %wf = exec.kernel "copy"(%w) {issue_after = 1 : i64, offset = 64 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
  let options = [
    Option<"lookahead", "lookahead", "int64_t", /*default=*/"1000000",
           "Most kernels a fetch may be issued ahead of its use">
  ];
}

def AssignQueuesPass : Pass<"strata-assign-queues", "mlir::ModuleOp"> {
  let summary = "Put every step on a queue and order the queues with waits";
  let description = [{
    After transfer scheduling, gives each `exec.kernel` the queue it runs on
    (`queue`: compute, h2d, d2h, ssd-read, ssd-write, cpu) and the steps on
    other queues it must wait for (`waits`: kernel indices, issued before
    it). The waits are the fewest that order every pair of steps whose
    accesses conflict (one writes bytes of the arena, or a stored buffer,
    that the other reads or writes), in the runtime's issue order (fetches
    with `issue_after` right after that kernel). The runtime and the cost
    model follow these edges; the plan validator proves them race-free.

    ```mlir
    %f = exec.kernel "copy"(%w) {issue_after = -1 : i64, queue = "ssd-read", offset = 0 : i64} : ...
    %y = exec.kernel "matmul"(%x, %f) {queue = "compute", waits = array<i64: 0>, offset = 4096 : i64} : ...
    ```
  }];
}

def PredictTimePass : Pass<"strata-predict-time", "mlir::ModuleOp"> {
  let summary = "Predict the step time of the planned program";
  let description = [{
    A cost model over the exec program, from a machine profile
    (strata-calibrate; documented defaults without one): matrix products by
    FLOPs at a size-dependent rate, streaming kernels by elements (simple,
    transcendental, data movement) plus a launch cost, and transfers by
    bytes over their link (host copies, SSD reads and writes plus a
    latency). The prediction replays the runtime's schedule: each step on
    its queue (`queue`), after the steps it waits for (`waits`) and, for a
    fetch, from its issue point (`issue_after`); the lower bound is the
    busiest resource (compute, host link, SSD), what perfect overlap would
    reach. Sets `exec.predicted` (in microseconds) on the function;
    strata-compile --report and strata-run show it. Sets `exec.predicted_spans` too: the predicted schedule, four
    numbers per stretch of work (queue, step, start and end in
    microseconds), which the artifact keeps for strata-inspect --html.

    ```mlir
    func.func @main() attributes {exec.predicted = {predicted_compute_us = 1002 : i64, predicted_lower_bound_us = 1249 : i64, predicted_serial_us = 3661 : i64, predicted_step_us = 3000 : i64, ...}, exec.predicted_spans = array<f64: ...>}
    ```
  }];
  let options = [
    ProfileOption
  ];
  // The op markers (strata.backward, ...) are read through the loaded
  // dialect's names, not looked up in the context for every op.
  let dependentDialects = ["::strata::StrataDialect"];
}

def LowerGraphToExecPass : Pass<"strata-lower-graph-to-exec", "mlir::ModuleOp"> {
  let summary = "Lower graph ops to exec kernel launches on buffers";
  let description = [{
    Bufferizes the graph: each function argument becomes an `exec.input`,
    each parameter and constant an `exec.param` stored in the artifact, each
    computation an `exec.kernel` producing a new buffer, and each reshape an
    `exec.view` of its operand's bytes. Results become `exec.output`s.
    Axis attributes become the `ints`/`floats` the runtime kernels read.

    Before:
    ```mlir
    func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<8xf32> {graph.name = "y"}) {
      %r = graph.relu %x : tensor<2x4xf32>
      %y = graph.reshape %r : tensor<2x4xf32> -> tensor<8xf32>
      return %y : tensor<8xf32>
    }
    ```
    After:
    ```mlir
    func.func @main() {
      %x = exec.input "x" : tensor<2x4xf32>
      %r = exec.kernel "relu"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %y = exec.view %r : tensor<2x4xf32> -> tensor<8xf32>
      exec.output "y" %y : tensor<8xf32>
      return
    }
    ```
  }];
  let dependentDialects = ["::strata::exec::ExecDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "Number of kernel launches created">,
    Statistic<"numViews", "views", "Number of reshapes turned into views">
  ];
}

def LowPrecisionCopiesPass : Pass<"strata-low-copies", "mlir::ModuleOp"> {
  let summary = "Mixed precision: the model reads bf16/fp16 weight copies "
                "that the updates write";
  let description = [{
    After --strata-autocast the model reads each trainable fp32 master
    through `cast` kernels to bf16 or fp16, and the cast's result is held
    from the forward pass to the backward pass. For each master whose
    update (sgd, momentum, adamw) comes after every reader of its casts,
    the casts are replaced by one stored `exec.param` in the low precision
    (`copy_of` the master; initial values rounded as the cast rounds) and
    the update takes it as its last operand (`ints[1] = 1`): it writes the
    new weights rounded into the copy. The numbers are those of the casts;
    the copy is placed like a parameter, so a master on the host streams
    half the bytes to the device, and nothing is held between the passes.
    A master also read in fp32 (an embedding's gather) keeps those reads.

    Before:
    ```mlir
    %w = exec.param "w" trainable {value = ...} : tensor<64x64xf32>
    %c = exec.kernel "cast"(%w) : (tensor<64x64xf32>) -> tensor<64x64xbf16>
    %y = exec.kernel "matmul"(%x, %c) ...
    exec.kernel "update_sgd"(%w, %g) {floats = array<f64: 0.1, 0.0>, ints = array<i64: 1>} : ...
    ```
    After:
    ```mlir
    %w = exec.param "w" trainable {value = ...} : tensor<64x64xf32>
    %c = exec.param "w.bf16" {copy_of = "w", value = ...} : tensor<64x64xbf16>
    %y = exec.kernel "matmul"(%x, %c) ...
    exec.kernel "update_sgd"(%w, %g, %c) {floats = array<f64: 0.1, 0.0>, ints = array<i64: 1, 1>} : ...
    ```
  }];
  let dependentDialects = ["::strata::exec::ExecDialect"];
  let options = [
    DeferCopyValuesOption
  ];
  let statistics = [
    Statistic<"numCopies", "copies", "Low-precision weight copies made">,
    Statistic<"numCastsRemoved", "casts-removed",
              "Casts of masters replaced by a copy">,
    Statistic<"numKept", "casts-kept",
              "Casts of masters kept (a reader after the update)">
  ];
}

def StoreNarrowPass : Pass<"strata-store-narrow", "mlir::ModuleOp"> {
  let summary = "Widening casts that the backward pass reads are recomputed "
                "there, so the narrow tensor is what waits";
  let description = [{
    Mixed precision widens a bf16 or fp16 activation to fp32 for the ops
    that compute in fp32 (the loss, norms); when the backward pass reads
    the fp32 result too (the loss's gradient reads the logits), autodiff
    would keep it, at twice the bytes, from the forward pass to the
    backward pass. Here each such backward reader reads a copy of the cast
    made right before the first of them, so the narrow input waits
    instead: the same values (widening is exact), half the bytes held, one
    more cheap elementwise pass.

    ```mlir
    %w = exec.kernel "cast"(%logits) : (tensor<8x64xbf16>) -> tensor<8x64xf32>
    %l = exec.kernel "cross_entropy"(%w, %labels) ...
    // ... the backward pass:
    %w2 = exec.kernel "cast"(%logits) {strata.backward} : (tensor<8x64xbf16>) -> tensor<8x64xf32>
    %d = exec.kernel "cross_entropy_grad"(%w2, %labels, %seed) {strata.backward} ...
    ```
  }];
  let dependentDialects = ["::strata::exec::ExecDialect"];
  let statistics = [
    Statistic<"numRecomputed", "recomputed",
              "Widening casts recomputed for the backward pass">
  ];
}

def PlanMemoryPass : Pass<"strata-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assign every buffer an offset in its region";
  let description = [{
    A static memory plan with liveness-based reuse. A buffer is live from the
    op that defines it to its last use, where a use of an `exec.view` is a
    use of the viewed buffer and outputs live to the end. Buffers are placed
    largest first at the lowest 64-byte-aligned offset that does not overlap
    a buffer with an overlapping lifetime (so a kernel never writes over its
    own operands). Parameters and constants are laid out in order at 4 KiB
    alignment, as params.bin stores them.

    Sets `offset` on every `exec.input`, `exec.kernel` and `exec.param`, and
    `exec.arena_bytes` / `exec.params_bytes` on the function: the arena size
    is the plan's peak, which the runtime's accounting reports back.

    ```mlir
    %a = exec.kernel "exp"(%x) {offset = 64 : i64} : (tensor<16xf32>) -> tensor<16xf32>
    %b = exec.kernel "exp"(%a) {offset = 0 : i64} : (tensor<16xf32>) -> tensor<16xf32>
    ```

    The destination of a fetch from host or SSD is reserved early, so
    --strata-schedule-transfers can issue it ahead of its use and the copy
    overlaps the compute. With `prefetch-lead=0` the window is in ops: up
    to `prefetch-window` ops before the fetch (never before the last write
    back into its source); with a `gpu-mem` budget, the window is halved
    until the arena plus the resident parameters fit (down to none), and
    `exec.prefetch_window` records the window used.

    With `prefetch-lead` above 0 (the default, as in the pipeline) the
    windows are in time, from the cost model of `profile`: a fetch's
    destination is reserved from the op
    before which the kernels up to its use take `prefetch-lead` times the
    fetch's own transfer time, and the device copy a write-back (`store`,
    `assign`) reads stays reserved until the kernels after it take as long,
    so that neither a large fetch nor a large write-back makes a kernel wait
    (the runtime's waits would hold the kernel that reuses the bytes). With
    a `gpu-mem` budget the lead is halved until the plan fits (down to none);
    `exec.prefetch_lead` records the lead used.
  }];
  let options = [
    Option<"prefetchWindow", "prefetch-window", "int64_t", /*default=*/"32",
           "Ops ahead of its use a fetch's destination is reserved">,
    GpuMemOption,
    PrefetchLeadOption,
    ProfileOption
  ];
  let statistics = [
    Statistic<"numBuffers", "buffers", "Number of arena buffers placed">,
    Statistic<"arenaBytes", "arena-bytes", "Size of the device arena">,
    Statistic<"unsharedBytes", "unshared-bytes",
              "Arena size without reuse (sum of all buffers)">
  ];
}

#endif // STRATA_PASSES_PASSES_TD
