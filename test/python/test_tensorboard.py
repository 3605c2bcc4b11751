"""strata-run --tensorboard, read back with TensorBoard's own reader.

Run with pytest in .venv-models (tensorboard pinned there):
training with held-out evaluation writes an event file whose scalars
(train/loss, train/learning_rate, train/grad_norm, train/tokens_per_s,
train/step_s, eval/loss, eval/perplexity) are the --log-json values at
the same steps, as float32; a resumed run adds a file of its own.

    PYTHONPATH=BUILD/python STRATA_BIN=BUILD/bin \\
      .venv-models/bin/python -m pytest test/python/test_tensorboard.py
"""

import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

import strata  # noqa: E402
from tensorboard.backend.event_processing import event_accumulator  # noqa


def scalars(directory):
    acc = event_accumulator.EventAccumulator(
        str(directory), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


def test_event_files_hold_the_logged_scalars(tmp_path):
    import generate
    meta = generate.generate(str(tmp_path), ["gpt2_dynamic"])[0]
    b, t = meta["output_shape"][:2]
    rng = np.random.default_rng(2)
    np.save(tmp_path / "rows.npy", rng.integers(0, 96, size=(4 * b, t + 1)))
    np.save(tmp_path / "held.npy", rng.integers(0, 96, size=(b + 1, t + 1)))
    bind = []
    for spec in meta["bind"]:
        bind += ["--input-shape", spec]
    art = strata.compile(meta["path"], tmp_path / "tb.strata",
                         bind + ["--optimizer", "adamw", "--lr", "0.01",
                                 "--clip-grad-norm", "1.0",
                                 "--lr-schedule", "cosine", "--warmup-steps",
                                 "2", "--total-steps", "6"])
    tb, log = tmp_path / "runs", tmp_path / "log.jsonl"
    common = [strata.tool("strata-run"), art, "--data",
              str(tmp_path / "rows.npy"), "--eval-data",
              str(tmp_path / "held.npy"), "--eval-every", "2",
              "--tensorboard", str(tb), "--log-json", str(log), "--quiet"]
    subprocess.run(common + ["--steps", "4"], check=True)
    subprocess.run(common + ["--steps", "6", "--resume"], check=True)
    files = [f for f in os.listdir(tb) if "tfevents" in f]
    assert len(files) == 2, files
    with open(log) as f:
        lines = [json.loads(line) for line in f]
    got = scalars(tb)
    steps = [r for r in lines if "loss" in r]
    evals = [r for r in lines if "eval_loss" in r]
    assert [s for s, _ in got["train/loss"]] == list(range(1, 7))
    for tag, key in (("train/loss", "loss"), ("train/learning_rate", "lr"),
                     ("train/grad_norm", "grad_norm")):
        assert [v for _, v in got[tag]] == \
            [np.float32(r[key]) for r in steps], tag
    # The log rounds these (to 1 us, to 0.1 token/s).
    np.testing.assert_allclose([v for _, v in got["train/step_s"]],
                               [r["step_s"] for r in steps], atol=1e-6)
    np.testing.assert_allclose([v for _, v in got["train/tokens_per_s"]],
                               [r["tokens_per_s"] for r in steps], atol=0.1,
                               rtol=1e-6)
    assert [s for s, _ in got["eval/loss"]] == [2, 4, 6]
    # The mean is a double: float32 in the file, 9 digits in the log.
    np.testing.assert_allclose([v for _, v in got["eval/loss"]],
                               [r["eval_loss"] for r in evals], rtol=1e-6)
    np.testing.assert_allclose([v for _, v in got["eval/perplexity"]],
                               [r["eval_ppl"] for r in evals], rtol=1e-6)


def test_an_unwritable_directory_is_an_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    import generate
    meta = generate.generate(str(tmp_path), ["gpt2_dynamic"])[0]
    bind = []
    for spec in meta["bind"]:
        bind += ["--input-shape", spec]
    art = strata.compile(meta["path"], tmp_path / "tb.strata",
                         bind + ["--optimizer", "sgd"])
    b, t = meta["output_shape"][:2]
    np.save(tmp_path / "rows.npy", np.zeros((b, t + 1), np.int64))
    r = subprocess.run([strata.tool("strata-run"), art, "--data",
                        str(tmp_path / "rows.npy"), "--steps", "1",
                        "--tensorboard", str(blocker / "runs")],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert str(blocker) in r.stderr, r.stderr
