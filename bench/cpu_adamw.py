#!/usr/bin/env python3
"""Strata's CPU AdamW against torch.optim.AdamW and the memory bound.

    /usr/bin/python3 bench/cpu_adamw.py [--params 100e6] [--rounds 5]
        [--bin build/bin] [--out bench/results/cpu-adamw-DATE.md]

Each round times, one after the other on every core: torch.optim.AdamW's
step with the for-loop implementation (foreach=False), its step with the
multi-tensor one (foreach=True), and `strata-bench-updates` (Strata's
vectorised fp32 AdamW, a STREAM triad and a stream with AdamW's own memory
traffic, the bound). The parameters are ten fp32 tensors of N/10 elements
(one for Strata: its update streams each tensor whole). Medians over the
rounds; the ratios compare figures from the same run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch


def torch_step_seconds(params, foreach, warm=1, reps=3):
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01, foreach=foreach)
    times = []
    for r in range(warm + reps):
        t0 = time.perf_counter()
        opt.step()
        t1 = time.perf_counter()
        if r >= warm:
            times.append(t1 - t0)
    del opt
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", type=float, default=100e6)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--out")
    a = ap.parse_args()
    n = int(a.params)
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    env = dict(os.environ, STRATA_NUM_THREADS=str(threads))
    tool = os.path.join(a.bin, "strata-bench-updates")
    if not os.access(tool, os.X_OK):
        sys.exit(f"cpu_adamw: {tool} not found; build first")

    chunk = n // 10
    params = []
    for _ in range(10):
        p = torch.nn.Parameter(torch.full((chunk,), 0.5))
        p.grad = torch.full((chunk,), 1e-3)
        params.append(p)

    rows = {"torch for-loop": [], "torch foreach": [], "strata": [],
            "triad": [], "stream": [], "bound": []}
    isa = None
    for r in range(a.rounds):
        rows["torch for-loop"].append(torch_step_seconds(params, False))
        rows["torch foreach"].append(torch_step_seconds(params, True))
        out = subprocess.run([tool, "--params", str(chunk * 10), "--reps", "3",
                              "--json"], env=env, check=True,
                             capture_output=True, text=True).stdout
        j = json.loads(out)
        isa = j["isa"]
        rows["strata"].append(j["adamw_s"])
        rows["triad"].append(j["triad_gbs"])
        rows["stream"].append(j["stream_gbs"])
        rows["bound"].append(j["bound_gbs"])
        print(f"round {r + 1}/{a.rounds}: torch for-loop "
              f"{rows['torch for-loop'][-1]:.3f} s, foreach "
              f"{rows['torch foreach'][-1]:.3f} s, strata {j['adamw_s']:.4f} s "
              f"({j['share_of_bound'] * 100:.0f}% of {j['bound_gbs']:.1f} GB/s)",
              file=sys.stderr)

    med = {k: statistics.median(v) for k, v in rows.items()}
    total = chunk * 10
    gbs = lambda s: 28.0 * total / s / 1e9
    best_torch = min(med["torch for-loop"], med["torch foreach"])
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    lines = [
        f"# CPU AdamW, {total / 1e6:.0f}M fp32 parameters, {threads} threads "
        f"({cpu}; Strata's loops: {isa}; torch {torch.__version__})",
        "",
        f"Medians of {a.rounds} interleaved rounds "
        "(`/usr/bin/python3 bench/cpu_adamw.py`).",
        "",
        "| | step (s) | GB/s at 28 B/param | vs Strata |",
        "|---|---|---|---|",
    ]
    for k in ("torch for-loop", "torch foreach", "strata"):
        lines.append(f"| {k} | {med[k]:.4f} | {gbs(med[k]):.1f} | "
                     f"{med[k] / med['strata']:.2f}x |")
    lines += [
        "",
        f"Memory: STREAM triad {med['triad']:.1f} GB/s (write-allocate "
        f"counted), AdamW-shaped stream {med['stream']:.1f} GB/s; bound "
        f"{med['bound']:.1f} GB/s.",
        "",
        f"Strata is {best_torch / med['strata']:.1f}x torch's best "
        f"(target 5x) and runs at {100 * gbs(med['strata']) / med['bound']:.0f}% "
        "of the memory bound (target 80%).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
