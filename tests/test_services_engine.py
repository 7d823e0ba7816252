"""Services inside the simulation: replica slots in the workload, the replica lifecycle
(create, ready after the cold start, delete in ReplicaSet's order), demand as the
simulation's truth, and the replica autoscaler as a loop beside any loop (`ReplicaLoop`)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config import compose
from harness.errors import ConfigError, LoopbenchError, TraceError
from harness.kueue.loop import KueueLoop
from harness.replay import build
from harness.scheduler.queue_sort import PrioritySort
from harness.services.loop import ReplicaLoop
from harness.services.replicaset import log2_age
from harness.services.workload import compile_services
from harness.status import BOUND, NOT_ARRIVED, PENDING, RUNNING
from harness.trace import SCHEMA
from harness.workload import compile_workload
from tests import scenarios as sc

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def one_node_cluster(autoscaled_pool: bool = False):
    """One ready 8-GPU node (pool r, min_size 1); optionally a pool b whose nodes boot 300 s."""
    pools = [sc.pool("r", "h8", min_size=1, max_size=1)]
    if autoscaled_pool:
        pools.append(sc.pool("b", "h8", boot_s=300.0, max_size=2))
    return sc.cluster([sc.node_type("h8")], pools, autoscaling=autoscaled_pool)


# ---- 1. replica slots in the workload ---------------------------------------------------------
def test_a_service_gets_max_replicas_single_pod_slots_that_never_arrive_from_the_trace():
    cl = one_node_cluster()
    pods = [{"submit_s": 10.0}, {"submit_s": 20.0, "gpu_count": 2}]
    services = sc.services([{"service": "a", "max_replicas": 3, "capacity_per_replica": 10.0, "priority": 7,
                             "queue": "q", "cpu_milli": 2000},
                            {"service": "b", "max_replicas": 2, "capacity_per_replica": 5.0, "gpu_count": 2}])
    demand = sc.demand({"b": [(0.0, 1.0), (60.0, 2.0)], "a": [(0.0, 3.0)]})
    table = sc.trace(pods)
    w = compile_services(table, services, demand, cl)
    plain = compile_workload(table, cl)
    assert w.n_pods == 2 + 5 and w.n_jobs == 2 + 5
    # the trace's pods keep their indices and arrays
    for name in ("cpu", "gpus", "submit", "duration", "never_fits"):
        assert np.array_equal(getattr(w, name)[:2], getattr(plain, name))
    svc = w.services
    assert list(w.job_id[svc.slots(0)]) == ["a/0", "a/1", "a/2"] and list(w.job_id[svc.slots(1)]) == ["b/0", "b/1"]
    assert (w.job_service[svc.slots(0)] == 0).all() and (w.job_service[svc.slots(1)] == 1).all()
    assert (w.job_service[np.isin(w.job_id, ["j0", "j1"])] == -1).all()
    a = svc.slots(0)
    assert (w.job_priority[a] == 7).all() and (w.job_queue[a] == "q").all() and (w.job_min_member[a] == 1).all()
    assert np.isinf(w.job_submit[a]).all() and np.isinf(w.duration[w.pods_of(a)]).all()
    assert len(np.unique(w.shape[w.pods_of(a)])) == 1  # one shape: one filter scan serves every slot
    assert np.array_equal(svc.demand_bounds, [0, 1, 3])  # per service, in time order
    assert np.array_equal(svc.demand_start, [0.0, 0.0, 60.0]) and np.array_equal(svc.demand_value, [3.0, 1.0, 2.0])
    assert np.array_equal(svc.gpus_per_replica, [1.0, 2.0])


def test_a_trace_without_services_compiles_as_before():
    w = compile_workload(sc.trace([{}, {"submit_s": 5.0}]), one_node_cluster())
    assert w.services is None and (w.job_service == -1).all()


def test_a_replica_no_node_type_can_hold_is_marked_never_fits():
    services = sc.services([{"service": "a", "max_replicas": 2, "capacity_per_replica": 1.0, "gpu_models": ["T4"]}])
    w = compile_services(SCHEMA.empty_table(), services, sc.demand({"a": [(0.0, 1.0)]}), one_node_cluster())
    assert w.never_fits.all()


def test_a_trace_job_named_like_a_replica_slot_is_refused():
    services = sc.services([{"service": "a", "max_replicas": 2, "capacity_per_replica": 1.0}])
    with pytest.raises(TraceError, match=r"job id 'a/1' is also a replica slot"):
        compile_services(sc.trace([{"job_id": "a/1"}]), services, sc.demand({"a": [(0.0, 1.0)]}),
                         one_node_cluster(), "t.parquet")


# ---- 2. the replica lifecycle -----------------------------------------------------------------
def hand_sim(cold_start_s: float = 100.0, windows=None, horizon_s: float = 3600.0):
    """Service a (max 6) on one ready node and a pool that boots in 300 s; the scheduler's queue
    order set, no loop: the test drives binds and time by hand."""
    sim = sc.service_sim([], [{"service": "a", "max_replicas": 6, "capacity_per_replica": 10.0,
                               "cold_start_s": cold_start_s}],
                         windows or {"a": [(0.0, 5.0), (600.0, 50.0)]}, one_node_cluster(True), horizon_s)
    sim.queue.order_by(PrioritySort())
    return sim


def pod_of(sim, k: int) -> int:
    return int(sim.w.job_pods[sim.replicasets.svc.slots(0)[k]][0])


def test_replicas_are_queued_by_when_they_were_created():
    """PrioritySort orders replicas by their creation time, read from the workload the services'
    engine keeps (it replaces the simulation's, so the queue must not keep the first one): a
    replica created at t=50 waits behind one created at t=10, both behind nothing else."""
    sim = hand_sim()
    sim.advance_to(10.0)
    sim.replicasets.create(0, 1)
    sim.advance_to(50.0)
    sim.replicasets.create(0, 1)
    first, second = (int(sim.w.job[pod_of(sim, k)]) for k in (0, 1))
    assert sim.queue.jobs().tolist() == [first, second]
    assert [key[1] for key, _ in sim.queue.entries] == [10.0, 50.0]


def test_created_replicas_arrive_now_and_are_ready_a_cold_start_after_they_run():
    sim = hand_sim()
    sim.advance_to(0.0)
    sim.replicasets.create(0, 2)
    p0, p1 = pod_of(sim, 0), pod_of(sim, 1)
    assert sim.replicasets.replicas[0] == 2 and (sim.pod_status[[p0, p1]] == PENDING).all()
    assert sim.w.job_submit[sim.w.job[p0]] == 0.0 and len(sim.queue) == 2
    sim.bind(p0, 0, np.array([0]))
    assert sim.pod_status[p0] == RUNNING and sim.replicasets.ready[0] == 0
    sim.advance_to(99.0)
    assert sim.replicasets.ready[0] == 0
    sim.advance_to(100.0)
    assert sim.replicasets.ready[0] == 1 and sim.replicasets.ready_at[sim.w.job[p0]] == 100.0
    assert sim.replicasets.acct.cold_starts[0] == 1


def test_deletion_follows_the_replicaset_order():
    """kubernetes pkg/controller/controller_utils.go ActivePodsWithRanks.Less (and
    pkg/controller/replicaset/replica_set_test.go TestGetPodsToDelete's cases): unassigned,
    then Pending, then not ready, then ready for less time first."""
    sim = hand_sim()
    sim.advance_to(0.0)
    sim.replicasets.create(0, 5)
    sim.bind(pod_of(sim, 0), 0, np.array([0]))  # ready at 100
    sim.advance_to(50.0)
    sim.bind(pod_of(sim, 1), 0, np.array([1]))  # ready at 150
    for t in (100.0, 150.0, 200.0):  # an event at a time, each at its instant
        sim.advance_to(t)
    assert sim.replicasets.ready_at[sim.replicasets.svc.slots(0)[:2]].tolist() == [100.0, 150.0]
    sim.bind(pod_of(sim, 2), 0, np.array([2]))  # running, ready at 300
    booting = int(sim.provision(1, 1, False)[0])
    sim.bind(pod_of(sim, 3), booting, np.array([0]))  # bound to a booting node: Pending, assigned
    assert sim.pod_status[pod_of(sim, 3)] == BOUND and sim.pod_status[pod_of(sim, 4)] == PENDING
    gone = []
    for _ in range(5):
        before = sim.replicasets.created.copy()
        sim.replicasets.delete(0, 1)
        gone.append(int(np.flatnonzero(before & ~sim.replicasets.created)[0]))
    slots = sim.replicasets.svc.slots(0).tolist()
    assert gone == [slots[4], slots[3], slots[2], slots[1], slots[0]]


def test_a_deleted_replica_frees_its_node_and_its_pending_readiness_is_void():
    sim = hand_sim()
    sim.advance_to(0.0)
    sim.replicasets.create(0, 1)
    p = pod_of(sim, 0)
    sim.bind(p, 0, np.array([0]))
    sim.advance_to(50.0)
    sim.replicasets.delete(0, 1)
    assert sim.pod_status[p] == NOT_ARRIVED and sim.state.gpu_free[0, 0] == 1000 and sim.replicasets.replicas[0] == 0
    assert not sim.queue and np.isnan(sim.job_started[sim.w.job[p]])
    assert sim.acct.preempted_lost == 0.0 and sim.acct.job_preemptions.sum() == 0  # not a preemption
    sim.advance_to(60.0)
    sim.replicasets.create(0, 1)  # the same slot again, a new replica
    assert sim.pod_status[p] == PENDING and sim.w.job_submit[sim.w.job[p]] == 60.0
    sim.bind(p, 0, np.array([3]))
    sim.advance_to(100.0)  # the first replica's readiness would have come now: void
    assert sim.replicasets.ready[0] == 0
    sim.advance_to(160.0)
    assert sim.replicasets.ready[0] == 1 and sim.replicasets.ready_at[sim.w.job[p]] == 160.0


def test_a_ready_replica_evicted_from_its_node_is_not_ready_any_more():
    sim = hand_sim(cold_start_s=0.0)
    sim.advance_to(0.0)
    sim.replicasets.create(0, 1)
    p = pod_of(sim, 0)
    sim.bind(p, 0, np.array([0]))
    sim.advance_to(1.0)
    assert sim.replicasets.ready[0] == 1
    sim.evict(np.array([p]))
    assert sim.replicasets.ready[0] == 0 and sim.pod_status[p] == PENDING and sim.replicasets.replicas[0] == 1


def test_log2_age_is_upstreams_logarithmic_rank():
    # int64(math.Log2(float64(d))) of a duration in ns: 50 s -> 35, 100 s -> 36; none -> -1
    assert log2_age(200.0, np.array([150.0, 100.0, 200.0, np.nan])).tolist() == [35, 36, -1, -1]


def test_demand_now_is_the_window_holding_now_and_loops_cannot_read_the_series():
    sim = hand_sim()
    sim.advance_to(0.0)
    assert sim.replicasets.demand_now().tolist() == [5.0]
    sim.advance_to(599.0)
    assert sim.replicasets.demand_now().tolist() == [5.0]
    sim.advance_to(600.0)
    assert sim.replicasets.demand_now().tolist() == [50.0]
    with pytest.raises(LoopbenchError, match="a service's demand"):
        sim.w.services.demand_value[1]
    with pytest.raises(LoopbenchError, match="a service's demand"):
        np.asarray(sim.w.services.demand_start)


# ---- 3. the replica autoscaler beside a loop ------------------------------------------------
@pytest.fixture(scope="module")
def service_trace(tmp_path_factory):
    """A trace of two pods and, beside it, one service with a burst: its three files."""
    from harness.services.trace import ServicesMeta, write_services
    from harness.trace import TraceMeta, write_trace

    d = tmp_path_factory.mktemp("svc")
    write_trace(sc.trace([{"submit_s": 0.0}, {"submit_s": 60.0}]), d / "t.parquet", TraceMeta("t", "CC0-1.0", "start"))
    write_services(sc.services([{"service": "chat", "max_replicas": 6, "capacity_per_replica": 100.0,
                                 "cold_start_s": 60.0, "gpu_models": ["L4"]}]),
                   sc.demand({"chat": [(0.0, 50.0), (600.0, 400.0), (1800.0, 50.0)]}), d / "t",
                   ServicesMeta("test", "CC0-1.0", "start", "tokens/s"))
    return d


def composed(d, *overrides):
    return compose("config", [f"trace.path={d / 't.parquet'}", f"+trace.services={d / 't.services.parquet'}",
                              f"+trace.demand={d / 't.demand.parquet'}", *overrides])


def test_a_trace_with_services_needs_a_replica_autoscaler(service_trace):
    with pytest.raises(ConfigError, match=r"replicas: .*has services: choose their replica autoscaler"):
        build(composed(service_trace))


def test_a_trace_naming_services_without_demand_is_refused(service_trace):
    cfg = compose("config", [f"trace.path={service_trace / 't.parquet'}",
                             f"+trace.services={service_trace / 't.services.parquet'}", "replicas=hpa"])
    with pytest.raises(ConfigError, match=r"trace.demand: is missing"):
        build(cfg)


def test_a_service_no_node_type_can_hold_is_refused_before_the_replay(tmp_path):
    """Replicas of T4 GPUs on the default cluster (H100 and L4 nodes): each would be refused as
    it is created, the demand left unserved to the horizon with nothing said. Refused up
    front instead, naming the services file, the service (and how many more), the replica's
    shape and the node types there are."""
    from harness.services.trace import ServicesMeta, write_services
    from harness.trace import TraceMeta, write_trace

    write_trace(sc.trace([{"submit_s": 0.0}]), tmp_path / "t.parquet", TraceMeta("t", "CC0-1.0", "start"))
    write_services(sc.services([{"service": "chat", "max_replicas": 2, "capacity_per_replica": 1.0, "gpu_count": 4,
                                 "gpu_models": ["T4"]},
                                {"service": "code", "max_replicas": 2, "capacity_per_replica": 1.0},
                                {"service": "batch", "max_replicas": 2, "capacity_per_replica": 1.0,
                                 "gpu_count": 64}]),
                   sc.demand({"chat": [(0.0, 1.0)], "code": [(0.0, 1.0)], "batch": [(0.0, 1.0)]}), tmp_path / "t",
                   ServicesMeta("test", "CC0-1.0", "start", "tokens/s"))
    with pytest.raises(TraceError) as err:
        build(composed(tmp_path, "replicas=hpa"))
    assert (err.value.file, err.value.column, err.value.row) == (str(tmp_path / "t.services.parquet"), "service", 0)
    assert err.value.rule == (
        "no node type of cluster 'default' can hold a replica of service 'chat' (4 GPUs of model T4, 1 cpu, "
        "1 GiB), so its demand could never be served (1 more service: 'batch'); node types: h100-nvl8 "
        "(8 x H100), h100-pcie8 (8 x H100), l4x4 (4 x L4)"), str(err.value)


@pytest.mark.parametrize("loop", ["separate_kueue", "merged_kueue"])
def test_services_behind_kueue_build_with_the_replica_autoscaler_outside(service_trace, loop):
    """The replica autoscaler wraps the KueueLoop: the replicas it creates meet Kueue's gate
    (tests/test_services_kueue.py has the goldens)."""
    _, built = build(composed(service_trace, "replicas=hpa", f"loop={loop}"))
    assert isinstance(built, ReplicaLoop) and isinstance(built.inner, KueueLoop) and built.name == loop


def test_a_replica_autoscaler_on_a_trace_without_services_is_refused(service_trace):
    """It would be ignored: refused instead, naming the key (replicas=none runs the pods)."""
    with pytest.raises(ConfigError, match=r"^replicas: trace .* has no services"):
        build(compose("config", [f"trace.path={service_trace / 't.parquet'}", "replicas=hpa"]))
    sim, loop = build(compose("config", [f"trace.path={service_trace / 't.parquet'}"]))
    assert sim.replicasets is None and type(loop).__name__ == "SeparateLoops"


@pytest.mark.parametrize("replicas", ["hpa", "keda"])
def test_the_replica_autoscaler_follows_the_burst_within_bounds(service_trace, replicas):
    sim, loop = build(composed(service_trace, f"replicas={replicas}", "horizon_s=3600"))
    seen = []
    step = loop.step

    def recorded(s, now):
        step(s, now)
        seen.append(int(sim.replicasets.replicas[0]))

    loop.step = recorded
    sim.run(loop)
    assert max(seen) == 6 and min(seen) >= 1  # 400/s needs ceil(400 / 70) = 6 > ... capped at max 6
    assert sim.replicasets.acct.cold_starts[0] >= 6
    assert sim.replicasets.replicas[0] == 1  # back down once the burst is over (300 s window, then 100% per 15 s)


def test_replay_writes_the_service_tables(service_trace, tmp_path):
    import polars as pl

    from harness.replay import Replay

    metrics = Replay().run(composed(service_trace, "replicas=hpa", "horizon_s=3600"), tmp_path, progress=False)
    assert metrics["replicas"][0] == "hpa (down 300 s)"  # the setting, as a report names it
    per = pl.read_parquet(tmp_path / "services.parquet")
    assert per["service"].to_list() == ["chat"]
    assert per["demand_units"][0] == metrics["demand_units"][0] == 50 * 600 + 400 * 1200 + 50 * 1800
    timeline = pl.read_parquet(tmp_path / "services_timeline.parquet")
    assert timeline.height == 61 and timeline["demand"][10] == 400.0  # a sample a minute, 0..3600 s
    # the trace's jobs and pods, not the service's six replica slots (services.parquet has those)
    assert pl.read_parquet(tmp_path / "jobs.parquet")["job_id"].to_list() == ["j0", "j1"]
    assert (metrics["jobs"][0], metrics["pods"][0], metrics["pods_not_arrived"][0]) == (2, 2, 0)


def test_the_wrapped_loops_quiet_ticks_stop_before_the_next_sync():
    """The sync cadence is a clock of the replica loop: quiet ticks of the wrapped loop pass in
    bulk only up to it (past it, a replay would skip a sync, or never move on)."""
    from harness.services.loop import ReplicaLoop
    from harness.services.replicas import HorizontalPodAutoscaler

    inner = sc.separate()
    inner.idle_ticks = lambda start, before: np.arange(start, before, 10.0)  # type: ignore[method-assign]
    hpa = HorizontalPodAutoscaler()
    hpa.attach(np.ones(1), np.ones(1, np.int64), np.ones(1, np.int64))
    hpa.sync(0.0, np.ones(1, np.int64), np.zeros(1))  # the next sync at 15
    ticks = ReplicaLoop(inner, hpa).idle_ticks(1.0, 100.0)
    assert ticks.tolist() == [1.0, 11.0]
