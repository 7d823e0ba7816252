"""The scheduler framework: a profile built from YAML, a QueueSort plugin that orders the
queue, and each gang plugin's Permit / PostFilter (cases of scheduler-plugins Coscheduling's
TestPermit and TestPostFilter, docs/upstream-cases.md section 8)."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from harness.config import compose
from harness.errors import ConfigError
from harness.scheduler import Scheduler
from harness.scheduler.bind import DefaultBinder
from harness.scheduler.capacity import WaitsForCapacity
from harness.scheduler.filter import NodeResourcesFit
from harness.scheduler.gang import Atomic, Coscheduling, NoGang
from harness.scheduler.preemption import DefaultPreemption
from harness.scheduler.queue_sort import PrioritySort
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.status import BOUND, PENDING, RUNNING
from harness.workload import compile_workload
from tests.scenarios import cluster, node_type, pool, trace

# ---- the profile in YAML ----------------------------------------------------------------------

@pytest.mark.parametrize("overrides, section, gang", [
    (["loop=separate"], "scheduler", Coscheduling),
    (["loop=separate_karpenter"], "scheduler", Coscheduling),
    (["loop=separate", "loop/scheduler/gang=none"], "scheduler", NoGang),
    (["loop=separate_sees", "loop/scheduler/gang=atomic"], "scheduler", Atomic),
    (["loop=merged"], "placer", Atomic),
])
def test_a_profile_builds_from_yaml(overrides, section, gang):
    cfg = compose("config", overrides)
    sched = instantiate(cfg.loop[section])
    assert isinstance(sched, Scheduler)
    assert type(sched.plugins["gang"]) is gang
    assert isinstance(sched.queue_sort, PrioritySort) and isinstance(sched.plugins["filter"], NodeResourcesFit)
    assert sched.waits_for_capacity == (cfg.loop.name == "separate_sees")


@pytest.mark.parametrize("gang, points", [
    (Coscheduling, ["PreFilter", "PostFilter", "Permit"]),
    (Atomic, ["PreEnqueue", "PostFilter"]),
    (NoGang, []),
])
def test_a_gang_plugin_registers_at_the_points_it_implements(gang, points):
    at = Scheduler(LeastAllocated(), gang=gang()).points()
    assert [point for point, plugins in at.items() if any(type(p) is gang for p in plugins)] == points
    assert [type(p) for p in at["Filter"]] == [NodeResourcesFit] and [type(p) for p in at["Bind"]] == [DefaultBinder]


def test_a_profile_lists_the_plugins_of_each_point_in_its_order():
    sched = instantiate(compose("config", ["loop=separate_preemption", "loop/scheduler/pre_filter=waits_for_capacity"])
                        .loop.scheduler)
    at = sched.points()
    assert [type(p) for p in at["PreFilter"]] == [Coscheduling, WaitsForCapacity]
    assert [type(p) for p in at["PostFilter"]] == [Coscheduling, DefaultPreemption]
    assert at["Score"] == at["Reserve"] == (sched.policy,) and sched.preempts and sched.waits_for_capacity


def test_a_value_that_is_no_plugin_is_refused():
    with pytest.raises(ConfigError, match=r"loop.scheduler.gang = 'yes': must be null or an instance of Plugin"):
        Scheduler(LeastAllocated(), gang="yes")


def test_the_coscheduling_timeout_is_read_from_yaml():
    cfg = compose("config", ["loop.scheduler.gang.timeout_s=30"])
    assert instantiate(cfg.loop.scheduler).plugins["gang"].timeout_s == 30.0


def test_the_coscheduling_reject_percentage_is_read_from_yaml():
    assert instantiate(compose("config", []).loop.scheduler).plugins["gang"].reject_percentage == 10  # upstream's default
    cfg = compose("config", ["loop.scheduler.gang.reject_percentage=30"])
    assert instantiate(cfg.loop.scheduler).plugins["gang"].reject_percentage == 30


@pytest.mark.parametrize("bad", [-1, 101, 2.5])
def test_a_reject_percentage_outside_0_to_100_is_refused(bad):
    with pytest.raises(ConfigError, match=rf"loop.scheduler.gang.reject_percentage = {bad}: must be an integer"):
        Coscheduling(reject_percentage=bad)


def test_the_pod_group_backoff_is_read_from_yaml_and_off_by_default():
    assert instantiate(compose("config", []).loop.scheduler).plugins["gang"].backoff_s == 0.0  # upstream's default
    cfg = compose("config", ["loop.scheduler.gang.backoff_s=10"])
    assert instantiate(cfg.loop.scheduler).plugins["gang"].backoff_s == 10.0
    with pytest.raises(ConfigError, match=r"loop.scheduler.gang.backoff_s = -1: must be a number >= 0"):
        Coscheduling(backoff_s=-1)


def test_an_unknown_gang_plugin_is_refused_with_the_options():
    from hydra.errors import MissingConfigException

    with pytest.raises(MissingConfigException, match=r"(?s)loop/scheduler/gang/strict.*atomic.*coscheduling.*none"):
        compose("config", ["loop/scheduler/gang=strict"])


# ---- QueueSort --------------------------------------------------------------------------------

class LastJobFirst:
    """A QueueSort plugin against PrioritySort's ties: the higher job index first."""

    def key(self, w, j):
        return (-j,)


