"""Reading strata-run's Chrome traces (--trace)."""
import json

# Tracks (tid) in strata-run's traces: runtime/backends/Trace.h's Lane.
COMPUTE, CPU_OPTIMIZER, COMM = 1, 5, 6


def lane_overlap(trace, tid):
    """(seconds of work on track `tid` in the trace, the share of it that
    ran while the compute track was busy)."""
    ev = [e for e in json.load(open(trace))["traceEvents"]
          if e.get("ph") == "X"]
    comp = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                  if e["tid"] == COMPUTE)
    work = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["tid"] == tid]
    total = sum(b - a for a, b in work)
    hidden = 0.0
    for x0, x1 in work:
        for y0, y1 in comp:
            if y0 >= x1:
                break
            hidden += max(0.0, min(x1, y1) - max(x0, y0))
    return total / 1e6, (hidden / total if total else 0.0)


def cpu_update_overlap(trace):
    """(seconds of CPU-update work in the trace, the share of it that ran
    while the compute track was busy)."""
    return lane_overlap(trace, CPU_OPTIMIZER)


def cpu_update_before_compute_end(trace):
    """The share of CPU-update work in the trace that ran before the last
    compute kernel of its step (its run) ended: the work that did not
    lengthen the step, whether or not a kernel ran beside it."""
    ev = [e for e in json.load(open(trace))["traceEvents"]
          if e.get("ph") == "X"]
    runs = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"] == "run"]
    total = before = 0.0
    for r0, r1 in runs:
        inside = [e for e in ev if r0 <= e["ts"] <= r1]
        comp = [e["ts"] + e["dur"] for e in inside if e["tid"] == COMPUTE]
        if not comp:
            continue
        end = max(comp)
        for e in inside:
            if e["tid"] == CPU_OPTIMIZER:
                x0, x1 = e["ts"], e["ts"] + e["dur"]
                total += x1 - x0
                before += max(0.0, min(x1, end) - x0)
    return before / total if total else 0.0
