"""Scale-down's drain check (`ScaleDown.removable`) runs as a trial on the cluster state itself,
not on a what-if copy of the ready nodes: it must answer as the copy did and leave the state,
its totals and cache keys exactly as before. The reference below is the check on a copy
(`whatif.Snapshot` of the ready nodes, each candidate's moves a trial on it), as it was built
before; it is compared over random clusters, pods, candidate orders, bookings and limits, and
on every drain check of a replay of the pinned many-gang trace (a DRA cluster)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.autoscalers.scale_down import ScaleDown
from harness.config import compose
from harness.replay import build
from harness.whatif import Snapshot
from tests import scenarios as sc
from tests.test_pinned_outputs import TRACE
from tests.test_whatif import assert_same, everything


def on_a_copy(sd: ScaleDown, cand: np.ndarray, booked_for: np.ndarray | None = None,
              limit: int | None = None) -> tuple[np.ndarray, int, list[int]]:
    """The drain check on a what-if copy of the ready nodes (local node i is the i-th ready
    slot): (removable, tried, the slots each trial packed onto, in order)."""
    sim, st_ = sd.sim, sd.sim.state
    w = sim.w
    limit = len(cand) if limit is None else limit
    empty = st_.pods_on[cand] == 0
    found = np.zeros(len(cand), bool)
    lead = 0
    while lead < min(len(cand), limit) and empty[lead]:
        lead += 1
    found[:lead] = True
    if lead == len(cand) or lead == limit:
        return found[:lead], lead, []
    ready = np.flatnonzero(st_.ready)
    local = np.searchsorted(ready, cand)
    booked = None if booked_for is None else booked_for[ready]
    snap = Snapshot(st_, ready, usable=np.ones(len(ready), bool))
    snap.usable[local[:lead]] = False
    n_removable, moved, touched = lead, {}, []
    for i in range(lead, len(cand)):
        n = int(cand[i])
        if n_removable >= limit:
            return found[:i], i, touched
        pods = sim.pods_on(n) + moved.pop(int(local[i]), [])
        ok = not pods
        if pods and sim.gang_pods_on[n] == 0:
            snap.usable[local[i]] = False
            groups: dict[tuple[int, int], list[int]] = {}
            for p in pods:
                groups.setdefault((int(w.job[p]), int(w.shape[p])), []).append(p)
            snap.state.fork()
            moves = []
            for (job, _), group in groups.items():
                usable = snap.usable if booked is None else snap.usable & ((booked == -1) | (booked == job))
                got = snap.fit_alike(w, group[0], len(group), usable=usable)
                touched += ready[got].tolist()
                if len(got) < len(group):
                    snap.state.revert()
                    moves = None
                    break
                moves.extend(zip(group, got.tolist(), strict=True))
            if moves is not None:
                snap.state.keep()
                for p, dest in moves:
                    moved.setdefault(dest, []).append(p)
            ok = moves is not None
        snap.usable[local[i]] = not ok
        found[i] = ok
        n_removable += ok
    return found, len(cand), touched


def checked(sd: ScaleDown, cand: np.ndarray, booked_for: np.ndarray | None = None,
            limit: int | None = None) -> tuple[np.ndarray, int]:
    """`removable` compared with the check on a copy; the state as before."""
    before = everything(sd.sim.state)
    want_found, want_tried, want_touched = on_a_copy(sd, cand, booked_for, limit)
    found, tried = sd.removable(cand, booked_for, limit)
    assert (found.tolist(), tried) == (want_found.tolist(), want_tried)
    assert [int(n) for got in sd.touched for n in got] == want_touched
    assert_same(everything(sd.sim.state), before)
    assert not sd.sim.state.in_trial
    return found, tried


pod = st.fixed_dictionaries({
    "gpu_count": st.sampled_from([0, 1, 1, 2, 4]),
    "gpu_milli": st.sampled_from([1000, 1000, 500]),
    "cpu_milli": st.sampled_from([1000, 8000, 30000]),
    "job": st.integers(0, 12),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pods=st.lists(pod, min_size=1, max_size=24), data=st.data())
def test_the_check_on_the_state_equals_the_check_on_a_copy(pods, data):
    # pods of up to 13 jobs (some several alike: moved in one step) spread over six ready
    # nodes of two types; the candidates, their order, bookings and the limit drawn
    rows = []
    for p in pods:
        row = {"gpu_count": p["gpu_count"], "gpu_milli": 1000 if p["gpu_count"] != 1 else p["gpu_milli"],
               "cpu_milli": p["cpu_milli"], "job_id": f"j{p['job']}"}
        rows.append({**row, "gpu_milli": 0} if row["gpu_count"] == 0 else row)
    cl = sc.cluster([sc.node_type("gpu8"), sc.node_type("gpu4", gpus=4, cpu_milli=32000)],
                    [sc.pool("a", "gpu8", min_size=4), sc.pool("b", "gpu4", min_size=2)])
    loop = sc.separate(gang_mode="none")
    _, sim = sc.run(sc.trace(rows), cl, loop, horizon_s=60.0)
    sd = loop.autoscaler.scale_down
    ready = np.flatnonzero(sim.state.ready).tolist()
    cand = np.array(data.draw(st.permutations(ready))[:data.draw(st.integers(1, len(ready)))], np.int64)
    booked = None
    if data.draw(st.booleans()):
        booked = np.array(data.draw(st.lists(st.integers(-2, 3), min_size=sim.state.n_slots,
                                             max_size=sim.state.n_slots)), np.int64)
    limit = data.draw(st.one_of(st.none(), st.integers(1, len(cand))))
    checked(sd, cand, booked, limit)


def test_every_drain_check_of_a_replay_equals_the_check_on_a_copy(monkeypatch):
    # the merged loop on the pinned trace (DRA devices, gangs, drains): each check compared
    calls = []
    removable = ScaleDown.removable

    def compared(self, cand, booked_for=None, limit=None):
        monkeypatch.setattr(ScaleDown, "removable", removable)
        try:
            calls.append(len(cand))
            return checked(self, cand, booked_for, limit)
        finally:
            monkeypatch.setattr(ScaleDown, "removable", compared)

    monkeypatch.setattr(ScaleDown, "removable", compared)
    sim, lp = build(compose("config", ["loop=merged", f"trace.path={TRACE}", "horizon_s=9000"]))
    assert sim.state.dra is not None
    sim.run(lp)
    assert len(calls) >= 5, calls  # the replay drains: the comparison ran


@pytest.mark.parametrize("limit", [1, 2])
def test_a_check_cut_by_its_limit_leaves_the_state_as_before(limit):
    # three busy nodes whose pods fit elsewhere: the check returns early, inside its trial
    cl = sc.cluster([sc.node_type("gpu8")], [sc.pool("a", "gpu8", min_size=4)])
    loop = sc.separate(gang_mode="none")
    _, sim = sc.run(sc.trace([{"job_id": f"j{i}"} for i in range(4)]), cl, loop, horizon_s=60.0)
    busy = np.flatnonzero(sim.state.pods_on > 0)
    assert len(busy) >= 3
    found, tried = checked(loop.autoscaler.scale_down, busy, limit=limit)
    assert tried == limit and found.all()
