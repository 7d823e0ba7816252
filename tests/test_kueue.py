"""Kueue admission in front of a loop (harness/kueue): golden replays with hand-computed
numbers, the bad-input errors, and quiet time staying exact.

The golden clusters are static (autoscaling off, two 8-GPU nodes) unless a case needs nodes
to boot, so every wait below is the admission layer's alone.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from harness.cluster import Cluster
from harness.config import compose
from harness.errors import ConfigError, LoopbenchError, TraceError
from harness.kueue.admission import Admission
from harness.kueue.inadmissible import never_admitted
from harness.kueue.loop import KueueLoop, admission_books
from harness.kueue.queues import MAX_QUOTA, parse_kueue
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.quiet import NO_TICKS
from harness.replay import build
from harness.sim import Simulation
from harness.status import PendingReason
from harness.trace import TraceMeta, write_trace
from harness.workload import compile_workload
from tests import scenarios as sc
from tests.test_invariants import workloads
from tests.test_quiet import bits, quiet_cluster

HOUR = 3600.0


def queue(name: str, gpu: float, cohort: str | None = None, strategy: str = "BestEffortFIFO",
          flavor: str = "f") -> dict:
    return {"name": name, "cohort": cohort, "queueing_strategy": strategy,
            "flavors": [{"name": flavor, "nominal": {"gpu": gpu, "cpu": 1000, "memory": 10000}}]}


def kueue(*queues: dict, pools=("a",)) -> dict:
    return {"resource_flavors": [{"name": "f", "pools": list(pools)}], "cluster_queues": list(queues),
            "local_queues": [{"name": q["name"], "cluster_queue": q["name"]} for q in queues]}


def static_cluster(section: dict, autoscaling: bool = False, boot_s: float = 300.0):
    return Cluster(node_types=[sc.node_type("h8")], autoscaling=autoscaling, name="golden",
                      pools=[sc.pool("a", "h8", boot_s=boot_s, max_size=2, min_size=0 if autoscaling else 2)],
                      kueue=section)


def job(name: str, q: str, gpus: int, submit_s: float, duration_s: float = HOUR) -> dict:
    return {"job_id": name, "queue": q, "gpu_count": gpus, "submit_s": submit_s, "duration_s": duration_s}


def admissible(table: pa.Table, cl: Cluster) -> pa.Table:
    """A drawn table without the jobs Kueue can never admit on `cl`: those are refused before the
    replay (harness/kueue/inadmissible.py), no longer left waiting to the horizon. A table of
    them alone is no example."""
    w = compile_workload(table, cl)
    never = w.job_id[never_admitted(admission_books(cl.kueue, cl, w), cl, w)]
    kept = table.filter(pc.invert(pc.is_in(table.column("job_id"), pa.array(never.tolist(), pa.string()))))
    assume(kept.num_rows > 0)
    return kept


def started(sim) -> dict[str, float]:
    return dict(zip(sim.w.job_id.tolist(), sim.job_started.tolist(), strict=True))


# ---- golden ----------------------------------------------------------------------------------
def test_golden_borrowing_in_a_cohort_holds_the_lenders_own_quota():
    """a and b own 4 GPUs each in cohort c. A1 (a, 6 GPUs, t=0) borrows 2 of b's and is
    admitted at once. B1 (b, 4 GPUs, t=10) is within b's nominal quota, but the cohort's 8 are
    drawn 6 + 4 = 10: it waits (no preemption reclaims) until A1 ends at 3600, although the
    nodes have room. By hand: starts 0 and 3600; admission waits a 0 s, b 3590 s; B1's one pod
    waits 3590 s not admitted."""
    cl = static_cluster(kueue(queue("a", 4, cohort="c"), queue("b", 4, cohort="c")))
    row, sim = sc.run(sc.trace([job("A1", "a", 6, 0.0), job("B1", "b", 4, 10.0)]), cl,
                      KueueLoop(sc.separate()), horizon_s=4 * HOUR)
    assert started(sim) == {"A1": 0.0, "B1": 3600.0}
    assert row["admission_wait_mean_s_a"] == 0.0 and row["admission_wait_mean_s_b"] == 3590.0
    assert row["pending_s_not_admitted"] == 3590.0


def test_a_job_whose_pods_arrive_apart_is_admitted_once_all_exist():
    """Gang G of two 2-GPU pods in queue a (8 GPUs): one at t=0, one at t=50. Kueue admits a
    job whole, so it takes G once both pods exist: admitted and started at 50. By hand:
    admission wait 50 - 0 = 50 s (from the job's submission, its first pod); the first pod
    waits 50 s not admitted, the second none."""
    cl = static_cluster(kueue(queue("a", 8)))
    pods = [{**job("G", "a", 2, t), "min_member": 2} for t in (0.0, 50.0)]
    row, sim = sc.run(sc.trace(pods), cl, KueueLoop(sc.separate()), horizon_s=HOUR)
    assert started(sim) == {"G": 50.0} and sim.job_admitted[0] == 50.0
    assert row["admission_wait_mean_s_a"] == 50.0 and row["pending_s_not_admitted"] == 50.0


def test_a_run_without_an_admission_layer_has_no_admission_columns():
    """The same trace and cluster without Kueue: no pod waits for admission, and the row keeps
    the columns it had before admission layers existed (published results stay comparable)."""
    cl = static_cluster(kueue(queue("a", 4, cohort="c"), queue("b", 4, cohort="c")))
    row, _ = sc.run(sc.trace([job("A1", "a", 6, 0.0), job("B1", "b", 4, 10.0)]), cl, sc.separate(),
                    horizon_s=4 * HOUR)
    assert not [k for k in row if "admi" in k] and row["pending_s_shortage"] == 0.0


@pytest.mark.parametrize("strategy, starts, mean_wait", [
    # J1 (4) does not fit beside J0 (6) in 8: StrictFIFO holds J2 (2) behind it until J0 ends
    # at 3600, when both go in (4 + 2 <= 8): waits 0, 3590, 3580, mean 7170 / 3 = 2390
    ("StrictFIFO", {"J0": 0.0, "J1": 3600.0, "J2": 3600.0}, 2390.0),
    # BestEffortFIFO sets J1 aside and admits J2 at 20; J1 returns when J0's quota does, at
    # 3600 (2 + 4 <= 8): waits 0, 3590, 0, mean 3590 / 3
    ("BestEffortFIFO", {"J0": 0.0, "J1": 3600.0, "J2": 20.0}, 3590.0 / 3),
])
def test_golden_strict_fifo_head_blocks_where_best_effort_fifo_goes_on(strategy, starts, mean_wait):
    cl = static_cluster(kueue(queue("q", 8, strategy=strategy)))
    trace = sc.trace([job("J0", "q", 6, 0.0), job("J1", "q", 4, 10.0), job("J2", "q", 2, 20.0)])
    row, sim = sc.run(trace, cl, KueueLoop(sc.separate()), horizon_s=3 * HOUR)
    assert started(sim) == starts
    assert row["admission_wait_mean_s_q"] == pytest.approx(mean_wait, abs=1e-9)


def test_golden_wait_for_pods_ready_requeues_with_doubling_backoff():
    """One 8-GPU job on an empty autoscaled pool whose node boots in 800 s; waitForPodsReady
    with upstream's timeout 300 s and backoff base 60 s. Admitted at 0 (the autoscaler asks for
    the node at 0, ready at 800); not started at 300: evicted, requeued after 60 s (360);
    admitted at 360, not started at 660: evicted, requeued after 120 s (780); admitted at 780,
    starts at 800 when the node is ready, ends at 4400. Not admitted: 300-360 and 660-780 =
    180 s; the first admission was at 0 (wait 0)."""
    cl = static_cluster(kueue(queue("q", 8)), autoscaling=True, boot_s=800.0)
    loop = KueueLoop(sc.separate(), wait_for_pods_ready=True)
    row, sim = sc.run(sc.trace([job("J", "q", 8, 0.0)]), cl, loop, horizon_s=2 * HOUR)
    assert started(sim) == {"J": 800.0} and sim.job_finished[0] == 4400.0
    assert loop.evictions.tolist() == [2]
    assert row["pending_s_not_admitted"] == 180.0 and row["admission_wait_mean_s_q"] == 0.0
    assert row["nodes_provisioned"] == 1


@pytest.mark.parametrize("block, starts", [
    # blockAdmission: one not-ready job at a time. J1 admitted 10, evicted 310 (back at 370);
    # J2 (waiting since 20) admitted 310, evicted 610 (back 670); then they alternate, each
    # admitted when the other is evicted, the backoffs doubling (60, 120, 240, 480, 960):
    # J1 in at 610, 1210, 1810, 2590 (back at 2590, after J2's eviction at 2410), out at 2890
    # (back at 3850); J2 in at 910, 1510, 2110, 2890, out at 3190 (back at 4150). J0 frees
    # the nodes at 3600 while both wait out their backoff: J1 starts 3850, J2 4150
    (True, {"J0": 0.0, "J1": 3850.0, "J2": 4150.0}),
    # without it both are admitted at once, evicted together (310/320, 670/680, 1090/1100,
    # 1630/1640, 2410/2420) and back at 3370/3380: bound when J0 ends, at 3600
    (False, {"J0": 0.0, "J1": 3600.0, "J2": 3600.0}),
])
def test_golden_block_admission_admits_one_not_ready_job_at_a_time(block, starts):
    """A static cluster of 2 x 8 GPUs, full with J0 (two 8-GPU pods) until 3600; J1 and J2 (8
    GPUs each, t=10 and 20) fit the queue's 32 GPUs of quota but no node: each admission
    times out (waitForPodsReady, 300 s) until J0 ends."""
    cl = static_cluster(kueue(queue("q", 32)))
    j0 = [{**job("J0", "q", 8, 0.0), "min_member": 2}] * 2
    loop = KueueLoop(sc.separate(), wait_for_pods_ready=True, block_admission=block)
    _, sim = sc.run(sc.trace([*j0, job("J1", "q", 8, 10.0), job("J2", "q", 8, 20.0)]), cl, loop, horizon_s=2 * HOUR)
    assert started(sim) == starts
    assert loop.evictions.tolist() == [0, 5, 5]


def test_wait_for_pods_ready_deactivates_past_the_retry_limit():
    """backoffLimitCount 1: the second eviction (at 660) deactivates the job for good."""
    cl = static_cluster(kueue(queue("q", 8)), autoscaling=True, boot_s=800.0)
    loop = KueueLoop(sc.separate(), wait_for_pods_ready=True, backoff_limit_count=1)
    row, sim = sc.run(sc.trace([job("J", "q", 8, 0.0)]), cl, loop, horizon_s=2 * HOUR)
    assert math.isnan(sim.job_started[0]) and loop.evictions.tolist() == [2]
    assert sim.pod_reason[0] == PendingReason.NOT_ADMITTED
    assert row["pending_s_not_admitted"] == 60.0 + (2 * HOUR - 660.0)


def test_a_gang_is_admitted_whole():
    """A gang of 3 pods x 4 GPUs asks 12 GPUs of a queue owning 8 in a cohort whose other 8 J
    holds (8 GPUs of r, t=0, for 2 h): none of its pods is admitted (Kueue admits a
    workload whole), though 2 of them would fit the free node."""
    gang = [{"job_id": "g", "queue": "q", "min_member": 3, "gpu_count": 4, "submit_s": 10.0} for _ in range(3)]
    cl = static_cluster(kueue(queue("q", 8, cohort="c"), queue("r", 8, cohort="c")))
    row, sim = sc.run(sc.trace([job("J", "r", 8, 0.0, 2 * HOUR), *gang]), cl, KueueLoop(sc.separate()), horizon_s=HOUR)
    assert row["pods_pending"] == 3 and row["jobs_not_admitted_q"] == 1
    assert (sim.pod_reason[sim.w.job_pods[1]] == PendingReason.NOT_ADMITTED).all()


def test_a_resource_a_flavor_does_not_list_is_not_borrowed_from_the_cohort():
    """x lists cpu only on flavor f; y lends 8 GPUs of f in the same cohort; a GPU job of x
    cannot use f (Kueue: "cannot borrow resource not listed in clusterQueue")."""
    section = kueue(queue("x", 0, cohort="c"), queue("y", 8, cohort="c"))
    section["cluster_queues"][0]["flavors"][0]["nominal"] = {"cpu": 10}
    k = parse_kueue(section, ["a"])
    adm = Admission(k, np.array([[1000.0, 0, 0]]), np.ones((1, 1), bool), np.array([0]), np.zeros(1, np.int64))
    assert adm.assign(0) == (-1, False)


# ---- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize("edit, where, rule", [
    (lambda k: k.pop("local_queues"), "cluster.kueue", "missing required key 'local_queues'"),
    (lambda k: k["resource_flavors"][0].update(pools=["zz"]), "cluster.kueue.resource_flavors[0].pools",
     "unknown pool 'zz'"),
    (lambda k: k["cluster_queues"][0].update(queueing_strategy="FIFO"),
     "cluster.kueue.cluster_queues[0].queueing_strategy", "must be one of BestEffortFIFO, StrictFIFO"),
    (lambda k: k["cluster_queues"][0]["flavors"][0].update(name="g"),
     "cluster.kueue.cluster_queues[0].flavors[0].name", "unknown flavor 'g'"),
    (lambda k: k["cluster_queues"][0]["flavors"][0]["nominal"].update(gpu=-1),
     "cluster.kueue.cluster_queues[0].flavors[0].nominal.gpu", "must be a number >= 0"),
    (lambda k: k["cluster_queues"][0]["flavors"][0]["nominal"].update(tpu=1),
     "cluster.kueue.cluster_queues[0].flavors[0].nominal", "unknown key 'tpu'"),
    (lambda k: k["local_queues"][0].update(cluster_queue="nope"), "cluster.kueue.local_queues[0].cluster_queue",
     "unknown ClusterQueue 'nope'"),
    (lambda k: k["cluster_queues"].append(k["cluster_queues"][0]), "cluster.kueue.cluster_queues",
     "ClusterQueue names must be unique, got 'q' twice"),
])
def test_a_bad_kueue_section_is_refused_by_key(edit, where, rule):
    section = kueue(queue("q", 8))
    edit(section)
    with pytest.raises(ConfigError) as err:
        static_cluster(section)
    assert err.value.where == where and rule in err.value.rule


def test_quotas_at_their_maximum_stay_finite_and_admit():
    """Every quota and limit at MAX_QUOTA, in a cohort: scaled and summed over it they stay
    finite (1e308 became inf, then NaN, and admitted nothing), so both jobs start at once."""
    section = kueue(queue("a", MAX_QUOTA, cohort="c"), queue("b", MAX_QUOTA, cohort="c"))
    for q in section["cluster_queues"]:
        q["flavors"][0]["nominal"] = dict.fromkeys(("gpu", "cpu", "memory"), MAX_QUOTA)
        q["flavors"][0]["borrowing_limit"] = q["flavors"][0]["lending_limit"] = {"gpu": MAX_QUOTA}
    cl = static_cluster(section)
    assert np.isfinite(cl.kueue.nominal).all()
    _, sim = sc.run(sc.trace([job("A1", "a", 8, 0.0), job("B1", "b", 8, 10.0)]), cl, KueueLoop(sc.separate()),
                    horizon_s=HOUR)
    assert started(sim) == {"A1": 0.0, "B1": 10.0}


def test_a_kueue_loop_on_a_cluster_without_queues_is_refused():
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("a", "h8")])
    with pytest.raises(ConfigError, match="cluster.kueue: loop 'separate_kueue' admits through Kueue"):
        sc.run(sc.trace([job("J", "q", 1, 0.0)]), cl, KueueLoop(sc.separate()), horizon_s=HOUR)


def test_a_trace_queue_without_a_local_queue_is_refused_naming_queue_trace_and_cluster(tmp_path):
    path = tmp_path / "finance.parquet"
    write_trace(sc.trace([job("J", "research", 1, 0.0), job("K", "finance", 1, 5.0)]), path,
                TraceMeta("kueue", "CC0-1.0", "trace start"))
    with pytest.raises(TraceError) as err:
        build(compose("config", [f"trace.path={path}", "loop=separate_kueue"]))
    assert str(err.value) == (f"{path}, column 'queue': queue 'finance' has no LocalQueue in cluster 'default' "
                              "(its kueue.local_queues): Kueue cannot admit its jobs")
    with pytest.raises(LoopbenchError, match="queue 'finance' of the trace has no LocalQueue"):
        sim, loop = build(compose("config", [f"trace.path={path}", "loop=separate"]))  # not Kueue's: no check
        KueueLoop(sc.separate()).attach(sim)


def test_the_two_tenant_scenario_gives_each_tenant_its_queue_and_prod_reclaims_what_it_lent():
    """trace=two_tenants cluster=two_tenants builds behind Kueue: the trace's two queues are
    LocalQueues of two ClusterQueues in one cohort, and only prod preempts (reclaims)."""
    sim, loop = build(compose("config", ["trace=two_tenants", "cluster=two_tenants", "loop=separate_kueue"]))
    k = sim.cluster.kueue
    assert set(np.unique(sim.w.job_queue).tolist()) == set(k.local_queues) == {"prod", "research"}
    assert [(cq.name, cq.cohort, cq.preemption.reclaim_within_cohort) for cq in k.cluster_queues] == [
        ("prod", "shared", "LowerPriority"), ("research", "shared", "Never")]


# ---- quiet time ------------------------------------------------------------------------------
def replay_behind_kueue(table, ready: bool, autoscaling: bool, quiet: bool):
    """test_quiet's replay, the cluster with one small queue (4 GPUs) so that jobs wait."""
    cl = quiet_cluster(autoscaling)
    names = [p.name for p in cl.pools]
    cl.kueue = parse_kueue(kueue(queue("default", 4), pools=names), names)
    sim = Simulation(compile_workload(admissible(table, cl), cl), cl, seed=1, horizon_s=6 * HOUR,
                     timeline_interval_s=45.0)
    loop = KueueLoop(sc.separate(), wait_for_pods_ready=ready)
    if not quiet:
        loop.idle_ticks = lambda start, before: NO_TICKS  # type: ignore[method-assign]
    sim.run(loop)
    jobs, nodes = jobs_frame(sim), nodes_frame(sim)
    return summary_row(sim, jobs, nodes, {}), jobs, nodes, sim.acct.timeline.frame()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=workloads(), autoscaling=st.booleans(), ready=st.booleans())
