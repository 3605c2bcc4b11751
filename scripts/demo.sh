#!/usr/bin/env bash
# The README's main command: builds Strata, exports the example model (a
# small GPT-2-style transformer, from PyTorch, with dynamic batch and
# sequence axes), prints its IR after import, compiles it to an artifact,
# shows the artifact's plan summary and runs it on sample token ids.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
BUILD_DIR=${STRATA_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja > /dev/null
cmake --build "$BUILD_DIR"
BIN="$BUILD_DIR/bin"

OUT="$BUILD_DIR/examples"
mkdir -p "$OUT"
echo "== exporting the example model with PyTorch"
/usr/bin/python3 examples/gpt2-tiny/make_model.py --out "$OUT"

echo "== strata-compile gpt2-tiny.onnx --input-shape input_ids=4x32 --emit=graph"
"$BIN/strata-compile" "$OUT/gpt2-tiny.onnx" --input-shape input_ids=4x32 \
  --freeze 'wpe*' --emit=graph

echo "== strata-compile gpt2-tiny.onnx -o gpt2-tiny.strata (IR after every pass in ir/)"
"$BIN/strata-compile" "$OUT/gpt2-tiny.onnx" --input-shape input_ids=4x32 \
  --freeze 'wpe*' -o "$OUT/gpt2-tiny.strata" --dump-ir "$OUT/ir"
cat "$OUT/gpt2-tiny.strata/manifest.txt"

echo "== strata-run on sample token ids"
/usr/bin/python3 -c "import numpy as np; np.save('$OUT/ids.npy', np.random.default_rng(0).integers(0, 96, (4, 32)).astype(np.int64))"
"$BIN/strata-run" "$OUT/gpt2-tiny.strata" --input input_ids="$OUT/ids.npy" \
  --output-dir "$OUT/out"
/usr/bin/python3 -c "import numpy as np; l = np.load('$OUT/out/logits.npy'); print('logits', l.shape, l.dtype, 'first row:', np.round(l[0, 0, :6], 4))"
echo "== see: $BIN/strata-inspect $OUT/gpt2-tiny.strata"
