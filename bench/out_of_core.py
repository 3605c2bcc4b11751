#!/usr/bin/env python3
"""Training state that does not fit in memory, trained from the SSD on the
CPU backend, and the same model in memory and out of core bit for bit.

    bench/out_of_core.py train --ssd DIR [--preset gpt-1b] [--steps 6]
    bench/out_of_core.py identity --ssd DIR [--preset gpt-350m] [--steps 3]

`train`: a model of test/models/synthetic.py (its weights never written:
--synthetic-init generates them at load), AdamW, compiled with --gpu-mem
and --cpu-mem budgets (on the CPU backend the device is a budgeted host
arena) and an SSD directory for the rest. It trains on a repeated token
pattern (so the loss must fall), is killed with SIGKILL after a checkpoint,
resumed, and must give the resumed steps the killed run's losses. It
reports the step time, the prediction and the lower bound (the busiest of
compute, SSD reads, SSD writes, host copies), the bytes per link per step,
the peak RSS against the budgets, and where the gap to the bound goes.

`identity`: the same model compiled with no budget (all in memory) and out
of core; the losses of every step must be bit-identical.

Results go to stdout as markdown (--out FILE too).
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "models"))
import synthetic  # noqa: E402
import benchmodels  # noqa: E402

RULES = ["--synthetic-init=" + r for r in synthetic.INIT_RULES]


def tool(args, name):
    return os.path.join(args.bin, name)


def losses(path):
    if not os.path.exists(path):
        return {}
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                out[rec["step"]] = rec
    return out


def compile_model(args, model, art, budgets):
    shutil.rmtree(art, ignore_errors=True)
    start = time.monotonic()
    profile = ["--profile", args.profile] if args.profile else []
    r = subprocess.run([tool(args, "strata-compile"), model, "-o", art,
                        "--optimizer", "adamw", "--lr", str(args.lr)] +
                       profile + budgets + RULES, capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit("compile failed:\n" + r.stderr)
    return time.monotonic() - start


def write_data(args, path, seq):
    rng = np.random.default_rng(0)
    pattern = rng.integers(0, synthetic.PRESETS[args.preset]["vocab"],
                           size=seq + 1)
    np.save(path, np.tile(pattern, (64, 1)).astype(np.int64))


def run_steps(args, art, data, steps, log, extra=(), kill_after=None):
    """Runs strata-run to `steps`; with kill_after=N, SIGKILLs it once the
    log has N steps and a checkpoint exists. Returns (stderr, killed)."""
    cmd = [tool(args, "strata-run"), art, "--data", data, "--steps",
           str(steps), "--log-json", log] + list(extra)
    errpath = log + ".stderr"
    with open(errpath, "w") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        killed = False
        while p.poll() is None:
            time.sleep(0.5)
            if kill_after and len(losses(log)) >= kill_after:
                p.send_signal(signal.SIGKILL)
                p.wait()
                killed = True
    with open(errpath) as f:
        text = f.read()
    if not killed and p.returncode != 0:
        sys.exit("strata-run failed:\n" + text)
    return text, killed


def manifest_figures(art):
    with open(os.path.join(art, "manifest.txt")) as f:
        m = f.read()
    fig = {}
    for key, pat in (("predicted", r"predicted step time: ([\d.]+) ms"),
                     ("serial", r"\(([\d.]+) ms one after another"),
                     ("compute", r"compute ([\d.]+)"),
                     ("h2d", r"host->device ([\d.]+)"),
                     ("d2h", r"device->host ([\d.]+)"),
                     ("ssd", r"ssd ([\d.]+)"),
                     ("cpu", r"cpu updates ([\d.]+)"),
                     ("bound", r"lower bound \(the busiest of these\) "
                               r"([\d.]+) ms")):
        mm = re.search(pat, m)
        fig[key] = float(mm.group(1)) / 1e3 if mm else float("nan")
    for tier in ("device", "host", "ssd"):
        mm = re.search(r"  %s: (\S+ \S+)" % tier, m)
        fig["tier_" + tier] = mm.group(1) if mm else "-"
    mm = re.search(r"resident parameters (\S+ \S+)", m)
    if mm:
        fig["tier_device"] += " arena + %s resident" % mm.group(1)
    return fig


def prepare(args):
    """The model (weights never written), its data and an empty SSD
    directory: (description, model path, data path, SSD directory)."""
    desc = synthetic.write(args.work, args.preset, dict(
        synthetic.PRESETS[args.preset]), args.batch, args.seq)
    model = os.path.join(args.work, args.preset + ".onnx")
    data = os.path.join(args.work, "pattern.npy")
    write_data(args, data, args.seq)
    ssd = os.path.join(args.ssd, "strata-ooc")
    shutil.rmtree(ssd, ignore_errors=True)
    os.makedirs(ssd)
    return desc, model, data, ssd


def train(args):
    work = args.work
    desc, model, data, ssd = prepare(args)
    art = os.path.join(work, args.preset + ".strata")
    budgets = ["--gpu-mem", args.gpu_mem, "--cpu-mem", args.cpu_mem,
               "--ssd-dir", ssd]
    print("compiling %.2fB parameters..." % (desc["parameters"] / 1e9),
          file=sys.stderr, flush=True)
    compile_s = compile_model(args, model, art, budgets)
    fig = manifest_figures(art)
    ckpt = os.path.join(work, "ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    log_a, log_b = os.path.join(work, "a.jsonl"), os.path.join(work, "b.jsonl")
    for p in (log_a, log_b):
        if os.path.exists(p):
            os.remove(p)
    common = ["--checkpoint-dir", ckpt, "--save-every", str(args.save_every)]
    kill_after = args.save_every + 1
    print("training (killed after step %d)..." % kill_after, file=sys.stderr,
          flush=True)
    _, killed = run_steps(args, art, data, args.steps, log_a, common,
                          kill_after=kill_after)
    print("resuming...", file=sys.stderr, flush=True)
    err_b, _ = run_steps(args, art, data, args.steps, log_b,
                         common + ["--resume"])
    a, b = losses(log_a), losses(log_b)
    same = [s for s in b if s in a]
    identical = all(a[s]["loss"] == b[s]["loss"] for s in same)
    curve = {**a, **b}
    steps = sorted(curve)
    first, last = curve[steps[0]]["loss"], curve[steps[-1]]["loss"]
    med = re.search(r"median step ([\d.]+) s; per step: host->device (\S+ "
                    r"\S+), device->host (\S+ \S+), ssd->device (\S+ \S+), "
                    r"device->ssd (\S+ \S+)", err_b)
    rss = re.search(r"peak RSS (\S+ \S+)", err_b)
    step = float(med.group(1)) if med else float("nan")
    lines = [
        "| | |", "|---|---|",
        "| model | %s: %.3fB parameters, batch %dx%d, AdamW "
        "(%.1f GiB of fp32 training state with gradients) |" % (
            args.preset, desc["parameters"] / 1e9, args.batch, args.seq,
            16 * desc["parameters"] / 2**30),
        "| budgets | --gpu-mem %s --cpu-mem %s, one SSD directory; lr %g; "
        "profile %s |" % (args.gpu_mem, args.cpu_mem, args.lr,
                          os.path.relpath(args.profile, ROOT)
                          if args.profile else "built-in defaults"),
        "| compile | %.0f s |" % compile_s,
        "| planned | device %s, host %s, SSD %s |" % (
            fig["tier_device"], fig["tier_host"], fig["tier_ssd"]),
        "| losses | %s |" % ", ".join("%d: %.4f" % (s, curve[s]["loss"])
                                     for s in steps),
        "| loss falls | %s (%.4f -> %.4f) |" % (
            "yes" if last < first - 0.5 else "NO", first, last),
        "| killed and resumed | %s after step %d; resumed steps %s; losses "
        "of the steps both runs made identical: %s |" % (
            "SIGKILL" if killed else "finished before the kill",
            max(a) if a else 0, ", ".join(str(s) for s in sorted(b)),
            "yes" if identical and same else "NO"),
        "| measured step (median of the resumed run) | %.2f s |" % step,
        "| predicted step | %.2f s (program order: %.2f s) |" % (
            fig["predicted"], fig["serial"]),
        "| lower bound | %.2f s (busiest of: compute %.2f s, host->device "
        "%.2f s, device->host %.2f s, SSD %.2f s, CPU updates %.2f s) |" % (
            fig["bound"], fig["compute"], fig["h2d"], fig["d2h"], fig["ssd"],
            fig["cpu"]),
        "| bytes per step | %s |" % (
            "host->device %s, device->host %s, ssd->device %s, device->ssd "
            "%s" % med.groups()[1:] if med else "-"),
        "| peak RSS | %s (budgets %s + %s) |" % (
            rss.group(1) if rss else "-", args.gpu_mem, args.cpu_mem),
    ]
    ok = killed and identical and same and last < first - 0.5
    return "\n".join(lines) + "\n", ok


def identity(args):
    work = args.work
    desc, model, data, ssd = prepare(args)
    rows, curves = [], {}
    for name, budgets in (
            ("in memory", []),
            ("out of core", ["--gpu-mem", args.gpu_mem, "--cpu-mem",
                             args.cpu_mem, "--ssd-dir", ssd])):
        art = os.path.join(work, name.replace(" ", "-") + ".strata")
        print("%s: compiling..." % name, file=sys.stderr, flush=True)
        compile_s = compile_model(args, model, art, budgets)
        log = os.path.join(work, name.replace(" ", "-") + ".jsonl")
        if os.path.exists(log):
            os.remove(log)
        print("%s: training..." % name, file=sys.stderr, flush=True)
        err, _ = run_steps(args, art, data, args.steps, log,
                           ["--no-checkpoint"])
        fig = manifest_figures(art)
        curves[name] = [losses(log)[s]["loss"] for s in sorted(losses(log))]
        rss = re.search(r"peak RSS (\S+ \S+)", err)
        med = re.search(r"median step ([\d.]+) s", err)
        rows.append("| %s | %.0f s | device %s, host %s, SSD %s | %s s | %s "
                    "| %s |" % (name, compile_s, fig["tier_device"],
                                fig["tier_host"], fig["tier_ssd"], med.group(1) if med else "-",
                                rss.group(1) if rss else "-",
                                ", ".join(repr(v) for v in curves[name])))
    same = curves["in memory"] == curves["out of core"]
    text = ("%s: %.3fB parameters, batch %dx%d, AdamW, %d steps. Losses "
            "bit-identical: %s\n\n| run | compile | planned | median step | "
            "peak RSS | losses |\n|---|---:|---|---:|---:|---|\n" % (
                args.preset, desc["parameters"] / 1e9, args.batch, args.seq,
                args.steps, "yes" if same else "NO") + "\n".join(rows) + "\n")
    return text, same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["train", "identity"])
    ap.add_argument("--ssd", required=True,
                    help="a directory on the SSD (a subdirectory is used)")
    ap.add_argument("--preset", help="test/models/synthetic.py preset "
                    "(default: gpt-1b for train, gpt-350m for identity)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=0,
                    help="default: 6 for train, 3 for identity")
    ap.add_argument("--save-every", type=int, default=2)
    ap.add_argument("--gpu-mem", default="1GiB")
    ap.add_argument("--cpu-mem", default="4GiB")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--profile", default=os.path.join(
        ROOT, "build", "examples", "machine-profile.txt"),
        help="machine profile (default: the build's calibration of this "
             "machine, made by strata-calibrate when missing; '' for the "
             "built-in defaults)")
    ap.add_argument("--work", help="default: a temporary directory")
    ap.add_argument("--out", help="markdown file")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    args.preset = args.preset or ("gpt-1b" if args.what == "train" else
                                  "gpt-350m")
    args.steps = args.steps or (6 if args.what == "train" else 3)
    args.work = args.work or tempfile.mkdtemp(prefix="strata-ooc-")
    os.makedirs(args.work, exist_ok=True)
    args.profile = benchmodels.machine_profile(
        args.profile, args.bin, os.path.join(args.ssd, "strata-calibrate"))
    text, ok = (train if args.what == "train" else identity)(args)
    text = "Command: `bench/out_of_core.py %s` (2-core development machine, " \
        "virtual disk)\n\n%s" % (" ".join(sys.argv[1:]), text)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
