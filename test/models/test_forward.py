#!/usr/bin/env python3
"""Forward parity: Strata's artifacts against PyTorch.

Each PyTorch-built model of generate.py (GPT-2- and LLaMA-style, static and
dynamic axes) is compiled to an artifact, run by strata-run on random token
ids, and its logits compared with the PyTorch module's on the same ids
(rtol 1e-4, fp32). Also checks that the runtime's measured arena peak equals
the plan's, and the runtime's errors for wrong inputs and damaged artifacts.

    test_forward.py --bin BUILD/bin --work DIR
"""

import os
import re
import shutil
import subprocess
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402
import harness  # noqa: E402
from harness import tool  # noqa: E402

ARGS = None
TORCH_MODELS = ["gpt2_static", "gpt2_dynamic", "llama_static", "llama_dynamic",
                "gpt2_opset11", "gpt2_functions"]


class ForwardParity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.models = {m["name"]: m for m in generate.generate(
            ARGS.work, TORCH_MODELS + ["helper_gemm_mlp"])}

    def compile(self, meta, out):
        cmd = [tool("strata-compile"), meta["path"], "-o", out, "--mode",
               "forward"]
        for b in meta["bind"]:
            cmd += ["--input-shape", b]
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def run_artifact(self, artifact, inputs, out_dir, *extra):
        cmd = [tool("strata-run"), artifact, "--output-dir", out_dir]
        for name, path in inputs.items():
            cmd += ["--input", "%s=%s" % (name, path)]
        cmd += list(extra)
        return subprocess.run(cmd, capture_output=True, text=True)

    def check_torch_model(self, name):
        import torch
        meta = self.models[name]
        shape = meta["output_shape"][:2]
        art = os.path.join(ARGS.work, name + ".strata")
        self.compile(meta, art)
        rng = np.random.default_rng(7)
        ids = rng.integers(0, 96, size=shape, dtype=np.int64)
        ids_path = os.path.join(ARGS.work, name + ".ids.npy")
        np.save(ids_path, ids)
        out = os.path.join(ARGS.work, name + ".out")
        r = self.run_artifact(art, {"input_ids": ids_path}, out)
        self.assertEqual(r.returncode, 0, r.stderr)
        # The runtime's arena accounting reports the plan's peak.
        m = re.search(r"arena offsets touched up to (.*) \(plan: (.*)\)", r.stderr)
        self.assertIsNotNone(m, r.stderr)
        self.assertEqual(m.group(1), m.group(2))
        got = np.load(os.path.join(out, "logits.npy"))
        with torch.no_grad():
            want = meta["module"](torch.from_numpy(ids)).numpy()
        self.assertEqual(got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    def test_gpt2_static(self):
        self.check_torch_model("gpt2_static")

    def test_gpt2_dynamic(self):
        self.check_torch_model("gpt2_dynamic")

    def test_llama_static(self):
        self.check_torch_model("llama_static")

    def test_llama_dynamic(self):
        self.check_torch_model("llama_dynamic")

    def test_gpt2_opset11(self):
        self.check_torch_model("gpt2_opset11")

    def test_model_local_functions_are_inlined(self):
        """Blocks exported as model-local functions (one call per layer,
        the weights passed as arguments) import inlined: the same logits."""
        import onnx
        model = onnx.load(self.models["gpt2_functions"]["path"])
        self.assertEqual([f.name for f in model.functions], ["Block"])
        self.assertEqual(sum(n.op_type == "Block" for n in model.graph.node),
                         2)
        self.check_torch_model("gpt2_functions")

    def test_tile_and_cumsum_against_numpy(self):
        """Tile (several repeat patterns), CumSum on the data path (every
        direction, along an inner axis) and CumSum of a constant (folded at
        import, as exporters' position computations are) give NumPy's
        values."""
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        x = np.random.default_rng(5).standard_normal((2, 3, 4))
        x = x.astype(np.float32)
        mask = np.array([[1, 1, 0, 1], [0, 1, 1, 1]], np.int64)
        cases = [("tile", [2, 1, 3], {}, np.tile(x, [2, 1, 3]))]
        for exclusive in (0, 1):
            for reverse in (0, 1):
                c = np.cumsum(x[:, ::-1] if reverse else x, axis=1)
                if exclusive:
                    c = c - (x[:, ::-1] if reverse else x)
                cases.append(("cumsum", 1,
                               {"exclusive": exclusive, "reverse": reverse},
                               c[:, ::-1] if reverse else c))
        for k, (op, arg, attrs, want) in enumerate(cases):
            with self.subTest(op=op, attrs=attrs):
                nodes = [helper.make_node(
                    "Tile" if op == "tile" else "CumSum", ["x", "a"], ["y"],
                    **attrs),
                         helper.make_node("CumSum", ["mask", "one"], ["p"])]
                graph = helper.make_graph(
                    nodes, "g",
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                   list(x.shape))],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                   None),
                     helper.make_tensor_value_info("p", TensorProto.INT64,
                                                   None)],
                    [numpy_helper.from_array(np.array(arg, np.int64), "a"),
                     numpy_helper.from_array(mask, "mask"),
                     numpy_helper.from_array(np.array(1, np.int64), "one")])
                path = os.path.join(ARGS.work, "tile_cumsum%d.onnx" % k)
                onnx.save(helper.make_model(
                    graph, opset_imports=[helper.make_opsetid("", 14)]), path)
                art = path + ".strata"
                self.compile({"path": path, "bind": []}, art)
                xp = os.path.join(ARGS.work, "tile_cumsum.x.npy")
                np.save(xp, x)
                out = art + ".out"
                r = self.run_artifact(art, {"x": xp}, out)
                self.assertEqual(r.returncode, 0, r.stderr)
                np.testing.assert_allclose(
                    np.load(os.path.join(out, "y.npy")), want, rtol=1e-5,
                    atol=1e-6)
                np.testing.assert_array_equal(
                    np.load(os.path.join(out, "p.npy")),
                    np.cumsum(mask, axis=1))

    def run_single_node_cases(self, tag, cases, inputs, opset=17):
        """Each case: (label, nodes, outputs {name: (onnx type, want)},
        constant initializers); the graph inputs are `inputs` (name ->
        array), fed at run time, so indices and values are data."""
        import onnx
        from onnx import helper, numpy_helper
        from onnx.mapping import NP_TYPE_TO_TENSOR_TYPE as TYPES
        for k, (label, nodes, outputs, consts) in enumerate(cases):
            with self.subTest(label):
                graph = helper.make_graph(
                    nodes, "g",
                    [helper.make_tensor_value_info(n, TYPES[a.dtype],
                                                   list(a.shape))
                     for n, a in inputs.items()],
                    [helper.make_tensor_value_info(n, TYPES[w.dtype], None)
                     for n, w in outputs.items()],
                    [numpy_helper.from_array(np.asarray(v), n)
                     for n, v in consts.items()])
                path = os.path.join(ARGS.work, "%s%d.onnx" % (tag, k))
                onnx.save(helper.make_model(
                    graph, opset_imports=[helper.make_opsetid("", opset)]),
                    path)
                art = path + ".strata"
                self.compile({"path": path, "bind": []}, art)
                feeds = {}
                for n, a in inputs.items():
                    feeds[n] = os.path.join(ARGS.work, "%s.%s.npy" % (tag, n))
                    np.save(feeds[n], a)
                out = art + ".out"
                r = self.run_artifact(art, feeds, out)
                self.assertEqual(r.returncode, 0, r.stderr)
                for n, want in outputs.items():
                    got = np.load(os.path.join(out, n + ".npy"))
                    self.assertEqual(got.shape, want.shape, n)
                    if want.dtype.kind == "f":
                        np.testing.assert_allclose(got, want, rtol=1e-5,
                                                   atol=1e-6, err_msg=n)
                    else:
                        np.testing.assert_array_equal(got, want, err_msg=n)

    def test_index_ops_with_data_indices_against_numpy(self):
        """GatherElements, GatherND and the scatters with indices that are
        run-time data (negative ones included), TopK and ArgMax with ties,
        integer Mod of both signs: NumPy's values."""
        from onnx import helper
        rng = np.random.default_rng(9)
        x = rng.standard_normal((3, 5)).astype(np.float32)
        x[1, 1] = x[1, 3] = x[1].max() + 1  # a tie for the largest
        ids = np.array([[0, -1, 2], [4, 1, -5], [3, 3, 0]], np.int64)
        rows = np.array([[2], [0]], np.int64)
        upd = rng.standard_normal((2, 5)).astype(np.float32)
        a = np.array([7, -7, 7, -7, 0], np.int64)
        b = np.array([3, 3, -3, -3, 5], np.int64)
        col = np.array([[-1], [1]], np.int64)
        inputs = {"x": x, "ids": ids, "rows": rows, "upd": upd, "a": a,
                  "b": b, "col": col}
        take = np.take_along_axis(x, np.where(ids < 0, ids + 5, ids), 1)
        scattered = x.copy()
        scattered[rows[:, 0]] = upd
        order = np.argsort(-x, axis=1, kind="stable")[:, :2]
        n = helper.make_node
        cases = [
            ("gather_elements", [n("GatherElements", ["x", "ids"], ["y"],
                                   axis=1)], {"y": take}, {}),
            ("gather_nd", [n("GatherND", ["x", "rows"], ["y"])],
             {"y": x[rows[:, 0]]}, {}),
            ("scatter_nd", [n("ScatterND", ["x", "rows", "upd"], ["y"])],
             {"y": scattered}, {}),
            ("scatter_elements_add",
             [n("ScatterElements", ["x", "ids", "v"], ["y"], axis=1,
                reduction="add")],
             {"y": x + np.stack([np.bincount(np.where(r < 0, r + 5, r),
                                             minlength=5) * 0.5
                                 for r in ids]).astype(np.float32)},
             {"v": np.full((3, 3), 0.5, np.float32)}),
            # index_copy_/index_add_ as torch.onnx writes them: a column
            # of row indices (data, a negative one) expanded over the rows.
            ("scatter_elements_rows",
             [n("Expand", ["col", "shape"], ["at"]),
              n("ScatterElements", ["x", "at", "r"], ["y"], axis=0)],
             {"y": np.where(np.arange(3)[:, None] == 2, 0.25,
                            np.where(np.arange(3)[:, None] == 1, -0.5,
                                     x[:, :5])).astype(np.float32)},
             {"shape": np.array([2, 5], np.int64),
              "r": np.array([[0.25] * 5, [-0.5] * 5], np.float32)}),
            ("scatter_elements_rows_add",
             [n("Expand", ["col", "shape"], ["at"]),
              n("ScatterElements", ["x", "at", "r"], ["y"], axis=0,
                reduction="add")],
             {"y": (x + np.array([[0], [-0.5], [0.25]], np.float32)
                    ).astype(np.float32)},
             {"shape": np.array([2, 5], np.int64),
              "r": np.array([[0.25] * 5, [-0.5] * 5], np.float32)}),
            ("top_k", [n("TopK", ["x", "k"], ["v", "i"], axis=1)],
             {"v": np.take_along_axis(x, order, 1), "i": order},
             {"k": np.array([2], np.int64)}),
            ("arg_max_last", [n("ArgMax", ["x"], ["i"], axis=1, keepdims=0,
                                select_last_index=1)],
             {"i": np.array([4 - np.argmax(r[::-1]) for r in x])}, {}),
            ("mod", [n("Mod", ["a", "b"], ["r"])], {"r": np.mod(a, b)}, {}),
            ("fmod", [n("Mod", ["a", "b"], ["r"], fmod=1)],
             {"r": np.fmod(a, b)}, {}),
        ]
        self.run_single_node_cases("index_ops", cases, inputs, opset=16)

    def test_rounding_one_hot_and_constant_nonzero_against_numpy(self):
        """Floor, Ceil, Round (half to even), Sign on ties, negatives and
        huge values; ReduceMin; OneHot with run-time indices (negative ones
        wrap) on a middle axis; NonZero of a constant: NumPy's values."""
        from onnx import helper
        x = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5],
                      [-1.7, -0.2, 0.0, 0.3, 1.2, 3e17]], np.float32)
        ids = np.array([[0, 3], [-1, 2]], np.int64)
        inputs = {"x": x, "ids": ids}
        mask = np.array([[0, 2, 0], [1, 0, 5]], np.int64)
        on_off = np.array([-1.0, 4.0], np.float32)
        hot = np.where(np.arange(4)[None, :, None]
                       == np.where(ids < 0, ids + 4, ids)[:, None, :],
                       on_off[1], on_off[0]).astype(np.float32)
        n = helper.make_node
        cases = [
            ("floor", [n("Floor", ["x"], ["y"])], {"y": np.floor(x)}, {}),
            ("ceil", [n("Ceil", ["x"], ["y"])], {"y": np.ceil(x)}, {}),
            ("round", [n("Round", ["x"], ["y"])], {"y": np.round(x)}, {}),
            ("sign", [n("Sign", ["x"], ["y"])], {"y": np.sign(x)}, {}),
            ("reduce_min", [n("ReduceMin", ["x"], ["y"], axes=[1],
                              keepdims=0)], {"y": x.min(axis=1)}, {}),
            ("one_hot", [n("OneHot", ["ids", "depth", "values"], ["y"],
                           axis=1)], {"y": hot},
             {"depth": np.array(4, np.int64), "values": on_off}),
            ("nonzero", [n("NonZero", ["mask"], ["y"]),
                         n("Identity", ["x"], ["xo"])],
             {"y": np.stack(np.nonzero(mask)).astype(np.int64), "xo": x},
             {"mask": mask}),
        ]
        self.run_single_node_cases("rounding", cases, inputs, opset=13)

    def test_data_dependent_nonzero_rows_against_numpy(self):
        """NonZero of data (a count of rows the data decide, held at its
        bound), as transformers' expert dispatch uses it: the (slot, token)
        pairs where a [2, 3] mask holds; the tokens' rows gathered, through
        a matrix product and a sigmoid, scaled by the mask's source at the
        pair, and put back three ways: ScatterElements 'add' onto the
        tokens (pairs share tokens, so rows that are not real would land
        on real ones), 'none' onto each pair's own slot of a tensor of ones
        (slots no real row names keep their one), through a softmax and
        a ConstantOfShape at the rows' symbolic shape, and through a Gemm
        with a bias (nn.Linear). One compiled program
        per --nonzero-rows mode (compacted, and every candidate computed)
        run with every count from 0 to the bound (6): NumPy's values."""
        from onnx import helper, numpy_helper
        import onnx
        rng = np.random.default_rng(21)
        x = rng.standard_normal((3, 3)).astype(np.float32)
        w = rng.standard_normal((3, 4)).astype(np.float32)
        c = lambda n, v: helper.make_node(
            "Constant", [], [n], value=numpy_helper.from_array(np.asarray(v)))
        n = helper.make_node
        nodes = [
            c("zero", np.float32(0.0)), c("axis0", np.array([0])),
            c("axis1", np.array([1])), c("minus1", np.array([-1])),
            c("three", np.array(3)), c("split", np.array([1, 1])),
            c("blank", np.zeros((3, 4), np.float32)),
            c("ones", np.ones((6, 4), np.float32)),
            c("blank3", np.zeros((3, 3), np.float32)),
            c("bias", np.array([0.5, -1.0, 0.25, 2.0], np.float32)),
            n("Greater", ["g", "zero"], ["mask"]),
            n("NonZero", ["mask"], ["nz"]),
            n("Transpose", ["nz"], ["nzt"], perm=[1, 0]),
            n("Split", ["nzt", "split"], ["j1", "t1"], axis=1),
            n("Squeeze", ["j1", "axis1"], ["j"]),
            n("Squeeze", ["t1", "axis1"], ["t"]),
            n("Gather", ["x", "t"], ["rows"], axis=0),
            n("MatMul", ["rows", "w"], ["h"]),
            n("Sigmoid", ["h"], ["s"]),
            n("Mul", ["j", "three"], ["j3"]),
            n("Add", ["j3", "t"], ["pair"]),
            n("Reshape", ["g", "minus1"], ["gflat"]),
            n("Gather", ["gflat", "pair"], ["scale"], axis=0),
            n("Unsqueeze", ["scale", "axis1"], ["scale2"]),
            n("Mul", ["s", "scale2"], ["upd"]),
            n("Shape", ["upd"], ["shape"]),
            n("Unsqueeze", ["t", "axis1"], ["t2"]),
            n("Expand", ["t2", "shape"], ["at_token"]),
            n("ScatterElements", ["blank", "at_token", "upd"], ["y"], axis=0,
              reduction="add"),
            n("Unsqueeze", ["pair", "axis1"], ["pair2"]),
            n("Expand", ["pair2", "shape"], ["at_pair"]),
            n("ScatterElements", ["ones", "at_pair", "upd"], ["z"], axis=0),
            n("Softmax", ["rows"], ["sm"], axis=1),
            n("Shape", ["sm"], ["smshape"]),
            n("ConstantOfShape", ["smshape"], ["one"],
              value=numpy_helper.from_array(np.array([1.0], np.float32))),
            n("Add", ["sm", "one"], ["sm1"]),
            n("Mul", ["sm1", "scale2"], ["v0"]),
            n("Expand", ["t2", "smshape"], ["at_token3"]),
            n("ScatterElements", ["blank3", "at_token3", "v0"], ["v"], axis=0,
              reduction="add"),
            # nn.Linear with a bias on the rows, as Gemm.
            n("Gemm", ["rows", "w", "bias"], ["lin"]),
            n("ScatterElements", ["blank", "at_token", "lin"], ["u"], axis=0,
              reduction="add"),
        ]
        graph = helper.make_graph(
            nodes, "rows",
            [helper.make_tensor_value_info("x", 1, [3, 3]),
             helper.make_tensor_value_info("w", 1, [3, 4]),
             helper.make_tensor_value_info("g", 1, [2, 3])],
            [helper.make_tensor_value_info(o, 1, None)
             for o in ("y", "z", "v", "u")])
        path = os.path.join(ARGS.work, "nonzero_rows.onnx")
        onnx.save(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 18)]), path)
        arts = {}
        for mode in ("compact", "bound"):
            arts[mode] = path + "." + mode + ".strata"
            r = subprocess.run([tool("strata-compile"), path, "-o",
                                arts[mode], "--mode", "forward",
                                "--nonzero-rows", mode],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
        for count, mode in ((c, m) for c in range(7)
                            for m in ("compact", "bound")):
            art = arts[mode]
            g = -np.abs(rng.standard_normal(6)).astype(np.float32) - 0.1
            g[rng.permutation(6)[:count]] *= -1
            g = g.reshape(2, 3)
            j, t = np.nonzero(g > 0)
            self.assertEqual(len(t), count)
            scale = g[j, t][:, None]
            upd = 1 / (1 + np.exp(-(x[t] @ w))) * scale
            want_y = np.zeros((3, 4), np.float32)
            np.add.at(want_y, t, upd)
            want_z = np.ones((6, 4), np.float32)
            want_z[j * 3 + t] = upd
            e = np.exp(x[t] - x[t].max(axis=1, keepdims=True))
            want_v = np.zeros((3, 3), np.float32)
            np.add.at(want_v, t, (e / e.sum(axis=1, keepdims=True) + 1) *
                      scale)
            want_u = np.zeros((3, 4), np.float32)
            np.add.at(want_u, t, x[t] @ w + np.array([0.5, -1.0, 0.25, 2.0],
                                                      np.float32))
            feeds = {}
            for name, a in (("x", x), ("w", w), ("g", g)):
                feeds[name] = os.path.join(ARGS.work, "nz%d.%s.npy" % (
                    count, name))
                np.save(feeds[name], a)
            out = os.path.join(ARGS.work, "nz%d.%s.out" % (count, mode))
            r = self.run_artifact(art, feeds, out)
            self.assertEqual(r.returncode, 0, r.stderr)
            for name, want in (("y", want_y), ("z", want_z), ("v", want_v),
                               ("u", want_u)):
                got = np.load(os.path.join(out, name + ".npy"))
                np.testing.assert_allclose(
                    got, want, rtol=1e-5, atol=1e-6,
                    err_msg="%s, %d rows, %s" % (name, count, mode))

    def test_grouped_experts_against_numpy(self):
        """Three experts routed as transformers' Mixtral exports them
        (OneHot of the selected experts permuted to [experts, slots,
        tokens], NonZero of each expert's class, its tokens' rows through
        W_e, a sigmoid and V_e, scaled by the routing weight, index_add_
        into a running total), compiled into the grouped form (checked),
        run with routings that give the experts every extent from none to
        all the rows: every token to one expert, to none (an index past
        the experts: OneHot's all-off rows, in no group), the same expert
        twice for a token, and mixes. NumPy's values, per (token, slot)."""
        from onnx import helper, numpy_helper
        import onnx
        T, K, D, H, E = 5, 2, 3, 4, 3
        n = helper.make_node
        c = lambda name, v: n("Constant", [], [name],
                              value=numpy_helper.from_array(np.asarray(v)))
        nodes = [c("depth", np.array(E)), c("onoff", np.array([0, 1])),
                 c("one", np.array([1])), c("flat", np.array([-1])),
                 c("slots", np.array(K)),
                 c("total0", np.zeros((T, D), np.float32)),
                 n("OneHot", ["sel", "depth", "onoff"], ["hot"]),
                 n("Transpose", ["hot"], ["emask"], perm=[2, 1, 0]),
                 n("Reshape", ["rw", "flat"], ["wflat"])]
        total = "total0"
        for e in range(E):
            p = "e%d_" % e
            nxt = "y" if e == E - 1 else p + "total"
            nodes += [
                c(p + "id", np.array(e)), c(p + "zero", np.array(0)),
                c(p + "id1", np.array(1)),
                n("Gather", ["emask", p + "id"], [p + "m"], axis=0),
                n("NonZero", [p + "m"], [p + "nz"]),
                n("Gather", [p + "nz", p + "zero"], [p + "slot"], axis=0),
                n("Gather", [p + "nz", p + "id1"], [p + "tok"], axis=0),
                n("Gather", ["x", p + "tok"], [p + "rows"], axis=0),
                n("MatMul", [p + "rows", "w%d" % e], [p + "h"]),
                n("Sigmoid", [p + "h"], [p + "s"]),
                n("MatMul", [p + "s", "v%d" % e], [p + "o"]),
                n("Mul", [p + "tok", "slots"], [p + "t2"]),
                n("Add", [p + "t2", p + "slot"], [p + "at"]),
                n("Gather", ["wflat", p + "at"], [p + "w"], axis=0),
                n("Unsqueeze", [p + "w", "one"], [p + "w2"]),
                n("Mul", [p + "o", p + "w2"], [p + "upd"]),
                n("Shape", [p + "upd"], [p + "shape"]),
                n("Unsqueeze", [p + "tok", "one"], [p + "tok2"]),
                n("Expand", [p + "tok2", p + "shape"], [p + "where"]),
                n("ScatterElements", [total, p + "where", p + "upd"], [nxt],
                  axis=0, reduction="add")]
            total = nxt
        vi = helper.make_tensor_value_info
        inputs = [vi("sel", 7, [T, K]), vi("x", 1, [T, D]),
                  vi("rw", 1, [T, K])]
        inputs += [vi("w%d" % e, 1, [D, H]) for e in range(E)]
        inputs += [vi("v%d" % e, 1, [H, D]) for e in range(E)]
        graph = helper.make_graph(nodes, "experts", inputs,
                                  [vi("y", 1, None)])
        path = os.path.join(ARGS.work, "grouped_experts.onnx")
        onnx.save(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 18)]), path)
        art = path + ".strata"
        r = subprocess.run([tool("strata-compile"), path, "-o", art,
                            "--mode", "forward"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("grouped products", r.stderr)
        rng = np.random.default_rng(5)
        x = rng.standard_normal((T, D)).astype(np.float32)
        rw = rng.standard_normal((T, K)).astype(np.float32)
        ws = [rng.standard_normal((D, H)).astype(np.float32)
              for _ in range(E)]
        vs = [rng.standard_normal((H, D)).astype(np.float32)
              for _ in range(E)]
        routings = [np.zeros((T, K)), np.full((T, K), E),
                    np.full((T, K), E - 1),
                    np.array([[0, 0], [1, 2], [2, 1], [E, 0], [1, E]]),
                    rng.integers(0, E + 1, size=(T, K))]
        for i, sel in enumerate(routings):
            sel = sel.astype(np.int64)
            want = np.zeros((T, D), np.float32)
            for t in range(T):
                for k in range(K):
                    e = sel[t, k]
                    if e < E:
                        h = 1 / (1 + np.exp(-(x[t] @ ws[e])))
                        want[t] += (h @ vs[e]) * rw[t, k]
            feeds = {}
            for name, a in [("sel", sel), ("x", x), ("rw", rw)] + \
                    [("w%d" % e, ws[e]) for e in range(E)] + \
                    [("v%d" % e, vs[e]) for e in range(E)]:
                feeds[name] = os.path.join(ARGS.work, "ge%d.%s.npy" % (
                    i, name))
                np.save(feeds[name], a)
            out = os.path.join(ARGS.work, "ge%d.out" % i)
            r = self.run_artifact(art, feeds, out)
            self.assertEqual(r.returncode, 0, r.stderr)
            np.testing.assert_allclose(
                np.load(os.path.join(out, "y.npy")), want, rtol=1e-5,
                atol=1e-6, err_msg="routing %d: %s" % (i, sel.tolist()))

    def test_gemm_mlp_against_numpy(self):
        import onnx
        from onnx import numpy_helper
        meta = self.models["helper_gemm_mlp"]
        art = os.path.join(ARGS.work, "gemm.strata")
        self.compile(meta, art)
        w = {i.name: numpy_helper.to_array(i)
             for i in onnx.load(meta["path"]).graph.initializer}
        x = np.random.default_rng(3).standard_normal((5, 4, 4)).astype(np.float32)
        xp = os.path.join(ARGS.work, "gemm.x.npy")
        np.save(xp, x)
        out = os.path.join(ARGS.work, "gemm.out")
        r = self.run_artifact(art, {"x": xp}, out)
        self.assertEqual(r.returncode, 0, r.stderr)
        h = np.maximum(x.reshape(5, 16) @ w["fc1.weight"].T + w["fc1.bias"], 0)
        want = h @ w["fc2.weight"].T + w["fc2.bias"]
        np.testing.assert_allclose(np.load(os.path.join(out, "logits.npy")),
                                   want, rtol=1e-4, atol=1e-6)

    def test_inspect_shows_manifest_plan_and_ops(self):
        meta = self.models["gpt2_static"]
        art = os.path.join(ARGS.work, "inspect.strata")
        self.compile(meta, art)
        r = subprocess.run([tool("strata-inspect"), art], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("input_ids: int64[2, 8]", out)
        self.assertIn("logits: float32[2, 8, 96]", out)
        self.assertIn("memory plan (device arena, by offset):", out)
        self.assertIn("wte.weight (trainable, device)", out)
        self.assertRegex(out, r"\n\s+\d+ matmul\s+")
        n = int(re.search(r"parameters: (\d+) trainable", out).group(1))
        self.assertEqual(n, sum(meta["parameters"].values()))
        with open(os.path.join(art, "manifest.txt")) as f:
            manifest = f.read()
        self.assertIn("input_ids: int64 2x8", manifest)
        self.assertIn("device:", manifest)

    def test_wrong_input_dtype_and_shape(self):
        meta = self.models["gpt2_static"]
        art = os.path.join(ARGS.work, "errors.strata")
        self.compile(meta, art)
        bad = os.path.join(ARGS.work, "bad.npy")
        np.save(bad, np.zeros((2, 8), np.int32))
        r = self.run_artifact(art, {"input_ids": bad}, ARGS.work)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("input 'input_ids' must be int64 [2, 8], got int32 [2, 8]",
                      r.stderr)
        np.save(bad, np.zeros((3, 8), np.int64))
        r = self.run_artifact(art, {"input_ids": bad}, ARGS.work)
        self.assertIn("must be int64 [2, 8], got int64 [3, 8]", r.stderr)
        r = self.run_artifact(art, {}, ARGS.work)
        self.assertIn("input 'input_ids' (int64 [2, 8]) was not given",
                      r.stderr)
        np.save(bad, np.full((2, 8), 500, np.int64))
        r = self.run_artifact(art, {"input_ids": bad}, ARGS.work)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("gather index 500 out of range", r.stderr)

    def test_device_budget_is_enforced(self):
        meta = self.models["gpt2_static"]
        art = os.path.join(ARGS.work, "budget.strata")
        self.compile(meta, art)
        ids = os.path.join(ARGS.work, "budget.ids.npy")
        np.save(ids, np.zeros((2, 8), np.int64))
        r = self.run_artifact(art, {"input_ids": ids}, ARGS.work,
                              "--device-mem", "1KiB")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("bytes of device memory; the budget is 1024", r.stderr)

    def test_weights_off_the_device_give_the_same_logits(self):
        """Under a device budget below a forward program's weights the
        planner moves them to the host and the SSD, and the logits are
        bit-identical."""
        meta = self.models["gpt2_static"]
        base = os.path.join(ARGS.work, "offload_base.strata")
        self.compile(meta, base)
        with open(os.path.join(base, "manifest.txt")) as f:
            device = re.search(r"\n  device: .*", f.read()).group(0)
        need = sum(int(m) for m in re.findall(r"\((\d+) bytes\)", device))
        ids = os.path.join(ARGS.work, "offload.ids.npy")
        np.save(ids, np.random.default_rng(5).integers(
            0, 96, size=meta["output_shape"][:2], dtype=np.int64))
        outs = {}
        for tag, extra in (("base", []),
                           ("budget", ["--gpu-mem", str(need * 2 // 3),
                                       "--cpu-mem", "8KiB", "--ssd-dir",
                                       os.path.join(ARGS.work, "ssd_fwd")])):
            art = os.path.join(ARGS.work, "offload_%s.strata" % tag)
            cmd = [tool("strata-compile"), meta["path"], "-o", art,
                   "--mode", "forward"] + extra
            for b in meta["bind"]:
                cmd += ["--input-shape", b]
            r = subprocess.run(cmd, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = os.path.join(ARGS.work, "offload_%s.out" % tag)
            r = self.run_artifact(art, {"input_ids": ids}, out)
            self.assertEqual(r.returncode, 0, r.stderr)
            outs[tag] = np.load(os.path.join(out, "logits.npy"))
        np.testing.assert_array_equal(outs["budget"], outs["base"])
        r = subprocess.run([tool("strata-inspect"),
                            os.path.join(ARGS.work, "offload_budget.strata")],
                           capture_output=True, text=True)
        row = re.search(r"\n  parameters +(\d+) +(\d+) +(\d+)\n", r.stdout)
        self.assertGreater(int(row.group(2)) + int(row.group(3)), 0, r.stdout)

    def test_damaged_artifacts_are_refused(self):
        meta = self.models["gpt2_static"]
        good = os.path.join(ARGS.work, "good.strata")
        self.compile(meta, good)
        ids = os.path.join(ARGS.work, "damage.ids.npy")
        np.save(ids, np.zeros((2, 8), np.int64))

        def damaged(name, edit):
            d = os.path.join(ARGS.work, name)
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(good, d)
            edit(d)
            return self.run_artifact(d, {"input_ids": ids}, ARGS.work)

        def truncate(path, keep):
            with open(path, "rb") as f:
                data = f.read()
            with open(path, "wb") as f:
                f.write(data[:keep(len(data))])

        def flip(path, at):
            with open(path, "r+b") as f:
                f.seek(at(os.path.getsize(path)))
                b = f.read(1)
                f.seek(-1, 1)
                f.write(bytes([b[0] ^ 0x40]))

        r = damaged("trunc_plan", lambda d: truncate(
            os.path.join(d, "plan.bin"), lambda n: n - 10))
        self.assertIn("truncated", r.stderr)
        r = damaged("flip_plan", lambda d: flip(
            os.path.join(d, "plan.bin"), lambda n: n - 5))
        self.assertIn("payload checksum mismatch", r.stderr)
        r = damaged("version", lambda d: flip(
            os.path.join(d, "plan.bin"), lambda n: 9))
        self.assertIn("corrupted header", r.stderr)
        r = damaged("flip_params", lambda d: flip(
            os.path.join(d, "params.bin"), lambda n: 0))
        self.assertIn("is corrupted (checksum mismatch)", r.stderr)
        r = damaged("trunc_params", lambda d: truncate(
            os.path.join(d, "params.bin"), lambda n: n // 2))
        self.assertIn("truncated or from another compile", r.stderr)
        r = damaged("no_params", lambda d: os.remove(
            os.path.join(d, "params.bin")))
        self.assertIn("cannot open", r.stderr)
        r = self.run_artifact(os.path.join(ARGS.work, "missing.strata"),
                              {"input_ids": ids}, ARGS.work)
        self.assertIn("is not an artifact directory", r.stderr)


def main():
    global ARGS
    ARGS = harness.parse_args()
    harness.run_tests(verbosity=2)


if __name__ == "__main__":
    main()
