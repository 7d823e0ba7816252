"""The demand the merged planner (and the `planner_price` expander) prices plans by, summed per
pool in one compiled pass (`Demand.seen_milli`), equals a recount over every pod of the trace:
the pending pods of queued jobs, and the pods that arrived by now, are not pending and whose job
arrived in the last `window_s`, each counted in every pool whose nodes could hold it and that
its placement allows. Checked at every scan of replays (gangs bound and released, Kueue's
placements, the expander's pricing) and on random states (any pod status, queue and instant)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.autoscalers.plan_price import Demand
from harness.config import compose
from harness.replay import build
from harness.status import PENDING

TRACE = Path(__file__).resolve().parent / "fixtures" / "pinned" / "scale700.parquet"  # many gangs
GANGS = [f"trace.path={TRACE}", "horizon_s=9000"]


def recount(demand: Demand, now: float) -> np.ndarray:
    """The demand seen at `now`, from every pod of the trace (no pod list, no window index)."""
    sim = demand.sim
    w = sim.w
    queued = np.zeros(w.n_jobs, bool)
    queued[sim.queue.jobs()] = True
    pending = sim.pod_status == PENDING
    job_submit = w.job_submit[w.job]
    recent = (job_submit > now - demand.window_s) & (job_submit <= now) & ~pending & (w.submit <= now)
    seen = (pending & queued[w.job]) | recent
    may = demand.templates.fits(w) & sim.state.pool_allowed[w.placement].T  # pools x pods
    return (may[:, seen] * demand.pod_milli[seen]).sum(axis=1)


@pytest.mark.parametrize("overrides", [
    ["loop=merged", *GANGS],
    ["loop=merged_kueue", *GANGS],
    ["loop=separate_2026_priced", *GANGS],
], ids=["merged", "merged_kueue", "expander"])
def test_the_demand_seen_is_a_recount_at_every_scan(overrides, monkeypatch):
    scans = []
    summed = Demand.seen_milli

    def checked(demand: Demand, now: float) -> np.ndarray:
        milli = summed(demand, now)
        assert milli.tolist() == recount(demand, now).tolist(), f"at {now} s"
        scans.append(milli.any())
        return milli

    monkeypatch.setattr(Demand, "seen_milli", checked)
    sim, loop = build(compose("config", overrides))
    sim.run(loop)
    assert len(scans) > 20 and any(scans)


@pytest.fixture(scope="module")
def merged_demand() -> Demand:
    sim, loop = build(compose("config", ["loop=merged", *GANGS]))
    sim.run(loop)  # pool_allowed, templates: as a replay leaves them
    return loop.demand


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_demand_seen_is_a_recount_on_random_states(merged_demand, data, monkeypatch):
    demand = merged_demand
    sim, w = demand.sim, demand.sim.w
    seed = data.draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(sim, "pod_status", rng.integers(0, 6, w.n_pods).astype(np.int8))  # any status
    jobs = np.sort(rng.choice(w.n_jobs, data.draw(st.integers(0, 40)), replace=False)).astype(np.int64)
    jobs.flags.writeable = False  # as JobQueue.jobs gives them
    monkeypatch.setattr(sim, "queue", SimpleNamespace(jobs=lambda: jobs))
    lo, hi = float(w.submit.min()), float(w.submit.max())
    now = data.draw(st.sampled_from([float(w.submit[rng.integers(w.n_pods)]),  # on a pod's arrival
                                     float(w.job_submit[rng.integers(w.n_jobs)]) + demand.window_s,  # its window's edge
                                     float(rng.uniform(lo, hi + demand.window_s))]))
    assert demand.seen_milli(now).tolist() == recount(demand, now).tolist()
