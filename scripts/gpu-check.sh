#!/usr/bin/env bash
# The one GPU check (issue: the CUDA backend). Runs on the GPU machine
# (CUDA toolkit, CMake, Ninja, PyTorch; no LLVM/MLIR, liburing or protobuf;
# no network) in a few minutes, each stage under its own time limit, and
# writes one summary. Prepare its inputs on a development machine first:
#
#   scripts/gpu-prepare.sh                       # -> gpu-inputs/ (git-ignored)
#   (device tool) run command="scripts/gpu-check.sh"
#                  carry=["gpu-inputs", "build-gpu/bin"]
#                  timeout_s=540
#
# It exits non-zero when any stage fails or finds a wrong result; a
# "skipped:" line counts only for a stage that exited 0. Sized to finish in
# about 2 minutes on the H200; the stages' caps add up to 320 s (the build,
# when the carried one does not run here, 200 s more).
#
# Stages (a killed run still leaves what it has under $OUT):
#   env        nvidia-smi, nvcc, CPU flags (AVX-512?), memory, disk, and the
#              commit the inputs were prepared at (gpu-inputs/STAMP)
#   build      the runtime alone with CUDA for sm_90, unless the carried
#              build-gpu/bin from gpu-prepare.sh runs here
#   kernels    strata-kernel-check: a case of every kernel of the table
#              against the CPU backend (a kernel without a case fails), and
#              the all-reduce of data-parallel plans on device memory
#              through NCCL at world size 1 (where the build found NCCL;
#              the check says "skip ... NCCL" otherwise)
#   sanitize   compute-sanitizer memcheck and racecheck on the kernel cases,
#              and memcheck and synccheck on whole training steps with
#              copies on their own streams (host and SSD placements)
#   calibrate  strata-calibrate --backend cuda -> $OUT/h200.profile
#   parity     bench/gpu/parity.py: GPT-2-tiny in every configuration of
#              gpu-inputs/cases.txt (placements, fusion off, CPU updates,
#              bf16 with and without low copies, fp16, fp16 loss-scale
#              skips), 5 steps twice on cuda: against the CPU backend's
#              losses, run to run and across placements bit for bit, and a
#              resumed run against an uninterrupted one
#   big-*      the ~1B-parameter plan all on the device, then with optimizer
#              state on the host: finite losses, the two bit-identical, the
#              step time, TFLOP/s from the plan's own FLOP count (manifest)
#              against the measured fp32 GEMM peak, measured vs predicted,
#              bytes per link, the memory really used beside the plan
#   offload    the ~1B plan with parameters and states in host memory,
#              updates on the GPU against updates on the CPU beside the
#              backward pass: bit-identical losses, step times, the share of
#              the CPU's update time hidden behind the GPU's work
#   cpu-adamw  bench/cpu_adamw.py: the CPU AdamW against torch's
#
# Output: $OUT (default $OUT from the device tool, else ./gpu-results) holds
# summary.md (commit it as bench/results/gpu-check-DATE.md), the profile,
# stages.log (every stage's output in turn) and the two traces.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-results}
IN=$ROOT/gpu-inputs
BUILD=${BUILD:-$ROOT/build-gpu}
BIN=$BUILD/bin
mkdir -p "$OUT"
SUMMARY=$OUT/summary.md
WORK=$(mktemp -d /tmp/strata-gpu-check.XXXXXX)
START=$(date +%s)
# The commit: the inputs' stamp (gpu-prepare.sh), and the tree's own where
# git is here; a mismatch is reported (the inputs are of another commit).
STAMP_COMMIT=$(awk '$1 == "commit" {print $2}' "$IN/STAMP" 2>/dev/null)
STAMP_TREE=$(awk '$1 == "tree" {$1 = ""; print substr($0, 2)}' "$IN/STAMP" 2>/dev/null)
HERE_COMMIT=$(git rev-parse HEAD 2>/dev/null || true)
{
  echo "# GPU check, $(date -u +%Y-%m-%d), commit ${STAMP_COMMIT:-unknown} (${STAMP_TREE:-no gpu-inputs/STAMP})"
  echo
  if [ -n "$HERE_COMMIT" ] && [ -n "$STAMP_COMMIT" ] && [ "$HERE_COMMIT" != "$STAMP_COMMIT" ]; then
    echo "WARNING: the inputs were prepared at $STAMP_COMMIT, the tree here is $HERE_COMMIT"
    echo
  fi
  echo "| stage | result | seconds |"
  echo "|---|---|---|"
} > "$SUMMARY"
FAILURES=0
FIGURES=$WORK/figures.md
: > "$FIGURES"
# Stage logs go to $LOGS and, each in turn, into $OUT/stages.log: the device
# tool brings back at most 8 files.
LOGS=$WORK/logs
mkdir -p "$LOGS"
export ROOT OUT IN BUILD BIN WORK LOGS

