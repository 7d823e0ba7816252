"""A replay always terminates at its horizon, and reports what was still pending then.

For every loop and random small workloads (hypothesis, reusing tests/test_invariants.py's
generator), with horizons that cut runs short: the clock ends exactly at the horizon, every
integral stops there, nothing starts or ends after it, and every pod is in exactly one
reported state (done, running, bound and waiting, pending, refused, not yet arrived).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from harness.config import compose
from harness.errors import ConfigError
from harness.metrics import MILLI_HOUR, jobs_frame, nodes_frame, summary_row
from harness.replay import build
from harness.sim import Simulation
from harness.status import BOUND, DONE, NOT_ARRIVED, PENDING, RUNNING
from harness.trace import TraceMeta, write_trace
from harness.workload import compile_workload
from tests import scenarios as sc
from tests.test_invariants import LOOPS, small_cluster, workloads

STATES = ("pods_done", "pods_running", "pods_bound_waiting", "pods_pending", "pods_refused", "pods_not_arrived")


def replay(table, loop, horizon: float, autoscaling: bool = True):
    cl = small_cluster(autoscaling)
    sim = Simulation(compile_workload(table, cl), cl, seed=1, horizon_s=horizon)
    steps = []
    step = loop.step

    def counted(s, now):
        assert now <= horizon, "a loop stepped past the horizon"
        steps.append(now)
        step(s, now)

    loop.step = counted
    sim.run(loop)
    jobs, nodes = jobs_frame(sim), nodes_frame(sim)
    return summary_row(sim, jobs, nodes, {}).to_dicts()[0], sim, jobs, nodes, steps


@pytest.mark.parametrize("name", sorted(LOOPS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=workloads(), horizon=st.sampled_from([1.0, 59.0, 301.0, 900.0, 1800.0, 3 * 3600.0]),
       autoscaling=st.booleans())
def test_replay_stops_at_the_horizon_and_reports_the_rest(name, table, horizon, autoscaling):
    row, sim, jobs, nodes, steps = replay(table, LOOPS[name](), horizon, autoscaling)
    w = sim.w
    assert sim.now == horizon and sim.acct.last == horizon
    assert steps == sorted(steps) and len(steps) == len(set(steps))  # time moves forward, once per instant
    # every pod in exactly one reported state, consistent with the arrays
    assert sum(row[k] for k in STATES) == row["pods"] == w.n_pods
    arrived = w.submit <= horizon
    assert ((sim.pod_status == NOT_ARRIVED) == ~arrived).all()
    assert row["pods_refused"] == int((w.never_fits & arrived).sum())
    assert row["pods_pending"] == int((sim.pod_status == PENDING).sum())
    # nothing starts, ends or is billed after the horizon
    for times in (sim.pod_start, sim.pod_end, sim.job_started, sim.job_finished):
        assert not (times[np.isfinite(times)] > horizon).any()
    if nodes.height:
        assert nodes["removed_s"].max() <= horizon and nodes["requested_s"].max() <= horizon
    assert sim.acct.timeline.frame()["t_s"].max() <= horizon
    cap = float(sim.state.gpu_cap.sum()) * 1000 * horizon / MILLI_HOUR
    assert row["billed_accel_hours"] <= cap + 1e-9
    # what was still pending is reported: in the job table without a start, with a reason
    waiting = np.flatnonzero(np.isin(sim.pod_status, (PENDING, BOUND)))
    assert (sim.pod_reason[waiting] >= 0).all()
    not_started = set(jobs.filter(pl.col("start_s").is_null() & (pl.col("submit_s") <= horizon)
                                  & ~pl.col("refused"))["job_id"].to_list())
    # a job not started has every pod waiting (a started job's pod may wait again after an eviction)
    ids = list(w.job_id)
    assert all(np.isin(sim.pod_status[w.job_pods[ids.index(j)]], (PENDING, BOUND)).all() for j in not_started)
    running_jobs = set(w.job_id[w.job[np.flatnonzero(sim.pod_status == RUNNING)]])
    assert running_jobs.isdisjoint(not_started)
    done = jobs.filter(pl.col("finish_s").is_not_null())["job_id"].to_list()
    assert all((sim.pod_status[w.job_pods[list(w.job_id).index(j)]] == DONE).all() for j in done)


def test_what_never_finishes_is_reported_at_the_horizon():
    """A gang that can never start (its pool runs out of stock), a pod that runs to the end,
    one that asks for too much, one that arrives after the horizon: the replay stops on time
    and says which is which."""
    table = sc.trace(
        [{"job_id": "gang", "gpu_count": 8, "min_member": 3, "submit_s": 0.0} for _ in range(3)]
        + [{"job_id": "forever", "duration_s": None, "submit_s": 10.0},
           {"job_id": "huge", "gpu_count": 16, "submit_s": 20.0},
           {"job_id": "late", "submit_s": 10_000.0}])
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", stock=2, max_size=4)])
    for loop in (sc.separate(gang_mode="none"), sc.separate(gang_mode="coscheduling"), sc.merged()):
        row, sim = sc.run(table, cl, loop, horizon_s=7200.0)
        assert sim.now == 7200.0
        assert row["gangs_never_started"] == 1
        assert row["pods_refused"] == 1 and row["pods_not_arrived"] == 1 and row["pods_done"] == 0
        # the gang's three pods never run; "forever" runs unless gang members hold the nodes
        assert row["pods_pending"] + row["pods_bound_waiting"] + row["pods_running"] == 4
        assert row["pods_running"] <= 1
        assert row["pending_s_gang_wait"] + row["pending_s_shortage"] + row["pending_s_booting"] > 0
        jobs = jobs_frame(sim).sort("job_id")
        assert jobs.filter(pl.col("job_id") == "gang")["start_s"].to_list() == [None]
        assert jobs.filter(pl.col("job_id") == "forever")["finish_s"].to_list() == [None]


@pytest.mark.parametrize("horizon", [0, -5, "nan", "inf"])
def test_a_horizon_that_cannot_end_a_replay_is_refused(horizon, tmp_path):
    path = tmp_path / "t.parquet"
    write_trace(sc.trace([{}]), path, TraceMeta("test", "CC0-1.0", "trace start"))
    cfg = compose("config", [f"trace.path={path}", "loop=merged"])
    OmegaConf.set_struct(cfg, False)
    cfg.horizon_s = float(horizon)
    with pytest.raises(ConfigError, match=r"^horizon_s = .*: must be null or a number in \(0, "):
        build(cfg)


@pytest.mark.parametrize("loop", ["separate", "merged"])
def test_an_idle_cluster_does_not_step_every_scan_interval(loop):
    table = sc.trace([{"job_id": f"j{i}", "submit_s": 60.0 * i, "duration_s": 600.0} for i in range(4)])
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8")])
    steps = []
    lp = sc.separate() if loop == "separate" else sc.merged()
    step = lp.step
    lp.step = lambda s, now: (steps.append(now), step(s, now))
    sc.run(table, cl, lp, horizon_s=2 * 86400.0)
    assert len(steps) < 2000  # 4 pods, one node: a few hundred events, not 17,280 scans
