#!/usr/bin/env python3
"""Writes LLaMA- and GPT-3-shaped decoders of any size without their weights
(LLaMA-shaped ones with routed mixture-of-experts MLPs too).

The graph is built with the onnx helper API (no PyTorch), and every
parameter is external data in one file that is created sparse: its length
is set, no bytes are written, so a 175B-parameter model costs a few
megabytes of disk and a second of time. The values read as zeros.

What the tensors hold does not matter to a plan (strata-compile
--emit=plan-report reads none of them). To train such a model, let the
compiler generate its parameters instead of reading them:
`strata-compile --synthetic-init` with the rules this script prints (and
writes to NAME.json as "synthetic_init"): matrices N(0, 0.02)-like, norm
scales 1, biases 0, as a freshly initialised model.

    synthetic.py --preset llama-7b --out DIR
    synthetic.py --family llama --layers 2 --dim 64 --heads 4 --out DIR
    synthetic.py --list

Shapes are static: --batch and --seq are part of the graph.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Published shapes. LLaMA: Touvron et al. 2023 (LLaMA 1, 7B/13B) and
# LLaMA 2 (70B: grouped-query attention, 8 key/value heads); GPT-3: Brown
# et al. 2020, table 2.1. `hidden` is the MLP's inner width.
PRESETS = {
    "llama-7b": dict(family="llama", layers=32, dim=4096, heads=32,
                     kv_heads=32, hidden=11008, vocab=32000),
    "llama-13b": dict(family="llama", layers=40, dim=5120, heads=40,
                      kv_heads=40, hidden=13824, vocab=32000),
    "llama-70b": dict(family="llama", layers=80, dim=8192, heads=64,
                      kv_heads=8, hidden=28672, vocab=32000),
    # The paper's table says d_model 5140 with 40 heads of 128; 5120, as
    # Megatron's and Fuyou's GPT-3 13B configurations use, is consistent.
    "gpt3-13b": dict(family="gpt", layers=40, dim=5120, heads=40,
                     kv_heads=40, hidden=4 * 5120, vocab=50257),
    # LoHan's multi-GPU 70B: a GPT-3-style stack of 80 layers of 8192 (its
    # evaluation data names the size, not the shape; this is the shape of
    # Megatron's 70B-class configurations).
    "gpt3-70b": dict(family="gpt", layers=80, dim=8192, heads=64,
                     kv_heads=64, hidden=4 * 8192, vocab=50257),
    "gpt3-175b": dict(family="gpt", layers=96, dim=12288, heads=96,
                      kv_heads=96, hidden=4 * 12288, vocab=50257),
    # Mixtures of experts, their MLPs routed as transformers exports them
    # (NonZero per expert, index_add_ as ScatterElements): Mixtral 8x7B
    # (Jiang et al. 2024: 8 experts of 14336, top-2) and Qwen1.5-MoE-A2.7B
    # (its config.json: 60 experts of 1408, top-4, a shared expert of 5632
    # behind a sigmoid gate, top-k weights not renormalised).
    "mixtral-8x7b": dict(family="llama", layers=32, dim=4096, heads=32,
                         kv_heads=8, hidden=14336, vocab=32000, experts=8,
                         top_k=2),
    "qwen1.5-moe-a2.7b": dict(family="llama", layers=24, dim=2048, heads=16,
                              kv_heads=16, hidden=1408, vocab=151936,
                              experts=60, top_k=4, shared_hidden=5632),
    # Sizes this machine can train: ~1.0B and ~350M parameters, and one
    # for smoke tests.
    "gpt-tiny": dict(family="gpt", layers=2, dim=64, heads=4, kv_heads=4,
                     hidden=256, vocab=256),
    "gpt-1b": dict(family="gpt", layers=20, dim=2048, heads=16, kv_heads=16,
                   hidden=8192, vocab=32000),
    "gpt-350m": dict(family="gpt", layers=24, dim=1024, heads=16, kv_heads=16,
                     hidden=4096, vocab=32000),
}

# The order matters: the first rule whose glob matches a parameter's name
# gives its mean and deviation.
INIT_RULES = ["*norm.scale=1,0", "*.bias=0,0", "*=0,0.02"]

ALIGN = 4096


class Builder:
    """Nodes, parameters (external data at 4 KiB-aligned offsets of one
    sparse file) and small constants of one graph."""

    def __init__(self, data_name):
        self.nodes = []
        self.params = []
        self.data_name = data_name
        self.offset = 0
        self.count = 0
        self.n = 0

    def name(self, hint):
        self.n += 1
        return "%s_%d" % (hint, self.n)

    def op(self, op_type, inputs, hint=None, **attrs):
        out = self.name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def ops(self, op_type, inputs, count, hint=None, **attrs):
        outs = [self.name(hint or op_type.lower()) for _ in range(count)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, **attrs))
        return outs

    def param(self, name, shape):
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        length = 4 * math.prod(shape)
        for key, value in (("location", self.data_name),
                           ("offset", str(self.offset)),
                           ("length", str(length))):
            entry = t.external_data.add()
            entry.key = key
            entry.value = value
        self.offset += (length + ALIGN - 1) // ALIGN * ALIGN
        self.count += math.prod(shape)
        self.params.append(t)
        return name

    def const(self, array, hint="const"):
        out = self.name(hint)
        self.nodes.append(helper.make_node(
            "Constant", [], [out],
            value=numpy_helper.from_array(np.asarray(array), out)))
        return out

    def ints(self, values, hint="shape"):
        return self.const(np.array(values, dtype=np.int64), hint)


def linear(b, x, prefix, din, dout, bias):
    y = b.op("MatMul", [x, b.param(prefix + ".weight", [din, dout])])
    if bias:
        y = b.op("Add", [y, b.param(prefix + ".bias", [dout])])
    return y


def norm(b, x, prefix, dim, family):
    if family == "gpt":
        return b.op("LayerNormalization",
                    [x, b.param(prefix + ".scale", [dim]),
                     b.param(prefix + ".bias", [dim])],
                    axis=-1, epsilon=1e-5)
    # RMSNorm as exporters write it before opset 23.
    sq = b.op("Mul", [x, x])
    mean = b.op("ReduceMean", [sq], axes=[-1], keepdims=1)
    eps = b.const(np.array(1e-6, dtype=np.float32), "eps")
    rms = b.op("Sqrt", [b.op("Add", [mean, eps])])
    return b.op("Mul", [b.op("Div", [x, rms]),
                        b.param(prefix + ".scale", [dim])])


def rotary(b, x, cos, sin, half):
    """x [B, H, T, hd]: x*cos + rotate_half(x)*sin."""
    x1, x2 = b.name("x1"), b.name("x2")
    b.nodes.append(helper.make_node("Split", [x, b.ints([half, half])],
                                    [x1, x2], axis=-1))
    rotated = b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
    return b.op("Add", [b.op("Mul", [x, cos]), b.op("Mul", [rotated, sin])])


def heads(b, x, batch, seq, n, hd):
    """[B, T, n*hd] -> [B, n, T, hd]."""
    return b.op("Transpose", [b.op("Reshape",
                                   [x, b.ints([batch, seq, n, hd])])],
                perm=[0, 2, 1, 3])


def swiglu(b, x, prefix, dim, hidden):
    gate = linear(b, x, prefix + "gate", dim, hidden, False)
    up = linear(b, x, prefix + "up", dim, hidden, False)
    m = b.op("Mul", [b.op("Mul", [gate, b.op("Sigmoid", [gate])]), up])
    return linear(b, m, prefix + "down", hidden, dim, False)


def moe(b, h, prefix, tokens, dim, hidden, experts, top_k, shared_hidden,
        renormalise):
    """A routed MLP spelled as torch.onnx exports transformers' Mixtral and
    Qwen2-MoE blocks: softmax over the router's logits, the top-k kept
    (renormalised for Mixtral), a one-hot expert mask, and per expert the
    NonZero of its slice (the (slot, token) pairs routed to it), its tokens'
    rows through its SwiGLU, scaled by their routing weight and added back
    with ScatterElements; Qwen's shared expert behind a sigmoid gate."""
    x = b.op("Reshape", [h, b.ints([-1, dim])])
    logits = linear(b, x, prefix + "router", dim, experts, False)
    probs = b.op("Softmax", [logits], axis=1)
    weights, chosen = b.ops("TopK", [probs, b.ints([top_k])], 2, axis=-1)
    if renormalise:
        total = b.op("ReduceSum", [weights, b.ints([-1])], keepdims=1)
        weights = b.op("Div", [weights, total])
    flat_weights = b.op("Reshape", [weights, b.ints([-1, 1])])
    hot = b.op("OneHot", [chosen, b.const(np.array(experts, np.int64)),
                          b.ints([0, 1])], axis=-1)
    by_expert = b.op("Transpose", [hot], perm=[2, 1, 0])
    rows_of = b.op("Unsqueeze", [x, b.ints([0])])
    out = b.op("ConstantOfShape", [b.ints([tokens, dim])],
               value=numpy_helper.from_array(np.zeros(1, np.float32)))
    for e in range(experts):
        p = prefix + "experts.%d." % e
        mask = b.op("Cast", [b.op("Gather", [by_expert,
                                             b.const(np.array(e, np.int64))],
                                  axis=0)], to=TensorProto.BOOL)
        pairs = b.op("Transpose", [b.op("NonZero", [mask])], perm=[1, 0])
        slot, token = b.ops("Split", [pairs, b.ints([1, 1])], 2, axis=1)
        slot = b.op("Squeeze", [slot, b.ints([1])])
        token = b.op("Squeeze", [token, b.ints([1])])
        rows = b.op("Reshape", [b.op("Gather", [rows_of, token], axis=1),
                                b.ints([-1, dim])])
        y = swiglu(b, rows, p, dim, hidden)
        pair = b.op("Add", [slot, b.op("Mul", [token, b.const(
            np.array(top_k, np.int64))])])
        y = b.op("Mul", [y, b.op("Gather", [flat_weights, pair], axis=0)])
        where = b.op("Expand", [b.op("Unsqueeze", [token, b.ints([1])]),
                                b.op("Shape", [y])])
        zeros = b.op("ConstantOfShape", [b.ints([tokens, dim])],
                     value=numpy_helper.from_array(np.zeros(1, np.float32)))
        out = b.op("Add", [out, b.op("ScatterElements", [zeros, where, y],
                                     axis=0)])
    if shared_hidden:
        gate = b.op("Sigmoid", [linear(b, x, prefix + "shared_gate", dim, 1,
                                       False)])
        shared = swiglu(b, x, prefix + "shared.", dim, shared_hidden)
        out = b.op("Add", [out, b.op("Mul", [gate, shared])])
    return out


