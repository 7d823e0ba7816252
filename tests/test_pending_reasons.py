"""Golden pending reasons: one static node, one pod that cannot be placed, one hour.

Each case builds the situation by hand, so the reason (and its 3,600 pending seconds) follows
from the definitions in harness/metrics.py `PendingReason`: FRAGMENTATION only when a ready
node could hold the pod by its free GPU milli in total and the pod could use that node at all.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cluster import Cluster
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc

H = 3600.0
CLUSTER = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=1, max_size=1)], autoscaling=False)
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


# ---- many pods' reasons at once: the counts as numpy's bincounts gave them ---------------------
@settings(max_examples=100, deadline=None)
@given(before=st.lists(st.integers(-1, 5), min_size=12, max_size=12), data=st.data())
def test_set_reasons_moves_the_counts_as_a_recount(before, data):
    """Random reasons before (-1: none) on 12 pods; a set of distinct pods (some paused
    placeholders, never counted) given one reason or one each: every pod's reason and the count
    per reason end as a count from scratch over the reasons (the compiled `set_each` and
    `set_all` in place of numpy's fancy writes and bincounts)."""
    sim = Simulation(compile_workload(sc.trace([{}] * 12), CLUSTER), CLUSTER, seed=0, horizon_s=1.0)
    acct = sim.acct
    paused = np.array(data.draw(st.lists(st.booleans(), min_size=12, max_size=12)))
    acct.pause = paused if paused.any() else None
    acct.reason[:] = before
    acct.reason_count[:] = np.bincount(np.array(before)[np.array(before) >= 0], minlength=len(acct.reason_count))
    pods = np.array(data.draw(st.lists(st.integers(0, 11), unique=True, max_size=12)), np.int64)
    one = data.draw(st.booleans())
    reasons = data.draw(st.integers(-1, 5)) if one else np.array(
        data.draw(st.lists(st.integers(-1, 5), min_size=len(pods), max_size=len(pods))), np.int8)
    expected, new = np.array(before, np.int8), np.broadcast_to(np.asarray(reasons, np.int8), pods.shape)
    keep = np.ones(len(pods), bool) if acct.pause is None else ~paused[pods]
    expected[pods[keep]] = new[keep]
    acct.set_reasons(pods, reasons)
    np.testing.assert_array_equal(acct.reason, expected)
    np.testing.assert_array_equal(acct.reason_count,
                                  np.bincount(expected[expected >= 0], minlength=len(acct.reason_count)))
