"""The models the tier benchmarks run: the README's example, or a generated
GPT-2 of a given width and depth, with its training data and input shape."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "models"))
import generate  # noqa: E402


def machine_profile(path, bin_dir, ssd_dir):
    """`path` when it exists; else this machine measured into it by
    strata-calibrate (with `ssd_dir` for the SSD rates), so that a benchmark
    plans for the machine it runs on without an earlier demo run. '' stays
    '' (the compiler's built-in defaults)."""
    if not path or os.path.exists(path):
        return path
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    os.makedirs(ssd_dir, exist_ok=True)
    print("calibrating this machine -> %s" % path, file=sys.stderr,
          flush=True)
    subprocess.run([os.path.join(bin_dir, "strata-calibrate"), "-o", path,
                    "--ssd-dir", ssd_dir], check=True,
                   stdout=subprocess.DEVNULL)
    return path


def model_and_data(out, dim=0, layers=4, vocab=8192):
    """(model path, data path, --input-shape) in `out`: the example model
    (gpt2-tiny, batch 8x32, its corpus) when dim is 0, else a GPT-2 of
    width `dim` and `layers` layers (batch 4x64, random tokens)."""
    if not dim:
        subprocess.run([sys.executable, os.path.join(
            ROOT, "examples", "gpt2-tiny", "make_model.py"), "--out", out],
            check=True, stdout=subprocess.DEVNULL)
        return (os.path.join(out, "gpt2-tiny.onnx"),
                os.path.join(out, "corpus.bin"), "input_ids=8x32")
    model = os.path.join(out, "gpt2-%d-%d.onnx" % (dim, layers))
    data = os.path.join(out, "data.npy")
    generated_gpt2(model, data, vocab, dim, layers, batch=4, rows=32)
    return model, data, "input_ids=4x64"


def module(family, vocab, dim, layers, ctx):
    """A generated model of `family` ("gpt2" or "llama": RMSNorm, rotary
    embeddings, SwiGLU, no biases) with heads of 64; the same weights on
    every call."""
    heads = max(1, dim // 64)
    if family == "llama":
        # The MLP's width as LLaMA sizes it: 2/3 of 4*dim, rounded to 32.
        hidden = (8 * dim // 3 + 31) // 32 * 32
        return generate.llama_module(vocab=vocab, ctx=ctx, dim=dim,
                                     heads=heads, layers=layers,
                                     hidden=hidden)
    return generate.gpt2_module(vocab=vocab, ctx=ctx, dim=dim, heads=heads,
                                layers=layers)


# Initializers of each family that are tables, not parameters (strata-compile
# --freeze them).
FROZEN = {"gpt2": [], "llama": ["rope_*"]}


def generated_model(family, model, data, vocab, dim, layers, batch, rows,
                    seq=64, ctx=128):
    """Exports a `family` model (context `ctx`) to `model` unless it is
    there, and writes `rows` random token windows of seq + 1 to `data`."""
    import numpy as np
    if not os.path.exists(model):
        m = module(family, vocab, dim, layers, ctx)
        n = sum(p.numel() for p in m.parameters())
        print("exporting a %.1fM-parameter %s" % (n / 1e6, family),
              file=sys.stderr)
        generate.export_torch(m, model, batch=batch, seq=seq, opset=17,
                              dynamic=True, fold=False)
    np.save(data, np.random.default_rng(0).integers(
        0, vocab, size=(rows, seq + 1)).astype(np.int64))


def generated_gpt2(model, data, vocab, dim, layers, batch, rows, seq=64,
                   ctx=128):
    """Exports a GPT-2 (context `ctx`, heads of 64) to `model` unless it is
    there, and writes `rows` random token windows of seq + 1 to `data`."""
    import numpy as np
    if not os.path.exists(model):
        module = generate.gpt2_module(vocab=vocab, ctx=ctx, dim=dim,
                                      heads=max(1, dim // 64), layers=layers)
        n = sum(p.numel() for p in module.parameters())
        print("exporting a %.1fM-parameter GPT-2" % (n / 1e6), file=sys.stderr)
        generate.export_torch(module, model, batch=batch, seq=seq, opset=17,
                              dynamic=True, fold=False)
    np.save(data, np.random.default_rng(0).integers(
        0, vocab, size=(rows, seq + 1)).astype(np.int64))


def torch_train_steps(module, rows, batch, seq, steps, optimizer):
    """Times `steps` training steps of `module` (ids [B, T] -> logits) in
    PyTorch eager on `rows` (batch i of step s: rows[(s*B + i) % len]),
    next-token cross-entropy; returns each step's seconds (the first left
    out) and the first step's loss."""
    import time
    import torch
    times, first = [], None
    for step in range(steps):
        idx = [(step * batch + i) % len(rows) for i in range(batch)]
        ids = torch.from_numpy(rows[idx, :seq])
        labels = torch.from_numpy(rows[idx, 1:seq + 1])
        start = time.perf_counter()
        optimizer.zero_grad()
        logits = module(ids)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        if first is None:
            first = loss.item()
    return times[1:], first
