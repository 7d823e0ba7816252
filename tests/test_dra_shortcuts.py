"""The allocator's shortcuts give the answers of the plain allocator: a claim set counted on a
node one pod after another (one compiled call for every node type; a one-device claim scanning on
from the device the pod before took) takes the pods and devices that `allocate` then `commit`,
pod by pod, would; and an answer cached by node-state stamp is the answer computed afresh."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hydra.utils import instantiate
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.config import compose
from harness.dra import allocator as al
from harness.dra import translate as tr
from harness.dra.allocator import commit_at
from harness.dra.layer import Arrays, ClaimedGpus, DeviceLayer

CLUSTER = instantiate(compose("config", []).cluster, _convert_="all")
LAYER = DeviceLayer(CLUSTER.node_types, CLUSTER.partition_profiles, {})
SHAPES = [  # (gpus, milli, profile_bit, model_mask, nvlink, numa, nic): claims today's columns make
    (1, 1000, 0, 0, False, False, False), (2, 1000, 0, 0, False, True, True), (1, 250, 0, 0, False, False, False),
    (1, 500, 0, 0, False, False, False), (4, 1000, 0, 0, True, False, False), (1, 143, 1, 0, False, False, False),
    (1, 286, 2, 0, False, False, False), (8, 1000, 0, 0, True, False, False),
]
CLAIMS = [(tr.claim_of(CLUSTER.models, CLUSTER.profiles, *s),) for s in SHAPES]


def commit(arrays: Arrays, gpus: ClaimedGpus, t: int, n: int, sign: int) -> None:
    """A pod's allocation taken (sign 1) on node n of type t, or given back (-1), on the device
    arrays alone: what `ClusterState.bind` and `release` do to them in `take_claimed`."""
    tc = gpus.typed
    commit_at(gpus.pairs, sign, n, t, *arrays, tc.capacity, tc.take_cap, tc.consumes, tc.multi)


def one_by_one(t: int, claims: tuple, state: al.DeviceState, bound: int,
               compiled: al.CompiledClaims | None = None) -> tuple[int, np.ndarray]:
    """Pods allocated then committed one at a time on row 0 (type t): how many, and the GPU milli
    (`compiled`: the claims compiled otherwise, as `without` does)."""
    dev = LAYER.devices[t]
    cc, milli = LAYER.compiled(claims, t)
    cc = cc if compiled is None else compiled
    view = al.DeviceState(state.taken[:, :dev.n_devices], state.cap_left[:, :dev.n_devices, :len(dev.capacities)],
                          state.counter_left[:, :len(dev.counters)])
    gpus = np.zeros(8, np.int64)
    for got in range(bound):
        ok, found = al.allocate(cc, dev, view, np.zeros(1, np.int64))
        a = found[0]
        if not ok[0] or a is None:
            return got, gpus
        al.commit(cc, dev, view, 0, a)
        for o, devices in zip(a.option, a.devices, strict=True):
            for d in devices:
                if LAYER.gpu_index[t][d] >= 0:
                    gpus[LAYER.gpu_index[t][d]] += milli[o, d]
    return bound, gpus


def fresh(t: int) -> al.DeviceState:
    taken, cap, counters = LAYER.arrays(1)
    LAYER.reset(taken, cap, counters, np.zeros(1, np.int64), 0, t)
    return al.DeviceState(taken, cap, counters)


@settings(deadline=None, max_examples=60)
@given(t=st.integers(0, len(LAYER.devices) - 1), before=st.lists(st.tuples(st.integers(0, len(CLAIMS) - 1),
                                                                            st.integers(0, 6)), max_size=4),
       c=st.integers(0, len(CLAIMS) - 1), bound=st.integers(0, 40))
def test_counting_on_a_node_is_allocating_pod_by_pod(t, before, c, bound):
    plain, typed = fresh(t), fresh(t)
    for i, k in before:  # some pods of other shapes first, alike on both
        one_by_one(t, CLAIMS[i], plain, k)
        al.take_typed(LAYER.typed(CLAIMS[i])[0], typed, np.array([t], np.int32), np.array([k]), 8)
    assert all(np.array_equal(a, b) for a, b in zip((plain.taken, plain.cap_left, plain.counter_left),
                                                    (typed.taken, typed.cap_left, typed.counter_left), strict=True))
    got, gpus = one_by_one(t, CLAIMS[c], plain, bound)
    tc, cache = LAYER.typed(CLAIMS[c])
    stamp = np.array([10_000_000 + len(before) * 1000 + bound])  # a stamp this test alone uses per state
    slot_type = np.array([t], np.int32)  # as ClusterState.slot_type
    counted = al.count_typed(tc, al.FitCache.empty(), typed, stamp, slot_type, np.zeros(1, np.int64), np.array([bound]))
    taken_got, taken_gpus = al.take_typed(tc, typed, slot_type, np.array([bound]), 8)
    assert counted[0] == taken_got[0] == got
    assert np.array_equal(taken_gpus[0], gpus)
    assert np.array_equal(plain.taken, typed.taken) and np.array_equal(plain.counter_left, typed.counter_left)


@settings(deadline=None, max_examples=40)
@given(t=st.integers(0, len(LAYER.devices) - 1), c=st.integers(0, len(CLAIMS) - 1), k=st.integers(0, 6),
       bounds=st.lists(st.integers(0, 40), min_size=1, max_size=5))
def test_a_count_cached_by_stamp_is_the_count_afresh(t, c, k, bounds):
    state = fresh(t)
    al.take_typed(LAYER.typed(CLAIMS[0])[0], state, np.array([t], np.int32), np.array([k]), 0)
    tc, _ = LAYER.typed(CLAIMS[c])
    cache, stamp, slot_type, rows = al.FitCache.empty(), np.array([123]), np.array([t], np.int32), np.zeros(1, np.int64)
    for b in bounds:  # the same state asked again and again, with other bounds
        cached = al.count_typed(tc, cache, state, stamp, slot_type, rows, np.array([b]))
        afresh = al.count_typed(tc, al.FitCache.empty(), state, stamp, slot_type, rows, np.array([b]))
        assert cached[0] == afresh[0]


@settings(deadline=None, max_examples=60)
@given(t=st.integers(0, len(LAYER.devices) - 1), c=st.integers(0, len(CLAIMS) - 1), k=st.integers(0, 4),
       bound=st.integers(0, 40), marks=st.lists(st.integers(0, 3), min_size=LAYER.width, max_size=LAYER.width),
       tolerates=st.lists(st.integers(0, 3), min_size=1, max_size=4))
def test_taint_marks_in_the_compiled_calls_are_the_claims_compiled_without_the_blocked_devices(t, c, k, bound, marks,
                                                                                             tolerates):
    """Device taints as the compiled calls take them (per-slot marks, per-option tolerated bits)
    answer as the per-node compile `without` the blocked (option, device) pairs does."""
    claims = CLAIMS[c]
    tc = LAYER.typed(claims)[0]
    tolerated = np.resize(np.array(tolerates, np.int64), tc.match.shape[1])
    tc = replace(tc, tolerated=tolerated)
    mark = np.array([marks], np.int64)
    plain, typed = fresh(t), fresh(t)
    one_by_one(t, CLAIMS[0], plain, k)  # some untainted pods first, alike on both
    al.take_typed(LAYER.typed(CLAIMS[0])[0], typed, np.array([t], np.int32), np.array([k]), 8)
    dev = LAYER.devices[t]
    cc = al.without(LAYER.compiled(claims, t)[0], (mark[0, None, :dev.n_devices] & ~tolerated[:, None]) != 0)
    view = al.DeviceState(plain.taken[:, :dev.n_devices], plain.cap_left[:, :dev.n_devices, :len(dev.capacities)],
                          plain.counter_left[:, :len(dev.counters)])
    ok, found = al.allocate(cc, dev, view, np.zeros(1, np.int64))
    slot_type, one, stamp = np.array([t], np.int32), np.ones(1, bool), np.array([20_000_000])
    assert al.feasible_typed(tc, al.FitCache.empty(), typed, stamp, slot_type, np.zeros(1, np.int64), one, one,
                             np.ones(1, np.int64), np.ones(1, np.int64), 0, 0, mark)[0] == ok[0]
    if ok[0]:
        a = found[0]
        assert a is not None
        pairs = sorted((o, d) for o, devices in zip(a.option, a.devices, strict=True) for d in devices)
        assert sorted(map(tuple, al.allocate_typed(tc, typed, t, 0, mark)[0].tolist())) == pairs
    got, gpus = one_by_one(t, claims, plain, bound, cc)
    counted = al.count_typed(tc, al.FitCache.empty(), typed, stamp, slot_type, np.zeros(1, np.int64),
                             np.array([bound]), mark)
    taken_got, taken_gpus = al.take_typed(tc, typed, slot_type, np.array([bound]), 8, mark)
    assert counted[0] == taken_got[0] == got
    assert np.array_equal(taken_gpus[0], gpus)
    assert np.array_equal(plain.taken, typed.taken) and np.array_equal(plain.counter_left, typed.counter_left)



def plain_fit(t: int, claims: tuple, state: al.DeviceState) -> bool:
    """Whether the plain allocator (`allocate`, no cache, no pre-check) places the claims on row 0."""
    dev = LAYER.devices[t]
    view = al.DeviceState(state.taken[:, :dev.n_devices], state.cap_left[:, :dev.n_devices, :len(dev.capacities)],
                          state.counter_left[:, :len(dev.counters)])
    return bool(al.allocate(LAYER.compiled(claims, t)[0], dev, view, np.zeros(1, np.int64))[0][0])


@settings(deadline=None, max_examples=80)
@given(t=st.integers(0, len(LAYER.devices) - 1), before=st.lists(st.tuples(st.integers(0, len(CLAIMS) - 1),
                                                                            st.integers(0, 8)), max_size=4),
       c=st.integers(0, len(CLAIMS) - 1))
def test_a_node_ruled_out_by_its_free_devices_is_one_the_search_rules_out(t, before, c):
    """The compiled calls rule a node out, before searching it, when some request has no
    alternative with enough matching devices not taken whole (`_enough_free`); they then answer
    as the plain allocator does, on nodes partly taken by whole GPUs, shares (multi-allocatable
    devices, whose taken ones still count) and partitions (counters)."""
    state = fresh(t)
    for i, k in before:
        al.take_typed(LAYER.typed(CLAIMS[i])[0], state, np.array([t], np.int32), np.array([k]), 8)
    one = np.ones(1, bool)
    got = al.feasible_typed(LAYER.typed(CLAIMS[c])[0], al.FitCache.empty(), state, np.array([30_000_000]),
                            np.array([t], np.int32), np.zeros(1, np.int64), one, one, np.ones(1, np.int64),
                            np.ones(1, np.int64), 0, 0)
    assert got[0] == plain_fit(t, CLAIMS[c], state)


@settings(deadline=None, max_examples=40)
@given(t=st.integers(0, len(LAYER.devices) - 1), c=st.integers(0, len(CLAIMS) - 1),
       ks=st.lists(st.integers(0, 8), min_size=2, max_size=2), asks=st.lists(st.integers(0, 1), min_size=4, max_size=8))
def test_an_answer_cached_by_stamp_is_the_answer_afresh_when_stamps_share_a_bucket(t, c, ks, asks):
    """Two nodes (each with k pods of one GPU) whose stamps fall in one bucket of the cache (they
    differ by FIT_BUCKETS), asked in turn: each answer is the plain allocator's, whatever the
    bucket held."""
    taken, cap, counters = LAYER.arrays(2)
    for n in range(2):
        LAYER.reset(taken, cap, counters, np.zeros(2, np.int64), n, t)
    state = al.DeviceState(taken, cap, counters)
    for n, k in enumerate(ks):
        row = al.DeviceState(taken[n:n + 1], cap[n:n + 1], counters[n:n + 1])
        al.take_typed(LAYER.typed(CLAIMS[0])[0], row, np.array([t], np.int32), np.array([k]), 8)
    want = [plain_fit(t, CLAIMS[c], al.DeviceState(taken[n:n + 1], cap[n:n + 1], counters[n:n + 1])) for n in range(2)]
    tc, cache = LAYER.typed(CLAIMS[c])[0], al.FitCache.empty()
    stamp, slot_type, ones = np.array([7, 7 + al.FIT_BUCKETS]), np.array([t, t], np.int32), np.ones(2, bool)
    for n in asks:
        got = al.feasible_typed(tc, cache, state, stamp, slot_type, np.array([n]), ones, ones, np.ones(2, np.int64),
                                np.ones(2, np.int64), 0, 0)
        assert got[0] == want[n]


def stamped(types: list[int], layer: DeviceLayer, marks: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Fresh nodes of these types under these taint marks, as a cluster state holds them: the
    arrays and the stamps."""
    taken, cap, counters = layer.arrays(len(types))
    stamp = np.zeros(len(types), np.int64)
    for n, t in enumerate(types):
        layer.reset(taken, cap, counters, stamp, n, t, marks)
    return (taken, cap, counters), stamp


