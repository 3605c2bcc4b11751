#!/usr/bin/env bash
# Runs the unit tests, the lit tests and the end-to-end suites
# (reliability, forward and training parity, data parallel over MPI, ONNX
# conformance) against tools built with AddressSanitizer and
# UndefinedBehaviorSanitizer (clang, in the fuzzing build directory). Any
# sanitizer report fails the run.
#
# Assertions stay off (NDEBUG): Debian's MLIR is a release build, and the
# layout of its classes depends on NDEBUG (llvm::Statistic, for one, is a
# tracking statistic without it), so code built without NDEBUG against it
# is undefined behaviour, which UBSan reports.
#
#   scripts/asan-tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_BUILD=${STRATA_FUZZ_BUILD_DIR:-build-fuzz}

# Without GLPK: the tier planner's fallback (its local search alone) is
# what the suites below exercise here (test_train.py checks the remark).
CC=clang CXX=clang++ cmake -S . -B "$FUZZ_BUILD" -G Ninja -DSTRATA_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_BUILD_TESTS=ON -DSTRATA_ENABLE_CUDA=OFF \
  -DSTRATA_USE_GLPK=OFF > /dev/null
export STRATA_EXPECT_NO_GLPK=1
cmake --build "$FUZZ_BUILD" --target strata-compile strata-run strata-export \
  strata-inspect strata-opt strata-calibrate strata-unit-tests \
  strata-compiler-unit-tests

# allow_user_poisoning=0: LLVM's allocators poison their free slabs when
# built with ASan, but Debian's MLIR is not: which copy of a header
# template (instrumented here, plain in libMLIR) the linker keeps decides
# whether memory is poisoned and never unpoisoned, so MLIRContext's own
# dialect registration reads "poisoned" memory. Heap, stack and
# use-after-free checks are unaffected.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
BIN="$FUZZ_BUILD/bin"
WORK="$FUZZ_BUILD/asan-tests"
rm -rf "$WORK"
status=0
"$BIN/strata-unit-tests" --gtest_brief=1 || status=1
"$BIN/strata-compiler-unit-tests" --gtest_brief=1 || status=1
if /usr/lib/llvm-19/build/utils/lit/lit.py "$FUZZ_BUILD/test" -q \
    > "$WORK.lit.log" 2>&1; then
  echo "asan-tests: lit: passed"
else
  echo "asan-tests: lit: FAILED" >&2
  # lit -q names the failures under "Failed Tests (N):".
  grep -E -A20 'Failed Tests|Sanitizer|runtime error' "$WORK.lit.log" \
    | head -40 >&2 || true
  status=1
fi
# The end-to-end suites, two at a time (each mostly one process at a time,
# and CI has two cores), in two lanes of about the same length (on a cold
# CI run, one after another: data parallel over 10 minutes, test_train
# 5.5, the rest 2.1 and conformance). Each suite's log is
# $WORK.NAME.log; a suite that fails leaves $WORK.NAME.failed (the lanes
# are processes).
suite() {  # suite NAME COMMAND...
  local name=$1
  shift
  if "$@" > "$WORK.$name.log" 2>&1; then
    echo "asan-tests: $name: passed ($SECONDS s into the leg)"
  else
    echo "asan-tests: $name: FAILED" >&2
    grep -E 'FAIL|ERROR|runtime error|Sanitizer|REGRESSION' "$WORK.$name.log" \
      | head -20 >&2 || true
    touch "$WORK.$name.failed"
  fi
}
model_suite() {  # model_suite test/models/NAME.py
  local name
  name=$(basename "$1" .py)
  suite "$name" /usr/bin/python3 "$1" --bin "$BIN" --work "$WORK/$name"
}
# Data parallel over MPI (2 and 4 ranks of the sanitized strata-run).
# Debian's OpenMPI keeps allocations past MPI_Finalize: the leak check
# skips those with a frame in OpenMPI (scripts/lsan-mpi.supp), which needs
# whole stacks (its libraries have no frame pointers: the slow unwinder)
# and its components kept loaded so that their frames have names.
data_parallel() {
  if [ -z "$(command -v mpirun)" ]; then
    echo "no mpirun: scripts/install-deps.sh installs openmpi-bin"
    return 1
  fi
  env ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" \
    LSAN_OPTIONS="suppressions=$PWD/scripts/lsan-mpi.supp" \
    OMPI_MCA_mca_base_component_disable_dlclose=1 \
    PMIX_MCA_mca_base_component_disable_dlclose=1 \
    /usr/bin/python3 test/models/test_data_parallel.py --bin "$BIN" \
    --work "$WORK/test_data_parallel"
}
# The conformance runner exits 77 when ../shared's node tests are absent
# (its last line says so).
conformance() {
  local crc=0
  /usr/bin/python3 test/conformance/run_node_tests.py --bin "$BIN" \
    --work "$WORK/conformance" \
    --expect test/conformance/expected-supported.txt || crc=$?
  [ "$crc" = 0 ] || [ "$crc" = 77 ]
}
rm -f "$WORK".*.failed
suite test_data_parallel data_parallel &
lane=$!
for s in test/models/test_reliability.py test/models/test_forward.py \
         test/models/test_train.py test/models/test_backends.py; do
  model_suite "$s"
done
suite conformance conformance
echo "asan-tests: conformance: $(tail -1 "$WORK.conformance.log")"
wait "$lane"
if compgen -G "$WORK.*.failed" > /dev/null; then
  status=1
fi
exit $status
