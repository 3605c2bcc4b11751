#!/usr/bin/env bash
# AdaLomo against LOMO on the demo's fine-tuning run (the example GPT-2 on
# its character corpus, batch 8x32, 300 steps), each at a small sweep of
# learning rates; prints the mean loss of the first and last 10 steps.
# Usage: bench/adalomo_vs_lomo.sh [BUILD_DIR]   (after scripts/demo.sh or a build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BIN="$BUILD/bin"
OUT="$BUILD/bench/adalomo"
mkdir -p "$OUT"
/usr/bin/python3 examples/gpt2-tiny/make_model.py --out "$OUT" > /dev/null
printf "%-10s %8s %12s %12s\n" optimizer lr "first 10" "last 10"
for cfg in "lomo 0.05" "lomo 0.1" "lomo 0.2" "lomo 0.5" "lomo 1.0" "lomo 2.0" \
           "adalomo 0.003" "adalomo 0.01" "adalomo 0.03" "adalomo 0.1"; do
  set -- $cfg
  art="$OUT/$1-$2.strata"
  "$BIN/strata-compile" "$OUT/gpt2-tiny.onnx" --input-shape input_ids=8x32 \
    --optimizer "$1" --lr "$2" -o "$art" > /dev/null
  "$BIN/strata-run" "$art" --data "$OUT/corpus.bin" --steps 300 \
    --log-json "$art.jsonl" --quiet
  /usr/bin/python3 - "$1" "$2" "$art.jsonl" <<'PY'
import json, math, sys
r = [json.loads(l)["loss"] for l in open(sys.argv[3])]
r = [float("nan") if v is None else v for v in r]
last = sum(r[-10:]) / 10
print("%-10s %8s %12.3f %12s" % (sys.argv[1], sys.argv[2], sum(r[:10]) / 10,
                                 "%.3f" % last if math.isfinite(last) else "diverged"))
PY
done
