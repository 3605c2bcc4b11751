#!/usr/bin/env python3
"""Every gradient rule against central finite differences.

For each case an ONNX model is built twice around one op: once with the
differentiable inputs as initializers (Strata's parameters; compiled with
--mode grad --loss output, giving the gradients), once with them as graph
inputs (compiled --mode forward, run at perturbed values for the finite
differences). The loss is sum(Y * R) with a fixed random R, so every output
element gets its own weight. Everything is float64: central differences with
h = 1e-6 are then accurate to ~1e-9, and the gradients must match to
rtol 1e-6.

    test_gradients.py --bin BUILD/bin --work DIR
"""

import concurrent.futures
import os
import sys
import unittest

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "models"))
import harness  # noqa: E402
from harness import run, tool  # noqa: E402

ARGS = None
H = 1e-6


def P(*shape, positive=False, seed=0):
    """A differentiable input."""
    return ("param", shape, positive)


def C(value):
    """A constant input (indices, conditions, shapes)."""
    return ("const", np.asarray(value))


# (name, op type, inputs, attributes, opset, number of outputs)
CASES = [
    ("add_broadcast", "Add", [P(2, 3), P(3)], {}, 17, 1),
    ("sub_broadcast", "Sub", [P(2, 1, 3), P(4, 3)], {}, 17, 1),
    ("mul", "Mul", [P(2, 3), P(2, 3)], {}, 17, 1),
    ("div", "Div", [P(2, 3), P(1, 3, positive=True)], {}, 17, 1),
    ("pow", "Pow", [P(2, 3, positive=True), P(3)], {}, 17, 1),
    ("max", "Max", [P(2, 3), P(1, 3)], {}, 17, 1),
    ("min", "Min", [P(2, 3), P(2, 3)], {}, 17, 1),
    ("neg", "Neg", [P(2, 3)], {}, 17, 1),
    ("abs", "Abs", [P(2, 3)], {}, 17, 1),
    ("exp", "Exp", [P(2, 3)], {}, 17, 1),
    ("log", "Log", [P(2, 3, positive=True)], {}, 17, 1),
    ("sqrt", "Sqrt", [P(2, 3, positive=True)], {}, 17, 1),
    ("reciprocal", "Reciprocal", [P(2, 3, positive=True)], {}, 17, 1),
    ("tanh", "Tanh", [P(2, 3)], {}, 17, 1),
    ("sin", "Sin", [P(2, 3)], {}, 17, 1),
    ("cos", "Cos", [P(2, 3)], {}, 17, 1),
    ("erf", "Erf", [P(2, 3)], {}, 17, 1),
    ("sigmoid", "Sigmoid", [P(2, 3)], {}, 17, 1),
    ("relu", "Relu", [P(2, 3)], {}, 17, 1),
    ("gelu", "Gelu", [P(2, 3)], {}, 20, 1),
    ("gelu_tanh", "Gelu", [P(2, 3)], {"approximate": "tanh"}, 20, 1),
    ("where", "Where", [C([[True, False, True], [False, False, True]]),
                        P(2, 3), P(3)], {}, 17, 1),
    ("clip", "Clip", [P(2, 3), C(-0.3), C(0.4)], {}, 17, 1),
    ("matmul", "MatMul", [P(2, 3, 4), P(4, 5)], {}, 17, 1),
    ("matmul_vector", "MatMul", [P(3), P(3, 2)], {}, 17, 1),
    ("matmul_batch_broadcast", "MatMul", [P(2, 1, 3, 4), P(3, 4, 2)], {},
     17, 1),
    ("gemm", "Gemm", [P(4, 3), P(5, 4), P(5)],
     {"transA": 1, "transB": 1, "alpha": 0.7, "beta": 1.3}, 17, 1),
    ("reduce_sum", "ReduceSum", [P(2, 3, 4), C([1])], {"keepdims": 0}, 17, 1),
    ("reduce_mean", "ReduceMean", [P(2, 3, 4)], {"axes": [0, 2]}, 17, 1),
    ("reduce_max", "ReduceMax", [P(2, 3, 4)], {"axes": [1]}, 17, 1),
    ("reduce_sum_square", "ReduceSumSquare", [P(2, 3, 4)], {"axes": [0, 2]},
     17, 1),
    ("softmax", "Softmax", [P(2, 3, 4)], {"axis": 1}, 17, 1),
    ("log_softmax", "LogSoftmax", [P(2, 3, 4)], {"axis": -1}, 17, 1),
    ("layer_norm", "LayerNormalization", [P(2, 3, 4), P(4), P(4)],
     {"axis": -1, "epsilon": 1e-5}, 17, 1),
    ("layer_norm_axis1", "LayerNormalization", [P(2, 3, 4), P(3, 4)],
     {"axis": 1}, 17, 1),
    ("gather", "Gather", [P(5, 3), C([[0, 4], [4, -2]])], {"axis": 0}, 17, 1),
    ("gather_axis1", "Gather", [P(2, 5, 3), C([1, 1, 3])], {"axis": 1}, 17, 1),
    ("reshape", "Reshape", [P(2, 3, 4), C([4, -1])], {}, 17, 1),
    ("transpose", "Transpose", [P(2, 3, 4)], {"perm": [2, 0, 1]}, 17, 1),
    ("slice", "Slice", [P(4, 5), C([3, 0]), C([0, 5]), C([0, 1]), C([-1, 2])],
     {}, 17, 1),
    ("concat", "Concat", [P(2, 3), P(2, 2)], {"axis": 1}, 17, 1),
    ("split", "Split", [P(5, 2), C([2, 3])], {"axis": 0}, 17, 2),
    ("expand", "Expand", [P(3, 1), C([2, 3, 4])], {}, 17, 1),
    ("unsqueeze", "Unsqueeze", [P(2, 3), C([0, 3])], {}, 17, 1),
    ("squeeze", "Squeeze", [P(2, 1, 3), C([1])], {}, 17, 1),
    ("flatten", "Flatten", [P(2, 3, 4)], {"axis": 2}, 17, 1),
    ("trilu", "Trilu", [P(2, 4, 4)], {"upper": 1}, 17, 1),
    ("trilu_k", "Trilu", [P(3, 4), C(-1)], {"upper": 0}, 17, 1),
    ("cumsum", "CumSum", [P(2, 5), C(1)], {}, 14, 1),
    ("cumsum_reverse_exclusive", "CumSum", [P(4, 3), C(0)],
     {"exclusive": 1, "reverse": 1}, 14, 1),
    ("tile", "Tile", [P(2, 3), C([3, 2])], {}, 14, 1),
    # The activation family (graph arithmetic at import).
    ("elu", "Elu", [P(3, 4)], {"alpha": 0.7}, 17, 1),
    ("celu", "Celu", [P(3, 4)], {"alpha": 1.5}, 17, 1),
    ("selu", "Selu", [P(3, 4)], {}, 17, 1),
    ("leaky_relu", "LeakyRelu", [P(3, 4)], {"alpha": 0.2}, 17, 1),
    ("hard_sigmoid", "HardSigmoid", [P(3, 4)], {"alpha": 0.3}, 17, 1),
    ("hard_swish", "HardSwish", [P(3, 4)], {}, 17, 1),
    ("softplus", "Softplus", [P(3, 4)], {}, 17, 1),
    ("mish", "Mish", [P(3, 4)], {}, 18, 1),
    ("swish", "Swish", [P(3, 4)], {"alpha": 1.3}, 24, 1),
    # Losses as models export them: the fused form (scores [N, C], mean, no
    # weights; a non-negative ignore_index remapped), and the general one
    # (class weights, which are differentiable too, extra dimensions, the
    # log-probabilities as a second output, sum and none).
    ("sce_mean", "SoftmaxCrossEntropyLoss", [P(4, 5), C([0, 4, 2, 1])], {},
     13, 1),
    ("sce_mean_ignore", "SoftmaxCrossEntropyLoss", [P(4, 5), C([0, 4, 2, 2])],
     {"ignore_index": 2}, 13, 1),
    ("sce_weighted_3d", "SoftmaxCrossEntropyLoss",
     [P(3, 5, 2), C([[0, 4], [1, 3], [2, 1]]), P(5, positive=True)],
     {"ignore_index": 1}, 13, 2),
    ("sce_none", "SoftmaxCrossEntropyLoss", [P(3, 5), C([4, 0, 0])],
     {"reduction": "none"}, 13, 1),
    ("nll_sum_weighted", "NegativeLogLikelihoodLoss",
     [P(3, 5, 2), C([[0, 4], [1, 3], [2, -7]]), P(5, positive=True)],
     {"reduction": "sum", "ignore_index": -7}, 13, 1),
]


