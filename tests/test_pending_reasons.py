"""Golden pending reasons: one static node, one pod that cannot be placed, one hour.

Each case builds the situation by hand, so the reason (and its 3,600 pending seconds) follows
from the definitions in harness/metrics.py `PendingReason`: FRAGMENTATION only when a ready
node could hold the pod by its free GPU milli in total and the pod could use that node at all.
"""

from __future__ import annotations

import pytest

from harness.cluster import Cluster
from tests import scenarios as sc

H = 3600.0
SHARE = {"gpu_count": 1, "gpu_milli": 600, "duration_s": 10 * H}


def static(**node) -> Cluster:
    """One ready node of type n8; a type no pool offers holds every pod below, so none is
    refused as impossible (those never wait)."""
    other = sc.node_type("other", gpu_model="A100", partition_profiles=["1g"])
    return Cluster(node_types=[sc.node_type("n8", **node), other],
                   pools=[sc.pool("p", "n8", min_size=1, max_size=1)],
                   partition_profiles={"1g": 143}, autoscaling=False, name="reasons")


def pending(cl: Cluster, pods: list[dict]) -> dict:
    row, _ = sc.run(sc.trace(pods), cl, sc.separate(), horizon_s=H)
    return {k.removeprefix("pending_s_"): v for k, v in row.items() if k.startswith("pending_s_") and v}


def test_whole_gpus_split_by_shares_are_fragmentation():
    # six 600-milli shares take one GPU each (best fit: 400 left on each): 4,400 milli free in
    # total, only two whole GPUs; a 3-GPU pod fits the total but not the devices
    assert pending(static(), [SHARE] * 6 + [{"gpu_count": 3}]) == {"fragmentation": H}


def test_too_little_free_in_total_is_shortage():
    # seven shares: 2,800 + 1,000 = 3,800 milli free, not enough for 4 GPUs even if merged
    assert pending(static(), [SHARE] * 7 + [{"gpu_count": 4}]) == {"shortage": H}


def test_a_partition_profile_the_node_type_lacks_is_shortage_not_fragmentation():
    # an empty H100 node without MIG profiles: all its milli is free, yet no 1g slice exists
    assert pending(static(), [{"gpu_count": 1, "gpu_milli": 0, "gpu_partition": "1g"}]) == {"shortage": H}


def test_a_topology_claim_the_free_gpus_cannot_meet_is_topology():
    # four NVLink domains of two GPUs: eight GPUs free, no four in one domain
    assert pending(static(nvlink_domains=4), [{"gpu_count": 4, "gpus_same_nvlink": True}]) == {"topology": H}


@pytest.mark.parametrize("models", [["A100"], ["A100", "L4"]])
def test_a_gpu_model_the_node_lacks_is_shortage(models):
    assert pending(static(), [{"gpu_count": 1, "gpu_models": models}]) == {"shortage": H}
