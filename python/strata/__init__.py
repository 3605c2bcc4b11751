"""Strata from Python: compile an ONNX model, then train or run it.

    import strata
    strata.compile("model.onnx", "model.strata",
                   ["--input-shape", "input_ids=8x128", "--optimizer", "adamw"])
    art = strata.Artifact("model.strata")
    trainer = art.trainer()
    for ids, labels in my_loader:           # NumPy arrays, your pipeline
        metrics = trainer.step({"input_ids": ids, "labels": labels})
    trainer.save()
    weights = trainer.parameters()          # {name: ndarray}

Artifact, Trainer: the runtime (the strata_runtime extension module, no
LLVM inside). compile(): runs the strata-compile tool, found through
$STRATA_BIN, inside this package when pip installed it (strata/bin), beside
it in a build tree (BUILD/bin), or on PATH.
"""

import os
import shutil
import subprocess

from strata_runtime import Artifact, Trainer  # noqa: F401

__all__ = ["Artifact", "Trainer", "compile", "tool", "CompileError"]


class CompileError(RuntimeError):
    """strata-compile refused the model; the message is its diagnostics."""


def tool(name):
    """The path of a Strata command-line tool."""
    candidates = []
    if os.environ.get("STRATA_BIN"):
        candidates.append(os.path.join(os.environ["STRATA_BIN"], name))
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "bin", name))
    candidates.append(os.path.join(here, "..", "..", "bin", name))
    for c in candidates:
        if os.access(c, os.X_OK):
            return os.path.normpath(c)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(
        "%s not found: set STRATA_BIN to the directory of the Strata tools "
        "(BUILD/bin)" % name)


def compile(model, output, args=(), quiet=True):
    """Compiles `model` (.onnx) into the artifact directory `output` with
    strata-compile's options `args` (a list of strings); returns `output`.
    Raises CompileError with the compiler's message on failure."""
    cmd = [tool("strata-compile"), str(model), "-o", str(output)]
    cmd += [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CompileError(r.stderr.strip())
    if not quiet and r.stderr:
        print(r.stderr, end="")
    return str(output)
