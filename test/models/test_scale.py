#!/usr/bin/env python3
"""Models whose weights were never written (test/models/synthetic.py: the
parameters are a sparse external data file):

* `strata-compile --emit=plan-report` plans them without reading the
  weights (the compiler's peak RSS stays below the data's size), creates
  nothing in the SSD directory, and reports the same plan an artifact
  compiled with the same options records (its memory report and predicted
  step are identical); its matrix-product work per step is the count from
  the model's shape.
* `--synthetic-init` generates fresh parameters at load instead of reading
  them: norm scales 1, biases 0, matrices uniform with the rule's
  deviation (read back through strata-export), and the model trains.
* A malformed rule is an error that names it.

    test_scale.py --bin BUILD/bin --work DIR
"""

import os
import re
import subprocess
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import synthetic  # noqa: E402
from harness import run, tool  # noqa: E402

ARGS = None


def peak_rss(cmd):
    """Runs `cmd`, which must succeed; returns (stdout, its peak RSS in
    bytes)."""
    errpath = os.path.join(ARGS.work, "stderr.txt")
    out, _, rss, code = harness.run_measured(cmd, errpath)
    if code != 0:
        with open(errpath) as f:
            raise AssertionError("%s failed:\n%s" % (" ".join(cmd), f.read()))
    return out, rss