def build(family, layers, dim, heads_, kv_heads, hidden, vocab, batch, seq,
          data_name, experts=0, top_k=0, shared_hidden=0):
    b = Builder(data_name)
    hd = dim // heads_
    bias = family == "gpt"
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                        [batch, seq])
    wte = b.param("embed.weight", [vocab, dim])
    x = b.op("Gather", [wte, "input_ids"], axis=0)
    if family == "gpt":
        pos = b.param("embed_positions.weight", [seq, dim])
        x = b.op("Add", [x, pos])
    else:
        inv = 1.0 / (10000 ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
        angles = np.outer(np.arange(seq, dtype=np.float64), inv)
        angles = np.concatenate([angles, angles], axis=-1)
        cos = b.const(np.cos(angles).astype(np.float32), "rope_cos")
        sin = b.const(np.sin(angles).astype(np.float32), "rope_sin")
    mask = np.triu(np.full((seq, seq), -1e9, dtype=np.float32), 1)
    mask = b.const(mask, "causal_mask")
    scale = b.const(np.array(1.0 / math.sqrt(hd), dtype=np.float32), "scale")
    group = heads_ // kv_heads
    for i in range(layers):
        p = "layers.%d." % i
        h = norm(b, x, p + "attn_norm", dim, family)
        q = heads(b, linear(b, h, p + "q", dim, dim, bias), batch, seq,
                  heads_, hd)
        k = heads(b, linear(b, h, p + "k", dim, kv_heads * hd, bias), batch,
                  seq, kv_heads, hd)
        v = heads(b, linear(b, h, p + "v", dim, kv_heads * hd, bias), batch,
                  seq, kv_heads, hd)
        if family == "llama":
            q = rotary(b, q, cos, sin, hd // 2)
            k = rotary(b, k, cos, sin, hd // 2)
        if group > 1:
            # Grouped-query attention: each key/value head serves `group`
            # query heads.
            def repeat(t):
                t = b.op("Unsqueeze", [t, b.ints([2])])
                t = b.op("Expand", [t, b.ints([batch, kv_heads, group, seq,
                                               hd])])
                return b.op("Reshape", [t, b.ints([batch, heads_, seq, hd])])
            k, v = repeat(k), repeat(v)
        s = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
        s = b.op("Add", [b.op("Mul", [s, scale]), mask])
        a = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
        a = b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]),
                             b.ints([batch, seq, dim])])
        x = b.op("Add", [x, linear(b, a, p + "o", dim, dim, bias)])
        h = norm(b, x, p + "mlp_norm", dim, family)
        if experts:
            routed = moe(b, h, p + "moe.", batch * seq, dim, hidden, experts,
                         top_k, shared_hidden, renormalise=not shared_hidden)
            x = b.op("Add", [x, b.op("Reshape", [routed, b.ints(
                [batch, seq, dim])])])
            continue
        if family == "gpt":
            u = linear(b, h, p + "up", dim, hidden, bias)
            m = gelu_tanh(b, u)
        else:
            gate = linear(b, h, p + "gate", dim, hidden, False)
            up = linear(b, h, p + "up", dim, hidden, False)
            m = b.op("Mul", [b.op("Mul", [gate, b.op("Sigmoid", [gate])]),
                             up])
        x = b.op("Add", [x, linear(b, m, p + "down", hidden, dim, bias)])
    x = norm(b, x, "final_norm", dim, family)
    if family == "gpt":
        # Tied embeddings, as GPT-3.
        logits = b.op("MatMul", [x, b.op("Transpose", [wte], perm=[1, 0])])
    else:
        logits = linear(b, x, "lm_head", dim, vocab, False)
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"]))
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                        [batch, seq, vocab])
    graph = helper.make_graph(b.nodes, "synthetic", [ids], [out],
                              initializer=b.params)
    model = helper.make_model(graph, producer_name="strata-synthetic",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, b.count, b.offset


def gelu_tanh(b, x):
    """GPT's GELU, tanh form, as exporters write it."""
    c = b.const(np.array(math.sqrt(2 / math.pi), dtype=np.float32), "c")
    k = b.const(np.array(0.044715, dtype=np.float32), "k")
    half = b.const(np.array(0.5, dtype=np.float32), "half")
    one = b.const(np.array(1.0, dtype=np.float32), "one")
    cube = b.op("Mul", [b.op("Mul", [x, x]), x])
    inner = b.op("Mul", [b.op("Add", [x, b.op("Mul", [cube, k])]), c])
    return b.op("Mul", [b.op("Mul", [x, half]),
                        b.op("Add", [b.op("Tanh", [inner]), one])])


def write(out_dir, name, cfg, batch, seq):
    """Writes NAME.onnx, its sparse NAME.onnx.data and NAME.json; returns
    the description."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".onnx")
    data_name = name + ".onnx.data"
    if cfg["dim"] % cfg["heads"] or cfg["heads"] % cfg["kv_heads"]:
        raise SystemExit("synthetic.py: --dim must divide into --heads, and "
                         "--heads into --kv-heads")
    model, count, size = build(cfg["family"], cfg["layers"], cfg["dim"],
                               cfg["heads"], cfg["kv_heads"], cfg["hidden"],
                               cfg["vocab"], batch, seq, data_name,
                               cfg.get("experts", 0), cfg.get("top_k", 0),
                               cfg.get("shared_hidden", 0))
    onnx.save(model, path)
    data = os.path.join(out_dir, data_name)
    # Sparse: the length is set, nothing is written.
    with open(data, "wb") as f:
        f.truncate(size)
    desc = dict(cfg, name=name, batch=batch, seq=seq, parameters=count,
                data_bytes=size, bind="input_ids=%dx%d" % (batch, seq),
                synthetic_init=INIT_RULES)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(desc, f, indent=1)
    return desc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--family", choices=["llama", "gpt"], default="llama")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=0,
                    help="key/value heads (default: --heads)")
    ap.add_argument("--hidden", type=int, default=0,
                    help="MLP width (default: 4*dim for gpt, LLaMA's 8/3 "
                         "rounded up to 256 for llama)")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--experts", type=int, default=0,
                    help="routed experts per MLP (llama family; 0: none)")
    ap.add_argument("--top-k", type=int, default=2,
                    help="experts per token (with --experts)")
    ap.add_argument("--shared-hidden", type=int, default=0,
                    help="a shared expert of this width (with --experts)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--name", help="file name (default: the preset's, or "
                                   "FAMILY-LxD)")
    ap.add_argument("--out", help="directory to write to")
    ap.add_argument("--list", action="store_true",
                    help="list the presets and exit")
    args = ap.parse_args()
    if args.list:
        for name, cfg in sorted(PRESETS.items()):
            print(name, " ".join("%s=%s" % kv for kv in cfg.items()))
        return 0
    if not args.out:
        ap.error("--out is required")
    if args.preset:
        cfg = dict(PRESETS[args.preset])
        name = args.name or args.preset
    else:
        hidden = args.hidden or (4 * args.dim if args.family == "gpt" else
                                 (8 * args.dim // 3 + 255) // 256 * 256)
        cfg = dict(family=args.family, layers=args.layers, dim=args.dim,
                   heads=args.heads, kv_heads=args.kv_heads or args.heads,
                   hidden=hidden, vocab=args.vocab)
        if args.experts:
            if args.family != "llama" or not 0 < args.top_k <= args.experts:
                ap.error("--experts needs --family llama and 0 < --top-k <= "
                         "--experts")
            cfg.update(experts=args.experts, top_k=args.top_k,
                       shared_hidden=args.shared_hidden)
        name = args.name or "%s-%dx%d" % (args.family, args.layers, args.dim)
    for key in ("layers", "dim", "heads", "kv_heads", "hidden", "vocab"):
        if cfg[key] <= 0:
            ap.error("--%s must be positive" % key.replace("_", "-"))
    if args.batch <= 0 or args.seq <= 0:
        ap.error("--batch and --seq must be positive")
    desc = write(args.out, name, cfg, args.batch, args.seq)
    print("%s: %.3fB parameters, %s sparse data; compile with --input-shape "
          "not needed (static %s); train with --synthetic-init %s" % (
              os.path.join(args.out, name + ".onnx"),
              desc["parameters"] / 1e9, "%.1f GiB" % (desc["data_bytes"] /
                                                      2**30),
              desc["bind"], " --synthetic-init ".join(
                  "'%s'" % r for r in INIT_RULES)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
