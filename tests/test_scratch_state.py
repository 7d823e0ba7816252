"""A what-if's kept scratch copy (`harness.whatif.ScratchState`) is, at every take, what a fresh
`ClusterState.copy` of the state would be: every dynamic array, running total and cache key,
whatever the state and the previous what-if on the copy did in between (binds, releases, nodes
added, made ready and removed, trials reverted or kept on either side, device types retyped).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.config import compose
from harness.replay import build
from harness.state import ClusterState
from harness.whatif import ScratchState
from tests.test_filters import states
from tests.test_pinned_outputs import TRACE
from tests.test_whatif import SCALARS, mutate

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_same_as_a_copy(twin: ClusterState, state: ClusterState) -> None:
    """`twin` reads as a fresh copy of `state`: each dynamic array (device arrays included), each
    running total and cache key, and the same static parts."""
    fresh = state.copy()
    for name in state._DYNAMIC:
        assert np.array_equal(getattr(twin, name), getattr(fresh, name)), name
    for name in SCALARS:
        assert getattr(twin, name) == getattr(fresh, name), name
    assert np.array_equal(twin.paid_per_pool, fresh.paid_per_pool)
    assert twin.grown == [] and not twin.in_trial
    assert twin.allowed is state.allowed and twin.pool_allowed is state.pool_allowed


def what_if(twin: ClusterState, data) -> None:
    """What a what-if does on its copy: changes kept, and a trial (kept or reverted)."""
    mutate(twin, data)
    twin.fork()
    mutate(twin, data)
    if data.draw(st.booleans()):
        twin.revert()
    else:
        twin.keep()


@SETTINGS
@given(state=states(), data=st.data())
def test_each_take_is_a_fresh_copy(state, data):
    scratch = ScratchState(state)
    for _ in range(data.draw(st.integers(1, 3))):
        twin = scratch.take()
        assert_same_as_a_copy(twin, state)
        what_if(twin, data)
        if data.draw(st.booleans()):  # the state's own trial, reverted, leaves it as it was
            state.fork()
            mutate(state, data)
            state.revert()
        if data.draw(st.booleans()):
            mutate(state, data)
    assert_same_as_a_copy(scratch.take(), state)


def test_each_take_in_a_karpenter_replay_is_a_fresh_copy(monkeypatch):
    """On a DRA cluster (device arrays, node-group templates retyping absent slots), through
    Karpenter's provisioning and consolidation what-ifs: every take reads as a fresh copy."""
    takes = []
    take = ScratchState.take

    def checked(self: ScratchState) -> ClusterState:
        twin = take(self)
        assert_same_as_a_copy(twin, self.state)
        takes.append(twin)
        return twin

    monkeypatch.setattr(ScratchState, "take", checked)
    sim, lp = build(compose("config", ["loop=separate_karpenter", f"trace.path={TRACE}", "horizon_s=5400"]))
    assert sim.state.dra is not None
    sim.run(lp)
    assert len(takes) > 20


def test_a_retype_on_the_copy_is_undone_at_the_next_take():
    """A what-if's `retype` changes the device types of absent slots without counting a change:
    the next take still reads the state's."""
    from hydra.utils import instantiate

    state = ClusterState(instantiate(compose("config", []).cluster, _convert_="all"))
    assert state.dra is not None
    state.add_node(0, ready=True)
    scratch = ScratchState(state)
    twin = scratch.take()
    other = np.roll(np.unique(state.slot_type), 1)[np.searchsorted(np.unique(state.slot_type), state.slot_type)]
    twin.retype(other.astype(np.int32))
    assert (twin.dra_type != state.dra_type).any()
    assert_same_as_a_copy(scratch.take(), state)
