"""Quiet time costs nothing: a loop with nothing it could change sleeps until the next event or
time threshold, and the results stay exactly those of stepping at every scan of its cadence.

Counted in loop steps, not timed (timings flake): a replay with a pod at t=0 and one 30 days
later steps a few dozen times, for every loop. Exactness: every replay gives bit-for-bit the
same metrics, timeline, jobs and nodes as with the quiet ticks stepped one by one.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.autoscalers.karpenter import KarpenterAutoscaler
from harness.cluster import Cluster
from harness.loops.separate import SeparateLoops
from harness.metrics import Timeline, jobs_frame, nodes_frame, summary_row
from harness.quiet import NO_TICKS, Cadence
from harness.scheduler import Scheduler
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc
from tests.test_invariants import LOOPS, small_cluster, workloads

DAY = 86400.0
LOOPS_BY_NAME = {
    "separate": lambda: sc.separate(),
    "separate_provreq": lambda: sc.separate(provisioning_request=True),
    "separate_karpenter": lambda: SeparateLoops(Scheduler(LeastAllocated()), KarpenterAutoscaler()),
    "merged": lambda: sc.merged(),
}


def idle_pool_cluster():
    """An idle min_size:1 GPU pool that can never shrink, beside an autoscaled one."""
    return sc.cluster([sc.node_type("h8"), {"name": "l4", "cpu_milli": 32000, "memory_mib": 128000, "gpus": 4,
                                            "gpu_model": "L4"}],
                      [sc.pool("l4", "l4", min_size=1, max_size=2, boot_s=60.0), sc.pool("h", "h8", boot_s=60.0)])


class TooManySteps(Exception):
    pass


def count_steps(loop, limit: int) -> list[float]:
    """Record the loop's steps; stop the replay past `limit` of them (old code: 260k per month)."""
    steps, step = [], loop.step

    def counted(sim, now):
        steps.append(now)
        if len(steps) > limit:
            raise TooManySteps(f"more than {limit} steps, the last at {now:.0f} s")
        step(sim, now)

    loop.step = counted
    return steps


@pytest.mark.parametrize("name", sorted(LOOPS_BY_NAME))
def test_a_month_of_quiet_costs_a_few_dozen_steps(name):
    # one pod at t=0 (on the idle pool's node: it runs an hour, the node stays low), one at
    # 30 days, 8 GPUs (a new node of the other pool: boots, runs, scales down at the end)
    table = sc.trace([{"job_id": "a", "submit_s": 0.0}, {"job_id": "b", "submit_s": 30 * DAY, "gpu_count": 8}])
    loop = LOOPS_BY_NAME[name]()
    steps = count_steps(loop, limit=40)
    row, sim = sc.run(table, idle_pool_cluster(), loop, horizon_s=31 * DAY)
    assert row["pods_done"] == 2 and row["nodes_provisioned"] == 2
    assert sim.nodes[1].removed_at < 31 * DAY  # the new node was scaled down: scans resumed for it
    assert len(steps) <= 40


@pytest.mark.parametrize("name", sorted(LOOPS_BY_NAME))
def test_a_pod_that_can_never_be_placed_keeps_no_scan_going(name):
    # the only pool that can hold it is at max_size, its node busy for the whole replay
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=1, max_size=1)])
    table = sc.trace([{"job_id": "a", "gpu_count": 8, "duration_s": None},
                      {"job_id": "b", "submit_s": 60.0, "gpu_count": 8}])
    loop = LOOPS_BY_NAME[name]()
    steps = count_steps(loop, limit=40)
    row, _ = sc.run(table, cl, loop, horizon_s=30 * DAY)
    assert row["pods_pending"] == 1 and len(steps) <= 40


def nominating_cluster():
    """PCIe nodes (cheapest) and NVLink nodes (none in stock): Karpenter, blind to NVLink
    claims, nominates a PCIe node for a pod that only an NVLink node can run."""
    return sc.cluster([sc.node_type("pcie8", nvlink_domains=4), sc.node_type("nvl8", nvlink_domains=1)],
                      [sc.pool("p", "pcie8", max_size=2, price_on_demand=5.0),
                       sc.pool("n", "nvl8", max_size=1, stock=0, price_on_demand=9.0)])


#: b asks more CPU than a: Karpenter's queue sorts by CPU, then memory, then creation time (no
#: GPU key), so the what-if packs b before a and a cannot move onto b's nominated node
NOMINATING_TRACE = [{"job_id": "a", "duration_s": 3600.0},
                    {"job_id": "b", "submit_s": 1800.0, "gpu_count": 8, "cpu_milli": 2000, "gpus_same_nvlink": True}]


