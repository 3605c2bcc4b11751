"""What every test script shares: the --bin/--work arguments, the tools in
--bin, running a command that must succeed, and unittest's entry point."""

import argparse
import os
import subprocess
import sys
import time
import unittest

# No profile strata-calibrate remembered on this machine changes what the
# suites compile (a test that wants one sets STRATA_PROFILE itself).
os.environ.setdefault("STRATA_PROFILE", "")

ARGS = None


def parse_args(add_arguments=None):
    """Parses --bin DIR --work DIR, and whatever `add_arguments(parser)`
    adds (the rest goes to unittest), creates the work directory and
    returns the arguments."""
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    if add_arguments:
        add_arguments(parser)
    ARGS, ARGS.unittest_argv = parser.parse_known_args()
    ARGS.bin = os.path.abspath(ARGS.bin)
    ARGS.work = os.path.abspath(ARGS.work)
    os.makedirs(ARGS.work, exist_ok=True)
    return ARGS


def tool(name):
    return os.path.join(ARGS.bin, name)


def run(cmd):
    """Runs `cmd`; a non-zero exit fails the test with its stderr."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("%s failed:\n%s" % (" ".join(cmd), r.stderr))
    return r


_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
          "TiB": 1 << 40}


def parse_size(text):
    """Bytes of a size as the tools print it ("1.50 MiB", "0 B")."""
    number, unit = text.split()
    return float(number) * _UNITS[unit]


def run_measured(cmd, stderr_path):
    """Runs `cmd` with its stderr in `stderr_path`; returns (stdout,
    seconds, peak RSS in bytes, exit code). The child is reaped with
    wait4, which returns its own resource usage."""
    start = time.monotonic()
    with open(stderr_path, "wb") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        out = p.stdout.read()
        p.stdout.close()
        _, status, usage = os.wait4(p.pid, 0)
    return (out.decode(), time.monotonic() - start, usage.ru_maxrss * 1024,
            os.waitstatus_to_exitcode(status))


def run_tests(verbosity=2):
    unittest.main(argv=[sys.argv[0]] + ARGS.unittest_argv,
                  verbosity=verbosity)
