#!/usr/bin/env python3
"""Reliability: what a careless or hostile user can do must not lose data,
crash a tool or train on nonsense.

* Compiling never deletes the model, a directory that is not an artifact, or
  the checkpoints of a previous artifact; a failed compile leaves nothing.
* A second process on the same artifact, checkpoint directory or SSD
  directory is refused with a clear error; strata-inspect and strata-export
  beside a training job leave its numbers untouched.
* Checkpoints are byte-identical for identical states; the temporaries of an
  interrupted save are removed by the next run; a --log-json write error
  stops the run.
* A diverged run (non-finite loss) stops without saving, and export refuses
  non-finite weights.
* Malformed numbers, sizes and hyperparameters are errors, never crashes.

    test_reliability.py --bin BUILD/bin --work DIR
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402
import harness  # noqa: E402
from harness import run, tool  # noqa: E402

ARGS = None


def fails(cmd, timeout=60, **kw):
    """Runs `cmd`, which must exit non-zero without a signal; returns its
    stderr."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       **kw)
    if r.returncode <= 0:
        raise AssertionError("%s exited %d (expected an error):\n%s" %
                             (" ".join(cmd), r.returncode, r.stderr))
    return r.stderr


def read(path, mode="rb"):
    with open(path, mode) as fh:
        return fh.read()


