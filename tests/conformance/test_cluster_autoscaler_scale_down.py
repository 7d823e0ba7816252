"""Cluster Autoscaler scale-down, translated from upstream's own test cases
(kubernetes/autoscaler, cluster-autoscaler/): utilisation (`simulator/utilization/info_test.go`),
the planner's unneeded-vs-removable (`core/scaledown/planner/planner_test.go`), the removal
simulation (`simulator/cluster_test.go`), the deletion budgets (`core/scaledown/budgets/
budgets_test.go`) and the per-group minimum (`core/scaledown/unneeded/nodes_test.go`).

Upstream nodes become ready nodes of one-node pools (node i = the first slot of pool i) unless a
case needs many nodes of one group; memory in bytes becomes MiB (only ratios matter). Upstream
unit tests hand the planner its candidate list ("eligible") directly: those translate to
`ScaleDown.removable` over the same candidates in the same order."""

from __future__ import annotations

import numpy as np
import pytest

from harness.autoscalers.scale_down import ScaleDown
from harness.cluster import Cluster
from harness.scheduler.queue_sort import PrioritySort
from harness.sim import Simulation
from harness.status import ABSENT
from harness.workload import compile_workload
from tests import scenarios as sc


def world(nodes: list[tuple[int, int, int]], pods: list[tuple], counts=None, min_sizes=None,
          **scale_down):
    """Ready nodes (cpu milli, memory MiB, GPUs), one pool each (`counts[i]` nodes of pool i, min
    size `min_sizes[i]` or 0), and pods (cpu milli, memory MiB, GPUs, node index[, GPU milli
    each, 1000 unless given]) bound where upstream schedules them. Returns (simulation, attached ScaleDown, slot of each node)."""
    counts = counts or [1] * len(nodes)
    min_sizes = min_sizes or [0] * len(nodes)
    types = [{"name": f"t{i}", "cpu_milli": c, "memory_mib": m, "gpus": g, **({"gpu_model": "H100"} if g else {})}
             for i, (c, m, g) in enumerate(nodes)]
    pools = [{"name": f"ng{i}", "node_type": f"t{i}", "max_size": max(k, 1), "min_size": m,
              "boot_delay": {"min_s": 1, "max_s": 1}} for i, (k, m) in enumerate(zip(counts, min_sizes, strict=True))]
    cl = Cluster(node_types=types, pools=pools, autoscaling=True, name="conformance")
    milli = [(pod[4] if len(pod) > 4 else 1000) if pod[2] else 0 for pod in pods]
    table = sc.trace([{"cpu_milli": pod[0], "memory_mib": pod[1], "gpu_count": pod[2], "gpu_milli": mi}
                      for pod, mi in zip(pods, milli, strict=True)] or [{"gpu_count": 0, "gpu_milli": 0, "submit_s": 1e8}])
    sim = Simulation(compile_workload(table, cl), cl, seed=0, horizon_s=1e6)
    slots = []
    for p, k in enumerate(counts):  # min_size nodes are there from the start
        for n in range(sim.state.pool_slots(p).start, sim.state.pool_slots(p).start + k):
            if sim.state.status[n] == ABSENT:
                sim.fleet.add(n, ready=True)
            slots.append(n)
    sim.queue.order_by(PrioritySort())
    sim.advance_to(0.0)
    for p, pod in enumerate(pods):
        n = slots[pod[3]]
        sim.bind(p, n, sim.state.pick_devices(n, pod[2], milli[p], False, False))
    sd = ScaleDown(**{"simulate_every_scan": True, **scale_down})  # upstream's planner exactly
    sd.attach(sim)
    return sim, sd, np.array(slots)


# ---- simulator/utilization/info_test.go, TestCalculate ------------------------------------------