def one_node(pods: list[dict], gpus: int = 8):
    """A fixed cluster of one 8-GPU node (no autoscaling) and a simulation of `pods` on it."""
    cl = cluster([node_type("g8")], [pool("p", "g8", min_size=1, max_size=1)], autoscaling=False)
    w = compile_workload(trace(pods), cl)
    return Simulation(w, cl, seed=0, horizon_s=3600.0)


@pytest.mark.parametrize("queue_sort, first", [(PrioritySort(), 0), (LastJobFirst(), 1)])
def test_the_queue_sort_plugin_orders_the_queue(queue_sort, first):
    sim = one_node([{"gpu_count": 8}, {"gpu_count": 8}])  # one fits, same priority and submission
    sched = Scheduler(LeastAllocated(), queue_sort=queue_sort)
    sched.attach(sim)
    sim.advance_to(0.0)
    assert sim.queue.jobs().tolist() == [first, 1 - first]
    sched.cycle(0.0)
    assert sim.pod_status.tolist()[first] != PENDING and sim.pod_status.tolist()[1 - first] == PENDING


# ---- gang plugins: Permit and PostFilter -------------------------------------------------------

GANG = {"gpu_count": 5, "job_id": "g", "min_member": 2}  # two members: one fits an 8-GPU node


def gang_on(nodes: int, gang, **kw):
    """A 2-pod gang (min_member 2) on `nodes` fixed 8-GPU nodes, after the first cycle at t=0."""
    cl = cluster([node_type("g8")], [pool(f"p{i}", "g8", min_size=1, max_size=1) for i in range(nodes)],
                 autoscaling=False)
    sim = Simulation(compile_workload(trace([GANG, GANG]), cl), cl, seed=0, horizon_s=3600.0)
    sched = Scheduler(LeastAllocated(), gang=gang, **kw)
    sched.attach(sim)
    sim.advance_to(0.0)
    sched.cycle(0.0)
    return sim, sched


@pytest.mark.parametrize("gang", [NoGang(), Atomic()], ids=lambda g: type(g).__name__)
def test_permit_allows_a_gang_with_quorum(gang):
    """As Coscheduling's TestPermit `pods belong to a podGroup, and quorum satisfied` (see
    tests/conformance/test_coscheduling.py): the other plugins start the gang too."""
    sim, _ = gang_on(2, gang)
    assert (sim.pod_status == BOUND).sum() == 0 and sim.job_started[0] == 0.0


def big_gang(nodes: int, lone_s: float | None = None):
    """A 10-pod gang (min_member 10) of one member per node on `nodes` 8-GPU nodes, after the
    cycle at t=0; `lone_s`: one more node, taken by a lone pod until then."""
    n = nodes + (lone_s is not None)
    cl = cluster([node_type("g8")], [pool(f"p{i}", "g8", min_size=1, max_size=1) for i in range(n)],
                 autoscaling=False)
    pods = [{**GANG, "min_member": 10} for _ in range(10)]
    if lone_s is not None:
        pods.insert(0, {"gpu_count": 5, "job_id": "a", "duration_s": lone_s})  # job 0, queued first
    sim = Simulation(compile_workload(trace(pods), cl), cl, seed=0, horizon_s=3600.0)
    sched = Scheduler(LeastAllocated(), gang=Coscheduling(timeout_s=60))
    sched.attach(sim)
    sim.advance_to(0.0)
    sched.cycle(0.0)
    return sim, sched, sim.w.job_pods[int(lone_s is not None)]


