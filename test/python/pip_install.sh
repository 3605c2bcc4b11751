#!/usr/bin/env bash
# pip install . into a fresh virtual environment, then the HuggingFace
# example from that environment alone (no PYTHONPATH, no STRATA_BIN: the
# package, its runtime module and its tools come from site-packages).
#
#   test/python/pip_install.sh WORK_DIR
#
# The environment sees Debian's packages (torch, onnx, numpy, pybind11) and
# gets the pinned model-side ones (test/models/requirements-models.txt) and
# the build backend (scikit-build-core) from PyPI.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:?usage: pip_install.sh WORK_DIR}"
rm -rf "$WORK/venv" "$WORK/example"
mkdir -p "$WORK"
/usr/bin/python3 -m venv --system-site-packages "$WORK/venv"
V="$WORK/venv/bin"
"$V/pip" install -q --no-deps -r "$ROOT/test/models/requirements-models.txt" \
  scikit-build-core==0.10.7 pathspec==0.12.1
# From a snapshot of the checkout's files (tracked, and new ones git does
# not ignore; modification times kept): the build backend walks the whole
# source folder, where other tests create and delete their work files
# under build/ meanwhile. The build folder stays in WORK, so a rerun
# rebuilds only what changed.
SRC="$ROOT"
if git -C "$ROOT" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  SRC="$WORK/src"
  rm -rf "$SRC"
  mkdir -p "$SRC"
  (cd "$ROOT" && git ls-files -z -co --exclude-standard |
    tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$SRC"
fi
(cd "$SRC" && "$V/pip" install -q --no-build-isolation --no-deps \
  --config-settings=build-dir="$WORK/build" .)
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
