#!/usr/bin/env python3
"""A training step (AdamW) of generated GPT-2 and LLaMA models in Strata with fusion
on and off (strata-compile --fusion), in ONNX Runtime Training and in
PyTorch eager, interleaved.

    /usr/bin/python3 bench/fusion.py [--bin build/bin] [--steps 6]
        [--rounds 3] [--models d512,gpt2-small,llama-d512] [--out FILE]
        [--ort-python .venv-bench/bin/python]

ONNX Runtime Training runs under the benchmark environment's Python
(scripts/install-deps.sh --bench makes .venv-bench with the pinned
onnxruntime-training; bench/ort_train.py); without it that column says so.

Per model: the median step time of each (steps 2.. of each run, rounds
interleaved), and Strata's kernel profile from a trace of two steps with
fusion on and off: kernels a step, and the share of the step's kernel time
in matrix products, in the GELU, in fused attention and in elementwise
kernels (fused chains included).
"""
import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import benchmodels

# name: (family, width, layers, batch, sequence); the vocabulary is VOCAB
# (GPT-2's own 50257 would make the output layer most of the step on 2
# cores).
MODELS = {
    "d512": ("gpt2", 512, 6, 4, 128),
    "gpt2-small": ("gpt2", 768, 12, 2, 256),
    "llama-d512": ("llama", 512, 6, 4, 128),
}
TITLE = {"gpt2": "GPT-2", "llama": "LLaMA"}
VOCAB = 8192
ELEMENTWISE = {"add", "sub", "mul", "div", "pow", "tanh", "erf", "exp",
               "neg", "sqrt", "reciprocal", "sigmoid", "relu", "select",
               "cast", "max", "min", "abs", "log", "sin", "cos",
               "elementwise"}


def strata_steps(tool, art, data, steps):
    log = art + ".log.jsonl"
    if os.path.exists(log):
        os.remove(log)
    subprocess.run([tool("strata-run"), art, "--data", data, "--steps",
                    str(steps), "--log-json", log, "--quiet",
                    "--no-checkpoint"], check=True)
    with open(log) as f:
        return [json.loads(line)["step_s"] for line in f][1:]


def profile(tool, art, data):
    """(kernels a step, {class: share of kernel time}) from a trace."""
    trace = art + ".trace.json"
    subprocess.run([tool("strata-run"), art, "--data", data, "--steps", "2",
                    "--trace", trace, "--trace-steps", "2", "--quiet",
                    "--no-checkpoint"], check=True)
    events = [e for e in json.load(open(trace))["traceEvents"]
              if e.get("ph") == "X" and e.get("tid") == 1]
    time_by = collections.Counter()
    for e in events:
        name = e.get("cat") or e["name"]
        kind = ("matmul" if name == "matmul" else
                "attention" if name.startswith("attention") else
                "gelu" if name.startswith("gelu") else
                "elementwise" if name in ELEMENTWISE else "other")
        time_by[kind] += e["dur"]
    total = sum(time_by.values()) or 1
    return len(events) / 2, {k: v / total for k, v in time_by.items()}


def torch_steps(family, dim, layers, batch, seq, data, steps):
    import numpy as np
    import torch
    torch.set_num_threads(os.cpu_count())
    module = benchmodels.module(family, VOCAB, dim, layers, max(128, seq))
    opt = torch.optim.AdamW(module.parameters(), lr=1e-4)
    return benchmodels.torch_train_steps(module, np.load(data), batch, seq,
                                         steps, opt)[0]


