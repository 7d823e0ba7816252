"""Quiet time costs nothing: seconds of replay per idle month, per loop.

    python benchmarks/bench_quiet.py [--loops separate,separate_provreq,separate_karpenter,merged]

A tiny trace on the default cluster, whose L4 pool keeps one node (min_size: 1) that is idle and
can never be removed: a 1-GPU pod at t=0 (on that node), an 8-GPU pod at 30 days (a new node
boots, runs it, and is scaled down) and, in the long trace, a 1-GPU pod at 365 days. Between
them nothing happens, so a loop should sleep from one event (or time threshold) to the next
instead of scanning every 10 s. Goal: well under a second per idle month.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

DAY = 86400.0
MONTH = 30 * DAY
LOOPS = "separate,separate_provreq,separate_karpenter,merged"
#: pods (submit s, GPUs) of each trace
TRACES = {"30 d": [(0.0, 1), (30 * DAY, 8)], "365 d": [(0.0, 1), (30 * DAY, 8), (365 * DAY, 1)]}


def write_gap_trace(path: Path, pods: list[tuple[float, int]]) -> Path:
    """A trace of one-hour pods, one per job, at these (submit s, GPU count)."""
    from harness.trace import TraceMeta, table_from_columns, write_trace

    n = len(pods)
    cols = {"pod_id": [f"p{i}" for i in range(n)], "job_id": [f"j{i}" for i in range(n)],
            "cpu_milli": [1000] * n, "memory_mib": [1024] * n, "gpu_count": [g for _, g in pods],
            "gpu_milli": [1000] * n, "submit_s": [s for s, _ in pods], "duration_s": [3600.0] * n}
    return write_trace(table_from_columns(cols), path, TraceMeta("bench_quiet", "CC0", "trace start",
                                                                 "pods far apart: a replay of quiet time"))


def replay_seconds(loop: str, trace: Path) -> tuple[float, float]:
    """(wall seconds of the replay, its horizon in seconds: last submission + 24 h)."""
    from harness.config import compose
    from harness.replay import build

    sim, control = build(compose("config", [f"loop={loop}", f"trace.path={trace}"]))
    started = time.perf_counter()
    sim.run(control)
    return time.perf_counter() - started, sim.horizon


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loops", default=LOOPS)
    args = ap.parse_args()
    print("| trace | loop | replay s | idle months | s per idle month |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, pods in TRACES.items():
            trace = write_gap_trace(Path(tmp) / f"gap_{len(pods)}.parquet", pods)
            for loop in args.loops.split(","):
                wall, horizon = replay_seconds(loop, trace)
                months = horizon / MONTH
                print(f"| {name} | {loop} | {wall:.3f} | {months:.1f} | {wall / months:.4f} |", flush=True)


if __name__ == "__main__":
    main()
