#!/usr/bin/env bash
# The runtime must build without LLVM/MLIR and without CUDA (the main build
# has the CUDA backend when nvcc is present): configure it alone, from
# scratch, and build it.
#
#   test/runtime_only_build.sh WORK_DIR [WERROR]
#
# From a snapshot of the sources (test/snapshot_sources.sh), with the
# tree's warning flags (WERROR: ON or OFF), so that ccache serves what the
# tree under test compiled alike.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:?usage: runtime_only_build.sh WORK_DIR [WERROR]}"
WERROR="${2:-OFF}"
{ read -r SRC; read -r BUILD; } < <("$ROOT/test/snapshot_sources.sh" "$WORK")
: "${BUILD:?test/snapshot_sources.sh failed}"
rm -rf "$BUILD"
# No LLVM/MLIR prefix leaks in from the environment.
unset CMAKE_PREFIX_PATH
cmake -S "$SRC" -B "$BUILD" -G Ninja \
  -DSTRATA_BUILD_COMPILER=OFF -DSTRATA_BUILD_TESTS=OFF \
  -DSTRATA_ENABLE_CUDA=OFF -DSTRATA_WERROR="$WERROR" > /dev/null
cmake --build "$BUILD"
