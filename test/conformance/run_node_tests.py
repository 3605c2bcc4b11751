#!/usr/bin/env python3
"""Runs ONNX's backend node tests through Strata and reports per operator.

Each case (model.onnx + test_data_set_*/input_N.pb, output_N.pb) goes through
strata-compile (import -> compile -> artifact) and strata-run, and every
output is compared with the expected one using ONNX's tolerances (rtol 1e-3,
atol 1e-7; exact for integers and bools). A case is:

  passed       every output matches
  failed       Strata accepted the model but compiled, ran or computed wrong
  unsupported  the model uses an op, domain or opset Strata does not import

An operator counts as supported when every one of its cases passed. The
table lists, per operator: passed, failed, unsupported.

With --expect FILE (one op per line), the run fails if any case of a listed
op does not pass: the listed ops are the ones Strata claims.

    run_node_tests.py --bin BUILD/bin [--data DIR] [--work DIR] [--expect F]
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "..", "..", "..", "shared", "onnx-node-tests")


# Tensor types strata-run exchanges as .npy (bfloat16 and the 8/4/2-bit
# formats have no NumPy type).
NPY_TYPES = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13}


def op_key(name, model, base_keys):
    """The operator a case tests."""
    m = re.match(r"(test_.*?)_expanded(_ver\d+)?$", name)
    if m and m.group(1) in base_keys:
        return base_keys[m.group(1)]
    ops = [n.op_type for n in model.graph.node]
    if len(ops) == 1:
        return ops[0]
    distinct = sorted(set(ops) - {"Constant", "Identity"})
    return distinct[0] if len(distinct) == 1 else "+".join(distinct) or "?"


def opset_of(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return None


def load_tensor(path):
    """The array in a TensorProto file, or None for an element type without
    a .npy form (with that type's number)."""
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    if t.data_type not in NPY_TYPES:
        return None, t.data_type
    return numpy_helper.to_array(t), t.data_type


def run_case(args, case_dir, supported_ops, opset_range):
    """Returns (status, detail)."""
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    opset = opset_of(model)
    versions = {o.domain: o.version for o in model.opset_import}
    uses_default = any(n.domain in ("", "ai.onnx") for n in model.graph.node)
    if uses_default and (opset is None or
                         not (opset_range[0] <= opset <= opset_range[1])):
        return "unsupported", "opset %s" % opset
    for node in model.graph.node:
        default = node.domain in ("", "ai.onnx")
        key = node.op_type if default else node.domain + "." + node.op_type
        version = opset if default else versions.get(node.domain, 0)
        if key not in supported_ops:
            return "unsupported", "op " + key
        if version < supported_ops[key]:
            return "unsupported", "op %s at opset %d" % (key, version)
    init_names = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in init_names]
    for info in list(inputs) + list(model.graph.output):
        if not info.type.HasField("tensor_type"):
            return "unsupported", "non-tensor value %s" % info.name
        if info.type.tensor_type.elem_type not in NPY_TYPES:
            return "unsupported", "%s has type %d, which has no .npy form" % (
                info.name, info.type.tensor_type.elem_type)
    work = tempfile.mkdtemp(dir=args.work)
    try:
        outputs = list(model.graph.output)
        sets = sorted(d for d in os.listdir(case_dir)
                      if d.startswith("test_data_set_"))
        for data_set in sets:
            ds = os.path.join(case_dir, data_set)
            arrays = []
            for k in range(len(inputs)):
                array, dtype = load_tensor(
                    os.path.join(ds, "input_%d.pb" % k))
                if array is None:
                    return "unsupported", "input type %d has no .npy form" % (
                        dtype)
                arrays.append(array)
            paths = []
            for k, array in enumerate(arrays):
                paths.append(os.path.join(work, "in%d.npy" % k))
                np.save(paths[k], array)
            # Inputs that decide shapes (Reshape's shape, Slice's starts,
            # ...) are fixed at compile time with --input-value: Strata
            # compiles static shapes. The compiler names each such input.
            fixed = set()
            while True:
                cmd = [os.path.join(args.bin, "strata-compile"),
                       os.path.join(case_dir, "model.onnx"),
                       "-o", os.path.join(work, "model.strata"),
                       "--mode", "forward"]
                for k, (info, array) in enumerate(zip(inputs, arrays)):
                    if info.name in fixed:
                        cmd += ["--input-value", "%s=%s" % (info.name, paths[k])]
                        continue
                    shape = "x".join(str(d) for d in array.shape) or "scalar"
                    dims = info.type.tensor_type.shape.dim
                    if any(not d.HasField("dim_value") for d in dims):
                        cmd += ["--input-shape", "%s=%s" % (info.name, shape)]
                r = subprocess.run(cmd, capture_output=True, text=True)
                # "(input 'x') must be a compile-time ...", or "computed
                # from the model's data: from input 'a', input 'b'".
                named = re.findall(r"\(input '([^']*)'\) must be a compile-"
                                   r"time", r.stderr)
                for m in re.finditer(r"computed from the model's data: "
                                     r"from ((?:(?:, )?input '[^']*')+)",
                                     r.stderr):
                    named += re.findall(r"input '([^']*)'", m.group(1))
                todo = [n for n in named if n not in fixed and
                        n in {i.name for i in inputs}]
                if r.returncode != 0 and todo:
                    fixed.add(todo[0])
                    continue
                break
            if r.returncode != 0:
                # Element types Strata has no representation for (float8,
                # int4, ...) are a limitation, not a wrong answer.
                if re.search(r"unsupported (element|target) type", r.stderr):
                    return "unsupported", "type: " + r.stderr.strip()[-120:]
                return "failed", "compile: " + r.stderr.strip()[:300]
            run = [os.path.join(args.bin, "strata-run"),
                   os.path.join(work, "model.strata"), "--quiet",
                   "--output-dir", os.path.join(work, "out")]
            for k, info in enumerate(inputs):
                if info.name not in fixed:
                    run += ["--input", "%s=%s" % (info.name, paths[k])]
            r = subprocess.run(run, capture_output=True, text=True)
            if r.returncode != 0:
                return "failed", "run: " + r.stderr.strip()[:300]
            for k, info in enumerate(outputs):
                expected, dtype = load_tensor(
                    os.path.join(ds, "output_%d.pb" % k))
                if expected is None:
                    return "unsupported", "output type %d has no .npy form" % (
                        dtype)
                name = info.name.replace("/", "_")
                got = np.load(os.path.join(work, "out", name + ".npy"))
                if got.shape != expected.shape:
                    return "failed", "output %s: shape %s, expected %s" % (
                        info.name, got.shape, expected.shape)
                if got.dtype != expected.dtype:
                    return "failed", "output %s: dtype %s, expected %s" % (
                        info.name, got.dtype, expected.dtype)
                if expected.dtype.kind in "fc":
                    ok = np.allclose(got.astype(np.float64),
                                     expected.astype(np.float64),
                                     rtol=1e-3, atol=1e-7, equal_nan=True)
                else:
                    ok = np.array_equal(got, expected)
                if not ok:
                    diff = np.abs(got.astype(np.float64) -
                                  expected.astype(np.float64))
                    return "failed", "output %s: max abs diff %g" % (
                        info.name, np.nanmax(diff) if diff.size else 0)
        return "passed", ""
    finally:
        shutil.rmtree(work, ignore_errors=True)


