#!/usr/bin/env python3
"""Imports every generated test model and checks what the importer made.

For each model of generate.py: strata-compile --emit=graph succeeds with the
model's input binding; every tensor type is static; no op is left computing
on constants alone (the exporters' shape sub-graphs folded away); the
parameters are exactly the model's float initializers; the output has the
expected shape. Also: a truncated external data file is a clear error.

    test_import.py --bin BUILD/bin --work DIR
"""

import os
import re
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402
import harness  # noqa: E402

ARGS = None
SSA = re.compile(r"%[\w.#]+")
TYPE = re.compile(r"tensor<([^>]*)>")


def compile_model(path, binds, *extra):
    cmd = [os.path.join(ARGS.bin, "strata-compile"), path, "--emit=graph"]
    for b in binds:
        cmd += ["--input-shape", b]
    cmd += list(extra)
    return subprocess.run(cmd, capture_output=True, text=True)


def analyse(ir):
    """Returns (ops, constants, params, func_signature) of the printed IR."""
    constants, params, ops = set(), {}, []
    signature = None
    for line in ir.splitlines():
        line = line.strip()
        if line.startswith("func.func @main"):
            signature = line
            continue
        m = re.match(r"(%[\w.#]+) = (graph\.\w+)(.*)", line)
        if not m:
            continue
        result, op, rest = m.groups()
        if op == "graph.constant":
            constants.add(result)
        elif op == "graph.param":
            pm = re.match(r'\s*"([^"]*)"(.*)', rest)
            name, after = pm.group(1), pm.group(2)
            params[name] = (result, after.lstrip().startswith("trainable"),
                            TYPE.findall(after)[-1])
        ops.append((result, op, SSA.findall(rest.split(" : ")[0]), line))
    return ops, constants, params, signature


def numel(type_body):
    dims = type_body.split("x")[:-1]
    n = 1
    for d in dims:
        n *= int(d)
    return n


