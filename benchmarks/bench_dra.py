"""What claims cost a replay: the bundled trace replayed with device columns (`cluster.dra=null`,
the pre-DRA cluster) and with every GPU pod's claim (`++cluster.dra={}`, the default cluster
translated into ResourceSlices; the bundled cluster's default since it became a DRA cluster),
per loop, each a fresh subprocess, the median of several runs of each, and the ratio DRA / columns.

    python benchmarks/bench_dra.py [--loops separate,separate_karpenter,merged] [--repeat 3]

CPU seconds (user + system of the replay's process) are printed beside wall seconds: on a
shared machine wall time counts the other jobs too. Goal: a replay with claims no more than
1.3x the same replay with columns.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_one(loop: str, dra: bool, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one replay."""
    args = [sys.executable, "-m", "harness.cli", "replay", f"loop={loop}", f"hydra.run.dir={out}"]
    args.append("++cluster.dra={}" if dra else "cluster.dra=null")  # explicit both ways: the default is DRA
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loops", default="separate,separate_karpenter,merged")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    calib = ROOT.parent / "shared" / "tools" / "calib.py"
    if calib.exists():  # machines differ about 3x: the figure to quote beside the timings
        figure = subprocess.run([sys.executable, str(calib)], capture_output=True, text=True).stdout.split()
        print(f"calib.py: {figure[-1] if figure else '?'}")
    print(f"{'loop':22s} {'columns wall/cpu s':>20s} {'claims wall/cpu s':>20s} {'ratio wall':>11s} {'ratio cpu':>10s}")
    with tempfile.TemporaryDirectory() as tmp:
        for loop in args.loops.split(","):
            for dra in (False, True):  # compiled kernels loaded or compiled once, not timed
                run_one(loop, dra, Path(tmp) / f"warm-{dra}")
            med = {}
            for dra in (False, True):
                runs = [run_one(loop, dra, Path(tmp) / f"{loop}-{dra}-{i}") for i in range(args.repeat)]
                med[dra] = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            (cw, cc), (dw, dc) = med[False], med[True]
            print(f"{loop:22s} {cw:9.1f} / {cc:8.1f} {dw:9.1f} / {dc:8.1f} {dw / cw:10.2f}x {dc / cc:9.2f}x",
                  flush=True)


if __name__ == "__main__":
    main()
