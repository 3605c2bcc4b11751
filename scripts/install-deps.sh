#!/usr/bin/env bash
# Installs the Debian packages Strata needs to build and test. Idempotent:
# packages already present are not touched and apt is not called at all when
# nothing is missing. Nothing is fetched from anywhere but Debian's archive.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build ccache g++ pkg-config
  # compiler side
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  # runtime side
  liburing-dev libopenblas-dev
  # the tier planner's integer programme (passes/tiers/TierSolve.cpp)
  libglpk-dev
  # data-parallel training across processes (runtime/comm: MPI)
  libopenmpi-dev openmpi-bin
  # benchmarks (bench/ssd_vs_fio.py compares the SSD engine with fio;
  # --bench makes a virtual environment)
  fio python3-venv
  # tests (PyTorch and onnx are reference oracles and model generators only)
  libgtest-dev python3 python3-numpy python3-onnx python3-torch
  # what transformers (jinja2: chat templates), datasets and tensorboard's
  # reader import from Debian in .venv-models (--models)
  python3-yaml python3-requests python3-protobuf python3-six python3-jinja2
  # the Python bindings (runtime/python) and their tests
  pybind11-dev python3-dev python3-pytest
  # the HTML report's test renders it in a real headless browser
  chromium
  # fuzzing (scripts/fuzz.sh: libFuzzer, ASan and UBSan come with clang)
  clang libclang-rt-14-dev
  # the format check (scripts/check-format.sh, .clang-format)
  clang-format
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# --bench: also the benchmark environment, .venv-bench (Debian's Python,
# seeing Debian's torch and onnx, plus the peer bench/fusion.py measures
# against: ONNX Runtime Training, pinned, from PyPI; about 300 MB). Not
# needed to build or test.
bench_env() {
  local root venv
  root="$(cd "$(dirname "$0")/.." && pwd)"
  venv="$root/.venv-bench"
  if [ -x "$venv/bin/python" ] &&
     "$venv/bin/python" -c "import onnxruntime.training" 2>/dev/null; then
    echo "install-deps: $venv present"
    return
  fi
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q "onnxruntime-training==1.19.2"
  echo "install-deps: made $venv (onnxruntime-training 1.19.2)"
}

# --models: the model-definition environment, .venv-models (Debian's
# Python, seeing Debian's torch and onnx, plus HuggingFace transformers and
# its dependencies at the versions pinned in test/models/requirements-
# models.txt; about 60 MB). The family suite (test/models/test_families.py)
# builds its models with it; scripts/test.sh makes it.
models_env() {
  local root venv req
  root="$(cd "$(dirname "$0")/.." && pwd)"
  venv="$root/.venv-models"
  req="$root/test/models/requirements-models.txt"
  if [ -x "$venv/bin/python" ] &&
     cmp -s "$req" "$venv/requirements-models.txt" 2>/dev/null; then
    echo "install-deps: $venv present"
    return
  fi
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --no-deps -r "$req"
  "$venv/bin/python" -c "import transformers" ||
    { echo "install-deps: error: transformers does not import in $venv" >&2
      exit 1; }
  "$venv/bin/python" -c "import datasets, jinja2
from tensorboard.backend.event_processing import event_accumulator" ||
    { echo "install-deps: error: datasets, jinja2 or tensorboard's reader" \
        "does not import in $venv" >&2; exit 1; }
  cp "$req" "$venv/requirements-models.txt"
  echo "install-deps: made $venv ($(grep '^transformers' "$req"))"
}

environments() {
  for arg in "$@"; do
    case "$arg" in
      --bench) bench_env ;;
      --models) models_env ;;
      *) echo "install-deps: unknown option '$arg' (--bench, --models)" >&2
         exit 2 ;;
    esac
  done
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  environments "$@"
  exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: error: must run as root to install packages (try: sudo $0)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${#missing[@]} packages"
environments "$@"
exit 0