@pytest.mark.parametrize(("requeue_s", "validation_s"), [(10.0, 15.0), (30.0, 0.0), (30.0, 15.0)])
def test_karpenter_renewing_nominations_for_a_pod_never_placed_stays_exact(requeue_s, validation_s):
    # requeue 10 s: each batch renews the PCIe node's nomination (20 s) before it runs out, so
    # the node is never a candidate and a day passes in a few steps; requeue 30 s: it runs out
    # between batches; without a validation delay the node is deleted and launched again and
    # again (stepped one by one); with Karpenter's 15 s the command meets the next batch's
    # nomination when re-validated and is dropped, so the node stays
    table = sc.trace(NOMINATING_TRACE)
    runs = []
    for quiet in (True, False):
        loop = SeparateLoops(Scheduler(LeastAllocated()),
                             KarpenterAutoscaler(requeue_s=requeue_s, validation_s=validation_s))
        if not quiet:
            loop.idle_ticks = lambda start, before: NO_TICKS
        steps = count_steps(loop, limit=10**6)
        row, sim = sc.run(table, nominating_cluster(), loop, horizon_s=DAY)
        runs.append((row, len(steps), sim.acct.timeline.frame()))
    (bulk, n_bulk, tl_bulk), (stepped, _, tl_stepped) = runs
    assert bulk["pods_pending"] == 1 and bits_of(bulk) == bits_of(stepped) and bits(tl_bulk) == bits(tl_stepped)
    if requeue_s == 10.0:
        assert bulk["nodes_provisioned"] == 2 and n_bulk <= 40
    elif validation_s == 0.0:
        assert bulk["nodes_provisioned"] > 100
    else:
        assert bulk["nodes_provisioned"] == 2


def bits_of(row: dict) -> dict:
    """A metrics row with its floats as bit patterns."""
    return {k: np.float64(v).view(np.int64) if isinstance(v, float) else v for k, v in row.items()}


#: test_invariants' loops, and Karpenter with a consolidateAfter (a clock of its own)
EXACT_LOOPS = {**LOOPS, "separate_karpenter_after": lambda: SeparateLoops(
    Scheduler(LeastAllocated()), KarpenterAutoscaler(consolidate_after_s=300.0, budget_nodes=1.0))}


def quiet_cluster(autoscaling: bool) -> Cluster:
    """test_invariants' small cluster, but a pool's stock runs out before its max_size
    (requests come back short: backoffs) and one node of the L4 pool can never go."""
    return small_cluster(autoscaling, stock=(2, 1), l4_kept=1, name="quiet")


def replay(table, loop, horizon_s: float, autoscaling: bool, quiet: bool, shortage: str = "error"):
    cl = quiet_cluster(autoscaling)
    cl.pools = [replace(pool, shortage=shortage) for pool in cl.pools]
    sim = Simulation(compile_workload(table, cl), cl, seed=1, horizon_s=horizon_s, timeline_interval_s=45.0)
    if not quiet:
        loop.idle_ticks = lambda start, before: NO_TICKS
    sim.run(loop)
    jobs, nodes = jobs_frame(sim), nodes_frame(sim)
    return summary_row(sim, jobs, nodes, {}), jobs, nodes, sim.acct.timeline.frame()


def bits(frame) -> list:
    """Every value of a frame, floats as their bit patterns (NaN equal to itself, -0.0 not 0.0)."""
    return [s.to_numpy().view(np.int64).tolist() if s.dtype.is_float() else s.to_list() for s in frame.iter_columns()]


@pytest.mark.parametrize("name", sorted(EXACT_LOOPS))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=workloads(), autoscaling=st.booleans(), horizon=st.sampled_from([3 * 3600.0, 6 * 3600.0 + 5.5]))
def test_quiet_ticks_in_bulk_give_exactly_the_results_of_stepping_each(name, table, autoscaling, horizon):
    bulk = replay(table, EXACT_LOOPS[name](), horizon, autoscaling, quiet=True)
    stepped = replay(table, EXACT_LOOPS[name](), horizon, autoscaling, quiet=False)
    for a, b in zip(bulk, stepped, strict=True):
        assert a.columns == b.columns and bits(a) == bits(b)


