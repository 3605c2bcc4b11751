//===- TrainOps.td - Strata train dialect ------------------*- tablegen -*-===//
//
// Training state and optimizer updates. Updates write their parameter (and
// optimizer state) in place, so their position in the program is exactly
// when the new value takes effect: passes such as fuse-grad-update move them.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECTS_TRAIN_TRAINOPS_TD
#define STRATA_DIALECTS_TRAIN_TRAINOPS_TD

include "mlir/IR/OpBase.td"

def Train_Dialect : Dialect {
  let name = "train";
  let summary = "Optimizer state and in-place parameter updates";
  let description = [{
    A training step is the forward and backward graph (graph dialect) plus
    the ops here: persistent optimizer state and the updates that apply a
    gradient to a parameter. The learning rate in an update is the base
    rate; the runtime multiplies it by the schedule's factor for the current
    step, and passes the step number (from 1) for bias corrections. With
    `accumulate = N`, the gradient operand is an accumulator summed over N
    micro-batches: the update runs on the last one, uses the mean, and
    zeroes the accumulator.

    ```mlir
    %w = graph.param "w" trainable : tensor<4x8xf32>
    %m = train.state "w.exp_avg" : tensor<4x8xf32>
    %v = train.state "w.exp_avg_sq" : tensor<4x8xf32>
    train.update_adamw %w, %g, %m, %v {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<4x8xf32>
    ```
  }];
  let cppNamespace = "::strata::train";
}

class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, traits>;

