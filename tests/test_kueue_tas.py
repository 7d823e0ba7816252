"""Kueue TAS (harness/kueue/tas.py) in a replay: a rack-local gang is assigned a rack at
admission from the free capacity Kueue sees, its pods are all bound there; a gang no rack can
hold is not admitted until capacity changes. Hand-computed numbers; bad input refused.

Clusters are static (autoscaling off), one rack per pool (pools of 8-GPU nodes), all in one
block; flavors: fa = pool a, fb = pool b, fab = both with topology [block, rack, node].
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.cluster import Cluster
from harness.errors import ConfigError
from harness.kueue.loop import KueueLoop
from harness.kueue.tas import Topology
from harness.status import PendingReason
from tests import scenarios as sc

HOUR = 3600.0
TOPOLOGY = ["block", "rack", "node"]


def section(queues: dict[str, str], topology=TOPOLOGY) -> dict:
    """A ClusterQueue (and LocalQueue) per entry of `queues`, name -> its one flavor."""
    return {"resource_flavors": [{"name": "fa", "pools": ["a"]}, {"name": "fb", "pools": ["b"]},
                                 {"name": "fab", "pools": ["a", "b"], "topology": topology}],
            "cluster_queues": [{"name": q, "flavors": [{"name": f, "nominal": {"gpu": 64, "cpu": 1000,
                                                                                "memory": 10000}}]}
                               for q, f in queues.items()],
            "local_queues": [{"name": q, "cluster_queue": q} for q in queues]}


def cluster(nodes_per_pool: int, queues: dict[str, str], topology=TOPOLOGY) -> Cluster:
    pools = [sc.pool(p, "h8", max_size=nodes_per_pool, min_size=nodes_per_pool, nodes_per_rack=nodes_per_pool,
                     block="b0") for p in ("a", "b")]
    return Cluster(node_types=[sc.node_type("h8")], autoscaling=False, name="golden", pools=pools,
                   kueue=section(queues, topology))


def pod(job: str, q: str, gpus: int, submit_s: float, duration_s: float = HOUR, **kw) -> dict:
    return {"job_id": job, "queue": q, "gpu_count": gpus, "submit_s": submit_s, "duration_s": duration_s, **kw}


def gang(job: str, q: str, pods: int, gpus: int, submit_s: float) -> list[dict]:
    return [pod(job, q, gpus, submit_s, min_member=pods, gang_locality="rack") for _ in range(pods)]


def racks_of(sim, job: str) -> set[int]:
    j = sim.w.job_id.tolist().index(job)
    return set(sim.state.slot_rack[sim.pod_node[sim.w.job_pods[j]]].tolist())


def started(sim) -> dict[str, float]:
    return dict(zip(sim.w.job_id.tolist(), sim.job_started.tolist(), strict=True))


@pytest.mark.parametrize("tas, rack", [(True, 1), (False, 0)])
def test_golden_a_gang_is_assigned_a_rack_at_admission_and_bound_there(tas, rack):
    """Racks 0 (pool a) and 1 (pool b) of two 8-GPU nodes each. L (4 GPUs, flavor fb) runs on
    a node of b from 0. Gang G (2 pods x 4 GPUs, rack-local, flavor fab) arrives at 10. Kueue
    TAS counts what each rack can take of G's pods: rack 0 two empty nodes, 2 + 2 = 4; rack
    1 one empty node and L's, 2 + 1 = 3; best fit for 2: rack 1. G is admitted at 10 kept to
    rack 1, and both its pods start there at 10. Without TAS the scheduler takes the first
    rack that fits, rack 0."""
    cl = cluster(2, {"ql": "fb", "qg": "fab"})
    trace = sc.trace([pod("L", "ql", 4, 0.0), *gang("G", "qg", 2, 4, 10.0)])
    row, sim = sc.run(trace, cl, KueueLoop(sc.separate(), tas=tas), horizon_s=3 * HOUR)
    assert started(sim) == {"G": 10.0, "L": 0.0}
    assert racks_of(sim, "G") == {rack} and racks_of(sim, "L") == {1}
    assert row["admission_wait_mean_s_qg"] == 0.0


def test_golden_a_gang_no_rack_can_hold_waits_for_admission_until_capacity_frees():
    """One node per rack. L1 (8 GPUs, fa) fills rack 0 for 1 h, L2 (8 GPUs, fb) rack 1 for
    2 h, both from 0. Gang G (2 x 4 GPUs, rack-local, fab; its quota has room) arrives at 10:
    no rack can take it, so it is not admitted (set aside, BestEffortFIFO). L1 ends at 3600:
    capacity changed, G's queue is tried again (upstream's TAS node controller requeues
    inadmissible workloads), rack 0 takes 2: G is admitted and starts at 3600 in rack 0. By
    hand: admission wait 3590 s; G's two pods wait 2 x 3590 = 7180 pod-s not admitted.
    Without TAS G is admitted at 10 and waits in the scheduler's queue instead."""
    cl = cluster(1, {"q1": "fa", "q2": "fb", "qg": "fab"})
    trace = sc.trace([pod("L1", "q1", 8, 0.0), pod("L2", "q2", 8, 0.0, 2 * HOUR), *gang("G", "qg", 2, 4, 10.0)])
    row, sim = sc.run(trace, cl, KueueLoop(sc.separate(), tas=True), horizon_s=4 * HOUR)
    assert started(sim)["G"] == HOUR and racks_of(sim, "G") == {0}
    assert row["admission_wait_mean_s_qg"] == 3590.0 and row["pending_s_not_admitted"] == 7180.0
    row, sim = sc.run(trace, cl, KueueLoop(sc.separate(), tas=False), horizon_s=4 * HOUR)
    assert started(sim)["G"] == HOUR and row["admission_wait_mean_s_qg"] == 0.0
    assert row["pending_s_not_admitted"] == 0.0