def attention(mask=None, fill=None, scale=0.5):
    """Nodes of softmax(scale * q k^T, masked) v as exporters write it (the
    fusion pass makes them one graph.attention): inputs q, k, v; `mask`
    (bool: Where(mask, fill, scores); float: added) as a constant."""
    def nodes(names, outs):
        q, k, v = names
        const = lambda n, x: helper.make_node(
            "Constant", [], [n], value=numpy_helper.from_array(np.asarray(x)))
        out = [helper.make_node("Transpose", [k], ["kt"], perm=[0, 2, 1]),
               helper.make_node("MatMul", [q, "kt"], ["s"]),
               const("scale", np.float64(scale)),
               helper.make_node("Mul", ["s", "scale"], ["scaled"])]
        scores = "scaled"
        if mask is not None and mask.dtype == bool:
            out += [const("mask", mask), const("fill", np.float64(fill)),
                    helper.make_node("Where", ["mask", "fill", scores],
                                     ["masked"])]
            scores = "masked"
        elif mask is not None:
            out += [const("mask", mask),
                    helper.make_node("Add", [scores, "mask"], ["masked"])]
            scores = "masked"
        out += [helper.make_node("Softmax", [scores], ["p"], axis=-1),
                helper.make_node("MatMul", ["p", v], outs)]
        return out
    return nodes