def Train_StateOp : Train_Op<"state"> {
  let summary = "Persistent optimizer state";
  let description = [{
    Every element starts at `init` (zero by default) and keeps its value
    from one step to the next (and across checkpoints).

    ```mlir
    %buf = train.state "w.momentum_buffer" : tensor<4x8xf32>
    %scale = train.state "loss_scale.value" {init = 65536.0 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins StrAttr:$name, DefaultValuedAttr<F64Attr, "0.0">:$init);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Train_UpdateSgdOp : Train_Op<"update_sgd", [AllTypesMatch<["param", "grad"]>]> {
  let summary = "w -= lr * (scale * g + weight_decay * w)";
  let description = [{
    PyTorch's SGD without momentum (weight decay added to the gradient).
    `scale`, when present, multiplies the gradient first (global-norm
    clipping, loss-scale removal); a scale that is zero or NaN skips the
    update entirely (an overflowed step under dynamic loss scaling).

    ```mlir
    train.update_sgd %w, %g {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$param, AnyStaticShapeTensor:$grad,
                       Optional<AnyStaticShapeTensor>:$scale, F64Attr:$lr,
                       F64Attr:$weight_decay,
                       DefaultValuedAttr<I64Attr, "1">:$accumulate);
  let assemblyFormat = [{
    $param `,` $grad (`scale` $scale^ `:` type($scale))? attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

def Train_UpdateMomentumOp
    : Train_Op<"update_momentum", [AllTypesMatch<["param", "grad", "buffer"]>]> {
  let summary = "SGD with momentum, as PyTorch (dampening 0, not Nesterov)";
  let description = [{
    `d = scale * g + weight_decay * w; buf = momentum * buf + d;
    w -= lr * buf`.

    ```mlir
    train.update_momentum %w, %g, %buf {lr = 0.1 : f64, momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$param, AnyStaticShapeTensor:$grad,
                       AnyStaticShapeTensor:$buffer,
                       Optional<AnyStaticShapeTensor>:$scale, F64Attr:$lr,
                       F64Attr:$momentum, F64Attr:$weight_decay,
                       DefaultValuedAttr<I64Attr, "1">:$accumulate);
  let assemblyFormat = [{
    $param `,` $grad `,` $buffer (`scale` $scale^ `:` type($scale))? attr-dict
    `:` type($param)
  }];
  let hasVerifier = 1;
}

def Train_UpdateAdamWOp
    : Train_Op<"update_adamw",
               [AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq"]>]> {
  let summary = "AdamW with decoupled weight decay and bias correction";
  let description = [{
    As torch.optim.AdamW: `w *= 1 - lr * weight_decay;
    m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g^2;
    w -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)`.

    ```mlir
    train.update_adamw %w, %g, %m, %v {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$param, AnyStaticShapeTensor:$grad,
                       AnyStaticShapeTensor:$exp_avg,
                       AnyStaticShapeTensor:$exp_avg_sq,
                       Optional<AnyStaticShapeTensor>:$scale, F64Attr:$lr,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay,
                       DefaultValuedAttr<I64Attr, "1">:$accumulate);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq
    (`scale` $scale^ `:` type($scale))? attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

def Train_UpdateAdaLomoOp
    : Train_Op<"update_adalomo", [AllTypesMatch<["param", "grad"]>]> {
  let summary = "AdaLomo: factored second moment, grouped update normalisation";
  let description = [{
    As AdaLomo (Lv et al., 2023), with Adafactor's factorisation: for a
    matrix, `states` are the running row and column means of `g^2 + 1e-30`
    (beta2 = 1 - t^-0.8), the update is `g / sqrt(row * col / mean(row))`,
    divided by `max(1, RMS(update))` and scaled by `max(1e-3, RMS(w))`; a
    vector keeps one unfactored state. Needs only its own gradient, so it
    fuses into the backward pass like LOMO.

    ```mlir
    train.update_adalomo %w, %g, %row, %col {lr = 1.0e-3 : f64, weight_decay = 0.0 : f64} : tensor<64x256xf32>, tensor<64xf32>, tensor<256xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$param, AnyStaticShapeTensor:$grad,
                       Variadic<AnyStaticShapeTensor>:$states, F64Attr:$lr,
                       F64Attr:$weight_decay);
  let assemblyFormat = [{
    $param `,` $grad `,` $states attr-dict `:` type($param) `,` type($states)
  }];
  let hasVerifier = 1;
}

def Train_AssignOp
    : Train_Op<"assign", [AllTypesMatch<["state", "value"]>]> {
  let summary = "Overwrite a state with a value (kept for the next step)";
  let description = [{
    ```mlir
    train.assign %previous_norm, %norm : tensor<f32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$state, AnyStaticShapeTensor:$value);
  let assemblyFormat = "$state `,` $value attr-dict `:` type($state)";
}

def Train_AccumulateOp
    : Train_Op<"accumulate", [AllTypesMatch<["accumulator", "grad"]>]> {
  let summary = "accumulator += grad (gradient accumulation over micro-batches)";
  let description = [{
    Runs on every micro-batch. The updates of a plan compiled with
    `--accumulate N` read the accumulator (divided by N) on the last
    micro-batch of a step, and zero it.

    ```mlir
    train.accumulate %acc, %g : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$accumulator,
                       AnyStaticShapeTensor:$grad);
  let assemblyFormat = "$accumulator `,` $grad attr-dict `:` type($accumulator)";
}

def Train_AllReduceOp
    : Train_Op<"all_reduce", [AllTypesMatch<["input", "result"]>]> {
  let summary = "The mean of a tensor over the data-parallel ranks";
  let description = [{
    Each of `ranks` processes runs the same step on its own slice of the
    global batch; a gradient averaged over them is the gradient of the
    global batch's mean loss (--strata-data-parallel puts one on every
    gradient). Every rank runs the same all-reduces in the same order; on
    the runtime's communication queue, beside the compute.

    ```mlir
    %g = train.all_reduce %local {ranks = 4 : i64} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, I64Attr:$ranks);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Train_ReduceScatterOp : Train_Op<"reduce_scatter"> {
  let summary = "This rank's shard of the mean of a tensor over the ranks";
  let description = [{
    Sharded optimizer state (--shard-optimizer, ZeRO stages 1 and 2): the
    tensor, flattened and padded with zeros to `ranks` shards of
    ceil(numel / ranks) elements, is averaged over the ranks, and each rank
    keeps only its own shard (rank r: elements [r * c, (r + 1) * c)). Every
    rank runs the same collectives in the same order, on the communication
    queue.

    ```mlir
    %g.shard = train.reduce_scatter %g {ranks = 4 : i64} : tensor<4x8xf32> -> tensor<8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, I64Attr:$ranks);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Train_ShardOp : Train_Op<"shard"> {
  let summary = "A copy of this rank's shard of a tensor";
  let description = [{
    Elements [r * c, (r + 1) * c) of the flattened tensor on rank r, where
    c = ceil(numel / ranks); past the end, zeros. A sharded update works on
    it, and train.all_gather puts every rank's updated shard back.

    ```mlir
    %w.shard = train.shard %w {ranks = 4 : i64} : tensor<4x8xf32> -> tensor<8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, I64Attr:$ranks);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Train_AllGatherOp : Train_Op<"all_gather"> {
  let summary = "Overwrite a tensor with every rank's shard of it";
  let description = [{
    The inverse of train.shard over the ranks: `target`, flattened, becomes
    the concatenation of every rank's `shard` (each ceil(numel / ranks)
    elements; the padding past the end is dropped). Written in place, kept
    for the next step, like train.assign.

    ```mlir
    train.all_gather %w, %w.shard {ranks = 4 : i64} : tensor<4x8xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$target,
                       AnyStaticShapeTensor:$shard, I64Attr:$ranks);
  let assemblyFormat = [{
    $target `,` $shard attr-dict `:` type($target) `,` type($shard)
  }];
  let hasVerifier = 1;
}

def Train_UnshardOp : Train_Op<"unshard"> {
  let summary = "The whole tensor, gathered from every rank's shard of it";
  let description = [{
    Sharded parameters (--shard-parameters, ZeRO stage 3): each rank stores
    only its shard of a parameter (ceil(numel / ranks) elements), and the
    whole one is gathered into a temporary just before its readers, once
    for the forward pass and again for the backward pass, so that no rank
    keeps a whole parameter between its uses. The concatenation of every
    rank's `shard`, the padding past the end dropped, in `result`'s shape.
    On the communication queue, in the same order on every rank.

    ```mlir
    %w = train.unshard %w.shard {ranks = 4 : i64} : tensor<8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$shard, I64Attr:$ranks);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$shard attr-dict `:` type($shard) `->` type($result)";
  let hasVerifier = 1;
}

#endif // STRATA_DIALECTS_TRAIN_TRAINOPS_TD
