"""kube-scheduler conformance: upstream's table-driven cases translated (kubernetes/kubernetes).

Scoring cases call the plugin's `score` on hand-built nodes, as upstream calls Score per node.
Upstream memory is in bytes; these tests keep the numbers and read them as MiB (every case
depends only on ratios). Upstream's extended resource `abc.com/xyz` is our only one,
`nvidia.com/gpu` (whole GPUs). Cases not translated are listed in docs/conformance.md.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from harness.cluster import Cluster
from harness.errors import ConfigError
from harness.filters import feasible
from harness.scheduler import Scheduler
from harness.scheduler.filter import NodeResourcesFit
from harness.scheduler.framework import num_feasible_nodes_to_find
from harness.scores import BalancedAllocation, LeastAllocated, MostAllocated
from harness.state import ClusterState
from harness.trace import table_from_columns
from harness.whatif import Snapshot
from harness.workload import compile_workload, pools_fit

K8S = "kubernetes/kubernetes"
NODERES = "pkg/scheduler/framework/plugins/noderesources"
EXT = {"cpu": 1, "memory": 1, "nvidia.com/gpu": 1}  # upstream's extendedResourceSet


def world(nodes, existing=(), pod=(0, 0, 0)):
    """nodes: (cpu milli, memory MiB, GPUs) per node; existing: (node, cpu, memory, GPUs) pods
    already bound; pod: (cpu, memory, GPUs) of the pod to score. Returns (state, workload)."""
    cluster = Cluster(
        node_types=[{"name": f"t{i}", "cpu_milli": c, "memory_mib": m, "gpus": g, "gpu_model": "A" if g else ""}
                    for i, (c, m, g) in enumerate(nodes)],
        pools=[{"name": f"node{i + 1}", "node_type": f"t{i}", "min_size": 1, "max_size": 1}
               for i in range(len(nodes))],
        autoscaling=False)
    state = ClusterState(cluster)
    for n in range(len(nodes)):
        state.add_node(n, ready=True)
    for n, cpu, mem, gpus in existing:
        state.bind(n, cpu, mem, np.arange(gpus), 1000)
    cpu, mem, gpus = pod
    table = table_from_columns({"pod_id": ["p"], "job_id": ["p"], "submit_s": [0.0], "cpu_milli": [cpu],
                                "memory_mib": [mem], "gpu_count": [gpus], "gpu_milli": [1000 if gpus else 0]})
    return state, compile_workload(table, cluster)


def scores(plugin, state, w):
    return plugin.score(state, w, 0, np.arange(state.n_slots), np.random.default_rng(0)).tolist()


# ---- least_allocated_test.go TestLeastAllocatedScoringStrategy (commit 8519d339) ----------
# and most_allocated_test.go TestMostAllocatedScoringStrategy (commit 072825f9):
# (strategy, exact case name, nodes, existing pods, pod, resources, expected scores)
POD = (3000, 5000, 0)  # upstream's Req(1000, 2000) + Req(2000, 3000)
FIT_CASES = [
    (LeastAllocated, "nothing scheduled, nothing requested",
     [(4000, 10000, 0)] * 2, [], (0, 0, 0), None, [100, 100]),
    (LeastAllocated, "nothing scheduled, resources requested, differently sized nodes",
     [(4000, 10000, 0), (6000, 10000, 0)], [], POD, None, [37, 50]),
    (LeastAllocated, "no resources requested, pods scheduled",
     [(4000, 10000, 0)] * 2, [(0, 0, 0, 0), (0, 0, 0, 0), (1, 0, 0, 0), (1, 0, 0, 0)], (0, 0, 0), None, [100, 100]),
    (LeastAllocated, "no resources requested, pods scheduled with resources",
     [(10000, 20000, 0)] * 2, [(0, 3000, 0, 0), (0, 3000, 0, 0), (1, 3000, 0, 0), (1, 3000, 5000, 0)],
     (0, 0, 0), None, [70, 57]),
    (LeastAllocated, "resources requested, pods scheduled with resources",
     [(10000, 20000, 0)] * 2, [(0, 3000, 0, 0), (1, 3000, 5000, 0)], POD, None, [57, 45]),
    (LeastAllocated, "resources requested, pods scheduled with resources, differently sized nodes",
     [(10000, 20000, 0), (10000, 50000, 0)], [(0, 3000, 0, 0), (1, 3000, 5000, 0)], POD, None, [57, 60]),
    (LeastAllocated, "requested resources exceed node capacity",
     [(4000, 10000, 0)] * 2, [(0, 3000, 0, 0), (1, 3000, 5000, 0)], (3000, 0, 0), None, [50, 25]),
    (LeastAllocated, "nothing scheduled, resources requested with different weight on CPU and memory, "
     "differently sized nodes", [(4000, 10000, 0), (6000, 10000, 0)], [], POD, {"memory": 2, "cpu": 1}, [41, 50]),
    (LeastAllocated, "bypass extended resource if the pod does not request",
     [(6000, 10000, 0), (6000, 10000, 4)], [], POD, EXT, [50, 50]),
    (LeastAllocated, "honor extended resource if the pod requests",
     [(6000, 10000, 4), (6000, 10000, 10)], [], (3000, 5000, 2), EXT, [50, 60]),
    (LeastAllocated, "if the node doesn't have a resource",
     [(6000, 10000, 0), (6000, 10000, 4)], [], (3000, 4000, 0), {"nvidia.com/gpu": 2, "cpu": 1, "memory": 1},
     [55, 55]),
    (MostAllocated, "nothing scheduled, nothing requested",
     [(4000, 10000, 0)] * 2, [], (0, 0, 0), None, [0, 0]),
    (MostAllocated, "nothing scheduled, resources requested, differently sized nodes",
     [(4000, 10000, 0), (6000, 10000, 0)], [], POD, None, [62, 50]),
    (MostAllocated, "no resources requested, pods scheduled with resources",
     [(10000, 20000, 0)] * 2, [(0, 3000, 0, 0), (0, 3000, 0, 0), (1, 3000, 0, 0), (1, 3000, 5000, 0)],
     (0, 0, 0), None, [30, 42]),
    (MostAllocated, "resources requested, pods scheduled with resources",
     [(10000, 20000, 0)] * 2, [(0, 3000, 0, 0), (1, 3000, 5000, 0)], POD, None, [42, 55]),
    (MostAllocated, "resources requested equal node capacity",
     [(5000, 10000, 0), (10000, 9000, 0)], [], (5000, 9000, 0), None, [95, 75]),
    (MostAllocated, "nothing scheduled, resources requested with different weight on CPU and memory, "
     "differently sized nodes", [(4000, 10000, 0), (6000, 10000, 0)], [], POD, {"memory": 2, "cpu": 1}, [58, 50]),
    (MostAllocated, "bypass extended resource if the pod does not request",
     [(6000, 10000, 0), (6000, 10000, 4)], [], POD, EXT, [50, 50]),
    (MostAllocated, "honor extended resource if the pod request",
     [(6000, 10000, 4), (6000, 10000, 10)], [], (3000, 5000, 2), EXT, [50, 40]),
    (MostAllocated, "if the node doesn't have a resource",
     [(6000, 10000, 0), (6000, 10000, 4)], [], (3000, 4000, 0), {"nvidia.com/gpu": 2, "cpu": 1, "memory": 1},
     [45, 45]),
]


@pytest.mark.parametrize("plugin, case, nodes, existing, pod, resources, expected", FIT_CASES,
                         ids=[f"{c[0].__name__}: {c[1]}" for c in FIT_CASES])
def test_node_resources_fit_scoring(plugin, case, nodes, existing, pod, resources, expected):
    """kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources/{least,most}_allocated_test.go,
    Test{Least,Most}AllocatedScoringStrategy, the case named `case`: per node the integer score
    upstream expects (per resource requested x 100 // capacity, then the weighted integer mean)."""
    state, w = world(nodes, existing, pod)
    assert scores(plugin(resources=resources), state, w) == expected


@pytest.mark.parametrize("plugin", [LeastAllocated, MostAllocated])
@pytest.mark.parametrize("case, resources", [("resource with negative weight", {"memory": -1, "cpu": 1}),
                                             ("resource with zero weight", {"memory": 1, "cpu": 0}),
                                             ("resource weight larger than MaxNodeScore", {"memory": 1, "cpu": 101})])
def test_node_resources_fit_weight_validation(plugin, case, resources):
    """{least,most}_allocated_test.go, the three weight-validation cases: a weight outside
    [1, 100] is refused (upstream: field error on scoringStrategy.resources[i].weight)."""
    bad = next(name for name, wt in resources.items() if not 1 <= wt <= 100)
    with pytest.raises(ConfigError, match=rf"policy\.resources\.{bad} = -?\d+: must be an integer in \[1, 100\]"):
        plugin(resources=resources)


def test_node_resources_fit_unknown_resource():
    """Ours: a resource we do not model is refused by name (upstream scores it as 0-capacity)."""
    with pytest.raises(ConfigError, match=r"policy\.resources.*'abc.com/xyz'.*cpu, memory, nvidia.com/gpu"):
        LeastAllocated(resources={"cpu": 1, "abc.com/xyz": 1})


def test_cpu_only_pod_is_not_drawn_to_an_empty_gpu_node():
    """Issue 17 item 3, the consequence of "bypass extended resource if the pod does not request"
    with GPUs configured: a CPU-only pod scores a half-full CPU node and an equally half-full GPU
    node alike, instead of preferring the GPU node for its idle GPUs."""
    state, w = world([(8000, 16000, 0), (8000, 16000, 8)], [(0, 4000, 8000, 0), (1, 4000, 8000, 0)], (1000, 1000, 0))
    least = LeastAllocated(resources={"cpu": 1, "memory": 1, "nvidia.com/gpu": 3})
    # cpu 3000 x 100 // 8000 = 37, memory 7000 x 100 // 16000 = 43: (37 + 43) // 2 = 40 on both
    # (the old rule added the GPU node's idle GPUs: 100 x mean(3/8, 7/16, 1) = 60.4 against 40.6)
    assert scores(least, state, w) == [40, 40]


# ---- balanced_allocation_test.go TestNodeResourcesBalancedAllocation (stored id 122590693) ----
BALANCED_CASES = [
    ("nothing scheduled, resources requested, differently sized nodes",
     [(4000, 10000, 0), (6000, 10000, 0)], [], POD, None, [87, 100]),
    ("resources requested, pods scheduled with resources",
     [(10000, 20000, 0)] * 2, [(0, 3000, 0, 0), (1, 3000, 5000, 0)], POD, None, [82, 95]),
    ("resources requested, pods scheduled with resources, differently sized nodes",
     [(10000, 20000, 0), (10000, 50000, 0)], [(0, 3000, 0, 0), (1, 3000, 5000, 0)], POD, None, [82, 80]),
    ("include scalar resource on a node for balanced resource allocation",
     [(3500, 40000, 8)] * 2, [(0, 3000, 5000, 3), (1, 3000, 5000, 0)], (0, 0, 1), EXT, [70, 65]),
    ("node without the scalar resource should skip the scalar resource",
     [(3500, 40000, 8), (3500, 40000, 0)], [], POD, EXT, [63, 63]),
]


@pytest.mark.parametrize("case, nodes, existing, pod, resources, expected", BALANCED_CASES,
                         ids=[c[0] for c in BALANCED_CASES])
def test_balanced_allocation(case, nodes, existing, pod, resources, expected):
    """kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources/balanced_allocation_test.go,
    TestNodeResourcesBalancedAllocation, the case named `case`: trunc((1 - std of the requested
    fractions) x 100) per node, the GPU fraction only for a pod that requests GPUs."""
    state, w = world(nodes, existing, pod)
    assert scores(BalancedAllocation(resources=resources), state, w) == expected


def test_balanced_allocation_skips_a_pod_that_requests_nothing():
    """balanced_allocation_test.go, "nothing scheduled, nothing requested, skip in PreScore":
    a best-effort pod is not scored by the plugin (ours: 0 on every node, which adds nothing)."""
    state, w = world([(4000, 10000, 0), (6000, 10000, 0)], [(0, 3000, 0, 0)])
    assert scores(BalancedAllocation(), state, w) == [0, 0]


def test_default_profile_and_bin_packing_policy():
    """kubernetes/kubernetes pkg/scheduler/apis/config/v1/default_plugins.go (score weights
    NodeResourcesFit 1, NodeResourcesBalancedAllocation 1) and defaults.go (LeastAllocated over
    cpu 1 / memory 1; BalancedAllocation over cpu 1 / memory 1): the default policy of a replay
    and of the loop experiments (not of openb_packing, which names the FGD paper's policies)."""
    from hydra.utils import instantiate

    from harness.config import compose

    for overrides in ([], ["experiment=loops_synthetic"]):
        policy = instantiate(compose("config", overrides).policy, _convert_="all")
        assert [(type(p).__name__, p.weight, p.resources) for p in policy.plugins] == [
            ("LeastAllocated", 1.0, {"cpu": 1, "memory": 1}), ("BalancedAllocation", 1.0, {"cpu": 1, "memory": 1})]
    packing = instantiate(compose("config", ["policy=bin_packing"]).policy, _convert_="all")
    assert isinstance(packing, MostAllocated)
    assert packing.resources == {"cpu": 1, "memory": 1, "nvidia.com/gpu": 3}


# ---- schedule_one_test.go TestNumFeasibleNodesToFind -----------------------------------------
@pytest.mark.parametrize("case, percentage, n_all, expected", [
    ("not set percentageOfNodesToScore and nodes number not more than 50", 0, 10, 10),
    ("set percentageOfNodesToScore and nodes number not more than 50", 40, 10, 10),
    ("not set percentageOfNodesToScore and nodes number more than 50", 0, 1000, 420),
    ("set percentageOfNodesToScore and nodes number more than 50", 40, 1000, 400),
    ("not set percentageOfNodesToScore and nodes number more than 50*125", 0, 6000, 300),
    ("set percentageOfNodesToScore and nodes number more than 50*125", 40, 6000, 2400),
])
def test_num_feasible_nodes_to_find(case, percentage, n_all, expected):
    """kubernetes/kubernetes pkg/scheduler/schedule_one_test.go, TestNumFeasibleNodesToFind,
    the case named `case` (percentageOfNodesToScore 0 = not set: the adaptive default)."""
    assert num_feasible_nodes_to_find(percentage, n_all) == expected


def sampling_scheduler(n_nodes: int, percentage: int = 0) -> Scheduler:
    """A profile over `n_nodes` ready nodes whose node order is reversed slot order."""
    sched = Scheduler(LeastAllocated(), percentage_of_nodes_to_score=percentage)
    state = SimpleNamespace(ready=np.ones(n_nodes, bool), layout_version=0)
    sched.sim = SimpleNamespace(state=state, node_rank=np.arange(n_nodes)[::-1].copy())
    sched.next_start, sched.order_key = 0, -1
    return sched


def test_feasible_nodes_found_from_a_rotating_start():
    """pkg/scheduler/schedule_one.go findNodesThatPassFilters: from nextStartNodeIndex in node
    order, stop once numFeasibleNodesToFind nodes passed; the next cycle starts after the last
    node checked. 200 nodes, adaptive: 200 x 49 // 100 = 98, at least 100."""
    sched = sampling_scheduler(200)
    every = np.ones(200, bool)
    first = sched.feasible_to_score(every)
    assert sorted(first.tolist()) == list(range(100, 200))  # node order: slot 199 first
    assert sched.next_start == 100
    assert sorted(sched.feasible_to_score(every).tolist()) == list(range(100))
    assert sched.next_start == 0
    # only every third node feasible: 100 found after 298 checks would wrap past the end, so
    # all 67 feasible are found, every node was checked and the start stays
    third = np.arange(200) % 3 == 0
    assert len(sched.feasible_to_score(third)) == 67 and sched.next_start == 0
    # half feasible, 10% of 1000 = 100 wanted: found by the 200th node in order
    sched = sampling_scheduler(1000, percentage=10)
    half = np.arange(1000) % 2 == 1  # slots 999, 997, ... come first in node order
    assert sched.feasible_to_score(half).tolist() == list(range(801, 1000, 2))
    assert sched.next_start == 199  # slot 801 is the 199th node in order: the 100th feasible


def test_small_clusters_score_every_feasible_node():
    """Under 100 nodes (and with percentage 100) every feasible node is scored, start unchanged."""
    for n, pct in ((99, 0), (500, 100)):
        sched = sampling_scheduler(n, pct)
        mask = np.arange(n) % 2 == 0
        assert sched.feasible_to_score(mask).tolist() == np.flatnonzero(mask).tolist()
        assert sched.next_start == 0


# ---- taint_toleration_test.go TestTaintTolerationFilter, with the tolerations our pods carry:
# ExtendedResourceToleration's {nvidia.com/gpu, Exists, NoSchedule} on a pod that requests GPUs,
# none on the others (plugin/pkg/admission/extendedresourcetoleration/admission.go).
def tainted_world(taints: list[str], gpus: int):
    """One 8-GPU node in a pool with `taints`; a pod of 1000m CPU and `gpus` GPUs."""
    cluster = Cluster(
        node_types=[{"name": "g8", "cpu_milli": 64000, "memory_mib": 256000, "gpus": 8, "gpu_model": "A"}],
        pools=[{"name": "gpu", "node_type": "g8", "min_size": 1, "max_size": 1, "taints": taints}],
        autoscaling=False)
    state = ClusterState(cluster)
    state.add_node(0, ready=True)
    table = table_from_columns({"pod_id": ["p"], "job_id": ["p"], "submit_s": [0.0], "cpu_milli": [1000],
                                "memory_mib": [1000], "gpu_count": [gpus], "gpu_milli": [1000 if gpus else 0]})
    return state, compile_workload(table, cluster)


@pytest.mark.parametrize("case, taints, gpus, fits", [
    # a pod without GPUs has no tolerations
    ("A pod having no tolerations can't be scheduled onto a node with nonempty taints",
     ["dedicated=user1:NoSchedule"], 0, False),
    # a GPU pod's toleration (nvidia.com/gpu, Exists, NoSchedule) matches the GPU taint
    ("A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule",
     ["nvidia.com/gpu=present:NoSchedule"], 1, True),
    # ... and not a taint of another key
    ("A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule",
     ["dedicated=user2:NoSchedule"], 1, False),
    ("A pod can be scheduled onto the node, with a toleration uses operator Exists that tolerates the taints "
     "on the node", ["nvidia.com/gpu=any-value:NoSchedule"], 2, True),
    ("A pod has a toleration that keys and values match the taint on the node, but (non-empty) effect doesn't "
     "match, can't be scheduled onto the node", ["nvidia.com/gpu=present:NoExecute"], 1, False),
    ("The pod has a toleration that key and value don't match the taint on the node, but the effect of taint "
     "on node is PreferNoSchedule. Pod can be scheduled onto the node", ["dedicated=user1:PreferNoSchedule"], 1, True),
    ("The pod has no toleration, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled "
     "onto the node", ["dedicated=user1:PreferNoSchedule"], 0, True),
])
def test_taint_toleration_filter(case, taints, gpus, fits):
    """kubernetes/kubernetes pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go,
    TestTaintTolerationFilter, the case named `case`, with the pod's tolerations replaced by
    those ExtendedResourceToleration gives it (GPU pods only); the verdict is the one upstream states."""
    state, w = tainted_world(taints, gpus)
    assert feasible(state, w, 0).tolist() == [fits]
    assert NodeResourcesFit().filter(state, w, 0, state.ready).tolist() == [fits]
    assert pools_fit(state.cluster, w).tolist() == [[fits]]  # what the autoscalers' what-ifs see


@pytest.mark.parametrize("case, gpus, tolerated", [
    ("empty pod without any extended resources, expect no change in tolerations", 0, False),
    ("pod with container with extended resource, expect toleration to be added", 1, True),
])
def test_extended_resource_toleration(case, gpus, tolerated):
    """kubernetes/kubernetes plugin/pkg/admission/extendedresourcetoleration/admission_test.go,
    TestAdmit, the case named `case` (the extended resource being nvidia.com/gpu): a pod gets the
    toleration {nvidia.com/gpu, Exists, NoSchedule} exactly when it requests GPUs, which shows as
    the node tainted nvidia.com/gpu:NoSchedule taking it or not."""
    state, w = tainted_world(["nvidia.com/gpu:NoSchedule"], gpus)
    assert feasible(state, w, 0).tolist() == [tolerated]


def test_cpu_pods_stay_off_tainted_gpu_pools_in_every_what_if():
    """A CPU-only pod is refused the tainted GPU pool by the filter, the autoscalers' pool check
    and the what-if packer (Snapshot, shared by the CA-like, Karpenter-like and merged loops)."""
    cluster = Cluster(
        node_types=[{"name": "g8", "cpu_milli": 64000, "memory_mib": 256000, "gpus": 8, "gpu_model": "A"},
                    {"name": "cpu", "cpu_milli": 32000, "memory_mib": 128000}],
        pools=[{"name": "gpu", "node_type": "g8", "max_size": 2, "taints": ["nvidia.com/gpu=present:NoSchedule"]},
               {"name": "cpu", "node_type": "cpu", "max_size": 2}])
    state = ClusterState(cluster)
    table = table_from_columns({"pod_id": ["c", "g"], "job_id": ["c", "g"], "submit_s": [0.0, 0.0],
                                "cpu_milli": [1000, 1000], "memory_mib": [1000, 1000], "gpu_count": [0, 1],
                                "gpu_milli": [0, 1000]})
    w = compile_workload(table, cluster)
    assert pools_fit(cluster, w).tolist() == [[False, True], [True, False]]  # pools x pods
    for n in (0, 2):  # a node of each pool, the GPU one first in first-fit order
        state.add_node(n, ready=True)
    plan = Snapshot(state, usable=state.ready).fit(w, [0, 1])
    assert plan is not None and [(p, n) for p, n, _ in plan] == [(0, 2), (1, 0)]
