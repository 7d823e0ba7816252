"""A DRA pod's bind or release on the cluster state (`ClusterState.bind`/`release`: one compiled
call, `state.take_claimed`, for its devices and its GPUs' mirror) leaves every dynamic array, the
nodes' stamps included, as the two calls it replaced did (the devices committed, the stamp followed, then
`node_devices.take`), over random binds and releases of today's claims on nodes of every type
of the default cluster."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.dra import allocator as al
from harness.dra.layer import allocation
from harness.node_devices import take
from harness.state import ClusterState
from harness.status import READY
from tests.test_dra_shortcuts import CLAIMS, CLUSTER, SHAPES, commit


def two_calls(s: ClusterState, n: int, sign: int, gpus, milli: int) -> None:
    """A bind (sign 1) or release (-1) as `ClusterState._take` made it before: the devices, the
    stamp followed, then the GPU matrix and summaries."""
    assert s.dra is not None
    s.mutations += 1
    s.changed_at[n] = s.mutations
    commit(s.device_arrays, gpus, int(s.dra_type[n]), n, sign)
    s.dra.follow(s.dra_stamp, n, (gpus.change, sign), s.device_arrays, s.dra_type, s.device_taints)
    take(n, sign, 0, 0, gpus.view(np.ndarray), milli, s.cpu_free, s.mem_free, s.gpu_free, s.gpu_used, s.pods_on,
         s.gpu_cap, s.slot_table, s.stacked_tables, s.free_whole, s.max_share, s.nvl_whole, s.numa_whole,
         s.both_whole)
    if len(gpus) and s.status[n] == READY:
        s.alloc_ready_milli += sign * milli * len(gpus)
    if sign < 0:
        s.version += 1
        s.grown.append(n)


@settings(deadline=None, max_examples=60)
@given(steps=st.lists(st.tuples(st.integers(0, 3), st.integers(0, len(CLAIMS) - 1), st.booleans()), max_size=20))
def test_one_call_leaves_the_state_as_the_two_did(steps):
    one, two = ClusterState(CLUSTER), ClusterState(CLUSTER)
    nodes = [int(one.pool_offset[p]) for p in range(len(CLUSTER.pools))]  # a node of each pool
    for s in (one, two):
        for n in nodes:
            s.add_node(n, ready=True)
    held: list[tuple[int, object, int]] = []
    for pick, c, release in steps:
        if release and held:
            n, gpus, milli = held.pop()
            one.release(n, 0, 0, gpus, milli)
            two_calls(two, n, -1, gpus, milli)
        else:
            n, claims, milli = nodes[pick], CLAIMS[c], SHAPES[c][1]
            everywhere = np.ones(one.n_slots, bool)
            fits = al.feasible_typed(one.dra.typed(claims)[0], al.FitCache.empty(), al.DeviceState(*one.device_arrays),
                                     one.dra_stamp, one.dra_type, np.array([n]), everywhere, everywhere,
                                     one.cpu_free, one.mem_free, 0, 0)[0]  # no taints configured
            if not fits:
                continue
            gpus = allocation(one.dra, one.device_arrays, int(one.dra_type[n]), claims, n)
            one.bind(n, 0, 0, gpus, milli)
            two_calls(two, n, 1, gpus, milli)
            held.append((n, gpus, milli))
        for name in ClusterState._DYNAMIC + ClusterState.DEVICE_ARRAYS:
            if name != "dra_stamp":  # the absent slots' stamps are each state's own numbers
                assert np.array_equal(getattr(one, name), getattr(two, name)), name
        assert one.dra_stamp[nodes].tolist() == two.dra_stamp[nodes].tolist()
        assert (one.mutations, one.version, one.alloc_ready_milli) == (two.mutations, two.version,
                                                                      two.alloc_ready_milli)