def test_coscheduling_permit_waits_then_releases_at_the_timeout():
    """PostFilter keeps waiting when the gap to quorum is at most 10 % of min_member (9 of
    10 assigned: upstream's `notAssignedPercentage <= 0.1`); Permit's wait then ends after
    timeout_s, when every reserved member is released (Unreserve) and the gang backs off
    until capacity changes. (Before the PostFilter rule, a 2-pod gang waited here; it is now
    released at once, tests/conformance/test_coscheduling.py.)"""
    sim, sched, pods = big_gang(9)
    assert (sim.pod_status[pods] == BOUND).sum() == 9  # nine members reserved, waiting
    sim.advance_to(59.0)
    assert (sim.pod_status[pods] == BOUND).sum() == 9
    sim.advance_to(60.0)
    assert (sim.pod_status[pods] == PENDING).all() and sim.state.gpu_used.sum() == 0
    assert sched.tried_at[0] == sim.state.version  # not retried before capacity changes


def test_coscheduling_post_filter_rejects_beyond_ten_percent():
    """8 of 10 assigned: the gap, 20 % of min_member, exceeds 10 %: released in the cycle."""
    sim, _, pods = big_gang(8)
    assert (sim.pod_status[pods] == PENDING).all() and sim.state.gpu_used.sum() == 0


def test_a_gang_bound_again_after_a_rejection_waits_its_own_timeout():
    """Released by PostFilter at t=0 (8 of 10), the gang binds 9 members when the lone pod's
    node frees at t=30 and waits from then: the timer armed at t=0 (due at 60) died with the
    rejection, the new one ends the wait at 30 + 60 = 90."""
    sim, sched, pods = big_gang(8, lone_s=30.0)
    assert (sim.pod_status[pods] == PENDING).all()
    sim.advance_to(30.0)
    sched.cycle(30.0)
    assert (sim.pod_status[pods] == BOUND).sum() == 9
    sim.advance_to(60.0)
    assert (sim.pod_status[pods] == BOUND).sum() == 9
    sim.advance_to(90.0)
    assert (sim.pod_status[pods] == PENDING).all()


def test_capacity_a_post_filter_frees_serves_the_rest_of_the_cycle():
    """The gang (queued first) binds one member, the other finds no node, PostFilter releases
    the first: the lone pod of the same shape behind it in the queue takes the node in the
    same cycle (the shape that failed before the release is tried again)."""
    cl = cluster([node_type("g8")], [pool("p0", "g8", min_size=1, max_size=1)], autoscaling=False)
    sim = Simulation(compile_workload(trace([GANG, GANG, {"gpu_count": 5, "job_id": "z"}]), cl), cl,
                     seed=0, horizon_s=3600.0)
    sched = Scheduler(LeastAllocated(), gang=Coscheduling())
    sched.attach(sim)
    sim.advance_to(0.0)
    sched.cycle(0.0)
    assert sim.pod_status.tolist() == [PENDING, PENDING, RUNNING]


def test_no_gang_holds_its_reserved_members():
    sim, _ = gang_on(1, NoGang())
    sim.advance_to(3000.0)
    assert sim.pod_status.tolist() == [BOUND, PENDING]


def test_atomic_post_filter_rejects_the_whole_gang_at_once():
    """Atomic rejects the whole gang before anything is reserved: the member that would fit
    holds nothing (Coscheduling releases it in the same cycle when > 10 % of min_member is
    missing: tests/conformance/test_coscheduling.py)."""
    sim, sched = gang_on(1, Atomic())
    assert sim.pod_status.tolist() == [PENDING, PENDING]
    assert sim.state.gpu_used.sum() == 0 and sched.tried_at[0] == sim.state.version


def test_waits_for_capacity_pre_filter_reserves_nothing_until_the_gang_fits():
    sim, _ = gang_on(1, NoGang(), pre_filter=WaitsForCapacity())
    assert sim.pod_status.tolist() == [PENDING, PENDING]
