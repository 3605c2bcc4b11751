#!/usr/bin/env python3
"""How well the compiler's step-time prediction matches a measured step.

Calibrates this machine (strata-calibrate, unless --profile is given),
compiles one GPT-2-style model (about 7M parameters by default) under several
placements -- everything on the device, parameters and optimizer state on
host, on SSD, activations swapped to SSD, and an automatic plan under tight
device and host budgets -- runs each for a few steps and prints the measured median
step next to the predicted one. Prints a Markdown table.

    bench/predict_accuracy.py [--build build] [--steps 8] [--ssd-dir DIR]
                              [--profile FILE] [--dim 256] [--layers 4]
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "models"))
import generate  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--ssd-dir", default=None)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8192)
    args = parser.parse_args()
    out = os.path.join(args.build, "bench", "predict")
    os.makedirs(out, exist_ok=True)
    ssd = args.ssd_dir or os.path.join(out, "ssd")
    bin_dir = os.path.join(args.build, "bin")

    profile = args.profile
    if profile is None:
        profile = os.path.join(out, "profile.txt")
        subprocess.run([os.path.join(bin_dir, "strata-calibrate"), "-o",
                        profile, "--ssd-dir", ssd], check=True,
                       stdout=subprocess.DEVNULL)

    model = os.path.join(out, "gpt2-%d-%d.onnx" % (args.dim, args.layers))
    if not os.path.exists(model):
        module = generate.gpt2_module(vocab=args.vocab, ctx=128, dim=args.dim,
                                      heads=max(1, args.dim // 64),
                                      layers=args.layers)
        n = sum(p.numel() for p in module.parameters())
        print("exporting a %.1fM-parameter GPT-2" % (n / 1e6), file=sys.stderr)
        generate.export_torch(module, model, batch=4, seq=64, opset=17,
                              dynamic=True, fold=False)
    import numpy as np
    data = os.path.join(out, "data.npy")
    np.save(data, np.random.default_rng(0).integers(
        0, args.vocab, size=(32, 65)).astype(np.int64))

    configs = [
        ("all on device", []),
        ("params+states on host",
         ["--place-params", "host", "--place-states", "host"]),
        ("params+states on SSD",
         ["--place-params", "ssd", "--place-states", "ssd"]),
        ("activations swapped to SSD", ["--place-activations", "ssd"]),
        ("auto: device 1/2, host 1/8 of the total",
         ["--gpu-mem", "auto-budget"]),
    ]
    rows = []
    for name, flags in configs:
        art = os.path.join(out, re.sub(r"\W+", "-", name) + ".strata")
        base = [os.path.join(bin_dir, "strata-compile"), model,
                "--input-shape", "input_ids=4x64", "--optimizer", "adamw",
                "--lr", "1e-4", "--profile", profile, "--ssd-dir", ssd,
                "-o", art]
        if "auto-budget" in flags:
            # Half the all-on-device plan's total on the device, an eighth
            # on host, the rest on SSD.
            rep = subprocess.run(base + ["--report"], capture_output=True,
                                 text=True, check=True).stdout
            total = re.search(r"total\s+([\d.]+) (KiB|MiB|GiB)", rep)
            scale = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
            budget = float(total.group(1)) * scale[total.group(2)]
            flags = ["--gpu-mem", str(int(budget / 2)),
                     "--cpu-mem", str(int(budget / 8))]
        subprocess.run(base + flags, capture_output=True, text=True,
                       check=True)
        run = subprocess.run([os.path.join(bin_dir, "strata-run"), art,
                              "--data", data, "--steps", str(args.steps)],
                             capture_output=True, text=True, check=True)
        m = re.search(r"measured median step ([\d.]+) s, predicted ([\d.]+) s",
                      run.stderr)
        links = re.search(r"per step: (.*)", run.stderr).group(1)
        measured, predicted = float(m.group(1)), float(m.group(2))
        rows.append((name, measured, predicted, links))
    print("| placement | measured median step (s) | predicted (s) "
          "| measured/predicted | traffic per step |")
    print("|---|---|---|---|---|")
    for name, measured, predicted, links in rows:
        print("| %s | %.4f | %.4f | %.2f | %s |" % (
            name, measured, predicted, measured / predicted, links))


if __name__ == "__main__":
    main()