# stage NAME SECONDS COMMAND...: runs it under `timeout`, logs to
# $LOGS/NAME.log (and $OUT/stages.log), adds a summary row.
stage() {
  local name=$1 cap=$2
  shift 2
  local t0 rc
  t0=$(date +%s.%N)
  if [ "$(type -t "$1")" = function ]; then
    # timeout runs programs: a stage written as a function runs in a bash
    # that has it (the functions and variables are exported).
    timeout --kill-after=5 "$cap" bash -c "$1 \"\$@\"" _ "${@:2}" \
      > "$LOGS/$name.log" 2>&1
  else
    timeout --kill-after=5 "$cap" "$@" > "$LOGS/$name.log" 2>&1
  fi
  rc=$?
  local secs
  secs=$(python3 -c "import time; print('%.1f' % (time.time() - $t0))")
  local verdict=ok
  [ $rc -eq 124 ] && verdict="TIMEOUT (${cap}s)"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && verdict="FAILED (exit $rc)"
  # A skip stands only for a stage that did not fail.
  if [ $rc -eq 0 ] && grep -q '^skipped:' "$LOGS/$name.log"; then
    verdict="skipped: $(grep -m1 '^skipped:' "$LOGS/$name.log" | cut -c10-)"
  fi
  [ $rc -ne 0 ] && FAILURES=$((FAILURES + 1))
  echo "| $name | $verdict | $secs |" >> "$SUMMARY"
  { echo "===== $name: $verdict (${secs}s)"; cat "$LOGS/$name.log"; } >> "$OUT/stages.log"
  echo "[gpu-check] $name: $verdict (${secs}s)"
  return $rc
}

env_stage() {
  nvidia-smi || true
  (nvcc --version || /usr/local/cuda/bin/nvcc --version) | tail -2
  lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | sed 's/Flags:.*/&/' |
    awk '/Flags/ {print "avx512f:", (index($0, "avx512f") ? "yes" : "no"); next} {print}'
  free -g | head -2
  df -h "$ROOT" /tmp | tail -2
  echo "inputs: $(tr '\n' ' ' < "$IN/STAMP" 2>/dev/null || echo 'no gpu-inputs/STAMP')"
  for lib in libnccl libmpi; do
    echo "$lib: $(ldconfig -p 2>/dev/null | grep -m1 "$lib" | awk '{print $NF}' || true)"
  done
}
export -f env_stage
stage env 5 env_stage

build_stage() {
  if [ "$PREBUILT" = 1 ]; then
    echo "reusing the prebuilt $BIN (carried; it runs here)"
    ldd "$BIN/strata-run"
    return 0
  fi
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DSTRATA_BUILD_COMPILER=OFF \
    -DSTRATA_BUILD_TESTS=OFF -DSTRATA_CUDA_ARCHITECTURES=90 &&
    cmake --build "$BUILD" -j "$(nproc)"
}
export -f build_stage
# A runtime build made on the development machine without OpenBLAS or
# liburing (scripts/gpu-prepare.sh makes it) is carried as build-gpu/bin;
# when it runs here it saves the build's minutes, else build here.
PREBUILT=0
if [ -x "$BIN/strata-run" ] && "$BIN/strata-run" --help > /dev/null 2>&1; then
  PREBUILT=1
