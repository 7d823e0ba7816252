"""Exact shortcuts of kube-scheduler's pod-group cycle (harness/scheduler/pod_group.py). Scoring a
topology-constrained group of one shape from what its trials would place, running only the
chosen placement's trial (`TRIALS_FORETOLD`), leaves a replay as running every trial does, bit
for bit: on small random clusters every array, counter and float sum of the simulation, its
cluster state, ledger and accounting, the scheduler's and the gang plugin's arrays and its
random stream. What the plugin remembers between cycles (usable nodes per domain, each node's
room per pod shape) equals a count made afresh at every use."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.scheduler.pod_group as pod_group
from harness.filters import feasible, fits_on
from harness.scheduler import Scheduler
from harness.scheduler.pod_group import GangScheduling
from harness.scores import FGD, BalancedAllocation, LeastAllocated, WeightedSum
from tests import scenarios as sc
from tests.test_unbind_many import assert_same, snapshot


def whole(sim, loop) -> dict:
    """Everything the replay left, as plain values (`snapshot`, but for a memo), the events still
    to run, the scheduler's arrays and the gang plugin's (its random stream's state included)."""
    out = snapshot(sim)
    del out["sim._heap"]
    del out["state._devices"]  # a memo (a GPU mask -> its GPUs' numbers) of the masks trials picked
    out["events"] = sorted((t, getattr(fn, "__name__", repr(fn)), repr(args)) for t, _, fn, args in sim._heap
                           if _ not in sim._cancelled)
    sched = loop.scheduler
    for name in ("tried_at", "next_start", "seen", "booked_for"):
        out[f"scheduler.{name}"] = getattr(sched, name)
    gang = sched.plugins["gang"]
    out["gang.rejections"] = gang.rejections
    out["gang.backoff_until"] = gang.backoff_until
    out["gang.rng"] = gang.rng.bit_generator.state
    return out


@pytest.fixture
def foretold(monkeypatch):
    """The placements chosen without running the others' trials in this test: [domains scored]."""
    seen: list[int] = []
    chosen = GangScheduling._foretold_placement

    def counted(self, found, *args):
        seen.append(len(found))
        return chosen(self, found, *args)

    monkeypatch.setattr(GangScheduling, "_foretold_placement", counted)
    return seen


def random_replay(n_racks, per_rack, gpus, gangs, lone, at_once, policy=None, memo_first=True, memo_runs=True,
                  pop_first=True, rejected_at_once=pod_group.REJECTED_AT_ONCE,
                  scanned_at_once=pod_group.MEMO_SCANNED_AT_ONCE):
    cl = sc.cluster([sc.node_type("h", gpus=gpus)],
                    [sc.pool("p", "h", min_size=n_racks * per_rack, max_size=n_racks * per_rack + 4,
                             nodes_per_rack=per_rack)])
    pods = [{"job_id": f"g{i}", "gpu_count": g, "min_member": m, "submit_s": float(t), "duration_s": float(d),
             "gang_locality": loc}
            for i, (size, m, g, t, d, loc) in enumerate(gangs) for _ in range(size)]
    pods += [{"job_id": f"l{i}", "gpu_count": g, "submit_s": float(t), "duration_s": float(d)}
             for i, (g, t, d) in enumerate(lone)]
    loop = sc.separate("workload", policy=policy or WeightedSum([LeastAllocated(), BalancedAllocation()]))
    loop.scheduler.plugins["gang"].pop_from_backoff_queue = pop_first
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pod_group, "TRIALS_FORETOLD", at_once)
        patch.setattr(pod_group, "MEMO_BEFORE_PODS", memo_first)
        patch.setattr(pod_group, "MEMO_RUNS_AT_ONCE", memo_runs)
        patch.setattr(pod_group, "REJECTED_AT_ONCE", rejected_at_once)
        patch.setattr(pod_group, "MEMO_SCANNED_AT_ONCE", scanned_at_once)
        _, sim = sc.run(sc.trace(pods), cl, loop, horizon_s=3000.0)
    return whole(sim, loop)


gangs = st.lists(st.tuples(st.integers(2, 6), st.integers(1, 6), st.integers(1, 8), st.integers(0, 1200),
                           st.integers(60, 2400), st.sampled_from(["rack", "rack", "block", "none"])),
                 min_size=1, max_size=10).map(lambda gs: [(s, min(m, s), g, t, d, loc) for s, m, g, t, d, loc in gs])
lone = st.lists(st.tuples(st.integers(1, 8), st.integers(0, 1200), st.integers(60, 1800)), max_size=8)


