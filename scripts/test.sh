#!/usr/bin/env bash
# The README's test command: installs what is missing, configures, builds and
# runs every test suite (lit, unit, model import, runtime-only build).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
BUILD_DIR=${STRATA_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja
cmake --build "$BUILD_DIR"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)"