def rms_norm(eps=1e-6):
    """Nodes of RMSNorm as LLaMA exports it (fused into graph.layer_norm
    with rms): inputs x and the weight w."""
    def nodes(names, outs):
        x, w = names
        const = lambda n, v: helper.make_node(
            "Constant", [], [n], value=numpy_helper.from_array(np.asarray(v)))
        return [const("two", np.float64(2.0)), const("one", np.float64(1.0)),
                const("eps", np.float64(eps)),
                helper.make_node("Pow", [x, "two"], ["sq"]),
                helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1],
                                 keepdims=1),
                helper.make_node("Add", ["var", "eps"], ["ve"]),
                helper.make_node("Sqrt", ["ve"], ["root"]),
                helper.make_node("Div", ["one", "root"], ["inv"]),
                helper.make_node("Mul", [x, "inv"], ["n"]),
                helper.make_node("Mul", [w, "n"], outs)]
    return nodes


# Fused attention (graph.attention and its recomputing gradient kernel):
# causal with more keys than queries, an additive float mask, a "drop"
# mask that is not causal with a finite fill.
_FUTURE = np.triu(np.ones((2, 3), dtype=bool), k=2)
CASES += [
    ("attention_causal", attention(_FUTURE, -np.inf),
     [P(2, 2, 4), P(2, 3, 4), P(2, 3, 2)], {}, 17, 1),
    ("attention_additive", attention(
        np.random.default_rng(5).standard_normal((1, 3, 3)), scale=0.3),
     [P(2, 3, 4), P(2, 3, 4), P(2, 3, 3)], {}, 17, 1),
    ("rms_norm", rms_norm(), [P(2, 3, 5), P(5)], {}, 17, 1),
    ("attention_drop_mask", attention(
        np.array([[True, False, False], [False, False, True],
                  [False, True, False]]), -1e9),
     [P(2, 3, 2), P(2, 3, 2), P(2, 3, 2)], {}, 17, 1),
]



