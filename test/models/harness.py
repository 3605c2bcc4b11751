"""What every test script shares: the --bin/--work arguments, the tools in
--bin, running a command that must succeed, and unittest's entry point."""

import argparse
import os
import subprocess
import sys
import unittest

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


def run_tests(verbosity=2):
    unittest.main(argv=[sys.argv[0]] + ARGS.unittest_argv,
                  verbosity=verbosity)
