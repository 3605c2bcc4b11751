#!/usr/bin/env bash
# The ThreadSanitizer leg: a runtime-only build (GCC) (no LLVM, no CUDA, and no
# OpenBLAS, so the reference matrix loops run on Strata's own thread pool
# and that build stays proven) with -fsanitize=thread, then
#   - every unit test (thread pool, transfer queue, SSD store, streaming
#     updates, backends),
#   - every kernel of the asynchronous test backend against the CPU backend,
#   - the Python bindings' suite, with the sanitizer runtime preloaded into
#     the interpreter (the models are compiled by the regular build's
#     strata-compile, given as the first argument),
#   - speculative CPU updates with exact clipping, and CPU jobs through
#     three staging areas (test_train.py, on the sanitized strata-run),
#   - data-parallel training of 2 and 4 ranks over MPI (test_data_parallel.py,
#     on the sanitized strata-run),
#   - the tier planner's parallel searches, in a sanitized strata-compile
#     (a second build, of that tool alone).
# Any data race, lock-order inversion or deadlock report fails the run.
#
#   scripts/tsan-tests.sh [REGULAR_BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
REGULAR=${1:-${STRATA_BUILD_DIR:-build}}
TSAN_BUILD=${STRATA_TSAN_BUILD_DIR:-build-tsan}

# GCC, whose sanitizer runtime is a shared library (libtsan) that the
# Python interpreter can preload; clang 14's shared runtime crashes at start.
CC=gcc CXX=g++ cmake -S . -B "$TSAN_BUILD" -G Ninja -DSTRATA_TSAN=ON \
  -DSTRATA_BUILD_COMPILER=OFF -DSTRATA_ENABLE_CUDA=OFF \
  -DSTRATA_USE_OPENBLAS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSTRATA_WERROR=ON > /dev/null
cmake --build "$TSAN_BUILD"

# halt_on_error: the first report fails the process; exitcode 66 tells a
# report from an ordinary test failure.
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1"
BIN="$TSAN_BUILD/bin"
WORK="$TSAN_BUILD/tsan-tests"
rm -rf "$WORK"
mkdir -p "$WORK"
status=0

run() {  # run NAME COMMAND...
  local name=$1
  shift
  if "$@" > "$WORK/$name.log" 2>&1; then
    echo "tsan-tests: $name: passed"
  else
    echo "tsan-tests: $name: FAILED (exit $?; log $WORK/$name.log)" >&2
    # The report if there is one, else the log's end: CI keeps only what
    # this prints, so a failure must say why here.
    grep -E -A12 'WARNING: ThreadSanitizer|FAILED|Error' "$WORK/$name.log" \
      | head -60 >&2 || tail -40 "$WORK/$name.log" >&2
    df -h . | tail -1 >&2
    status=1
  fi
}

run unit-tests "$BIN/strata-unit-tests" --gtest_brief=1
run kernel-parity-async-test "$BIN/strata-kernel-check" --backend async-test

if [ ! -x "$REGULAR/bin/strata-compile" ]; then
  echo "tsan-tests: python-bindings: FAILED ($REGULAR/bin/strata-compile is" \
       "missing: build the regular tree first)" >&2
  exit 1
fi
if ! ls "$TSAN_BUILD"/python/strata_runtime*.so > /dev/null 2>&1; then
  echo "tsan-tests: python-bindings: FAILED (the module was not built:" \
       "pybind11-dev missing?)" >&2
  exit 1
fi
# The tools the suite runs: the sanitized runtime ones, the regular build's
# for those that need LLVM (strata-compile, strata-export).
TOOLS="$WORK/tools"
mkdir -p "$TOOLS"
for t in "$REGULAR"/bin/strata-*; do
  name=$(basename "$t")
  if [ -x "$BIN/$name" ]; then t="$BIN/$name"; fi
  ln -sf "$(realpath "$t")" "$TOOLS/$name"
