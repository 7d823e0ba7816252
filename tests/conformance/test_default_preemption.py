"""Conformance: kube-scheduler's DefaultPreemption (PostFilter), translated from
kubernetes/kubernetes pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go
(commit 5def93b1): TestPostFilter, TestDryRunPreemption, TestSelectBestCandidate, TestPreempt.

The scene of each case: nodes named node1, node2, ... of upstream's capacity (veryLargeRes:
500m CPU, 500 memory, read as MiB: only ratios matter), pods already running on them with
their priority and start time (upstream's epochTime<k> = k seconds), and the preemptor. The
walk over nodes goes in name order (our seeded node order pinned to it) from the offset
upstream's seeded rand gives (rand.Seed(4): 4, then 1, then 3 for five nodes); with fewer than
100 nodes the offset does not change the candidates. See docs/conformance.md, section
kube-scheduler: DefaultPreemption.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.scheduler import Scheduler
from harness.scheduler.preemption import DefaultPreemption, pick_one
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.status import PENDING, RUNNING
from harness.workload import compile_workload
from tests.scenarios import cluster, pool, trace

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL, MEDIUM, LARGE, VERY_LARGE = (100, 100), (200, 200), (300, 300), (500, 500)


def scene(nodes, pods, preemptor, offsets=(0,), node_capacity=VERY_LARGE, **args):
    """nodes: how many (node1..); pods: (name, node number, priority, (cpu, memory), start s);
    preemptor: (priority, (cpu, memory)). Returns (sim, plugin, preemptor pod, pod names)."""
    cpu, mem = node_capacity
    cl = cluster([{"name": "t", "cpu_milli": cpu, "memory_mib": mem, "gpus": 0, "gpu_model": ""}],
                 [pool(f"node{i + 1}", "t", min_size=1, max_size=1) for i in range(nodes)], autoscaling=False)
    rows = [{"pod_id": name, "job_id": name, "priority": prio, "cpu_milli": c, "memory_mib": m,
             "gpu_count": 0, "gpu_milli": 0} for name, _, prio, (c, m), _ in pods]
    prio, (c, m) = preemptor
    rows.append({"pod_id": "p", "job_id": "p", "priority": prio, "cpu_milli": c, "memory_mib": m,
                 "gpu_count": 0, "gpu_milli": 0})
    sim = Simulation(compile_workload(trace(rows), cl), cl, seed=0, horizon_s=3600.0)
    sim.node_rank = np.arange(sim.state.n_slots)  # walk the nodes in name order
    plugin = DefaultPreemption(**args)
    sched = Scheduler(LeastAllocated(), post_filter=plugin)
    sched.attach(sim)
    names = [r["pod_id"] for r in rows]
    for i, (_, node, _, _, start) in enumerate(pods):
        sim.bind(i, node - 1, np.zeros(0, np.int64))
        sim.pod_start[i] = start
    assert (sim.pod_status[:len(pods)] == RUNNING).all()
    sim.pod_status[len(pods)] = PENDING
    plugin.rng = FixedOffsets(offsets)
    return sim, plugin, len(pods), names


class FixedOffsets:
    """Upstream's seeded offsets, one per PostFilter call."""

    def __init__(self, offsets):
        self.offsets = list(offsets)

    def integers(self, n):
        return self.offsets.pop(0) % n


def usable(sim):
    return sim.state.ready.copy()


def dry_run(sim, plugin, p, names):
    """{node name: sorted victim names}, as upstream compares the candidates."""
    return {f"node{n + 1}": sorted(names[v] for v in victims.tolist())
            for n, victims in plugin.candidates(p, usable(sim))}