elif [ -d "$BIN" ]; then
  BUILD=$ROOT/build-gpu-here
  BIN=$BUILD/bin
fi
export PREBUILT BUILD BIN
if ! stage build 200 build_stage; then
  echo "build failed: see stages.log" >> "$FIGURES"
  cat "$FIGURES" >> "$SUMMARY"
  cat "$SUMMARY"
  exit 1
fi

stage kernels 20 "$BIN/strata-kernel-check" --backend cuda
grep -E '^FAIL|kernel cases match' "$LOGS/kernels.log" | sed 's/^/    /' >> "$FIGURES"

sanitize() {
  set -o pipefail # A sanitizer's report must fail the stage through `tail`.
  local san
  san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [ ! -x "$san" ]; then
    echo "skipped: compute-sanitizer not installed"
    return 0
  fi
  "$san" --tool memcheck --error-exitcode 9 \
    "$BIN/strata-kernel-check" --backend cuda --small | tail -2 &&
    "$san" --tool racecheck --error-exitcode 9 \
      "$BIN/strata-kernel-check" --backend cuda --small | tail -2 || return 1
  # Whole steps: kernels and copies on three streams ordered by events,
  # pinned host memory and the SSD's staging (2 steps each).
  local name tool
  for name in tiny-host tiny-ssd-params; do
    for tool in memcheck synccheck; do
      rm -rf "$WORK/san-$name" && cp -r "$IN/$name.strata" "$WORK/san-$name" &&
        "$san" --tool "$tool" --error-exitcode 9 \
          "$BIN/strata-run" "$WORK/san-$name" --backend cuda \
          --data "$IN/corpus.bin" --steps 2 --quiet --no-checkpoint \
          --ssd-dir "$WORK/san-ssd" | tail -2 || return 1
      echo "$tool: $name: clean"
    done
  done
}
export -f sanitize
stage sanitize 50 sanitize

stage calibrate 25 "$BIN/strata-calibrate" --backend cuda -o "$OUT/h200.profile"
grep -E '^(gpu|matmul|streaming|launch|pinned)' "$LOGS/calibrate.log" | sed 's/^/    /' >> "$FIGURES"
PEAK=$(awk '$1 == "gemm_peak_f32_gflops" {print $2}' "$OUT/h200.profile" 2>/dev/null)
export PEAK

stage parity 60 python3 "$ROOT/bench/gpu/parity.py" --bin "$BIN" \
  --inputs "$IN" --work "$WORK/parity"
sed 's/^/    /' "$LOGS/parity.log" | grep -v '^    *$' >> "$FIGURES"

