#!/usr/bin/env python3
"""Training steps of transformers' Mixtral (8 experts, top-2 routing by
NonZero on the data path) in Strata, grouped and compacted against run
densely, and in PyTorch eager.

The model is MixtralForCausalLM from the pinned transformers (random
weights from a small config, nothing from a hub), exported to ONNX once.
Strata compiles it three times:

  grouped  the default: the experts of a router recognised as one
           computation over one buffer of tokens x top-k rows, ordered
           expert by expert at run time, their products one grouped
           product (each expert's rows by its own weights)
  compact  --nonzero-rows=compact: each expert's candidate rows (tokens x
           top-k of them, NonZero's bound) ordered real-first at run time,
           its products stopping at the count (about tokens x top-k /
           experts), the rest of its row-wise work over all candidates
  bound    --nonzero-rows=bound: the exported per-expert graph run densely,
           every expert's products over all its candidate rows, masked

and PyTorch eager runs the same module (transformers' own dispatch: index
ops per expert). AdamW, the same data; rounds interleave the four and the
table quotes medians of the steps after each run's first. The losses of the
first step are compared too (the same weights: they must agree).

Runs under .venv-models (scripts/install-deps.sh --models):

    .venv-models/bin/python bench/moe.py [--experts 8] [--dim 256]
        [--hidden 512] [--layers 2] [--batch 4] [--seq 128] [--steps 6]
        [--rounds 3] [--out FILE.md]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import benchmodels  # noqa: E402

VOCAB = 8192
MODES = ("grouped", "compact", "bound")


def model(a):
    import torch
    import transformers as T
    torch.manual_seed(0)
    cfg = T.MixtralConfig(vocab_size=VOCAB, hidden_size=a.dim,
                          intermediate_size=a.hidden,
                          num_hidden_layers=a.layers, num_attention_heads=8,
                          num_key_value_heads=4, num_local_experts=a.experts,
                          num_experts_per_tok=a.top_k,
                          max_position_embeddings=max(128, a.seq),
                          use_cache=False, attention_dropout=0.0)
    cfg._attn_implementation = "eager"
    m = T.MixtralForCausalLM(cfg)

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, return_dict=False)[0]

    return Logits()


def strata_steps(bin_dir, art, data, steps):
    log = art + ".log.jsonl"
    if os.path.exists(log):
        os.remove(log)
    subprocess.run([os.path.join(bin_dir, "strata-run"), art, "--data", data,
                    "--steps", str(steps), "--log-json", log, "--quiet",
                    "--no-checkpoint"], check=True)
    with open(log) as f:
        lines = [json.loads(line) for line in f]
    return [x["step_s"] for x in lines][1:], lines[0]["loss"]


def torch_steps(module, rows, batch, seq, steps):
    import copy
    import torch
    torch.set_num_threads(os.cpu_count())
    m = copy.deepcopy(module).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.0)
    return benchmodels.torch_train_steps(m, rows, batch, seq, steps, opt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work")
    ap.add_argument("--out", help="markdown table (default: stdout)")
    a = ap.parse_args()
    if a.experts < 8:
        print("moe.py: note: fewer than 8 experts", file=sys.stderr)
    warnings.filterwarnings("ignore")
    import torch
    work = a.work or tempfile.mkdtemp(prefix="strata-moe-")
    os.makedirs(work, exist_ok=True)
    module = model(a).eval()
    params = sum(p.numel() for p in module.parameters())
    rng = np.random.default_rng(0)
    rows = rng.integers(0, VOCAB, size=(a.batch * a.steps, a.seq + 1),
                        dtype=np.int64)
    data = os.path.join(work, "data.npy")
    np.save(data, rows)
    path = os.path.join(work, "mixtral.onnx")
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(rows[:a.batch, :a.seq]),),
                          path, input_names=["input_ids"],
                          output_names=["logits"], opset_version=17,
                          do_constant_folding=False)
    arts = {}
    for mode in MODES:
        arts[mode] = os.path.join(work, mode + ".strata")
        subprocess.run([os.path.join(a.bin, "strata-compile"), path, "-o",
                        arts[mode], "--optimizer", "adamw", "--lr", "1e-4",
                        "--weight-decay", "0", "--nonzero-rows", mode],
                       check=True)
    times = {m: [] for m in MODES + ("torch",)}
    first = {}
    for r in range(a.rounds):
        for mode in MODES:
            t, loss = strata_steps(a.bin, arts[mode], data, a.steps)
            times[mode] += t
            first[mode] = loss
        t, loss = torch_steps(module, rows, a.batch, a.seq, a.steps)
        times["torch"] += t
        first["torch"] = loss
        print("round %d: %s" % (r + 1, ", ".join(
            "%s %.3f s" % (k, statistics.median(v[-(a.steps - 1):]))
            for k, v in times.items())), file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    tokens = a.batch * a.seq
    lines = [
        "Mixtral (transformers %s), %d layers, dim %d, %d experts of %d, "
        "top-%d, vocab %d: %.1fM parameters; batch %d x %d tokens; AdamW; "
        "%d rounds of %d steps, medians of the steps after each run's "
        "first. Command: `.venv-models/bin/python bench/moe.py%s`" % (
            __import__("transformers").__version__, a.layers, a.dim,
            a.experts, a.hidden, a.top_k, VOCAB, params / 1e6, a.batch,
            a.seq, a.rounds, a.steps,
            "".join(" --%s %s" % (k.replace("_", "-"), v) for k, v in
                    sorted(vars(a).items()) if k in (
                        "experts", "top_k", "dim", "hidden", "layers",
                        "batch", "seq", "steps", "rounds"))),
        "",
        "| run | step (median) | tokens/s | vs grouped | first loss |",
        "|---|---:|---:|---:|---:|"]
    label = {"grouped": "Strata, grouped experts (default)",
             "compact": "Strata, --nonzero-rows=compact (per expert)",
             "bound": "Strata, --nonzero-rows=bound (dense, masked)",
             "torch": "PyTorch eager (transformers' dispatch)"}
    for k in MODES + ("torch",):
        lines.append("| %s | %.3f s | %.0f | %.2fx | %.6f |" % (
            label[k], med[k], tokens / med[k], med[k] / med["grouped"],
            first[k]))
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)
    # All ran the same weights on the same batch: the same loss.
    spread = max(first.values()) - min(first.values())
    if spread > 1e-3 * abs(first["torch"]):
        print("moe.py: the first losses differ by %.3g" % spread,
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
