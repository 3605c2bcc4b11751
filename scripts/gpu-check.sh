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
# Stages (a killed run still leaves what it has under $OUT):
#   env        nvidia-smi, nvcc, CPU flags (AVX-512?), memory, disk
#   build      the runtime alone with CUDA for sm_90, unless the carried
#              build-gpu/bin from gpu-prepare.sh runs here
#   kernels    strata-kernel-check: every kernel against the CPU backend
#   memcheck   compute-sanitizer memcheck and racecheck on the small cases
#   calibrate  strata-calibrate --backend cuda -> $OUT/h200.profile
#   parity     GPT-2-tiny (device, host, SSD placements): 5 steps on cuda,
#              losses against the CPU backend's (rtol 1e-4), and twice on
#              cuda bit for bit
#   offload    the ~1B plan with parameters and states in host memory,
#              updates on the GPU (fetched, written back) against updates on
#              the CPU beside the backward pass: bit-identical losses, step
#              times, and the share of the CPU's update time hidden behind
#              the GPU's work (from the trace)
#   cpu-adamw  bench/cpu_adamw.py: the CPU AdamW (AVX-512 here) against
#              torch.optim.AdamW and the memory bound
#   big-*      the ~1B-parameter plan all on the device, then with optimizer
#              state on the host: step time, TFLOP/s of the step against the
#              measured fp32 GEMM peak, measured vs predicted, bytes per link,
#              and a trace of its first two steps (chrome://tracing)
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
{
  echo "# GPU check, $(date -u +%Y-%m-%d) ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo
  echo "| stage | result | seconds |"
  echo "|---|---|---|"
} > "$SUMMARY"
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
  grep -q '^skipped:' "$LOGS/$name.log" && verdict="skipped: $(grep -m1 '^skipped:' "$LOGS/$name.log" | cut -c10-)"
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
}
export -f env_stage
stage env 20 env_stage

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
if ! stage build 240 build_stage; then
  echo "build failed: see stages.log" >> "$FIGURES"
  cat "$FIGURES" >> "$SUMMARY"
  exit 1
fi

stage kernels 60 "$BIN/strata-kernel-check" --backend cuda
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
    "$BIN/strata-kernel-check" --backend cuda --small | tail -3 &&
    "$san" --tool racecheck --error-exitcode 9 \
      "$BIN/strata-kernel-check" --backend cuda --small | tail -3
}
export -f sanitize
stage memcheck 90 sanitize

stage calibrate 60 "$BIN/strata-calibrate" --backend cuda -o "$OUT/h200.profile"
grep -E '^(gpu|matmul|streaming|launch|pinned)' "$LOGS/calibrate.log" | sed 's/^/    /' >> "$FIGURES"
PEAK=$(awk '$1 == "gemm_peak_f32_gflops" {print $2}' "$OUT/h200.profile" 2>/dev/null)
export PEAK

# parity NAME: 5 steps on cuda twice; losses vs the CPU backend's.
parity() {
  local name=$1
  for run in 1 2; do
    rm -rf "$WORK/$name.$run" && cp -r "$IN/$name.strata" "$WORK/$name.$run" &&
      "$BIN/strata-run" "$WORK/$name.$run" --backend cuda \
        --data "$IN/corpus.bin" --steps 5 --quiet \
        --log-json "$WORK/$name.$run.jsonl" --ssd-dir "$WORK/ssd-$name" ||
      return 1
  done
  python3 - "$IN/$name.expected.jsonl" "$WORK/$name.1.jsonl" "$WORK/$name.2.jsonl" <<'PY'
import json, sys
def losses(p):
    return [json.loads(l)["loss"] for l in open(p)]
cpu, a, b = (losses(p) for p in sys.argv[1:])
worst = max(abs(x - y) / abs(y) for x, y in zip(a, cpu))
print("cpu  ", cpu)
print("cuda ", a)
print("max relative loss difference vs cpu: %.2e (rtol 1e-4)" % worst)
print("cuda run to run:", "bit-identical" if a == b else "DIFFERENT")
sys.exit(0 if worst <= 1e-4 and a == b and len(a) == len(cpu) == 5 else 1)
PY
}
export -f parity
for p in tiny-device tiny-host tiny-ssd tiny-offload; do
  stage "parity-$p" 60 parity "$p"
  echo "    $p: $(grep -E 'max relative|run to run' "$LOGS/parity-$p.log" | tr '\n' ' ')" >> "$FIGURES"
done

# big NAME: 6 steps of the ~1B plan; the step's rate against the peak.
big() {
  local name=$1
  rm -rf "$WORK/$name" && cp -r "$IN/$name.strata" "$WORK/$name" || return 1
  "$BIN/strata-run" "$WORK/$name" --backend cuda --data "$IN/big-data.npy" \
    --steps 6 --log-json "$WORK/$name.jsonl" --no-checkpoint \
    --trace "$OUT/$name.trace.json" --trace-steps 2 || return 1
  python3 - "$WORK/$name.jsonl" "${PEAK:-0}" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peak = float(sys.argv[2])
times = sorted(r.get("step_s", 0) for r in rows[1:])
step = times[len(times) // 2]
# 6 N T for the matrices (forward + backward) plus attention scores:
# 18 layers, width 2048, 4 x 512 tokens, 0.973e9 parameters.
layers, dim, batch, seq, n = 18, 2048, 4, 512, 0.973e9
tokens = batch * seq
flops = 6 * n * tokens + 12 * layers * batch * seq * seq * dim
tflops = flops / step / 1e12
print("losses:", [round(r["loss"], 4) for r in rows])
print("median step (steps 2-6): %.4f s; %.1f TFLOP/s" % (step, tflops))
if peak > 0:
    print("fp32 GEMM peak %.1f TFLOP/s: the step runs at %.0f%% of it"
          % (peak / 1e3, 100 * tflops / (peak / 1e3)))
PY
}
export -f big
stage big-device 90 big big-device
stage big-hoststates 90 big big-hoststates
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
stage offload 150 offload
echo "    offload: $(grep -E 'vs the CPU|a step, on the CPU|while the GPU' "$LOGS/offload.log" | tr '\n' ' ')" >> "$FIGURES"

# The CPU AdamW against torch's on this machine's CPU (AVX-512, 16 cores).
stage cpu-adamw 120 python3 "$ROOT/bench/cpu_adamw.py" --bin "$BIN" --rounds 3
grep -E 'torch|strata \||Strata is|Memory' "$LOGS/cpu-adamw.log" | sed 's/^/    /' >> "$FIGURES"

for b in big-device big-hoststates; do
  echo "    $b: $(grep -E 'median step|GEMM peak|measured median|per step' "$LOGS/$b.log" | tr '\n' ' ')" >> "$FIGURES"
done

{
  echo
  echo "Total $(( $(date +%s) - START )) s."
  echo
  echo "## Figures"
  echo
  cat "$FIGURES"
} >> "$SUMMARY"
rm -rf "$WORK"
cat "$SUMMARY"
