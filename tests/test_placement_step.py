"""The compiled placement step (harness/scheduler/placement_step.py) chooses what the framework's
Python path chooses: the same node AND the same next walk start, on random states reached
through the real bind / release paths (with and without DRA claims), random pods of every kind,
random usable masks and rack restrictions (a local gang's group), node orders with ties, score
ties (identical empty nodes), pods that fit nowhere, and k below, at and above the number of
ready nodes (the walk stopping early, wrapping round, or every node checked). The Python path
is the reference: `Scheduler.choose(p, Scheduler.filter(...))`, as `select` runs it for a
profile the step does not cover. And the Scheduler takes the step only for profiles of
built-in plugins it computes."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cluster import Cluster
from harness.filters import feasible, pick_devices
from harness.scheduler import framework
from harness.scheduler.framework import Scheduler
from harness.scheduler.placement_step import PlacementStep
from harness.scores import FGD, BalancedAllocation, LeastAllocated, MostAllocated, RandomScore, ScorePlugin, WeightedSum
from harness.state import ClusterState
from harness.status import ABSENT, BOOTING
from tests import scenarios as sc
from tests.test_filters import CLUSTER, KINDS, pod_dicts, workload

SMALL = {"cpu_milli": 24000, "memory_mib": 96000}
#: test_filters' node types (GPU count, model, NVLink / NUMA layouts, NIC, partitions) as a DRA cluster
DRA_CLUSTER = Cluster(
    node_types=[
        sc.node_type("a8", nvlink_domains=2, numa_domains=4, nic_per_gpu=True, partition_profiles=["1g", "3g"]),
        sc.node_type("b8", nvlink_domains=4, numa_domains=2, partition_profiles=["3g"], **SMALL),
        {"name": "l4x4", **SMALL, "gpus": 4, "gpu_model": "L4", "numa_domains": 2, "nic_per_gpu": True},
        {"name": "a2", **SMALL, "gpus": 2, "gpu_model": "A100", "partition_profiles": ["1g"]},
        {"name": "cpu", "cpu_milli": 16000, "memory_mib": 64000}],
    pools=[sc.pool(name, name, max_size=4, nodes_per_rack=2, price_on_demand=1.0 + i)
           for i, name in enumerate(["a8", "b8", "l4x4", "a2", "cpu"])],
    partition_profiles={"1g": 143, "3g": 429}, name="filters-dra", dra={})


def policies():
    """kube_default, the single strategies (alone: unweighted), bin_packing's GPU weight, a
    weighted sum whose float sum is not an integer, and one whose BalancedAllocation some pods
    request none of the resources of."""
    return st.sampled_from([
        lambda: WeightedSum([LeastAllocated(1.0, {"cpu": 1, "memory": 1}),
                             BalancedAllocation(1.0, {"cpu": 1, "memory": 1})]),
        lambda: LeastAllocated(),
        lambda: MostAllocated(1.0, {"cpu": 1, "memory": 1, "nvidia.com/gpu": 3}),
        lambda: BalancedAllocation(1.0, {"cpu": 1, "nvidia.com/gpu": 1, "memory": 1}),
        lambda: WeightedSum([MostAllocated(0.03, {"cpu": 1, "memory": 1, "nvidia.com/gpu": 1}),
                             BalancedAllocation(2.5, {"memory": 1, "cpu": 1}), LeastAllocated(0.7)]),
        # a BalancedAllocation a pod without GPUs requests none of the resources of (it scores 0)
        lambda: WeightedSum([LeastAllocated(1.0, {"cpu": 1, "memory": 1}), BalancedAllocation(1.0, {"nvidia.com/gpu": 1})]),
    ])


@st.composite
def states(draw, cl: Cluster):
    """Nodes added (ready or booting), pods bound on random feasible nodes with the devices the
    filter's `pick_devices` gives (claims allocated in a DRA cluster), some released again."""
    state = ClusterState(cl)
    for n in draw(st.sets(st.integers(0, state.n_slots - 1), min_size=1, max_size=state.n_slots)):
        state.add_node(n, ready=draw(st.integers(0, 3)) > 0)
    w = workload(cl, draw(st.lists(pod_dicts(), min_size=1, max_size=30)))
    present = state.status != ABSENT
    bound = []
    for p in range(w.n_pods):
        for _ in range(draw(st.integers(0, 3))):
            cand = np.flatnonzero(feasible(state, w, p, present))
            if len(cand):
                n = int(cand[draw(st.integers(0, len(cand) - 1))])
                g = pick_devices(state, w, p, n)
                state.bind(n, int(w.cpu[p]), int(w.mem[p]), g, int(w.milli[p]))
                bound.append((n, int(w.cpu[p]), int(w.mem[p]), g, int(w.milli[p])))
    for i in sorted(draw(st.sets(st.integers(0, max(len(bound) - 1, 0)), max_size=len(bound) // 2)), reverse=True):
        state.release(*bound.pop(i))
    return state


class Sim:
    """What `Scheduler.select` and `choose` read of the simulation."""

    def __init__(self, state, w, node_rank):
        self.state, self.w, self.node_rank = state, w, node_rank
        self.rng = np.random.default_rng(0)


def both_paths(sched: Scheduler, p: int, allowed: np.ndarray, start: int) -> tuple[tuple, tuple]:
    """(node, next start) by the compiled step and by the Python path, from the same start."""
    step = sched.step
    sched.next_start = start
    fused = sched.select(p, allowed), sched.next_start
    sched.step, sched.next_start = None, start
    python = sched.select(p, allowed), sched.next_start
    sched.step = step
    return fused, python


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_paths(cl: Cluster, data) -> None:
    state = data.draw(states(cl))
    policy = data.draw(policies())()
    sched = Scheduler(policy=policy)
    assert sched.step is not None
    n = state.n_slots
    node_rank = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), np.int64)  # ties
    pods = [data.draw(pod_dicts(kind)) for kind in KINDS] + data.draw(st.lists(pod_dicts(), max_size=3))
    w = workload(cl, pods)
    sched.sim = Sim(state, w, node_rank)  # type: ignore[assignment]
    sched.order_key = -1
    ready = np.flatnonzero(state.ready)
    for p in range(w.n_pods):
        usable = state.ready & np.array(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), bool)
        if data.draw(st.booleans()):  # WaitsForCapacity's trial: booting nodes usable too
            usable |= state.status == BOOTING
        if data.draw(st.booleans()):  # a local gang's members keep to one rack
            usable &= state.slot_rack == data.draw(st.integers(0, int(state.slot_rack.max())))
        k = data.draw(st.integers(1, len(ready) + 2))
        start = data.draw(st.integers(0, max(len(ready) - 1, 0)))
        with mock.patch.object(framework, "num_feasible_nodes_to_find", lambda _pct, _n, k=k: k):
            fused, python = both_paths(sched, p, usable, start)
        assert fused == python, (pods[p], k, start, fused, python)