@settings(max_examples=40, deadline=None)
@given(n_racks=st.integers(1, 5), per_rack=st.integers(1, 3), gpus=st.sampled_from([4, 8]), gangs=gangs, lone=lone)
def test_small_random_clusters_end_bit_for_bit_alike(n_racks, per_rack, gpus, gangs, lone):
    """Gangs of 2-6 pods of 1-8 GPUs (quorum 1-6), most kept to a rack or block, beside lone
    pods, arriving over 20 min on 1-15 ready nodes in racks of 1-3 that the autoscaler may grow
    by 4."""
    gangs = [(s, m, min(g, gpus), t, d, loc) for s, m, g, t, d, loc in gangs]
    lone = [(min(g, gpus), t, d) for g, t, d in lone]
    assert_same(random_replay(n_racks, per_rack, gpus, gangs, lone, False),
                random_replay(n_racks, per_rack, gpus, gangs, lone, True))


@settings(max_examples=40, deadline=None)
@given(n_racks=st.integers(1, 3), per_rack=st.integers(1, 2), gpus=st.sampled_from([4, 8]), gangs=gangs, lone=lone)
def test_the_memo_read_before_the_pods_are_listed_ends_alike(n_racks, per_rack, gpus, gangs, lone):
    """`MEMO_BEFORE_PODS` on and off, on small random clusters crowded by gangs (1-6 nodes):
    the same replay bit for bit, the groups' rejections and back-offs included."""
    gangs = [(s, m, min(g, gpus), t, d, loc) for s, m, g, t, d, loc in gangs]
    lone = [(min(g, gpus), t, d) for g, t, d in lone]
    assert_same(random_replay(n_racks, per_rack, gpus, gangs, lone, True, memo_first=False),
                random_replay(n_racks, per_rack, gpus, gangs, lone, True))


def test_the_memo_rejects_before_the_pods_are_listed(monkeypatch):
    """One 8-GPU node; four gangs of 3 x 4 GPUs (quorum 3) arrive together, none can fit. The
    first is tried and fails, so in that cycle the three others, of its shape and locality,
    are rejected by the memo without listing their pods (3 per cycle they are tried in
    together), and the replay is the reference's."""
    taken = []
    known = GangScheduling._failed_before

    def counted(self, j):
        rejected = known(self, j)
        taken.append(rejected)
        return rejected

    monkeypatch.setattr(GangScheduling, "_failed_before", counted)
    gangs = [(3, 3, 4, 0, 600, "none")] * 4
    one = random_replay(1, 1, 8, gangs, [], True, memo_runs=False)
    assert taken[:4] == [False, True, True, True]
    assert_same(random_replay(1, 1, 8, gangs, [], True, memo_first=False, memo_runs=False), one)


def counted_runs(monkeypatch) -> list[tuple[int, int]]:
    """(position in the order, run length) of every `GangScheduling.rejected_run` call, as made."""
    runs: list[tuple[int, int]] = []
    rejected_run = GangScheduling.rejected_run

    def counted(self, order, i):
        run = rejected_run(self, order, i)
        runs.append((i, run))
        return run

    monkeypatch.setattr(GangScheduling, "rejected_run", counted)
    return runs


def test_the_memo_rejects_a_run_of_gangs_in_one_step(monkeypatch):
    """As above, with a gang of another shape (3 x 2 GPUs) fourth in the queue and a gang of
    quorum 2 sixth: the first gang fails, so `rejected_run` rejects the two after it at once,
    the 2-GPU gang goes its own way (it fits), and the next two 4-GPU gangs are rejected at
    once again but for the one of quorum 2 (the memo says 3 found no place: 2 may). The replay
    is the reference's, each rejected on its own turn."""
    runs = counted_runs(monkeypatch)
    gangs = [(3, 3, 4, 0, 600, "none")] * 3 + [(3, 3, 2, 0, 600, "none")] + [(3, 3, 4, 0, 600, "none")] * 2 \
        + [(3, 2, 4, 0, 600, "none")]
    one = random_replay(1, 1, 8, gangs, [], True, rejected_at_once=1)  # runs of 2 in vector steps
    assert runs[:5] == [(0, 0), (1, 2), (3, 0), (4, 2), (6, 0)]
    assert_same(random_replay(1, 1, 8, gangs, [], True, memo_runs=False), one)


