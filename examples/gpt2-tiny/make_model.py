#!/usr/bin/env python3
"""Makes the demo's model and data.

* OUT/gpt2-tiny.onnx: a 2-layer GPT-2-style transformer (vocabulary 96,
  context 32, width 32) exported from PyTorch with dynamic batch and sequence
  axes. The model definition is shared with the test suite
  (test/models/generate.py), so the demo runs what the tests check.
* OUT/corpus.bin: a small character-level corpus (printable ASCII mapped to
  ids 0..95, uint16, the nanoGPT convention) to fine-tune on.
"""

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "models"))
import generate  # noqa: E402

TEXT = """Strata is an ahead-of-time training compiler. It takes a transformer
exported to ONNX, builds its training step, plans where every tensor lives
across GPU memory, host memory and SSD, and emits an artifact that a small
runtime executes while streaming tensors between those tiers. The compiler
knows the whole step ahead of time, so placement, swapping and recomputation
are decided by a planner against a cost model, not by runtime heuristics.
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "gpt2-tiny.onnx")
    generate.export_torch(generate.gpt2_module(), path, batch=2, seq=8,
                          opset=17, dynamic=True, fold=False)
    ids = np.array([min(max(ord(c) - 32, 0), 95) for c in TEXT * 4],
                   dtype=np.uint16)
    ids.tofile(os.path.join(args.out, "corpus.bin"))
    print("wrote %s and corpus.bin (%d tokens)" % (path, ids.size))


if __name__ == "__main__":
    main()
