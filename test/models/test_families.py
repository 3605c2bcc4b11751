"""Model families from HuggingFace transformers against PyTorch.

For every family families.py knows (decoders of 14 families, an
encoder-decoder, an encoder, a mixture-of-experts decoder of fixed shapes
and transformers' Mixtral and Qwen2-MoE, which route by NonZero), exported at
opsets 14 and 17 with static and with dynamic axes:

* the logits of two batches (--mode forward; the second is not the one the
  export traced, so data-dependent routing differs) against PyTorch's,
  rtol 1e-4;
* 3 steps of SGD and of AdamW: the losses against PyTorch's (rtol 1e-4) and
  the weights after them (through strata-export) against PyTorch's.

The models are generated at test time by families.py, in the environment
`scripts/install-deps.sh --models` makes (.venv-models: Debian's PyTorch and
a pinned transformers). A table of the errors is written to
WORK/families.md.

    test_families.py --bin BUILD/bin --work DIR --python .venv-models/bin/python
                     [--families gpt2,llama]
"""

import json
import os
import shutil
import subprocess
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402
from harness import run, tool  # noqa: E402

ALL = ["gpt2", "gpt_neox", "llama", "mistral", "qwen2", "gemma", "phi",
       "stablelm", "falcon", "opt", "bloom", "gptj", "codegen",
       "gpt_bigcode", "bert", "t5", "moe", "mixtral", "qwen2_moe"]
RTOL = 1e-4
ARGS = None
ROWS = []


def rel_err(got, want):
    return float(np.max(np.abs(got - want) / np.abs(want)))


def tolerance_used(got, want, atol=1e-5):
    """The largest error as a fraction of what assert_allclose allows
    (rtol 1e-4, atol): 1 or less passes."""
    return float(np.max(np.abs(got - want) / (atol + RTOL * np.abs(want))))


