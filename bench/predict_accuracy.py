#!/usr/bin/env python3
"""How well the compiler's step-time prediction matches a measured step.

Each repetition calibrates this machine (strata-calibrate, unless --profile
is given: the drive's speed drifts over minutes), then compiles a model -- the README's example (gpt2-tiny, batch 8x32) by default,
or a generated GPT-2 of --dim/--layers -- under three budgets (none; a device
budget that pushes parameters and state to host; device and host budgets
that push them and activations to SSD) and three forced placements, runs each
for --steps steps and prints the measured median step next to the predicted
one as a Markdown table, with transfers overlapping the compute (the
default) and in program order (strata-run --no-overlap).

    bench/predict_accuracy.py [--build build] [--steps 30] [--repeat 3] [--ssd-dir DIR]
                              [--profile FILE] [--dim D --layers L]
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ssd-dir", default=None)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--dim", type=int, default=0,
                        help="generate a GPT-2 of this width instead of the "
                        "example model")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8192)
    args = parser.parse_args()
    out = os.path.join(args.build, "bench", "predict")
    os.makedirs(out, exist_ok=True)
    ssd = args.ssd_dir or os.path.join(out, "ssd")
    bin_dir = os.path.join(args.build, "bin")

    model, data, shape = benchmodels.model_and_data(
        out, args.dim, args.layers, args.vocab)

    configs = [
        ("no budget (all on device)", []),
        ("params+states on host",
         ["--place-params", "host", "--place-states", "host"]),
        ("params+states on SSD",
         ["--place-params", "ssd", "--place-states", "ssd"]),
        ("activations swapped to SSD", ["--place-activations", "ssd"]),
        ("budget: device 60% of the total", ["budget", 0.6, None]),
        ("budget: device = 90% of the arena, host 1/4 of the rest",
         ["budget", None, 0.25]),
    ]

    def compile_config(name, flags, profile):
        art = os.path.join(out, re.sub(r"\W+", "-", name) + ".strata")
        base = [os.path.join(bin_dir, "strata-compile"), model,
                "--input-shape", shape, "--optimizer", "adamw",
                "--lr", "1e-4", "--profile", profile, "--ssd-dir", ssd,
                "-o", art]
        if flags and flags[0] == "budget":
            rep = subprocess.run(base + ["--report"], capture_output=True,
                                 text=True, check=True).stdout
            scale = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}

            def size(label):
                m = re.search(label + r"\s+([\d.]+) (B|KiB|MiB|GiB)", rep)
                return float(m.group(1)) * scale[m.group(2)]
            total, arena = size("total"), size("device arena peak")
            _, device, host = flags
            if device is not None:
                flags = ["--gpu-mem", str(int(total * device))]
            else:
                flags = ["--gpu-mem", str(int(arena * 0.9)),
                         "--cpu-mem", str(int((total - arena) * host))]
        c = subprocess.run(base + flags, capture_output=True, text=True)
        if c.returncode != 0:
            print("%s: not compiled: %s" % (name, c.stderr.strip()),
                  file=sys.stderr)
            return None
        return art

    def run(art, flag):
        shutil.rmtree(os.path.join(art, "checkpoint"), ignore_errors=True)
        r = subprocess.run(
            [os.path.join(bin_dir, "strata-run"), art, "--data", data,
             "--steps", str(args.steps)] + flag,
            capture_output=True, text=True, check=True)
        m = re.search(r"measured median step ([\d.]+) s, "
                      r"predicted ([\d.]+) s", r.stderr)
        links = re.search(r"per step: (.*)", r.stderr).group(1)
        return float(m.group(1)), float(m.group(2)), links

    # This machine's drive and CPUs drift by tens of percent over minutes,
    # so each repetition calibrates (unless --profile is given), compiles
    # and runs every placement right away; the table gives medians over
    # the repetitions, and the median of the per-repetition ratios.
    results = {name: {"overlap": [], "serial": []} for name, _ in configs}
    links = {}
    for rep in range(args.repeat):
        profile = args.profile
        if profile is None:
            profile = os.path.join(out, "profile.txt")
            subprocess.run([os.path.join(bin_dir, "strata-calibrate"), "-o",
                            profile, "--ssd-dir", ssd], check=True,
                           stdout=subprocess.DEVNULL)
        for name, flags in configs:
            art = compile_config(name, flags, profile)
            if art is None:
                continue
            # Transfers beside the compute and in program order, alternated.
            for mode, flag in (("overlap", []), ("serial", ["--no-overlap"])):
                measured, predicted, links[name] = run(art, flag)
                results[name][mode].append((measured, predicted))
    rows = []
    for name, _ in configs:
        r = results[name]
        if not r["overlap"]:
            continue

        def summary(pairs):
            return (statistics.median(m for m, _ in pairs),
                    statistics.median(p for _, p in pairs),
                    statistics.median(m / p for m, p in pairs))
        rows.append((name,) + summary(r["overlap"]) + summary(r["serial"]) +
                    (links[name],))
    print("| placement | measured step, overlapped (s) | predicted (s) "
          "| ratio | measured, in program order (s) | predicted (s) | ratio "
          "| traffic per step |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| %s | %.4f | %.4f | %.2f | %.4f | %.4f | %.2f | %s |" % row)
    print("\n(ratio = measured / predicted, the median over %d repetitions "
          "of calibrate, compile and run %d steps; each run's figure is its "
          "median step.)" % (args.repeat, args.steps))


if __name__ == "__main__":
    main()
