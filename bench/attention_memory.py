#!/usr/bin/env python3
"""Activation memory of a GPT-2 training step against the sequence length,
with attention fused (strata-compile --fusion on: graph.attention keeps no
T x T scores) and unfused (--fusion off), from strata-compile --report.

    /usr/bin/python3 bench/attention_memory.py [--bin build/bin]
        [--lengths 256,512,1024,2048] [--dim 256] [--layers 2] [--batch 2]

Prints, per length, the largest activation footprint over the step and the
device arena's peak; with fusion on, doubling T should double the
activations (linear), with it off quadruple them once the scores dominate.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import benchmodels

MIB = 1 << 20
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": MIB, "GiB": 1 << 30}


def size(text):
    value, unit = text.split()
    return float(value) * UNITS[unit]


def report(tool, model, shape, fusion, work):
    art = os.path.join(work, "step.%s.strata" % fusion)
    r = subprocess.run([tool, model, "--input-shape", shape, "--report",
                        "--fusion", fusion, "-o", art],
                       capture_output=True, text=True, check=True)
    act = re.search(r"activations\s+[\d.]+ \w+\s+at the peak \(max ([\d.]+ \w+)\)",
                    r.stdout + r.stderr)
    peak = re.search(r"device arena peak\s+([\d.]+ \w+)", r.stdout + r.stderr)
    if not act or not peak:
        sys.exit("no memory report in:\n" + r.stdout + r.stderr)
    return size(act.group(1)), size(peak.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--lengths", default="256,512,1024,2048")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    tool = os.path.join(args.bin, "strata-compile")
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt2.onnx")
        benchmodels.generated_gpt2(model, os.path.join(work, "data.npy"),
                                   vocab=1024, dim=args.dim,
                                   layers=args.layers, batch=args.batch,
                                   rows=4, seq=64, ctx=max(lengths))
        print("| T | activations, fused (MiB) | activations, unfused (MiB) "
              "| arena peak, fused (MiB) | arena peak, unfused (MiB) |")
        print("|---|---|---|---|---|")
        for t in lengths:
            shape = "input_ids=%dx%d" % (args.batch, t)
            on = report(tool, model, shape, "on", work)
            off = report(tool, model, shape, "off", work)
            print("| %d | %.1f | %.1f | %.1f | %.1f |" % (
                t, on[0] / MIB, off[0] / MIB, on[1] / MIB, off[1] / MIB))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