@SETTINGS
@given(data=st.data())
def test_step_chooses_as_the_python_path(data):
    check_paths(CLUSTER, data)


@SETTINGS
@given(data=st.data())
def test_step_chooses_as_the_python_path_with_claims(data):
    check_paths(DRA_CLUSTER, data)


class Custom(ScorePlugin):
    def score(self, state, w, pod, nodes, rng):
        return np.zeros(len(nodes))


class MyLeast(LeastAllocated):
    """A subclass may score otherwise: not covered."""


def test_only_built_in_profiles_take_the_step():
    """Covered: the resource-allocation scorers alone or in one WeightedSum, with NodeResourcesFit.
    Not covered: FGD, random, a user's plugin, a subclass, a nested WeightedSum, another Filter."""
    assert Scheduler(policy=LeastAllocated()).step is not None
    assert Scheduler(policy=WeightedSum([MostAllocated(0.5), BalancedAllocation()])).step is not None
    for policy in (FGD(), RandomScore(), Custom(), MyLeast(), WeightedSum([LeastAllocated(), FGD()]),
                   WeightedSum([WeightedSum([LeastAllocated()])])):
        assert Scheduler(policy=policy).step is None, policy
    from harness.scheduler.filter import NodeResourcesFit

    class MyFit(NodeResourcesFit):
        pass
    assert Scheduler(policy=LeastAllocated(), filter=MyFit()).step is None
    assert PlacementStep.covering((NodeResourcesFit(),), ()) is None


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_ready_order_is_the_ready_nodes_sorted_by_node_rank(data):
    """`Scheduler.ready_order` (every slot sorted by rank once per node order, kept where ready)
    is the ready nodes sorted by the seeded node order, ties by slot, after nodes come up and
    after a new node order."""
    sched = Scheduler(policy=LeastAllocated())
    state = ClusterState(CLUSTER)
    n = state.n_slots
    for _ in range(3):
        if data.draw(st.booleans()):
            node_rank = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), np.int64)
            sched.sim = Sim(state, None, node_rank)  # type: ignore[assignment]
            sched.order_key, sched.next_start = -1, 0  # a new node order (as `attach`)
        elif not hasattr(sched, "sim"):
            continue
        for slot in data.draw(st.sets(st.integers(0, n - 1), max_size=n)):
            if state.status[slot] == ABSENT:
                state.add_node(slot, ready=data.draw(st.booleans()))
        ready = np.flatnonzero(state.ready)
        rank = sched.sim.node_rank
        assert sched.ready_order().tolist() == ready[np.argsort(rank[ready], kind="stable")].tolist()