done
TSAN_RT=$(g++ -print-file-name=libtsan.so)
# The preload is for this interpreter only: the tools it starts link the
# sanitizer runtime themselves (or, strata-compile, not at all).
run python-bindings env LD_PRELOAD="$TSAN_RT" \
  PYTHONPATH="$TSAN_BUILD/python" STRATA_BIN="$TOOLS" \
  /usr/bin/python3 -c 'import os, sys, pytest
os.environ.pop("LD_PRELOAD")
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider",
                     "test/python/test_bindings.py"]))'

# Speculative CPU updates (exact clipping) under the sanitized strata-run:
# the CPU queue, the SSD queues and the redo decisions between them.
run speculative-updates /usr/bin/python3 test/models/test_train.py \
  --bin "$TOOLS" --work "$WORK/train" -k test_speculative \
  -k test_three_cpu_staging

# Data parallel over MPI under the sanitized strata-run: every rank's
# communication queue beside its compute and host queues, the trainer's
# collectives between runs, the timeout that stops a hung job, ranks
# killed mid-step and mid-save, and ranks that are Python processes (the
# sanitized module, found beside the tools, with the sanitizer runtime
# preloaded into the ranks' interpreters). OpenMPI's own lock order at
# start and end is suppressed (scripts/tsan-mpi.supp says why).
if [ -n "$(command -v mpirun)" ]; then
  ln -sfn "$(realpath "$TSAN_BUILD/python")" "$WORK/python"
  run data-parallel env STRATA_TEST_RANK_PRELOAD="$TSAN_RT" \
    TSAN_OPTIONS="$TSAN_OPTIONS:suppressions=$PWD/scripts/tsan-mpi.supp" \
    /usr/bin/python3 test/models/test_data_parallel.py --bin "$TOOLS" \
    --work "$WORK/data-parallel"
else
  echo "tsan-tests: data-parallel: FAILED (no mpirun: scripts/install-deps.sh" \
       "installs openmpi-bin)" >&2
  status=1
fi

# The tier planner's searches run at once (--planner-threads), each on its
# own clone of the program, sharing the MLIR context and a score cache: a
# GCC build of strata-compile with -fsanitize=thread (MLIR itself is not
# instrumented; what Strata's code does around it is) plans a 4-layer
# model under budgets that make every search run, on four threads, and
# must give the regular build's one-thread plan report byte for byte.
PLANNER_BUILD=${STRATA_TSAN_PLANNER_BUILD_DIR:-build-tsan-planner}
CC=gcc CXX=g++ cmake -S . -B "$PLANNER_BUILD" -G Ninja -DSTRATA_TSAN=ON \
  -DSTRATA_ENABLE_CUDA=OFF -DSTRATA_USE_OPENBLAS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON > /dev/null
cmake --build "$PLANNER_BUILD" --target strata-compile
PLAN="$WORK/planner"
mkdir -p "$PLAN/ssd"
/usr/bin/python3 test/models/synthetic.py --family gpt --layers 4 --dim 64 \
  --seq 128 --out "$PLAN" --name planner > /dev/null
planner_args=("$PLAN/planner.onnx" --emit=plan-report --optimizer adamw
  --gpu-mem 2MiB --cpu-mem 1MiB --ssd-dir "$PLAN/ssd")
"$REGULAR/bin/strata-compile" "${planner_args[@]}" --planner-threads 1 \
  > "$PLAN/one-thread.txt" 2> /dev/null
# MLIR's uniquer publishes its lazily made shards through atomics the
# sanitizer cannot see (scripts/tsan-mlir.supp says why): those frames alone
# are suppressed.
planner_leg() {
  TSAN_OPTIONS="$TSAN_OPTIONS:suppressions=$PWD/scripts/tsan-mlir.supp" \
    "$PLANNER_BUILD/bin/strata-compile" "${planner_args[@]}" \
    --planner-threads 4 > "$PLAN/four-threads.txt" || return
  grep -q "placements scored" "$PLAN/four-threads.txt" || return
  cmp "$PLAN/one-thread.txt" "$PLAN/four-threads.txt"
}
run planner-threads planner_leg
exit $status