@settings(deadline=None, max_examples=60)
@given(types=st.lists(st.integers(0, len(LAYER.devices) - 1), min_size=1, max_size=3),
       before=st.lists(st.tuples(st.integers(0, len(CLAIMS) - 1), st.integers(0, 4)), max_size=3),
       c=st.integers(0, len(CLAIMS) - 1), bounds=st.lists(st.integers(0, 12), min_size=3, max_size=3),
       tainted=st.booleans())
def test_a_bind_alike_cached_by_stamp_is_the_bind_afresh(types, before, c, bounds, tainted):
    """`DeviceLayer.take_alike` copies a bind it saw from the same stamp (`AlikeCache`): the rows
    and GPU milli after are those of allocating afresh (a layer with an empty cache), and a stamp
    names one content (the cache is direct-mapped: an entry a collision evicted is allocated again
    under a new stamp, so equal contents may carry two stamps, never one stamp two contents)."""
    cached, afresh = (DeviceLayer(CLUSTER.node_types, CLUSTER.partition_profiles, {}) for _ in range(2))
    slots, slot_type = np.arange(len(types)), np.array(types, np.int32)  # as ClusterState.dra_type
    marks = np.zeros((len(types), LAYER.width), np.int64)
    if tainted:  # a taint on each node's first device, which no claim tolerates
        marks[:, 0] = 1
    start = stamped(types, cached, marks)
    runs = []
    for layer, (arrays, stamp) in [(cached, start), (cached, start), (afresh, stamped(types, afresh, marks))]:
        arrays, stamp = tuple(a.copy() for a in arrays), stamp.copy()  # the second run finds the first's binds
        out = []
        for i, k in [*before, (c, None)]:
            counts = al.count_typed(*layer.typed(CLAIMS[i]), al.DeviceState(*arrays), stamp, slot_type, slots,
                                    np.full(len(types), 64), marks)
            counts = np.minimum(counts, np.array(bounds[:len(types)]) if k is None else k)
            out.append(layer.take_alike(arrays, stamp, slot_type, CLAIMS[i], slots, counts, 8, marks))
        runs.append((arrays, stamp, out))
    for arrays, _, out in runs[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(runs[0][0], arrays, strict=True))
        assert all(np.array_equal(a, b) for a, b in zip(runs[0][2], out, strict=True))
    named: dict[int, tuple] = {}  # the cached layer's stamps, over both its runs
    for arrays, stamp, _ in runs[:2]:
        for n, st_n in enumerate(stamp.tolist()):
            rows = tuple(a[n].tobytes() for a in arrays)
            assert named.setdefault(st_n, rows) == rows


