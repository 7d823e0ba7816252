"""What new nodes cost a plan: the merged planner's price, shared with the separate loops'
`PlannerPrice` expander, so that either loop can weigh dollars against idle accelerators the
same way and a comparison can tell the pricing from the merging.

A plan pays the hourly price of its new nodes beyond the committed slots (those are billed
whatever happens), times its `share` of them: the dominant share the pods it places take (CPU,
memory or GPU, whichever they take most of) plus the share of the nodes' GPUs that the demand
seen for the pool would leave idle, at most 1. The demand (`Demand`) is what a controller
knows: the pods pending, and those that arrived in the last `window_s` and were placed since,
that a node of the pool could hold, as the controller knows the pool's nodes (its node-group
templates, harness/autoscalers/node_templates.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from harness.autoscalers.node_templates import NodeTemplates
from harness.status import PENDING

if TYPE_CHECKING:
    from harness.state import ClusterState
    from harness.view import SimulationView


class Demand:
    """The GPU demand a controller sees per pool, in the scheduler's view of a pod, on the
    pools' nodes as `templates` says it knows them (the caller refreshes them)."""

    def __init__(self, sim: SimulationView, window_s: float, templates: NodeTemplates):
        self.sim, self.window_s, self.templates = sim, float(window_s), templates
        templates.fits(sim.w)  # every pod tabulated now, on attach
        self.pod_milli = sim.w.gpu_milli_total
        self.by_submit = np.argsort(sim.w.job_submit, kind="stable")  # the trace's jobs, at attach
        self.submits = sim.w.job_submit[self.by_submit]

    def seen_milli(self, now: float) -> np.ndarray:
        """GPU milli per pool of the demand seen now: the queued jobs' pending pods, and the
        pods that arrived in the last `window_s` and were placed since, each counted in every
        pool that could hold it. One compiled pass over the queued jobs and those that arrived
        in the window: a scan asks this once, and building the pod list took a dozen array
        steps, more than the sum. Integer sums: the same figure in any order."""
        sim = self.sim
        w = sim.w
        lo, hi = self.submits.searchsorted(now - self.window_s, "right"), self.submits.searchsorted(now, "right")
        return seen_milli(sim.queue.jobs(), self.by_submit[lo:hi], w.job_bounds, w.pods_by_job, sim.pod_status,
                          w.submit, now, self.templates.fits(w), sim.state.pool_allowed, w.placement,
                          self.pod_milli)

    def fits(self, pods: np.ndarray) -> np.ndarray:
        """pools x pods: could a node of the pool hold the pod, and may the pod use the pool
        (an admission layer may keep it to some: `Workload.placement`)?"""
        w = self.sim.w
        return self.templates.fits(w)[:, pods] & self.sim.state.pool_allowed[w.placement[pods]].T

    def milli(self, pods: np.ndarray) -> np.ndarray:
        """GPU milli per pool of these pods, each counted in every pool that could hold it."""
        return self.fits(pods) @ self.pod_milli[pods]


@njit(cache=True)
def seen_milli(queued: np.ndarray, recent: np.ndarray, job_bounds: np.ndarray, pods_by_job: np.ndarray,
               status: np.ndarray, submit: np.ndarray, now: float, fits: np.ndarray, pool_allowed: np.ndarray,
               placement: np.ndarray, milli: np.ndarray) -> np.ndarray:
    """Per pool, the GPU milli of the `queued` jobs' pending pods and of the `recent` jobs'
    pods that arrived by `now` and are not pending, each counted in every pool whose nodes
    could hold it (`fits`, pools x pods) and that its placement allows (`pool_allowed`,
    placements x pools): `Demand.milli` of those pods without listing them."""
    out = np.zeros(fits.shape[0], np.int64)
    for of_queue in (True, False):
        jobs = queued if of_queue else recent
        for i in range(len(jobs)):
            j = jobs[i]
            for k in range(job_bounds[j], job_bounds[j + 1]):
                p = pods_by_job[k]
                seen = status[p] == PENDING if of_queue else status[p] != PENDING and submit[p] <= now
                if not seen:
                    continue
                for q in range(len(out)):
                    if fits[q, p] and pool_allowed[placement[p], q]:
                        out[q] += milli[p]
    return out


def taken(st: ClusterState, new: np.ndarray) -> tuple[float, float]:
    """(the dominant share the pods packed on nodes `new` of state `st` take of them, the
    nodes' GPU milli)."""
    cpu, mem, gpu = st.cpu_cap[new].sum(), st.mem_cap[new].sum(), st.gpu_milli_cap[new].sum()
    used = max(1 - st.cpu_free[new].sum() / cpu, 1 - st.mem_free[new].sum() / mem,
               1 - st.gpu_free[new].sum() / gpu if gpu else 0.0)
    return used, gpu


def share(used: float, gpu: float, demand_milli: float) -> float:
    """The share of new nodes a plan pays for: what its pods take (`taken`) plus the share of
    the nodes' `gpu` milli beyond the demand seen for their pool (the plan's own included)."""
    idle = max(0.0, 1 - demand_milli / gpu) if gpu else 0.0
    return float(min(1.0, used + idle))


def cost(price: float, nodes: int, committed: int, paid_share: float) -> float:
    """Hourly price of `nodes` new nodes of a pool at `price`, `committed` of them in committed
    slots (already paid for), times the share of them the plan pays for (`share`)."""
    return (nodes - committed) * price * paid_share
