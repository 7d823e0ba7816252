"""The device kernels of one node (harness/node_devices.py), through ClusterState: which GPUs a pod
takes, and the node's summaries as pods come and go. An 8-GPU node in 2 NVLink domains (GPUs 0-3,
4-7) and 4 NUMA domains (0-1, 2-3, 4-5, 6-7); expectations worked out by hand from the rules in
`ClusterState.pick_devices` and `_refresh`'s docstrings."""

from __future__ import annotations

import numpy as np
import pytest

from harness.state import WHOLE, ClusterState
from tests import scenarios as sc


@pytest.fixture
def st() -> ClusterState:
    cl = sc.cluster([sc.node_type("h8", nvlink_domains=2, numa_domains=4)], [sc.pool("h", "h8", min_size=1)])
    state = ClusterState(cl)
    state.add_node(0, ready=True)
    return state


def take(st: ClusterState, gpus: list[int], milli: int = WHOLE) -> None:
    st.bind(0, 1000, 1024, np.array(gpus, np.int64), milli)


def test_whole_gpus_are_the_first_free_ones(st):
    take(st, [0, 2])
    assert st.pick_devices(0, 3, WHOLE, False, False).tolist() == [1, 3, 4]


def test_a_share_takes_the_fullest_gpu_it_fits_lowest_index_on_ties(st):
    take(st, [1], 600)  # GPU 1: 400 free
    take(st, [5], 300)  # GPU 5: 700 free
    take(st, [6], 300)  # GPU 6: 700 free
    assert st.pick_devices(0, 1, 500, False, False).tolist() == [5]  # 400 is too little; 700 twice: GPU 5
    assert st.pick_devices(0, 1, 400, False, False).tolist() == [1]


def test_a_claim_takes_the_lowest_domain_with_enough(st):
    take(st, [0, 1])  # NVLink domain 0 has 2 whole GPUs left (2, 3), domain 1 has 4
    assert st.pick_devices(0, 3, WHOLE, True, False).tolist() == [4, 5, 6]
    assert st.pick_devices(0, 2, WHOLE, True, False).tolist() == [2, 3]
    take(st, [4])  # NUMA domains: 0 none, 1 (2, 3) two, 2 (5) one, 3 (6, 7) two
    assert st.pick_devices(0, 2, WHOLE, False, True).tolist() == [2, 3]
    take(st, [3])  # NVLink and NUMA together: (2), (5), (6, 7)
    assert st.pick_devices(0, 2, WHOLE, True, True).tolist() == [6, 7]


def test_summaries_follow_binds_and_releases(st):
    def summary():
        return [int(a[0]) for a in (st.free_whole, st.max_share, st.nvl_whole, st.numa_whole, st.both_whole)]

    assert summary() == [8, WHOLE, 4, 2, 2]
    take(st, [0, 2, 4, 6])  # one GPU taken in each NUMA domain
    assert summary() == [4, WHOLE, 2, 1, 1]
    take(st, [1, 3, 5], 250)
    assert summary() == [1, WHOLE, 1, 1, 1]  # GPU 7 is still whole
    assert st.gpu_used[0] == 4 * WHOLE + 3 * 250 and st.pods_on[0] == 2
    st.release(0, 1000, 1024, np.array([0, 2, 4, 6], np.int64), WHOLE)
    assert summary() == [5, WHOLE, 3, 2, 2]  # GPUs 0, 2, 4, 6, 7 whole: NUMA domain 3 (6, 7) whole again
    assert st.cpu_free[0] == st.cpu_cap[0] - 1000 and st.alloc_ready_milli == 3 * 250


def test_over_allocation_is_refused(st):
    take(st, [0], 800)
    with pytest.raises(AssertionError, match="over-allocated"):
        take(st, [0], 300)
