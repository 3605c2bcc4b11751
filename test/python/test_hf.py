"""HuggingFace weights out of Strata, run with pytest in .venv-models.

A LLaMA and a GPT-2 (tied embeddings) from transformers' modeling code,
exported with strata.hf.export, train three SGD steps through strata.Trainer
and, independently, in PyTorch. strata.hf.save_pretrained writes their
weights as safetensors; transformers' from_pretrained loads them with no
missing or unexpected keys, bit-identical to the trainer's parameters, and
its logits match the PyTorch-trained model's (rtol 1e-4). Sharded exports
load the same; a frozen parameter comes out as it went in; strata-export's
refusals name what is wrong and leave earlier files alone.

    PYTHONPATH=BUILD/python STRATA_BIN=BUILD/bin \\
      .venv-models/bin/python -m pytest test/python/test_hf.py
"""

import copy
import json
import os
import subprocess

import numpy as np
import pytest

# ctest runs this suite with .venv-models, where both must import: a
# failure here is a broken environment, never a skip.
import strata
import strata.hf
import torch
import transformers as T

SEQ, BATCH, STEPS, LR = 16, 2, 3, 0.1


def build(family):
    if family == "llama":
        config = T.LlamaConfig(vocab_size=96, hidden_size=32,
                               intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2,
                               max_position_embeddings=SEQ, use_cache=False)
        cls = T.LlamaForCausalLM
    else:
        config = T.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4,
                              n_positions=SEQ, use_cache=False,
                              resid_pdrop=0.0, embd_pdrop=0.0,
                              attn_pdrop=0.0)
        cls = T.GPT2LMHeadModel
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return cls, cls(config)


def rows(step):
    rng = np.random.default_rng(100 + step)
    return rng.integers(0, 96, size=(BATCH, SEQ + 1), dtype=np.int64)


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(ids)).logits.numpy()


def train(tmp_path, family, extra=()):
    """(model class, PyTorch-trained model, exported, artifact, trainer)."""
    cls, model = build(family)
    reference = copy.deepcopy(model)
    exported = strata.hf.export(model, str(tmp_path / "model.onnx"),
                                seq=SEQ)
    art = strata.compile(
        exported.path, str(tmp_path / "model.strata"),
        exported.compile_flags + list(extra) + [
            "--input-shape", "input_ids=%dx%d" % (BATCH, SEQ),
            "--optimizer", "sgd", "--lr", str(LR)])
    trainer = strata.Artifact(art).trainer(
        checkpoint_dir=str(tmp_path / "ckpt"))
    # The frozen initializers, by their names in the PyTorch model.
    frozen = {exported.names[n[len("--freeze="):]] for n in extra
              if n.startswith("--freeze=")}
    opt = torch.optim.SGD([p for n, p in reference.named_parameters()
                           if n not in frozen], lr=LR)
    reference.train()
    for step in range(STEPS):
        r = rows(step)
        trainer.step({"input_ids": r[:, :-1], "labels": r[:, 1:]})
        opt.zero_grad()
        out = reference(input_ids=torch.from_numpy(r[:, :-1])).logits
        torch.nn.functional.cross_entropy(
            out.reshape(-1, out.shape[-1]),
            torch.from_numpy(r[:, 1:]).reshape(-1)).backward()
        opt.step()
    trainer.save()
    return cls, reference, exported, art, trainer


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_trained_weights_load_with_from_pretrained(tmp_path, family):
    cls, reference, exported, art, trainer = train(tmp_path, family)
    out = tmp_path / "finetuned"
    strata.hf.save_pretrained(art, out, reference.config, exported,
                              checkpoint=trainer.checkpoint_file)
    assert sorted(os.listdir(out)) == ["config.json", "model.safetensors"]
    loaded, info = cls.from_pretrained(out, output_loading_info=True)
    assert info["missing_keys"] == [] and info["unexpected_keys"] == [], info
    trained = trainer.parameters()
    state = loaded.state_dict()
    compared = 0
    for onnx_name, key in exported.names.items():
        if onnx_name in trained:
            np.testing.assert_array_equal(state[key].numpy(),
                                          trained[onnx_name], err_msg=key)
            compared += 1
    assert compared == len(trained)
    ids = rows(99)[:, :-1]
    np.testing.assert_allclose(logits(loaded.eval(), ids),
                               logits(reference.eval(), ids),
                               rtol=1e-4, atol=1e-5)


