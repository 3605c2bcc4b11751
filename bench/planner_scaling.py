#!/usr/bin/env python3
"""How the tier planner's time grows with depth, and how far its choice is
from the lower bound the cost model gives.

For GPT-2s of one width and a growing number of layers, compiles with every
placement class left to the planner under a device budget of --gpu-frac of
what keeping everything on the device needs and a host budget of --cpu-frac
of the parameters and optimizer state, with an SSD directory, and prints
per depth: the compile time, the placements scored, the predicted step, the
chosen plan's lower bound (the busiest of its compute, host links and SSD,
from the manifest) and the step's distance from it: how much of the
transfer time the schedule fails to hide. It is not the optimum over
placements: a placement that moves less data has a lower bound, and one
that recomputes more a higher compute time (issue 16 asks for an exact
optimum or a proven bound over placements; this is not it).

    bench/planner_scaling.py [--build build] [--dim 256]
        [--layers 4,8,16,32,48,80] [--profile FILE] [--evaluations N]
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchmodels  # noqa: E402
import placement_sweep  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", default="4,8,16,32,48,80")
    parser.add_argument("--gpu-frac", type=float, default=0.5)
    parser.add_argument("--cpu-frac", type=float, default=0.5)
    parser.add_argument("--profile", default=os.path.join(
        ROOT, "build", "examples", "machine-profile.txt"))
    parser.add_argument("--evaluations", type=int, default=0)
    args = parser.parse_args()
    out = os.path.join(args.build, "bench", "planner-scaling")
    os.makedirs(out, exist_ok=True)
    bin_dir = os.path.join(args.build, "bin")
    ssd = os.path.join(out, "ssd")
    print("| layers | parameters | compile | placements scored | predicted "
          "step | lower bound | predicted / bound |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for layers in (int(n) for n in args.layers.split(",")):
        model, _, shape = benchmodels.model_and_data(out, args.dim, layers)
        flags, _, _, _ = placement_sweep.budget_flags(
            bin_dir, model, shape, out,
            ["--synthetic-params", "--profile", args.profile], args.gpu_frac,
            args.cpu_frac, ssd, args.evaluations)
        art, step, scored, took = placement_sweep.compile_plan(
            bin_dir, model, shape, os.path.join(out, "auto.strata"), flags)
        if art is None:
            print("| %d | | %.1f s | | does not fit: %s | | |" %
                  (layers, took, step))
            continue
        with open(os.path.join(art, "manifest.txt")) as f:
            manifest = f.read()
        bound = float(re.search(r"lower bound \(the busiest of these\) "
                                r"([\d.]+) ms", manifest).group(1))
        params = int(re.search(r"parameters: (\d+) trainable",
                               manifest).group(1))
        print("| %d | %.1fM | %.1f s | %d | %.3f ms | %.3f ms | %.3f |" %
              (layers, params / 1e6, took, scored, step, bound,
               step / bound), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
