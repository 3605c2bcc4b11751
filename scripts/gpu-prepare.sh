#!/usr/bin/env bash
# Prepares what scripts/gpu-check.sh runs on the GPU machine, which has no
# LLVM/MLIR (so no compiler): artifacts compiled here, their data, and the
# losses the CPU backend gives on them. Writes gpu-inputs/ (git-ignored;
# carry it with the device tool: carry=["gpu-inputs"]), well under 64 MiB:
#
#   cases.txt, tiny-*.strata       the demo's GPT-2-tiny (AdamW, clipping)
#                                  in every configuration the check covers:
#                                  placements (device, host, SSD states and
#                                  parameters, swapped and recomputed
#                                  activations), fusion off, CPU updates,
#                                  bf16 (low copies and casts), fp16, fp16
#                                  with skipped steps (bench/gpu/parity.py)
#   tiny-*.expected.jsonl          5 steps of each on the CPU backend
#   STAMP                          the commit and whether the tree was clean
#   big-{device,hoststates}.strata a ~1B-parameter GPT-2 (18 layers, width
#                                  2048, 4x512 tokens a step), plan-only
#                                  (--synthetic-params): all on the device,
#                                  and optimizer state in host memory
#   big-updates-{device,cpu}.strata the same with parameters and states in
#                                  host memory, updates fetched to the
#                                  device or run on the CPU (offload)
#   corpus.bin, big-data.npy       training data
#
# Where nvcc is installed it also builds the runtime with CUDA for sm_90,
# without OpenBLAS or liburing (which the GPU machine lacks), in build-gpu/
# (git-ignored): carry build-gpu/bin too and the check skips its build.
#
# With bench/results/h200.profile present (from an earlier GPU check) the
# big plans are compiled against it, so the check compares measured and
# predicted step times.
#
#   scripts/gpu-prepare.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BIN="$BUILD/bin"
OUT=gpu-inputs
MODELS="$BUILD/gpu-models"
[ -x "$BIN/strata-compile" ] || { echo "gpu-prepare: build first ($BIN/strata-compile missing)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT" "$MODELS"

echo "== models (PyTorch export; the 1B one takes a few minutes once)"
/usr/bin/python3 examples/gpt2-tiny/make_model.py --out "$MODELS" > /dev/null
cp "$MODELS/corpus.bin" "$OUT/"
/usr/bin/python3 bench/gpu/make_models.py --out "$MODELS"

echo "== GPT-2-tiny training cases and their CPU losses"
# NAME GROUP RTOL FLAGS...: the cases of one GROUP compute the same step
# (other placements) and must be bit-identical on the GPU; RTOL bounds the
# losses against the CPU backend's.
SSD=/tmp/strata-gpu-ssd
cat > "$OUT/cases.txt" <<CASES
# fp32, fusion on (the default): placements of one step
tiny-device      fp32     1e-4
tiny-host        fp32     1e-4 --place-params host --place-states host
tiny-ssd         fp32     1e-4 --place-states ssd --ssd-dir $SSD
tiny-ssd-params  fp32     1e-4 --place-params ssd --place-states ssd --ssd-dir $SSD
tiny-swap        fp32     1e-4 --place-activations host
tiny-swap-ssd    fp32     1e-4 --place-activations ssd --ssd-dir $SSD
tiny-recompute   fp32     1e-4 --place-activations recompute
# the graph as exported (no fused GELU chains)
tiny-nofuse      nofuse   1e-4 --fusion off
# updates on the CPU beside the backward pass (clipping by the previous
# step's norm, which CPU updates need), against the same on the device
tiny-offload     prevclip 1e-4 --place-params host --place-states host --clip-mode previous-step --place-updates cpu
tiny-prevclip    prevclip 1e-4 --place-params host --place-states host --clip-mode previous-step --place-updates device
# low precision: bf16 with the low copies the updates write, and without
tiny-bf16        bf16     2e-2 --precision bf16
tiny-bf16-casts  bf16     2e-2 --precision bf16 --low-copies off
tiny-fp16        fp16     2e-2 --precision fp16
# fp16 from a loss scale that overflows: 3 steps skipped, then 2 trained
tiny-fp16-skip   fp16skip 2e-2 --precision fp16 --loss-scale-init 1048576
CASES
TINY=(--input-shape input_ids=8x32 --optimizer adamw --lr 3e-3
      --weight-decay 0.01 --clip-grad-norm 1.0)
grep -v '^#' "$OUT/cases.txt" | while read -r name group rtol flags; do
  # shellcheck disable=SC2086  # the flags are words
  "$BIN/strata-compile" "$MODELS/gpt2-tiny.onnx" "${TINY[@]}" $flags \
    -o "$OUT/$name.strata" 2> "$MODELS/$name.compile.log" ||
    { cat "$MODELS/$name.compile.log" >&2; exit 1; }
  work=$(mktemp -d)
  cp -r "$OUT/$name.strata" "$work/"
  "$BIN/strata-run" "$work/$name.strata" --backend cpu --data "$OUT/corpus.bin" \
    --steps 5 --log-json "$OUT/$name.expected.jsonl" --quiet \
    --ssd-dir "$work/ssd"
  rm -rf "$work"
done
# The same checks on the CPU backend here, so a case that cannot pass is
# found before it costs GPU time (the groups' bit-identity, resume).
/usr/bin/python3 bench/gpu/parity.py --bin "$BIN" --inputs "$OUT" \
  --work "$(mktemp -d)" --backend cpu
# And the check can fail: one expected loss moved by 1e-3 must fail it.
BAD=$(mktemp -d)
cp -r "$OUT/tiny-device.strata" "$OUT/corpus.bin" "$BAD/"
echo "tiny-device fp32 1e-4" > "$BAD/cases.txt"
/usr/bin/python3 - "$OUT/tiny-device.expected.jsonl" "$BAD/tiny-device.expected.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows[2]["loss"] *= 1.001
with open(sys.argv[2], "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)
PY
if /usr/bin/python3 bench/gpu/parity.py --bin "$BIN" --inputs "$BAD" \
    --work "$BAD/work" --backend cpu > "$BAD/log" 2>&1; then
  echo "gpu-prepare: parity.py passed a wrong loss:" >&2
  cat "$BAD/log" >&2
  exit 1
fi
echo "parity.py fails a loss 1e-3 off, as it must"
rm -rf "$BAD"

echo "== ~1B-parameter plan-only artifacts"
PROFILE=()
[ -f bench/results/h200.profile ] && PROFILE=(--profile bench/results/h200.profile)
BIG=(--input-shape input_ids=4x512 --optimizer adamw --lr 1e-4
     --synthetic-params --gpu-mem 120GiB "${PROFILE[@]}")
"$BIN/strata-compile" "$MODELS/gpt2-1b.onnx" "${BIG[@]}" -o "$OUT/big-device.strata"
"$BIN/strata-compile" "$MODELS/gpt2-1b.onnx" "${BIG[@]}" --place-states host \
  -o "$OUT/big-hoststates.strata"
# Parameters and states in host memory: updates fetched to the device and
# written back, against updates on the CPU beside the backward pass.
for u in device cpu; do
  "$BIN/strata-compile" "$MODELS/gpt2-1b.onnx" "${BIG[@]}" --place-params host \
    --place-states host --place-updates $u --fuse-updates \
    -o "$OUT/big-updates-$u.strata"
done
/usr/bin/python3 - "$OUT/big-data.npy" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(0)
np.save(sys.argv[1], rng.integers(0, 32000, size=(64, 513), dtype=np.int64))
PY
"$BIN/strata-inspect" "$OUT/big-device.strata" | sed -n '1,/^memory:/p'
if command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "== the runtime with CUDA, as the GPU machine would build it"
  cmake -S . -B build-gpu -G Ninja -DSTRATA_BUILD_COMPILER=OFF \
    -DSTRATA_BUILD_TESTS=OFF -DSTRATA_CUDA_ARCHITECTURES=90 \
    -DSTRATA_OPENBLAS=STRATA_OPENBLAS-NOTFOUND \
    -DSTRATA_LIBURING=STRATA_LIBURING-NOTFOUND > /dev/null
  cmake --build build-gpu
  du -sh build-gpu/bin
fi
du -sh "$OUT"
# What the check ran at: gpu-check.sh puts it in its summary.
{
  echo "commit $(git rev-parse HEAD)"
  changed=$(git status --porcelain --untracked-files=no | wc -l)
  if [ "$changed" = 0 ]; then echo "tree clean"; else echo "tree dirty ($changed files changed)"; fi
  echo "prepared $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$OUT/STAMP"
cat "$OUT/STAMP"
echo "gpu-prepare: done; run scripts/gpu-check.sh on the GPU machine with carry=[\"$OUT\", \"build-gpu/bin\"]"