def top_k(k, axis):
    """TopK's values (its indices, an integer output, go unused)."""
    def nodes(names, outs):
        const = helper.make_node(
            "Constant", [], ["k"],
            value=numpy_helper.from_array(np.array([k], dtype=np.int64)))
        return [const, helper.make_node("TopK", [names[0], "k"],
                                        [outs[0], "indices"], axis=axis)]
    return nodes


def loop(trips):
    """A Loop with a constant trip count on the data path (unrolled at
    import): v <- v * x + i, the v of each iteration scanned."""
    def nodes(names, outs):
        x, v0 = names
        body = helper.make_graph(
            [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.DOUBLE),
             helper.make_node("Mul", ["v", x], ["vx"]),
             helper.make_node("Add", ["vx", "fi"], ["v_next"]),
             helper.make_node("Identity", ["c"], ["c_next"]),
             helper.make_node("Identity", ["v_next"], ["scan"])],
            "body",
            [helper.make_tensor_value_info("i", TensorProto.INT64, []),
             helper.make_tensor_value_info("c", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v", TensorProto.DOUBLE, None)],
            [helper.make_tensor_value_info("c_next", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v_next", TensorProto.DOUBLE,
                                           None),
             helper.make_tensor_value_info("scan", TensorProto.DOUBLE,
                                           None)])
        const = lambda n, v: helper.make_node(
            "Constant", [], [n], value=numpy_helper.from_array(np.asarray(v)))
        return [const("m", np.int64(trips)), const("cond", np.bool_(True)),
                helper.make_node("Loop", ["m", "cond", v0],
                                 ["v_final", outs[0]], body=body)]
    return nodes


def if_on_data():
    """An If whose condition is computed from a parameter: both branches
    are imported and selected between."""
    def nodes(names, outs):
        x, = names
        branch = lambda op, name: helper.make_graph(
            [helper.make_node(op, [x], [name + "_y"])], name, [],
            [helper.make_tensor_value_info(name + "_y", TensorProto.DOUBLE,
                                           None)])
        zero = helper.make_node(
            "Constant", [], ["zero"],
            value=numpy_helper.from_array(np.float64(0.0)))
        return [zero,
                helper.make_node("ReduceSum", [x], ["total"], keepdims=0),
                helper.make_node("Greater", ["total", "zero"], ["positive"]),
                helper.make_node("If", ["positive"], outs,
                                 then_branch=branch("Sin", "then"),
                                 else_branch=branch("Exp", "else"))]
    return nodes


def routed_rows():
    """Transformers' expert dispatch in miniature: the (slot, token) pairs
    where a parameter-made [2, 3] mask holds (NonZero on the data path, a
    count the data decide), the tokens' rows through a matrix product and a
    sigmoid, scaled by the mask's own source at the pair, and added back
    onto the tokens with ScatterElements at a shape made with Shape/Expand
    of the rows (pairs share tokens)."""
    def nodes(names, outs):
        x, w, g = names
        const = lambda n, v: helper.make_node(
            "Constant", [], [n], value=numpy_helper.from_array(np.asarray(v)))
        return [
            const("zero", np.float64(0.0)), const("axis1", np.array([1])),
            const("split", np.array([1, 1])), const("three", np.array(3)),
            const("flat", np.array([-1])), const("blank", np.zeros((3, 3))),
            helper.make_node("Greater", [g, "zero"], ["mask"]),
            helper.make_node("NonZero", ["mask"], ["nz"]),
            helper.make_node("Transpose", ["nz"], ["pairs"], perm=[1, 0]),
            helper.make_node("Split", ["pairs", "split"], ["j1", "t1"],
                             axis=1),
            helper.make_node("Squeeze", ["j1", "axis1"], ["j"]),
            helper.make_node("Squeeze", ["t1", "axis1"], ["t"]),
            helper.make_node("Gather", [x, "t"], ["rows"], axis=0),
            helper.make_node("MatMul", ["rows", w], ["h"]),
            helper.make_node("Sigmoid", ["h"], ["s"]),
            helper.make_node("Mul", ["j", "three"], ["j3"]),
            helper.make_node("Add", ["j3", "t"], ["pair"]),
            helper.make_node("Reshape", [g, "flat"], ["gflat"]),
            helper.make_node("Gather", ["gflat", "pair"], ["scale"], axis=0),
            helper.make_node("Unsqueeze", ["scale", "axis1"], ["scale2"]),
            helper.make_node("Mul", ["s", "scale2"], ["upd"]),
            helper.make_node("Shape", ["upd"], ["shape"]),
            helper.make_node("Unsqueeze", ["t", "axis1"], ["t2"]),
            helper.make_node("Expand", ["t2", "shape"], ["where"]),
            helper.make_node("ScatterElements", ["blank", "where", "upd"],
                             outs, axis=0, reduction="add")]
    return nodes


def routed_experts(experts=3, top=2):
    """Transformers' mixture-of-experts block as Mixtral exports it, in
    miniature: a softmax router, TopK, OneHot permuted to [experts, top,
    tokens], then per expert NonZero of its class, its tokens' rows through
    a SiLU-free two-product MLP (W_e, sigmoid, V_e), scaled by the routing
    weight at (token, slot), and index_add_ (ScatterElements, add) into a
    running total. strata-group-experts makes the experts one grouped
    product (test_routed_experts_are_grouped checks that it does), so this
    checks grouped_matmul's and segment_matmul's gradients, the router's
    through the routing weights."""
    def nodes(names, outs):
        x, router = names[0], names[1]
        ws, vs = names[2:2 + experts], names[2 + experts:2 + 2 * experts]
        const = lambda n, v: helper.make_node(
            "Constant", [], [n], value=numpy_helper.from_array(np.asarray(v)))
        out = [const("k", np.array([top])), const("depth", np.array(experts)),
               const("onoff", np.array([0, 1])), const("one", np.array([1])),
               const("flat", np.array([-1])), const("slots", np.array(top)),
               const("total0", np.zeros((4, 2))),
               helper.make_node("MatMul", [x, router], ["logits"]),
               helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
               helper.make_node("TopK", ["probs", "k"], ["topv", "topi"],
                                axis=1),
               helper.make_node("OneHot", ["topi", "depth", "onoff"],
                                ["hot"]),
               helper.make_node("Transpose", ["hot"], ["emask"],
                                perm=[2, 1, 0]),
               helper.make_node("Reshape", ["topv", "flat"], ["wflat"])]
        total = "total0"
        for e in range(experts):
            p = "e%d_" % e
            nxt = outs[0] if e == experts - 1 else p + "total"
            out += [
                const(p + "id", np.array(e)),
                const(p + "zero", np.array(0)),
                helper.make_node("Gather", ["emask", p + "id"], [p + "m"],
                                 axis=0),
                helper.make_node("NonZero", [p + "m"], [p + "nz"]),
                helper.make_node("Gather", [p + "nz", p + "zero"],
                                 [p + "slot"], axis=0),
                helper.make_node("Gather", [p + "nz", p + "id1"],
                                 [p + "tok"], axis=0),
                const(p + "id1", np.array(1)),
                helper.make_node("Gather", [x, p + "tok"], [p + "rows"],
                                 axis=0),
                helper.make_node("MatMul", [p + "rows", ws[e]], [p + "h"]),
                helper.make_node("Sigmoid", [p + "h"], [p + "s"]),
                helper.make_node("MatMul", [p + "s", vs[e]], [p + "y"]),
                helper.make_node("Mul", [p + "tok", "slots"], [p + "t2"]),
                helper.make_node("Add", [p + "t2", p + "slot"], [p + "at"]),
                helper.make_node("Gather", ["wflat", p + "at"], [p + "w"],
                                 axis=0),
                helper.make_node("Unsqueeze", [p + "w", "one"],
                                 [p + "w2"]),
                helper.make_node("Mul", [p + "y", p + "w2"], [p + "upd"]),
                helper.make_node("Shape", [p + "upd"], [p + "shape"]),
                helper.make_node("Unsqueeze", [p + "tok", "one"],
                                 [p + "tok2"]),
                helper.make_node("Expand", [p + "tok2", p + "shape"],
                                 [p + "where"]),
                helper.make_node("ScatterElements",
                                 [total, p + "where", p + "upd"], [nxt],
                                 axis=0, reduction="add")]
            total = nxt
        # Constants before their users (id1 is made after its first use
        # above for brevity).
        consts = [n for n in out if n.op_type == "Constant"]
        return consts + [n for n in out if n.op_type != "Constant"]
    return nodes


GROUPED = {"routed_experts_grouped"}

_IDX = np.array([[0, 3], [2, 0], [1, 1]], dtype=np.int64)
_MASK = np.array([[True, False, True, False], [False, False, False, False]])
# Index ops, Einsum, the opset-23 transformer ops, control flow: all built
# at import from graph ops, differentiated by autodiff.
CASES += [
    ("gather_elements", "GatherElements", [P(3, 4), C(_IDX)], {"axis": 1},
     13, 1),
    ("gather_nd", "GatherND", [P(2, 3, 2), C([[0, 1], [1, 2], [1, 0]])], {},
     13, 1),
    ("scatter_elements_add", "ScatterElements",
     [P(3, 4), C([[1, 1], [0, 3], [2, 2]]), P(3, 2)],
     {"axis": 1, "reduction": "add"}, 16, 1),
    ("scatter_elements", "ScatterElements", [P(3, 4), C(_IDX), P(3, 2)],
     {"axis": 1}, 13, 1),
    ("scatter_nd", "ScatterND", [P(4, 3), C([[1], [3]]), P(2, 3)], {}, 13,
     1),
    ("top_k", top_k(2, 1), [P(3, 5)], {}, 13, 1),
    ("pad_reflect", "Pad", [P(3, 4), C([1, 2, 1, 0])], {"mode": "reflect"},
     13, 1),
    ("pad_edge", "Pad", [P(2, 3), C([0, 2, 1, 1])], {"mode": "edge"}, 13, 1),
    ("pad_constant_crop", "Pad", [P(2, 3), C([1, 1, 0, -1]),
                                  C(np.float64(0.5))], {}, 13, 1),
    ("einsum_bmm", "Einsum", [P(2, 3, 2), P(2, 2, 3)],
     {"equation": "bij,bjk->bik"}, 13, 1),
    ("einsum_three", "Einsum", [P(3), P(2), P(3, 2)],
     {"equation": "i,j,ij->j"}, 13, 1),
    ("einsum_diagonal", "Einsum", [P(3, 3)], {"equation": "ii->i"}, 13, 1),
    ("mod_fmod", "Mod", [P(2, 3), P(2, 3, positive=True)], {"fmod": 1}, 13,
     1),
    ("rms_normalization", "RMSNormalization", [P(2, 3, 4), P(4)],
     {"stash_type": TensorProto.DOUBLE}, 23, 1),
    ("rotary_embedding", "RotaryEmbedding", [P(1, 3, 8), P(1, 3, 2),
                                             P(1, 3, 2)], {"num_heads": 2},
     23, 1),
    ("rotary_interleaved_partial", "RotaryEmbedding",
     [P(1, 2, 3, 4), P(5, 1), P(5, 1), C([[0, 4, 2]])],
     {"interleaved": 1, "rotary_embedding_dim": 2}, 23, 1),
    ("attention_op_gqa_causal", "Attention",
     [P(1, 4, 3, 2), P(1, 2, 3, 2), P(1, 2, 3, 2)], {"is_causal": 1}, 23,
     1),
    ("attention_op_mask_past_softcap", "Attention",
     [P(1, 1, 2, 2), P(1, 1, 2, 2), P(1, 1, 2, 3), C(_MASK),
      P(1, 1, 2, 2), P(1, 1, 2, 3)], {"softcap": 2.0}, 23, 1),
    ("loop_data_path", loop(3), [P(2, 2), P(2, 2)], {}, 13, 1),
    ("reduce_min", "ReduceMin", [P(3, 4)], {"axes": [1]}, 13, 1),
    ("one_hot_values", "OneHot",
     [C(np.array([[1, -1], [0, 2]], np.int64)), C(np.int64(3)), P(2)],
     {"axis": 1}, 11, 1),
    ("floor_is_flat", "Floor", [P(2, 3)], {}, 13, 1),
    ("if_on_data", if_on_data(), [P(2, 3)], {}, 13, 1),
    ("nonzero_routed_rows", routed_rows(), [P(3, 3), P(3, 3), P(2, 3)], {},
     18, 1),
    ("routed_experts_grouped", routed_experts(),
     [P(4, 2), P(2, 3)] + [P(2, 3)] * 3 + [P(3, 2)] * 3, {}, 18, 1),
]


def values_for(spec, rng):
    _, shape, positive = spec
    v = rng.standard_normal(shape)
    return np.abs(v) + 0.5 if positive else v


def make_nodes(op, names, outs, attrs):
    """The case's nodes: one op, or a function's subgraph."""
    if callable(op):
        return op(names, outs)
    return [helper.make_node(op, names, outs, **attrs)]


def build(case, values, as_inputs):
    """The model for a case; params are initializers or graph inputs."""
    name, op, specs, attrs, opset, nout = case
    rng = np.random.default_rng(1)
    inits, inputs, names = [], [], []
    for k, spec in enumerate(specs):
        n = "in%d" % k
        names.append(n)
        if spec[0] == "const":
            v = spec[1]
            if v.dtype == np.float64 and op == "Clip":
                v = v.astype(np.float64)
            inits.append(numpy_helper.from_array(v, n))
        elif as_inputs:
            inputs.append(helper.make_tensor_value_info(
                n, TensorProto.DOUBLE, list(values[n].shape)))
        else:
            inits.append(numpy_helper.from_array(values[n], n))
    outs = ["y%d" % i for i in range(nout)]
    nodes = make_nodes(op, names, outs, attrs)
    # loss = sum_i sum(y_i * r_i)
    partial = []
    for i, y in enumerate(outs):
        r = "r%d" % i
        shape_probe = ARGS.shapes[name][i]
        inits.append(numpy_helper.from_array(
            rng.standard_normal(shape_probe), r))
        nodes.append(helper.make_node("Mul", [y, r], ["m%d" % i]))
        nodes.append(helper.make_node("ReduceSum", ["m%d" % i], ["s%d" % i],
                                      keepdims=0))
        partial.append("s%d" % i)
    if len(partial) > 1:
        nodes.append(helper.make_node("Sum", partial, ["loss"]))
    else:
        nodes[-1].output[0] = "loss"
    graph = helper.make_graph(
        nodes, name, inputs,
        [helper.make_tensor_value_info("loss", TensorProto.DOUBLE, [])],
        inits)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def output_shapes(case, values):
    """Shapes of the op's outputs, from the ONNX reference implementation
    where available, else by running the op through Strata forward."""
    name, op, specs, attrs, opset, nout = case
    names = ["in%d" % k for k in range(len(specs))]
    inits = []
    inputs = []
    for k, spec in enumerate(specs):
        v = spec[1] if spec[0] == "const" else values["in%d" % k]
        inits.append(numpy_helper.from_array(np.asarray(v), "in%d" % k))
    outs = ["y%d" % i for i in range(nout)]
    graph = helper.make_graph(
        make_nodes(op, names, outs, attrs), name, inputs,
        [helper.make_tensor_value_info(o, TensorProto.DOUBLE, None)
         for o in outs], inits)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = os.path.join(ARGS.work, name + ".shape.onnx")
    onnx.save(model, path)
    art = path + ".strata"
    run([tool("strata-compile"), path, "-o", art, "--mode", "forward"])
    out = art + ".out"
    run([tool("strata-run"), art, "--output-dir", out, "--quiet"])
    return [np.load(os.path.join(out, o + ".npy")).shape for o in outs]


class Gradients(unittest.TestCase):
    pass


def make_test(case):
    def test(self):
        name, op, specs, attrs, opset, nout = case
        rng = np.random.default_rng(abs(hash(name)) % (2 ** 32))
        values = {"in%d" % k: values_for(s, rng)
                  for k, s in enumerate(specs) if s[0] == "param"}
        ARGS.shapes[name] = output_shapes(case, values)
        base = os.path.join(ARGS.work, name)
        onnx.save(build(case, values, as_inputs=False), base + ".grad.onnx")
        onnx.save(build(case, values, as_inputs=True), base + ".fwd.onnx")
        run([tool("strata-compile"), base + ".grad.onnx", "-o",
             base + ".grad.strata", "--mode", "grad", "--loss", "output"])
        run([tool("strata-run"), base + ".grad.strata", "--output-dir",
             base + ".grad.out", "--quiet"])
        run([tool("strata-compile"), base + ".fwd.onnx", "-o",
             base + ".fwd.strata", "--mode", "forward"])
        if name in GROUPED:
            # The case is there for the grouped form: it must be taken.
            graph = base + ".grad.mlir"
            run([tool("strata-compile"), base + ".grad.onnx", "-o", graph,
                 "--mode", "grad", "--loss", "output", "--emit", "exec"])
            with open(graph) as f:
                text = f.read()
            for kernel in ("group_rows", "grouped_matmul", "segment_matmul"):
                self.assertIn('"%s"' % kernel, text, name)
            self.assertNotIn('"compact_rows"', text, name)

        def loss_at(perturbed, tag):
            args = [tool("strata-run"), base + ".fwd.strata", "--quiet",
                    "--output-dir", base + ".fd" + tag]
            for n, v in perturbed.items():
                p = "%s.%s.%s.npy" % (base, tag, n)
                np.save(p, v)
                args += ["--input", "%s=%s" % (n, p)]
            run(args)
            return float(np.load(os.path.join(base + ".fd" + tag,
                                              "loss.npy")))

        jobs = []
        for n, v in values.items():
            for idx in np.ndindex(v.shape):
                jobs.append((n, idx))

        def fd(job):
            n, idx = job
            tag = "%s_%s" % (n, "_".join(map(str, idx)) or "s")
            plus = {k: x.copy() for k, x in values.items()}
            minus = {k: x.copy() for k, x in values.items()}
            plus[n][idx] += H
            minus[n][idx] -= H
            return (loss_at(plus, tag + "p") - loss_at(minus, tag + "m")) / (2 * H)

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            numeric = list(pool.map(fd, jobs))
        expected = {n: np.zeros(v.shape) for n, v in values.items()}
        for (n, idx), g in zip(jobs, numeric):
            expected[n][idx] = g
        for n in values:
            got = np.load(os.path.join(base + ".grad.out", "grad:%s.npy" % n))
            np.testing.assert_allclose(got, expected[n], rtol=1e-6, atol=1e-8,
                                       err_msg="%s: d loss / d %s" % (name, n))
    return test


for _case in CASES:
    setattr(Gradients, "test_" + _case[0], make_test(_case))


def main():
    global ARGS
    ARGS = harness.parse_args()
    ARGS.shapes = {}
    harness.run_tests(verbosity=1)


if __name__ == "__main__":
    main()
