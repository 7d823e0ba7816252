"""Scale-down's drain check: a node may be drained only if its pods fit elsewhere, on nodes
the scheduler would let them use."""

from __future__ import annotations

import numpy as np
import pytest

from tests import scenarios as sc


@pytest.mark.parametrize("booked, drainable", [(-1, True), (0, True), (1, False), (-2, False)])
def test_drain_check_counts_only_nodes_the_pods_may_use(booked, drainable):
    # two ready 8-GPU nodes; job 0's one-GPU pod lands on one of them; the other node is free,
    # booked for job 0 itself, booked for another job (a ProvisioningRequest), or tainted
    cl = sc.cluster([sc.node_type("gpu8")], [sc.pool("a", "gpu8", min_size=2)])
    loop = sc.separate()
    _, sim = sc.run(sc.trace([{}]), cl, loop, horizon_s=60.0)
    n = int(sim.pod_node[0])
    other = 1 - n
    booked_for = np.full(sim.state.n_slots, -1)
    booked_for[other] = booked
    sd = loop.autoscaler.scale_down
    assert sd.removable(np.array([n]), booked_for)[0][0] == drainable
    assert sd.removable(np.array([n]))[0][0]  # no bookings: the other node is room


def test_drain_check_packs_the_pods_together():
    # three 4-GPU pods on two 8-GPU nodes: one node holds two of them, the other one pod and
    # 4 free GPUs; each of the two pods would fit there alone, both together do not
    cl = sc.cluster([sc.node_type("gpu8")], [sc.pool("a", "gpu8", min_size=2)])
    loop = sc.separate()
    _, sim = sc.run(sc.trace([{"gpu_count": 4}] * 3), cl, loop, horizon_s=60.0)
    full = int(np.argmax(sim.state.pods_on[:2]))
    assert sim.state.pods_on[full] == 2 and sim.state.free_whole[1 - full] == 4
    assert not loop.autoscaler.scale_down.removable(np.array([full]))[0][0]
