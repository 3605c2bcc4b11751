#!/usr/bin/env bash
# The README's main command: builds Strata, makes the example model (a small
# GPT-2-style transformer exported from PyTorch with dynamic batch and
# sequence axes) and compiles it, printing the IR after import.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
BUILD_DIR=${STRATA_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja > /dev/null
cmake --build "$BUILD_DIR"

OUT="$BUILD_DIR/examples"
mkdir -p "$OUT"
echo "== exporting the example model with PyTorch"
/usr/bin/python3 examples/gpt2-tiny/make_model.py --out "$OUT"
echo "== strata-compile $OUT/gpt2-tiny.onnx --input-shape input_ids=4x32 --emit=graph"
"$BUILD_DIR/bin/strata-compile" "$OUT/gpt2-tiny.onnx" \
  --input-shape input_ids=4x32 --freeze 'wpe*' --emit=graph \
  --dump-ir "$OUT/ir"
echo "== the IR after each stage is in $OUT/ir/"
ls "$OUT/ir"