def test_utilization_plain_node():
    """info_test.go TestCalculate, first assert: node1 2000m / 2,000,000 B, pods p1 100m/200000 B
    twice and p2 without requests: Utilization 2.0/10 (memory), CpuUtil 0.1."""
    sim, sd, slots = world([(2000, 2000, 0)], [(100, 200, 0, 0), (100, 200, 0, 0), (0, 0, 0, 0)])
    assert sd.utilization(slots) == pytest.approx([0.2])


def test_utilization_gpu_node_counts_gpu_requests_only():
    """info_test.go TestCalculate, "GPU node" assert: gpu_node 2000m / 2,000,000 B with 1 GPU,
    pods 2 x (100m/200000 B) and gpu_pod (100m/200000 B, 1 GPU): Utilization 1/1 (CPU and
    memory ignored on a GPU node)."""
    sim, sd, slots = world([(2000, 2000, 1)], [(100, 200, 0, 0), (100, 200, 0, 0), (100, 200, 1, 0)])
    assert sd.utilization(slots) == pytest.approx([1.0])


def test_utilization_gpu_node_without_gpu_pods_is_zero():
    """info_test.go TestCalculate, the same GPU node with the two CPU pods only (the rule the
    "GPU node" assert pins: CPU pods do not count on a GPU node): GPU utilisation 0."""
    sim, sd, slots = world([(2000, 2000, 1)], [(100, 200, 0, 0), (100, 200, 0, 0)])
    assert sd.utilization(slots) == pytest.approx([0.0])


# ---- core/scaledown/planner/planner_test.go, TestUpdateClusterState ------------------------------
# Nodes "nK" of 1000m (or as given) / 10 B; pods ReplicaSet-owned, memory 1 B; eligible = the
# candidates handed to the removal simulation, in this order; wantUnneeded = removable ones.

PLANNER = {
    "empty nodes, all eligible": ([1000, 1000, 1000], [], [0, 1, 2], [0, 1, 2]),
    "empty nodes, some eligible": ([1000, 1000, 1000], [], [0, 1], [0, 1]),
    "empty nodes, none eligible": ([1000, 1000, 1000], [], [], []),
    "single utilised node, not eligible": ([1000], [(500, 0)], [0], []),
    "pods can schedule on non-eligible node, eligible": ([1000, 1000], [(500, 0), (500, 0)], [0], [0]),
    "pods can schedule on eligible node, eligible": ([1000, 1000], [(500, 0), (500, 0)], [0, 1], [0]),
    "pods cannot schedule anywhere, not eligible":
        ([2000, 1000, 500], [(1000, 0), (1000, 0), (1000, 1)], [0, 1], []),
    "all pods from multiple nodes can schedule elsewhere, all eligible":
        ([1000, 1000, 2000], [(500, 0), (500, 0), (500, 1), (500, 1)], [0, 1], [0, 1]),
    "some pods from multiple nodes can schedule elsewhere, some eligible":
        ([2000, 1000, 1000], [(1000, 0), (1000, 0), (500, 1), (500, 1)], [0, 1], [1]),
    "no pods from multiple nodes can schedule elsewhere, no eligible":
        ([1000, 1000, 500], [(500, 0), (500, 0), (500, 1), (500, 1)], [0, 1], []),
}


@pytest.mark.parametrize("case", list(PLANNER))
def test_planner_unneeded_only_if_removable(case):
    """planner_test.go TestUpdateClusterState, case `case`: a candidate is unneeded only if its
    pods fit elsewhere, nodes already found removable in the pass no longer counting as room
    and the pods moved onto them staying there."""
    cpus, pods, eligible, want = PLANNER[case]
    sim, sd, slots = world([(c, 10, 0) for c in cpus], [(c, 1, 0, i) for c, i in pods])
    found, tried = sd.removable(slots[eligible])
    assert tried == len(eligible)
    assert slots[eligible][found].tolist() == slots[want].tolist()


