"""The scheduler framework: a profile built from YAML, a QueueSort plugin that orders the
queue, and each gang plugin's Permit / PostFilter (cases of scheduler-plugins Coscheduling's
TestPermit and TestPostFilter, docs/upstream-cases.md section 8)."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from harness.config import compose
from harness.scheduler import Scheduler
from harness.scheduler.filter import NodeResourcesFit
from harness.scheduler.gang import Atomic, Coscheduling, NoGang
from harness.scheduler.queue_sort import PrioritySort
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.workload import BOUND, PENDING, compile_workload
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
    assert type(sched.gang) is gang
    assert isinstance(sched.queue_sort, PrioritySort) and isinstance(sched.filter, NodeResourcesFit)
    assert sched.waits_for_capacity == (cfg.loop.name == "separate_sees")


def test_the_coscheduling_timeout_is_read_from_yaml():
    cfg = compose("config", ["loop.scheduler.gang.timeout_s=30"])
    assert instantiate(cfg.loop.scheduler).gang.timeout_s == 30.0


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
    assert sim.queued_jobs().tolist() == [first, 1 - first]
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


@pytest.mark.parametrize("gang", [NoGang(), Coscheduling(), Atomic()], ids=lambda g: type(g).__name__)
def test_permit_allows_a_gang_with_quorum(gang):
    """TestPermit `pods belong to a podGroup, and quorum satisfied`: Success, the gang starts."""
    sim, _ = gang_on(2, gang)
    assert (sim.pod_status == BOUND).sum() == 0 and sim.job_started[0] == 0.0


def test_coscheduling_permit_waits_then_releases_at_the_timeout():
    """TestPermit `pg that doesn't have quorum`: Wait; the wait ends after timeout_s, when every
    reserved member is released (Unreserve) and the gang backs off until capacity changes."""
    sim, sched = gang_on(1, Coscheduling(timeout_s=60))
    assert sim.pod_status.tolist() == [BOUND, PENDING]  # one member reserved, waiting
    sim.advance_to(59.0)
    assert sim.pod_status.tolist() == [BOUND, PENDING]
    sim.advance_to(60.0)
    assert sim.pod_status.tolist() == [PENDING, PENDING]
    assert sched.tried_at[0] == sim.state.version  # not retried before capacity changes


def test_no_gang_holds_its_reserved_members():
    sim, _ = gang_on(1, NoGang())
    sim.advance_to(3000.0)
    assert sim.pod_status.tolist() == [BOUND, PENDING]


def test_atomic_post_filter_rejects_the_whole_gang_at_once():
    """TestPostFilter `pod failed at filter phase, reject all pods`: the member that fitted is
    released in the same cycle (upstream Coscheduling does so when > 10% of minMember is
    missing; our Coscheduling waits for its timeout, a known difference)."""
    sim, sched = gang_on(1, Atomic())
    assert sim.pod_status.tolist() == [PENDING, PENDING]
    assert sim.state.gpu_used.sum() == 0 and sched.tried_at[0] == sim.state.version


def test_waits_for_capacity_pre_filter_reserves_nothing_until_the_gang_fits():
    sim, _ = gang_on(1, NoGang(), waits_for_capacity=True)
    assert sim.pod_status.tolist() == [PENDING, PENDING]
