//===- GraphOps.td - Strata graph dialect ops -------------*- tablegen -*-===//
//
// Ops of the graph dialect. Every operand and result is a statically shaped
// tensor; attributes that describe axes are normalised (non-negative, sorted)
// so that passes never re-derive ONNX's conventions.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECTS_GRAPH_GRAPHOPS_TD
#define STRATA_DIALECTS_GRAPH_GRAPHOPS_TD

include "dialects/Graph/GraphDialect.td"
include "dialects/Graph/GradientInterface.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Traits and base classes
//===----------------------------------------------------------------------===//

/// Operands broadcast against each other NumPy-style and the result has the
/// broadcast shape. For comparisons the result element type is i1, otherwise
/// it equals the (common) element type of the data operands.
def Graph_Broadcasting : NativeOpTrait<"Broadcasting"> {
  let cppNamespace = "::strata::graph::OpTrait";
}

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, traits>;

/// Ops with a reverse-mode gradient rule (GraphGradients.cpp).
def Graph_Differentiable : DeclareOpInterfaceMethods<Graph_GradientOpInterface>;

class Graph_BinaryOp<string mnemonic, string summaryText,
                     list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat([Pure, Graph_Broadcasting,
                                     Graph_Differentiable], traits)> {
  let summary = summaryText;
  let description = [{
    Elementwise `}] # summaryText # [{` with NumPy broadcasting: the result
    shape is the broadcast of the operand shapes; both operands have the same
    element type.

    ```mlir
    %r = graph.}] # mnemonic # [{ %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$lhs, AnyStaticShapeTensor:$rhs);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

class Graph_CompareOp<string mnemonic, string summaryText>
    : Graph_BinaryOp<mnemonic, summaryText> {
  let results = (outs StaticShapeTensorOf<[I1]>:$result);
}

class Graph_UnaryOp<string mnemonic, string summaryText, Type operandType,
                    list<Trait> traits = []>
    : Graph_Op<mnemonic,
               !listconcat([Pure, SameOperandsAndResultType,
                            Graph_Differentiable], traits)> {
  let summary = summaryText;
  let description = [{
    Elementwise `}] # summaryText # [{`; the result has the operand's type.

    ```mlir
    %r = graph.}] # mnemonic # [{ %x : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Graph_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;

//===----------------------------------------------------------------------===//
// Values: constants and parameters
//===----------------------------------------------------------------------===//

def Graph_ConstantOp : Graph_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "A constant tensor";
  let description = [{
    A compile-time constant. Integer and boolean initializers of an ONNX model,
    its `Constant` nodes, and every shape computation the importer folds end up
    here.

    ```mlir
    %c = graph.constant dense<[2, 3]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins TypedAttrInterface:$value);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Graph_ParamOp : Graph_Op<"param"> {
  let summary = "A model parameter (an initializer of the source model)";
  let description = [{
    Reads the current value of the named parameter. `trainable` parameters get
    gradients and optimizer updates; the others (frozen with `--freeze`) are
    read-only state. `initial_value`, when present, holds the value the source
    model was exported with (usually a `dense_resource` blob that refers to
    the model's data without copying it).

    The op has no declared side effects, so it is never removed or merged:
    parameters are the model's state even when the graph does not read them.

    With `shard_ranks` (sharded parameters, --shard-parameters, ZeRO stage
    3) the result is this rank's shard of the parameter: elements
    [r * c, (r + 1) * c) of it flattened, c = ceil(numel / shard_ranks),
    zeros past its end; `initial_value` stays the whole parameter's, of
    which each rank stores its own part.

    ```mlir
    %w = graph.param "lm_head.weight" trainable : tensor<64x256xf32>
    %r = graph.param "rope.cos" {initial_value = dense<1.0> : tensor<16x8xf32>} : tensor<16x8xf32>
    %s = graph.param "fc.weight" trainable {shard_ranks = 2 : i64, initial_value = dense<0.5> : tensor<4x8xf32>} : tensor<16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$trainable,
                       OptionalAttr<ElementsAttr>:$initial_value,
                       OptionalAttr<I64Attr>:$shard_ranks);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$name (`trainable` $trainable^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def Graph_AddOp : Graph_BinaryOp<"add", "addition", [Commutative]> {
  let hasCanonicalizer = 1;
}
def Graph_SubOp : Graph_BinaryOp<"sub", "subtraction">;
def Graph_MulOp : Graph_BinaryOp<"mul", "multiplication", [Commutative]>;
def Graph_DivOp : Graph_BinaryOp<"div", "division (integer: truncating)">;
def Graph_PowOp : Graph_BinaryOp<"pow", "power">;
def Graph_MaxOp : Graph_BinaryOp<"max", "maximum", [Commutative]>;
def Graph_MinOp : Graph_BinaryOp<"min", "minimum", [Commutative]>;
def Graph_AndOp : Graph_BinaryOp<"and", "logical and", [Commutative]>;
def Graph_OrOp : Graph_BinaryOp<"or", "logical or", [Commutative]>;
def Graph_EqualOp : Graph_CompareOp<"equal", "equality comparison">;
def Graph_LessOp : Graph_CompareOp<"less", "less-than comparison">;
def Graph_GreaterOp : Graph_CompareOp<"greater", "greater-than comparison">;

def Graph_NegOp : Graph_UnaryOp<"neg", "negation", AnyStaticShapeTensor>;
def Graph_AbsOp : Graph_UnaryOp<"abs", "absolute value", AnyStaticShapeTensor>;
def Graph_ExpOp : Graph_UnaryOp<"exp", "exponential", Graph_FloatTensor>;
def Graph_LogOp : Graph_UnaryOp<"log", "natural logarithm", Graph_FloatTensor>;
def Graph_SqrtOp : Graph_UnaryOp<"sqrt", "square root", Graph_FloatTensor>;
def Graph_ReciprocalOp
    : Graph_UnaryOp<"reciprocal", "reciprocal (1/x)", Graph_FloatTensor>;
def Graph_TanhOp : Graph_UnaryOp<"tanh", "hyperbolic tangent", Graph_FloatTensor>;
def Graph_SinOp : Graph_UnaryOp<"sin", "sine", Graph_FloatTensor>;
def Graph_CosOp : Graph_UnaryOp<"cos", "cosine", Graph_FloatTensor>;
def Graph_ErfOp : Graph_UnaryOp<"erf", "Gauss error function", Graph_FloatTensor>;
def Graph_SigmoidOp
    : Graph_UnaryOp<"sigmoid", "logistic sigmoid", Graph_FloatTensor>;
def Graph_ReluOp : Graph_UnaryOp<"relu", "rectified linear unit", Graph_FloatTensor>;
def Graph_NotOp
    : Graph_UnaryOp<"not", "logical negation", StaticShapeTensorOf<[I1]>>;

def Graph_GeluOp : Graph_Op<"gelu", [Pure, SameOperandsAndResultType, Graph_Differentiable]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `x * Phi(x)` with the exact (erf) form, or the tanh approximation when
    `tanh` is given (ONNX `Gelu` with `approximate = "tanh"`).

    ```mlir
    %y = graph.gelu %x tanh : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, UnitAttr:$tanh);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input (`tanh` $tanh^)? attr-dict `:` type($input)";
}

def Graph_SelectOp : Graph_Op<"select", [Pure, Graph_Broadcasting, Graph_Differentiable]> {
  let summary = "Elementwise choice between two tensors (ONNX Where)";
  let description = [{
    `result[i] = condition[i] ? on_true[i] : on_false[i]`, all three operands
    broadcasting NumPy-style.

    ```mlir
    %r = graph.select %mask, %a, %b : (tensor<4x4xi1>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[I1]>:$condition,
                       AnyStaticShapeTensor:$on_true,
                       AnyStaticShapeTensor:$on_false);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def Graph_CastOp : Graph_Op<"cast", [Pure, SameOperandsAndResultShape, Graph_Differentiable]> {
  let summary = "Element type conversion";
  let description = [{
    Converts each element: floats round to nearest, float to integer truncates
    toward zero, anything to i1 tests for non-zero.

    ```mlir
    %f = graph.cast %i : tensor<4xi64> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions, reductions, normalisations
//===----------------------------------------------------------------------===//

def Graph_MatMulOp : Graph_Op<"matmul", [Pure, Graph_Differentiable]> {
  let summary = "Matrix product with NumPy matmul semantics";
  let description = [{
    Batched matrix product: the last two dimensions contract, leading
    dimensions broadcast; a rank-1 operand is a vector (as `numpy.matmul`).
    `transpose_lhs`/`transpose_rhs` read that operand with its last two
    dimensions swapped, so `x @ W^T` needs no transposed copy of `W`
    (canonicalization folds `graph.transpose` into them).

    With `rows` (an i64 scalar known when the step runs: the count of
    rows of a data-dependent length, NonZero's, held at their bound with
    the real ones first), both operands are matrices and the lhs's stored
    rows (its dimension 0) from `rows` on are taken as zero: without
    `transpose_lhs` the result's rows from `rows` on are zero, with it
    those rows drop out of the contraction (then the rhs is not
    transposed). The product costs the real rows only.

    ```mlir
    %y = graph.matmul %x, %w : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
    %z = graph.matmul %x, %v {transpose_rhs} : (tensor<2x16x64xf32>, tensor<256x64xf32>) -> tensor<2x16x256xf32>
    %r = graph.matmul %rows, %w rows %n : (tensor<32x64xf32>, tensor<64x256xf32>, tensor<i64>) -> tensor<32x256xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$lhs, AnyStaticShapeTensor:$rhs,
                       Optional<0DTensorOf<[I64]>>:$rows,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs (`rows` $rows^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Graph_CompactRowsOp : Graph_Op<"compact_rows", [Pure]> {
  let summary = "The positions of a mask's true entries first, then the others";
  let description = [{
    For a mask of candidate rows (NonZero's, one per element of its input),
    `order` lists the positions where the mask holds, ascending, then the
    others, ascending; `count` is how many hold. Rows gathered in this
    order have the real ones first, so products can stop at `count`
    (`graph.matmul ... rows`). Not differentiable (integer results).
    `expected`, when given, is the count the cost model assumes (the
    importer's estimate: a mask that is one class of a one-hot over E
    classes holds for 1/E of its entries, as a router spreads tokens over
    E experts); memory is planned at the bound whatever it says.

    ```mlir
    %order, %count = graph.compact_rows %mask {expected = 2 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
    ```
  }];
  let arguments = (ins 1DTensorOf<[I1]>:$mask, OptionalAttr<I64Attr>:$expected);
  let results = (outs 1DTensorOf<[I64]>:$order, 0DTensorOf<[I64]>:$count);
  let assemblyFormat = "$mask attr-dict `:` type($mask) `->` `(` type($order) `,` type($count) `)`";
  let hasVerifier = 1;
}

def Graph_GroupRowsOp : Graph_Op<"group_rows", [Pure]> {
  let summary = "Candidate rows grouped by which of several disjoint masks holds";
  let description = [{
    For E masks over the same candidate rows that never hold at the same
    position (the classes of a one-hot: a router's experts), `order` lists
    the positions where mask 0 holds, ascending, then those of mask 1, and
    so on, then the positions where none holds; `offsets` (E + 1 entries)
    says where each mask's group starts, `offsets[E]` being `count`, the
    rows that are real. Rows gathered in this order are one buffer of the
    candidates' length holding every group, which `graph.grouped_matmul`
    multiplies by each group's own matrix. Two masks holding at one
    position is an error when the step runs (it cannot be, by how the
    grouping pass proves them disjoint). `expected` is the count the cost
    model assumes. Not differentiable (integer results).

    ```mlir
    %order, %offsets, %count = graph.group_rows %m0, %m1 {expected = 8 : i64} : (tensor<8xi1>, tensor<8xi1>) -> (tensor<8xi64>, tensor<3xi64>, tensor<i64>)
    ```
  }];
  let arguments = (ins Variadic<1DTensorOf<[I1]>>:$masks,
                       OptionalAttr<I64Attr>:$expected);
  let results = (outs 1DTensorOf<[I64]>:$order, 1DTensorOf<[I64]>:$offsets,
                      0DTensorOf<[I64]>:$count);
  let assemblyFormat = "$masks attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_GroupedMatMulOp : Graph_Op<"grouped_matmul", [Pure, Graph_Differentiable]> {
  let summary = "Each group of rows times its own matrix";
  let description = [{
    `lhs` holds groups of rows, group `e` at rows `offsets[e]` to
    `offsets[e + 1]` (as `graph.group_rows` orders them); each group's rows
    are multiplied by `weights[e]` (transposed with `transpose_rhs`); the
    result's rows from `offsets[E]` on are zero. One product over every
    group (a mixture of experts' expert layers), costing the real rows
    only, the weights of every group read once.

    ```mlir
    %y = graph.grouped_matmul %x, %offsets, %w0, %w1 : (tensor<8x16xf32>, tensor<3xi64>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    ```
  }];
  let arguments = (ins 2DTensorOf<[AnyFloat]>:$lhs, 1DTensorOf<[I64]>:$offsets,
                       Variadic<2DTensorOf<[AnyFloat]>>:$weights,
                       UnitAttr:$transpose_rhs);
  let results = (outs 2DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$lhs `,` $offsets `,` $weights attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_SegmentMatMulOp : Graph_Op<"segment_matmul", [Pure]> {
  let summary = "One group's rows of two tensors, contracted over the rows";
  let description = [{
    `lhs[rows]^T rhs[rows]` over the rows of group `segment`
    (`offsets[segment]` to `offsets[segment + 1]`): the gradient of that
    group's matrix in `graph.grouped_matmul`.

    ```mlir
    %dw = graph.segment_matmul %x, %g, %offsets segment = 1 : (tensor<8x16xf32>, tensor<8x32xf32>, tensor<3xi64>) -> tensor<16x32xf32>
    ```
  }];
  let arguments = (ins 2DTensorOf<[AnyFloat]>:$lhs, 2DTensorOf<[AnyFloat]>:$rhs,
                       1DTensorOf<[I64]>:$offsets, I64Attr:$segment);
  let results = (outs 2DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $offsets `segment` `=` $segment attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class Graph_ReduceOp<string mnemonic, string summaryText>
    : Graph_Op<mnemonic, [Pure, Graph_Differentiable]> {
  let summary = summaryText;
  let description = [{
    }] # summaryText # [{ over `axes` (non-negative, ascending, unique); with
    `keepdims` the reduced dimensions stay as size 1. An empty `axes` list is
    the identity.

    ```mlir
    %m = graph.}] # mnemonic # [{ %x axes = [1] keepdims : tensor<2x8xf32> -> tensor<2x1xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keepdims);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `axes` `=` $axes (`keepdims` $keepdims^)? attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Graph_ReduceSumOp : Graph_ReduceOp<"reduce_sum", "Sum">;
def Graph_ReduceMeanOp : Graph_ReduceOp<"reduce_mean", "Arithmetic mean">;
def Graph_ReduceMaxOp : Graph_ReduceOp<"reduce_max", "Maximum">;
def Graph_ReduceSumSquareOp
    : Graph_ReduceOp<"reduce_sum_square", "Sum of squares (floats only)">;

class Graph_SoftmaxLikeOp<string mnemonic, string summaryText>
    : Graph_Op<mnemonic, [Pure, SameOperandsAndResultType,
                          Graph_Differentiable]> {
  let summary = summaryText;
  let description = [{
    }] # summaryText # [{ along one (non-negative) `axis`.

    ```mlir
    %p = graph.}] # mnemonic # [{ %x axis = 1 : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Graph_SoftmaxOp : Graph_SoftmaxLikeOp<"softmax", "Softmax">;
def Graph_LogSoftmaxOp : Graph_SoftmaxLikeOp<"log_softmax", "Log-softmax">;

def Graph_LayerNormOp : Graph_Op<"layer_norm", [Pure, Graph_Differentiable]> {
  let summary = "Layer normalisation over the trailing dimensions";
  let description = [{
    Normalises `input` over dimensions `axis ..< rank` to zero mean and unit
    variance (biased variance, `epsilon` added before the square root), then
    multiplies by `scale` and adds `bias`; both broadcast to the normalised
    shape (ONNX `LayerNormalization`). With `rms` the mean is not
    subtracted: `input / sqrt(mean(input^2) + epsilon)` (RMSNorm).

    ```mlir
    %y = graph.layer_norm %x, %g, %b axis = 2 epsilon = 1.0e-05 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    %z = graph.layer_norm %x, %g rms axis = 2 epsilon = 1.0e-06 : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Optional<Graph_FloatTensor>:$bias, I64Attr:$axis,
                       F32Attr:$epsilon, UnitAttr:$rms);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? (`rms` $rms^)? `axis` `=` $axis
    `epsilon` `=` $epsilon attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Graph_AttentionOp : Graph_Op<"attention", [Pure, Graph_Differentiable]> {
  let summary = "Fused scaled dot-product attention";
  let description = [{
    `softmax(scale * q @ k^T, masked) @ v` over the last two dimensions of
    `q` ([..., T, D]), `k` ([..., S, D]) and `v` ([..., S, Dv]), which share
    their leading (batch) dimensions, without materialising the T x S
    scores: the kernels work on blocks of query rows and the gradient
    recomputes the scores (FlashAttention-style), so what the backward pass
    keeps is linear in T.

    Masking (`mask_kind`): 0 none; 1 `mask` is added to the scaled scores
    (float, broadcasting to [..., T, S]); 2 where `mask` (i1) is false the
    score is `fill`; 3 where `mask` is true the score is `fill`. `causal`:
    key j is masked (probability 0) for query i when j > i + S - T; it
    replaces a constant lower-triangular mask.

    ```mlir
    %o = graph.attention %q, %k, %v {scale = 0.125 : f64, causal} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$q, Graph_FloatTensor:$k,
                       Graph_FloatTensor:$v,
                       Optional<AnyStaticShapeTensor>:$mask,
                       F64Attr:$scale, DefaultValuedAttr<I64Attr, "0">:$mask_kind,
                       DefaultValuedAttr<F64Attr, "0.0">:$fill,
                       UnitAttr:$causal);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_ReshapeOp : Graph_Op<"reshape", [Pure, Graph_Differentiable]> {
  let summary = "Reinterpret a tensor with another shape";
  let description = [{
    Same elements in row-major order, new static shape of equal size.

    ```mlir
    %r = graph.reshape %x : tensor<2x16x64xf32> -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_TransposeOp : Graph_Op<"transpose", [Pure, Graph_Differentiable]> {
  let summary = "Permute dimensions";
  let description = [{
    `result.shape[i] = input.shape[perm[i]]`.

    ```mlir
    %t = graph.transpose %x perm = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_SliceOp : Graph_Op<"slice", [Pure, Graph_Differentiable]> {
  let summary = "Strided window of a tensor";
  let description = [{
    Element `i` of result dimension `d` is element
    `offsets[d] + i * strides[d]` of input dimension `d`; strides are non-zero
    and may be negative; every index read is in bounds. The importer turns
    ONNX `Slice` and `Split` into this normal form.

    ```mlir
    %s = graph.slice %x offsets = [0, 4] strides = [1, 1] : tensor<2x8xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input,
                       DenseI64ArrayAttr:$offsets, DenseI64ArrayAttr:$strides);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `offsets` `=` $offsets `strides` `=` $strides attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_ConcatOp : Graph_Op<"concat", [Pure, Graph_Differentiable]> {
  let summary = "Join tensors along one axis";
  let description = [{
    ```mlir
    %c = graph.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyStaticShapeTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $inputs `axis` `=` $axis attr-dict `:` functional-type($inputs, results)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_BroadcastOp : Graph_Op<"broadcast", [Pure, Graph_Differentiable]> {
  let summary = "Broadcast a tensor to a larger static shape";
  let description = [{
    NumPy broadcasting of `input` to the result shape: dimensions align from
    the right; each input dimension equals the result's or is 1 (ONNX Expand,
    after the importer has computed the broadcast shape).

    ```mlir
    %b = graph.broadcast %x : tensor<1x8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_GatherOp : Graph_Op<"gather", [Pure, Graph_Differentiable]> {
  let summary = "Take slices of a tensor at integer indices (ONNX Gather)";
  let description = [{
    Result shape is `data.shape[:axis] + indices.shape + data.shape[axis+1:]`.
    Negative indices count from the end of the axis. An embedding lookup:

    ```mlir
    %e = graph.gather %table, %ids axis = 0 : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$data,
                       StaticShapeTensorOf<[I32, I64]>:$indices, I64Attr:$axis);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $data `,` $indices `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_TriluOp : Graph_Op<"trilu", [Pure, SameOperandsAndResultType, Graph_Differentiable]> {
  let summary = "Keep the upper or lower triangle of the trailing 2-D matrices";
  let description = [{
    Zeroes the elements outside the triangle: lower keeps `j <= i + k`, upper
    (with `upper`) keeps `j >= i + k` (ONNX `Trilu`).

    ```mlir
    %m = graph.trilu %x upper k = 1 : tensor<16x16xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, UnitAttr:$upper,
                       I64Attr:$k);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input (`upper` $upper^)? `k` `=` $k attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Losses and gradient kernels
//===----------------------------------------------------------------------===//

def Graph_CrossEntropyOp : Graph_Op<"cross_entropy", [Pure, Graph_Differentiable]> {
  let summary = "Mean softmax cross-entropy over rows";
  let description = [{
    `logits` is [N, V], `labels` is [N] class indices; the result is the
    mean over the N rows of `logsumexp(logits[i]) - logits[i, labels[i]]`,
    as `torch.nn.functional.cross_entropy` computes it. The result is a
    float scalar of any type: bf16 or fp16 logits give an fp32 loss under
    mixed precision, computed in fp32 from the widened logits.

    ```mlir
    %loss = graph.cross_entropy %logits, %labels : (tensor<64x256xf32>, tensor<64xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits,
                       StaticShapeTensorOf<[I32, I64]>:$labels);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_CrossEntropyGradOp : Graph_Op<"cross_entropy_grad", [Pure]> {
  let summary = "Gradient of graph.cross_entropy with respect to the logits";
  let description = [{
    `(softmax(logits) - onehot(labels)) * grad / N`, where `grad` is the
    (scalar) gradient of the loss.

    ```mlir
    %d = graph.cross_entropy_grad %logits, %labels, %g : (tensor<64x256xf32>, tensor<64xi64>, tensor<f32>) -> tensor<64x256xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits,
                       StaticShapeTensorOf<[I32, I64]>:$labels,
                       Graph_FloatTensor:$grad);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)
  }];
}

def Graph_GeluGradOp : Graph_Op<"gelu_grad", [Pure, AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "Gradient of graph.gelu: grad * gelu'(input)";
  let description = [{
    ```mlir
    %d = graph.gelu_grad %x, %g tanh : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$grad,
                       UnitAttr:$tanh);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad (`tanh` $tanh^)? attr-dict `:` type($input)";
}

def Graph_LayerNormGradOp : Graph_Op<"layer_norm_grad", [Pure]> {
  let summary = "Gradients of graph.layer_norm";
  let description = [{
    Given the input, scale and the gradient of the output, returns the
    gradients of the input, of the scale (summed to the scale's shape) and of
    the bias (likewise).

    ```mlir
    %dx, %dg, %db = graph.layer_norm_grad %x, %g, %dy axis = 1 epsilon = 1.0e-05 : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Graph_FloatTensor:$grad, I64Attr:$axis,
                       F32Attr:$epsilon, UnitAttr:$rms);
  let results = (outs Graph_FloatTensor:$input_grad,
                      Graph_FloatTensor:$scale_grad,
                      Graph_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad (`rms` $rms^)? `axis` `=` $axis `epsilon` `=`
    $epsilon attr-dict `:` functional-type(operands, results)
  }];
}

def Graph_GatherGradOp : Graph_Op<"gather_grad", [Pure, Graph_Differentiable]> {
  let summary = "Scatter-add: the gradient of graph.gather for its data";
  let description = [{
    A zero tensor of the result type into which each slice of `grad` is
    added at its index along `axis` (repeated indices accumulate).

    ```mlir
    %d = graph.gather_grad %g, %ids axis = 0 : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$grad,
                       StaticShapeTensorOf<[I32, I64]>:$indices, I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
}

def Graph_SliceGradOp : Graph_Op<"slice_grad", [Pure]> {
  let summary = "The gradient of graph.slice: grad placed into zeros";
  let description = [{
    A zero tensor of the result type (the sliced tensor's type) with `grad`
    written where graph.slice with the same offsets and strides read.

    ```mlir
    %d = graph.slice_grad %g offsets = [0, 4] strides = [1, 1] : tensor<2x4xf32> -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$grad, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$strides);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `offsets` `=` $offsets `strides` `=` $strides attr-dict `:`
    type($grad) `->` type($result)
  }];
  let hasFolder = 1;
}

def Graph_AttentionGradOp : Graph_Op<"attention_grad", [Pure]> {
  let summary = "Gradients of graph.attention for q, k and v";
  let description = [{
    Given graph.attention's operands and attributes and the gradient of its
    result (`grad`), returns the gradients of `q`, `k` and `v`; the scores
    and probabilities are recomputed block by block, never stored.

    ```mlir
    %dq, %dk, %dv = graph.attention_grad %q, %k, %v, %g {scale = 0.125 : f64, causal} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$q, Graph_FloatTensor:$k,
                       Graph_FloatTensor:$v, Graph_FloatTensor:$grad,
                       Optional<AnyStaticShapeTensor>:$mask,
                       F64Attr:$scale, DefaultValuedAttr<I64Attr, "0">:$mask_kind,
                       DefaultValuedAttr<F64Attr, "0.0">:$fill,
                       UnitAttr:$causal);
  let results = (outs Graph_FloatTensor:$q_grad, Graph_FloatTensor:$k_grad,
                      Graph_FloatTensor:$v_grad);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $grad (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused elementwise chains
//===----------------------------------------------------------------------===//

def Graph_FusedOp : Graph_Op<"fused", [Pure, IsolatedFromAbove, SingleBlock]> {
  let summary = "A chain of elementwise ops run as one kernel";
  let description = [{
    The body computes the results from the inputs with elementwise graph
    ops (and splat constants) over one shape, the results' shape; inputs
    broadcast to it. It runs as one kernel that reads each input once and
    writes each result once: the body's other values never reach memory.
    `--strata-fuse-elementwise` forms these from the training step.

    ```mlir
    %y, %z = graph.fused %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
      %s = graph.add %a, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %g = graph.gelu %s tanh : tensor<4x8xf32>
      graph.yield %s, %g : tensor<4x8xf32>, tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$inputs);
  let results = (outs Variadic<Graph_FloatTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, results) $body
  }];
  let hasVerifier = 1;
}

def Graph_YieldOp : Graph_Op<"yield", [Pure, Terminator, HasParent<"FusedOp">]> {
  let summary = "The results of a graph.fused body";
  let arguments = (ins Variadic<AnyStaticShapeTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // STRATA_DIALECTS_GRAPH_GRAPHOPS_TD
