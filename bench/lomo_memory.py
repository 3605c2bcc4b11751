#!/usr/bin/env python3
"""Planned and measured peak memory of SGD, AdamW, LOMO and AdaLomo on a
GPT-2-style model of about 50M parameters (vocabulary 16384, width 640, 8
layers, context 128), batch 2 x 64 tokens, fp32.

For each optimizer: the plan's memory by class (strata-compile --report),
the device-arena peak the runtime measures (it must equal the plan's), the
process's max RSS over a 2-step run, and the formula the numbers should
follow. Prints a Markdown table.

    bench/lomo_memory.py [--build build] [--steps 2]
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchmodels  # noqa: E402

MIB = 1024.0 * 1024.0


def size(text):
    m = re.match(r"([\d.]+) (B|KiB|MiB|GiB)", text.strip())
    scale = {"B": 1, "KiB": 1024, "MiB": MIB, "GiB": MIB * 1024}[m.group(2)]
    return float(m.group(1)) * scale


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    out = os.path.join(args.build, "bench", "lomo")
    os.makedirs(out, exist_ok=True)
    model = os.path.join(out, "gpt2-50m.onnx")
    data = os.path.join(out, "data.npy")
    benchmodels.generated_gpt2(model, data, vocab=16384, dim=640, layers=8,
                               batch=2, rows=16)
    bin_dir = os.path.join(args.build, "bin")
    rows = []
    for opt in ("sgd", "adamw", "lomo", "adalomo"):
        art = os.path.join(out, opt + ".strata")
        r = subprocess.run([os.path.join(bin_dir, "strata-compile"), model,
                            "--input-shape", "input_ids=2x64", "--optimizer",
                            opt, "--lr", "1e-3", "-o", art, "--report"],
                           capture_output=True, text=True, check=True)
        rep = {}
        for line in r.stdout.splitlines():
            m = re.match(r"\s+(\S[\w ]*?)\s{2,}([\d.]+ \w+)\s+(.*)", line)
            if m:
                rep[m.group(1).strip()] = (size(m.group(2)), m.group(3))
        largest = size(re.search(r"largest single ([\d.]+ \w+)",
                                 rep["gradients"][1]).group(1))
        grad_max = size(re.search(r"max ([\d.]+ \w+)",
                                  rep["gradients"][1]).group(1))
        run = subprocess.run([os.path.join(bin_dir, "strata-run"), art,
                              "--data", data, "--steps", str(args.steps)],
                             capture_output=True, text=True, check=True)
        m = re.search(r"device arena peak (\S+ \S+) \(plan: (\S+ \S+)\); "
                      r"parameter region (\S+ \S+); max RSS (\S+ \S+)",
                      run.stderr)
        measured, planned, region, rss = (size(m.group(i)) for i in range(1, 5))
        rows.append((opt, rep["parameters"][0], rep["optimizer states"][0],
                     grad_max, largest, rep["activations"][0],
                     rep["workspace"][0], planned, measured, region, rss))
    print("| optimizer | parameters | optimizer states | gradients (max live) "
          "| largest gradient | activations at peak | workspace at peak "
          "| planned arena | measured arena | planned total | max RSS |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (opt, p, s, g, lg, a, w, planned, measured, region, rss) in rows:
        print("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | "
              "%.1f | %.1f |" % (opt, p / MIB, s / MIB, g / MIB, lg / MIB,
                                 a / MIB, w / MIB, planned / MIB,
                                 measured / MIB, (planned + region) / MIB,
                                 rss / MIB))
    print("\n(MiB.) Formulas: LOMO peak = parameters + activations + the "
          "largest single gradient (+ workspace); SGD/AdamW keep every "
          "gradient until the updates at the end of the backward pass.")


if __name__ == "__main__":
    main()