# The exit status that tells ctest (and the sanitizer script) "skipped".
SKIPPED = 77


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--work", default=None)
    parser.add_argument("--expect", help="ops that must pass every case")
    parser.add_argument("--only", help="regex on case names")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--json", help="write per-case results here")
    args = parser.parse_args()

    data = os.path.abspath(args.data)
    if not os.path.isdir(data):
        # 77: ctest reports the suite as skipped (SKIP_RETURN_CODE), never
        # as passed.
        print("skipped: no test data (%s not found)" % data)
        return SKIPPED
    args.work = args.work or tempfile.mkdtemp(prefix="strata-conformance-")
    os.makedirs(args.work, exist_ok=True)

    supported = {}
    for line in subprocess.run(
            [os.path.join(args.bin, "strata-compile"), "--list-ops"],
            capture_output=True, text=True, check=True).stdout.splitlines():
        op, since = line.split()
        supported[op] = int(since)
    opset_range = tuple(int(x) for x in subprocess.run(
        [os.path.join(args.bin, "strata-compile"), "--list-opsets"],
        capture_output=True, text=True, check=True).stdout.split())

    cases = sorted(d for d in os.listdir(data) if d.startswith("test_"))
    if args.only:
        cases = [c for c in cases if re.search(args.only, c)]
    models = {c: onnx.load(os.path.join(data, c, "model.onnx"),
                           load_external_data=False) for c in cases}
    base_keys = {}
    for c in cases:
        if "_expanded" not in c:
            base_keys[c] = op_key(c, models[c], {})
    keys = {c: op_key(c, models[c], base_keys) for c in cases}

    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_case, args, os.path.join(data, c),
                               supported, opset_range): c for c in cases}
        for f in concurrent.futures.as_completed(futures):
            c = futures[f]
            try:
                results[c] = f.result()
            except Exception as e:  # A broken case must not stop the run.
                results[c] = ("failed", "runner: %r" % e)

    table = collections.defaultdict(collections.Counter)
    for c in cases:
        table[keys[c]][results[c][0]] += 1
    print("%-28s %7s %7s %12s  %s" % ("operator", "passed", "failed",
                                      "unsupported", "status"))
    totals = collections.Counter()
    for op in sorted(table):
        t = table[op]
        totals.update(t)
        if t["passed"] and not t["failed"] and not t["unsupported"]:
            status = "supported"
        elif t["passed"]:
            status = "partial"
        else:
            status = "-"
        print("%-28s %7d %7d %12d  %s" % (op, t["passed"], t["failed"],
                                          t["unsupported"], status))
    print("%-28s %7d %7d %12d" % ("total", totals["passed"], totals["failed"],
                                  totals["unsupported"]))
    supported_ops = [op for op in table if table[op]["passed"] and
                     not table[op]["failed"] and not table[op]["unsupported"]]
    print("supported operators: %d (every case passes)" % len(supported_ops))

    if args.verbose:
        for c in cases:
            if results[c][0] == "failed":
                print("FAILED %s [%s]: %s" % (c, keys[c], results[c][1]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({c: {"op": keys[c], "status": results[c][0],
                           "detail": results[c][1]} for c in cases}, f,
                      indent=1)

    if args.expect:
        with open(args.expect) as f:
            expected = [l.split("#")[0].strip() for l in f]
        expected = [e for e in expected if e]
        regressions = []
        for op in expected:
            for c in cases:
                if keys[c] == op and results[c][0] != "passed":
                    regressions.append("%s [%s]: %s %s" % (
                        c, op, results[c][0], results[c][1]))
            if op not in table:
                regressions.append("%s: no cases found" % op)
        for r in regressions:
            print("REGRESSION " + r)
        passed = sum(1 for c in cases if results[c][0] == "passed")
        print("%d passed, %d failed" % (passed, len(regressions)))
        return 1 if regressions else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
