#!/usr/bin/env python3
"""Data-parallel training on the CPU backend (strata-compile --data-parallel
N, mpirun -np N strata-run): how much of the all-reduce time the backward
pass hides (from rank 0's trace: the share of the comm track's time during
which the compute track was busy), and the step against one process on the
same global batch; and the same with the optimizer sharded over the ranks
(--shard-optimizer: reduce-scatters and all-gathers instead of
all-reduces, 1/N of the states a rank) and the parameters too
(--shard-parameters: 1/N of them a rank, gathered before each pass's
readers).

Compiles a GPT-2 of width --dim and --layers layers for one process on the
global batch (--batch rows of 64 tokens) and for --ranks ranks on
--batch / --ranks rows each (whole, sharded optimizer, sharded
parameters), AdamW,
everything in memory. Runs each for
--steps steps, --repeat interleaved rounds; prints a Markdown table of the
medians. On one machine the ranks share its cores: this measures the
overlap and the plan's communication, not a speed-up.

    bench/data_parallel.py [--dim 512] [--layers 8] [--ranks 2] [--batch 4]
        [--steps 4] [--repeat 3] [--out FILE.md]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchmodels  # noqa: E402
import tracetools  # noqa: E402


def mpi_env():
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


def compile_plan(bin_dir, model, rows, art, ranks, profile, shard=False):
    shutil.rmtree(art, ignore_errors=True)
    flags = ["--data-parallel", str(ranks)] if ranks > 1 else []
    if shard == "params":
        flags.append("--shard-parameters")
    elif shard:
        flags.append("--shard-optimizer")
    r = subprocess.run([os.path.join(bin_dir, "strata-compile"), model,
                        "--input-shape", "input_ids=%dx64" % rows,
                        "--optimizer", "adamw", "--profile", profile, "-o",
                        art] + flags, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("compile failed:\n" + r.stderr)
    with open(os.path.join(art, "manifest.txt")) as f:
        manifest = f.read()
    info = subprocess.run([os.path.join(bin_dir, "strata-inspect"), art],
                          capture_output=True, text=True).stdout
    states = re.search(r"([\d]+) optimizer-state elements", info)
    params = re.search(r"parameters: (\d+) trainable", info)
    return (float(re.search(r"predicted step time: ([\d.]+) ms",
                            manifest).group(1)) / 1e3,
            int(states.group(1)) if states else 0,
            int(params.group(1)) if params else 0)


def run(bin_dir, art, ranks, data, steps, trace):
    log = art + ".jsonl"
    cmd = [os.path.join(bin_dir, "strata-run"), art, "--data", data,
           "--steps", str(steps), "--log-json", log, "--no-checkpoint",
           "--quiet", "--trace", trace, "--trace-steps", str(steps)]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks)] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=mpi_env())
    if r.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), r.stderr))
    with open(log) as f:
        times = [json.loads(l)["step_s"] for l in f if l.strip()]
    return statistics.median(times[1:] if len(times) > 2 else times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.batch % args.ranks:
        sys.exit("--batch must be a multiple of --ranks")
    if not shutil.which("mpirun"):
        sys.exit("no mpirun: scripts/install-deps.sh installs OpenMPI")
    bin_dir = os.path.join(args.build, "bin")
    work = os.path.join(args.build, "bench", "data-parallel")
    os.makedirs(work, exist_ok=True)
    profile = benchmodels.machine_profile(os.path.join(work, "profile.txt"),
                                          bin_dir, os.path.join(work, "ssd"))
    model = os.path.join(work, "gpt2-%d-%d.onnx" % (args.dim, args.layers))
    data = os.path.join(work, "data.npy")
    benchmodels.generated_gpt2(model, data, 8192, args.dim, args.layers,
                               batch=args.batch, rows=64)
    # (ranks, sharded) -> artifact
    n = args.ranks
    plans = {(1, False): os.path.join(work, "one.strata"),
             (n, False): os.path.join(work, "n%d.strata" % n),
             (n, True): os.path.join(work, "n%d-zero.strata" % n),
             (n, "params"): os.path.join(work, "n%d-z3.strata" % n)}
    compiled = {k: compile_plan(bin_dir, model, args.batch // k[0], art, k[0],
                                profile, k[1]) for k, art in plans.items()}
    steps = {k: [] for k in plans}
    comm = {k: [] for k in plans if k[0] > 1}
    for r in range(args.repeat):
        for k, art in plans.items():
            trace = art + ".trace.json"
            steps[k].append(run(bin_dir, art, k[0], data, args.steps, trace))
            if k[0] > 1:
                comm[k].append(tracetools.lane_overlap(trace, tracetools.COMM))
        print("round %d of %d" % (r + 1, args.repeat), file=sys.stderr)
    total = {k: statistics.median(c[0] for c in v) / args.steps
             for k, v in comm.items()}
    hidden = {k: statistics.median(c[1] for c in v) for k, v in comm.items()}
    cols = [(1, False), (n, False), (n, True), (n, "params")]

    def row(label, fmt, value):
        return "| %s | %s |" % (label, " | ".join(
            "-" if value(k) is None else fmt % value(k) for k in cols))
    lines = [
        "Command: `bench/data_parallel.py %s` (CPU backend, 2-core "
        "development machine; the ranks share its cores)\n" %
        " ".join(sys.argv[1:]),
        "| | one process | %d ranks | %d ranks, --shard-optimizer | %d "
        "ranks, --shard-parameters |" % (n, n, n),
        "|---|---:|---:|---:|---:|",
        "| model | GPT-2 d%d L%d, AdamW, global batch %dx64 | %d rows a "
        "rank | %d rows a rank | %d rows a rank |" % (
            args.dim, args.layers, args.batch, args.batch // n,
            args.batch // n, args.batch // n),
        row("parameter elements a rank", "%d", lambda k: compiled[k][2]),
        row("optimizer-state elements a rank", "%d",
            lambda k: compiled[k][1]),
        row("predicted step", "%.3f s", lambda k: compiled[k][0]),
        row("measured step (median of %d rounds)" % args.repeat, "%.3f s",
            lambda k: statistics.median(steps[k])),
        row("collective time per step (rank 0)", "%.3f s",
            lambda k: total.get(k)),
        row("of it while the compute track was busy", "%.0f%%",
            lambda k: 100 * hidden[k] if k in hidden else None),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