def test_planner_timer_runs_only_while_removable():
    """planner.go categorizeNodes -> unneeded.Nodes.Update (unneeded/nodes_test.go TestUpdate,
    "added in last call" / "single one older"): a node keeps its first unneeded time while it
    stays unneeded and loses it when it is no longer removable. Here n1 (1000m, one 100m pod)
    is under the threshold; its pod fits n2 until n2 fills up."""
    sim, sd, slots = world([(1000, 10, 0), (1000, 10, 0), (1000, 10, 0)],
                           [(100, 1, 0, 0), (600, 1, 0, 1), (950, 1, 0, 2)], unneeded_time_s=600.0)
    protect = np.zeros(sim.state.n_slots, bool)
    protect[slots[1:]] = True  # only n1 is a candidate
    sd.run(0.0, protect)
    assert sd.unneeded_since[slots[0]] == 0.0
    sd.run(10.0, protect.copy())
    assert sd.unneeded_since[slots[0]] == 0.0  # still unneeded: the time is kept
    sim.state.bind(int(slots[1]), 350, 0, np.zeros(0, np.int64), 0)  # n2 now has 50m left
    sd.run(20.0, protect.copy())
    assert np.isnan(sd.unneeded_since[slots[0]]) and sd.unneeded.tolist() == []


# ---- simulator/cluster_test.go, TestFindNodesToRemove --------------------------------------------
# n1 empty, n2 two 100m/100000 B ReplicaSet pods, n3 one 100m pod, n4 one 1000m pod; all 1000m /
# 2,000,000 B. n3's pod has no controller upstream (hence unremovable there); ours are all
# movable, and the cases below keep upstream's outcome with that difference noted.

FIND = {
    "just an empty node, should be removed": ([0], [0], [0]),
    "just a drainable node, but nowhere for pods to go to": ([1], [1], []),
    "drainable node, and a mostly empty node that can take its pods": ([1, 2], [1, 2], [1]),
    "drainable node, and a full node that cannot fit anymore pods": ([1], [1, 3], []),
    "4 nodes, 1 empty, 1 drainable": ([0, 1], [0, 1, 2, 3], [0, 1]),
}


@pytest.mark.parametrize("case", list(FIND))
def test_find_nodes_to_remove(case):
    """cluster_test.go TestFindNodesToRemove, case `case` (candidates, all nodes, toRemove).
    In "drainable node, and a mostly empty node that can take its pods" n3 is unremovable
    upstream because its pod has no controller; here because n2, found removable first, no
    longer counts as room and n3's pod fits nowhere else: the same outcome."""
    candidates, present, want = FIND[case]
    pods = [(100, 100, 0, 1), (100, 100, 0, 1), (100, 100, 0, 2), (1000, 100, 0, 3)]
    pods = [(c, m, g, present.index(i)) for c, m, g, i in pods if i in present]
    sim, sd, slots = world([(1000, 2000, 0)] * len(present), pods)
    cand = slots[[present.index(c) for c in candidates]]
    found, _ = sd.removable(cand)
    assert cand[found].tolist() == slots[[present.index(c) for c in want]].tolist()


# ---- core/scaledown/budgets/budgets_test.go, TestCropNodesToBudgets -----------------------------
# MaxScaleDownParallelism 10, MaxDrainParallelism 5 (the test's options); regular (non-atomic)
# groups, no deletion in progress. Nodes of group testNg (and testNg2) are all unneeded long
# enough; "drain" nodes hold one small pod each, which fits the big spare node of group keep.

BUDGETS = {
    "empty nodes within max limit, no deletions in progress": ((10, 0, 0), (10, 0)),
    "empty nodes exceeding max limit, no deletions in progress": ((11, 0, 0), (10, 0)),
    "drain nodes within max limit, no deletions in progress": ((0, 5, 0), (0, 5)),
    "drain nodes exceeding max limit, no deletions in progress": ((0, 6, 0), (0, 5)),
    "multiple drain node groups": ((0, 5, 5), (0, 5)),
    "empty&drain nodes exceeding overall limit, no deletions in progress": ((8, 8, 0), (8, 2)),
    "empty&drain nodes exceeding drain limit, no deletions in progress": ((2, 8, 0), (2, 5)),
}