POD_SHAPES = [  # rows of a trace in the default (DRA) cluster: each runs by the claim its columns make
    {"gpu_count": 1}, {"gpu_count": 2, "gpus_same_numa": True, "nic_per_gpu": True}, {"gpu_milli": 250},
    {"gpu_count": 4, "gpus_same_nvlink": True}, {"gpu_milli": 0, "gpu_partition": "1g.10gb"},
    {"gpu_count": 8, "gpus_same_nvlink": True}, {"gpu_count": 0, "gpu_milli": 0, "cpu_milli": 8000},
]


@settings(deadline=None, max_examples=30)
@given(nodes=st.sets(st.integers(0, CLUSTER.n_slots - 1), min_size=1, max_size=12),
       steps=st.lists(st.tuples(st.integers(0, len(POD_SHAPES) - 1), st.integers(1, 40)), min_size=1, max_size=5))
def test_first_fit_and_bind_in_one_call_is_first_fit_then_bind(nodes, steps):
    """`filters.first_fit_bind` on a pod with claims packs in one compiled call outside a trial
    (`ClusterState.fit_claims_alike`) and in two inside one (`first_fit`, then `bind_alike`):
    the same nodes and counts each step, and the same state after."""
    from harness.filters import first_fit_bind
    from harness.state import ClusterState
    from harness.workload import compile_workload
    from tests import scenarios as sc

    w = compile_workload(sc.trace(POD_SHAPES), CLUSTER)
    fused, stepped = ClusterState(CLUSTER), ClusterState(CLUSTER)
    for state in (fused, stepped):
        for n in sorted(nodes):
            state.add_node(n, ready=True)
    stepped.fork()  # a trial: the two-step path, its rows saved for an undo
    for pod, k in steps:
        a = first_fit_bind(fused, w, pod, fused.status != 0, k)
        b = first_fit_bind(stepped, w, pod, stepped.status != 0, k)
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    for name in ClusterState._DYNAMIC:
        if name != "dra_stamp":  # stamps name contents, whichever numbers they got
            assert np.array_equal(getattr(fused, name), getattr(stepped, name)), name
    assert (fused.alloc_ready_milli, fused.mutations) == (stepped.alloc_ready_milli, stepped.mutations)