class ImportModels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.models = {m["name"]: m for m in
                      generate.generate(ARGS.work, list(generate.MODELS))}

    def check_model(self, name):
        meta = self.models[name]
        r = compile_model(meta["path"], meta["bind"])
        self.assertEqual(r.returncode, 0, "%s failed:\n%s" % (name, r.stderr))
        ir = r.stdout
        for body in TYPE.findall(ir):
            self.assertNotIn("?", body, "%s: dynamic type tensor<%s>" % (
                name, body))
        ops, constants, params, signature = analyse(ir)
        self.assertIsNotNone(signature)
        # No op computes on constants alone: shape sub-graphs are folded.
        for result, op, operands, line in ops:
            if op in ("graph.constant", "graph.param"):
                continue
            self.assertFalse(operands and all(o in constants for o in operands),
                             "%s: unfolded op on constants: %s" % (name, line))
        # Parameters are exactly the float initializers, with their sizes.
        self.assertEqual(set(params), set(meta["parameters"]), name)
        for pname, (_, trainable, type_body) in params.items():
            self.assertTrue(trainable, "%s: %s not trainable" % (name, pname))
            self.assertEqual(numel(type_body), meta["parameters"][pname])
        # The output has the expected static shape.
        out = re.search(r"-> \((tensor<[^>]*>)", signature)
        expected = "x".join(str(d) for d in meta["output_shape"])
        self.assertIn("tensor<%sx" % expected, out.group(1), signature)

    def test_gpt2_static(self):
        self.check_model("gpt2_static")

    def test_gpt2_dynamic(self):
        self.check_model("gpt2_dynamic")

    def test_llama_static(self):
        self.check_model("llama_static")

    def test_llama_dynamic(self):
        self.check_model("llama_dynamic")

    def test_helper_gemm_mlp(self):
        self.check_model("helper_gemm_mlp")

    def test_helper_ln17(self):
        self.check_model("helper_ln17")

    def test_helper_gelu20(self):
        self.check_model("helper_gelu20")

    def test_helper_external(self):
        self.check_model("helper_external")

    def test_freeze_rope_tables(self):
        meta = self.models["llama_dynamic"]
        r = compile_model(meta["path"], meta["bind"], "--freeze", "rope_*")
        self.assertEqual(r.returncode, 0, r.stderr)
        _, _, params, _ = analyse(r.stdout)
        frozen = {n for n, (_, t, _) in params.items() if not t}
        self.assertEqual(frozen, {"rope_cos", "rope_sin"})

    def test_dynamic_model_needs_binding(self):
        meta = self.models["gpt2_dynamic"]
        r = compile_model(meta["path"], [])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("input 'input_ids' has dynamic dimensions [batch, seq]",
                      r.stderr)

    def test_truncated_external_data(self):
        meta = self.models["helper_external"]
        d = os.path.join(ARGS.work, "truncated")
        os.makedirs(d, exist_ok=True)
        base = os.path.basename(meta["path"])
        shutil.copy(meta["path"], d)
        with open(meta["path"] + ".data", "rb") as f:
            data = f.read()
        with open(os.path.join(d, base + ".data"), "wb") as f:
            f.write(data[: len(data) // 2])
        r = compile_model(os.path.join(d, base), meta["bind"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("too short for offset", r.stderr)
        self.assertIn("(truncated?)", r.stderr)
        os.remove(os.path.join(d, base + ".data"))
        r = compile_model(os.path.join(d, base), meta["bind"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("missing external data file", r.stderr)

    def test_malformed_protobuf(self):
        path = os.path.join(ARGS.work, "garbage.onnx")
        with open(path, "wb") as f:
            f.write(b"\x08\x07this is not a model\xff\xff\xff")
        r = compile_model(path, [])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("is not a valid ONNX model", r.stderr)

    def range_model(self, name, **attrs):
        """A float16 Range (ONNX opset 27) from constant scalars, added to
        the model's input."""
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        consts = [helper.make_node(
            "Constant", [], [n],
            value=numpy_helper.from_array(np.array(v, dtype=np.float16)))
            for n, v in (("start", 1000.0), ("limit", 1000.8),
                         ("delta", 0.1))]
        graph = helper.make_graph(
            consts +
            [helper.make_node("Range", ["start", "limit", "delta"], ["seq"],
                              **attrs),
             helper.make_node("Add", ["seq", "x"], ["r"])], name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [11])],
            [helper.make_tensor_value_info("r", TensorProto.FLOAT16, [11])])
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 27)])
        model.ir_version = 8
        path = os.path.join(ARGS.work, name + ".onnx")
        onnx.save(model, path)
        return path

    def test_range_opset27_float16(self):
        # Steps of 0.1 from 1000, where float16 values are 0.5 apart: ONNX's
        # default (stash_type=1) computes in float and rounds each value;
        # rounding each step to 16 bits would stall at 1000.
        import numpy as np
        path = self.range_model("range27")
        art = os.path.join(ARGS.work, "range27.strata")
        r = subprocess.run([os.path.join(ARGS.bin, "strata-compile"), path,
                            "--mode", "forward", "-o", art],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        x = os.path.join(ARGS.work, "range27-x.npy")
        np.save(x, np.zeros(11, np.float16))
        out = os.path.join(ARGS.work, "range27-out")
        r = subprocess.run([os.path.join(ARGS.bin, "strata-run"), art,
                            "--quiet", "--input", "x=" + x,
                            "--output-dir", out],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = np.load(os.path.join(out, "r.npy"))
        # ONNX's reference for stash_type=1: float32 steps, each rounded.
        start, delta = np.float32(np.float16(1000.0)), np.float32(
            np.float16(0.1))
        want, cur = [], start
        for _ in range(11):
            want.append(np.float16(cur))
            cur = np.float32(cur + delta)
        self.assertEqual(got.tolist(), [float(w) for w in want])
        self.assertGreater(len(set(got.tolist())), 1)

    def test_range_stash_type_zero_is_refused(self):
        r = compile_model(self.range_model("range27s0", stash_type=0), [])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("a 16-bit Range with stash_type=0 (each step rounded "
                      "to 16 bits) is not supported", r.stderr)


def main():
    global ARGS
    ARGS = harness.parse_args()
    harness.run_tests(verbosity=2)


if __name__ == "__main__":
    main()
