"""The state owns its invalidation: a trial (`ClusterState.fork` ... `revert`) that is rolled
back leaves every array, running total and cache key (version, layout_version, mutations,
changed_at, grown) exactly as before, whatever the trial did through the real mutation paths,
and so does a rollback to a savepoint within it; a kept trial (`keep`) counts as a change.
`Scheduler.try_place` is such a trial.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.state import ClusterState
from harness.status import ABSENT, BOOTING
from harness.whatif import first_fit_nodes
from tests.test_filters import (
    CLUSTER,
    bind_one,
    fits,
    pod_dicts,
    states,
    workload,
)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCALARS = ("version", "layout_version", "mutations", "ready_milli", "booting_milli", "alloc_ready_milli",
           "committed_empty_milli")


def everything(state: ClusterState) -> dict:
    """Every part of the state a cache or a reader could see."""
    out = {name: getattr(state, name).copy() for name in ClusterState._DYNAMIC}
    out.update({name: getattr(state, name) for name in SCALARS})
    out["paid_per_pool"] = state.paid_per_pool.copy()
    out["grown"] = list(state.grown)
    return out


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        assert np.array_equal(value, b[key]), key


def mutate(state: ClusterState, data) -> None:
    """Random changes through every mutation path: nodes added (ready or booting), pods bound
    and some released, a booting node made ready, an empty node removed, a bulk bind."""
    absent = np.flatnonzero(state.status == ABSENT)
    for n in data.draw(st.sets(st.sampled_from(absent.tolist()), max_size=3)) if len(absent) else ():
        state.add_node(n, ready=data.draw(st.booleans()))
    w = workload(CLUSTER, data.draw(st.lists(pod_dicts(), min_size=1, max_size=6)))
    present = state.status != ABSENT
    bound = []
    for p in range(w.n_pods):
        cand = [n for n in np.flatnonzero(present) if fits(state, w, p, n, present)]
        if cand:
            bound.append(bind_one(state, w, p, int(cand[data.draw(st.integers(0, len(cand) - 1))])))
    for args in bound[:data.draw(st.integers(0, len(bound)))]:
        state.release(*args)
    booting = np.flatnonzero(state.status == BOOTING)
    if len(booting):
        state.make_ready(int(booting[0]))
    empty = np.flatnonzero((state.status != ABSENT) & (state.pods_on == 0))
    if len(empty) and data.draw(st.booleans()):
        state.remove_node(int(empty[-1]))
    state.capacity_opened(np.flatnonzero(state.status != ABSENT)[:2])
    first_fit_nodes(state, w, 0, state.status != ABSENT, data.draw(st.integers(1, 4)))  # a bulk bind


@SETTINGS
@given(state=states(), data=st.data())
def test_reverted_trial_leaves_state_and_cache_keys_as_before(state, data):
    state.grown.extend([0, 1])  # not yet taken by the scheduler
    before = everything(state)
    state.fork()
    mutate(state, data)
    state.revert()
    assert_same(everything(state), before)
    state.fork()  # and the state is usable for the next trial
    state.revert()
    assert_same(everything(state), before)


@SETTINGS
@given(state=states(), data=st.data())
def test_kept_trial_counts_as_a_change(state, data):
    before = everything(state)
    state.fork()
    mutate(state, data)
    after = everything(state)
    state.keep()
    assert_same(everything(state), after)
    assert state.version > before["version"]  # capacity_opened always says capacity opened
    # a trial that changed a node leaves the mutation count moved (one that changed none need not)
    touched = any(not np.array_equal(after[k], before[k]) for k in ClusterState._DYNAMIC if k != "changed_at")
    assert state.mutations > before["mutations"] or not touched


@SETTINGS
@given(state=states(), data=st.data())
def test_a_rollback_to_a_savepoint_leaves_the_trial_as_then(state, data):
    # changes, a savepoint, more changes, a rollback: as at the savepoint, the trial still open
    # (and a second rollback to it changes nothing); the revert then undoes the whole trial
    state.grown.append(0)
    before = everything(state)
    state.fork()
    mutate(state, data)
    point = state.savepoint()
    at_point = everything(state)
    mutate(state, data)
    state.rollback(point)
    assert_same(everything(state), at_point)
    assert state.in_trial
    state.rollback(point)
    assert_same(everything(state), at_point)
    mutate(state, data)
    state.revert()
    assert_same(everything(state), before)


def test_trials_do_not_nest():
    state = ClusterState(CLUSTER)
    state.fork()
    try:
        state.fork()
    except AssertionError:
        return
    raise AssertionError("a nested fork must be refused")


def test_capacity_opened_and_take_grown():
    state = ClusterState(CLUSTER)
    state.add_node(0, ready=True)
    version = state.version
    state.capacity_opened(np.array([3, 4]))
    assert state.version == version + 1
    assert state.take_grown() == [0, 3, 4]
    assert state.take_grown() == []


def test_try_place_is_a_trial():
    """The scheduler's trial placement of a gang that does not fit leaves the state and every
    cache key as before; one that fits and is kept counts as a change."""
    from tests.test_autoscaler_bulk import attached, cluster

    cl = cluster()
    sim, ca = attached(cl, [{"job_id": "g", "min_member": 3, "gpu_count": 4} for _ in range(3)])
    state, scheduler = sim.state, ca.scheduler
    state.add_node(0, ready=True)  # an 8-GPU node: two of the three pods fit
    state.grown.append(5)
    before = everything(state)
    assert scheduler.try_place(sim.w.job_pods[0], state.ready, keep=True) is None
    assert_same(everything(state), before)
    plan = scheduler.try_place(sim.w.job_pods[0][:2], state.ready, keep=True)
    assert plan is not None and state.mutations > before["mutations"]
