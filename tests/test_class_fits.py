"""Cluster Autoscaler's filter-out-schedulable packing walks only the nodes a pod class fits
(harness/autoscalers/class_fits.py): the same pods found unplaced, so the same replay, as when it
walks every node that exists."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.autoscalers.class_fits import ClassFits
from harness.cluster import Cluster
from harness.metrics import jobs_frame, nodes_frame
from harness.sim import Simulation
from harness.status import ABSENT
from harness.workload import compile_workload
from tests import scenarios as sc
from tests.test_unbind_many import assert_same, snapshot


def test_a_class_fits_where_it_fitted_until_a_node_changes():
    """Hand count: two ready 8-GPU nodes of a pool of three slots, a class of 4-GPU pods (pod 0).
    Both fit it (8 free GPUs each). Six GPUs bound on node 0 leave 2: only node 1 fits; two
    more on node 1 leave 6: it still fits; node 0's six released: both again; a node added in
    slot 2 (booting): all three; node 1 removed: nodes 0 and 2."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=2, max_size=3)])
    sim = Simulation(compile_workload(sc.trace([{"gpu_count": 4}]), cl), cl, seed=0, horizon_s=1.0)
    st_, w = sim.state, sim.w
    fits = ClassFits(st_, w)
    assert fits.nodes(7, 0).tolist() == [True, True, False]
    six, two = np.arange(6), np.arange(2)
    st_.bind(0, 6000, 6144, six, 1000)
    assert fits.nodes(7, 0).tolist() == [False, True, False]
    st_.bind(1, 2000, 2048, two, 1000)
    assert fits.nodes(7, 0).tolist() == [False, True, False]
    st_.release(0, 6000, 6144, six, 1000)
    assert fits.nodes(7, 0).tolist() == [True, True, False]
    st_.add_node(2, ready=False)
    assert fits.nodes(7, 0).tolist() == [True, True, True]
    st_.release(1, 2000, 2048, two, 1000)
    st_.remove_node(1)
    assert st_.status[1] == ABSENT and fits.nodes(7, 0).tolist() == [True, False, True]


def walks_every_node(self, cls, pod):
    """The packing as it was: every node that exists may take a pod of any class."""
    return self.state.status != ABSENT


def replay(pods: list[dict], dra: bool, provisioning_request: bool, everywhere: bool) -> dict:
    types = [sc.node_type("h8", cpu_milli=16000), sc.node_type("h4", gpus=4)]
    pools = [sc.pool("a", "h8", min_size=1, max_size=3, boot_s=120.0), sc.pool("b", "h4", min_size=1, max_size=3)]
    cl = Cluster(node_types=types, pools=pools, name="golden", **({"dra": {}} if dra else {}))
    loop = sc.separate(provisioning_request=provisioning_request)
    with pytest.MonkeyPatch.context() as patch:
        if everywhere:
            patch.setattr(ClassFits, "nodes", walks_every_node)
        _, sim = sc.run(sc.trace(pods), cl, loop, horizon_s=6000.0)
    out = snapshot(sim)
    out["jobs"], out["nodes"] = jobs_frame(sim).to_dicts(), nodes_frame(sim).to_dicts()
    return out


jobs = st.lists(st.tuples(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8]), min_size=1, max_size=3),
                          st.sampled_from([1000, 6000]), st.integers(0, 1800), st.integers(60, 3000)),
                min_size=1, max_size=10)


@settings(max_examples=30, deadline=None)
@given(jobs=jobs, dra=st.booleans(), provisioning_request=st.booleans())
def test_the_packing_on_the_nodes_a_class_fits_ends_bit_for_bit_alike(jobs, dra, provisioning_request):
    """Jobs of 1-3 pods of 1-8 GPUs each (gangs, of one class or more: all or nothing under
    Coscheduling, pod by pod to the autoscaler, whole as a ProvisioningRequest) and 1 or 6 cores,
    arriving over 30 min on an 8-GPU node (16 cores) and a 4-GPU one, each pool growing to 3;
    with claims (DRA) or device columns, with ProvisioningRequests (bookings: pods packed alone)
    or without: the whole simulation as when the packing walks every node."""
    rows = [{"job_id": f"j{i}", "gpu_count": g, "cpu_milli": c, "submit_s": float(t), "duration_s": float(d),
             "min_member": len(gpus)} for i, (gpus, c, t, d) in enumerate(jobs) for g in gpus]
    assert_same(replay(rows, dra, provisioning_request, True), replay(rows, dra, provisioning_request, False))
