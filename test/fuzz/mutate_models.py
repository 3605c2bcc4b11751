#!/usr/bin/env python3
"""Structure-aware mutation of ONNX models through the onnx API, run through
the real tools: every mutant is compiled (forward, and training when its
first output is a scalar loss) and, when that succeeds, run one step on
random inputs. A tool may refuse a mutant with an error; it must never die
of a signal, hang, or report a sanitizer error (use an ASan+UBSan build's
tools: scripts/fuzz.sh builds them in build-fuzz/).

    mutate_models.py --bin build-fuzz/bin --count 2000 [--seed 1] [--work DIR]
                     [--graph NAME]

--graph mutates only the seeds whose graph has that name (moe: the routed
mixture of experts; mlp: the regression model).

Prints a line per failure (with the mutant kept under DIR/failures/) and a
summary; exits 1 when anything crashed or hung.
"""

import argparse
import copy
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_seeds  # noqa: E402

OPS = ["Add", "Sub", "Mul", "Div", "Relu", "Tanh", "Sigmoid", "Exp", "Log",
       "MatMul", "Softmax", "LogSoftmax", "Transpose", "Reshape", "Gather",
       "ReduceMean", "ReduceSum", "Concat", "Slice", "Cast", "Where",
       "Gemm", "LayerNormalization", "Range", "Expand", "Unsqueeze",
       "Squeeze", "Pow", "Sqrt", "Neg", "Identity", "Trilu", "Split",
       "NonZero", "TopK", "OneHot", "ScatterElements", "Shape",
       "ConstantOfShape", "GatherElements", "ScatterND", "Greater"]
INTS = [0, 1, -1, 2, 3, -2, 7, 1 << 31, -(1 << 31), (1 << 62) + 2,
        -(1 << 63), (1 << 63) - 1]
FLOATS = [0.0, -1.0, 1e-12, 1e30, float("nan"), float("inf"), -float("inf")]
DTYPES = [TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32,
          TensorProto.BOOL, TensorProto.DOUBLE, TensorProto.FLOAT16,
          TensorProto.UINT8, TensorProto.STRING, 0, 99]