def tree(path):
    """Every file under `path` with its bytes."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, path)] = read(p)
    return out


class Reliability(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        meta = generate.generate(ARGS.work, ["gpt2_dynamic"])[0]
        cls.model = meta["path"]
        cls.bind = meta["bind"]
        b, t = meta["output_shape"][:2]
        rng = np.random.default_rng(5)
        cls.data = os.path.join(ARGS.work, "rel.data.npy")
        np.save(cls.data, rng.integers(0, 96, size=(4 * b, t + 1),
                                       dtype=np.int64))

    def work(self, name):
        path = os.path.join(ARGS.work, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.unlink(path)
        return path

    def compile_cmd(self, out, *flags):
        cmd = [tool("strata-compile"), self.model, "-o", out]
        for b in self.bind:
            cmd += ["--input-shape", b]
        return cmd + list(flags)

    def compile(self, out, *flags):
        return run(self.compile_cmd(out, *flags))

    def start_training(self, art, *flags):
        """A long training job, returned once it has taken its locks (its
        first step is logged)."""
        log = art + ".bg.log"
        if os.path.exists(log):
            os.unlink(log)
        proc = subprocess.Popen(
            [tool("strata-run"), art, "--data", self.data, "--steps",
             "1000000", "--log-json", log, "--quiet"] + list(flags),
            stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            if os.path.exists(log) and os.path.getsize(log) > 0:
                return proc
            if proc.poll() is not None:
                raise AssertionError("the job exited: " + proc.stderr.read())
            time.sleep(0.01)
        proc.kill()
        raise AssertionError("the training job did not start")

    @staticmethod
    def stop(proc):
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()

    # -- compiling never deletes what it was not asked to ----------------

    def test_output_onto_the_model_is_refused(self):
        copy = self.work("victim.onnx")
        shutil.copy(self.model, copy)
        before = read(copy)
        cmd = self.compile_cmd(copy)
        cmd[1] = copy
        err = fails(cmd)
        self.assertIn("is the input model", err)
        self.assertEqual(read(copy), before)

    def test_output_onto_a_file_or_foreign_directory_is_refused(self):
        f = self.work("some-file.txt")
        with open(f, "w") as fh:
            fh.write("keep me")
        self.assertIn("not a directory", fails(self.compile_cmd(f)))
        self.assertEqual(read(f, "r"), "keep me")
        d = self.work("some-dir")
        os.makedirs(os.path.join(d, "sub"))
        with open(os.path.join(d, "sub", "notes"), "w") as fh:
            fh.write("keep me too")
        self.assertIn("holds no Strata artifact", fails(self.compile_cmd(d)))
        self.assertEqual(tree(d), {"sub/notes": b"keep me too"})

    def test_recompiling_keeps_checkpoints(self):
        art = self.work("recompile.strata")
        self.compile(art, "--lr", "0.01")
        run([tool("strata-run"), art, "--data", self.data, "--steps", "2",
             "--quiet"])
        ckpt = os.path.join(art, "checkpoint", "checkpoint.bin")
        saved = read(ckpt)
        self.compile(art, "--lr", "0.02")
        self.assertEqual(read(ckpt), saved,
                         "recompiling lost the checkpoint")
        # It belongs to the old plan: --resume says so instead of using it.
        err = fails([tool("strata-run"), art, "--data", self.data,
                     "--steps", "3", "--resume"])
        self.assertIn("belongs to another plan", err)
        self.assertEqual([n for n in os.listdir(ARGS.work)
                          if n.startswith("recompile.strata.")], [],
                         "temporary directories left beside the artifact")

    def test_failed_compile_leaves_nothing_behind(self):
        # A target whose plan.bin cannot be replaced (it is a directory):
        # the compile fails at the last moment and must remove what it
        # staged, and keep what was there.
        art = self.work("blocked.strata")
        os.makedirs(os.path.join(art, "plan.bin"))
        with open(os.path.join(art, "plan.bin", "x"), "w") as fh:
            fh.write("x")
        fails(self.compile_cmd(art))
        self.assertEqual([n for n in os.listdir(art) if n.endswith(".new")],
                         [], "staged files left behind")
        self.assertEqual(tree(art)["plan.bin/x"], b"x")
        # A compile that fails before writing creates no directory.
        fresh = self.work("never.strata")
        fails(self.compile_cmd(fresh, "--gpu-mem", "1KiB"))
        self.assertFalse(os.path.exists(fresh))

    # -- locks between processes -----------------------------------------

    def test_second_process_on_the_same_files_is_refused(self):
        art = self.work("locked.strata")
        ssd = self.work("locked.ssd")
        self.compile(art, "--place-states", "ssd", "--ssd-dir", ssd)
        job = self.start_training(art)
        try:
            # The same artifact.
            err = fails([tool("strata-run"), art, "--data", self.data,
                         "--steps", "3", "--checkpoint-dir",
                         self.work("other.ckpt")])
            self.assertIn("in use by another Strata process", err)
            # Another artifact on the same SSD directory.
            other = self.work("other.strata")
            self.compile(other, "--place-states", "ssd", "--ssd-dir", ssd)
            err = fails([tool("strata-run"), other, "--data", self.data,
                         "--steps", "3"])
            self.assertIn("in use by another Strata process", err)
            self.assertIn(ssd, err)
            # Another artifact writing into the job's checkpoint directory.
            third = self.work("third.strata")
            self.compile(third)
            err = fails([tool("strata-run"), third, "--data", self.data,
                         "--steps", "3", "--checkpoint-dir",
                         os.path.join(art, "checkpoint")])
            self.assertIn("in use by another Strata process", err)
            # Recompiling into the artifact being trained.
            err = fails(self.compile_cmd(art, "--place-states", "ssd",
                                         "--ssd-dir", ssd))
            self.assertIn("in use by another Strata process", err)
            # Read-only tools work beside it.
            run([tool("strata-inspect"), art])
        finally:
            self.stop(job)
        # Checkpoints and SSD files in the artifact directory itself: one
        # process may hold the same directory for several purposes.
        fourth = self.work("fourth.strata")
        self.compile(fourth, "--place-states", "ssd", "--ssd-dir", fourth)
        run([tool("strata-run"), fourth, "--data", self.data, "--steps", "1",
             "--checkpoint-dir", fourth, "--quiet"])
        # Once the job is gone, its files are free again.
        run([tool("strata-run"), other, "--data", self.data, "--steps", "1",
             "--quiet"])

    def test_inspect_and_export_do_not_disturb_a_job(self):
        art = self.work("busy.strata")
        ssd = self.work("busy.ssd")
        self.compile(art, "--place-params", "ssd", "--place-states", "ssd",
                     "--ssd-dir", ssd, "--lr", "0.01")
        ref = self.work("quiet.strata")
        ref_ssd = self.work("quiet.ssd")
        self.compile(ref, "--place-params", "ssd", "--place-states", "ssd",
                     "--ssd-dir", ref_ssd, "--lr", "0.01")
        steps = "40"
        run([tool("strata-run"), ref, "--data", self.data, "--steps", steps,
             "--log-json", ref + ".log", "--quiet"])
        proc = subprocess.Popen(
            [tool("strata-run"), art, "--data", self.data, "--steps", steps,
             "--log-json", art + ".log", "--save-every", "5", "--quiet"],
            stderr=subprocess.PIPE, text=True)
        exported = 0
        while proc.poll() is None:
            run([tool("strata-inspect"), art])
            r = subprocess.run([tool("strata-export"), art, "-o",
                                art + ".onnx"], capture_output=True,
                               text=True)
            exported += r.returncode == 0
        err = proc.stderr.read()
        proc.stderr.close()
        self.assertEqual(proc.returncode, 0, err)
        self.assertGreater(exported, 0)

        def losses(path):
            return [json.loads(line)["loss"]
                    for line in read(path, "r").splitlines()]
        self.assertEqual(losses(art + ".log"), losses(ref + ".log"))

    # -- checkpoints ------------------------------------------------------

    def test_checkpoints_are_deterministic_and_stale_temporaries_go(self):
        files = []
        for i in range(2):
            art = self.work("det%d.strata" % i)
            self.compile(art, "--place-states", "host", "--lr", "0.01")
            ckdir = os.path.join(art, "checkpoint")
            os.makedirs(ckdir)
            stale = os.path.join(ckdir, "checkpoint.bin.tmp.999999")
            with open(stale, "wb") as fh:
                fh.write(b"\0" * 100000)
            run([tool("strata-run"), art, "--data", self.data, "--steps",
                 "3", "--quiet"])
            self.assertFalse(os.path.exists(stale),
                             "the stale temporary was not removed")
            files.append(read(os.path.join(ckdir, "checkpoint.bin")))
        self.assertEqual(files[0], files[1],
                         "identical runs wrote different checkpoints")

    def test_log_write_error_stops_the_run(self):
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full")
        art = self.work("fulllog.strata")
        self.compile(art)
        err = fails([tool("strata-run"), art, "--data", self.data,
                     "--steps", "3", "--log-json", "/dev/full"])
        self.assertIn("--log-json", err)

    def test_relative_ssd_dir_is_the_same_from_every_directory(self):
        base = self.work("reldirs")
        os.makedirs(os.path.join(base, "a"))
        os.makedirs(os.path.join(base, "b"))
        art = os.path.join(base, "rel.strata")
        cmd = self.compile_cmd(art, "--place-states", "ssd", "--ssd-dir",
                               "ssd-here")
        run_in = lambda c, d: subprocess.run(c, cwd=d, capture_output=True,
                                            text=True)
        r = run_in(cmd, os.path.join(base, "a"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_in([tool("strata-run"), art, "--data", self.data, "--steps",
                    "1", "--quiet"], os.path.join(base, "b"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isdir(os.path.join(base, "a", "ssd-here")))
        self.assertFalse(os.path.exists(os.path.join(base, "b", "ssd-here")))

    # -- divergence -------------------------------------------------------

    def test_divergence_stops_without_saving(self):
        art = self.work("diverge.strata")
        self.compile(art, "--optimizer", "sgd", "--lr", "1e30")
        err = fails([tool("strata-run"), art, "--data", self.data,
                     "--steps", "20", "--save-every", "1"])
        self.assertIn("diverged", err)
        ckpt = os.path.join(art, "checkpoint", "checkpoint.bin")
        if os.path.exists(ckpt):
            # Whatever was saved holds finite weights: export takes it.
            run([tool("strata-export"), art, "-o", art + ".onnx"])
        # --on-nan skip cannot undo an applied update: refused up front.
        err = fails([tool("strata-run"), art, "--data", self.data,
                     "--steps", "2", "--on-nan", "skip"])
        self.assertIn("--loss-scale", err)

    def test_nan_weights_stop_skip_and_export(self):
        """A model whose weights hold a NaN has a NaN loss from step 1:
        the default stops without a checkpoint; a loss-scaled plan with
        --on-nan skip skips every step and finishes; export refuses the
        weights, naming the parameter."""
        import onnx
        from onnx import numpy_helper
        model = onnx.load(self.model)
        init = next(t for t in model.graph.initializer
                    if t.data_type == onnx.TensorProto.FLOAT)
        values = numpy_helper.to_array(init).copy()
        values.flat[0] = np.nan
        init.CopyFrom(numpy_helper.from_array(values, init.name))
        path = self.work("nan-model.onnx")
        onnx.save(model, path)
        art = self.work("nan.strata")
        cmd = self.compile_cmd(art)
        cmd[1] = path
        run(cmd)
        err = fails([tool("strata-run"), art, "--data", self.data, "--steps",
                     "3", "--save-every", "1"])
        self.assertIn("diverged at step 1", err)
        self.assertFalse(os.path.exists(os.path.join(art, "checkpoint",
                                                     "checkpoint.bin")))
        err = fails([tool("strata-export"), art, "-o", art + ".onnx"])
        self.assertIn("non-finite", err)
        self.assertIn(init.name, err)
        scaled = self.work("nan-scaled.strata")
        cmd = self.compile_cmd(scaled, "--loss-scale", "dynamic")
        cmd[1] = path
        run(cmd)
        log = scaled + ".log"
        run([tool("strata-run"), scaled, "--data", self.data, "--steps", "3",
             "--on-nan", "skip", "--log-json", log, "--quiet"])
        entries = [json.loads(l) for l in read(log, "r").splitlines()]
        self.assertEqual(len(entries), 3)
        self.assertTrue(all(e["skipped"] for e in entries), entries)

    def test_external_data_offsets_are_parsed_whole(self):
        import onnx
        from onnx import numpy_helper
        model = onnx.load(self.model)
        ext = self.work("ext-model")
        os.makedirs(ext)
        path = os.path.join(ext, "m.onnx")
        onnx.save(model, path, save_as_external_data=True,
                  all_tensors_to_one_file=True, location="m.data",
                  size_threshold=0)
        model = onnx.load(path, load_external_data=False)
        tensor = next(t for t in model.graph.initializer
                      if t.data_location == onnx.TensorProto.EXTERNAL)
        for entry in tensor.external_data:
            if entry.key == "offset":
                entry.value = entry.value + "abc"
                break
        else:
            entry = tensor.external_data.add()
            entry.key, entry.value = "offset", "0abc"
        onnx.save(model, path)
        err = fails([tool("strata-compile"), path, "--emit=graph"] +
                    [a for b in self.bind for a in ("--input-shape", b)])
        self.assertIn("invalid external data offset", err)

    # -- malformed numbers and hyperparameters -----------------------------

    def test_bad_numbers_are_errors(self):
        art = self.work("numbers.strata")
        huge = "123456789012345678901"
        err = fails([tool("strata-compile"), self.model, "-o", art,
                     "--input-shape", "input_ids=%sx4" % huge])
        self.assertIn("invalid dimension", err)
        err = fails([tool("strata-compile"), self.model, "-o", art,
                     "--input-shape", "input_ids=4611686018427387968x4"])
        self.assertIn("2^63", err)
        for flags, text in [
                (["--beta1", "2"], "--beta1"), (["--eps", "-1"], "--eps"),
                (["--lr", "nan"], "--lr"), (["--lr", "inf"], "--lr"),
                (["--momentum", "1.5"], "--momentum"),
                (["--weight-decay", "-0.1"], "--weight-decay"),
                (["--gpu-mem", "0"], "--gpu-mem"),
                (["--gpu-mem", "1.5.3GiB"], "--gpu-mem"),
                (["--loss-scale", "inf"], "--loss-scale")]:
            err = fails(self.compile_cmd(art, *flags))
            self.assertIn(text, err, flags)
        # Empty values (an unset shell variable) and sizes past int64.
        for flags, text in [
                (["--gpu-mem="], "--gpu-mem: empty value"),
                (["--gpu-mem", ""], "--gpu-mem: empty value"),
                (["--cpu-mem="], "--cpu-mem: empty value"),
                (["--ssd-dir="], "--ssd-dir: empty value"),
                (["--profile="], "--profile: empty value"),
                (["--gpu-mem", "10000000TiB"], "2^63"),
                (["--cpu-mem", "8388608TiB"], "2^63")]:
            err = fails(self.compile_cmd(art, *flags))
            self.assertIn(text, err, flags)
        self.assertFalse(os.path.exists(art))
        self.compile(art)
        for flags in (["--steps", huge], ["--steps", "12abc"],
                      ["--trace-steps", "x"], ["--device-mem", "0"],
                      ["--device-mem", "10000000TiB"],
                      ["--on-nan", "maybe"]):
            fails([tool("strata-run"), art, "--data", self.data] + flags)
        for flag in ("--ssd-dir=", "--device-mem=", "--log-json="):
            err = fails([tool("strata-run"), art, "--data", self.data,
                         "--steps", "1", flag])
            self.assertIn(flag[:-1] + ": empty value", err)
        err = fails([tool("strata-calibrate"), "-o", ""])
        self.assertIn("-o: empty value", err)

    def test_calibrated_profile_is_remembered_and_used(self):
        """strata-calibrate without -o remembers the profile where
        strata-compile finds it without --profile ($STRATA_PROFILE here),
        and the plan report says which profile the plan was made for: the
        remembered one, or the built-in defaults (--profile=builtin, or
        nothing remembered)."""
        remembered = os.path.join(self.work("remembered"), "sub",
                                  "machine.profile")
        env = dict(os.environ, STRATA_PROFILE=remembered)
        r = subprocess.run([tool("strata-calibrate")], capture_output=True,
                           text=True, timeout=600, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("remembered in " + remembered, r.stderr)
        text = read(remembered, "r")
        self.assertIn("matmul_large_gflops", text)

        def report(*flags, env=env):
            r = subprocess.run(
                [tool("strata-compile"), self.model, "--emit=plan-report"] +
                ["--input-shape=" + b for b in self.bind] + list(flags),
                capture_output=True, text=True, timeout=120, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout

        self.assertIn("machine: profile %s (this machine's, as "
                      "strata-calibrate measured it)" % remembered, report())
        builtin = "machine: the built-in default profile (not measured"
        self.assertIn(builtin, report("--profile=builtin"))
        self.assertIn(builtin, report(env=dict(os.environ, STRATA_PROFILE="")))
        # An explicit --profile wins over the remembered one.
        other = os.path.join(ARGS.work, "remembered", "other.profile")
        shutil.copy(remembered, other)
        mine = report("--profile", other)
        self.assertIn("machine: profile " + other + "\n", mine)

    def test_missing_conformance_data_is_a_skip_not_a_pass(self):
        """Without ONNX's node tests the conformance suite exits 77, which
        ctest reports as skipped (SKIP_RETURN_CODE), not 0."""
        script = os.path.join(HERE, "..", "conformance", "run_node_tests.py")
        r = subprocess.run([sys.executable, script, "--bin", ARGS.bin,
                            "--data", self.work("no-such-data")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 77, r.stdout + r.stderr)
        self.assertIn("skipped: no test data", r.stdout)

    def test_export_refuses_another_model(self):
        """--model naming a model other than the compiled one (same family,
        other size: initializer names shared) is refused and writes nothing;
        a copy of the right one (moved) is accepted."""
        art = self.work("export-other.strata")
        self.compile(art, "--optimizer", "sgd")
        other = generate.generate(self.work("other-model"),
                                  ["gpt2_gelu_new"])[0]["path"]
        out = self.work("export-other.onnx")
        err = fails([tool("strata-export"), art, "-o", out, "--model", other])
        self.assertIn("is not the model", err)
        self.assertFalse(os.path.exists(out))
        moved = self.work("moved.onnx")
        shutil.copy(self.model, moved)
        run([tool("strata-export"), art, "-o", out, "--model", moved])
        self.assertTrue(os.path.exists(out))

    def test_writes_past_the_file_size_limit_are_errors(self):
        """ulimit -f: SIGXFSZ killed the process mid-write; now the write
        fails with 'File too large', named, and the earlier checkpoint
        stays as it was."""
        import resource
        art = self.work("fsize.strata")
        self.compile(art, "--optimizer", "adamw")
        run([tool("strata-run"), art, "--data", self.data, "--steps", "1",
             "--quiet"])
        ckpt = os.path.join(art, "checkpoint", "checkpoint.bin")
        before = read(ckpt)
        limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                           (64 << 10, 64 << 10))
        err = fails([tool("strata-run"), art, "--data", self.data, "--steps",
                     "2", "--resume", "--quiet"], preexec_fn=limit)
        self.assertIn("File too large", err)
        self.assertEqual(read(ckpt), before)
        out = self.work("fsize.onnx")
        err = fails([tool("strata-export"), art, "-o", out],
                    preexec_fn=limit)
        self.assertIn("File too large", err)
        err = fails(self.compile_cmd(self.work("fsize2.strata")),
                    preexec_fn=limit)
        self.assertIn("File too large", err)

    def test_bad_npy_headers_are_errors(self):
        art = self.work("npy.strata")
        self.compile(art)
        cases = {
            "huge-dim": "(123456789012345678901, 4)",
            "overflow": "(4611686018427387904, 4611686018427387904)",
            "too-big": "(1099511627776, 33)",
            "negative": "(-4, 33)",
            "not-a-tuple": "4, 33",
        }
        for name, shape in cases.items():
            header = ("{'descr': '<i8', 'fortran_order': False, 'shape': %s, }"
                      % shape)
            header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
            path = os.path.join(ARGS.work, "bad-%s.npy" % name)
            with open(path, "wb") as fh:
                fh.write(b"\x93NUMPY\x01\x00" +
                         len(header).to_bytes(2, "little") +
                         header.encode() + b"\0" * 64)
            err = fails([tool("strata-run"), art, "--data", path, "--steps",
                         "1"])
            self.assertIn("npy", err, name)

    # -- malformed models ---------------------------------------------------

    def import_error(self, name, nodes, inits=(), inputs=None, shape=None,
                     flags=(), opset=17):
        """Compiles a small graph that must be refused; returns the error."""
        import onnx
        from onnx import TensorProto, helper
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
        graph = helper.make_graph(nodes, name, inputs or [x], [y],
                                  list(inits))
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", opset)])
        path = self.work(name + ".onnx")
        onnx.save(model, path)
        return fails([tool("strata-compile"), path, "--emit=graph"] +
                     list(flags), timeout=60)

    def test_malformed_graphs_are_refused_with_the_node_named(self):
        from onnx import TensorProto, helper as h, numpy_helper
        i64 = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)
        f32 = lambda n, v: numpy_helper.from_array(np.array(v, np.float32), n)
        const = lambda n, t: h.make_node("Constant", [], [n], value=t)
        w = numpy_helper.from_array(np.ones(4, np.float32), "w")
        to_y = h.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT)
        cases = [
            ("attr-type", [h.make_node("Softmax", ["x"], ["y"], name="sm",
                                       axis=1.0)], [],
             ["attribute 'axis' is FLOAT", "sm"]),
            ("too-many-inputs", [h.make_node("Relu", ["x", "x"], ["y"],
                                             name="r")], [],
             ["has 2 inputs"]),
            ("dup-init", [h.make_node("Add", ["x", "w"], ["y"])], [w, w],
             ["defined twice"]),
            ("shadow", [h.make_node("Relu", ["x"], ["x"], name="again"),
                        h.make_node("Relu", ["x"], ["y"])], [],
             ["defined twice"]),
            ("range-mixed", [const("s", i64("s", 0)),
                             const("l", f32("l", 4.0)),
                             const("d", i64("d", 1)),
                             h.make_node("Range", ["s", "l", "d"], ["r"]),
                             to_y], [],
             ["different types"]),
            ("range-huge", [const("s", i64("s", 0)),
                            const("l", i64("l", 1 << 40)),
                            const("d", i64("d", 1)),
                            h.make_node("Range", ["s", "l", "d"], ["r"]),
                            to_y], [],
             ["elements"]),
            ("reshape-overflow", [h.make_node("Reshape", ["x", "shape"],
                                              ["y"])],
             [i64("shape", [(1 << 62) + 2, 4])], ["Reshape"]),
            # A constant index past the axis: refused at compile time with
            # the node named, not when the step runs.
            ("gather-range", [h.make_node("Gather", ["x", "idx"], ["y"],
                                          name="ga", axis=1)],
             [i64("idx", [0, 4])], ["ga", "index 4", "out of range"]),
            ("gather-negative", [h.make_node("Gather", ["x", "idx"], ["y"],
                                             name="gn", axis=0)],
             [i64("idx", [-3])], ["gn", "index -3", "out of range"]),
            # A shape list of millions of entries (an importer-fuzzer
            # timeout): refused before it is read.
            ("huge-shape-list", [const("s", i64("s", 0)),
                                 const("l", i64("l", 2000)),
                                 const("d", i64("d", 1)),
                                 h.make_node("Range", ["s", "l", "d"],
                                             ["r"]),
                                 h.make_node("Reshape", ["x", "r"], ["y"])],
             [], ["at most 1024"]),
        ]
        for name, nodes, inits, expected in cases:
            with self.subTest(name):
                err = self.import_error(name, nodes, inits=inits)
                for text in expected:
                    self.assertIn(text, err)
        # A Split with no outputs divided by zero (found by the importer
        # fuzzer): at opset 20 only the importer's own checks see it.
        for opset in (17, 20):
            with self.subTest("split without outputs, opset %d" % opset):
                err = self.import_error(
                    "split-none-%d" % opset,
                    [h.make_node("Split", ["x"], [], name="sp", axis=1),
                     h.make_node("Relu", ["x"], ["y"])], opset=opset)
                self.assertIn("sp", err)
                self.assertIn("outputs", err)
        # Past the opsets ONNX's installed schemas know, the importer's own
        # attribute accessors refuse the wrong kind.
        with self.subTest("attr-type opset 20"):
            err = self.import_error("attr-type-20", [h.make_node(
                "Softmax", ["x"], ["y"], name="sm20", axis=1.0)], opset=20)
            self.assertIn("attribute 'axis' must be an integer", err)
            self.assertIn("sm20", err)
        # Two graph inputs (or outputs) of one name: which one a binding
        # feeds would be a guess.
        x = h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
        x2 = h.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
        with self.subTest("duplicate input"):
            err = self.import_error("dup-input", [h.make_node(
                "Relu", ["x"], ["y"])], inputs=[x, x2])
            self.assertIn("graph input 'x' is declared twice", err)
        with self.subTest("zero batch"):
            err = fails([tool("strata-compile"), self.model, "--emit=graph",
                         "--input-shape", "input_ids=0x8"])
            self.assertIn("empty dimension", err)

    def test_integer_folds_neither_hang_nor_overflow(self):
        """Pow(2, 2^62) on integer constants folded at import: the fold
        multiplied 2^62 times (a hang); now it squares, wrapping as the
        runtime does, and so do +, - and * (undefined behaviour before)."""
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        c = lambda n, v: helper.make_node("Constant", [], [n],
                                          value=numpy_helper.from_array(
                                              np.array(v, np.int64), n))
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
        # A Range whose k * delta alone overflows int64 (start + k * delta
        # does not): found by the importer fuzzer under UBSan.
        nodes = [c("a", [2, 3]), c("b", [1 << 62, 5]),
                 c("big", [(1 << 63) - 1, -(1 << 63)]),
                 c("rs", -(1 << 63) + 1), c("rl", (1 << 63) - 1),
                 c("rd", 71033325875101696),
                 helper.make_node("Range", ["rs", "rl", "rd"], ["r"]),
                 helper.make_node("Pow", ["a", "b"], ["p"]),
                 helper.make_node("Mul", ["big", "big"], ["m"]),
                 helper.make_node("Add", ["p", "m"], ["s"]),
                 helper.make_node("Cast", ["s"], ["sf"],
                                  to=TensorProto.FLOAT),
                 helper.make_node("Add", ["x", "sf"], ["y"])]
        path = self.work("int-folds.onnx")
        onnx.save(helper.make_model(
            helper.make_graph(nodes, "g", [x], [y]),
            opset_imports=[helper.make_opsetid("", 17)]), path)
        r = subprocess.run([tool("strata-compile"), path, "--emit=graph"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        # 2^(2^62) wraps to 0, 3^5 = 243; (2^63-1)^2 wraps to 1, (-2^63)^2
        # to 0: the folded constant is [1, 243].
        self.assertIn("graph.constant dense<[1.000000e+00, 2.430000e+02]>",
                      r.stdout)

    def test_negative_token_ids_are_refused(self):
        art = self.work("negtok.strata")
        self.compile(art)
        rows = np.load(self.data)
        rows[1, 3] = -5
        path = self.work("negtok.npy")
        np.save(path, rows)
        err = fails([tool("strata-run"), art, "--data", path, "--steps", "1"])
        self.assertIn("negative token id", err)

    def test_a_10000_op_chain_compiles_and_trains(self):
        """A 10,000-op chain trained with SGD: every forward activation
        lives until its backward use, so all of them overlap. It must
        compile (the planner took ~20 s here when placement was quadratic;
        well under one now) and run. No wall-clock bound here: a loaded or
        sanitized machine would fail it; the planner's time against depth
        is measured by bench/planner_scaling.py. The ctest timeout still
        catches a planner gone badly quadratic."""
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        n = 10000
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
        w = numpy_helper.from_array(np.full(8, 0.5, np.float32), "w")
        nodes = [helper.make_node("Mul", ["x", "w"], ["h0"])]
        for i in range(n):
            nodes.append(helper.make_node("Tanh" if i % 2 else "Sigmoid",
                                          ["h%d" % i], ["h%d" % (i + 1)]))
        nodes.append(helper.make_node("ReduceMean", ["h%d" % n], ["y"],
                                      keepdims=0))
        graph = helper.make_graph(nodes, "chain", [x], [y], [w])
        path = self.work("chain.onnx")
        onnx.save(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        art = self.work("chain.strata")
        run([tool("strata-compile"), path, "-o", art,
             "--loss", "output", "--optimizer", "sgd"])
        xs = self.work("chain_x.npy")
        np.save(xs, np.ones((4, 8), np.float32))
        r = run([tool("strata-run"), art, "--input", "x=" + xs, "--steps",
                 "2", "--log-json", art + ".log", "--no-checkpoint",
                 "--quiet"])
        with open(art + ".log") as f:
            losses = [json.loads(line)["loss"] for line in f]
        self.assertEqual(len(losses), 2, r.stderr)
        self.assertTrue(all(np.isfinite(losses)), losses)

    def test_fifo_paths_are_errors_not_hangs(self):
        fifo = self.work("model.fifo")
        os.mkfifo(fifo)
        err = fails([tool("strata-compile"), fifo, "-o", self.work("f.o"),
                     "--input-shape", "input_ids=2x8"], timeout=20)
        self.assertIn("not a regular file", err)
        art = self.work("fifo.strata")
        self.compile(art)
        err = fails([tool("strata-run"), art, "--data", fifo, "--steps", "1"],
                    timeout=20)
        self.assertIn("not a regular file", err)


def main():
    global ARGS
    ARGS = harness.parse_args()
    harness.run_tests(verbosity=2)


if __name__ == "__main__":
    main()
