#!/usr/bin/env python3
"""Times training steps of a generated GPT-2 or LLaMA in ONNX Runtime Training, the
peer bench/fusion.py measures Strata against. Runs under the benchmark
environment's Python (scripts/install-deps.sh --bench: .venv-bench, with
the pinned onnxruntime-training), which also sees Debian's torch and onnx.

    .venv-bench/bin/python bench/ort_train.py [--family gpt2|llama] \
        --dim 512 --layers 6 --batch 4 --seq 128 --vocab 8192 \
        --data DATA.npy --steps 6

Prints one JSON line: {"step_s": [...], "loss": [...]} (the first step
left out of step_s). The model is the one bench/fusion.py exports for
Strata (same initialisation, same weights), with its logits flattened to
[B*T, V] for ORT's cross-entropy loss block; AdamW at lr 1e-4.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchmodels  # noqa: E402
import generate  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in ("dim", "layers", "batch", "seq", "vocab", "steps"):
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--family", default="gpt2", choices=["gpt2", "llama"])
    a = ap.parse_args()
    import onnx
    import onnxruntime
    import torch
    onnxruntime.set_default_logger_severity(3)  # Warnings and up.
    from onnxruntime.training import artifacts
    from onnxruntime.training.api import CheckpointState, Module, Optimizer

    work = tempfile.mkdtemp(prefix="strata-ort-")
    net = benchmodels.module(a.family, a.vocab, a.dim, a.layers,
                             max(128, a.seq))
    # The same initialisation as the Strata export (generate.export_torch).
    generate.export_torch(net, os.path.join(work, "strata.onnx"),
                          batch=a.batch, seq=a.seq, opset=17, dynamic=False,
                          fold=True)

    class Flat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, ids):
            logits = self.net(ids)
            return logits.reshape(-1, logits.shape[-1])

    path = os.path.join(work, "flat.onnx")
    ids = torch.zeros((a.batch, a.seq), dtype=torch.long)
    with torch.no_grad():
        torch.onnx.export(Flat(), (ids,), path, input_names=["input_ids"],
                          output_names=["logits"], opset_version=17,
                          do_constant_folding=False)
    model = onnx.load(path)
    # ORT's LayerNormalization gradient reads the forward pass's mean and
    # inverse deviation: name the node's optional outputs.
    for node in model.graph.node:
        if node.op_type == "LayerNormalization" and len(node.output) == 1:
            node.output.extend([node.output[0] + "_mean",
                                node.output[0] + "_inv_std"])
    trainable = {n for n, _ in Flat().named_parameters()}
    requires_grad = [i.name for i in model.graph.initializer
                     if i.name in trainable]
    frozen = [i.name for i in model.graph.initializer
              if i.name not in trainable]
    artifacts.generate_artifacts(
        model, requires_grad=requires_grad, frozen_params=frozen,
        loss=artifacts.LossType.CrossEntropyLoss,
        optimizer=artifacts.OptimType.AdamW, artifact_directory=work)
    state = CheckpointState.load_checkpoint(os.path.join(work, "checkpoint"))
    module = Module(os.path.join(work, "training_model.onnx"), state,
                    os.path.join(work, "eval_model.onnx"), device="cpu")
    opt = Optimizer(os.path.join(work, "optimizer_model.onnx"), module)
    opt.set_learning_rate(1e-4)
    module.train()
    rows = np.load(a.data)
    times, losses = [], []
    for step in range(a.steps):
        idx = [(step * a.batch + i) % len(rows) for i in range(a.batch)]
        x = np.ascontiguousarray(rows[idx, :a.seq])
        y = np.ascontiguousarray(rows[idx, 1:a.seq + 1]).reshape(-1)
        start = time.perf_counter()
        loss = module(x, y)
        opt.step()
        module.lazy_reset_grad()
        times.append(time.perf_counter() - start)
        losses.append(float(loss))
    print(json.dumps({"step_s": times[1:], "loss": losses}))


if __name__ == "__main__":
    main()
