#!/usr/bin/env python3
"""Backends agree bit for bit: every plan shape the training suite uses
(each tier placement of parameters, states, activations and gradients, with
checkpoint and resume; gradient accumulation; LOMO; loss scaling; clipping;
forward plans) trained or run on the CPU backend and on the asynchronous
test backend (one thread per queue, device memory the host cannot touch,
CUDA event semantics, random delays under several seeds) gives the same
losses, gradient norms, exported weights and outputs, byte for byte. The
CUDA backend joins when a GPU is present (STRATA_TEST_CUDA=1).

    test_backends.py --bin BUILD/bin --work DIR
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
import generate  # noqa: E402
import harness  # noqa: E402
from harness import run, tool  # noqa: E402

ARGS = None
# (backend, chaos seed): the reference first.
BACKENDS = [("cpu", None), ("async-test", "1"), ("async-test", "977")]
if os.environ.get("STRATA_TEST_CUDA") == "1":
    BACKENDS.append(("cuda", None))


class Backends(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = generate.generate(ARGS.work, ["gpt2_dynamic"])[0]
        b, t = cls.model["output_shape"][:2]
        rng = np.random.default_rng(5)
        rows = rng.integers(0, 96, size=(4 * b, t + 1), dtype=np.int64)
        cls.data = os.path.join(ARGS.work, "data.npy")
        np.save(cls.data, rows)

    def compile(self, out, *flags, model=None):
        model = model or self.model
        shutil.rmtree(out, ignore_errors=True)
        cmd = [tool("strata-compile"), model["path"], "-o", out]
        for b in model["bind"]:
            cmd += ["--input-shape", b]
        run(cmd + list(flags))

    def train_everywhere(self, tag, flags, steps=3, resume_at=None,
                         model=None, data=None):
        """Trains `flags`' plan on every backend; returns per backend the
        --log-json rows and the exported weights' bytes."""
        results = []
        for backend, seed in BACKENDS:
            art = os.path.join(ARGS.work, "%s.%s%s.strata" %
                               (tag, backend, seed or ""))
            ssd = art + ".ssd"
            os.makedirs(ssd, exist_ok=True)
            self.compile(art, "--ssd-dir", ssd, *flags, model=model)
            env = dict(os.environ, STRATA_BACKEND=backend)
            if seed:
                env["STRATA_ASYNC_CHAOS"] = seed
            log = art + ".log"
            base = [tool("strata-run"), art, "--data", data or self.data,
                    "--log-json", log, "--quiet"]
            if resume_at:
                self.check(base + ["--steps", str(resume_at)], env)
                self.check(base + ["--steps", str(steps), "--resume"], env)
            else:
                self.check(base + ["--steps", str(steps)], env)
            with open(log) as f:
                rows = [json.loads(line) for line in f]
            for row in rows:  # Timings differ; numbers must not.
                for key in list(row):
                    if key.endswith("_s") or "ms" in key or "time" in key:
                        del row[key]
            out = art + ".onnx"
            run([tool("strata-export"), art, "-o", out])
            import onnx
            weights = {i.name: i.raw_data or bytes(str(i), "utf8")
                       for i in onnx.load(out).graph.initializer}
            results.append(((backend, seed), rows, weights))
        return results

    def check(self, cmd, env):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise AssertionError("%s (STRATA_BACKEND=%s) failed:\n%s" %
                                 (" ".join(cmd), env["STRATA_BACKEND"],
                                  r.stderr))

    def assert_identical(self, results):
        # The training's numbers; not how CPU updates got them (whether a
        # step speculated, how many updates it redid: --speculate-updates).
        def numbers(rows):
            return [{k: v for k, v in row.items()
                     if k not in ("speculated", "redone_updates")}
                    for row in rows]
        (ref, rows, weights) = results[0]
        self.assertTrue(rows)
        for who, r, w in results[1:]:
            self.assertEqual(numbers(r), numbers(rows),
                             "%s vs %s: logs differ" % (who, ref))
            self.assertEqual(sorted(w), sorted(weights))
            for k in weights:
                self.assertTrue(w[k] == weights[k],
                                "%s vs %s: weight %s differs" % (who, ref, k))

    def test_every_tier_placement_with_resume(self):
        for params, states, acts, grads in (
                ("device", "device", "device", "device"),
                ("ssd", "host", "device", "host"),
                ("host", "ssd", "host", "ssd"),
                ("device", "device", "ssd", "device"),
                ("device", "ssd", "recompute", "host"),
                ("ssd", "ssd", "ssd", "ssd")):
            with self.subTest(tiers=(params, states, acts, grads)):
                tag = "tier_" + "_".join((params, states, acts, grads))
                self.assert_identical(self.train_everywhere(
                    tag, ["--optimizer", "adamw", "--lr", "0.01",
                          "--clip-grad-norm", "1.0",
                          "--place-params", params, "--place-states", states,
                          "--place-activations", acts,
                          "--place-gradients", grads],
                    steps=4, resume_at=2))

    def test_routed_experts_in_every_tier(self):
        """A decoder whose MLPs route tokens to 4 experts by NonZero (the
        rows held at their bound, compacted, the products stopping at the
        count): its training under tight budgets (activations, the counts
        and orders among them, swapped or recomputed; parameters and states
        off the device) and all in memory, on every backend, bit for bit."""
        import synthetic
        desc = synthetic.write(ARGS.work, "moe", dict(
            family="llama", layers=2, dim=32, heads=4, kv_heads=2, hidden=64,
            vocab=96, experts=4, top_k=2), 2, 16)
        model = {"path": os.path.join(ARGS.work, "moe.onnx"), "bind": []}
        rng = np.random.default_rng(11)
        data = os.path.join(ARGS.work, "moe.data.npy")
        np.save(data, rng.integers(0, 96, size=(8, 17), dtype=np.int64))
        init = []
        for rule in desc["synthetic_init"]:
            init += ["--synthetic-init", rule]
        common = ["--optimizer", "adamw", "--lr", "0.01"] + init
        reference = self.train_everywhere("moe_mem", common, steps=4,
                                          model=model, data=data)
        self.assert_identical(reference)
        for tag, flags in (
                ("moe_ssd", ["--place-params", "host", "--place-states",
                             "ssd", "--place-activations", "ssd"]),
                ("moe_recompute", ["--place-activations", "recompute",
                                   "--place-gradients", "host"])):
            with self.subTest(tag):
                results = self.train_everywhere(tag, common + flags, steps=4,
                                                model=model, data=data)
                self.assert_identical([reference[0]] + results)

    def test_accumulation_lomo_and_loss_scaling(self):
        for tag, flags in (
                ("accum_host", ["--optimizer", "momentum", "--accumulate",
                                "2", "--place-gradients", "host"]),
                ("accum_ssd", ["--optimizer", "adamw", "--accumulate", "2",
                               "--place-states", "ssd"]),
                ("lomo", ["--optimizer", "lomo", "--lr", "0.01"]),
                ("adalomo", ["--optimizer", "adalomo", "--lr", "0.01"]),
                ("adalomo", ["--optimizer", "adalomo", "--lr", "0.01"]),
                ("loss_scale", ["--optimizer", "adamw", "--loss-scale",
                                "dynamic", "--loss-scale-init", "1e38"])):
            with self.subTest(plan=tag):
                self.assert_identical(self.train_everywhere(tag, flags))

    def test_updates_on_the_cpu_match_updates_on_the_device(self):
        """--place-updates cpu (the gradient stored to the host, the update
        on the CPU queue on host-resident parameters and states) trains bit
        for bit like --place-updates device (fetch, update on the device,
        write back), on every backend, for SGD, momentum, LOMO, AdaLomo and
        AdamW with and without clipping by the previous step's norm, and
        exact clipping;
        with states on the SSD too (read and written back by the CPU job);
        with accumulation over micro-batches (the accumulator, a state,
        updated and cleared where it lives); with small updates grouped
        into CPU jobs and with one job per update."""
        host = ["--place-params", "host", "--place-states", "host"]
        ssd = ["--place-params", "host", "--place-states", "ssd"]
        for tag, flags in (
                ("ssd_adamw", ssd + ["--optimizer", "adamw", "--lr", "0.01",
                                     "--clip-grad-norm", "0.5",
                                     "--clip-mode", "previous-step"]),
                ("ssd_momentum", ssd + ["--optimizer", "momentum",
                                        "--lr", "0.05"]),
                ("ssd_adalomo", ssd + ["--optimizer", "adalomo",
                                       "--lr", "0.01"]),
                # Parameters on the SSD too: staged and written back with
                # the states.
                ("ssd_params_momentum", ["--place-params", "ssd",
                                         "--place-states", "ssd",
                                         "--optimizer", "momentum",
                                         "--lr", "0.05"]),
                ("ssd_accum_adamw", ssd + ["--optimizer", "adamw",
                                           "--lr", "0.01",
                                           "--accumulate", "2"]),
                ("accum_momentum", ["--optimizer", "momentum", "--lr", "0.05",
                                    "--accumulate", "2"]),
                ("lomo", ["--optimizer", "lomo", "--lr", "0.01"]),
                ("adalomo", ["--optimizer", "adalomo", "--lr", "0.01"]),
                ("sgd", ["--optimizer", "sgd", "--lr", "0.05",
                         "--weight-decay", "0.01"]),
                ("momentum", ["--optimizer", "momentum", "--lr", "0.05"]),
                ("adamw", ["--optimizer", "adamw", "--lr", "0.01",
                           "--weight-decay", "0.01"]),
                ("adamw_prev", ["--optimizer", "adamw", "--lr", "0.01",
                                "--clip-grad-norm", "0.5",
                                "--clip-mode", "previous-step"]),
                ("adamw_exact", ["--optimizer", "adamw", "--lr", "0.01",
                                 "--clip-grad-norm", "0.5"]),
                # The updates above share CPU jobs (the test model's
                # tensors are small); these run one job per update.
                ("ssd_adamw_jobs", ssd + ["--optimizer", "adamw",
                                          "--lr", "0.01",
                                          "--cpu-job-bytes", "0"]),
                ("momentum_jobs", ["--optimizer", "momentum", "--lr", "0.05",
                                   "--cpu-job-bytes", "0"]),
                # Dynamic loss scaling from a scale that overflows (beyond
                # fp32: the first step is skipped, the next ones, at half of
                # fp32's largest power of two, apply): the
                # skipped steps leave no parameter half-updated, with the
                # updates after the backward pass and with them fused into
                # the second backward pass of the two-pass scheme.
                ("loss_scale", ["--optimizer", "adamw", "--lr", "0.01",
                                "--loss-scale", "dynamic",
                                "--loss-scale-init", "1e39"]),
                ("loss_scale_fused", ["--optimizer", "adamw", "--lr", "0.01",
                                      "--loss-scale", "dynamic",
                                      "--loss-scale-init", "1e39",
                                      "--fuse-updates"])):
            place = [] if tag.startswith("ssd") else host
            with self.subTest(optimizer=tag):
                device = self.train_everywhere(
                    "upd_dev_" + tag, place + flags + ["--place-updates",
                                                      "device"])
                cpu = self.train_everywhere(
                    "upd_cpu_" + tag, place + flags + ["--place-updates",
                                                      "cpu"])
                self.assert_identical(device + cpu)
                if tag.startswith("loss_scale"):
                    skipped = [row["skipped"] for row in cpu[0][1]]
                    self.assertTrue(skipped[0] and not all(skipped), skipped)
                # The plan says where each update runs.
                art = os.path.join(ARGS.work, "upd_cpu_%s.cpu.strata" % tag)
                ops = run([tool("strata-inspect"), art, "--ops"]).stdout
                self.assertRegex(ops, r"update_\w+ .*\[cpu")
                # And in how many CPU jobs (one per update when asked).
                info = run([tool("strata-inspect"), art]).stdout
                self.assertRegex(info, r"optimizer on the CPU: (\d+) updates "
                                       r"in %s CPU jobs? " %
                                       (r"\1" if tag.endswith("_jobs")
                                        else r"\d+"))
                art = os.path.join(ARGS.work, "upd_dev_%s.cpu.strata" % tag)
                ops = run([tool("strata-inspect"), art, "--ops"]).stdout
                self.assertNotRegex(ops, r"update_\w+ .*\[cpu")

    def test_offload_remarks(self):
        """The compiler says how many updates moved to the CPU and overlap
        the backward pass, and why the others could not."""
        host = ["--place-params", "host", "--place-states", "host",
                "--place-updates", "cpu", "--optimizer", "adamw"]
        cases = (
            # One job per update: all but the update of the gradient
            # computed last (the embedding's) overlap the backward pass.
            (["--cpu-job-bytes", "0"],
             r"(\d+) of \1 updates run on the CPU; [1-9]\d* overlap "
             r"the backward pass; 1 after it: their gradients are final "
             r"only when it ends"),
            # The test model's tensors are far smaller than a hand-off is
            # worth: grouped into fewer jobs than updates.
            ([], r"(\d+) of \1 updates run on the CPU; .*small ones grouped "
                 r"with the next: [1-9]\d* CPU jobs?"),
            # Exact clipping: they speculate (all but the last gradient's,
            # which nothing of the backward pass follows), or wait.
            (["--clip-grad-norm", "1.0"],
             r"(\d+) of \1 updates run on the CPU; [1-9]\d* overlap the "
             r"backward pass \([1-9]\d* speculatively"),
            (["--clip-grad-norm", "1.0", "--speculate-updates=false"],
             r"(\d+) of \1 updates run on the CPU; 0 overlap the backward "
             r"pass; \1 start only after it: their scale depends on every "
             r"gradient"),
            # The accumulator is a state in host memory: updated (and
            # cleared) there.
            (["--accumulate", "2"], r"(\d+) of \1 updates run on the CPU; "
                                    r"0 overlap"),
            (["--place-states", "ssd"], r"(\d+) of \1 updates run on the "
                                        r"CPU"),
            (["--place-params", "device"], r"stay on the device: its "
                                           r"parameter lives in device memory"),
            (["--optimizer", "adalomo", "--cpu-job-bytes", "0"],
             r"(\d+) of \1 updates run on the CPU; [1-9]\d* overlap"))
        for extra, want in cases:
            with self.subTest(flags=extra):
                out = os.path.join(ARGS.work, "remarks.strata")
                shutil.rmtree(out, ignore_errors=True)
                ssd = out + ".ssd"
                os.makedirs(ssd, exist_ok=True)
                cmd = [tool("strata-compile"), self.model["path"], "-o", out,
                       "--ssd-dir", ssd]
                for b in self.model["bind"]:
                    cmd += ["--input-shape", b]
                r = run(cmd + host + extra)
                self.assertRegex(r.stderr, want)

    def test_plan_only_artifact_with_synthetic_parameters(self):
        """--synthetic-params stores each trainable tensor's mean and
        deviation instead of its values; every machine generates the same
        values at load, with the source's statistics, and trains the same
        on every backend."""
        import onnx
        from onnx import numpy_helper
        real = os.path.join(ARGS.work, "real.strata")
        self.compile(real)
        results = self.train_everywhere("synthetic", ["--synthetic-params"])
        self.assert_identical(results)
        syn = os.path.join(ARGS.work, "synthetic.cpu.strata")
        self.assertLess(os.path.getsize(os.path.join(syn, "params.bin")),
                        0.1 * os.path.getsize(os.path.join(real,
                                                           "params.bin")))
        r = run([tool("strata-inspect"), syn])
        self.assertIn("synthetic:", r.stdout)
        for row in results[0][1]:
            self.assertTrue(np.isfinite(row["loss"]))
        # Before training: the generated values follow the source's.
        fresh = os.path.join(ARGS.work, "fresh.strata")
        self.compile(fresh, "--synthetic-params")
        out = fresh + ".onnx"
        r = run([tool("strata-export"), fresh, "-o", out])
        self.assertIn("--synthetic-params", r.stderr)
        src = {i.name: numpy_helper.to_array(i) for i in
               onnx.load(self.model["path"]).graph.initializer}
        gen = {i.name: numpy_helper.to_array(i) for i in
               onnx.load(out).graph.initializer}
        checked = 0
        for name, want in src.items():
            if name not in gen or want.dtype != np.float32 or want.size < 64:
                continue
            got = gen[name]
            self.assertFalse(np.array_equal(got, want), name)
            # Within four standard errors of a sample of this size.
            sd, n = float(want.std()), want.size
            self.assertAlmostEqual(float(got.mean()), float(want.mean()),
                                   delta=4 * sd / np.sqrt(n) + 1e-6)
            self.assertAlmostEqual(float(got.std()), sd,
                                   delta=4 * sd / np.sqrt(n) + 1e-6)
            checked += 1
        self.assertGreater(checked, 3)

    def test_forward_outputs(self):
        import onnx
        name = onnx.load(self.model["path"],
                         load_external_data=False).graph.input[0].name
        ids = os.path.join(ARGS.work, "ids.npy")
        b, t = self.model["output_shape"][:2]
        np.save(ids, np.load(self.data)[:b, :t])
        outs = []
        for backend, seed in BACKENDS:
            art = os.path.join(ARGS.work, "fwd.%s%s.strata" %
                               (backend, seed or ""))
            ssd = art + ".ssd"
            os.makedirs(ssd, exist_ok=True)
            self.compile(art, "--mode", "forward", "--place-params", "ssd",
                         "--ssd-dir", ssd)
            out = art + ".out"
            env = dict(os.environ, STRATA_BACKEND=backend)
            if seed:
                env["STRATA_ASYNC_CHAOS"] = seed
            self.check([tool("strata-run"), art, "--input",
                        name + "=" + ids, "--output-dir",
                        out, "--quiet"], env)
            files = {}
            for f in sorted(os.listdir(out)):
                with open(os.path.join(out, f), "rb") as fh:
                    files[f] = fh.read()
            outs.append(files)
        for o in outs[1:]:
            self.assertEqual(o, outs[0])


if __name__ == "__main__":
    ARGS = harness.parse_args()
    harness.run_tests()