class Scale(unittest.TestCase):
    RULES = ["--synthetic-init=" + r for r in synthetic.INIT_RULES]
    # A 12-layer LLaMA small enough to plan in seconds under tight budgets.
    LLAMA12 = dict(family="llama", layers=12, dim=128, heads=4, kv_heads=4,
                   hidden=352, vocab=512)

    def skip_without_glpk(self, what):
        """Skips the test where the compiler was built without GLPK (the
        ASan leg): `what` is what there is then nothing of."""
        if os.environ.get("STRATA_EXPECT_NO_GLPK") == "1":
            self.skipTest("the compiler was built without GLPK: no " + what)

    def work(self, name):
        return os.path.join(ARGS.work, name)

    def test_plan_report_reads_no_weights_and_matches_the_artifact(self):
        # ~90M parameters: 360 MB of weights that exist only as a hole.
        cfg = dict(family="llama", layers=2, dim=1024, heads=8, kv_heads=8,
                   hidden=2816, vocab=32000)
        batch, seq = 2, 128
        desc = synthetic.write(ARGS.work, "plan-llama", cfg, batch, seq)
        model = self.work("plan-llama.onnx")
        ssd = self.work("plan-ssd")
        budgets = ["--gpu-mem", "320MiB", "--cpu-mem", "400MiB",
                   "--ssd-dir", ssd, "--optimizer", "adamw",
                   "--planner-evaluations", "30"]
        report, rss = peak_rss([tool("strata-compile"), model,
                                "--emit=plan-report"] + budgets)
        self.assertLess(rss, desc["data_bytes"] // 2,
                        "the plan-only compile touched the weights")
        self.assertFalse(os.path.exists(ssd),
                         "a plan-only compile must create nothing")
        # Mixed precision's bf16 weight copies are made when an artifact
        # is written, not by the compile.
        _, rss16 = peak_rss([tool("strata-compile"), model,
                             "--emit=plan-report", "--precision", "bf16"] +
                            budgets)
        self.assertLess(rss16, desc["data_bytes"] // 2,
                        "the bf16 plan-only compile touched the weights")
        for line in ("no weights were read or written",
                     "tokens per step: %d" % (batch * seq),
                     "memory per tier (planned):", "lower bound:",
                     "set by", "tokens/s", "model TFLOP/s"):
            self.assertIn(line, report)
        for tier in ("device", "host", "ssd"):
            self.assertRegex(report, r"\n  %s +\d" % tier)

        # The work per step, from the shape alone: every weight matrix
        # (not the embedding lookup) costs 6 FLOP per token (forward and
        # the two gradients); causal attention 7*B*H*T^2*hd per layer
        # (2 in the forward, 5 in the gradient, half the scores hidden).
        dim, hidden, layers = cfg["dim"], cfg["hidden"], cfg["layers"]
        matrices = layers * (4 * dim * dim + 3 * dim * hidden) + \
            dim * cfg["vocab"]
        flops = 6 * batch * seq * matrices + \
            layers * 7 * batch * dim * seq * seq
        got = float(re.search(r"matrix-product work per step: ([\d.e+]+) "
                              r"TFLOP", report).group(1)) * 1e12
        self.assertAlmostEqual(got / flops, 1.0, delta=2e-3)

        # The same plan as an artifact, which reads no weights either.
        art = self.work("plan-llama.strata")
        _, rss = peak_rss([tool("strata-compile"), model, "-o", art] +
                          budgets + self.RULES)
        self.assertLess(rss, desc["data_bytes"] // 2)
        self.assertLess(os.path.getsize(os.path.join(art, "params.bin")),
                        1 << 20)
        with open(os.path.join(art, "manifest.txt")) as f:
            manifest = f.read()
        tail = manifest[manifest.index("memory by class"):]
        self.assertEqual(report[report.index("memory by class"):], tail)
        sizes = dict(re.findall(r"  (device|host|ssd): .*?\((\d+) bytes\)",
                                manifest))
        resident = int(re.search(r"resident parameters .*?\((\d+) bytes\)",
                                 manifest).group(1))
        self.assertGreater(int(sizes["ssd"]), 0, "expected an SSD tier")
        self.assertLessEqual(int(sizes["device"]) + resident, 320 << 20)
        self.assertLessEqual(int(sizes["host"]), 400 << 20)

    def test_planner_evaluations_bound_the_search(self):
        """--planner-evaluations bounds each search's local search: a
        smaller budget scores no more placements than a larger one. (The
        starting placements and the layer stage are always scored; when
        they alone spent the budget, the share left was once computed
        unsigned, and the local search ran unbounded: on this model 3,748
        scores under a budget of 1 against 1,306 under 40.) And the plan
        report gives the host memory CPU updates stage SSD operands in, as
        strata-inspect finds it in the artifact."""
        cfg = dict(self.LLAMA12)
        synthetic.write(ARGS.work, "budget-llama", cfg, 2, 64)
        model = self.work("budget-llama.onnx")
        flags = ["--optimizer", "adamw", "--gpu-mem", "12MiB",
                 "--cpu-mem", "20MiB", "--ssd-dir", self.work("budget-ssd")]
        scored = {}
        for budget in (1, 40):
            report, _ = peak_rss([
                tool("strata-compile"), model, "--emit=plan-report",
                "--planner-evaluations", str(budget)] + flags)
            scored[budget] = int(re.search(
                r"planner: best of (\d+) placements scored", report).group(1))
        self.assertGreater(scored[1], 0)
        self.assertLessEqual(scored[1], scored[40], scored)

        # The plan keeps optimizer states on the SSD and updates them on
        # the CPU: the report says how much host memory the runtime stages
        # them in, the figure strata-inspect reads from the artifact.
        staging = re.search(r"CPU-update SSD staging: (\S+ \S+) of host "
                            r"memory at run time", report)
        self.assertIsNotNone(staging, report)
        art = self.work("budget-llama.strata")
        run([tool("strata-compile"), model, "-o", art,
             "--planner-evaluations", "40"] + flags + self.RULES)
        inspect = run([tool("strata-inspect"), art]).stdout
        self.assertIn("CPU-update SSD staging: %s of host memory" %
                      staging.group(1), inspect)

    def test_planner_check_on_a_model_too_large_to_enumerate(self):
        """--planner-check on a model whose layer programme is too large to
        enumerate (12 layers: over 2,000,000 count vectors) says so in a
        remark, once, and still checks the bound against every placement
        the search scored; it used to fail the compile, once a search."""
        self.skip_without_glpk("layer programme to enumerate")
        cfg = dict(self.LLAMA12)
        synthetic.write(ARGS.work, "check-llama", cfg, 2, 64)
        r = run([tool("strata-compile"), self.work("check-llama.onnx"),
                 "--emit=plan-report", "--optimizer", "adamw", "--gpu-mem",
                 "12MiB", "--cpu-mem", "20MiB", "--ssd-dir",
                 self.work("check-ssd"), "--planner-check",
                 "--planner-evaluations", "5"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("error:", r.stderr)
        self.assertEqual(r.stderr.count("too large to enumerate"), 1,
                         r.stderr)
        held = re.search(r"the bound holds for all (\d+) of (\d+) "
                         r"placements scored within the budgets", r.stderr)
        self.assertIsNotNone(held, r.stderr)
        self.assertGreater(int(held.group(1)), 0)

    def test_forced_searches_that_cannot_fit_are_left_out(self):
        """With every class left to it the planner also makes the search
        a run forcing each class would make. Where the tensors a forced
        class holds on one tier alone exceed that tier's budget
        (parameters or optimizer states on the device or the host, every
        activation kept on the device), that run cannot meet the budgets:
        its search is left out (a remark says how many), and the forced
        compile itself is refused for that tier's budget. Where the
        forced class's least-device placement (everything else off the
        device) needs more device memory than the budget, as recomputing
        every activation does here, its search stops there;
        --planner-check runs it to the end instead, fails the compile if
        it fits, and gives the same plan."""
        cfg = dict(self.LLAMA12)
        synthetic.write(ARGS.work, "forced-llama", cfg, 2, 64)
        model = self.work("forced-llama.onnx")
        # About 9.8 MiB of parameters, 19.6 MiB of AdamW state and more
        # than 12 MiB of activations the backward pass reads.
        flags = ["--optimizer", "adamw", "--gpu-mem", "12MiB",
                 "--ssd-dir", self.work("forced-ssd"),
                 "--planner-evaluations", "10"]
        left = re.compile(
            r"planner: (\d+) forced-class search(?:es)? left out")
        stopped = re.compile(
            r"planner: (\d+) forced-class search(?:es)? stopped at the start")
        step = re.compile(r"predicted step: ([\d.]+) ms")
        for cpu, expected in (("64MiB", 2), ("8MiB", 4)):
            r = run([tool("strata-compile"), model, "--emit=plan-report",
                     "--cpu-mem", cpu] + flags)
            found = left.search(r.stderr)
            self.assertIsNotNone(found, r.stderr)
            # States and activations on the device always; with 8 MiB
            # of host memory, parameters and states held there too.
            self.assertEqual(int(found.group(1)), expected, r.stderr)
            # Every activation recomputed needs more than 12 MiB however
            # the rest is placed. (With 8 MiB of host memory another
            # class's least-device placement misses the host budget: its
            # search runs, and --planner-check below sees to the rest.)
            found = stopped.search(r.stderr)
            self.assertIsNotNone(found, r.stderr)
            self.assertEqual(int(found.group(1)), 1, r.stderr)
            if cpu == "8MiB":
                checked = run([tool("strata-compile"), model,
                               "--emit=plan-report", "--cpu-mem", cpu,
                               "--planner-check"] + flags)
                self.assertIsNone(stopped.search(checked.stderr),
                                  checked.stderr)
                self.assertEqual(step.search(checked.stdout).group(1),
                                 step.search(r.stdout).group(1))
        for option, tier, budget in (
                ("--place-states", "host", "--cpu-mem is 8.00 MiB"),
                ("--place-params", "host", "--cpu-mem is 8.00 MiB"),
                ("--place-states", "device", "--gpu-mem is 12.00 MiB"),
                ("--place-activations", "device", "--gpu-mem is 12.00 MiB"),
                ("--place-activations", "recompute",
                 "--gpu-mem is 12.00 MiB")):
            r = subprocess.run([tool("strata-compile"), model,
                                "--emit=plan-report", "--cpu-mem", "8MiB",
                                option, tier] + flags,
                               capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0, (option, tier))
            self.assertIn(budget, r.stderr, (option, tier))

    def test_predicted_trace_is_the_reported_schedule(self):
        """--predicted-trace writes the plan's predicted schedule as a
        Chrome trace, plan-only too: one track per queue, every kernel,
        transfer and CPU update an event named by the tensor it moves; the
        last event ends at the reported step, and the compute track's
        kernels add up to the reported compute time (and what the
        transfers beside them slow it by)."""
        import json
        cfg = dict(family="gpt", layers=2, dim=256, heads=4, kv_heads=4,
                   hidden=1024, vocab=1000)
        synthetic.write(ARGS.work, "trace-gpt", cfg, 2, 64)
        trace = self.work("trace-gpt.json")
        profile = os.path.join(HERE, "..", "..", "profiles",
                               "rtx4090-768g-12nvme.profile")
        r = run([tool("strata-compile"), self.work("trace-gpt.onnx"),
                 "--emit=plan-report", "--optimizer", "adamw",
                 "--profile", profile, "--place-params", "host",
                 "--place-states", "ssd", "--place-updates", "cpu",
                 "--ssd-dir", self.work("trace-ssd"),
                 "--predicted-trace", trace])
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        tracks = {e["tid"]: e["args"]["name"] for e in events
                  if e["ph"] == "M"}
        spans = [e for e in events if e["ph"] == "X"]
        self.assertEqual(set(tracks.values()) >= {"compute", "ssd-read",
                                                  "ssd-write", "cpu"},
                         True, tracks)
        ms = float(re.search(r"predicted step: ([\d.]+) ms",
                             r.stdout).group(1))
        end = max(e["ts"] + e["dur"] for e in spans)
        self.assertAlmostEqual(end / 1e3, ms, delta=2e-3)
        compute = float(re.search(r"busy per step: compute ([\d.]+) ms",
                                  r.stdout).group(1))
        # (A kernel beside a busy queue runs the profile's overlap_slowdown,
        # 2%, slower: its span is longer than its work.)
        kernels = sum(e["dur"] for e in spans
                      if tracks[e["tid"]] == "compute") / 1e3
        self.assertGreaterEqual(kernels, compute - 2e-3)
        self.assertLessEqual(kernels, compute * 1.02 + 2e-3)
        # The schedule's floor: the backward pass's start plus the busiest
        # track's time from then on, as the trace draws it (the SSD reads
        # here: the states stream in once the gradients are there).
        floor = re.search(r"this schedule's floor: ([\d.]+) ms \(the "
                          r"backward pass starts at ([\d.]+) ms and the "
                          r"(.+?) is busy ([\d.]+) ms after that\); the "
                          r"other ([\d.]+) ms", r.stdout)
        self.assertIsNotNone(floor, r.stdout)
        at, start = float(floor.group(1)), float(floor.group(2))
        after = {}
        for e in spans:
            t = tracks[e["tid"]]
            after[t] = after.get(t, 0.0) + max(
                0.0, e["ts"] + e["dur"] - max(e["ts"], start * 1e3)) / 1e3
        busiest = max(after, key=after.get)
        names = {"compute": "compute queue", "h2d": "host->device queue",
                 "d2h": "device->host queue", "ssd-read": "SSD read queue",
                 "ssd-write": "SSD write queue", "cpu": "CPU optimizer"}
        self.assertEqual(floor.group(3), names[busiest], after)
        self.assertAlmostEqual(float(floor.group(4)), after[busiest],
                               delta=0.01)
        self.assertAlmostEqual(at, start + after[busiest], delta=0.01)
        self.assertAlmostEqual(at + float(floor.group(5)), ms, delta=0.01)
        self.assertLessEqual(at, ms)
        by_track = {}
        for e in spans:
            by_track.setdefault(tracks[e["tid"]], []).append(e["name"])
        # The CPU updates and the SSD reads of their states name them.
        self.assertIn("update_adamw layers.0.q.weight",
                      by_track["cpu"], by_track["cpu"][:5])
        self.assertTrue(any(n.startswith("update_adamw ")
                            for n in by_track["ssd-read"]))
        # Nothing planned, nothing to draw: a clear error.
        bad = subprocess.run([tool("strata-compile"),
                              self.work("trace-gpt.onnx"), "--emit=graph",
                              "-o", self.work("trace.mlir"),
                              "--predicted-trace", trace],
                             capture_output=True, text=True)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("--predicted-trace: no predicted schedule", bad.stderr)

    def check_relaxation_binds(self, cmd, relaxation):
        """Runs `cmd` (a --planner-check compile): the bound holds for every
        enumerated layer placement and every scored one, and the memory
        relaxation (its report line matching `relaxation` after "memory
        relaxation: ", its optimum the first group) is the bound, above
        every other row of it. Returns the relaxation's match."""
        r = run(cmd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"layer placements enumerated and scored, "
                         r"\d+ within the budgets, the fastest [\d.]+ ms; "
                         r"the bound \([\d.]+ ms\) is under every one")
        self.assertRegex(r.stderr, r"the bound holds for all \d+ of")
        bound = re.search(r"planner bound: no placement within the budgets is "
                          r"predicted under ([\d.]+) ms \(compute ([\d.]+), "
                          r"host->device ([\d.]+), device->host ([\d.]+), "
                          r"updates and fetches over the host link and the "
                          r"CPU ([\d.]+), ssd read ([\d.]+), ssd write "
                          r"([\d.]+)(?:, the host link both ways "
                          r"([\d.]+))?\)", r.stdout)
        self.assertIsNotNone(bound, r.stdout)
        relaxed = re.search(r"memory relaxation: " + relaxation, r.stdout)
        self.assertIsNotNone(relaxed, r.stdout)
        rows = [float(x) for x in bound.groups()[1:] if x is not None]
        self.assertAlmostEqual(float(bound.group(1)),
                               float(relaxed.group(1)), delta=1e-3)
        self.assertGreater(float(relaxed.group(1)), max(rows),
                           "the relaxation should be the binding row here")
        return relaxed

    def test_memory_relaxation_bounds_every_enumerated_placement(self):
        """On a GPU profile, under a device budget a third of the model's
        stored tensors, the proven bound includes the memory relaxation
        (PlacementBound.cpp: a linear programme over keeping, fetching,
        swapping and recomputing, and CPU updates), here above every
        other row of it; --planner-check scores every configuration of
        every layer (about 4,000 placements) and every placement the
        search tried, and none within the budgets is under the bound."""
        self.skip_without_glpk("relaxation to check")
        cfg = dict(family="gpt", layers=2, dim=2048, heads=16, kv_heads=16,
                   hidden=8192, vocab=32000)
        synthetic.write(ARGS.work, "relax-gpt", cfg, 4, 1024)
        profile = os.path.join(HERE, "..", "..", "profiles",
                               "rtx4090-768g-12nvme.profile")
        self.check_relaxation_binds(
            [tool("strata-compile"), self.work("relax-gpt.onnx"),
             "--emit=plan-report", "--optimizer", "adamw", "--precision",
             "bf16", "--profile", profile, "--gpu-mem", "1500MiB",
             "--cpu-mem", "700GiB", "--ssd-dir", self.work("relax-ssd"),
             "--planner-check"], r"([\d.]+) ms .*the host link both ways "
            r"([\d.]+)")

    def test_host_relaxation_bounds_every_enumerated_placement(self):
        """Without a GPU (the CPU backend: host copies on the compute
        thread, stored tensors in host memory or on the SSD), under device
        and host budgets that leave most of the optimizer state on a slow
        SSD, the memory relaxation prices the trade between the compute
        thread's copies and the SSD's reads (here above every other row of
        the bound), with the drives shared by the two directions (the
        built-in profile's duplex slowdowns: reads and writes each run
        1.5x slower while both run, so the drives are busy longer than
        either direction alone); --planner-check scores every
        configuration of both layers (2,187 placements a base) and every
        placement the search tried, and none within the budgets is under
        the bound."""
        self.skip_without_glpk("relaxation to check")
        cfg = dict(family="gpt", layers=2, dim=512, heads=8, kv_heads=8,
                   hidden=2048, vocab=8192)
        synthetic.write(ARGS.work, "relax-cpu", cfg, 1, 64)
        # The built-in CPU figures, with a slower SSD and host copies.
        profile = self.work("slow-ssd.profile")
        with open(profile, "w") as f:
            f.write("ssd_read_gbs 0.5\nssd_write_gbs 0.5\n"
                    "ssd_small_read_gbs 0.1\nssd_small_write_gbs 0.1\n"
                    "copy_gbs 1\n")
        relaxed = self.check_relaxation_binds(
            [tool("strata-compile"), self.work("relax-cpu.onnx"),
             "--emit=plan-report", "--optimizer", "adamw", "--profile",
             profile, "--gpu-mem", "80MiB", "--cpu-mem", "16MiB", "--ssd-dir",
             self.work("relax-cpu-ssd"), "--planner-check",
             "--planner-evaluations", "20"],
            r"([\d.]+) ms \(.*at its optimum: compute thread \(kernels and "
            r"host copies\) ([\d.]+), SSD reads ([\d.]+), SSD writes "
            r"([\d.]+), the drives both ways ([\d.]+)")
        # At its optimum the busiest of its queues is the bound, here the
        # drives with both directions on them.
        queues = [float(x) for x in relaxed.groups()[1:]]
        self.assertAlmostEqual(max(queues), float(relaxed.group(1)),
                               delta=1e-2)
        reads, writes, drives = queues[1:]
        self.assertGreater(drives, max(reads, writes) + 1,
                           "the drives' duplex rows should bind here")

    def test_synthetic_init_generates_fresh_weights(self):
        cfg = dict(family="gpt", layers=2, dim=64, heads=4, kv_heads=4,
                   hidden=256, vocab=256)
        synthetic.write(ARGS.work, "init-gpt", cfg, 2, 16)
        model = self.work("init-gpt.onnx")
        rng = np.random.default_rng(0)
        data = self.work("pattern.npy")
        np.save(data, np.tile(rng.integers(0, 256, size=17),
                              (32, 1)).astype(np.int64))

        # lr 1e-30 (it must be positive): the weights after a step are the
        # generated ones.
        art = self.work("init0.strata")
        run([tool("strata-compile"), model, "-o", art, "--optimizer",
             "adamw", "--lr", "1e-30"] + self.RULES)
        run([tool("strata-run"), art, "--data", data, "--steps", "1",
             "--quiet"])
        out = self.work("init0.onnx")
        run([tool("strata-export"), art, "-o", out])
        import onnx
        from onnx import numpy_helper
        weights = {t.name: numpy_helper.to_array(t)
                   for t in onnx.load(out).graph.initializer}
        self.assertEqual(len(weights), 4 + cfg["layers"] * 16)
        spread = 0.02 * np.sqrt(3.0)
        seen = []
        for name, w in weights.items():
            if name.endswith("norm.scale"):
                self.assertTrue(np.all(w == 1.0), name)
            elif name.endswith(".bias"):
                # lr 1e-30 moved them by about that much.
                self.assertLess(np.abs(w).max(), 1e-20, name)
            else:
                self.assertLessEqual(np.abs(w).max(), spread * (1 + 1e-5),
                                     name)
                self.assertAlmostEqual(float(w.std()), 0.02, delta=0.002,
                                       msg=name)
                self.assertLess(abs(float(w.mean())), 0.002, name)
                seen.append(w.ravel()[:64])
        # Every tensor has values of its own.
        self.assertEqual(len({s.tobytes() for s in seen}), len(seen))

        art = self.work("init.strata")
        log = self.work("init.jsonl")
        run([tool("strata-compile"), model, "-o", art, "--optimizer",
             "adamw", "--lr", "3e-3"] + self.RULES)
        run([tool("strata-run"), art, "--data", data, "--steps", "20",
             "--no-checkpoint", "--quiet", "--log-json", log])
        import json
        with open(log) as f:
            losses = [json.loads(line)["loss"] for line in f]
        self.assertEqual(len(losses), 20)
        self.assertAlmostEqual(losses[0], np.log(256), delta=0.1)
        self.assertLess(losses[-1], losses[0] - 1.5)

    def test_malformed_rules_are_errors(self):
        synthetic.write(ARGS.work, "bad-gpt", dict(
            family="gpt", layers=1, dim=32, heads=2, kv_heads=2, hidden=64,
            vocab=64), 1, 8)
        for spec in ("nonsense", "*=0", "*=a,b", "*=0,-1", "=0,1",
                     "*=0,inf"):
            r = subprocess.run(
                [tool("strata-compile"), self.work("bad-gpt.onnx"), "-o",
                 self.work("bad.strata"), "--synthetic-init", spec],
                capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, spec)
            self.assertIn("--synthetic-init '%s'" % spec, r.stderr)
            self.assertFalse(os.path.exists(self.work("bad.strata")))


def main():
    global ARGS
    ARGS = harness.parse_args()
    harness.run_tests(verbosity=2)


if __name__ == "__main__":
    main()