def test_a_job_without_a_locality_claim_is_not_assigned_a_topology():
    """TAS on, job J (1 pod, no gang locality, flavor fab) is admitted as without TAS: kept to
    the flavor's pools, not to a domain (`Workload.placement` spans both racks)."""
    cl = cluster(1, {"qj": "fab"})
    _, sim = sc.run(sc.trace([pod("J", "qj", 1, 0.0)]), cl, KueueLoop(sc.separate(), tas=True), horizon_s=2 * HOUR)
    assert sim.job_started[0] == 0.0
    assert sim.state.allowed[sim.w.placement[0]].sum() == 2


def test_preferred_goes_up_a_level_before_spreading_over_domains():
    """Ours (no upstream case tells the two apart): racks b1/r1 2, b1/r2 2, b2/r1 3 pods; 4
    pods, rack preferred. No rack holds 4; block b1 does (4, b2 only 3): the pods go to b1's
    two racks, not to b2/r1's 3 plus one more rack, as spreading over racks at once would."""
    counts = np.array([2, 2, 3])
    paths = np.array([[0, 0], [0, 1], [1, 2]])
    assert sorted(Topology(paths).assign(counts, 1, 4, required=False)) == [(0, 2), (1, 2)]
    assert Topology(paths).assign(counts, 1, 4, required=True) is None


LEVELS_RULE = "must list distinct levels of block > rack > node, top first"


@pytest.mark.parametrize("topology, rule", [(["rack", "block"], LEVELS_RULE), (["zone"], LEVELS_RULE), ([], LEVELS_RULE),
                                            (["rack", "rack"], LEVELS_RULE), ("rack", "expected a list")])
def test_a_bad_flavor_topology_is_refused_by_key(topology, rule):
    with pytest.raises(ConfigError) as err:
        cluster(1, {"q": "fab"}, topology=topology)
    assert err.value.where == "cluster.kueue.resource_flavors[2].topology" and rule in err.value.rule


def test_a_bad_tas_switch_is_refused_by_key():
    with pytest.raises(ConfigError) as err:
        KueueLoop(sc.separate(), tas="yes")
    assert err.value.where == "loop.tas"


def test_pods_not_admitted_for_their_topology_say_so():
    """G of the waiting case, at 100 s: its pods are pending as not admitted."""
    cl = cluster(1, {"q1": "fa", "q2": "fb", "qg": "fab"})
    trace = sc.trace([pod("L1", "q1", 8, 0.0), pod("L2", "q2", 8, 0.0), *gang("G", "qg", 2, 4, 10.0)])
    _, sim = sc.run(trace, cl, KueueLoop(sc.separate(), tas=True), horizon_s=100.0)
    g = sim.w.job_pods[sim.w.job_id.tolist().index("G")]
    assert (sim.pod_reason[g] == PendingReason.NOT_ADMITTED).all()
