#!/usr/bin/env bash
# pip install . into a fresh virtual environment, then the HuggingFace
# example from that environment alone (no PYTHONPATH, no STRATA_BIN: the
# package, its runtime module and its tools come from site-packages).
#
#   test/python/pip_install.sh WORK_DIR [WERROR]
#
# WERROR (ON/OFF, the test passes its own build's STRATA_WERROR) builds with
# the same warning flags as the tree under test, so ccache serves the wheel's
# compiles from that tree's (CMakeLists.txt sets ccache's base folder).
#
# The environment sees Debian's packages (torch, onnx, numpy, pybind11) and
# gets the pinned model-side ones (test/models/requirements-models.txt) and
# the build backend (scikit-build-core) from PyPI.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:?usage: pip_install.sh WORK_DIR [WERROR]}"
WERROR="${2:-OFF}"
rm -rf "$WORK/venv" "$WORK/example"
mkdir -p "$WORK"
/usr/bin/python3 -m venv --system-site-packages "$WORK/venv"
V="$WORK/venv/bin"
"$V/pip" install -q --no-deps -r "$ROOT/test/models/requirements-models.txt" \
  scikit-build-core==0.10.7 pathspec==0.12.1
# From a snapshot of the checkout's files (test/snapshot_sources.sh): the
# build backend walks the whole source folder, where other tests create
# and delete their work files under build/ meanwhile. Its build folder is
# the snapshot's build/, kept between runs (a rerun rebuilds only what
# changed), where ccache finds the checkout's compiles.
{ read -r SRC; read -r BUILD; } < <("$ROOT/test/snapshot_sources.sh" "$WORK")
: "${BUILD:?test/snapshot_sources.sh failed}"
(cd "$SRC" && "$V/pip" install -q --no-build-isolation --no-deps \
  --config-settings=build-dir="$BUILD" \
  --config-settings=cmake.define.STRATA_WERROR="$WERROR" .)
cd "$WORK"
env -u PYTHONPATH -u STRATA_BIN "$V/python" - "$WORK/venv" <<'PY'
import os, sys
import strata, strata.data, strata.hf, strata_runtime
venv = os.path.realpath(sys.argv[1])
for m in (strata, strata_runtime):
    assert os.path.realpath(m.__file__).startswith(venv), m.__file__
tool = strata.tool("strata-compile")
assert os.path.realpath(tool).startswith(venv), tool
print("pip_install: strata, strata_runtime and the tools from", venv)
PY
env -u PYTHONPATH -u STRATA_BIN "$V/python" \
  "$ROOT/examples/hf-causal-lm/finetune.py" --steps 100 --backend cpu \
  --out "$WORK/example"
echo "pip_install: passed"
