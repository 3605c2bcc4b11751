#!/usr/bin/env python3
"""The tier planner against every forced placement, under the same budgets.

Compiles a model (the README's example, or a generated GPT-2 with --dim and
--layers) with a device budget of --gpu-frac of what keeping everything on
the device needs and a host budget of --cpu-frac of its parameters and
optimizer state, once with every class left to the planner and once per
forced placement the command line offers for one class (--place-params,
--place-states and --place-gradients device|host|ssd, --place-activations
device|host|ssd|recompute; the other classes left to the planner). Prints
each plan's predicted step (from its manifest) as a Markdown table, with the
planner's evaluations, and with --steps N the measured median step of the
planner's choice and of the fastest forced plan (strata-run, interleaved,
--repeat rounds; with --measure-all of every plan that fits).

Fails (exit 1) when a forced plan that fits the budgets is predicted faster
than the planner's choice: the planner's search should find at least what a
user can force; and, measuring, when a forced plan is faster than the
planner's choice by more than the rounds' spread (the measured noise).

    bench/placement_sweep.py [--build build] [--dim 512 --layers 8]
        [--gpu-frac 0.5] [--cpu-frac 0.5] [--evaluations N] [--steps 10]
        [--repeat 3] [--measure-all] [--synthetic-params]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchmodels  # noqa: E402

FORCED = [("params", v) for v in ("device", "host", "ssd")] + \
         [("states", v) for v in ("device", "host", "ssd")] + \
         [("activations", v) for v in ("device", "host", "ssd", "recompute")] + \
         [("gradients", v) for v in ("device", "host", "ssd")]


def compile_plan(bin_dir, model, shape, out, flags):
    """(artifact, predicted ms, planner evaluations, seconds) or (None,
    error line, None, seconds) when the compile refuses."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.time()
    r = subprocess.run([os.path.join(bin_dir, "strata-compile"), model,
                        "--input-shape", shape, "--optimizer", "adamw",
                        "-o", out] + flags, capture_output=True, text=True)
    took = time.time() - start
    if r.returncode != 0:
        errors = [l for l in r.stderr.splitlines() if "error" in l]
        return None, (errors[-1] if errors else r.stderr.strip()), None, took
    with open(os.path.join(out, "manifest.txt")) as f:
        manifest = f.read()
    step = float(re.search(r"predicted step time: ([\d.]+) ms",
                           manifest).group(1))
    m = re.search(r"planner: best of (\d+)", manifest)
    return out, step, int(m.group(1)) if m else 0, took


def inspect_bytes(bin_dir, art):
    """(device arena + parameter region, parameters + optimizer state)."""
    text = subprocess.run([os.path.join(bin_dir, "strata-inspect"), art],
                          capture_output=True, text=True, check=True).stdout
    arena = int(re.search(r"device arena .*\((\d+) bytes\)", text).group(1))
    params = int(re.search(r"device parameter region: .*\((\d+) bytes\)",
                           text).group(1))
    return arena + params, params


def budget_flags(bin_dir, model, shape, out, common, gpu_frac, cpu_frac, ssd,
                 evaluations=0):
    """(strata-compile flags, device bytes everything on the device needs,
    --gpu-mem, --cpu-mem): a compile without budgets measures the device
    need and the parameters and state; the budgets are those fractions of
    them, with an SSD directory and `common` flags."""
    full, _, _, _ = compile_plan(bin_dir, model, shape,
                                 os.path.join(out, "full.strata"), common)
    device, stored = inspect_bytes(bin_dir, full)
    gpu, cpu = int(device * gpu_frac), int(stored * cpu_frac)
    flags = common + ["--gpu-mem", str(gpu), "--cpu-mem", str(cpu),
                      "--ssd-dir", ssd]
    if evaluations:
        flags += ["--planner-evaluations", str(evaluations)]
    return flags, device, gpu, cpu


