"""HuggingFace transformers models in and out of Strata.

    import strata, strata.hf
    exported = strata.hf.export(model, "model.onnx", seq=512)
    strata.compile(exported.path, "model.strata",
                   exported.compile_flags + ["--input-shape",
                                             "input_ids=8x512", ...])
    ...train...
    strata.hf.save_pretrained("model.strata", "finetuned/", model.config,
                              exported)
    model = AutoModelForCausalLM.from_pretrained("finetuned/")

export() writes the ONNX the way Strata trains it: ids -> logits, in
training mode (the exporter otherwise merges parameters of equal values,
such as freshly initialised norms, into one initializer that would then
train as one), without constant folding (which copies transposed weights
into new, unnamed tensors), with dynamic batch and sequence axes. It
returns the initializers to freeze (float tensors that are not
parameters: rotary tables, masks) and the map from initializer names to
the model's own state_dict names, which save_pretrained gives strata-export
to write safetensors that from_pretrained loads unchanged.
"""

import json
import os
import subprocess
import warnings

from . import tool

__all__ = ["Exported", "export", "save_pretrained"]


class Exported:
    """What export() wrote: `path` (the ONNX model), `frozen` (initializer
    names to pass as --freeze), `names` ({initializer: state_dict name}),
    `names_file` (the same map as JSON, beside the model), `inputs` (the
    model's input names)."""

    def __init__(self, path, frozen, names, names_file, inputs):
        self.path = path
        self.frozen = frozen
        self.names = names
        self.names_file = names_file
        self.inputs = inputs

    @property
    def compile_flags(self):
        """--freeze for each frozen initializer."""
        flags = []
        for name in self.frozen:
            flags += ["--freeze", name]
        return flags

    def input_shapes(self, batch, seq):
        """--input-shape for each input at [batch, seq]."""
        flags = []
        for name in self.inputs:
            flags += ["--input-shape", "%s=%dx%d" % (name, batch, seq)]
        return flags


class _Logits:
    """Built lazily: torch is imported only when exporting."""

    @staticmethod
    def wrap(model):
        import torch

        class Logits(torch.nn.Module):
            """input_ids -> logits (Strata's --loss causal-lm computes the
            loss); the model's parameters under the prefix "m."."""

            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids):
                return self.m(input_ids=input_ids, return_dict=False)[0]

        return Logits(model)

    @staticmethod
    def wrap_packed(model, inverted):
        """(input_ids, position_ids, segment_ids) -> logits: a token attends
        to the earlier tokens of its own segment only, through the 4D
        attention mask the model takes (1 = attend, or with `inverted` 0 =
        attend and the dtype's minimum = masked, as transformers versions
        differ), and its position restarts with each segment."""
        import torch

        class Packed(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids, position_ids, segment_ids):
                t = input_ids.shape[1]
                pos = torch.arange(t, device=input_ids.device)
                allowed = (segment_ids[:, :, None] == segment_ids[:, None, :]) \
                    & (pos[None, :] <= pos[:, None])[None]
                dtype = torch.float32
                if inverted:
                    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(
                        ~allowed, torch.finfo(dtype).min)
                else:
                    mask = allowed.to(dtype)
                return self.m(input_ids=input_ids, attention_mask=mask[:, None],
                              position_ids=position_ids,
                              return_dict=False)[0]

        return Packed(model)


def _packed_convention(model):
    """Which 4D-mask convention makes `model` compute two packed segments
    as it computes each alone; raises if neither does (the model takes no
    4D attention mask)."""
    import torch
    vocab = model.get_input_embeddings().num_embeddings
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, 7), generator=g)
    seg = torch.tensor([[0, 0, 0, 1, 1, 1, 1]])
    pos = torch.tensor([[0, 1, 2, 0, 1, 2, 3]])
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            alone = torch.cat([
                model(input_ids=ids[:, :3], return_dict=False)[0],
                model(input_ids=ids[:, 3:], return_dict=False)[0]], dim=1)
            for inverted in (False, True):
                try:
                    got = _Logits.wrap_packed(model, inverted)(ids, pos, seg)
                except Exception:  # noqa: BLE001 - the convention's error
                    continue
                if torch.allclose(got, alone, rtol=1e-4, atol=1e-5):
                    return inverted
    finally:
        model.train(was_training)
    raise RuntimeError(
        "%s does not compute packed segments as it computes them alone with "
        "a 4D attention mask and position_ids (LLaMA, Mistral and Qwen2 in "
        "transformers do); export it without packing=True"
        % type(model).__name__)


def export(model, path, batch=2, seq=128, opset=17, packing=False):
    """Exports a transformers causal LM (any model whose forward takes
    input_ids and returns logits first) to `path`; returns an Exported.
    With packing=True the model takes position_ids and segment_ids beside
    input_ids (strata.data.pack_rows makes them): several examples share a
    row, each attending to itself alone, its positions from 0. The model is
    left as it was (its training flag and weights)."""
    import onnx
    import torch

    was_training = model.training
    if packing:
        wrapper = _Logits.wrap_packed(model, _packed_convention(model))
        inputs = ["input_ids", "position_ids", "segment_ids"]
    else:
        wrapper = _Logits.wrap(model)
        inputs = ["input_ids"]
    wrapper.train()
    dummy = tuple(torch.zeros((batch, seq), dtype=torch.long) for _ in inputs)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapper, dummy, path, input_names=inputs,
                          output_names=["logits"], opset_version=opset,
                          do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING,
                          dynamic_axes={n: {0: "batch", 1: "seq"}
                                        for n in inputs})
    model.train(was_training)
    params = {n for n, _ in wrapper.named_parameters()}
    state = set(model.state_dict().keys())
    initializers = onnx.load(path, load_external_data=False).graph.initializer
    frozen, names = [], {}
    for init in initializers:
        if init.name not in params and init.data_type in (1, 10, 11, 16):
            frozen.append(init.name)
        key = init.name[len("m."):] if init.name.startswith("m.") else None
        if key in state:
            names[init.name] = key
    missing = sorted(n[len("m."):] for n in params if n not in names)
    if missing:
        raise RuntimeError(
            "the exported model has no initializer for the parameters %s "
            "(renamed by the exporter?)" % ", ".join(missing[:5]))
    names_file = str(path) + ".names.json"
    with open(names_file, "w") as f:
        json.dump(names, f, indent=1, sort_keys=True)
    return Exported(str(path), sorted(frozen), names, names_file, inputs)


def save_pretrained(artifact, out_dir, config, exported, checkpoint=None,
                    max_shard_size="5GB"):
    """Writes the trained weights of `artifact` (its latest checkpoint, or
    `checkpoint`) into `out_dir` as transformers' save_pretrained would:
    model.safetensors (or shards with model.safetensors.index.json) under
    the model's own names, and `config` (config.json, through
    config.save_pretrained). `exported` is export()'s result, or the path of
    its names file. Returns out_dir."""
    names_file = exported if isinstance(exported, str) else \
        exported.names_file
    cmd = [tool("strata-export"), str(artifact), "--format", "safetensors",
           "-o", str(out_dir), "--names", names_file,
           "--max-shard-size", str(max_shard_size)]
    if checkpoint:
        cmd += ["--checkpoint", str(checkpoint)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    os.makedirs(out_dir, exist_ok=True)
    config.save_pretrained(out_dir)
    return str(out_dir)
