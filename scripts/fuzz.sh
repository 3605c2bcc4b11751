#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer + UBSan) and runs
# each for a bounded time from a seed corpus made at build time. Any crash,
# hang (-timeout), leak or sanitizer report fails the run; the reproducer is
# left in build-fuzz/findings/<target>/.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60, all)
#
# CI runs it with the default; the benchmark-style long run is
#   scripts/fuzz.sh 3600            # one hour per target, two at a time
# The corpus grows across runs in build-fuzz/corpus/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(fuzz-npy fuzz-plan fuzz-report fuzz-checkpoint fuzz-onnx-import fuzz-compile)
MAIN_BUILD=${STRATA_BUILD_DIR:-build}
FUZZ_BUILD=${STRATA_FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${STRATA_FUZZ_JOBS:-$(nproc)}

if [ ! -x "$MAIN_BUILD/bin/strata-compile" ]; then
  echo "fuzz: needs a regular build in $MAIN_BUILD (scripts/test.sh) for seed plans" >&2
  exit 1
fi
CC=clang CXX=clang++ cmake -S . -B "$FUZZ_BUILD" -G Ninja -DSTRATA_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_BUILD_TESTS=ON -DSTRATA_ENABLE_CUDA=OFF > /dev/null
cmake --build "$FUZZ_BUILD" --target strata-fuzz-all

SEEDS="$FUZZ_BUILD/seeds"
rm -rf "$SEEDS"
/usr/bin/python3 test/fuzz/make_seeds.py --out "$SEEDS" \
  --compiler "$MAIN_BUILD/bin/strata-compile" --fuzz-bin "$FUZZ_BUILD/bin"

corpus_of() {
  case "$1" in
    fuzz-npy) echo npy ;; fuzz-plan) echo plan ;; fuzz-report) echo report ;;
    fuzz-checkpoint) echo checkpoint ;; fuzz-onnx-import) echo onnx-import ;;
    fuzz-compile) echo compile ;;
  esac
}

# allow_user_poisoning=0: as in asan-tests.sh (LLVM's allocator poisoning
# in a mix of instrumented and uninstrumented MLIR code).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
run_one() {
  local target=$1 name corpus findings
  name=$(corpus_of "$target")
  corpus="$FUZZ_BUILD/corpus/$name"
  findings="$FUZZ_BUILD/findings/$name"
  mkdir -p "$corpus" "$findings"
  local log="$FUZZ_BUILD/findings/$name.log"
  if "$FUZZ_BUILD/bin/$target" "$corpus" "$SEEDS/$name" \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=4096 \
      -malloc_limit_mb=2048 -artifact_prefix="$findings/" -print_final_stats=1 \
      > "$log" 2>&1; then
    local runs
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "fuzz: $target: ${SECONDS_PER_TARGET}s, $runs inputs, no crash, hang or sanitizer report"
  else
    echo "fuzz: $target: FAILED (reproducer in $findings/):" >&2
    grep -E 'ERROR|SUMMARY|Test unit written' "$log" | head -20 >&2
    return 1
  fi
}

# Up to JOBS targets at once.
pids=()
for t in "${TARGETS[@]}"; do
  run_one "$t" & pids+=($!)
  if [ ${#pids[@]} -ge "$JOBS" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
