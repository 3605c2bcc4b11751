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
  # benchmarks (bench/ssd_vs_fio.sh compares the SSD engine with fio;
  # --bench makes a virtual environment)
  fio python3-venv
  # tests (PyTorch and onnx are reference oracles and model generators only)
  libgtest-dev python3 python3-numpy python3-onnx python3-torch
  # fuzzing (scripts/fuzz.sh: libFuzzer, ASan and UBSan come with clang)
  clang libclang-rt-14-dev
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

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  [ "${1:-}" = "--bench" ] && bench_env
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
[ "${1:-}" = "--bench" ] && bench_env
exit 0
