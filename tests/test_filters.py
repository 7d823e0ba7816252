"""The vectorized node filter means exactly what docs/model.md says.

`filters.feasible` reads only per-node summaries that `ClusterState` keeps incrementally
(free_whole, max_share, nvl_whole, numa_whole, both_whole, the cached `static_fit` mask), so
it is fast, and could silently drift from the meaning. `fits` below is a brute-force
reference written from the meaning alone: it reads the node x GPU matrix, free CPU and
memory, the node type and the node status, never a summary. Random states, built through
the real bind / release / pick_devices / add_node / make_ready / remove_node / bind_many
paths, must give the same mask, also under a `usable` mask, on `subset` and on `copy`.
`fits_count` must equal what placing pods one by one on each node alone achieves, and
`groups_that_fit` must keep exactly the racks whose nodes can together take a gang.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cluster import Cluster
from harness.filters import devices_taken, feasible, fits_count, groups_that_fit
from harness.state import WHOLE, ClusterState
from harness.status import ABSENT, BOOTING, READY
from harness.workload import compile_workload
from tests import scenarios as sc

SMALL = {"cpu_milli": 24000, "memory_mib": 96000}


def cluster() -> Cluster:
    """Node types that differ in every way the filter looks at: GPU count (0 to 16, above the
    12-GPU limit of the per-pattern summary tables), model, NVLink / NUMA layouts (nested,
    crossing, one domain), NIC per GPU, partition profiles."""
    return Cluster(
        node_types=[
            sc.node_type("a8", nvlink_domains=2, numa_domains=4, nic_per_gpu=True, partition_profiles=["1g", "3g"]),
            sc.node_type("b8", nvlink_domains=4, numa_domains=2, partition_profiles=["3g"], **SMALL),
            {"name": "g6", **SMALL, "gpus": 6, "gpu_model": "L4", "nvlink_domains": 2, "numa_domains": 3},
            {"name": "l4x4", **SMALL, "gpus": 4, "gpu_model": "L4", "numa_domains": 2, "nic_per_gpu": True},
            {"name": "a2", **SMALL, "gpus": 2, "gpu_model": "A100", "partition_profiles": ["1g"]},
            {"name": "x16", "cpu_milli": 128000, "memory_mib": 1024000, "gpus": 16, "gpu_model": "H100",
             "nvlink_domains": 2, "numa_domains": 4, "nic_per_gpu": True, "partition_profiles": ["1g", "3g"]},
            {"name": "cpu", "cpu_milli": 16000, "memory_mib": 64000}],
        pools=[sc.pool(name, name, max_size=3, nodes_per_rack=2, price_on_demand=1.0 + i)
               for i, name in enumerate(["a8", "b8", "g6", "l4x4", "a2", "x16", "cpu"])],
        partition_profiles={"1g": 143, "3g": 429}, name="filters")


CLUSTER = cluster()


def workload(cl: Cluster, pods: list[dict]):
    return compile_workload(sc.trace([{"job_id": f"j{i}", **pod} for i, pod in enumerate(pods)]), cl)


# ---- the reference ---------------------------------------------------------------------------
def fits(state: ClusterState, w, pod: int, n: int, usable: np.ndarray | None = None) -> bool:
    """Could node slot n take the pod now? From the meaning: the node is ready (or `usable`);
    CPU and memory room; for a GPU pod the node's model is in the pod's list (none = any);
    a share or partition needs one device with that much free milli, and a partition a node
    type offering the profile; whole GPUs need `gpus` fully free devices, all in one NVLink
    domain / NUMA domain / domain of both as claimed, and a NIC per GPU if claimed."""
    if not (state.status[n] == READY if usable is None else usable[n]):
        return False
    if state.cpu_free[n] < w.cpu[pod] or state.mem_free[n] < w.mem[pod]:
        return False
    k = int(w.gpus[pod])
    if k == 0:
        return True
    cl = state.cluster
    nt = cl.node_types[state.slot_type[n]]
    allowed = [m for i, m in enumerate(cl.models) if int(w.model_mask[pod]) >> i & 1]
    if allowed and nt.gpu_model not in allowed:
        return False
    profile = int(w.profile_bit[pod])
    if profile and cl.profiles[profile.bit_length() - 1] not in nt.partition_profiles:
        return False
    row = [int(v) for v in state.gpu_free[n, :state.gpu_cap[n]]]  # free milli of each device
    if w.nic[pod] and not nt.nic_per_gpu:
        return False
    milli = int(w.milli[pod])
    if milli < WHOLE:
        return any(free >= milli for free in row)
    nvl = nt.gpu_domains(nt.nvlink_domains) if w.nvlink[pod] else [0] * nt.gpus
    numa = nt.gpu_domains(nt.numa_domains) if w.numa[pod] else [0] * nt.gpus
    per_domain = Counter((int(a), int(b)) for a, b, free in zip(nvl, numa, row, strict=True) if free == WHOLE)
    return max(per_domain.values(), default=0) >= k


def reference_mask(state: ClusterState, w, pod: int, usable: np.ndarray | None = None) -> np.ndarray:
    return np.array([fits(state, w, pod, n, usable) for n in range(state.n_slots)], bool)


def bind_one(state: ClusterState, w, p: int, n: int) -> tuple:
    g = state.pick_devices(n, int(w.gpus[p]), int(w.milli[p]), bool(w.nvlink[p]), bool(w.numa[p]))
    state.bind(n, int(w.cpu[p]), int(w.mem[p]), g, int(w.milli[p]))
    return n, int(w.cpu[p]), int(w.mem[p]), g, int(w.milli[p])


#: placing stops here: a pod asking for nothing fits without end, tiny shares by the thousand
LIMIT = 100


def placed_alone(state: ClusterState, w, p: int, n: int, usable: np.ndarray | None = None) -> int:
    """How many pods shaped like p node n takes one after another (reference filter,
    pick_devices, bind), on a scratch copy, up to LIMIT."""
    scratch, count = state.copy(), 0
    while count < LIMIT and fits(scratch, w, p, n, usable):
        bind_one(scratch, w, p, n)
        count += 1
    return count


# ---- the reference, by hand ------------------------------------------------------------------
def test_reference_by_hand():
    """A g6 node: NVLink domains [0 0 0 1 1 1], NUMA domains [0 0 1 1 2 2]. With GPU 0 whole
    taken and GPU 4 holding a 400-milli share, the whole free GPUs are 1, 2, 3, 5: two in
    NVLink domain 0 (1, 2) and two in 1 (3, 5); NUMA 0 {1}, 1 {2, 3}, 2 {5}; NVLink-and-NUMA
    (0,0) {1}, (0,1) {2}, (1,1) {3}, (1,2) {5}. Free CPU 24000 - 4000 = 20000."""
    cl = CLUSTER
    state = ClusterState(cl)
    g6 = int(state.pool_offset[cl.type_index("g6")])
    state.add_node(g6, ready=True)
    state.bind(g6, 4000, 0, np.array([0]), WHOLE)
    state.bind(g6, 0, 0, np.array([4]), 400)
    assert state.gpu_free[g6, :6].tolist() == [0, 1000, 1000, 1000, 600, 1000]
    whole = {"gpu_milli": 1000, "cpu_milli": 1000}
    cases = [  # (pod, fits on the g6 node)
        ({"gpu_count": 0, "gpu_milli": 0, "cpu_milli": 20000}, True),
        ({"gpu_count": 0, "gpu_milli": 0, "cpu_milli": 20001}, False),
        ({"gpu_count": 4, **whole}, True),
        ({"gpu_count": 5, **whole}, False),
        ({"gpu_count": 2, "gpus_same_nvlink": True, **whole}, True),
        ({"gpu_count": 3, "gpus_same_nvlink": True, **whole}, False),
        ({"gpu_count": 2, "gpus_same_numa": True, **whole}, True),
        ({"gpu_count": 3, "gpus_same_numa": True, **whole}, False),
        ({"gpu_count": 1, "gpus_same_nvlink": True, "gpus_same_numa": True, **whole}, True),
        ({"gpu_count": 2, "gpus_same_nvlink": True, "gpus_same_numa": True, **whole}, False),
        ({"gpu_count": 1, "nic_per_gpu": True, **whole}, False),  # g6 has no NIC per GPU
        ({"gpu_count": 1, "gpu_models": ["L4"], **whole}, True),
        ({"gpu_count": 1, "gpu_models": ["H100", "A100"], **whole}, False),
        ({"gpu_count": 1, "gpu_milli": 1000, "cpu_milli": 20001}, False),
        ({"gpu_milli": 1000}, True),
        ({"gpu_milli": 999}, True),  # GPUs 1, 2, 3, 5 have 1000 free
        ({"gpu_milli": 600, "nic_per_gpu": True}, False),  # a share's NIC claim too: g6 has none
        ({"gpu_milli": 0, "gpu_partition": "1g"}, False),  # g6 offers no partition profile
    ]
    w = workload(cl, [pod for pod, _ in cases])
    for p, (pod, expected) in enumerate(cases):
        assert fits(state, w, p, g6) is expected, pod
        assert feasible(state, w, p)[g6] == expected, pod
    # after two more whole GPUs (1 and 2) go, only GPU 3 and 5 are whole; GPU 4 has 600 free
    state.bind(g6, 0, 0, np.array([1, 2]), WHOLE)
    w = workload(cl, [{"gpu_count": 2, **whole}, {"gpu_count": 2, "gpus_same_nvlink": True, **whole},
                      {"gpu_count": 2, "gpus_same_numa": True, **whole}, {"gpu_milli": 600},
                      {"gpu_milli": 601, "gpu_count": 1}, {"gpu_count": 3, **whole}])
    expected = [True, True, False, True, True, False]
    assert [fits(state, w, p, g6) for p in range(6)] == expected
    assert [feasible(state, w, p)[g6] for p in range(6)] == expected
    # the share that needs 601 milli fits on GPU 3 or 5, never on GPU 4 (600 free)
    state.bind(g6, 0, 0, np.array([3, 5]), WHOLE)
    expected = [False, False, False, True, False, False]
    assert [fits(state, w, p, g6) for p in range(6)] == expected
    assert [feasible(state, w, p)[g6] for p in range(6)] == expected
    # partitions: the a8 type offers 1g and 3g, b8 only 3g; booting nodes take nothing
    a8, b8 = (int(state.pool_offset[cl.type_index(t)]) for t in ("a8", "b8"))
    state.add_node(a8, ready=True)
    state.add_node(b8, ready=False)
    w = workload(cl, [{"gpu_milli": 0, "gpu_partition": "1g"}, {"gpu_milli": 0, "gpu_partition": "3g"}])
    assert [fits(state, w, 0, n) for n in (a8, b8)] == [True, False]
    usable = state.status != ABSENT
    assert [fits(state, w, p, b8, usable) for p in (0, 1)] == [False, True]
    assert state.status[b8] == BOOTING


# ---- random pods and states ------------------------------------------------------------------
KINDS = ("cpu", "whole", "nvlink", "numa", "both", "share", "partition")
MODELS = ([], ["H100"], ["L4"], ["A100"], ["L4", "A100"], ["H100", "L4"], ["H100", "T4"])


@st.composite
def pod_dicts(draw, kind: str | None = None):
    kind = kind or draw(st.sampled_from(KINDS))
    pod = {"cpu_milli": draw(st.sampled_from([0, 1000, 3000, 8000, 20000])),
           "memory_mib": draw(st.sampled_from([0, 1024, 30000, 90000])),
           "gpu_models": draw(st.sampled_from(MODELS)),
           # claims a share ignores (one device is in one domain) or, for NIC, does not need
           "gpus_same_nvlink": kind in ("nvlink", "both") or (kind not in KINDS[1:5] and draw(st.booleans())),
           "gpus_same_numa": kind in ("numa", "both") or (kind not in KINDS[1:5] and draw(st.booleans())),
           "nic_per_gpu": draw(st.booleans())}
    if kind == "cpu":
        return {**pod, "gpu_count": 0, "gpu_milli": 0}
    if kind == "share":
        # what other shares leave free too (1000 - 250, - 333, - 500, - 143, - 429): a device
        # with exactly the share free must count
        return {**pod, "gpu_milli": draw(st.sampled_from([1, 100, 250, 333, 500, 571, 600, 667, 750, 857, 999]))}
    if kind == "partition":
        return {**pod, "gpu_milli": 0, "gpu_partition": draw(st.sampled_from(["1g", "3g"]))}
    return {**pod, "gpu_count": draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16]))}


@st.composite
def states(draw):
    """A state reached through the real mutation paths: nodes added (ready or booting), pods
    bound on random fitting nodes with pick_devices, some released, some booting nodes made
    ready, some empty nodes removed, sometimes a bulk bind_many of one shape."""
    state = ClusterState(CLUSTER)
    for n in draw(st.sets(st.integers(0, state.n_slots - 1), min_size=3, max_size=16)):
        state.add_node(n, ready=draw(st.booleans()))
    pods = draw(st.lists(pod_dicts(), min_size=4, max_size=40))
    bound = []
    w = workload(CLUSTER, pods)
    present = state.status != ABSENT
    for p in range(w.n_pods):
        for _ in range(draw(st.integers(1, 4))):
            cand = [n for n in np.flatnonzero(present) if fits(state, w, p, n, present)]
            if cand:
                bound.append(bind_one(state, w, p, int(cand[draw(st.integers(0, len(cand) - 1))])))
    for i in sorted(draw(st.sets(st.integers(0, max(len(bound) - 1, 0)), max_size=len(bound) // 2)), reverse=True):
        state.release(*bound.pop(i))
    for n in np.flatnonzero(state.status == BOOTING):
        if draw(st.booleans()):
            state.make_ready(int(n))
    for n in np.flatnonzero((state.status != ABSENT) & (state.pods_on == 0)):
        if draw(st.integers(0, 3)) == 0:
            state.remove_node(int(n))
    if draw(st.booleans()):  # bulk bind of one shape, counts within what fits one by one
        w = workload(CLUSTER, [draw(pod_dicts())])
        present = np.flatnonzero(state.status != ABSENT)
        usable = state.status != ABSENT
        counts = np.array([min(draw(st.integers(0, 5)), placed_alone(state, w, 0, int(n), usable))
                           for n in present], np.int64)
        nodes, counts = present[counts > 0], counts[counts > 0]
        if len(nodes):
            state.bind_many(nodes, counts, int(w.cpu[0]), int(w.mem[0]), devices_taken(state, w, 0, nodes, counts))
    return state


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(state=states(), more=st.lists(pod_dicts(), max_size=4), data=st.data())
def test_feasible_equals_reference(state, more, data):
    pods = [data.draw(pod_dicts(kind)) for kind in KINDS] + more
    w = workload(CLUSTER, pods)
    n = state.n_slots
    usable = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    idx = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)), np.int64)
    sub = state.subset(idx)
    for p in range(w.n_pods):
        ref = reference_mask(state, w, p)
        assert (feasible(state, w, p) == ref).all(), (pods[p], np.flatnonzero(feasible(state, w, p) != ref))
        assert (feasible(state, w, p, usable) == reference_mask(state, w, p, usable)).all(), pods[p]
        assert (feasible(sub, w, p) == ref[idx]).all(), pods[p]
        assert (feasible(sub, w, p, usable[idx]) == reference_mask(state, w, p, usable)[idx]).all(), pods[p]
        assert (feasible(state, w, p, at=idx) == ref[idx]).all(), pods[p]
        assert (feasible(state, w, p, usable, at=idx) == reference_mask(state, w, p, usable)[idx]).all(), pods[p]
        assert feasible(state, w, p, usable, at=int(idx[0])) == reference_mask(state, w, p, usable)[idx[0]], pods[p]
    # a copy changed by one more pod: the copy follows its own rows, the original is untouched
    twin = state.copy()
    extra = workload(CLUSTER, [data.draw(pod_dicts())])
    cand = [m for m in range(n) if fits(twin, extra, 0, m)]
    if cand:
        bind_one(twin, extra, 0, cand[data.draw(st.integers(0, len(cand) - 1))])
    for p in range(w.n_pods):
        assert (feasible(twin, w, p) == reference_mask(twin, w, p)).all(), pods[p]
        assert (feasible(state, w, p) == reference_mask(state, w, p)).all(), pods[p]


@settings(SETTINGS, max_examples=80)
@given(state=states(), data=st.data())
def test_fits_count_and_groups_equal_one_by_one(state, data):
    n = state.n_slots
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    for kind in KINDS:
        pod = data.draw(pod_dicts(kind))
        w = workload(CLUSTER, [pod] * 6)
        count = fits_count(state, w, 0, mask)
        exact = np.array([placed_alone(state, w, 0, m, mask) for m in range(n)], np.int64)
        assert (np.minimum(count, LIMIT) == exact).all(), (pod, count, exact)
        # a gang of m pods of this shape: the racks whose nodes can together take m of them
        m = data.draw(st.integers(1, 6))
        racks = groups_that_fit(state, w, np.arange(m), mask, state.slot_rack)
        room = np.bincount(state.slot_rack, weights=np.minimum(exact, m), minlength=state.slot_rack.max() + 1)
        assert racks.tolist() == np.flatnonzero(room >= m).tolist(), (pod, m, count, exact)


# ---- the filter and the refusal rule agree on empty nodes --------------------------------------
@settings(max_examples=150, deadline=None)
@given(pod=pod_dicts())
def test_empty_node_fits_iff_its_type_could_ever_hold_the_pod(pod):
    """`never_fits` (compile time, `workload.type_fits`) and the filter on an empty ready node
    of each type say the same."""
    w = workload(CLUSTER, [pod])
    state = ClusterState(CLUSTER)
    for p in range(len(CLUSTER.pools)):
        state.add_node(int(state.pool_offset[p]), ready=True)
    some = feasible(state, w, 0).any()
    assert some == reference_mask(state, w, 0).any()
    assert some != bool(w.never_fits[0]), pod


def test_whole_gpu_partition_profile_needs_a_type_offering_it():
    cl = Cluster(node_types=[sc.node_type("mig", partition_profiles=["7g"]), sc.node_type("plain")],
                 pools=[sc.pool("mig", "mig"), sc.pool("plain", "plain")],
                 partition_profiles={"7g": 1000}, name="7g")
    state = ClusterState(cl)
    state.add_node(0, ready=True)  # pool mig, slot 0
    state.add_node(4, ready=True)  # pool plain, slot 4
    w = workload(cl, [{"gpu_milli": 0, "gpu_partition": "7g"}])
    assert reference_mask(state, w, 0)[[0, 4]].tolist() == [True, False]
    assert feasible(state, w, 0)[[0, 4]].tolist() == [True, False]


def test_share_with_nic_claim_needs_a_nic_per_gpu():
    """docs/model.md: `nic_per_gpu` needs a node type whose GPUs each have a NIC, shares too;
    so the filter and the refusal rule agree."""
    cl = Cluster(node_types=[sc.node_type("plain")], pools=[sc.pool("plain", "plain")], name="nic")
    state = ClusterState(cl)
    state.add_node(0, ready=True)
    w = workload(cl, [{"gpu_milli": 500, "nic_per_gpu": True}])
    assert not feasible(state, w, 0)[0] and not fits(state, w, 0, 0)
    assert w.never_fits[0]
