"""Scale-down's compiled steps (harness/autoscalers/scale_down.py) give what the numpy steps
they replaced gave, over random nodes, pools, budgets and timers: the nodes re-judged, the
candidates in upstream's order, the presumed-removable cut at the plan's limit, the plan's
outcome (rechecks, unneeded times), each pool's spare nodes and the budgets' crop. The numpy
steps are written out here as the reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.autoscalers.scale_down import (
    candidates,
    changed_nodes,
    presumed_removable,
    settle,
    spare_per_pool,
    within_by_group,
)
from harness.status import ABSENT, BOOTING, READY

N = 40  # node slots


def slots(draw, elements):
    return np.array(draw(st.lists(elements, min_size=N, max_size=N)))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_nodes_rejudged_are_those_changed_or_protected_otherwise(data):
    protect = slots(data.draw, st.booleans())
    protected = slots(data.draw, st.booleans())
    changed_at = slots(data.draw, st.integers(0, 50)).astype(np.int64)
    seen = data.draw(st.integers(0, 50))
    want = np.flatnonzero((protect != protected) | (changed_at > seen))
    got = changed_nodes(protect, protected, changed_at, seen)
    assert got.tolist() == want.tolist()
    assert protected.tolist() == protect.tolist()


def numpy_plan(low, recheck_at, now, pods_on, gang_pods_on, unneeded_since, unneeded, limit, recheck_s):
    """`ScaleDown._plan` as numpy steps (presumed removable but for a gang member)."""
    recheck_at, unneeded_since = recheck_at.copy(), unneeded_since.copy()
    cand = low[recheck_at[low] <= now]
    empty = pods_on[cand] == 0
    before = ~np.isnan(unneeded_since[cand])
    cand = cand[np.lexsort((~before, ~empty))]
    found = gang_pods_on[cand] == 0
    tried = int(np.searchsorted(np.cumsum(found), limit)) + 1 if found.sum() > limit else len(cand)
    found = found[:tried]
    recheck_at[cand[:tried][~found]] = now + recheck_s
    new = cand[:tried][found]
    since = unneeded_since[new]
    unneeded_since[unneeded] = np.nan
    unneeded_since[new] = np.where(np.isnan(since), now, since)
    return cand, tried, new, cand[:tried][~found], recheck_at, unneeded_since


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_plan_finds_what_the_numpy_steps_found(data):
    low = np.flatnonzero(slots(data.draw, st.booleans()))
    recheck_at = slots(data.draw, st.sampled_from([-np.inf, 5.0, 10.0, 20.0])).astype(float)
    pods_on = slots(data.draw, st.integers(0, 2)).astype(np.int32)
    gang_pods_on = np.minimum(pods_on, slots(data.draw, st.integers(0, 1))).astype(np.int32)
    unneeded_since = slots(data.draw, st.sampled_from([np.nan, 0.0, 7.0])).astype(float)
    unneeded = np.flatnonzero(~np.isnan(unneeded_since))
    limit = data.draw(st.integers(0, 12))
    now, recheck_s = 10.0, 300.0
    cand, tried, new, kept, recheck_want, since_want = numpy_plan(
        low, recheck_at, now, pods_on, gang_pods_on, unneeded_since, unneeded, limit, recheck_s)
    got_cand = candidates(low, recheck_at, now, pods_on, unneeded_since)
    assert got_cand.tolist() == cand.tolist()
    found, got_tried = presumed_removable(got_cand, gang_pods_on, limit)
    assert got_tried == tried and len(found) == tried
    got_new, got_kept = settle(got_cand[:got_tried], found, now, recheck_s, recheck_at, unneeded_since, unneeded)
    assert got_new.tolist() == new.tolist() and got_kept.tolist() == kept.tolist()
    assert recheck_at.tobytes() == recheck_want.tobytes()
    assert unneeded_since.tobytes() == since_want.tobytes()


def numpy_within(nodes, pool, spare):
    by_pool = np.argsort(pool, kind="stable")
    rank = np.empty(len(nodes), np.int64)
    rank[by_pool] = np.arange(len(nodes)) - np.searchsorted(pool[by_pool], pool[by_pool])
    return nodes[rank < spare[pool]]


def numpy_by_group(nodes, slot_pool):
    if len(nodes) < 2:
        return nodes
    pool = slot_pool[nodes]
    _, first, inverse = np.unique(pool, return_index=True, return_inverse=True)
    return nodes[np.argsort(first[inverse.ravel()], kind="stable")]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_budgets_crop_as_the_numpy_steps_did(data):
    n_pools = data.draw(st.integers(1, 4))
    slot_pool = slots(data.draw, st.integers(0, n_pools - 1)).astype(np.int32)
    status = slots(data.draw, st.sampled_from([ABSENT, BOOTING, READY])).astype(np.int8)
    min_size = np.array(data.draw(st.lists(st.integers(0, 5), min_size=n_pools, max_size=n_pools)), np.int64)
    present = np.bincount(slot_pool[status != ABSENT], minlength=n_pools)
    spare = spare_per_pool(status, slot_pool, min_size)
    assert spare.tolist() == (present - min_size).tolist()
    ripe = np.array(data.draw(st.permutations(range(N))), np.int64)[:data.draw(st.integers(0, N))]
    empty, busy = ripe[: len(ripe) // 2], ripe[len(ripe) // 2:]
    most = data.draw(st.integers(1, 10))
    want_spare = spare.copy()
    gone = numpy_by_group(numpy_within(empty, slot_pool[empty], want_spare), slot_pool)[:most]
    want_spare -= np.bincount(slot_pool[gone], minlength=n_pools)
    drained = numpy_by_group(numpy_within(busy, slot_pool[busy], want_spare), slot_pool)
    assert within_by_group(empty, slot_pool, spare, most).tolist() == gone.tolist()
    assert spare.tolist() == want_spare.tolist()
    assert within_by_group(busy, slot_pool, spare, len(busy)).tolist() == drained.tolist()
