#!/usr/bin/env python3
"""The GPU check's training cases (scripts/gpu-check.sh, stage 'parity').

gpu-prepare.sh compiles each case of gpu-inputs/cases.txt (one line:
NAME GROUP RTOL, then the compile flags) and records the CPU backend's
losses (NAME.expected.jsonl). Here every case trains on --backend cuda,
twice, and the check fails unless

  - each run has every step, finite losses, and both runs are bit-identical
    (the kernels are deterministic);
  - the losses are within RTOL of the CPU backend's, and the skipped steps
    (fp16 loss scaling) are the CPU's exactly;
  - the cases of one GROUP (one step's arithmetic, other placements: host,
    SSD, swapped or recomputed activations) are bit-identical to each
    other on the GPU, as they are on the CPU;
  - a run stopped after 3 steps and resumed from its checkpoint gives the
    uninterrupted run's losses bit for bit (--resume-case).

    bench/gpu/parity.py --bin BIN --inputs gpu-inputs --work DIR
        [--backend cuda] [--steps 5] [--resume-case tiny-device]

Prints a line per case and exits 1 on any failure. (--backend cpu runs the
same checks on the development machine: gpu-prepare.sh does, so a broken
case is found before it costs GPU time.)
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys


def read_cases(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, group, rtol = line.split()[:3]
            cases.append((name, group, float(rtol)))
    return cases


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def train(args, name, tag, steps, resume=False, fresh=True):
    """Trains a copy of NAME's artifact; returns (log rows, stderr)."""
    art = os.path.join(args.work, "%s.%s" % (name, tag))
    if fresh:
        shutil.rmtree(art, ignore_errors=True)
        shutil.copytree(os.path.join(args.inputs, name + ".strata"), art)
    log = art + ".jsonl"
    cmd = [os.path.join(args.bin, "strata-run"), art, "--backend",
           args.backend, "--data", os.path.join(args.inputs, "corpus.bin"),
           "--steps", str(steps), "--log-json", log,
           "--ssd-dir", os.path.join(args.work, "ssd-%s.%s" % (name, tag))]
    if resume:
        cmd.append("--resume")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), r.returncode,
                                                 r.stderr.strip()[-2000:]))
    return rows(log), r.stderr


def losses(log):
    return [r["loss"] for r in log]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--backend", default="cuda")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--resume-case", default="tiny-device")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    cases = read_cases(os.path.join(args.inputs, "cases.txt"))
    if not cases:
        print("FAIL no cases in %s/cases.txt" % args.inputs)
        return 1
    failures = 0
    first_of_group = {}

    def fail(name, why):
        nonlocal failures
        failures += 1
        print("FAIL %-22s %s" % (name, why))

    for name, group, rtol in cases:
        try:
            a, err = train(args, name, "1", args.steps)
            b, _ = train(args, name, "2", args.steps)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            fail(name, str(e))
            continue
        want = rows(os.path.join(args.inputs, name + ".expected.jsonl"))
        la, lw = losses(a), losses(want)
        if len(la) != args.steps or len(lw) != args.steps:
            fail(name, "%d steps logged, %d expected (CPU: %d)"
                 % (len(la), args.steps, len(lw)))
            continue
        if not all(math.isfinite(x) for x in la):
            fail(name, "non-finite losses %s" % la)
            continue
        worst = max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(la, lw))
        notes = ["vs CPU %.1e (rtol %g)" % (worst, rtol)]
        ok = worst <= rtol
        if la != losses(b):
            ok = False
            notes.append("run to run DIFFERENT")
        skips = [r.get("skipped", False) for r in a]
        want_skips = [r.get("skipped", False) for r in want]
        if skips != want_skips:
            ok = False
            notes.append("skipped %s, CPU %s" % (skips, want_skips))
        elif any(skips):
            notes.append("skipped steps as on the CPU %s" % skips)
        if group in first_of_group:
            ref, ref_losses = first_of_group[group]
            if la != ref_losses:
                ok = False
                notes.append("DIFFERS from %s (same arithmetic)" % ref)
            else:
                notes.append("bit-identical to %s" % ref)
        else:
            first_of_group[group] = (name, la)
        mem = [l for l in err.splitlines() if "memory used" in l]
        print("%-4s %-22s %s" % ("ok" if ok else "FAIL", name,
                                 "; ".join(notes)))
        for line in mem:
            print("     " + line.replace("strata-run: ", ""))
        if not ok:
            failures += 1

    # Resume: 3 steps, then on from the checkpoint to --steps.
    name = args.resume_case
    try:
        full, _ = train(args, name, "full", args.steps)
        train(args, name, "resumed", 3)
        resumed, _ = train(args, name, "resumed", args.steps, resume=True,
                           fresh=False)
        got = losses(resumed)
        # The log of a resumed run holds the steps it ran after the first 3
        # (or all of them when it appends): compare the tail.
        tail = got[-(args.steps - 3):]
        if tail == losses(full)[3:]:
            print("ok   resume %-15s steps 4-%d after a restart are "
                  "bit-identical" % (name, args.steps))
        else:
            fail("resume " + name, "steps 4-%d %s, uninterrupted %s"
                 % (args.steps, tail, losses(full)[3:]))
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        fail("resume " + name, str(e))
    total = len(cases) + 1
    print("%s: %d of %d training checks pass" % (args.backend,
                                                 total - failures, total))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