# ---- TestDryRunPreemption ------------------------------------------------------------------
DRY_RUN = [
    ("a pod that fits on both nodes when lower priority pods are preempted", 2,
     [("p1", 1, MID, LARGE, 0), ("p2", 2, MID, LARGE, 0)], (HIGH, LARGE),
     {"node1": ["p1"], "node2": ["p2"]}),
    ("a pod that would fit on the nodes, but other pods running are higher priority, no preemption would happen", 2,
     [("p1", 1, MID, LARGE, 0), ("p2", 2, MID, LARGE, 0)], (LOW, LARGE), {}),
    ("medium priority pod is preempted, but lower priority one stays as it is small", 2,
     [("p1.1", 1, LOW, SMALL, 0), ("p1.2", 1, MID, LARGE, 0), ("p2", 2, MID, LARGE, 0)], (HIGH, LARGE),
     {"node1": ["p1.2"], "node2": ["p2"]}),
    ("mixed priority pods are preempted", 2,
     [("p1.1", 1, MID, SMALL, 0), ("p1.2", 1, LOW, SMALL, 0), ("p1.3", 1, MID, MEDIUM, 0),
      ("p1.4", 1, HIGH, SMALL, 0), ("p2", 2, HIGH, LARGE, 0)], (HIGH, LARGE),
     {"node1": ["p1.2", "p1.3"]}),
    ("mixed priority pods are preempted, pick later StartTime one when priorities are equal", 2,
     [("p1.1", 1, LOW, SMALL, 5), ("p1.2", 1, LOW, SMALL, 4), ("p1.3", 1, MID, MEDIUM, 3),
      ("p1.4", 1, HIGH, SMALL, 2), ("p2", 2, HIGH, LARGE, 1)], (HIGH, LARGE),
     {"node1": ["p1.1", "p1.3"]}),
]


@pytest.mark.parametrize(("name", "nodes", "pods", "preemptor", "expected"), DRY_RUN, ids=[c[0] for c in DRY_RUN])
def test_dry_run_preemption(name, nodes, pods, preemptor, expected):
    """default_preemption_test.go TestDryRunPreemption: the candidates and their victims
    (reprieve from the most important: higher priority, then earlier start)."""
    sim, plugin, p, names = scene(nodes, pods, preemptor)
    assert dry_run(sim, plugin, p, names) == expected


FIVE = [(f"p{i}", i, MID, LARGE, 0) for i in range(1, 6)]


