"""A Kueue flavor constrains placement: once admitted to a flavor, a job's pods use only the
flavor's pools (Kueue writes the flavor's node labels into the pods' nodeSelector: upstream
kubernetes-sigs/kueue pkg/podset/podset_test.go TestFromAssignment "single flavor"), for the
scheduler and for every autoscaler (Cluster Autoscaler, the merged planner, Karpenter).

The clusters have two pools of one 8-GPU node type: `a` cheap, `b` dear. A loop that ignores
the flavor places a job of flavor b on a's nodes, or buys a's.
"""

from __future__ import annotations

import pytest

from harness.autoscalers.karpenter import KarpenterAutoscaler
from harness.cluster import Cluster
from harness.kueue.loop import KueueLoop
from harness.loops.separate import SeparateLoops
from harness.scheduler import Scheduler
from harness.scores import LeastAllocated
from tests import scenarios as sc

HOUR = 3600.0


def section(queues: dict[str, str]) -> dict:
    """Flavor fa = pool a, fb = pool b; a ClusterQueue (and LocalQueue) per entry of `queues`,
    name -> its one flavor, with quota for everything."""
    return {"resource_flavors": [{"name": "fa", "pools": ["a"]}, {"name": "fb", "pools": ["b"]}],
            "cluster_queues": [{"name": q, "flavors": [{"name": f, "nominal": {"gpu": 16, "cpu": 1000,
                                                                                "memory": 10000}}]}
                               for q, f in queues.items()],
            "local_queues": [{"name": q, "cluster_queue": q} for q in queues]}


def two_pools(queues: dict[str, str], ready_in_a: int) -> Cluster:
    return Cluster(node_types=[sc.node_type("h8")], autoscaling=True, name="golden", kueue=section(queues),
                   pools=[sc.pool("a", "h8", max_size=2, min_size=ready_in_a, price_on_demand=1.0),
                          sc.pool("b", "h8", max_size=2, price_on_demand=2.0)])


def karpenter():
    return SeparateLoops(Scheduler(LeastAllocated()), KarpenterAutoscaler(), name="separate_karpenter")


LOOPS = {"separate": sc.separate, "merged": sc.merged, "separate_karpenter": karpenter}


def pools_of(sim, job: str) -> set[int]:
    """The pools of the nodes the job's pods ran on."""
    j = sim.w.job_id.tolist().index(job)
    return set(sim.state.slot_pool[sim.pod_node[sim.w.job_pods[j]]].tolist())


@pytest.mark.parametrize("loop", LOOPS)
def test_golden_a_job_of_a_flavor_runs_and_is_bought_only_in_its_pools(loop):
    """Job J (1 GPU, t=0, 1 h) of queue q, whose one flavor is fb (pool b). Pool a has a ready
    node with room and is the cheaper pool to buy from; b has no node. J must not take a's
    node, and the loop must buy b's: one node of b, none of a. By hand (separate: Cluster
    Autoscaler scans at 0 and asks b for a node, which boots in 300 s; merged: it plans J on
    a new node of b at 0): J starts at 300. Karpenter launches after its batch window, so its
    start is not pinned here, only where it ran and what it bought.
    Failed before flavors constrained placement: J started at 0 on a's ready node."""
    cl = two_pools({"q": "fb"}, ready_in_a=1)
    trace = sc.trace([{"job_id": "J", "queue": "q", "submit_s": 0.0, "duration_s": HOUR}])
    row, sim = sc.run(trace, cl, KueueLoop(LOOPS[loop]()), horizon_s=3 * HOUR)
    assert pools_of(sim, "J") == {1}
    assert sorted(r.pool for r in sim.nodes) == [0, 1]  # a's initial node, and the one bought of b
    if loop != "separate_karpenter":
        assert sim.job_started[0] == 300.0


def test_golden_cluster_autoscaler_keeps_pods_of_two_flavors_apart():
    """Two identical 1-GPU jobs at t=0: JA of flavor fa (pool a, cheap), JB of fb (pool b),
    no node anywhere. Alike in Cluster Autoscaler's view, they are still not one equivalence
    group: kept to different pools, each pool helps one. By hand, with the price expander:
    the scan at 0 asks a for a node (the cheaper option, it helps JA); the scan at 10 finds
    JA fits a's booting node but JB does not (not its pool) and asks b for one. JA starts at
    300, JB at 310, each in its own pool.
    Failed with the two pods grouped by their view alone (the group packed as its first pod,
    of flavor fa): JB counted as fitting a's booting node, was bought a node of b only at the
    scan of 300 and started at 600."""
    cl = two_pools({"qa": "fa", "qb": "fb"}, ready_in_a=0)
    trace = sc.trace([{"job_id": "JA", "queue": "qa", "submit_s": 0.0, "duration_s": HOUR},
                      {"job_id": "JB", "queue": "qb", "submit_s": 0.0, "duration_s": HOUR}])
    _, sim = sc.run(trace, cl, KueueLoop(sc.separate()), horizon_s=3 * HOUR)
    assert dict(zip(sim.w.job_id.tolist(), sim.job_started.tolist(), strict=True)) == {"JA": 300.0, "JB": 310.0}
    assert pools_of(sim, "JA") == {0} and pools_of(sim, "JB") == {1}
    # kept to different pools, the two pods are no longer of one shape
    assert sim.w.shape[0] != sim.w.shape[1]
