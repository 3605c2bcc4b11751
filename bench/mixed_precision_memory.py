#!/usr/bin/env python3
"""Planned device memory of bf16 training against fp32 at the same batch,
from strata-compile --report, for a GPT-2 and a LLaMA of about 60M
parameters (d768, 8 layers, vocabulary 8192) at batch 4 x 512.

    /usr/bin/python3 bench/mixed_precision_memory.py [--bin build/bin]
        [--work DIR] [--out bench/results/FILE.md]

Two placements: everything resident on the device (the default with no
budget), and masters and optimizer states in host memory with the updates
on the CPU (--place-params host --place-states host --place-updates cpu),
where the device holds what the step computes with. "device" is the
report's total: the device arena's peak plus the device parameter region.
Plans only: nothing runs, so the figures are the same on any machine.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import benchmodels

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
PLACEMENTS = {
    "all on the device": [],
    "masters and states on the host, CPU updates": [
        "--place-params", "host", "--place-states", "host",
        "--place-updates", "cpu"],
}


def size(value, unit):
    return float(value) * UNITS[unit]


def report(tool, model, precision, flags, work):
    art = os.path.join(work, "plan.strata")
    r = subprocess.run([tool, model, "--input-shape", "input_ids=4x512",
                        "--precision", precision, "--report", "-o", art] +
                       flags, capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)
    out = r.stdout
    total = re.search(r"\n  total +([\d.]+) (\w+)", out)
    acts = re.search(r"activations +[\d.]+ \w+ +at the peak \(max ([\d.]+) "
                     r"(\w+)\)", out)
    params = re.search(r"\n  parameters +([\d.]+) (\w+)", out)
    return (size(*total.groups()), size(*acts.groups()),
            size(*params.groups()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--work")
    ap.add_argument("--out")
    args = ap.parse_args()
    tool = os.path.join(args.bin, "strata-compile")
    lines = ["| model | placement | fp32 device | bf16 device | bf16 / fp32 "
             "| largest activations fp32 / bf16 |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        for family in ("gpt2", "llama"):
            model = os.path.join(work, "%s-60m.onnx" % family)
            benchmodels.generated_model(family, model,
                                        os.path.join(work, "data.npy"),
                                        8192, 768, 8, 4, 8, 512, 512)
            for label, flags in PLACEMENTS.items():
                wide = report(tool, model, "fp32", flags, work)
                low = report(tool, model, "bf16", flags, work)
                mib = 1 << 20
                lines.append(
                    "| %s | %s | %.0f MiB | %.0f MiB | %.1f%% | %.0f / %.0f "
                    "MiB |" % (family, label, wide[0] / mib, low[0] / mib,
                               100 * low[0] / wide[0], wide[1] / mib,
                               low[1] / mib))
                print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write("Planned device memory, bf16 against fp32 training at "
                    "batch 4 x 512 (strata-compile --report)\n\n"
                    "    /usr/bin/python3 bench/mixed_precision_memory.py "
                    "--out %s\n\n" % args.out + text)


if __name__ == "__main__":
    main()