@pytest.mark.parametrize(("name", "pods", "offsets", "expected"), [
    ("all nodes are possible candidates, but DefaultPreemptionArgs limits to 2", FIVE, [4],
     [{"node5": ["p5"], "node1": ["p1"]}]),
    ("some nodes are not possible candidates, DefaultPreemptionArgs limits to 2",
     [(n, i, VERY_HIGH if i in (2, 5) else MID, LARGE, 0) for n, i, _, _, _ in FIVE], [4],
     [{"node1": ["p1"], "node3": ["p3"]}]),
    ("preemption offset across multiple scheduling cycles and wrap around", FIVE, [4, 1, 3],
     [{"node5": ["p5"], "node1": ["p1"]}, {"node2": ["p2"], "node3": ["p3"]}, {"node4": ["p4"], "node5": ["p5"]}]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_dry_run_preemption_limits_candidates(name, pods, offsets, expected):
    """default_preemption_test.go TestDryRunPreemption with MinCandidateNodesPercentage 40,
    MinCandidateNodesAbsolute 1: two candidates, walked from the offset and wrapping round."""
    sim, plugin, p, names = scene(5, pods, (HIGH, LARGE), offsets=offsets,
                                  min_candidate_nodes_percentage=40, min_candidate_nodes_absolute=1)
    for want in expected:
        assert dry_run(sim, plugin, p, names) == want


# ---- TestSelectBestCandidate -----------------------------------------------------------------
SELECT = [
    ("a pod that fits on both nodes when lower priority pods are preempted", 2,
     [("p1", 1, MID, LARGE, 0), ("p2", 2, MID, LARGE, 0)], (HIGH, LARGE), {"node1", "node2"}),
    ("node with min highest priority pod is picked", 3,
     [("p1.1", 1, MID, MEDIUM, 0), ("p1.2", 1, MID, LARGE, 0), ("p2.1", 2, MID, MEDIUM, 0),
      ("p2.2", 2, LOW, MEDIUM, 0), ("p3.1", 3, LOW, MEDIUM, 0), ("p3.2", 3, LOW, MEDIUM, 0)],
     (HIGH, VERY_LARGE), {"node3"}),
    ("when highest priorities are the same, minimum sum of priorities is picked", 3,
     [("p1.1", 1, MID, MEDIUM, 0), ("p1.2", 1, MID, LARGE, 0), ("p2.1", 2, MID, LARGE, 0),
      ("p2.2", 2, LOW, MEDIUM, 0), ("p3.1", 3, MID, MEDIUM, 0), ("p3.2", 3, MID, MEDIUM, 0)],
     (HIGH, VERY_LARGE), {"node2"}),
    ("when highest priority and sum are the same, minimum number of pods is picked", 3,
     [("p1.1", 1, MID, SMALL, 0), ("p1.2", 1, NEG, SMALL, 0), ("p1.3", 1, MID, SMALL, 0),
      ("p1.4", 1, NEG, SMALL, 0), ("p2.1", 2, MID, LARGE, 0), ("p2.2", 2, NEG, MEDIUM, 0),
      ("p3.1", 3, MID, MEDIUM, 0), ("p3.2", 3, NEG, SMALL, 0), ("p3.3", 3, LOW, SMALL, 0)],
     (HIGH, VERY_LARGE), {"node2"}),
    ("sum of adjusted priorities is considered", 3,
     [("p1.1", 1, MID, SMALL, 0), ("p1.2", 1, NEG, SMALL, 0), ("p1.3", 1, NEG, SMALL, 0),
      ("p2.1", 2, MID, LARGE, 0), ("p2.2", 2, NEG, MEDIUM, 0), ("p3.1", 3, MID, MEDIUM, 0),
      ("p3.2", 3, NEG, SMALL, 0), ("p3.3", 3, LOW, SMALL, 0)],
     (HIGH, VERY_LARGE), {"node2"}),
    ("non-overlapping lowest high priority, sum priorities, and number of pods", 4,
     [("p1.1", 1, MID, SMALL, 0), ("p1.2", 1, LOW, SMALL, 0), ("p1.3", 1, LOW, SMALL, 0),
      ("p2.1", 2, HIGH, LARGE, 0), ("p3.1", 3, MID, MEDIUM, 0), ("p3.2", 3, LOW, SMALL, 0),
      ("p3.3", 3, LOW, SMALL, 0), ("p3.4", 3, LOW, SMALL, 0), ("p4.1", 4, MID, MEDIUM, 0),
      ("p4.2", 4, MID, SMALL, 0), ("p4.3", 4, MID, SMALL, 0), ("p4.4", 4, NEG, SMALL, 0)],
     (VERY_HIGH, VERY_LARGE), {"node1"}),
    ("same priority, same number of victims, different start time for each node's pod", 3,
     [("p1.1", 1, MID, MEDIUM, 2), ("p1.2", 1, MID, MEDIUM, 2), ("p2.1", 2, MID, MEDIUM, 3),
      ("p2.2", 2, MID, MEDIUM, 3), ("p3.1", 3, MID, MEDIUM, 1), ("p3.2", 3, MID, MEDIUM, 1)],
     (HIGH, VERY_LARGE), {"node2"}),
    ("same priority, same number of victims, different start time for all pods", 3,
     [("p1.1", 1, MID, MEDIUM, 4), ("p1.2", 1, MID, MEDIUM, 2), ("p2.1", 2, MID, MEDIUM, 5),
      ("p2.2", 2, MID, MEDIUM, 1), ("p3.1", 3, MID, MEDIUM, 3), ("p3.2", 3, MID, MEDIUM, 6)],
     (HIGH, VERY_LARGE), {"node3"}),
    ("different priority, same number of victims, different start time for all pods", 3,
     [("p1.1", 1, LOW, MEDIUM, 4), ("p1.2", 1, MID, MEDIUM, 2), ("p2.1", 2, MID, MEDIUM, 6),
      ("p2.2", 2, LOW, MEDIUM, 1), ("p3.1", 3, LOW, MEDIUM, 3), ("p3.2", 3, MID, MEDIUM, 5)],
     (HIGH, VERY_LARGE), {"node2"}),
]


@pytest.mark.parametrize(("name", "nodes", "pods", "preemptor", "expected"), SELECT, ids=[c[0] for c in SELECT])
def test_select_best_candidate(name, nodes, pods, preemptor, expected):
    """default_preemption_test.go TestSelectBestCandidate: pickOneNodeForPreemption's criteria
    in order (lowest highest priority, lowest adjusted sum, fewest victims, latest start).
    In `non-overlapping ...` p3.4 is small, not medium: upstream's snapshot over-commits node3
    (600m on 500m), ours cannot; the preemptor takes the whole node, so every pod of node3 is a
    victim either way."""
    sim, plugin, p, names = scene(nodes, pods, preemptor)
    found = plugin.candidates(p, usable(sim))
    assert f"node{found[pick_one(sim, found)][0] + 1}" in expected


# ---- TestPostFilter and TestPreempt: the whole PostFilter, evictions included --------------
ONE_POD = (100, 100)  # upstream's pods: 1 capacity, translated as a node room for one 100m pod

POST_FILTER = [
    ("pod with higher priority can be made schedulable", 1, [("p1", 1, LOW, ONE_POD, 0)], (HIGH, ONE_POD),
     ONE_POD, "node1", ["p1"]),
    ("pod with tied priority is still unschedulable", 1, [("p1", 1, LOW, ONE_POD, 0)], (LOW, ONE_POD),
     ONE_POD, None, []),
    ("pod can be made schedulable on one node", 2, [("p1", 1, HIGH, ONE_POD, 0), ("p2", 2, LOW, ONE_POD, 0)],
     (MID, ONE_POD), ONE_POD, "node2", ["p2"]),
    ("no candidate nodes found, no enough resource after removing low priority pods", 2,
     [("p1", 1, LOW, ONE_POD, 0), ("p2", 2, LOW, ONE_POD, 0)], (HIGH, LARGE), (200, 400), None, []),
    ("no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU resource", 3,
     [("p1", 1, HIGH, ONE_POD, 0), ("p2", 2, LOW, ONE_POD, 0), ("p3", 3, HIGH, ONE_POD, 0)], (HIGH, LARGE),
     (200, 400), None, []),
    ("basic preemption logic (TestPreempt)", 3,
     [("p1.1", 1, LOW, SMALL, 0), ("p1.2", 1, LOW, SMALL, 0), ("p2.1", 2, HIGH, LARGE, 0),
      ("p3.1", 3, MID, MEDIUM, 0)], (HIGH, VERY_LARGE), VERY_LARGE, "node1", ["p1.1", "p1.2"]),
]


@pytest.mark.parametrize(("name", "nodes", "pods", "preemptor", "capacity", "node", "evicted"), POST_FILTER,
                         ids=[c[0] for c in POST_FILTER])
def test_post_filter(name, nodes, pods, preemptor, capacity, node, evicted):
    """default_preemption_test.go TestPostFilter and TestPreempt: the nominated node (ours: the
    node the preemptor binds to at once) and the pods deleted; strictly lower priority only."""
    sim, plugin, p, names = scene(nodes, pods, preemptor, node_capacity=capacity)
    n = plugin.preempt(p, usable(sim))
    assert (f"node{n + 1}" if n >= 0 else None) == node
    assert sorted(names[q] for q in np.flatnonzero(sim.pod_status[:p] == PENDING)) == evicted


def test_unresolvable_nodes_are_not_candidates():
    """TestPostFilter `preemption should respect filteredNodesStatuses`: a node the pod fails
    for a reason no eviction resolves (upstream UnschedulableAndUnresolvable; ours: a GPU model
    it does not accept) is no candidate, however low the pods on it."""
    types = [{"name": m, "cpu_milli": 4000, "memory_mib": 4096, "gpus": 1, "gpu_model": m} for m in ("T4", "H100")]
    cl = cluster(types, [pool("node1", "T4", min_size=1, max_size=1), pool("none", "H100", max_size=1)],
                 autoscaling=False)
    rows = [{"pod_id": "p1", "job_id": "p1", "priority": LOW},
            {"pod_id": "p", "job_id": "p", "priority": HIGH, "gpu_models": ["H100"]}]
    sim = Simulation(compile_workload(trace(rows), cl), cl, seed=0, horizon_s=3600.0)
    plugin = DefaultPreemption()
    Scheduler(LeastAllocated(), post_filter=plugin).attach(sim)
    sim.bind(0, 0, np.array([0]))
    sim.pod_status[1] = PENDING
    assert plugin.preempt(1, usable(sim)) == -1 and sim.pod_status[0] == RUNNING


def test_default_preemption_args():
    """DefaultPreemptionArgs defaults (config/v1 SetDefaults_DefaultPreemptionArgs: 10 %, 100)
    and calculateNumCandidates; validation refuses both at 0 (ValidateDefaultPreemptionArgs)."""
    plugin = DefaultPreemption()
    assert (plugin.percentage, plugin.absolute) == (10, 100)
    assert [plugin.num_candidates(n) for n in (5, 100, 999, 1000, 5000)] == [5, 100, 100, 100, 500]
    with pytest.raises(ConfigError, match="cannot both be 0"):
        DefaultPreemption(0, 0)
