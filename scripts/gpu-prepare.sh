#!/usr/bin/env bash
# Prepares what scripts/gpu-check.sh runs on the GPU machine, which has no
# LLVM/MLIR (so no compiler): artifacts compiled here, their data, and the
# losses the CPU backend gives on them. Writes gpu-inputs/ (git-ignored;
# carry it with the device tool: carry=["gpu-inputs"]), well under 64 MiB:
#
#   tiny-{device,host,ssd}.strata  the demo's GPT-2-tiny (AdamW, clipping)
#                                  with everything on the device, parameters
#                                  and states on the host, states on SSD
#   tiny-*.expected.jsonl          5 steps of each on the CPU backend
#   big-{device,hoststates}.strata a ~1B-parameter GPT-2 (18 layers, width
#                                  2048, 4x512 tokens a step), plan-only
#                                  (--synthetic-params): all on the device,
#                                  and optimizer state in host memory
#   big-updates-{device,cpu}.strata the same with parameters and states in
#                                  host memory, updates fetched to the
#                                  device or run on the CPU (offload)
#   tiny-offload.strata            GPT-2-tiny with updates on the CPU
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

echo "== GPT-2-tiny artifacts and their CPU losses"
TINY=(--input-shape input_ids=8x32 --optimizer adamw --lr 3e-3
      --weight-decay 0.01 --clip-grad-norm 1.0)
"$BIN/strata-compile" "$MODELS/gpt2-tiny.onnx" "${TINY[@]}" -o "$OUT/tiny-device.strata"
"$BIN/strata-compile" "$MODELS/gpt2-tiny.onnx" "${TINY[@]}" \
  --place-params host --place-states host -o "$OUT/tiny-host.strata"
"$BIN/strata-compile" "$MODELS/gpt2-tiny.onnx" "${TINY[@]}" \
  --place-states ssd --ssd-dir /tmp/strata-gpu-ssd -o "$OUT/tiny-ssd.strata"
"$BIN/strata-compile" "$MODELS/gpt2-tiny.onnx" "${TINY[@]}" \
  --place-params host --place-states host --clip-mode previous-step \
  --place-updates cpu -o "$OUT/tiny-offload.strata"
for a in device host ssd offload; do
  work=$(mktemp -d)
  cp -r "$OUT/tiny-$a.strata" "$work/"
  "$BIN/strata-run" "$work/tiny-$a.strata" --backend cpu --data "$OUT/corpus.bin" \
    --steps 5 --log-json "$OUT/tiny-$a.expected.jsonl" --quiet \
    --ssd-dir "$work/ssd"
  rm -rf "$work"
done

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
echo "gpu-prepare: done; run scripts/gpu-check.sh on the GPU machine with carry=[\"$OUT\", \"build-gpu/bin\"]"