@pytest.mark.parametrize("scanned_at_once", [1, pod_group.MEMO_SCANNED_AT_ONCE])
def test_a_run_of_rejections_spans_classes(monkeypatch, scanned_at_once):
    """One 8-GPU node; gangs of 3 x 4 GPUs and of 3 x 8 GPUs (quorum 3) take turns in the queue,
    none can fit. The first of each class goes its own way and fails; the memo then holds both,
    so the three after them, of either class, are rejected in one run (as many steps as
    classes before), found job by job or in vector steps (`MEMO_SCANNED_AT_ONCE`). The replay
    is the reference's, each rejected on its own turn."""
    runs = counted_runs(monkeypatch)
    gangs = [(3, 3, 4, 0, 600, "none"), (3, 3, 8, 0, 600, "none")] * 2 + [(3, 3, 4, 0, 600, "none")]
    one = random_replay(1, 1, 8, gangs, [], True, scanned_at_once=scanned_at_once)
    assert runs[:3] == [(0, 0), (1, 0), (2, 3)]
    assert_same(random_replay(1, 1, 8, gangs, [], True, memo_runs=False), one)


def crowded_replay(n_nodes, gangs, lone, pop_first, memo_runs, at_once=pod_group.REJECTED_AT_ONCE,
                   scanned_at_once=pod_group.MEMO_SCANNED_AT_ONCE):
    """Gangs (size = quorum, GPUs per pod, submit, duration, locality) queued on a few 8-GPU
    nodes, one per rack, that no autoscaler grows, while lone pods come and go: most cycles
    retry gangs of a class that failed in them."""
    cl = sc.cluster([sc.node_type("h", gpus=8)],
                    [sc.pool("p", "h", min_size=n_nodes, max_size=n_nodes, nodes_per_rack=1)])
    pods = [{"job_id": f"g{i}", "gpu_count": g, "min_member": size, "submit_s": float(t), "duration_s": float(d),
             "gang_locality": loc} for i, (size, g, t, d, loc) in enumerate(gangs) for _ in range(size)]
    pods += [{"job_id": f"l{i}", "gpu_count": g, "submit_s": float(t), "duration_s": float(d)}
             for i, (g, t, d) in enumerate(lone)]
    loop = sc.separate("workload", policy=WeightedSum([LeastAllocated(), BalancedAllocation()]))
    loop.scheduler.plugins["gang"].pop_from_backoff_queue = pop_first
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pod_group, "MEMO_RUNS_AT_ONCE", memo_runs)
        patch.setattr(pod_group, "REJECTED_AT_ONCE", at_once)
        patch.setattr(pod_group, "MEMO_SCANNED_AT_ONCE", scanned_at_once)
        _, sim = sc.run(sc.trace(pods), cl, loop, horizon_s=3000.0)
    return whole(sim, loop)


@settings(max_examples=30, deadline=None)
@given(n_nodes=st.integers(1, 3),
       gangs=st.lists(st.tuples(st.integers(2, 3), st.sampled_from([4, 8]), st.integers(0, 300), st.integers(300, 1800),
                                st.sampled_from(["none", "none", "rack"])), min_size=4, max_size=12),
       lone=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2400), st.integers(20, 300)), min_size=5, max_size=20),
       pop_first=st.booleans(), at_once=st.sampled_from([1, 2, 8]), scanned_at_once=st.sampled_from([1, 4, 32]))
def test_the_memo_runs_end_alike(n_nodes, gangs, lone, pop_first, at_once, scanned_at_once):
    """`MEMO_RUNS_AT_ONCE` on and off, with SchedulerPopFromBackoffQ on or off (off: each
    rejection schedules its back-off's end), runs rejected in vector steps from 1, 2 or 8 groups
    on (`REJECTED_AT_ONCE`), found in vector steps from 1, 4 or 32 jobs left in the order on
    (`MEMO_SCANNED_AT_ONCE`), on 1-3 nodes crowded by 4-12 gangs of two shapes
    (rejected again and again, in runs, their back-offs reaching the cap): the same replay bit
    for bit, the groups' rejections, back-offs and pending events included."""
    assert_same(crowded_replay(n_nodes, gangs, lone, pop_first, memo_runs=False),
                crowded_replay(n_nodes, gangs, lone, pop_first, memo_runs=True, at_once=at_once,
                               scanned_at_once=scanned_at_once))


@settings(max_examples=200, deadline=None)
@given(attempts=st.lists(st.integers(1, 80), min_size=1, max_size=20), data=st.data(),
       initial_s=st.sampled_from([0.0, 0.25, 1.0, 3.0]), max_s=st.sampled_from([0.0, 1.0, 10.0, 600.0]))
