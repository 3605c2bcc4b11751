#!/usr/bin/env python3
"""Builds the small transformers Strata's tests import, train and compare.

GPT-2-style (learned positions, LayerNorm, GELU, tied embeddings, causal
mask from a bool buffer) and LLaMA-style (RMSNorm, rotary embeddings from
cos/sin tables, SwiGLU, causal mask computed at run time) models are built
in PyTorch and exported with torch.onnx.export, with and without dynamic
axes. Other exporters' styles are written with the onnx helper API: Gemm
with transB, LayerNormalization at opset 17, Gelu at opset 20, and a model
whose tensors live in an external data file.

Each model NAME is written as NAME.onnx (+ data files) with NAME.json
describing it: the input binding to use, the expected output shape, and the
float initializers (the parameters Strata must create).

PyTorch and onnx are test-only dependencies: reference oracles and model
generators, never part of the product.

    generate.py --out DIR [--only NAME ...] [--list]
"""

import argparse
import functools
import json
import math
import os
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


# ---------------------------------------------------------------------------
# PyTorch models
# ---------------------------------------------------------------------------

def _torch():
    import torch  # Imported lazily: --list must work without torch.
    return torch


def gpt2_module(vocab=96, ctx=32, dim=32, heads=4, layers=2, gelu="tanh"):
    """A GPT-2; `gelu` is F.gelu's `approximate` ("tanh" or "none": the erf
    form), or "new" for the tanh form written out with torch.pow as
    Hugging Face's gelu_new does."""
    torch = _torch()
    torch.manual_seed(0)  # Same weights on every run.
    nn = torch.nn
    F = torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(dim, 3 * dim)
            self.c_proj = nn.Linear(dim, dim)
            mask = torch.tril(torch.ones(ctx, ctx, dtype=torch.bool))
            self.register_buffer("bias", mask.view(1, 1, ctx, ctx),
                                 persistent=False)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(dim, dim=2)
            hd = C // heads
            q = q.view(B, T, heads, hd).transpose(1, 2)
            k = k.view(B, T, heads, hd).transpose(1, 2)
            v = v.view(B, T, heads, hd).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(~self.bias[:, :, :T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(dim)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(dim)
            self.c_fc = nn.Linear(dim, 4 * dim)
            self.c_proj = nn.Linear(4 * dim, dim)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            h = self.c_fc(self.ln_2(x))
            if gelu == "new":
                h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (
                    h + 0.044715 * torch.pow(h, 3.0))))
            else:
                h = F.gelu(h, approximate=gelu)
            return x + self.c_proj(h)

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, dim)
            self.wpe = nn.Embedding(ctx, dim)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(dim)
            self.lm_head = nn.Linear(dim, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # Tied embeddings.

        def forward(self, input_ids):
            T = input_ids.size(1)
            pos = torch.arange(0, T, dtype=torch.long).unsqueeze(0)
            x = self.wte(input_ids) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return GPT2()


def llama_module(vocab=96, ctx=32, dim=32, heads=4, layers=2, hidden=64):
    torch = _torch()
    torch.manual_seed(0)  # Same weights on every run.
    nn = torch.nn
    F = torch.nn.functional
    hd = dim // heads

    class RMSNorm(nn.Module):
        def __init__(self, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            var = x.pow(2).mean(-1, keepdim=True)
            return self.weight * (x * torch.rsqrt(var + self.eps))

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(dim, dim, bias=False)
            self.k_proj = nn.Linear(dim, dim, bias=False)
            self.v_proj = nn.Linear(dim, dim, bias=False)
            self.o_proj = nn.Linear(dim, dim, bias=False)

        def forward(self, x, cos, sin, mask):
            B, T, C = x.shape
            q = self.q_proj(x).view(B, T, heads, hd).transpose(1, 2)
            k = self.k_proj(x).view(B, T, heads, hd).transpose(1, 2)
            v = self.v_proj(x).view(B, T, heads, hd).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd)
            att = F.softmax(att + mask, dim=-1)
            y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, C)
            return self.o_proj(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(dim, hidden, bias=False)
            self.up_proj = nn.Linear(dim, hidden, bias=False)
            self.down_proj = nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm()
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm()
            self.mlp = MLP()

        def forward(self, x, cos, sin, mask):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList([Layer() for _ in range(layers)])
            self.norm = RMSNorm()
            self.lm_head = nn.Linear(dim, vocab, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
            freqs = torch.outer(torch.arange(ctx).float(), inv)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("rope_cos", emb.cos())
            self.register_buffer("rope_sin", emb.sin())

        def forward(self, input_ids):
            T = input_ids.shape[1]
            cos = self.rope_cos[:T]
            sin = self.rope_sin[:T]
            mask = torch.full((T, T), float("-inf")).triu(1)
            x = self.embed_tokens(input_ids)
            for layer in self.layers:
                x = layer(x, cos, sin, mask)
            return self.lm_head(self.norm(x))

    return Llama()


def _initialise(module):
    """Seeded weights. GPT-2's initialisation (matrices N(0, 0.02)) keeps
    the logits small, so the test models train in a well-conditioned
    regime. Vectors (norm weights, biases) would start as all ones or
    zeros, and the exporter merges initializers with equal values, which
    would tie every norm together: perturb them."""
    torch = _torch()
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            else:
                p.add_(0.1 * torch.randn_like(p))


def export_torch(module, path, batch, seq, opset, dynamic, fold,
                 functions=()):
    """Exports `module` (ids -> logits); the submodules whose class is named
    in `functions` become model-local ONNX functions (opset 15 and later),
    as newer exporters write every module."""
    torch = _torch()
    module.eval()
    _initialise(module)
    ids = torch.randint(0, 96, (batch, seq), dtype=torch.long)
    kwargs = {}
    # The tracer warns about Python-level shape arithmetic; the importer folds
    # exactly those computations, so the warnings are noise here.
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    if dynamic:
        kwargs["dynamic_axes"] = {"input_ids": {0: "batch", 1: "seq"},
                                  "logits": {0: "batch", 1: "seq"}}
    if functions:
        kwargs["export_modules_as_functions"] = {
            type(m) for m in module.modules()
            if type(m).__name__ in functions}
    with torch.no_grad():
        torch.onnx.export(module, (ids,), path, input_names=["input_ids"],
                          output_names=["logits"], opset_version=opset,
                          do_constant_folding=fold, **kwargs)
    return module


def with_loss(module):
    """`module` (ids -> logits) as HuggingFace models export for training:
    forward(input_ids, labels) -> (loss, logits), the mean next-token
    cross-entropy with the labels shifted inside (labels of -100 are
    ignored, PyTorch's default)."""
    torch = _torch()

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = module

        def forward(self, input_ids, labels):
            logits = self.model(input_ids)
            v = logits.shape[-1]
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1, :].reshape(-1, v), labels[:, 1:].reshape(-1))
            return loss, logits

    return WithLoss()


