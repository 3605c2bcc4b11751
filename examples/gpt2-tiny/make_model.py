#!/usr/bin/env python3
"""Exports the demo model: a 2-layer GPT-2-style transformer (vocabulary 96,
context 32, width 32) with dynamic batch and sequence axes, written as
OUT/gpt2-tiny.onnx. The model definition is shared with the test suite
(test/models/generate.py) so the demo runs what the tests check."""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "models"))
import generate  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "gpt2-tiny.onnx")
    generate.export_torch(generate.gpt2_module(), path, batch=2, seq=8,
                          opset=17, dynamic=True, fold=False)
    print("wrote", path)


if __name__ == "__main__":
    main()