# big NAME: 6 steps of the ~1B plan: finite losses, the step's rate from
# the plan's FLOP count, the memory really used.
big() {
  local name=$1
  rm -rf "$WORK/$name" && cp -r "$IN/$name.strata" "$WORK/$name" || return 1
  "$BIN/strata-run" "$WORK/$name" --backend cuda --data "$IN/big-data.npy" \
    --steps 6 --log-json "$WORK/$name.jsonl" --no-checkpoint \
    --trace "$OUT/$name.trace.json" --trace-steps 2 || return 1
  python3 - "$WORK/$name.jsonl" "${PEAK:-0}" "$IN/$name.strata/manifest.txt" <<'PY'
import json, math, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peak = float(sys.argv[2])
manifest = open(sys.argv[3]).read()
losses = [r["loss"] for r in rows]
print("losses:", [round(l, 4) for l in losses])
if len(rows) != 6 or not all(math.isfinite(l) for l in losses):
    sys.exit("FAIL: 6 finite losses expected")
times = sorted(r["step_s"] for r in rows[1:])
step = times[len(times) // 2]
m = re.search(r"matrix-product work per step: (\S+) FLOP .*recomputation "
              r"adds (\S+) FLOP", manifest)
if not m:
    sys.exit("FAIL: the manifest states no FLOP count (an old artifact?)")
flops = float(m.group(1)) + float(m.group(2))
tflops = flops / step / 1e12
print("median step (steps 2-6): %.4f s; %.4g FLOP a step (the plan's); "
      "%.1f TFLOP/s" % (step, flops, tflops))
if peak > 0:
    print("fp32 GEMM peak %.1f TFLOP/s: the step runs at %.0f%% of it"
          % (peak / 1e3, 100 * tflops / (peak / 1e3)))
PY
}
export -f big
stage big-device 45 big big-device
stage big-hoststates 45 big big-hoststates
# The state's tier changes where the update reads from, not its arithmetic.
big_same() {
  python3 - "$WORK/big-device.jsonl" "$WORK/big-hoststates.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:])
print("big-device vs big-hoststates:", "bit-identical" if a == b else "DIFFERENT %s %s" % (a, b))
sys.exit(0 if a == b and a else 1)
PY
}
export -f big_same
stage big-same 5 big_same
# offload: parameters and states in host memory, updates on the device
# (fetched and written back) against updates on the CPU; the share of the
# CPU's update time that ran while the GPU computed, from the trace.
offload() {
  for u in device cpu; do
    rm -rf "$WORK/off-$u" && cp -r "$IN/big-updates-$u.strata" "$WORK/off-$u" &&
      "$BIN/strata-run" "$WORK/off-$u" --backend cuda --data "$IN/big-data.npy" \
        --steps 4 --log-json "$WORK/off-$u.jsonl" --no-checkpoint \
        --trace "$WORK/off-$u.trace.json" --trace-steps 3 || return 1
  done
  python3 - "$WORK/off-device.jsonl" "$WORK/off-cpu.jsonl" "$WORK/off-cpu.trace.json" "$ROOT/bench" <<'PY'
import json, sys
def med(p):
    rows = [json.loads(l) for l in open(p)]
    t = sorted(r["step_s"] for r in rows[1:])
    return t[len(t) // 2], [(r["loss"], r["grad_norm"]) for r in rows]
dev, dl = med(sys.argv[1])
cpu, cl = med(sys.argv[2])
print("losses, updates on the device:", [round(l, 4) for l, _ in dl])
print("losses, updates on the CPU:   ", [round(l, 4) for l, _ in cl])
# The GPU's AdamW and the CPU's (AVX-512) must agree bit for bit.
same = dl == cl
print("updates on the device vs the CPU:", "bit-identical" if same else "DIFFERENT")
print("updates on the device %.3f s a step, on the CPU %.3f s (%.2fx)" % (dev, cpu, dev / cpu))
sys.path.insert(0, sys.argv[4])
from tracetools import cpu_update_overlap
total, share = cpu_update_overlap(sys.argv[3])
if total:
    print("CPU updates: %.3f s in the traced steps, %.0f%% of it while the GPU computed" % (total, 100 * share))
sys.exit(0 if same else 1)
PY
}
export -f offload
stage offload 40 offload
echo "    offload: $(grep -E 'vs the CPU|a step, on the CPU|while the GPU' "$LOGS/offload.log" | tr '\n' ' ')" >> "$FIGURES"

# The CPU AdamW against torch's on this machine's CPU (AVX-512, 16 cores).
stage cpu-adamw 25 python3 "$ROOT/bench/cpu_adamw.py" --bin "$BIN" --rounds 1
grep -E 'torch|strata \||Strata is|Memory' "$LOGS/cpu-adamw.log" | sed 's/^/    /' >> "$FIGURES"

for b in big-device big-hoststates; do
  echo "    $b: $(grep -E 'median step|GEMM peak|measured median|per step|memory used' "$LOGS/$b.log" | tr '\n' ' ')" >> "$FIGURES"
done

{
  echo
  if [ "$FAILURES" -eq 0 ]; then
    echo "All stages passed."
  else
    echo "$FAILURES stage(s) FAILED: see stages.log."
  fi
  echo
  echo "Total $(( $(date +%s) - START )) s."
  echo
  echo "## Figures"
  echo
  cat "$FIGURES"
} >> "$SUMMARY"
rm -rf "$WORK"
cat "$SUMMARY"
[ "$FAILURES" -eq 0 ]