def export_with_loss(module, path, batch, seq, opset, dynamic):
    """Exports with_loss(module) (initialised as export_torch does) with
    inputs input_ids and labels and outputs loss and logits; returns the
    wrapped module."""
    torch = _torch()
    _initialise(module)
    wrapped = with_loss(module).eval()
    ids = torch.randint(0, 96, (batch, seq), dtype=torch.long)
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    kwargs = {}
    if dynamic:
        axes = {0: "batch", 1: "seq"}
        kwargs["dynamic_axes"] = {"input_ids": axes, "labels": axes,
                                  "logits": axes}
    with torch.no_grad():
        torch.onnx.export(wrapped, (ids, ids), path,
                          input_names=["input_ids", "labels"],
                          output_names=["loss", "logits"],
                          opset_version=opset, do_constant_folding=False,
                          **kwargs)
    return wrapped


# ---------------------------------------------------------------------------
# Models written with the onnx helper API
# ---------------------------------------------------------------------------

def _init(name, shape, rng):
    return numpy_helper.from_array(
        rng.standard_normal(shape).astype(np.float32) * 0.1, name)


def helper_gemm_mlp(path):
    """A classifier as older exporters write it: Gemm with transB, opset 13."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("Flatten", ["x"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["h"],
                         transB=1, name="fc1"),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["logits"],
                         transB=1, alpha=1.0, beta=1.0, name="fc2"),
    ]
    graph = helper.make_graph(
        nodes, "gemm_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        [_init("fc1.weight", (32, 16), rng), _init("fc1.bias", (32,), rng),
         _init("fc2.weight", (10, 32), rng), _init("fc2.bias", (10,), rng)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)


def _helper_block(opset, use_gelu_op, name):
    """A pre-LN transformer MLP block with LayerNormalization (opset 17+)."""
    rng = np.random.default_rng(opset)
    d, f = 16, 64
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln.weight", "ln.bias"],
                         ["n"], axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["n", "up.weight"], ["u"]),
        helper.make_node("Add", ["u", "up.bias"], ["ub"]),
    ]
    if use_gelu_op:
        nodes.append(helper.make_node("Gelu", ["ub"], ["g"],
                                      approximate="tanh"))
    else:
        nodes += [
            helper.make_node("Constant", [], ["sqrt2"],
                             value=numpy_helper.from_array(
                                 np.array(math.sqrt(2.0), np.float32))),
            helper.make_node("Div", ["ub", "sqrt2"], ["s"]),
            helper.make_node("Erf", ["s"], ["e"]),
            helper.make_node("Constant", [], ["one"],
                             value=numpy_helper.from_array(
                                 np.array(1.0, np.float32))),
            helper.make_node("Add", ["e", "one"], ["e1"]),
            helper.make_node("Mul", ["ub", "e1"], ["m"]),
            helper.make_node("Constant", [], ["half"],
                             value=numpy_helper.from_array(
                                 np.array(0.5, np.float32))),
            helper.make_node("Mul", ["m", "half"], ["g"]),
        ]
    nodes += [
        helper.make_node("MatMul", ["g", "down.weight"], ["dn"]),
        helper.make_node("Add", ["x", "dn"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       ["batch", "seq", d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       ["batch", "seq", d])],
        [_init("ln.weight", (d,), rng), _init("ln.bias", (d,), rng),
         _init("up.weight", (d, f), rng), _init("up.bias", (f,), rng),
         _init("down.weight", (f, d), rng)])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def helper_ln17(path):
    onnx.save(_helper_block(17, False, "ln17"), path)


def helper_gelu20(path):
    onnx.save(_helper_block(20, True, "gelu20"), path)


def helper_external(path):
    """A model whose initializers live in an external data file."""
    model = _helper_block(17, False, "external")
    onnx.save_model(model, path, save_as_external_data=True,
                    all_tensors_to_one_file=True,
                    location=os.path.basename(path) + ".data",
                    size_threshold=0)


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

def _torch_entry(builder, opset, dynamic, fold, bind, out_shape,
                 functions=()):
    def make(path):
        return export_torch(builder(), path, batch=2, seq=8, opset=opset,
                            dynamic=dynamic, fold=fold, functions=functions)
    return {"make": make, "bind": bind, "output_shape": out_shape,
            "torch": True}


MODELS = {
    # Static shapes as exported, constant folding on (the default export).
    "gpt2_static": _torch_entry(gpt2_module, 14, False, True, [], [2, 8, 96]),
    # Dynamic batch and sequence, bound to other values at import; no
    # constant folding, so every shape computation reaches the importer.
    "gpt2_dynamic": _torch_entry(gpt2_module, 17, True, False,
                                 ["input_ids=3x16"], [3, 16, 96]),
    # The erf GELU, and the tanh GELU as Hugging Face's gelu_new writes it
    # (torch.pow): both exported as chains of elementwise ops.
    "gpt2_erf": _torch_entry(functools.partial(gpt2_module, gelu="none"), 17,
                             True, False, ["input_ids=3x16"], [3, 16, 96]),
    "gpt2_gelu_new": _torch_entry(functools.partial(gpt2_module, gelu="new"),
                                  17, True, False, ["input_ids=3x16"],
                                  [3, 16, 96]),
    "llama_static": _torch_entry(llama_module, 17, False, True, [],
                                 [2, 8, 96]),
    # Each block a model-local function (ModelProto.functions), called
    # once per layer with its weights as arguments.
    "gpt2_functions": _torch_entry(gpt2_module, 15, False, True, [],
                                   [2, 8, 96], functions=("Block",)),
    "llama_dynamic": _torch_entry(llama_module, 14, True, False,
                                  ["input_ids=1x24"], [1, 24, 96]),
    # An older exporter setting: opset 11 (Softmax over a 2-D view, Split
    # and Squeeze with attributes, Clip with inputs).
    "gpt2_opset11": _torch_entry(gpt2_module, 11, True, False,
                                 ["input_ids=2x12"], [2, 12, 96]),
    "helper_gemm_mlp": {"make": helper_gemm_mlp, "bind": ["x=5x4x4"],
                        "output_shape": [5, 10]},
    "helper_ln17": {"make": helper_ln17, "bind": ["batch=2", "seq=7"],
                    "output_shape": [2, 7, 16]},
    "helper_gelu20": {"make": helper_gelu20, "bind": ["x=2x7x16"],
                      "output_shape": [2, 7, 16]},
    "helper_external": {"make": helper_external, "bind": ["x=1x3x16"],
                        "output_shape": [1, 3, 16]},
}


def describe(path):
    """Float initializers of the saved model (name -> element count)."""
    model = onnx.load(path, load_external_data=False)
    params = {}
    for init in model.graph.initializer:
        if init.data_type in (TensorProto.FLOAT, TensorProto.FLOAT16,
                              TensorProto.BFLOAT16, TensorProto.DOUBLE):
            params[init.name] = int(np.prod(init.dims)) if init.dims else 1
    ops = sorted({n.op_type for n in model.graph.node})
    opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return {"parameters": params, "onnx_ops": ops, "opset": opset[0]}


def generate(out_dir, names):
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name in names:
        entry = MODELS[name]
        path = os.path.join(out_dir, name + ".onnx")
        module = entry["make"](path)
        meta = {"name": name, "path": path, "bind": entry["bind"],
                "output_shape": entry["output_shape"]}
        meta.update(describe(path))
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump(meta, f, indent=1)
        # The PyTorch module (the reference) travels with the description.
        meta["module"] = module
        written.append(meta)
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="directory to write models into")
    parser.add_argument("--only", nargs="*", help="model names to generate")
    parser.add_argument("--list", action="store_true", help="list the models")
    args = parser.parse_args()
    if args.list:
        for name in MODELS:
            print(name)
        return 0
    if not args.out:
        parser.error("--out is required")
    names = args.only or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error("unknown model(s): " + ", ".join(unknown))
    for meta in generate(args.out, names):
        print("wrote %s (%d parameters, opset %d)" % (
            meta["path"], sum(meta["parameters"].values()), meta["opset"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
