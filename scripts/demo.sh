#!/usr/bin/env bash
# The README's main command: builds Strata, exports a small GPT-2-style
# transformer from PyTorch, compiles its training step, fine-tunes it on a
# small character-level corpus (the loss falls), trains the same step again
# with parameters, optimizer state and activations placed on the SSD under
# small memory budgets (the losses are bit-identical), draws that run's HTML report,
# and exports the trained weights back to ONNX. It fails (non-zero) when
# the loss does not fall, the SSD run does not really move bytes through
# the SSD, or its losses differ.
#
#   scripts/demo.sh              sets up, builds, runs (README)
#   scripts/demo.sh --no-build   runs on an existing build (the ctest 'demo')
# STRATA_BUILD_DIR picks the build; STRATA_DEMO_OUT the output directory
# (default BUILD/examples).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${STRATA_BUILD_DIR:-build}
if [ "${1:-}" != "--no-build" ]; then
  ./scripts/install-deps.sh
  cmake -S . -B "$BUILD_DIR" -G Ninja > /dev/null
  cmake --build "$BUILD_DIR"
fi
BIN="$BUILD_DIR/bin"
OUT="${STRATA_DEMO_OUT:-$BUILD_DIR/examples}"
rm -rf "$OUT"
mkdir -p "$OUT"

echo "== 1. export the example model and corpus (PyTorch)"
/usr/bin/python3 examples/gpt2-tiny/make_model.py --out "$OUT"

echo "== 1b. measure this machine (the compiler's cost model reads the profile)"
"$BIN/strata-calibrate" -o "$OUT/machine-profile.txt" --ssd-dir "$OUT/ssd" > /dev/null
echo "== 2. compile the training step (AdamW, cosine schedule) -> gpt2-tiny.strata"
echo "      (the IR after import and after every pass: $OUT/ir/)"
"$BIN/strata-compile" "$OUT/gpt2-tiny.onnx" --input-shape input_ids=8x32 \
  --optimizer adamw --lr 3e-3 --weight-decay 0.01 --clip-grad-norm 1.0 \
  --lr-schedule cosine --warmup-steps 20 --total-steps 300 \
  --profile "$OUT/machine-profile.txt" \
  -o "$OUT/gpt2-tiny.strata" --dump-ir "$OUT/ir"
cat "$OUT/gpt2-tiny.strata/manifest.txt"

echo "== 3. fine-tune: 300 steps on the corpus (checkpoint every 100)"
"$BIN/strata-run" "$OUT/gpt2-tiny.strata" --data "$OUT/corpus.bin" \
  --steps 300 --save-every 100 --log-json "$OUT/train.jsonl"
/usr/bin/python3 - "$OUT/train.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first = sum(r["loss"] for r in rows[:10]) / 10
last = sum(r["loss"] for r in rows[-10:]) / 10
print("mean loss of the first 10 steps: %.3f, of the last 10: %.3f" % (first, last))
if not last < 0.8 * first:
    sys.exit("demo: FAILED: the loss did not fall (by 20% or more)")
PY

echo "== 4. the same training step with parameters, optimizer state and"
echo "      activations on the SSD (placed there by --place-*: at this size"
echo "      the planner alone would keep them in memory), under 1.5 MiB of"
echo "      device memory and 64 KiB of host memory"
"$BIN/strata-compile" "$OUT/gpt2-tiny.onnx" --input-shape input_ids=8x32 \
  --optimizer adamw --lr 3e-3 --weight-decay 0.01 --clip-grad-norm 1.0 \
  --lr-schedule cosine --warmup-steps 20 --total-steps 300 \
  --gpu-mem 1.5MiB --cpu-mem 64KiB --ssd-dir "$OUT/ssd" \
  --place-params ssd --place-states ssd --place-activations ssd \
  --profile "$OUT/machine-profile.txt" -o "$OUT/gpt2-tiny-ssd.strata"
"$BIN/strata-inspect" "$OUT/gpt2-tiny-ssd.strata" | sed -n '/^memory:/,/^steps:/p'
# What the planner weighed: its choice against the naive plans.
grep -E '^(predicted step time|planner):' "$OUT/gpt2-tiny-ssd.strata/manifest.txt"
"$BIN/strata-run" "$OUT/gpt2-tiny-ssd.strata" --data "$OUT/corpus.bin" \
  --steps 20 --log-json "$OUT/train-ssd.jsonl" \
  --trace "$OUT/trace-ssd.json" --trace-steps 2 2>&1 | tee "$OUT/run-ssd.log"
/usr/bin/python3 - "$OUT/train.jsonl" "$OUT/train-ssd.jsonl" \
  "$OUT/gpt2-tiny-ssd.strata/manifest.txt" "$OUT/run-ssd.log" <<'PY'
import json, re, sys
memory, ssd = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:3])
same = memory[:len(ssd)] == ssd
print("first %d losses with the SSD placement %s the in-memory run's"
      % (len(ssd), "are bit-identical to" if same else "DIFFER from"))
stored = int(re.search(r"^\s*ssd: .*\((\d+) bytes\)", open(sys.argv[3]).read(),
                       re.M).group(1))
moved = re.search(r"ssd->device (\S+ \S+), device->ssd (\S+ \S+)",
                  open(sys.argv[4]).read())
print("the plan stores %d bytes on the SSD; per step the run read %s from "
      "it and wrote %s" % (stored, moved.group(1), moved.group(2)))
if stored == 0 or moved.group(1).startswith("0 ") or \
        moved.group(2).startswith("0 "):
    sys.exit("demo: FAILED: the SSD run did not use the SSD")
sys.exit(0 if same else "demo: FAILED: the SSD run's losses differ")
PY
echo "      (Chrome trace of two steps: $OUT/trace-ssd.json, open in Perfetto)"
echo "== 4b. the HTML report: memory per tier, predicted and measured queues, loss"
"$BIN/strata-inspect" "$OUT/gpt2-tiny-ssd.strata" --html "$OUT/report-ssd.html" \
  --trace "$OUT/trace-ssd.json" --log-json "$OUT/train-ssd.jsonl"

echo "== 5. export the trained weights back to ONNX"
"$BIN/strata-export" "$OUT/gpt2-tiny.strata" -o "$OUT/gpt2-tiny-finetuned.onnx"
echo "== done. inspect the plan: $BIN/strata-inspect $OUT/gpt2-tiny.strata"