@pytest.mark.parametrize("case", list(BUDGETS))
def test_budgets_crop_empty_and_drain(case):
    """budgets_test.go TestCropNodesToBudgets, case `case`: (empty, drain in testNg, drain in
    testNg2) -> (empty kept, drain kept); drain nodes of the first group come first."""
    (n_empty, n_drain, n_drain2), (want_empty, want_drain) = BUDGETS[case]
    groups = [(n_empty + n_drain, (1000, 10, 0))] + ([(n_drain2, (1000, 10, 0))] if n_drain2 else [])
    counts = [k for k, _ in groups] + [1]
    nodes = [t for _, t in groups] + [(100000, 1000, 0)]  # the spare node: room for every pod
    first2 = n_empty + n_drain
    pods = [(10, 1, 0, i) for i in [*range(n_empty, first2), *range(first2, first2 + n_drain2)]]
    sim, sd, slots = world(nodes, pods, counts=counts, unneeded_time_s=0.0,
                           max_scale_down_parallelism=10, max_drain_parallelism=5)
    cand = slots[:-1]
    sd.unneeded, sd.unneeded_since[cand] = cand, 0.0
    sd._delete(0.0)
    gone = cand[sim.state.status[cand] == ABSENT]
    empty, drain = gone[np.isin(gone, slots[:n_empty])], gone[~np.isin(gone, slots[:n_empty])]
    assert (len(empty), len(drain)) == (want_empty, want_drain)
    assert set(drain.tolist()) <= set(slots[n_empty:first2].tolist())  # testNg's first


# ---- core/scaledown/unneeded/nodes_test.go, TestRemovableAt --------------------------------------

REMOVABLE_AT = {
    # name: (empty, drain, minSize, targetSize - numOngoingDeletions) -> (empty, drain) removable
    "Node group min size is not reached": ((3, 2, 1, 8), (3, 2)),
    "Node group min size is reached for drain nodes": ((3, 5, 1, 8), (3, 4)),
    "Node group min size is reached for empty and drain nodes": ((3, 5, 1, 3), (2, 0)),
}


@pytest.mark.parametrize("case", list(REMOVABLE_AT))
def test_removable_at_respects_min_size(case):
    """unneeded/nodes_test.go TestRemovableAt, case `case`: per group, removable = targetSize -
    ongoing deletions - minSize, empty nodes first. Our deletions are instantaneous, so the
    group's present nodes stand for targetSize - numOngoingDeletions (8, 8 and 3: padded with
    busy nodes that are not unneeded, or, in the last case, without the 5 drain nodes, which
    upstream's count leaves no room for anyway); budgets wide enough not to crop."""
    (n_empty, n_drain, min_size, present), (want_empty, want_drain) = REMOVABLE_AT[case]
    n_drain = min(n_drain, present - n_empty)
    pad = present - n_empty - n_drain
    sim, sd, slots = world([(1000, 10, 0), (100000, 1000, 0)],
                           [(10, 1, 0, i) for i in range(n_empty, n_empty + n_drain)]
                           + [(900, 1, 0, i) for i in range(n_empty + n_drain, present)],
                           counts=[present, 1], min_sizes=[min_size, 0], unneeded_time_s=0.0,
                           max_drain_parallelism=10)
    cand = slots[:n_empty + n_drain]
    assert pad >= 0 and sim.state.pods_on[cand[n_empty:]].all()
    sd.unneeded, sd.unneeded_since[cand] = cand, 0.0
    sd._delete(0.0)
    gone = cand[sim.state.status[cand] == ABSENT]
    assert (int((gone < slots[n_empty]).sum()), int((gone >= slots[n_empty]).sum())) == (want_empty, want_drain)