def test_quiet_ticks_in_bulk_stay_exact_behind_kueue(table, autoscaling, ready):
    """waitForPodsReady's timeout and backoff are events of the simulation: bulk = stepped."""
    bulk, stepped = (replay_behind_kueue(table, ready, autoscaling, quiet) for quiet in (True, False))
    for a, b in zip(bulk, stepped, strict=True):
        assert a.columns == b.columns and bits(a) == bits(b)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=workloads(), autoscaling=st.booleans(), ready=st.booleans())
def test_only_admitted_jobs_are_bound_and_the_books_add_up(table, autoscaling, ready):
    """Whatever the workload: a pod is bound only while its job holds quota (checked at every
    bind), and at the end each queue's usage is exactly what its admitted, unfinished jobs ask."""
    cl = quiet_cluster(autoscaling)
    names = [p.name for p in cl.pools]
    cl.kueue = parse_kueue(kueue(queue("default", 4), pools=names), names)
    sim = Simulation(compile_workload(admissible(table, cl), cl), cl, seed=1, horizon_s=6 * HOUR)
    loop = KueueLoop(sc.separate(), wait_for_pods_ready=ready)
    run_admitted_only(sim, loop)
    assert_books_add_up(loop)
    assert (loop.adm.usage[..., 0] <= 4000 + 1e-6).all()  # never above the 4 GPUs of quota


def run_admitted_only(sim: Simulation, loop: KueueLoop) -> None:
    """Replay, failing at the bind of any pod whose job holds no quota."""
    bind = sim.bind

    def guarded(p, n, gpu_idx, on_state=False):
        assert loop.adm.flavor[sim.w.job[p]] >= 0, f"pod {p} bound while its job holds no quota"
        bind(p, n, gpu_idx, on_state)

    sim.bind = guarded  # type: ignore[method-assign]
    sim.run(loop)


def assert_books_add_up(loop: KueueLoop) -> None:
    """Each queue's usage is exactly what its admitted, unfinished jobs ask."""
    holding = loop.adm.flavor >= 0
    assert set(np.flatnonzero(holding).tolist()) == set(loop.active.tolist())
    expected = np.zeros_like(loop.adm.usage)
    np.add.at(expected, (loop.adm.queue_of[holding], loop.adm.flavor[holding]), loop.adm.request[holding])
    np.testing.assert_allclose(loop.adm.usage, expected, atol=1e-6)