class Families(unittest.TestCase):
    def check_family(self, family):
        work = os.path.join(ARGS.work, family)
        shutil.rmtree(work, ignore_errors=True)
        run([ARGS.python, os.path.join(HERE, "families.py"), "--family",
             family, "--work", work])
        with open(os.path.join(work, "meta.json")) as f:
            meta = json.load(f)
        b, t, steps = meta["batch"], meta["seq"], meta["steps"]
        bind = ["--input-shape", "input_ids=%dx%d" % (b, t)]
        freeze = []
        for name in meta["frozen"]:
            freeze += ["--freeze", name]
        want_logits = np.load(os.path.join(work, "logits.npy"))
        want_logits2 = np.load(os.path.join(work, "logits2.npy"))
        for export in meta["exports"]:
            label = "%s opset %d %s" % (family, export["opset"],
                                        export["axes"])
            row = {"family": family, "opset": export["opset"],
                   "axes": export["axes"]}
            with self.subTest(label):
                art = export["path"] + ".fwd.strata"
                run([tool("strata-compile"), export["path"], "-o", art,
                     "--mode", "forward"] + bind)
                row["logits"] = 0.0
                for ids, want in (("ids.npy", want_logits),
                                  ("ids2.npy", want_logits2)):
                    out = art + "." + ids + ".out"
                    run([tool("strata-run"), art, "--input",
                         "input_ids=" + os.path.join(work, ids),
                         "--output-dir", out, "--quiet"])
                    got = np.load(os.path.join(out, "logits.npy"))
                    self.assertEqual(got.shape, want.shape)
                    row["logits"] = max(row["logits"],
                                        tolerance_used(got, want))
                    np.testing.assert_allclose(got, want, rtol=RTOL,
                                               atol=1e-5,
                                               err_msg=label + " " + ids)
                for opt, flags in meta["optimizers"].items():
                    self.check_training(work, export, opt, flags,
                                        bind + freeze, steps, row, label)
            ROWS.append(row)
        if meta.get("aux"):
            with self.subTest(family + " router aux loss"):
                self.check_router_aux(work, meta["aux"], bind, freeze)

    def check_router_aux(self, work, aux, bind, freeze):
        """The model's own loss with the load-balancing term: its router
        logits as outputs (PyTorch's), the term's gradient reaching every
        router weight (PyTorch's), and 3 SGD steps of the whole loss
        (PyTorch's losses)."""
        art = aux["aux"] + ".grad.strata"
        run([tool("strata-compile"), aux["aux"], "-o", art, "--mode", "grad",
             "--loss", "output"] + bind + freeze)
        out = art + ".out"
        run([tool("strata-run"), art, "--input",
             "input_ids=" + os.path.join(work, "ids.npy"), "--output-dir",
             out, "--quiet"])
        np.testing.assert_allclose(
            np.load(os.path.join(out, "loss.npy")),
            np.load(os.path.join(work, "aux.loss.npy")), rtol=RTOL,
            err_msg="load-balancing loss")
        fwd = aux["aux"] + ".fwd.strata"
        run([tool("strata-compile"), aux["aux"], "-o", fwd, "--mode",
             "forward"] + bind)
        run([tool("strata-run"), fwd, "--input",
             "input_ids=" + os.path.join(work, "ids.npy"), "--output-dir",
             fwd + ".out", "--quiet"])
        for i, name in enumerate(aux["routers"]):
            np.testing.assert_allclose(
                np.load(os.path.join(fwd + ".out", name + ".npy")),
                np.load(os.path.join(work, "aux.router%d.npy" % i)),
                rtol=RTOL, atol=1e-5, err_msg="router logits " + name)
        grads = np.load(os.path.join(work, "aux.grad.npz"))
        for name in grads.files:
            got = np.load(os.path.join(out, "grad:%s.npy" % name))
            want = grads[name]
            self.assertGreater(float(np.abs(want).max()), 0, name)
            np.testing.assert_allclose(
                got, want, rtol=RTOL, atol=1e-4 * float(np.abs(want).max()),
                err_msg="d load-balancing loss / d " + name)
        art = aux["train"] + ".sgd.strata"
        run([tool("strata-compile"), aux["train"], "-o", art, "--loss",
             "output", "--labels", "same", "--optimizer", "sgd", "--lr",
             str(aux["lr"])] + bind + freeze)
        log = art + ".log.jsonl"
        run([tool("strata-run"), art, "--data",
             os.path.join(work, "data.npy"), "--steps", "3", "--log-json",
             log, "--quiet", "--no-checkpoint"])
        with open(log) as f:
            got = np.array([json.loads(line)["loss"] for line in f])
        np.testing.assert_allclose(
            got, np.load(os.path.join(work, "aux.sgd.losses.npy")),
            rtol=RTOL, err_msg="SGD losses with the load-balancing term")

    def check_training(self, work, export, opt, flags, extra, steps, row,
                       label):
        art = "%s.%s.strata" % (export["path"], opt)
        shutil.rmtree(art, ignore_errors=True)
        run([tool("strata-compile"), export["path"], "-o", art,
             "--optimizer", opt] + flags + extra)
        log = art + ".log.jsonl"
        run([tool("strata-run"), art, "--data",
             os.path.join(work, "data.npy"), "--steps", str(steps),
             "--log-json", log, "--quiet"])
        with open(log) as f:
            got = np.array([json.loads(line)["loss"] for line in f])
        want = np.load(os.path.join(work, opt + ".losses.npy"))
        row[opt] = rel_err(got, want)
        np.testing.assert_allclose(got, want, rtol=RTOL,
                                   err_msg="%s %s losses" % (label, opt))
        import onnx
        from onnx import numpy_helper
        exported = art + ".export.onnx"
        run([tool("strata-export"), art, "-o", exported])
        weights = {i.name: numpy_helper.to_array(i)
                   for i in onnx.load(exported).graph.initializer}
        ref = np.load(os.path.join(work, opt + ".weights.npz"))
        noise = np.load(os.path.join(work, opt + ".noise.npz"))
        lr = float(flags[flags.index("--lr") + 1])
        checked = 0
        for name in ref.files:
            if name not in weights:
                continue  # A parameter the traced graph does not use.
            w, r, mask = weights[name], ref[name], noise[name]
            # Entries whose gradient is rounding noise move by up to a step
            # in a direction neither side controls (Adam normalises noise).
            self.assertTrue(np.all(np.abs(w - r)[mask] <= 2 * steps * lr),
                            "%s %s %s" % (label, opt, name))
            np.testing.assert_allclose(
                np.where(mask, r, w), r, rtol=RTOL,
                atol=(1e-3 * steps * lr if opt == "adamw" else
                      RTOL * 0.1 * max(float(np.abs(r).max()), 1e-12)),
                err_msg="%s: %s after %d %s steps" % (label, name, steps,
                                                      opt))
            checked += 1
        self.assertGreater(checked, 0, "no trained weight was exported")


def add_tests(families):
    for family in families:
        def test(self, family=family):
            self.check_family(family)
        setattr(Families, "test_" + family, test)


def write_table(path):
    lines = ["| family | opset | axes | logits: error / tolerance | SGD "
             "loss rel err | AdamW loss rel err |", "|---|---|---|---|---|---|"]
    for r in ROWS:
        cells = [r["family"], str(r["opset"]), r["axes"]]
        for k in ("logits", "sgd", "adamw"):
            cells.append("%.1e" % r[k] if k in r else "FAILED")
        lines.append("| " + " | ".join(cells) + " |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    global ARGS

    def add_arguments(parser):
        parser.add_argument("--python", required=True,
                            help="the Python of install-deps.sh --models")
        parser.add_argument("--families", default=",".join(ALL))

    ARGS = harness.parse_args(add_arguments)
    probe = subprocess.run([ARGS.python, "-c", "import transformers"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print("test_families: %s cannot import transformers; run "
              "scripts/install-deps.sh --models\n%s" % (ARGS.python,
                                                       probe.stderr),
              file=sys.stderr)
        return 1
    add_tests(ARGS.families.split(","))
    result = unittest.main(argv=[sys.argv[0], "-v"] + ARGS.unittest_argv,
                           exit=False).result
    write_table(os.path.join(ARGS.work, "families.md"))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