@settings(deadline=None, max_examples=30)
@given(nodes=st.sets(st.integers(0, CLUSTER.n_slots - 1), min_size=1, max_size=12), data=st.data(),
       steps=st.lists(st.tuples(st.integers(0, len(POD_SHAPES) - 1), st.integers(1, 40)), min_size=1, max_size=5))
def test_a_first_fit_over_the_usable_slots_is_pod_by_pod_first_fit(nodes, data, steps):
    """`filters.first_fit_bind` in one compiled call, walking the mask's slots (given, as a
    what-if keeps a tier's, or found from the mask), on masks that hold some of the nodes (a
    tier: the ready ones, the booting ones): the nodes and counts of first fit by the filter's
    verdict and each node's count (`feasible`, `fits_on`: other kernels) and, bound so, the same
    state after."""
    from harness.filters import bind_alike, feasible, first_fit_bind, fits_on
    from harness.state import ClusterState
    from harness.workload import compile_workload
    from tests import scenarios as sc

    w = compile_workload(sc.trace(POD_SHAPES), CLUSTER)
    given_slots, found, counted = ClusterState(CLUSTER), ClusterState(CLUSTER), ClusterState(CLUSTER)
    for state in (given_slots, found, counted):
        for n in sorted(nodes):
            state.add_node(n, ready=True)
    for pod, k in steps:
        mask = np.zeros(CLUSTER.n_slots, bool)
        mask[sorted(data.draw(st.sets(st.sampled_from(sorted(nodes)))))] = True
        a = first_fit_bind(given_slots, w, pod, mask, k, np.flatnonzero(mask))
        b = first_fit_bind(found, w, pod, mask, k)
        fit = np.flatnonzero(feasible(counted, w, pod, mask))
        each = fits_on(counted, w, pod, fit)
        got = np.minimum(each, np.maximum(k - (np.cumsum(each) - each), 0))  # first fit: each node what is left
        used = got > 0
        bind_alike(counted, w, pod, fit[used], got[used])
        for x in (a, b):
            assert np.array_equal(x[0], fit[used]) and np.array_equal(x[1], got[used])
    for name in ClusterState._DYNAMIC:
        if name != "dra_stamp":  # stamps name contents, whichever numbers they got
            for state in (given_slots, found):
                assert np.array_equal(getattr(state, name), getattr(counted, name)), name


