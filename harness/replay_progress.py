"""How far a replay is, and about how long it will take.

Its progress is a share of its work, not of its simulated time: openb's arrivals take the first
2% of its simulated time and nearly all of its wall time (its pods then run for weeks while
little is decided), so a pace of simulated time said hours with minutes left. The work is the
trace's pods that arrive before the horizon, each half arriving and half done (or refused);
simulated time counts where it is further on (a run that ends at its horizon with pods still
running, a trace of services alone, whose demand comes by time). The ETA is the pace of that
share since the replay started, the seconds spent compiling kernels left out (harness/progress.py,
harness/compile_time.py). On openb under separate_2026_karpenter (12 min on loaded cores, its
pace swinging with consolidation and the machine's load) that ETA was within 2x of the time left
at 75% of its progress lines; the pace of the last 30 s, 41%; simulated time's, at none.

Before a long replay starts, one line says its pods, its span and a range of wall time, from
what a pod cost its loop's family on the traces measured: the range is wide (a pod costs more
on a busy trace than on a sparse one), and says so; the ETA then follows the run itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from harness.progress import Progress, duration
from harness.sim import Simulation
from harness.status import DONE, NOT_ARRIVED, REFUSED

#: Wall time a pod costs, low and high, in microseconds, per loop family (`Description.family`):
#: the whole replay (build, run, outputs) over the trace's pods, kernels cached. Measured with
#: `loopbench replay loop=...`: on the bundled trace (3,405 pods, 2026-12-03, calib.py 0.39 with
#: another process on the 2 cores) separate 6.7-9.3 s, its variants 4.8 s (separate_sees) to
#: 11.9 s (separate_prefers), separate_karpenter 20.3 s, merged 2.8-4.1 s, merged_kueue 5.6 s;
#: on openb_autoscaled run to completion (8,130 pods, 2026-12-04, calib.py 0.7 on loaded cores)
#: separate 6.9 s, separate_2026 6.3 s, merged 4.1 s, separate_2026_karpenter 150 s of CPU (its
#: consolidation restarts the longest pods); at 100k pods (benchmarks/bench_scale.py, 2026-12-05,
#: calib.py 0.34-0.36, docs/performance.md) separate 96-97 s, separate_provreq 120-125 s,
#: separate_workload 53 s, separate_karpenter 150-153 s, merged 20-21 s; at 1M pods (2026-12-06,
#: calib.py 0.32-0.34) separate 1,129 s, separate_provreq 1,021 s, separate_workload 602 s, merged 192 s
#: (separate_workload, kube-scheduler's own gang scheduling, sets the family's low end).
US_PER_POD = {
    "separate loops": (500, 3500),
    "separate loops with KarpenterAutoscaler": (1500, 18500),
    "merged loop (all capabilities, one decision)": (200, 1650),
}
#: A loop of another family: the widest range measured.
US_PER_POD_OTHER = (min(lo for lo, _ in US_PER_POD.values()), max(hi for _, hi in US_PER_POD.values()))
#: What the ranges were measured on, as the line says it.
MEASURED_ON = "the bundled trace, openb, 100k and 1M pods at calib.py 0.3-0.7"
#: A first run compiles its kernels before and while it replays (numba, cached on disk after):
#: the bundled trace under separate took 30.7 s with an empty cache against 5.3 s with it (calib.py 0.7).
FIRST_RUN_S = 25.0
#: Replays estimated to take longer than this (at the high end) say so before they start.
LONG_S = 10.0


def trace_pods(sim: Simulation) -> np.ndarray:
    """The pods of the trace itself (no service's replica slot, no placeholder) that arrive
    before the horizon: the work a replay does."""
    w = sim.w
    return np.flatnonzero(w.job_of_trace[w.job] & (w.submit <= sim.horizon))


def estimate(sim: Simulation, name: str, family: str, first_run: bool = False) -> str:
    """What a replay is about to do and about how long it will take, or "" when short: its pods
    at what a pod cost its loop's family, and on a `first_run` the kernels' compiling."""
    low_us, high_us = US_PER_POD.get(family, US_PER_POD_OTHER)
    n = len(trace_pods(sim))
    compiling = FIRST_RUN_S if first_run else 0.0
    low, high = (n * us / 1e6 + compiling for us in (low_us, high_us))
    if high < LONG_S:
        return ""
    span = (f"until its last pod is done (at most {duration(sim.horizon)} of simulated time)" if sim.stop_when_done
            else f"over {duration(sim.horizon)} of simulated time")
    first = f"about {duration(FIRST_RUN_S)} compiling the kernels, a first run, then " if first_run else ""
    return (f"replay {name}: {n:,} pods {span}; estimated wall time {duration(low)} to {duration(high)} "
            f"({first}{low_us:,}-{high_us:,} us a pod: what {family} took on {MEASURED_ON}); "
            "the ETA follows this run's own pace")


class WorkShare:
    """`share(t)`: how much of a replay's work is done at simulated time t, in [0, 1] (the
    module's docstring says what the work is). It reads every pod's status: ask it only when
    showing progress."""

    def __init__(self, sim: Simulation):
        self.sim, self.pods = sim, trace_pods(sim)
        self.settled = 0  # the pods done or refused, when last asked

    def share(self, t: float) -> float:
        status = self.sim.pod_status[self.pods]
        arrived = int(np.count_nonzero(status != NOT_ARRIVED))
        self.settled = int(np.count_nonzero((status == DONE) | (status == REFUSED)))
        pods = (arrived + self.settled) / (2 * len(self.pods)) if len(self.pods) else 0.0
        return min(1.0, max(pods, t / self.sim.horizon if self.sim.horizon > 0 else 1.0))


class ReplayProgress:
    """The progress of one replay: `step(t)` after each of its steps (cheap unless a line or
    the bar is due), as the share of its work, in percent."""

    def __init__(self, sim: Simulation, name: str, interval_s: float | None, enabled: bool,
                 excluded: Callable[[], float] = lambda: 0.0):
        self.sim, self.work, self.started = sim, WorkShare(sim), time.monotonic()
        self.bar = Progress(f"replay {name}", 100.0, "%", status=self.status, interval_s=interval_s,
                            enabled=enabled, excluded=excluded)

    def step(self, t: float) -> None:
        if self.bar.due():
            self.bar.update_to(100.0 * self.work.share(t))

    def status(self, _done: float) -> str:
        """`sim 12.5 h of 48.0 h, 1,200 of 3,405 pods done, 5,724 events (2,862 events/s)`"""
        sim = self.sim
        rate = sim.n_events / max(time.monotonic() - self.started, 1e-9)
        of = f"at most {duration(sim.horizon)}" if sim.stop_when_done else duration(sim.horizon)
        pods = f"{self.work.settled:,} of {len(self.work.pods):,} pods done, " if len(self.work.pods) else ""
        return f"sim {duration(sim.now)} of {of}, {pods}{sim.n_events:,} events ({rate:,.0f} events/s)"

    def __enter__(self) -> ReplayProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()