@settings(max_examples=100, deadline=None)
@given(policy=policies(), pods=st.lists(st.tuples(st.sampled_from([0, 1000]), st.sampled_from([0, 1024]),
                                                  st.sampled_from([0, 1])), min_size=1, max_size=8))
def test_the_terms_scoring_zero_are_those_the_pod_requests_nothing_of(policy, pods):
    """`PlacementStep.silent_terms`, remembered by whether a pod asks CPU, memory and GPUs, is
    each term's `requests_any` asked afresh, pod after pod."""
    sched = Scheduler(policy=policy())
    w = workload(CLUSTER, [{"cpu_milli": c, "memory_mib": m, "gpu_count": g, "gpu_milli": 1000 * g}
                           for c, m, g in pods])
    for p in range(w.n_pods):
        fresh = [isinstance(t, BalancedAllocation) and not t.requests_any(w, p) for t in sched.step.terms]
        assert sched.step.silent_terms(w, p).tolist() == fresh


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), cl=st.sampled_from([CLUSTER, DRA_CLUSTER]))
def test_arguments_made_once_per_shape_follow_the_state(data, cl):
    """One step places pod after pod, each bound where it went before the next is placed (the
    state's arrays change in place), then on another state and workload: the arguments it made
    once per pod shape (`PlacementStep.pod_arguments`) choose as the Python path does each time."""
    sched = Scheduler(policy=data.draw(policies())())
    for _ in range(2):  # a second state and workload: the arguments are made anew
        state = data.draw(states(cl))
        pods = data.draw(st.lists(pod_dicts(), min_size=1, max_size=4))
        w = workload(cl, pods)
        n = state.n_slots
        sched.sim = Sim(state, w, np.arange(n))  # type: ignore[assignment]
        sched.order_key = -1
        for p in data.draw(st.lists(st.integers(0, w.n_pods - 1), min_size=1, max_size=8)):
            fused, python = both_paths(sched, p, state.ready, 0)
            assert fused == python, (pods[p], fused, python)
            node = fused[0]
            if node >= 0:
                state.bind(node, int(w.cpu[p]), int(w.mem[p]), pick_devices(state, w, p, node), int(w.milli[p]))