def test_sharded_export_and_frozen_parameters(tmp_path):
    """Shards of at most 20 KB with an index load as one file does; the
    embedding, frozen, is written with its starting values."""
    embed = "m.model.embed_tokens.weight"
    cls, reference, exported, art, trainer = train(
        tmp_path, "llama", ["--freeze=" + embed])
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    for out, size in ((single, "5GB"), (sharded, "20KB")):
        strata.hf.save_pretrained(art, out, reference.config, exported,
                                  checkpoint=trainer.checkpoint_file,
                                  max_shard_size=size)
    files = sorted(os.listdir(sharded))
    shards = [f for f in files if f.endswith(".safetensors")]
    assert len(shards) > 1 and "model.safetensors.index.json" in files
    assert all(s.startswith("model-") and
               s.endswith("-of-%05d.safetensors" % len(shards))
               for s in shards)
    with open(sharded / "model.safetensors.index.json") as f:
        index = json.load(f)
    assert set(index["weight_map"]) == set(exported.names.values())
    from safetensors import safe_open
    total = 0
    for s in shards:
        with safe_open(str(sharded / s), "np") as f:
            assert f.metadata() == {"format": "pt"}
            for k in f.keys():
                assert index["weight_map"][k] == s
                total += f.get_tensor(k).nbytes
    assert total == index["metadata"]["total_size"]
    a = cls.from_pretrained(single).state_dict()
    b = cls.from_pretrained(sharded).state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    np.testing.assert_array_equal(
        a["model.embed_tokens.weight"].numpy(),
        reference.state_dict()["model.embed_tokens.weight"].numpy())
    ids = rows(98)[:, :-1]
    np.testing.assert_allclose(logits(cls.from_pretrained(sharded).eval(),
                                      ids),
                               logits(reference.eval(), ids),
                               rtol=1e-4, atol=1e-5)


def export_cli(*args):
    return subprocess.run([strata.tool("strata-export")] + list(args),
                          capture_output=True, text=True)


def test_export_refusals_name_what_is_wrong(tmp_path):
    cls, reference, exported, art, trainer = train(tmp_path, "llama")
    ckpt = ["--checkpoint", trainer.checkpoint_file]
    # Without --names: every initializer under its own (ONNX) name.
    plain = tmp_path / "plain"
    r = export_cli(art, "--format", "safetensors", "-o", str(plain), *ckpt)
    assert r.returncode == 0, r.stderr
    from safetensors import safe_open
    with safe_open(str(plain / "model.safetensors"), "np") as f:
        assert set(exported.names) <= set(f.keys())
    # A trained parameter left out of --names would be lost.
    names = dict(exported.names)
    dropped = sorted(n for n in names if "q_proj" in n)[0]
    del names[dropped]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(names))
    r = export_cli(art, "--format", "safetensors", "-o",
                   str(tmp_path / "x"), "--names", str(partial), *ckpt)
    assert r.returncode != 0 and "would lose" in r.stderr, r.stderr
    assert dropped in r.stderr
    assert not (tmp_path / "x" / "model.safetensors").exists()
    # A name that is no initializer; a map that is not an object.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(exported.names, nowhere="x")))
    r = export_cli(art, "--format", "safetensors", "-o", str(tmp_path / "x"),
                   "--names", str(bad), *ckpt)
    assert "'nowhere' is no initializer" in r.stderr, r.stderr
    bad.write_text("[1, 2")
    r = export_cli(art, "--format", "safetensors", "-o", str(tmp_path / "x"),
                   "--names", str(bad), *ckpt)
    assert r.returncode != 0 and str(bad) in r.stderr, r.stderr
    # A sharded export over an earlier single file would be shadowed by it:
    # refused, the earlier file intact.
    before = (plain / "model.safetensors").read_bytes()
    r = export_cli(art, "--format", "safetensors", "-o", str(plain),
                   "--names", exported.names_file, "--max-shard-size",
                   "20KB", *ckpt)
    assert r.returncode != 0 and "shadow" in r.stderr, r.stderr
    assert (plain / "model.safetensors").read_bytes() == before
    r = export_cli(art, "--format", "safetensors", "-o", str(plain),
                   "--max-shard-size", "0")
    assert r.returncode == 2 and "--max-shard-size" in r.stderr
    r = export_cli(art, "--format", "tflite", "-o", str(plain))
    assert r.returncode == 2 and "unknown --format" in r.stderr
