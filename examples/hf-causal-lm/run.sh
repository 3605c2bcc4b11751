#!/usr/bin/env bash
# One command: installs what is missing (Debian packages, .venv-models with
# the pinned transformers and tokenizers), builds Strata with its Python
# bindings, and fine-tunes a HuggingFace model from Python
# (examples/hf-causal-lm/finetune.py; its options pass through, e.g.
# --model gpt2 --steps 300 --text FILE).
set -euo pipefail
cd "$(dirname "$0")/../.."

./scripts/install-deps.sh --models
BUILD_DIR=${STRATA_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja > /dev/null
cmake --build "$BUILD_DIR" --target strata-compile strata-export strata_runtime
PYTHONPATH="$BUILD_DIR/python" STRATA_BIN="$BUILD_DIR/bin" \
  .venv-models/bin/python examples/hf-causal-lm/finetune.py \
  --out "$BUILD_DIR/examples/hf-causal-lm" "$@"
