#!/usr/bin/env python3
"""Global-norm clipping with fused (LOMO) updates: exact clipping with
unfused SGD against LOMO's two-pass method and the previous-step method.

Part 1 (the demo's GPT-2 on its corpus, 300 steps, SGD lr 0.2, clip 0.5):
the loss curve of each method against exact clipping (max and mean absolute
difference) and the median step time.
Part 2 (the 50M-parameter GPT-2 of bench/lomo_memory.py, 3 steps): planned
peak memory and median step time.

    bench/clip_modes.py [--build build] [--skip-50m]
"""

import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = [("exact (sgd, unfused)", "sgd", "exact"),
         ("two-pass (lomo)", "lomo", "two-pass"),
         ("previous-step (lomo)", "lomo", "previous-step")]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True)


def arena(report):
    for line in report.splitlines():
        if "device arena peak" in line:
            return " ".join(line.split()[3:5])
    return "?"


def measure(bin_dir, model, shape, data, steps, extra, out):
    results = {}
    for label, opt, mode in MODES:
        art = os.path.join(out, "%s-%s.strata" % (opt, mode))
        r = run([os.path.join(bin_dir, "strata-compile"), model,
                 "--input-shape", "input_ids=" + shape, "--optimizer", opt,
                 "--clip-grad-norm", "0.5", "--clip-mode", mode, "-o", art,
                 "--report"] + extra)
        log = art + ".jsonl"
        run([os.path.join(bin_dir, "strata-run"), art, "--data", data,
             "--steps", str(steps), "--log-json", log, "--quiet"])
        rows = [json.loads(l) for l in open(log)]
        results[label] = (rows, arena(r.stdout))
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--skip-50m", action="store_true")
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    out = os.path.join(args.build, "bench", "clip")
    os.makedirs(out, exist_ok=True)
    run(["/usr/bin/python3", os.path.join(ROOT, "examples", "gpt2-tiny",
                                          "make_model.py"), "--out", out])
    res = measure(bin_dir, os.path.join(out, "gpt2-tiny.onnx"), "8x32",
                  os.path.join(out, "corpus.bin"), 300, ["--lr", "0.2"], out)
    exact = [r["loss"] for r in res[MODES[0][0]][0]]
    print("| method | final loss (mean of last 10) | max abs loss diff vs exact "
          "| mean abs diff | median step ms | planned arena |")
    print("|---|---|---|---|---|---|")
    for label, _, _ in MODES:
        rows, peak = res[label]
        losses = [r["loss"] for r in rows]
        diffs = [abs(a - b) for a, b in zip(losses, exact)]
        print("| %s | %.4f | %.4f | %.4f | %.3f | %s |" % (
            label, sum(losses[-10:]) / 10, max(diffs), sum(diffs) / len(diffs),
            1e3 * statistics.median(r["step_s"] for r in rows[1:]), peak))
    model = os.path.join(args.build, "bench", "lomo", "gpt2-50m.onnx")
    if args.skip_50m or not os.path.exists(model):
        print("\n(50M part skipped: run bench/lomo_memory.py first)")
        return
    import numpy as np
    data = os.path.join(out, "tokens50m.npy")
    np.save(data, np.random.default_rng(0).integers(
        0, 16384, size=(16, 65)).astype(np.int64))
    res = measure(bin_dir, model, "2x64", data, 3, ["--lr", "1e-3"], out)
    print("\n50M GPT-2, batch 2x64:\n")
    print("| method | median step s | planned arena |")
    print("|---|---|---|")
    for label, _, _ in MODES:
        rows, peak = res[label]
        print("| %s | %.2f | %s |" % (
            label, statistics.median(r["step_s"] for r in rows), peak))


if __name__ == "__main__":
    main()
