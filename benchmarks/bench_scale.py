"""Time-based replay at scale: wall and CPU time, peak memory and events per second per loop,
against the speed targets.

    python benchmarks/bench_scale.py [--sizes 100000,300000,1000000] [--loops separate,merged]
                                     [--cpu-budget SECONDS]

Traces come from the `workload=scale` generator preset (about 1/7 of jobs are gangs, ~40% of
pods in gangs), with the arrival span scaled with the pod count so the offered load stays the
same (30 days for 1M pods); the cluster is conf/cluster/scale.yaml (8,000 node slots, no PCIe
pool: the file says why). Each run is a fresh subprocess so its peak RSS is its own.
Targets, in calib units (the replay's seconds divided by ../shared/tools/calib.py's figure, as
machines differ about 3x), each run's row says whether it meets its own: the merged loop at
most 25 units per 100k pods at any size (linear up to 1M), and so kube-scheduler's own gang
scheduling (`separate_workload`: "at merged's pace"); the separate loops (with Cluster
Autoscaler, ProvisioningRequests or the Karpenter-like autoscaler) at most 150 units at 100k;
every loop at most 2 GiB. The moonshot, 1M pods in 30 s for every loop, is not yet a target.
With --cpu-budget, a replay that has not finished after that much CPU time is stopped and its
row says how far it got (simulated seconds reached of the horizon, events per CPU second), so
runs far from the goal still give a figure without taking hours. "pods started" (running or
done at the end) says whether the loop served the trace: a loop that leaves work queued
re-examines it at every change, and its events then grow faster than its pods.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS_PER_POD = 0.7  # workload=scale: ~700k jobs for ~1M pods
SPAN_PER_POD_S = 2592000 / 1_000_000


def run_one(loop: str, trace: Path, cpu_budget: float) -> dict:
    code = f"""
import json, resource, signal, sys, time
from harness.config import compose
from harness.replay import build
from harness.status import DONE, RUNNING
class OutOfBudget(Exception):
    pass
def stop(*_):
    raise OutOfBudget
def ran_out(e):  # the budget's signal may land inside a compiled call, which wraps it in a SystemError
    while e is not None and not isinstance(e, OutOfBudget):
        e = e.__cause__ or e.__context__
    return e is not None
def swallowed(u):  # or in a finaliser, where Python only reports it: the budget's signal again, at once
    if u.exc_type is OutOfBudget:
        signal.setitimer(signal.ITIMER_PROF, 0.001)
    else:
        sys.__unraisablehook__(u)
sys.unraisablehook = swallowed
cfg = compose("config", ["loop={loop}", "cluster=scale", "trace.path={trace}"])
t0 = time.perf_counter(); sim, lp = build(cfg); t1 = time.perf_counter()
signal.signal(signal.SIGPROF, stop)
signal.setitimer(signal.ITIMER_PROF, {cpu_budget})  # 0: no budget
finished = True
try:
    sim.run(lp)
except Exception as e:
    if not ran_out(e):
        raise
    finished = False
t2 = time.perf_counter()
signal.setitimer(signal.ITIMER_PROF, 0)
started = int(((sim.pod_status == RUNNING) | (sim.pod_status == DONE)).sum())
print(json.dumps({{"build_s": t1 - t0, "replay_s": t2 - t1, "events": sim.n_events, "finished": finished,
                  "started": started / len(sim.pod_status),
                  "reached": sim.now / sim.horizon, "cpu_s": time.process_time(),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


#: the most calib units a replay of 100k pods may take, per loop
UNITS_PER_100K = {"merged": 25.0, "separate_workload": 25.0,
                  "separate": 150.0, "separate_provreq": 150.0, "separate_karpenter": 150.0}
#: the loops whose target holds per 100k pods at every size, not at 100k alone
LINEAR = {"merged", "separate_workload"}
MAX_PEAK_MIB = 2048


def calibration() -> float | None:
    """calib.py's figure on this machine now (seconds of its fixed workload), or None."""
    calib = ROOT.parent / "shared" / "tools" / "calib.py"
    if not calib.exists():
        return None
    figure = subprocess.run([sys.executable, str(calib)], capture_output=True, text=True).stdout.split()
    return float(figure[-1]) if figure else None


def verdict(loop: str, pods: int, units: float, r: dict) -> str:
    """Whether the run meets its loop's target: the LINEAR loops at any size, the other separate
    loops at 100k pods (a larger run of theirs is reported, not judged); memory for every loop."""
    if r["peak_mib"] > MAX_PEAK_MIB:
        return f"MISSED (over {MAX_PEAK_MIB:,} MiB)"
    limit = UNITS_PER_100K.get(loop)
    if limit is None or units != units or (loop not in LINEAR and pods != 100_000):
        return "-"
    allowed = limit * pods / 100_000 if loop in LINEAR else limit
    if not r["finished"]:
        return f"MISSED (stopped; <= {allowed:,.4g} units)"
    return f"{'met' if units <= allowed else 'MISSED'} (<= {allowed:,.4g})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,300000,1000000")
    ap.add_argument("--loops", default="separate,merged")
    ap.add_argument("--cpu-budget", type=float, default=0.0, help="stop a replay after this many CPU seconds")
    args = ap.parse_args()
    unit = calibration()
    print(f"calib.py: {unit if unit else 'not found (no ../shared/tools/calib.py): no calib units'}")
    print("| pods | loop | build s | replay s | CPU s | calib units | target | events | events/s | pods started "
          "| peak MiB |\n|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for pods in (int(x) for x in args.sizes.split(",")):
            trace = Path(tmp) / f"scale_{pods}.parquet"
            subprocess.run([sys.executable, "-m", "harness.cli", "generate", "workload=scale",
                            f"workload.n_jobs={int(pods * JOBS_PER_POD)}",
                            f"workload.span_s={int(pods * SPAN_PER_POD_S)}", f"out={trace}", "check_fits=false"],
                           cwd=ROOT, check=True, capture_output=True)
            for loop in args.loops.split(","):
                r = run_one(loop, trace, args.cpu_budget)
                replay = f"{r['replay_s']:.1f}" if r["finished"] else \
                    f"stopped at {r['replay_s']:.0f} ({100 * r['reached']:.0f}% of simulated time)"
                units = r["replay_s"] / unit if unit else float("nan")
                print(f"| {pods:,} | {loop} | {r['build_s']:.1f} | {replay} | {r['cpu_s']:.1f} | {units:,.0f} | "
                      f"{verdict(loop, pods, units, r)} | {r['events']:,} | {r['events'] / r['replay_s']:,.0f} | "
                      f"{100 * r['started']:.1f}% | {r['peak_mib']:,.0f} |", flush=True)


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - started:.0f} s; this process peak "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