def ort_steps(python, family, dim, layers, batch, seq, data, steps):
    r = subprocess.run([python, os.path.join(benchmodels.ROOT, "bench",
                                             "ort_train.py"),
                        "--family", family, "--dim", str(dim), "--layers", str(layers),
                        "--batch", str(batch), "--seq", str(seq),
                        "--vocab", str(VOCAB), "--data", data,
                        "--steps", str(steps)],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])["step_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="d512,gpt2-small,llama-d512")
    ap.add_argument("--out")
    ap.add_argument("--ort-python",
                    default=os.path.join(benchmodels.ROOT, ".venv-bench",
                                         "bin", "python"))
    a = ap.parse_args()
    ort = os.path.exists(a.ort_python)
    if not ort:
        print("no ONNX Runtime Training (%s): scripts/install-deps.sh "
              "--bench installs it" % a.ort_python, file=sys.stderr)
    tool = lambda n: os.path.join(a.bin, n)
    work = tempfile.mkdtemp(prefix="strata-fusion-")
    lines = ["# Fusion: a training step (AdamW) with fusion on and off, "
             "ONNX Runtime Training and PyTorch eager (%d steps, medians of "
             "%d interleaved rounds)" %
             (a.steps, a.rounds), "",
             "`/usr/bin/python3 bench/fusion.py --models %s`" % a.models, "",
             "| model | Strata fusion on (s) | Strata fusion off (s) | "
             "ONNX Runtime Training (s) | PyTorch eager (s) | Strata vs ORT "
             "| kernels a step (on / off) | matmul share (on / off) | GELU / "
             "attention share (on) | elementwise share (on / off) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    try:
        for name in a.models.split(","):
            family, dim, layers, batch, seq = MODELS[name]
            model = os.path.join(work, "%s.onnx" % name)
            data = os.path.join(work, "%s.npy" % name)
            benchmodels.generated_model(family, model, data, VOCAB, dim,
                                        layers, batch=batch, rows=4 * batch,
                                        seq=seq, ctx=max(128, seq))
            freeze = []
            for glob in benchmodels.FROZEN[family]:
                freeze += ["--freeze", glob]
            arts = {}
            for fusion in ("on", "off"):
                arts[fusion] = os.path.join(work, "%s-%s.strata" %
                                            (name, fusion))
                shutil.rmtree(arts[fusion], ignore_errors=True)
                subprocess.run([tool("strata-compile"), model, "-o",
                                arts[fusion], "--input-shape",
                                "input_ids=%dx%d" % (batch, seq),
                                "--optimizer", "adamw", "--lr", "1e-4",
                                "--fusion", fusion] + freeze, check=True)
            times = collections.defaultdict(list)
            for r in range(a.rounds):
                for fusion in ("on", "off"):
                    t = strata_steps(tool, arts[fusion], data, a.steps)
                    times[fusion] += t
                    print("%s fusion %s round %d %.3f s" %
                          (name, fusion, r + 1, statistics.median(t)),
                          file=sys.stderr)
                t = torch_steps(family, dim, layers, batch, seq, data,
                                a.steps)
                times["torch"] += t
                print("%s torch round %d %.3f s" %
                      (name, r + 1, statistics.median(t)), file=sys.stderr)
                if ort:
                    t = ort_steps(a.ort_python, family, dim, layers, batch,
                                  seq, data, a.steps)
                    times["ort"] += t
                    print("%s onnxruntime-training round %d %.3f s" %
                          (name, r + 1, statistics.median(t)),
                          file=sys.stderr)
            prof = {f: profile(tool, arts[f], data) for f in ("on", "off")}
            med = {k: statistics.median(v) for k, v in times.items()}
            share = lambda f, k: "%.0f%%" % (100 * prof[f][1].get(k, 0))
            vs = ("%.2fx (ORT's step / Strata's)" % (med["ort"] / med["on"])
                  if ort else "-")
            lines.append(
                "| %s d%d L%d B%dxT%d | %.3f | %.3f | %s | %.3f | %s | "
                "%d / %d | %s / %s | %s | %s / %s |" %
                (TITLE[family], dim, layers, batch, seq, med["on"], med["off"],
                 "%.3f" % med["ort"] if ort else "not installed",
                 med["torch"], vs, prof["on"][0], prof["off"][0],
                 share("on", "matmul"), share("off", "matmul"),
                 share("on", "gelu") + " / " + share("on", "attention"),
                 share("on", "elementwise"),
                 share("off", "elementwise")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
