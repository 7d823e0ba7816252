"""The autoscaler's bulk packing of a pod shape equals packing its pods one by one.

`Snapshot.fit_alike` (fits_count + devices_taken + ClusterState.bind_many) must leave the
what-if snapshot exactly as k rounds of (feasible, first node, pick_devices, bind) would, for
every pod kind: CPU only, whole GPUs, whole GPUs in one NVLink / NUMA / NVLink-and-NUMA domain,
GPU shares, partitions. The autoscaler's `_unplaced` and `_estimate` by equivalence group must
leave the same units unplaced, help the same pods and open the same nodes as packing pod by
pod in the same order (`pack_one_by_one`, all or nothing per unit); `_pending_units` by array ops the same units as a walk of the queue.
The Karpenter-like what-if (`WhatIf.place_run`, a run of identical pods per tier and claim at
once) must place every pod where Karpenter's pod-by-pod simulation would, with the same claims.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.autoscalers.cluster_autoscaler import Units
from harness.autoscalers.karpenter_scheduling import WhatIf
from harness.cluster import Cluster
from harness.filters import feasible, fits_count
from harness.sim import Simulation
from harness.state import WHOLE, ClusterState
from harness.status import ABSENT, BOOTING, BOUND, PENDING, READY
from harness.whatif import Snapshot, first_fit_count
from harness.workload import compile_workload
from tests import scenarios as sc

SUMMARIES = ("cpu_free", "mem_free", "gpu_free", "gpu_used", "pods_on", "free_whole", "max_share", "nvl_whole",
             "numa_whole", "both_whole")


def cluster() -> Cluster:
    small = {"cpu_milli": 24000, "memory_mib": 96000}
    return Cluster(
        node_types=[
            sc.node_type("a8", nvlink_domains=2, numa_domains=4, nic_per_gpu=True, partition_profiles=["1g", "3g"]),
            sc.node_type("b8", nvlink_domains=4, numa_domains=2, **small),
            {"name": "l4x4", **small, "gpus": 4, "gpu_model": "L4", "numa_domains": 2},
            {"name": "g6", **small, "gpus": 6, "gpu_model": "L4", "nvlink_domains": 2, "numa_domains": 3},
            {"name": "cpu", "cpu_milli": 16000, "memory_mib": 64000},
            # more GPUs than the precomputed per-pattern summaries cover: the summaries by bincount
            {"name": "x16", "cpu_milli": 64000, "memory_mib": 256000, "gpus": 16, "gpu_model": "H100",
             "nvlink_domains": 2, "numa_domains": 4}],
        pools=[sc.pool(name, name, max_size=4, nodes_per_rack=2, price_on_demand=1.0 + i)
               for i, name in enumerate(["a8", "b8", "l4x4", "g6", "cpu", "x16"])],
        partition_profiles={"1g": 143, "3g": 429}, name="bulk")


KINDS = ("cpu", "whole", "nvlink", "numa", "both", "share", "partition")


@st.composite
def pod_dicts(draw, kind: str | None = None):
    kind = kind or draw(st.sampled_from(KINDS))
    pod = {"cpu_milli": draw(st.sampled_from([1000, 3000, 8000])),
           "memory_mib": draw(st.sampled_from([0, 1024, 30000]))}
    if kind == "cpu":
        return {**pod, "gpu_count": 0, "gpu_milli": 0}
    if kind == "share":
        return {**pod, "gpu_milli": draw(st.sampled_from([100, 250, 333, 500, 999])),
                "gpu_models": draw(st.sampled_from([[], ["L4"], ["H100"]]))}
    if kind == "partition":
        return {**pod, "gpu_milli": 0, "gpu_partition": draw(st.sampled_from(["1g", "3g"]))}
    return {**pod, "gpu_count": draw(st.sampled_from([1, 2, 3, 4, 8])), "gpus_same_nvlink": kind in ("nvlink", "both"),
            "gpus_same_numa": kind in ("numa", "both"), "nic_per_gpu": draw(st.booleans())}


def workload(cl: Cluster, pods: list[dict]):
    rows = [{"job_id": pod.pop("job_id", f"j{i}"), **pod} for i, pod in enumerate(pods)]
    return compile_workload(sc.trace(rows), cl)


def one_by_one(state: ClusterState, w, p: int, mask: np.ndarray, k: int) -> int:
    """The reference: k rounds of feasible, first node, pick_devices, bind."""
    for placed in range(k):
        cand = np.flatnonzero(feasible(state, w, p, mask))
        if len(cand) == 0:
            return placed
        n = int(cand[0])
        g = state.pick_devices(n, int(w.gpus[p]), int(w.milli[p]), bool(w.nvlink[p]), bool(w.numa[p]))
        state.bind(n, int(w.cpu[p]), int(w.mem[p]), g, int(w.milli[p]))
    return k


@st.composite
def occupied_states(draw):
    """A state with random nodes present (ready or booting) and random pods bound on them."""
    cl = cluster()
    prior = draw(st.lists(pod_dicts(), max_size=25))
    state = ClusterState(cl)
    for n in draw(st.sets(st.integers(0, state.n_slots - 1), min_size=1, max_size=12)):
        state.add_node(n, ready=draw(st.booleans()))
    present = np.flatnonzero(state.status != ABSENT)
    if prior:
        w = workload(cl, prior)
        for p in range(w.n_pods):
            cand = np.flatnonzero(feasible(state, w, p, state.status != ABSENT))
            if len(cand):
                n = int(cand[draw(st.integers(0, len(cand) - 1))])
                g = state.pick_devices(n, int(w.gpus[p]), int(w.milli[p]), bool(w.nvlink[p]), bool(w.numa[p]))
                state.bind(n, int(w.cpu[p]), int(w.mem[p]), g, int(w.milli[p]))
    mask = np.zeros(state.n_slots, bool)
    mask[present[draw(st.lists(st.booleans(), min_size=len(present), max_size=len(present)))]] = True
    return cl, state, mask


def check_devices(state: ClusterState) -> None:
    """No device over-allocated; the summaries are those `_refresh` computes from the rows."""
    assert (state.gpu_free >= 0).all() and (state.gpu_free <= WHOLE).all()
    assert (state.cpu_free >= 0).all() and (state.mem_free >= 0).all()
    present = state.status != ABSENT
    cap_milli = state.gpu_cap.astype(np.int64) * WHOLE
    assert (state.gpu_used[present] == cap_milli[present] - state.gpu_free[present].sum(axis=1)).all()
    fresh = state.copy()
    for n in np.flatnonzero(present):
        fresh._refresh(int(n))
    for name in ("free_whole", "max_share", "nvl_whole", "numa_whole", "both_whole"):
        assert (getattr(fresh, name) == getattr(state, name)).all(), name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=occupied_states(), kind=st.sampled_from(KINDS), data=st.data())
def test_bulk_first_fit_equals_one_by_one(setup, kind, data):
    cl, state, mask = setup
    w = workload(cl, [data.draw(pod_dicts(kind))])
    k = data.draw(st.integers(1, 60))
    ref = state.copy()
    placed = one_by_one(ref, w, 0, mask.copy(), k)
    assert first_fit_count(state, w, 0, mask, k) == placed
    snap = Snapshot(state, usable=mask)
    assert len(snap.fit_alike(w, 0, k)) == placed
    bulk = snap.state
    for name in SUMMARIES:
        assert (getattr(ref, name) == getattr(bulk, name)).all(), name
    assert ref.alloc_ready_milli == bulk.alloc_ready_milli
    check_devices(bulk)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=occupied_states(), kind=st.sampled_from(KINDS), data=st.data())
def test_fits_count_is_exact_per_node(setup, kind, data):
    cl, state, mask = setup
    w = workload(cl, [data.draw(pod_dicts(kind))])
    count = fits_count(state, w, 0, mask)
    assert (count[~mask] == 0).all()
    for n in np.flatnonzero(mask):
        alone = np.zeros(state.n_slots, bool)
        alone[n] = True
        assert count[n] == one_by_one(state.copy(), w, 0, alone, 1000), n


# ---- the autoscaler by equivalence group ----------------------------------------------------
def attached(cl: Cluster, pods: list[dict], **switches):
    sim = Simulation(workload(cl, pods), cl, seed=0, horizon_s=3600.0)
    loop = sc.separate(**switches)
    loop.attach(sim)
    return sim, loop.autoscaler


@st.composite
def pending(draw):
    """An autoscaler over a random partly-filled cluster, and units of pending pods."""
    cl = cluster()
    pods = []
    for j in range(draw(st.integers(1, 14))):
        pod = draw(pod_dicts())
        size = draw(st.sampled_from([1, 1, 1, 2, 3]))  # a gang unit when size > 1
        for _ in range(draw(st.integers(1, 4)) if size == 1 else size):
            pods.append({**pod, "job_id": f"j{j}", "min_member": size})
    switches = {"topology_aware": draw(st.booleans()), "sharing_aware": draw(st.booleans()),
                "scheduler_sees": draw(st.booleans())}
    sim, ca = attached(cl, pods, **switches)
    state = sim.state
    for n in draw(st.sets(st.integers(0, state.n_slots - 1), max_size=8)):
        state.add_node(n, ready=draw(st.booleans()))
        used = draw(st.integers(0, int(state.gpu_cap[n])))
        state.bind(n, draw(st.sampled_from([0, 4000])), 0, np.arange(used), draw(st.sampled_from([250, 1000])))
        if draw(st.integers(0, 3)) == 0:  # booked for a job (ProvisioningRequest)
            ca.provreq.booked_for[n] = draw(st.integers(0, sim.w.n_jobs - 1))
    units = []
    for j in range(sim.w.n_jobs):
        members = sim.w.job_pods[j]
        units += [members] if sim.w.job_min_member[j] > 1 else [members[i:i + 1] for i in range(len(members))]
    order = draw(st.permutations(range(len(units))))
    return sim, ca, units_of([units[i] for i in order])


def units_of(units: list[np.ndarray]) -> Units:
    """The autoscaler's units holding these pods' arrays, in order."""
    return Units(np.concatenate(units), np.r_[0, np.cumsum([len(u) for u in units])])


def pack_one_by_one(scratch, w, unit, usable, openable=None) -> bool:
    """The reference packer: first fit of the unit's pods one by one, all or nothing, opening
    the next `openable` slot when nothing usable fits; on failure every bind and opening is
    undone and the opened slots go back to the front of `openable`."""
    done, opened = [], []
    for p in unit.tolist():
        cand = np.flatnonzero(feasible(scratch, w, p, usable))
        if len(cand) == 0 and openable:
            n = openable.pop(0)
            scratch.add_node(n, ready=True)
            usable[n] = True
            opened.append(n)
            cand = np.flatnonzero(feasible(scratch, w, p, usable))
        if len(cand) == 0:
            for q, m, g in reversed(done):
                scratch.release(m, int(w.cpu[q]), int(w.mem[q]), g, int(w.milli[q]))
            for n in reversed(opened):
                scratch.remove_node(n)
                usable[n] = False
                openable.insert(0, n)
            return False
        m = int(cand[0])
        g = scratch.pick_devices(m, int(w.gpus[p]), int(w.milli[p]), bool(w.nvlink[p]), bool(w.numa[p]))
        scratch.bind(m, int(w.cpu[p]), int(w.mem[p]), g, int(w.milli[p]))
        done.append((p, m, g))
    return True


def unplaced_one_by_one(ca, units):
    """The reference: the same order, each pod of a group packed alone."""
    sim = ca.sim
    present = np.flatnonzero(sim.state.status != ABSENT)
    scratch = sim.state.subset(present)
    booked = ca.provreq.booked_for[present]
    first = np.array([u[0] for u in units])
    alone = np.isin(sim.w.job[first], booked[booked >= 0])
    left = []
    for _, idx in ca._groups(units, first, alone):
        for i in idx:
            j = int(sim.w.job[units[i][0]])
            if not pack_one_by_one(scratch, ca.view, units[i], (booked == -1) | (booked == j)):
                left.append(i)
    return sorted(left), scratch


def estimate_one_by_one(ca, p, units):
    sim = ca.sim
    slots = sim.cloud.free_slots(p)[:sum(len(u) for u in units)]
    scratch = sim.state.subset(slots)
    usable = np.zeros(len(slots), bool)
    openable = list(range(len(slots)))
    helped, paid = 0, 0.0
    first = np.array([u[0] for u in units])
    for _, idx in ca._ordered(p, ca._groups(units, first), first):
        for i in idx:
            if ca.fits_pool[p, units[i]].all() and pack_one_by_one(scratch, ca.view, units[i], usable, openable):
                helped += len(units[i])
                paid += float(ca.pod_price[units[i]].sum())
    return np.flatnonzero(usable), helped, paid, scratch


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=pending())
def test_unplaced_by_group_equals_pod_by_pod(setup):
    _, ca, units = setup
    expected, _ = unplaced_one_by_one(ca, units)
    got = ca._unplaced(units)
    assert [u.tolist() for u in got] == [units[i].tolist() for i in expected], "the same units, in queue order"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=pending())
def test_estimate_by_group_equals_pod_by_pod(setup):
    sim, ca, units = setup
    for p in range(len(sim.cluster.pools)):
        new, helped, paid, scratch = estimate_one_by_one(ca, p, units)
        nodes, got_helped, waste, got_paid, *_ = ca._estimate(p, units)
        assert (nodes, got_helped) == ((len(new), helped) if len(new) else (0, 0))
        assert got_paid == pytest.approx(paid if len(new) else 0.0)  # the price expander's pod prices
        if len(new):
            assert waste == (float(scratch.cpu_free[new].sum() / scratch.cpu_cap[new].sum())
                             + float(scratch.mem_free[new].sum() / scratch.mem_cap[new].sum()))
        check_devices(scratch)


def test_groups_follow_first_appearance_and_gangs_keep_their_place():
    cl = cluster()
    a, b = {"gpu_count": 1}, {"gpu_count": 2}
    sim, ca = attached(cl, [a, {**b, "job_id": "g", "min_member": 2}, {**b, "job_id": "g", "min_member": 2}, b, a])
    w = sim.w
    units = units_of([np.array([0]), np.array([1, 2]), np.array([3]), np.array([4])])
    first = np.array([u[0] for u in units])
    got = [(g, list(idx)) for g, idx in ca._groups(units, first)]
    assert got == [(True, [0, 3]), (False, [1]), (True, [2])]
    # a pod whose job has booked nodes is packed alone, at its own place
    got = [(g, list(idx)) for g, idx in ca._groups(units, first, alone=np.array([0, 0, 0, 1], bool))]
    assert got == [(True, [0]), (False, [1]), (True, [2]), (False, [3])]
    assert w.shape[0] == w.shape[4]


def pending_units_one_by_one(ca, gangs):
    """The reference: the queue walked job by job."""
    sim, w = ca.sim, ca.sim.w
    units = []
    for j in sim.queue.jobs().tolist():
        is_gang = w.job_min_member[j] > 1
        if gangs is not None and is_gang != gangs:
            continue
        pods = sim.unbound_pods(j)
        pods = pods[~w.never_fits[pods]]
        if len(pods) and is_gang and (ca.gang_aware or gangs):
            units.append(pods)
        elif len(pods):
            units.extend(pods[:, None])
    return units


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=pending(), gang_aware=st.booleans(), data=st.data())
def test_pending_units_in_queue_order(setup, gang_aware, data):
    sim, ca, _ = setup
    ca.gang_aware = gang_aware
    for j in data.draw(st.permutations(range(sim.w.n_jobs))):
        pods = sim.w.job_pods[j]
        sim.pod_status[pods] = PENDING
        sim.pod_status[pods[data.draw(st.lists(st.booleans(), min_size=len(pods), max_size=len(pods)))]] = BOUND
        sim.queue.push(j)
    for gangs in (None, True, False):
        got, expected = ca._pending_units(gangs), pending_units_one_by_one(ca, gangs)
        assert [u.tolist() for u in got] == [u.tolist() for u in expected]


# ---- the Karpenter-like what-if by runs of identical pods -----------------------------------
class WhatIfOneByOne(WhatIf):
    """The reference: Karpenter's simulation pod by pod (first node of the first tier with room,
    else the first claim whose shadows hold it, dropping those that do not, else a new claim)."""

    def place(self, p: int, max_claims: float) -> int:
        st, w, shape = self.st, self.w, int(self.w.shape[p])
        if shape in self.hopeless:
            return -1
        for i in range(self.first_tier.get(shape, 0), len(self.tiers)):
            cand = np.flatnonzero(feasible(st, w, p, self.tiers[i]))
            if len(cand):
                self._bind(int(cand[0]), p)
                return int(cand[0])
            self.first_tier[shape] = i + 1
        shadows = self.claim_of >= 0
        fit = feasible(st, w, p, shadows) if shadows.any() else shadows
        if not fit.any():
            if self.n_claims >= max_claims or not self._open_claim(p):
                return -1
            shadows = self.claim_of >= 0
            fit = feasible(st, w, p, shadows)
        c = int(self.claim_of[fit].min())
        mine = self.claim_of == c
        self.claim_of[mine & ~fit] = -1
        for n in np.flatnonzero(mine & fit):
            self._bind(int(n), p)
        return -2 - c

    def _bind(self, n: int, p: int) -> None:
        w = self.w
        g = self.st.pick_devices(n, int(w.gpus[p]), int(w.milli[p]), bool(w.nvlink[p]), bool(w.numa[p]))
        self.st.bind(n, int(w.cpu[p]), int(w.mem[p]), g, int(w.milli[p]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=occupied_states(), data=st.data())
def test_karpenter_what_if_by_runs_equals_pod_by_pod(setup, data):
    cl, state, mask = setup
    runs = data.draw(st.lists(st.tuples(pod_dicts(), st.integers(1, 30)), min_size=1, max_size=4))
    w = workload(cl, [dict(pod) for pod, count in runs for _ in range(count)])
    bounds = np.cumsum([0] + [count for _, count in runs])
    tiers = [mask & (state.status == READY), mask & (state.status == BOOTING)]
    spare = (state.status == ABSENT) & np.array(data.draw(st.lists(st.booleans(), min_size=state.n_slots,
                                                                   max_size=state.n_slots)))
    max_claims = data.draw(st.sampled_from([1, 2, np.inf]))
    ref = WhatIfOneByOne(Snapshot(state), w, tiers, spare)
    bulk = WhatIf(Snapshot(state), w, tiers, spare)
    expected = [ref.place(p, max_claims) for p in range(w.n_pods)]
    got = np.concatenate([bulk.place_run(np.arange(a, b), max_claims)
                          for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    assert got.tolist() == expected
    for name in SUMMARIES + ("status",):
        assert (getattr(ref.st, name) == getattr(bulk.st, name)).all(), name
    assert (ref.claim_of == bulk.claim_of).all() and ref.n_claims == bulk.n_claims
    assert (ref.spare == bulk.spare).all() and ref.hopeless == bulk.hopeless
    check_devices(bulk.st)


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(1, 4), max_size=8), more=st.lists(st.integers(1, 3), max_size=3), data=st.data())
def test_units_kept_and_joined_are_the_lists_of_their_pods(sizes, more, data):
    """Units of 1-4 pods (pods numbered in order), some kept: the kept units' pods in order,
    each unit whole; units joined: the first ones' then the others'."""
    units = [np.arange(sum(sizes[:i]), sum(sizes[:i + 1])) for i in range(len(sizes))]
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(units), max_size=len(units))), bool)
    kept = units_of(units).select(keep) if units else Units.single(np.zeros(0, np.int64))
    assert [u.tolist() for u in kept] == [u.tolist() for u, k in zip(units, keep, strict=True) if k]
    assert kept.first.tolist() == [u[0] for u, k in zip(units, keep, strict=True) if k]
    others = [100 + np.arange(k) for k in more]
    joined = kept + (units_of(others) if others else Units.single(np.zeros(0, np.int64)))
    assert [u.tolist() for u in joined] == [u.tolist() for u in kept] + [u.tolist() for u in others]
