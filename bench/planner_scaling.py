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
transfer time the schedule fails to hide; and the planner's proven bound
over every placement within the budgets (PlacementBound.cpp: no placement
can be predicted faster) with the choice's gap to it.

--family llama builds LLaMA-style models with test/models/synthetic.py
(no PyTorch export; fast at 80 layers) instead of exported GPT-2s.

    bench/planner_scaling.py [--build build] [--dim 256] [--family gpt2]
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

sys.path.insert(0, os.path.join(ROOT, "test", "models"))
import synthetic  # noqa: E402


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
    parser.add_argument("--family", choices=["gpt2", "llama"],
                        default="gpt2")
    args = parser.parse_args()
    out = os.path.join(args.build, "bench", "planner-scaling")
    os.makedirs(out, exist_ok=True)
    bin_dir = os.path.join(args.build, "bin")
    ssd = os.path.join(out, "ssd")
    args.profile = benchmodels.machine_profile(args.profile, bin_dir, ssd)
    print("| layers | parameters | compile | placements scored | predicted "
          "step | plan's lower bound | predicted / it | bound over all "
          "placements | predicted / it |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for layers in (int(n) for n in args.layers.split(",")):
        if args.family == "llama":
            name = "llama-%d-%d" % (layers, args.dim)
            synthetic.write(out, name, dict(
                family="llama", layers=layers, dim=args.dim,
                heads=max(1, args.dim // 64), kv_heads=max(1, args.dim // 64),
                hidden=(8 * args.dim // 3 + 255) // 256 * 256, vocab=8192),
                4, 64)
            model, shape = os.path.join(out, name + ".onnx"), \
                "input_ids=4x64"
        else:
            model, _, shape = benchmodels.model_and_data(out, args.dim,
                                                         layers)
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
        over = re.search(r"predicted under ([\d.]+) ms", manifest)
        over = float(over.group(1)) if over else float("nan")
        print("| %d | %.1fM | %.1f s | %d | %.3f ms | %.3f ms | %.3f | "
              "%.3f ms | %.3f |" %
              (layers, params / 1e6, took, scored, step, bound,
               step / bound, over, step / over), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
