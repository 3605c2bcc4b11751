#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target (run by scripts/fuzz.sh):

  onnx-import/  the importer's lit inputs (.onnxtext) as binary models, and
                small onnx.helper graphs (shape sub-graphs, Range, a model
                whose output is its loss)
  compile/      the same models, for the whole compile
  npy/          arrays of every dtype and rank NumPy writes
  plan/         plan.bin of forward and training artifacts compiled by
                --compiler (a regular build's strata-compile)
  checkpoint/   a valid checkpoint of fuzz-checkpoint's own artifact, and
                one as another plan's
  report/       a Chrome trace and a training log as strata-run writes
                them (the first byte picks the reader: even trace, odd log)

    make_seeds.py --out DIR --compiler BIN/strata-compile --fuzz-bin DIR
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, parser

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def onnx_seeds(out):
    os.makedirs(out, exist_ok=True)
    n = 0
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "Import",
                                              "*.onnxtext"))):
        text = open(path).read()
        # A lit file holds one model after its RUN/CHECK comment lines.
        body = "\n".join(l for l in text.splitlines()
                         if not l.lstrip().startswith("#"))
        try:
            model = parser.parse_model(body)
        except Exception:
            continue
        with open(os.path.join(out, os.path.basename(path) + ".onnx"),
                  "wb") as f:
            f.write(model.SerializeToString())
        n += 1
    # Shape arithmetic the importer folds: Range, Shape, Reshape, Gather.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    start = numpy_helper.from_array(np.array(0, np.int64), "start")
    limit = numpy_helper.from_array(np.array(4, np.int64), "limit")
    delta = numpy_helper.from_array(np.array(1, np.int64), "delta")
    nodes = [
        helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
        helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Reshape", ["x", "s"], ["xr"]),
        helper.make_node("Add", ["xr", "rf"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y],
                              [start, limit, delta])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    with open(os.path.join(out, "range-shape.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    with open(os.path.join(out, "mlp-loss.onnx"), "wb") as f:
        f.write(mlp_model().SerializeToString())
    with open(os.path.join(out, "moe-loss.onnx"), "wb") as f:
        f.write(moe_model().SerializeToString())
    return n + 3


def npy_seeds(out):
    os.makedirs(out, exist_ok=True)
    arrays = {
        "f32-2d": np.arange(12, dtype=np.float32).reshape(3, 4),
        "i64-rows": np.arange(18, dtype=np.int64).reshape(2, 9),
        "i32": np.arange(5, dtype=np.int32),
        "f16": np.ones((2, 2), np.float16),
        "bool": np.array([True, False]),
        "scalar": np.array(3.5, np.float64),
        "empty": np.zeros((0, 3), np.float32),
        "u8-3d": np.zeros((2, 1, 3), np.uint8),
    }
    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), a)
    return len(arrays)


def mlp_model():
    """A two-layer regression model whose first output is its loss."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    t = helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, 2])
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((4, 8), np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 2), np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Tanh", ["h"], ["a"]),
        helper.make_node("MatMul", ["a", "w2"], ["y"]),
        helper.make_node("Sub", ["y", "t"], ["d"]),
        helper.make_node("Mul", ["d", "d"], ["d2"]),
        helper.make_node("ReduceMean", ["d2"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(nodes, "mlp", [x, t], [loss], [w1, w2])
    return helper.make_model(graph,
                             opset_imports=[helper.make_opsetid("", 17)])


def moe_model(experts=3, top_k=2, tokens=4, dim=3, hidden=5):
    """A mixture of experts routed the way transformers' Mixtral exports
    it (NonZero of a one-hot of the router's top-k, the tokens' rows
    gathered, each expert's MLP, ScatterElements 'add' back onto the
    tokens), whose first output is a scalar loss: the importer's bounded
    rows (held at their bound, the real ones first) under mutation."""
    rng = np.random.default_rng(1)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    const = lambda name, v: helper.make_node(
        "Constant", [], [name], value=numpy_helper.from_array(np.asarray(v)))
    init = [numpy_helper.from_array(f32(dim, experts), "router")]
    n = helper.make_node
    nodes = [
        const("k", np.array([top_k])), const("depth", np.array(experts)),
        const("onoff", np.array([0, 1])), const("axis1", np.array([1])),
        const("split", np.array([1, 1])), const("minus1", np.array([-1])),
        const("kk", np.array(top_k)),
        const("zeros", np.zeros((tokens, dim), np.float32)),
        n("MatMul", ["x", "router"], ["logits"]),
        n("Softmax", ["logits"], ["probs"], axis=1),
        n("TopK", ["probs", "k"], ["weights", "chosen"], axis=1),
        n("OneHot", ["chosen", "depth", "onoff"], ["onehot"], axis=-1),
        n("Transpose", ["onehot"], ["mask"], perm=[2, 1, 0]),
        n("Reshape", ["weights", "minus1"], ["wflat"]),
    ]
    acc = "zeros"
    for e in range(experts):
        p = "e%d." % e
        init += [numpy_helper.from_array(f32(dim, hidden), p + "up"),
                 numpy_helper.from_array(f32(hidden, dim), p + "down")]
        nodes += [
            const(p + "index", np.array(e)),
            n("Gather", ["mask", p + "index"], [p + "m"], axis=0),
            n("NonZero", [p + "m"], [p + "nz"]),
            n("Transpose", [p + "nz"], [p + "nzt"], perm=[1, 0]),
            n("Split", [p + "nzt", "split"], [p + "s1", p + "t1"], axis=1),
            n("Squeeze", [p + "s1", "axis1"], [p + "slot"]),
            n("Squeeze", [p + "t1", "axis1"], [p + "tok"]),
            n("Gather", ["x", p + "tok"], [p + "rows"], axis=0),
            n("MatMul", [p + "rows", p + "up"], [p + "h"]),
            n("Relu", [p + "h"], [p + "a"]),
            n("MatMul", [p + "a", p + "down"], [p + "o"]),
            n("Mul", [p + "tok", "kk"], [p + "tk"]),
            n("Add", [p + "tk", p + "slot"], [p + "pair"]),
            n("Gather", ["wflat", p + "pair"], [p + "w"], axis=0),
            n("Unsqueeze", [p + "w", "axis1"], [p + "w2"]),
            n("Mul", [p + "o", p + "w2"], [p + "upd"]),
            n("Shape", [p + "upd"], [p + "shape"]),
            n("Unsqueeze", [p + "tok", "axis1"], [p + "tok2"]),
            n("Expand", [p + "tok2", p + "shape"], [p + "at"]),
            n("ScatterElements", [acc, p + "at", p + "upd"], [p + "acc"],
              axis=0, reduction="add"),
        ]
        acc = p + "acc"
    nodes += [n("Sub", [acc, "t"], ["d"]), n("Mul", ["d", "d"], ["d2"]),
              n("ReduceMean", ["d2"], ["loss"], keepdims=0)]
    graph = helper.make_graph(
        nodes, "moe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, dim]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, [tokens, dim])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], init)
    return helper.make_model(graph,
                             opset_imports=[helper.make_opsetid("", 17)])


def plan_seeds(out, compiler):
    """Plans of a small regression model: forward, training (AdamW) with
    state in host memory, and with state and activations on the SSD."""
    os.makedirs(out, exist_ok=True)
    model = mlp_model()
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mlp.onnx")
        onnx.save(model, path)
        ssd = os.path.join(tmp, "ssd")
        variants = {
            "forward": ["--mode", "forward"],
            "train-adamw-host": ["--loss", "output", "--place-states", "host"],
            "train-sgd-ssd": ["--loss", "output", "--optimizer", "momentum",
                              "--place-states", "ssd",
                              "--place-activations", "ssd", "--ssd-dir", ssd],
        }
        for name, flags in variants.items():
            art = os.path.join(tmp, name + ".strata")
            subprocess.run([compiler, path, "-o", art] + flags, check=True,
                           capture_output=True)
            shutil.copy(os.path.join(art, "plan.bin"),
                        os.path.join(out, name + ".plan"))
            n += 1
    return n


def checkpoint_seeds(out, fuzz_bin):
    os.makedirs(out, exist_ok=True)
    seed = os.path.join(out, "valid.ckpt")
    env = dict(os.environ, STRATA_FUZZ_WRITE_SEED=seed)
    subprocess.run([os.path.join(fuzz_bin, "fuzz-checkpoint"), "-runs=0"],
                   env=env, check=True, capture_output=True)
    return 2  # valid.ckpt, and valid.ckpt.foreign (another plan's)


def report_seeds(out):
    os.makedirs(out, exist_ok=True)
    trace = ('{"displayTimeUnit": "ms", "traceEvents": [\n'
             '{"name": "thread_name", "ph": "M", "pid": 1, "tid": 0, '
             '"args": {"name": "plan runs"}},\n'
             '{"name": "y", "cat": "exp", "ph": "X", "pid": 1, "tid": 1, '
             '"ts": 1.5, "dur": 2.0, "args": {"bytes": 16, "step": 0}},\n'
             '{"name": "h", "cat": "d2h", "ph": "X", "pid": 1, "tid": 2, '
             '"ts": 4.0, "dur": 1.0, "args": {"bytes": 16, "step": 1}},\n'
             '{"name": "run", "cat": "run", "ph": "X", "pid": 1, "tid": 0, '
             '"ts": 1.0, "dur": 5.0, "args": {"bytes": 0, "step": -1}}\n'
             ']}\n')
    log = ('{"step": 0, "loss": 4.5, "lr": 0.001, "grad_norm": 1.5, '
           '"tokens_per_s": 100.0, "step_s": 0.01}\n'
           '{"step": 1, "loss": null, "lr": 0.001, "grad_norm": null, '
           '"tokens_per_s": 100.0, "step_s": 0.01}\n')
    with open(os.path.join(out, "trace"), "wb") as f:
        f.write(b"\x00" + trace.encode())
    with open(os.path.join(out, "log"), "wb") as f:
        f.write(b"\x01" + log.encode())
    return 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--compiler", required=True)
    p.add_argument("--fuzz-bin", required=True)
    a = p.parse_args()
    counts = {
        "onnx-import": onnx_seeds(os.path.join(a.out, "onnx-import")),
        # The whole compile starts from the same models.
        "compile": onnx_seeds(os.path.join(a.out, "compile")),
        "npy": npy_seeds(os.path.join(a.out, "npy")),
        "plan": plan_seeds(os.path.join(a.out, "plan"), a.compiler),
        "report": report_seeds(os.path.join(a.out, "report")),
        "checkpoint": checkpoint_seeds(os.path.join(a.out, "checkpoint"),
                                       a.fuzz_bin),
    }
    print("make_seeds: " + ", ".join("%s %d" % kv for kv in counts.items()))


if __name__ == "__main__":
    main()
