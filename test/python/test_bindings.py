"""The Python bindings against the command-line tools, run with pytest.

A GPT-2-style model trains through strata.Trainer on batches fed from NumPy
exactly as strata-run trains it from the same rows: the losses, the
parameters (against strata-export) and a resumed run are bit-identical; a
forward artifact's outputs equal strata-run's; bad inputs are exceptions
that name what is wrong, and a second trainer on one artifact is refused.

    PYTHONPATH=BUILD/python STRATA_BIN=BUILD/bin python3 -m pytest test/python
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

# ctest registers this suite only where the bindings were built, so a
# module that does not import is a failure here, never a skip.
try:
    import strata
except ImportError as e:
    raise ImportError(
        "the Strata Python bindings do not import (%s): build them "
        "(pybind11-dev, ./scripts/install-deps.sh) and run with "
        "PYTHONPATH=BUILD/python" % e) from e

STEPS = 4
FLAGS = ["--optimizer", "adamw", "--lr", "0.003", "--weight-decay", "0.01",
         "--clip-grad-norm", "1.0"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    import generate
    work = tmp_path_factory.mktemp("model")
    meta = generate.generate(str(work), ["gpt2_dynamic"])[0]
    b, t = meta["output_shape"][:2]
    rows = np.random.default_rng(4).integers(
        0, 96, size=(b * STEPS, t + 1), dtype=np.int64)
    data = work / "rows.npy"
    np.save(data, rows)
    bind = []
    for spec in meta["bind"]:
        bind += ["--input-shape", spec]
    return {"path": meta["path"], "bind": bind, "rows": rows,
            "data": str(data), "work": work, "b": b, "t": t}


def compile_train(model, name):
    return strata.compile(model["path"], model["work"] / name,
                          model["bind"] + FLAGS)


def batch(model, step):
    b, t = model["b"], model["t"]
    r = model["rows"][step * b:(step + 1) * b]
    return {"input_ids": r[:, :t], "labels": r[:, 1:]}


def cli_losses(art, steps):
    log = art + ".log.jsonl"
    subprocess.run([strata.tool("strata-run"), art, "--data", MODEL_DATA[0],
                    "--steps", str(steps), "--log-json", log, "--quiet"],
                   check=True)
    with open(log) as f:
        return [np.float32(json.loads(line)["loss"]) for line in f]


MODEL_DATA = []


def test_training_matches_strata_run_bit_for_bit(model):
    MODEL_DATA[:] = [model["data"]]
    cli = compile_train(model, "cli.strata")
    want = cli_losses(cli, STEPS)
    art = strata.Artifact(compile_train(model, "py.strata"), backend="cpu")
    assert art.mode == "train"
    assert {name for name, _, _ in art.inputs} == {"input_ids", "labels"}
    trainer = art.trainer()
    got = []
    for step in range(STEPS):
        m = trainer.step(batch(model, step))
        assert m["step"] == step + 1
        assert np.isfinite(m["grad_norm"]) and m["lr"] > 0
        got.append(np.float32(m["loss"]))
    assert got == want
    assert trainer.completed_steps == STEPS
    # The weights, against strata-export of the command-line run.
    import onnx
    from onnx import numpy_helper
    out = cli + ".export.onnx"
    subprocess.run([strata.tool("strata-export"), cli, "-o", out],
                   check=True, capture_output=True)
    exported = {i.name: numpy_helper.to_array(i)
                for i in onnx.load(out).graph.initializer}
    weights = trainer.parameters()
    assert set(weights) <= set(exported) and len(weights) > 4
    for name, w in weights.items():
        np.testing.assert_array_equal(w, exported[name], err_msg=name)


def test_resume_continues_bit_for_bit(model):
    MODEL_DATA[:] = [model["data"]]
    want = cli_losses(compile_train(model, "whole.strata"), STEPS)
    path = compile_train(model, "resumed.strata")
    art = strata.Artifact(path, backend="cpu")
    first = art.trainer()
    got = [np.float32(first.step(batch(model, s))["loss"])
           for s in range(2)]
    first.save()
    assert os.path.exists(first.checkpoint_file)
    del first
    again = strata.Artifact(path, backend="cpu").trainer(resume=True)
    assert again.completed_steps == 2
    got += [np.float32(again.step(batch(model, s))["loss"])
            for s in range(2, STEPS)]
    assert got == want


def test_resume_by_name_from_another_plan(model):
    """A checkpoint taken up by a plan compiled with other placements
    (states in host memory) continues the same training."""
    MODEL_DATA[:] = [model["data"]]
    want = cli_losses(compile_train(model, "whole-byname.strata"), STEPS)
    path = compile_train(model, "first-byname.strata")
    first = strata.Artifact(path, backend="cpu").trainer()
    got = [np.float32(first.step(batch(model, s))["loss"])
           for s in range(2)]
    first.save()
    ckpt_dir = os.path.dirname(first.checkpoint_file)
    del first
    other = strata.compile(model["path"], model["work"] / "other-byname.strata",
                           model["bind"] + FLAGS + ["--place-states", "host"])
    with pytest.raises(RuntimeError, match="belongs to another plan"):
        strata.Artifact(other, backend="cpu").trainer(
            checkpoint_dir=ckpt_dir, resume=True)
    again = strata.Artifact(other, backend="cpu").trainer(
        checkpoint_dir=ckpt_dir, resume_by_name=True)
    assert again.completed_steps == 2
    got += [np.float32(again.step(batch(model, s))["loss"])
            for s in range(2, STEPS)]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_evaluate_matches_strata_run_and_changes_nothing(model, tmp_path):
    """trainer.evaluate: the held-out loss strata-run --eval-data logs for
    the same rows (one batch of them), bit for bit, with ignored labels;
    the steps around it train as without it."""
    MODEL_DATA[:] = [model["data"]]
    b, t = model["b"], model["t"]
    held = model["rows"][:b].copy()[:, ::-1].copy()
    labels = held.copy()
    labels[:, :2] = -100
    np.save(tmp_path / "held.npy", held)
    np.save(tmp_path / "held_labels.npy", labels)
    cli = compile_train(model, "eval_cli.strata")
    log = cli + ".log.jsonl"
    subprocess.run([strata.tool("strata-run"), cli, "--data", model["data"],
                    "--steps", "2", "--log-json", log, "--quiet",
                    "--eval-data", str(tmp_path / "held.npy"),
                    "--eval-labels", str(tmp_path / "held_labels.npy"),
                    "--eval-every", "1"], check=True)
    with open(log) as f:
        lines = [json.loads(line) for line in f]
    want = [np.float32(r["eval_loss"]) for r in lines if "eval_loss" in r]
    trainer = strata.Artifact(compile_train(model, "eval_py.strata"),
                              backend="cpu").trainer()
    got, losses = [], []
    for step in range(2):
        losses.append(np.float32(trainer.step(batch(model, step))["loss"]))
        got.append(np.float32(trainer.evaluate(
            {"input_ids": held[:, :t], "labels": labels[:, 1:]})))
    assert got == want
    assert losses == [np.float32(r["loss"]) for r in lines if "loss" in r]
    assert trainer.completed_steps == 2
    with pytest.raises(ValueError, match="every input"):
        trainer.evaluate({"input_ids": held[:, :t]})
    # A batch whose labels are all ignored: refused before it runs.
    with pytest.raises(ValueError, match="every label of the batch"):
        trainer.step({"input_ids": held[:, :t],
                      "labels": np.full((b, t), -100, np.int64)})
    assert trainer.completed_steps == 2


def test_forward_matches_strata_run(model, tmp_path):
    art_path = strata.compile(model["path"], tmp_path / "fwd.strata",
                              model["bind"] + ["--mode", "forward"])
    ids = model["rows"][:model["b"], :model["t"]]
    np.save(tmp_path / "ids.npy", ids)
    subprocess.run([strata.tool("strata-run"), art_path, "--input",
                    "input_ids=%s" % (tmp_path / "ids.npy"), "--output-dir",
                    str(tmp_path / "out"), "--quiet"], check=True)
    want = np.load(tmp_path / "out" / "logits.npy")
    # int32 ids are converted to the plan's int64, as np.asarray would.
    got = strata.Artifact(art_path, backend="cpu").run(
        {"input_ids": ids.astype(np.int32)})
    np.testing.assert_array_equal(got["logits"], want)


def test_bad_inputs_and_a_second_trainer_are_errors(model):
    art = strata.Artifact(compile_train(model, "errors.strata"),
                          backend="cpu")
    trainer = art.trainer()
    good = batch(model, 0)
    with pytest.raises(ValueError, match=r"input 'labels' has shape \[\d+, "
                       r"\d+\]; the plan takes"):
        trainer.step({"input_ids": good["input_ids"],
                      "labels": good["labels"][:, :-1]})
    with pytest.raises(KeyError, match="no input 'tokens'"):
        trainer.step({"tokens": good["input_ids"], "labels": good["labels"]})
    with pytest.raises(ValueError, match="every input"):
        trainer.step({"input_ids": good["input_ids"]})
    assert trainer.completed_steps == 0  # Nothing ran.
    with pytest.raises(RuntimeError, match="lock|in use|training"):
        strata.Artifact(compile_train(model, "errors.strata"),
                        backend="cpu")  # recompiling under a live trainer
    with pytest.raises(RuntimeError, match="is a forward plan|training"):
        art.run(good)
    with pytest.raises(strata.CompileError, match="bind"):
        strata.compile(model["path"], model["work"] / "unbound.strata", [])