def seeds():
    """The seed models: the fuzz corpus's models plus a small transformer
    block (attention-shaped matmuls, softmax, layer norm, gelu); among the
    corpus's, a mixture of experts routed through NonZero (graph "moe")."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        make_seeds.onnx_seeds(tmp)
        for name in sorted(os.listdir(tmp)):
            out.append(onnx.load(os.path.join(tmp, name)))
    out.append(make_seeds.mlp_model())
    return out


def names_in(model):
    g = model.graph
    names = [i.name for i in g.input] + [i.name for i in g.initializer]
    for n in g.node:
        names += list(n.output)
    return [n for n in names if n]


def mutate(model, rng):
    m = copy.deepcopy(model)
    g = m.graph
    what = rng.randrange(12)
    nodes = list(g.node)
    if what == 0 and nodes:  # An attribute's value.
        n = rng.choice(nodes)
        if n.attribute:
            a = rng.choice(n.attribute)
            if a.type == onnx.AttributeProto.INT:
                a.i = rng.choice(INTS)
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice(FLOATS)
            elif a.type == onnx.AttributeProto.INTS:
                del a.ints[:]
                a.ints.extend(rng.choice(INTS) for _ in range(rng.randrange(4)))
        else:
            n.attribute.append(helper.make_attribute(
                rng.choice(["axis", "perm", "keepdims", "to", "alpha"]),
                rng.choice([rng.choice(INTS), rng.choice(FLOATS), [1, 0]])))
    elif what == 1 and nodes:  # An attribute's kind.
        n = rng.choice(nodes)
        if n.attribute:
            a = rng.choice(n.attribute)
            new = helper.make_attribute(a.name, rng.choice(
                [1.5, 3, "x", [1, 2], [0.5]]))
            n.attribute.remove(a)
            n.attribute.append(new)
    elif what == 2 and nodes:  # A node's input wired elsewhere.
        n = rng.choice(nodes)
        names = names_in(m)
        if n.input and names:
            n.input[rng.randrange(len(n.input))] = rng.choice(names + [""])
        elif names:
            n.input.append(rng.choice(names))
    elif what == 3 and nodes:  # Inputs added or dropped.
        n = rng.choice(nodes)
        if n.input and rng.random() < 0.5:
            del n.input[-1]
        else:
            n.input.append(rng.choice(names_in(m) or ["x"]))
    elif what == 4 and nodes:  # Another op.
        rng.choice(nodes).op_type = rng.choice(OPS)
    elif what == 5 and g.input:  # A graph input's dimensions.
        t = rng.choice(g.input).type.tensor_type
        dims = t.shape.dim
        if dims:
            d = rng.choice(dims)
            if rng.random() < 0.2:
                d.dim_param = "sym"
            else:
                d.dim_value = rng.choice([0, 1, 3, 1 << 40, (1 << 62) + 2])
        else:
            t.shape.dim.add().dim_value = rng.choice([0, 2, 5])
    elif what == 6 and g.input:  # A graph input's element type.
        rng.choice(g.input).type.tensor_type.elem_type = rng.choice(DTYPES)
    elif what == 7 and g.initializer:  # An initializer's shape or type.
        t = rng.choice(g.initializer)
        if rng.random() < 0.5 and t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(
                [0, 1, 2, 3, 1 << 40])
        else:
            t.data_type = rng.choice(DTYPES)
    elif what == 8 and nodes:  # A node removed or duplicated.
        n = rng.choice(nodes)
        if rng.random() < 0.5:
            g.node.remove(n)
        else:
            g.node.append(copy.deepcopy(n))
    elif what == 9 and len(nodes) > 1:  # Order shuffled.
        rng.shuffle(nodes)
        del g.node[:]
        g.node.extend(nodes)
    elif what == 10:  # Opset.
        m.opset_import[0].version = rng.choice([1, 7, 11, 13, 17, 18, 21,
                                                 25, 99])
    else:  # A new node on existing values.
        names = names_in(m)
        if names:
            op = rng.choice(OPS)
            ins = [rng.choice(names) for _ in range(rng.randrange(1, 4))]
            out = "mut%d" % rng.randrange(1 << 30)
            g.node.insert(rng.randrange(len(nodes) + 1),
                          helper.make_node(op, ins, [out]))
            if rng.random() < 0.5 and g.output:
                g.output[0].name = out
    return m


def random_input(info, rng):
    t = info.type.tensor_type
    shape = [d.dim_value if d.dim_value > 0 else 2 for d in t.shape.dim]
    if np.prod(shape, dtype=np.float64) > 1 << 20:
        return None
    if t.elem_type == TensorProto.FLOAT:
        return rng.standard_normal(shape).astype(np.float32)
    if t.elem_type in (TensorProto.INT64, TensorProto.INT32):
        dtype = np.int64 if t.elem_type == TensorProto.INT64 else np.int32
        return rng.integers(-3, 10, size=shape).astype(dtype)
    return None


def run(cmd, timeout):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang", ""
    except OSError as e:  # The tool itself is missing or being rebuilt.
        sys.exit("mutate_models: cannot run %s: %s" % (cmd[0], e))
    bad = r.returncode < 0 or "Sanitizer" in r.stderr or \
        "runtime error:" in r.stderr
    return ("crash" if bad else "ok" if r.returncode == 0 else "refused",
            r.stderr)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work", default=None)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--graph", default=None,
                   help="mutate only the seeds whose graph has this name")
    a = p.parse_args()
    rng = random.Random(a.seed)
    nrng = np.random.default_rng(a.seed)
    work = a.work or tempfile.mkdtemp(prefix="strata-mutate-")
    os.makedirs(os.path.join(work, "failures"), exist_ok=True)
    os.environ.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1:"
                          "allocator_may_return_null=1:"
                          "allow_user_poisoning=0")
    os.environ.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:"
                          "halt_on_error=1")
    pool = seeds()
    if a.graph:
        pool = [m for m in pool if m.graph.name == a.graph]
        if not pool:
            sys.exit("mutate_models: no seed graph is named %r" % a.graph)
    stats = {"ok": 0, "refused": 0, "crash": 0, "hang": 0, "ran": 0}
    tool = lambda t: os.path.join(a.bin, t)
    for i in range(a.count):
        model = rng.choice(pool)
        for _ in range(rng.randrange(1, 4)):
            model = mutate(model, rng)
        path = os.path.join(work, "m.onnx")
        try:
            onnx.save(model, path)
        except Exception:
            continue
        binds = []
        for inp in model.graph.input:
            for d in inp.type.tensor_type.shape.dim:
                if d.dim_param:
                    binds += ["--input-shape", d.dim_param + "=2"]
        art = os.path.join(work, "m.strata")
        shutil.rmtree(art, ignore_errors=True)
        out = model.graph.output
        scalar = bool(out) and out[0].type.tensor_type.HasField("shape") \
            and len(out[0].type.tensor_type.shape.dim) == 0
        mode = ["--loss", "output", "--optimizer",
                rng.choice(["sgd", "adamw"])] if scalar else \
            ["--mode", "forward"]
        status, err = run([tool("strata-compile"), path, "-o", art] + binds +
                          mode + rng.choice([[], ["--place-states", "host"]]),
                          a.timeout)
        if status == "ok":
            inputs = []
            for inp in model.graph.input:
                if inp.name in {t.name for t in model.graph.initializer}:
                    continue
                arr = random_input(inp, nrng)
                if arr is None:
                    inputs = None
                    break
                f = os.path.join(work, "in-%s.npy" % len(inputs))
                np.save(f, arr)
                inputs += ["--input", "%s=%s" % (inp.name, f)]
            if inputs is not None:
                stats["ran"] += 1
                extra = ["--steps", "1", "--quiet"] if scalar else \
                    ["--output-dir", os.path.join(work, "out"), "--quiet"]
                status, err = run([tool("strata-run"), art] + inputs + extra,
                                  a.timeout)
                if status == "refused":
                    status = "ok"  # A data-dependent refusal is fine.
        stats[status] += 1
        if (i + 1) % 500 == 0:
            print("mutate_models: %d/%d, %s" % (i + 1, a.count, stats))
            sys.stdout.flush()
        if status in ("crash", "hang"):
            keep = os.path.join(work, "failures", "%05d.onnx" % i)
            shutil.copy(path, keep)
            print("%s: %s\n%s" % (status.upper(), keep,
                                  "\n".join(err.splitlines()[-15:])))
            sys.stdout.flush()
    print("mutate_models: %d mutants: %d compiled (%d also ran), %d refused "
          "with an error, %d crashed, %d hung" %
          (a.count, stats["ok"], stats["ran"], stats["refused"],
           stats["crash"], stats["hang"]))
    sys.exit(1 if stats["crash"] or stats["hang"] else 0)


if __name__ == "__main__":
    main()