def measure(bin_dir, art, data, steps):
    subprocess.run([os.path.join(bin_dir, "strata-run"), art, "--data", data,
                    "--steps", str(steps), "--log-json", art + ".jsonl",
                    "--quiet"], capture_output=True, text=True, check=True)
    import json
    with open(art + ".jsonl") as f:
        times = [json.loads(l)["step_s"] for l in f if l.strip()]
    return statistics.median(times[1:] if len(times) > 2 else times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--dim", type=int, default=0)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--gpu-frac", type=float, default=0.5)
    parser.add_argument("--cpu-frac", type=float, default=0.5)
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--measure-all", action="store_true",
                        help="with --steps: measure every plan that fits, "
                             "not only the planner's and the fastest "
                             "forced one")
    parser.add_argument("--evaluations", type=int, default=0,
                        help="--planner-evaluations of every compile "
                             "(default: strata-compile's)")
    parser.add_argument("--profile", default="",
                        help="machine profile (default: calibrate here)")
    parser.add_argument("--synthetic-params", action="store_true",
                        help="plan-only artifacts (strata-compile "
                             "--synthetic-params): no weights written per "
                             "compile, for large models")
    args = parser.parse_args()
    out = os.path.join(args.build, "bench", "placement")
    os.makedirs(out, exist_ok=True)
    bin_dir = os.path.join(args.build, "bin")
    ssd = os.path.join(out, "ssd")
    model, data, shape = benchmodels.model_and_data(out, args.dim,
                                                    args.layers)
    profile = benchmodels.machine_profile(
        args.profile or os.path.join(out, "profile.txt"), bin_dir, ssd)
    common = ["--synthetic-params"] if args.synthetic_params else []
    budgets, device, gpu, cpu = budget_flags(
        bin_dir, model, shape, out, ["--profile", profile] + common,
        args.gpu_frac, args.cpu_frac, ssd, args.evaluations)
    print("model %s (%s), everything on the device needs %.2f MiB; "
          "--gpu-mem %.2f MiB, --cpu-mem %.2f MiB (%.0f%% of parameters and "
          "state)\n" % (os.path.basename(model), shape, device / 2**20,
                        gpu / 2**20, cpu / 2**20, 100 * args.cpu_frac))
    rows = []
    auto = compile_plan(bin_dir, model, shape,
                        os.path.join(out, "auto.strata"), budgets)
    rows.append(("planner (all auto)", auto))
    for cls, value in FORCED:
        art = os.path.join(out, "%s-%s.strata" % (cls, value))
        rows.append(("--place-%s %s" % (cls, value),
                     compile_plan(bin_dir, model, shape, art,
                                  budgets + ["--place-" + cls, value])))
    print("| placement | predicted step | planner evaluations | compile |")
    print("|---|---:|---:|---:|")
    for label, (art, step, evaluated, took) in rows:
        if art is None:
            print("| %s | does not fit: %s | | %.1f s |" % (
                label, step.replace("|", "/")[:120], took))
        else:
            print("| %s | %.3f ms | %d | %.1f s |" % (label, step, evaluated,
                                                      took))
    if auto[0] is None:
        print("\nthe planner found no plan within the budgets")
        return 1
    fitting = [(step, label, art) for label, (art, step, _, _) in rows[1:]
               if art is not None]
    beaten = [(s, l) for s, l, _ in fitting if s < auto[1]]
    best = min(fitting) if fitting else None
    if best:
        print("\nfastest forced plan: %s, %.3f ms predicted (the planner's "
              "choice: %.3f ms)" % (best[1], best[0], auto[1]))
    measured_slower = False
    if args.steps and best:
        # Every plan that fits (--measure-all) or the planner's and the
        # fastest forced one, each run for --steps steps once per round,
        # the rounds interleaved so that the machine's drift hits all alike.
        plans = [("planner (all auto)", auto[0])] + (
            [(l, a) for _, l, a in fitting] if args.measure_all
            else [(best[1], best[2])])
        rounds = {label: [] for label, _ in plans}
        for r in range(args.repeat):
            for label, art in plans:
                rounds[label].append(measure(bin_dir, art, data, args.steps))
            print("round %d of %d measured" % (r + 1, args.repeat),
                  file=sys.stderr, flush=True)
        print("\nmeasured step (%d interleaved rounds of %d steps; a round's "
              "figure is the median of its steps after the first):\n" % (
                  args.repeat, args.steps))
        print("| placement | predicted | measured median | rounds' range |")
        print("|---|---:|---:|---:|")
        predicted = {"planner (all auto)": auto[1]}
        predicted.update({l: s for s, l, _ in fitting})
        for label, _ in plans:
            t = rounds[label]
            print("| %s | %.3f ms | %.3f ms | %.3f-%.3f ms |" % (
                label, predicted[label], 1e3 * statistics.median(t),
                1e3 * min(t), 1e3 * max(t)))
        # Slower beyond the noise: the planner's median over the forced
        # plan's by more than the wider of the two plans' spreads across
        # rounds (what running one plan again moves its figure by).
        mine = rounds["planner (all auto)"]

        def spread(t):
            return max(t) - min(t)

        slower = [l for l, _ in plans[1:]
                  if statistics.median(mine) - statistics.median(rounds[l]) >
                  max(spread(mine), spread(rounds[l]))]
        if slower:
            print("\nFAIL: measured faster than the planner's choice by more "
                  "than the rounds' spread: " + ", ".join(
                      "%s (%.3f against %.3f ms)" % (
                          l, 1e3 * statistics.median(rounds[l]),
                          1e3 * statistics.median(mine)) for l in slower))
            measured_slower = True
        else:
            print("\nno forced plan measured faster than the planner's "
                  "choice by more than the rounds' spread")
    if beaten:
        print("\nFAIL: forced plans predicted faster than the planner's "
              "choice: " + ", ".join("%s (%.3f ms)" % (l, s)
                                     for s, l in beaten))
        return 1
    print("\nno forced plan is predicted faster than the planner's choice")
    return 1 if measured_slower else 0


if __name__ == "__main__":
    sys.exit(main())