@settings(deadline=None, max_examples=60)
@given(types=st.lists(st.integers(0, len(LAYER.devices) - 1), min_size=1, max_size=3),
       steps=st.lists(st.tuples(st.integers(0, 2), st.integers(0, len(CLAIMS) - 1), st.booleans()), max_size=14))
def test_a_bind_or_release_on_a_node_is_the_plain_commit_on_its_own_row(types, steps):
    """`commit` (one compiled call on every node's arrays, picking node n's rows and its
    type's claim arrays) leaves each node as the plain allocator's `allocate` then `commit` on a
    state of that node alone would, binds and releases (the last pod bound first) interleaved."""
    from harness.dra.layer import allocation
    arrays = LAYER.arrays(len(types))
    for n, t in enumerate(types):
        LAYER.reset(*arrays, np.zeros(len(types), np.int64), n, t)
    plain = [fresh(t) for t in types]
    held: list[tuple] = []  # (node, its pod's ClaimedGpus, the plain allocator's allocation, claims)
    for node, c, release in steps:
        n = node % len(types)
        if release and held:
            n, gpus, a, claims = held.pop()
            commit(arrays, gpus, types[n], n, -1)
            al.commit(LAYER.compiled(claims, types[n])[0], LAYER.devices[types[n]], plain[n], 0, a, sign=-1)
        else:
            claims, t = CLAIMS[c], types[n]
            ok, found = al.allocate(LAYER.compiled(claims, t)[0], LAYER.devices[t], plain[n], np.zeros(1, np.int64))
            if not ok[0]:
                continue
            gpus = allocation(LAYER, arrays, t, claims, n)
            commit(arrays, gpus, t, n, 1)
            al.commit(LAYER.compiled(claims, t)[0], LAYER.devices[t], plain[n], 0, found[0])
            held.append((n, gpus, found[0], claims))
        for m, alone in enumerate(plain):
            assert all(np.array_equal(whole[m], row[0]) for whole, row in zip(
                arrays, (alone.taken, alone.cap_left, alone.counter_left), strict=True))


@settings(deadline=None, max_examples=300)
@given(c=st.integers(0, 5000), cpu_free=st.integers(0, 10**6), mem_free=st.integers(0, 10**7),
       cpu=st.integers(0, 64000), mem=st.integers(0, 10**6), most=st.integers(1, 4096))
def test_a_cached_count_bounded_without_dividing_is_the_least_bound(c, cpu_free, mem_free, cpu, mem, most):
    """The first fit's walk bounds a node's cached count by CPU, memory and `most` dividing only
    where a bound is below it (`allocator._within`): min(count, cpu_free // cpu, mem_free // mem,
    most), a zero request bounding nothing."""
    expected = min(c, cpu_free // cpu if cpu else most, mem_free // mem if mem else most, most)
    assert al._within(c, cpu_free, mem_free, cpu, mem, most) == expected
