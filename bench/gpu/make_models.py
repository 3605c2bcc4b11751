#!/usr/bin/env python3
"""Makes the GPU check's models: the demo's GPT-2-tiny (for parity with the
CPU backend) and a ~1B-parameter GPT-2 (for throughput), both exported from
PyTorch with the test suite's model definition. The large one is written
with external data; strata-compile --synthetic-params then turns it into a
plan-only artifact (a few MB) that travels to the GPU machine.

    make_models.py --out DIR [--layers 18 --dim 2048 --vocab 32000 --ctx 512]
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "models"))
import generate  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--layers", type=int, default=18)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--ctx", type=int, default=512)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tiny = os.path.join(args.out, "gpt2-tiny.onnx")
    if not os.path.exists(tiny):
        generate.export_torch(generate.gpt2_module(), tiny, batch=2, seq=8,
                              opset=17, dynamic=True, fold=False)
    big = os.path.join(args.out, "gpt2-1b.onnx")
    if not os.path.exists(big):
        module = generate.gpt2_module(vocab=args.vocab, ctx=args.ctx,
                                      dim=args.dim, heads=args.heads,
                                      layers=args.layers)
        n = sum(p.numel() for p in module.parameters())
        print("gpt2-1b: %.3f B parameters" % (n / 1e9))
        # Over 2 GB: torch writes the weights as external data files.
        generate.export_torch(module, big, batch=1, seq=args.ctx, opset=17,
                              dynamic=True, fold=False)
    print("wrote %s and %s" % (tiny, big))


if __name__ == "__main__":
    main()