@pytest.mark.parametrize("name", sorted(EXACT_LOOPS))
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=workloads(), horizon=st.sampled_from([3 * 3600.0, 6 * 3600.0 + 5.5]))
def test_quiet_ticks_stay_exact_against_a_silent_provider(name, table, horizon):
    # phantoms boot forever: the autoscaler's provision timeout is a clock of its own
    bulk = replay(table, EXACT_LOOPS[name](), horizon, True, quiet=True, shortage="silent")
    stepped = replay(table, EXACT_LOOPS[name](), horizon, True, quiet=False, shortage="silent")
    for a, b in zip(bulk, stepped, strict=True):
        assert a.columns == b.columns and bits(a) == bits(b)


@pytest.mark.parametrize("grid", [True, False])
@pytest.mark.parametrize(("interval", "last"), [(10.0, 0.0), (0.1, 3.7), (7.3, 1e6 + 0.3)])
def test_a_cadence_passes_in_bulk_exactly_the_scans_it_would_step(grid, interval, last):
    # stepped: each scan runs at the due instant and sets the next; in bulk: `skip` hands the same
    # instants over, bit for bit, stops before a deadline clock, and leaves the same next scan
    stepped, bulk = Cadence(interval, grid), Cadence(interval, grid)
    stepped.ran(last)
    bulk.ran(last)
    deadline = last + 100.5 * interval
    instants = []
    while (t := stepped.due(stepped.next)) < deadline:
        instants.append(t)
        stepped.ran(t)
    ticks = bulk.skip(bulk.due(bulk.next), np.inf, [(deadline, 0.0)])
    assert ticks.tolist() == instants and len(instants) == 100 and bulk.next == stepped.next


def test_samples_of_a_quiet_stretch_are_taken_in_bulk_at_the_instants_of_one_by_one():
    # no autoscaling, no events for a day: one integration step, 50,824 samples 1.7 s apart
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=1, max_size=1)], autoscaling=False)
    table = sc.trace([{"job_id": "a", "submit_s": 3600.0, "duration_s": DAY}])
    sim = Simulation(compile_workload(table, cl), cl, seed=0, horizon_s=DAY, timeline_interval_s=1.7)
    sim.run(sc.separate())
    t, expected = 0.0, []
    while t <= DAY:
        expected.append(t)
        t += 1.7  # as one sample at a time adds the interval
    tl = sim.acct.timeline.frame()
    assert tl["t_s"].to_list() == expected
    used = np.asarray(expected) >= 3600.0
    assert tl["used_gpus"].to_list() == np.where(used, 1.0, 0.0).tolist()
    assert tl["pending_shortage"].to_list() == [0] * len(expected)


def test_bulk_steps_integrate_exactly_as_one_by_one():
    # a shared GPU: fractional rates, and many steps of uneven length
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=1, max_size=1)], autoscaling=False)
    table = sc.trace([{"job_id": "a", "gpu_milli": 333, "duration_s": None}])
    sims = [Simulation(compile_workload(table, cl), cl, seed=0, horizon_s=DAY, timeline_interval_s=60.0)
            for _ in range(2)]
    for sim in sims:
        loop = sc.separate()
        loop.attach(sim)
        sim.advance_to(0.0)
        loop.step(sim, 0.0)
    ticks = np.cumsum(np.random.default_rng(0).uniform(0.1, 30.0, 5000)) + 0.3
    sims[0].acct.advance_steps(ticks)
    for t in ticks.tolist():
        sims[1].acct.advance(t)
    a, b = (s.acct for s in sims)
    assert a.last == b.last and a.next_sample == b.next_sample
    assert a.totals == b.totals and a.pending_s == b.pending_s
    assert a.idle_by_model.tobytes() == b.idle_by_model.tobytes() and a.idle_by_model.any()
    assert bits(a.timeline.frame()) == bits(b.timeline.frame())


def test_a_streamed_timeline_keeps_its_row_groups_when_samples_come_in_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(Timeline, "ROW_GROUP", 4)
    tl = Timeline()
    path = tmp_path / "timeline.parquet"
    tl.stream_to(path)
    row = (8.0, 4.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.1, 0.2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 3.5)  # buffer 0, 7 pending reasons
    for t in range(3):
        tl.append((float(t), *row))
    tl.extend(np.arange(3.0, 10.0), row)  # a quiet stretch: one block of 7
    assert tl.held + len(tl.rows) < 4  # memory holds less than a row group
    for t in range(10, 12):
        tl.append((float(t), *row))
    tl.close()
    f = pq.ParquetFile(path)
    assert [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)] == [4, 4, 4]
    table = f.read()
    assert table.column("t_s").to_pylist() == [float(t) for t in range(12)]
    assert table.column("nodes_ready").to_pylist() == [1] * 12