def test_the_back_offs_of_many_groups_are_each_groups(attempts, data, initial_s, max_s):
    """`group_backoffs_s` gives each group the float `group_backoff_s` gives it."""
    pods = data.draw(st.lists(st.integers(0, 5000), min_size=len(attempts), max_size=len(attempts)))
    many = pod_group.group_backoffs_s(np.array(attempts, np.int64), np.array(pods, np.int64), initial_s, max_s)
    one = [pod_group.group_backoff_s(a, p, initial_s, max_s) for a, p in zip(attempts, pods, strict=True)]
    np.testing.assert_array_equal(many, np.array(one), strict=True)


def test_the_shortcut_is_taken_and_ties_drawn_alike(foretold):
    """Six empty 8-GPU nodes, one per rack; three gangs of 2 x 4 GPUs kept to a rack arrive
    together. The first fits whole in each of the six racks, all empty alike, so every
    placement scores the same (100 for its two pods, plus the same MostAllocated) and the pick
    is drawn from the plugin's stream; its two pods fill their node, so the next gangs find
    five racks, then four. The same nodes, devices, starts and random stream as with every
    trial run."""
    gangs = [(2, 2, 4, 0, 600, "rack")] * 3
    one = random_replay(6, 1, 8, gangs, [], True)
    assert foretold == [6, 5, 4]
    assert_same(random_replay(6, 1, 8, gangs, [], False), one)


def test_a_plugin_that_remembers_trials_keeps_every_trial(foretold):
    """FGD remembers what it scores: every placement's trial runs."""
    random_replay(6, 1, 8, [(2, 2, 4, 0, 600, "rack")] * 3, [], True, policy=FGD())
    assert foretold == []


def test_a_domain_larger_than_a_walk_keeps_every_trial(foretold, monkeypatch):
    """Where a domain holds more usable nodes than a walk looks for, a trial may move
    nextStartNodeIndex: every placement's trial runs."""
    monkeypatch.setattr(Scheduler, "nodes_to_find", lambda self: 1)
    random_replay(3, 2, 8, [(2, 2, 4, 0, 600, "rack")] * 3, [], True)
    assert foretold == []


@settings(max_examples=15, deadline=None)
@given(n_racks=st.integers(1, 5), per_rack=st.integers(1, 3), gangs=gangs)
def test_the_domain_table_is_a_fresh_count_of_the_usable_nodes(n_racks, per_rack, gangs):
    """Every answer of `_domains` (kept while the usable nodes are the same) equals a count made
    afresh, as nodes come up (the autoscaler grows the pool by up to 4) and go."""
    answers = []
    counted = GangScheduling._domains

    def checked(self, usable, groups):
        out = counted(self, usable, groups)
        answers.append((out.copy(), np.bincount(groups[usable])))
        return out

    gangs = [(s, m, min(g, 8), t, d, loc) for s, m, g, t, d, loc in gangs]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GangScheduling, "_domains", checked)
        random_replay(n_racks, per_rack, 8, gangs, [], True)
    for kept, fresh in answers:
        np.testing.assert_array_equal(kept, fresh, strict=True)


@settings(max_examples=15, deadline=None)
@given(n_racks=st.integers(1, 5), per_rack=st.integers(1, 3), gangs=gangs, lone=lone)
def test_the_room_remembered_is_a_fresh_count(n_racks, per_rack, gangs, lone):
    """Every answer of `room` (each node's count remembered per shape, counted again where the
    node changed) equals a count made afresh over the usable nodes the Filter passes, as pods
    come and go and nodes come up and go."""
    answers = []
    counted = GangScheduling.room

    def checked(self, pod, usable, groups):
        out = counted(self, pod, usable, groups)
        st, w = self.sim.state, self.sim.w
        nodes = np.flatnonzero(feasible(st, w, pod, usable))
        fresh = np.bincount(groups[nodes], weights=fits_on(st, w, pod, nodes) if len(nodes) else None,
                            minlength=len(out))
        answers.append((out.copy(), fresh))
        return out

    gangs = [(s, m, min(g, 8), t, d, loc) for s, m, g, t, d, loc in gangs]
    lone = [(min(g, 8), t, d) for g, t, d in lone]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GangScheduling, "room", checked)
        patch.setattr(pod_group, "ROOM_SHAPES_KEPT", 2)  # shapes forgotten and counted again too
        random_replay(n_racks, per_rack, 8, gangs, lone, True)
    for kept, fresh in answers:
        np.testing.assert_array_equal(kept, fresh)
