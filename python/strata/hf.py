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
    `names_file` (the same map as JSON, beside the model)."""

    def __init__(self, path, frozen, names, names_file):
        self.path = path
        self.frozen = frozen
        self.names = names
        self.names_file = names_file

    @property
    def compile_flags(self):
        """--freeze for each frozen initializer."""
        flags = []
        for name in self.frozen:
            flags += ["--freeze", name]
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


def export(model, path, batch=2, seq=128, opset=17):
    """Exports a transformers causal LM (any model whose forward takes
    input_ids and returns logits first) to `path`; returns an Exported.
    The model is left as it was (its training flag and weights)."""
    import onnx
    import torch

    was_training = model.training
    wrapper = _Logits.wrap(model).train()
    ids = torch.zeros((batch, seq), dtype=torch.long)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapper, (ids,), path, input_names=["input_ids"],
                          output_names=["logits"], opset_version=opset,
                          do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING,
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"}})
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
    return Exported(str(path), sorted(frozen), names, names_file)


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
