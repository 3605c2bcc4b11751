#!/usr/bin/env python3
"""Updates on the CPU (--place-updates cpu) against updates fetched to the
device and written back (--place-updates device), parameters in host memory
and optimizer states in host memory or on the SSD, on the backend given.

    /usr/bin/python3 bench/offload.py [--bin build/bin] [--backend cpu]
        [--dim 768 --layers 8] [--steps 6] [--rounds 3] [--out FILE]
        [--clip 1000,2.5]

For the example model and a generated GPT-2 (width --dim, --layers layers;
the defaults give about 63M parameters), per placement: the median step
(steps 2.. of each run, runs interleaved), the bytes each step moves each way,
and, from a trace of the CPU-update run, how much of the CPU's update time
ran while the device computed (the hidden share). On the CPU backend the
"device" and the CPU updates share the same cores, so the overlap buys
little there; the GPU check (scripts/gpu-check.sh) runs the same comparison
on a GPU.

With --clip C1,C2,...: the CPU-update plans of the generated GPT-2 only,
with exact clipping at each threshold (--clip-grad-norm), the updates
speculating during the backward pass (--speculate-updates, the default) or
waiting for the norm, beside the same plans without clipping: the step, the
hidden share, the steps that clipped and were redone; and a check that the
speculating and the waiting run train bit for bit alike (the script fails
otherwise).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import benchmodels
from tracetools import cpu_update_before_compute_end, cpu_update_overlap


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--clip", help="comma-separated clipping thresholds: "
                    "compare speculating and waiting CPU updates")
    a = ap.parse_args()
    if a.clip:
        return clipping(a, [float(c) for c in a.clip.split(",")])
    work = tempfile.mkdtemp(prefix="strata-offload-")
    tool = lambda n: os.path.join(a.bin, n)
    lines = ["# Optimizer updates on the CPU vs on the device "
             "(%s backend, %d steps, medians of %d interleaved rounds)" %
             (a.backend, a.steps, a.rounds), "",
             "`/usr/bin/python3 bench/offload.py --backend %s`" % a.backend,
             "", "| model | placement | step (s) | host->device | "
             "device->host | CPU updates hidden |", "|---|---|---|---|---|---|"]
    try:
        for label, dim in (("example (gpt2-tiny)", 0),
                           ("GPT-2 %dx%d" % (a.dim, a.layers), a.dim)):
            model, data, shape = benchmodels.model_and_data(
                work, dim, a.layers)
            base = [tool("strata-compile"), model, "--input-shape", shape,
                    "--optimizer", "adamw", "--lr", "1e-4",
                    "--ssd-dir", os.path.join(work, "ssd")]
            os.makedirs(os.path.join(work, "ssd"), exist_ok=True)
            plans = {
                "states host, updates device": ["--place-params", "host",
                                                "--place-states", "host",
                                                "--place-updates", "device",
                                                "--fuse-updates"],
                "states host, updates cpu": ["--place-params", "host",
                                             "--place-states", "host",
                                             "--place-updates", "cpu"],
                "states ssd, updates device": ["--place-params", "host",
                                               "--place-states", "ssd",
                                               "--place-updates", "device",
                                               "--fuse-updates"],
                "states ssd, updates cpu": ["--place-params", "host",
                                            "--place-states", "ssd",
                                            "--place-updates", "cpu"],
            }
            times = {k: [] for k in plans}
            info = {}
            for r in range(a.rounds):
                for name, flags in plans.items():
                    art = os.path.join(work, "a.strata")
                    shutil.rmtree(art, ignore_errors=True)
                    subprocess.run(base + flags + ["-o", art], check=True,
                                   capture_output=True)
                    log = os.path.join(work, "log.jsonl")
                    trace = os.path.join(work, "trace.json")
                    cmd = [tool("strata-run"), art, "--backend", a.backend,
                           "--data", data, "--steps", str(a.steps),
                           "--log-json", log, "--no-checkpoint",
                           "--ssd-dir", os.path.join(work, "ssd")]
                    if r == 0:
                        cmd += ["--trace", trace, "--trace-steps", "3"]
                    p = subprocess.run(cmd, check=True, capture_output=True,
                                       text=True)
                    rows = [json.loads(l) for l in open(log)]
                    times[name].append(statistics.median(
                        x["step_s"] for x in rows[1:]))
                    if r == 0:
                        links = [l for l in p.stderr.splitlines()
                                 if "per step:" in l]
                        share = cpu_update_overlap(trace) if "cpu" in name \
                            else None
                        info[name] = (links[0].split("per step:")[1]
                                      if links else "", share)
                    print(label, name, "round", r + 1, "%.4f s" %
                          times[name][-1], file=sys.stderr)
            for name in plans:
                link, share = info[name]
                parts = [p.strip() for p in link.split(",")]
                h2d = next((p.split(" ", 1)[1] for p in parts
                            if p.startswith("host->device")), "?")
                d2h = next((p.split(" ", 1)[1] for p in parts
                            if p.startswith("device->host")), "?")
                hidden = ("%.0f%% of %.3f s" % (100 * share[1], share[0])
                          if share else "-")
                lines.append("| %s | %s | %.4f | %s | %s | %s |" % (
                    label, name, statistics.median(times[name]), h2d, d2h,
                    hidden))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        open(a.out, "w").write(text)


def clipping(a, thresholds):
    """Exact clipping with CPU updates, speculating or waiting (see the
    module's help); exits non-zero when the two train differently."""
    work = tempfile.mkdtemp(prefix="strata-offload-clip-")
    tool = lambda n: os.path.join(a.bin, n)
    ssd = os.path.join(work, "ssd")
    os.makedirs(ssd, exist_ok=True)
    lines = ["# CPU updates with exact clipping: speculating vs waiting for "
             "the norm (%s backend, %d steps, medians of %d interleaved "
             "rounds)" % (a.backend, a.steps, a.rounds), "",
             "`/usr/bin/python3 bench/offload.py --backend %s --clip %s`" %
             (a.backend, a.clip), "",
             "| states | clipping | updates | step (s) | CPU updates hidden "
             "(beside kernels) | before the backward pass ended | steps "
             "clipped | steps redone |",
             "|---|---|---|---|---|---|---|---|"]
    failed = []
    try:
        model, data, shape = benchmodels.model_and_data(work, a.dim,
                                                        a.layers)
        plans = {}
        for states in ("host", "ssd"):
            plans[(states, "none", "-")] = []
            for c in thresholds:
                plans[(states, c, "speculating")] = []
                plans[(states, c, "waiting")] = ["--speculate-updates=false"]
        times = {k: [] for k in plans}
        info = {}
        for r in range(a.rounds):
            for key, flags in plans.items():
                states, c, _ = key
                art = os.path.join(work, "a.strata")
                shutil.rmtree(art, ignore_errors=True)
                clip = [] if c == "none" else ["--clip-grad-norm", repr(c)]
                subprocess.run([tool("strata-compile"), model,
                                "--input-shape", shape, "--optimizer",
                                "adamw", "--lr", "1e-4", "--ssd-dir", ssd,
                                "--place-params", "host", "--place-states",
                                states, "--place-updates", "cpu", "-o",
                                art] + clip + flags,
                               check=True, capture_output=True)
                log = os.path.join(work, "log.jsonl")
                trace = os.path.join(work, "trace.json")
                cmd = [tool("strata-run"), art, "--backend", a.backend,
                       "--data", data, "--steps", str(a.steps),
                       "--log-json", log, "--no-checkpoint", "--ssd-dir",
                       ssd, "--quiet"]
                if r == 0:
                    cmd += ["--trace", trace, "--trace-steps", "3"]
                subprocess.run(cmd, check=True, capture_output=True)
                rows = [json.loads(l) for l in open(log)]
                times[key].append(statistics.median(
                    x["step_s"] for x in rows[1:]))
                if r == 0:
                    info[key] = (rows, cpu_update_overlap(trace),
                                 cpu_update_before_compute_end(trace))
                print(key, "round", r + 1, "%.4f s" % times[key][-1],
                      file=sys.stderr)
        for key in plans:
            states, c, mode = key
            rows, share, before = info[key]
            clipped = redone = "-"
            if c != "none":
                clipped = "%d of %d" % (sum(x["grad_norm"] > c
                                            for x in rows), len(rows))
            if mode == "speculating":
                redone = "%d" % sum(x["redone_updates"] > 0 for x in rows)
                wait = info[(states, c, "waiting")][0]
                if [(x["loss"], x["grad_norm"]) for x in rows] != \
                        [(x["loss"], x["grad_norm"]) for x in wait]:
                    failed.append("%s states, clip %s" % (states, c))
            lines.append("| %s | %s | %s | %.4f | %.0f%% of %.3f s | %.0f%% "
                         "| %s | %s |" % (states, c if c == "none" else
                                          "exact, %g" % c, mode,
                                          statistics.median(times[key]),
                                          100 * share[1], share[0],
                                          100 * before, clipped, redone))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines += ["", "Speculating and waiting runs trained bit for bit alike "
              "(losses and norms of every step)" if not failed else
              "DIFFERENT TRAINING: " + ", ".join(failed)]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        open(a.out, "w").write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
