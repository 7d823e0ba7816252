"""The what-if packer's compiled walk (`filters.first_feasible`, `filters.first_fit`, kernels in
harness/packer.py) keeps to the filter's whole rule, not only the resources: pools whose taints
the pod does not tolerate and nodes outside the placement an admission layer keeps it to are
skipped, as `filters.feasible` skips them. On random states of a cluster with tainted pools and
a registered placement, the walk returns the first k nodes of `feasible`'s mask, and first fit
gives each node, in slot order, as many pods as it takes one after another (`placed_alone`,
the brute-force reference of tests/test_filters.py), until k are placed.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cluster import Cluster
from harness.filters import feasible, first_feasible, first_fit
from harness.state import ClusterState
from tests import scenarios as sc
from tests.test_filters import KINDS, bind_one, placed_alone, pod_dicts, workload

SMALL = {"cpu_milli": 24000, "memory_mib": 96000}


def tainted() -> Cluster:
    """A GPU pool every pod tolerates, one only GPU pods tolerate, one no pod tolerates."""
    return Cluster(
        node_types=[sc.node_type("a8", nvlink_domains=2, numa_domains=4, partition_profiles=["1g", "3g"], **SMALL),
                    {"name": "l4x4", **SMALL, "gpus": 4, "gpu_model": "L4", "numa_domains": 2},
                    {"name": "cpu", "cpu_milli": 16000, "memory_mib": 64000}],
        pools=[sc.pool("a8", "a8", max_size=4),
               sc.pool("a8-gpu", "a8", max_size=3, taints=["nvidia.com/gpu=present:NoSchedule"]),
               sc.pool("l4x4", "l4x4", max_size=3),
               sc.pool("l4x4-user", "l4x4", max_size=3, taints=["dedicated=user1:NoSchedule"]),
               sc.pool("cpu", "cpu", max_size=3),
               sc.pool("cpu-gpu", "cpu", max_size=2, taints=["nvidia.com/gpu=present:NoExecute"])],
        partition_profiles={"1g": 143, "3g": 429}, name="tainted")


TAINTED = tainted()


@st.composite
def states(draw):
    """Some nodes ready, pods bound on random nodes the filter passes, and a placement (a
    random mask of slots) registered for pods to be kept to."""
    state = ClusterState(TAINTED)
    for n in draw(st.sets(st.integers(0, state.n_slots - 1), min_size=4, max_size=state.n_slots)):
        state.add_node(n, ready=True)
    w = workload(TAINTED, draw(st.lists(pod_dicts(), min_size=2, max_size=20)))
    for p in range(w.n_pods):
        cand = np.flatnonzero(feasible(state, w, p))
        if len(cand):
            bind_one(state, w, p, int(cand[draw(st.integers(0, len(cand) - 1))]))
    n = state.n_slots
    placement = state.placement(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool))
    return state, placement


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=states(), kind=st.sampled_from(KINDS), kept=st.booleans(), data=st.data())
def test_packer_walk_keeps_to_the_filter(setup, kind, kept, data):
    state, placement = setup
    w = workload(TAINTED, [data.draw(pod_dicts(kind))])
    if kept:
        w = replace(w, placement=np.full(1, placement, np.int32))
    n = state.n_slots
    usable = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    k = data.draw(st.integers(1, 12))
    passing = np.flatnonzero(feasible(state, w, 0, usable))
    assert first_feasible(state, w, 0, usable, k).tolist() == passing[:k].tolist()
    nodes, got = [], []
    for m in passing.tolist():  # first fit by the reference: each node in turn takes what it can
        take = min(placed_alone(state, w, 0, m, usable), k - sum(got))
        if take:
            nodes.append(m)
            got.append(take)
    fit_nodes, fit_got = first_fit(state, w, 0, usable, k)
    assert fit_nodes.tolist() == nodes and fit_got.tolist() == got, (nodes, got)
