#!/usr/bin/env python3
"""The activation planner against the naive plans, under one device budget.

Compiles the README's example model (or a generated GPT-2 with --dim) with
parameters and optimizer state kept on the device and a device budget below
what keeping every activation needs, then places the activations four ways:
swap all to the host, swap all to the SSD, recompute all that can be
recomputed (the rest kept), and the planner's choice (--place-activations
auto, with a host budget of --cpu-frac of the activations so it must weigh
host, SSD and recomputation). Prints predicted and measured step time and
the arena, as a Markdown table.

    bench/activation_plans.py [--build build] [--steps 30] [--budget 0.85]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchmodels  # noqa: E402


def size(text):
    m = re.match(r"([\d.]+) (B|KiB|MiB|GiB)", text.strip())
    scale = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    return float(m.group(1)) * scale[m.group(2)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", type=float, default=0.85,
                        help="device budget as a fraction of keeping all")
    parser.add_argument("--cpu-frac", type=float, default=0.25)
    parser.add_argument("--dim", type=int, default=0)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    out = os.path.join(args.build, "bench", "activations")
    os.makedirs(out, exist_ok=True)
    bin_dir = os.path.join(args.build, "bin")
    ssd = os.path.join(out, "ssd")
    profile = os.path.join(out, "profile.txt")
    subprocess.run([os.path.join(bin_dir, "strata-calibrate"), "-o", profile,
                    "--ssd-dir", ssd], check=True, stdout=subprocess.DEVNULL)
    model, data, shape = benchmodels.model_and_data(out, args.dim,
                                                    args.layers)
    base = [os.path.join(bin_dir, "strata-compile"), model, "--input-shape",
            shape, "--optimizer", "adamw", "--lr", "1e-4", "--place-params",
            "device", "--place-states", "device", "--ssd-dir", ssd,
            "--profile", profile, "--report"]
    keep = subprocess.run(base + ["-o", os.path.join(out, "keep.strata")],
                          capture_output=True, text=True, check=True).stdout
    total = size(re.search(r"total\s+(\S+ \S+)", keep).group(1))
    acts = size(re.search(r"activations\s+(\S+ \S+)", keep).group(1))
    budget = int(total * args.budget)
    rows = []
    for name, flags in (
            ("keep all (no budget)", ["--place-activations", "device"]),
            ("swap all to host", ["--place-activations", "host"]),
            ("swap all to SSD", ["--place-activations", "ssd"]),
            ("recompute all that can be", ["--place-activations",
                                           "recompute"]),
            ("planner (auto)", ["--place-activations", "auto", "--cpu-mem",
                                str(int(acts * args.cpu_frac))])):
        art = os.path.join(out, re.sub(r"\W+", "-", name) + ".strata")
        budgeted = [] if name.startswith("keep") else ["--gpu-mem",
                                                        str(budget)]
        c = subprocess.run(base + flags + budgeted + ["-o", art],
                           capture_output=True, text=True)
        if c.returncode != 0:
            rows.append((name, None, None, None, c.stderr.strip()[:120]))
            continue
        predicted = float(re.search(r"predicted step time: ([\d.]+) ms",
                                    c.stdout).group(1))
        arena = size(re.search(r"device arena peak\s+(\S+ \S+)",
                               c.stdout).group(1))
        inspect = subprocess.run([os.path.join(bin_dir, "strata-inspect"),
                                  art], capture_output=True, text=True,
                                 check=True).stdout
        swapped = re.search(r"activations swapped +in arena +(\d+) +(\d+)",
                            inspect)
        recomputed = re.search(r"recomputed before the backward pass: (\d+)",
                               inspect)
        what = "host %s B, SSD %s B, recomputed %s" % (
            swapped.group(1), swapped.group(2),
            recomputed.group(1) if recomputed else 0)
        times = []
        for _ in range(args.repeat):
            shutil.rmtree(os.path.join(art, "checkpoint"), ignore_errors=True)
            r = subprocess.run([os.path.join(bin_dir, "strata-run"), art,
                                "--data", data, "--steps", str(args.steps)],
                               capture_output=True, text=True, check=True)
            times.append(float(re.search(r"measured median step ([\d.]+) s",
                                         r.stderr).group(1)))
        rows.append((name, predicted, statistics.median(times) * 1e3, arena,
                     what))
    print("device budget %.2f MiB (%.0f%% of keeping everything)\n"
          % (budget / 2**20, args.budget * 100))
    print("| activations | predicted step (ms) | measured (ms) | arena (MiB) "
          "| moved / recomputed |")
    print("|---|---|---|---|---|")
    for name, p, m, a, what in rows:
        if p is None:
            print("| %s | does not fit | | | %s |" % (name, what))
        else:
            print("| %s | %.2f | %.2f | %.2f | %s |" % (name, p, m,
                                                        a / 2**20, what))


if __name__ == "__main__":
    main()
