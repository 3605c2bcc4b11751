#!/usr/bin/env bash
# The README's test command: installs what is missing, configures, builds and
# runs every test suite (lit, unit, model import, runtime-only build).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each leg's wall time, so a run that nears CI's limit says where it went.
leg() {  # leg NAME COMMAND...
  local name=$1 start=$SECONDS
  shift
  "$@" || {
    local rc=$?
    echo "test.sh: $name failed (exit $rc; $(df -h . | awk 'NR == 2 {print $4}') free)" >&2
    return "$rc"
  }
  echo "test.sh: $name took $((SECONDS - start)) s (run so far $SECONDS s)"
}

# A full run writes about 6 GiB (four build trees, the suites' models);
# a disk that fills mid-run fails whichever step is writing, so the space
# is said first, and again by a leg that fails.
free_kib=$(df -Pk . | awk 'NR == 2 {print $4}')
echo "test.sh: $((free_kib / 1048576)) GiB free on $(df -P . | awk 'NR == 2 {print $6}')"
if [ "$free_kib" -lt $((12 * 1048576)) ]; then
  echo "test.sh: warning: under 12 GiB free; a full run needs about 6" >&2
fi
leg install-deps ./scripts/install-deps.sh --models
# Formatting first: it takes seconds and fails before a long build.
./scripts/check-format.sh
BUILD_DIR=${STRATA_BUILD_DIR:-build}
# Hermetic: no profile strata-calibrate remembered on this machine changes
# what the suites predict (the tests that want one set their own).
export STRATA_PROFILE=""
# Warnings are errors here (CI); a plain configure only shows them.
cmake -S . -B "$BUILD_DIR" -G Ninja -DSTRATA_WERROR=ON
leg build cmake --build "$BUILD_DIR"
leg ctest ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)"
# The ThreadSanitizer leg: runtime unit tests, the asynchronous backend and
# the Python bindings with -fsanitize=thread (STRATA_TSAN=0 skips it).
if [ "${STRATA_TSAN:-1}" != 0 ]; then
  leg tsan ./scripts/tsan-tests.sh "$BUILD_DIR"
fi
# The sanitizer leg: the same suites against ASan+UBSan tools, then every
# reader of untrusted bytes under libFuzzer for a bounded time
# (STRATA_FUZZ_SECONDS=0 skips both).
FUZZ_SECONDS=${STRATA_FUZZ_SECONDS:-60}
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  leg asan ./scripts/asan-tests.sh
  STRATA_BUILD_DIR="$BUILD_DIR" leg fuzz ./scripts/fuzz.sh "$FUZZ_SECONDS"
fi
