"""A node's stamp names its content (`DeviceLayer.follow`): whatever history binds and releases
pods with claims on nodes, one stamp never names two contents (device type, rows, taints), and
equal contents reached by different histories carry one stamp (pods bound in another order, a
pod bound then released, a node emptied: its type's stamp, as `reset` gives a fresh node), so an
answer cached by stamp is found again wherever the content recurs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.dra import allocator as al
from harness.dra.layer import DeviceLayer, allocation
from tests.test_dra_shortcuts import CLAIMS, CLUSTER, commit, stamped


def replayed(layer: DeviceLayer, types: list[int], steps: list[tuple[int, int, int]], tainted: list[bool]):
    """Binds (and releases, a step whose claim index is negative: the node's last pod leaves) on
    fresh nodes of these types, each change followed as `ClusterState._take` does; yields the
    arrays, stamps and types after each step."""
    marks = np.zeros((len(types), layer.width), np.int64)
    marks[np.array(tainted, bool), 0] = 1  # a taint on the first device, which no claim tolerates
    arrays, stamp = stamped(types, layer, marks)
    slot_type = np.array(types, np.int32)
    bound: list[list] = [[] for _ in types]
    yield arrays, stamp, slot_type, marks
    for n, c, _ in steps:
        n %= len(types)
        t = int(slot_type[n])
        if c < 0:
            if not bound[n]:
                continue
            gpus, sign = bound[n].pop(), -1
        else:
            claims = CLAIMS[c]
            one = np.ones(len(types), bool)
            if not al.feasible_typed(layer.typed(claims)[0], al.FitCache.empty(), al.DeviceState(*arrays), stamp,
                                     slot_type, np.array([n]), one, one, np.zeros(len(types), np.int64),
                                     np.zeros(len(types), np.int64), 0, 0, marks)[0]:  # a cache of its own
                continue
            gpus, sign = allocation(layer, arrays, t, claims, n, marks), 1
            bound[n].append(gpus)
        commit(arrays, gpus, t, n, sign)
        layer.follow(stamp, n, (gpus.change, sign), arrays, slot_type, marks)
        yield arrays, stamp, slot_type, marks


@settings(deadline=None, max_examples=80)
@given(types=st.lists(st.integers(0, len(CLUSTER.node_types) - 1), min_size=1, max_size=3),
       steps=st.lists(st.tuples(st.integers(0, 2), st.integers(-3, len(CLAIMS) - 1), st.just(0)), max_size=24),
       tainted=st.lists(st.booleans(), min_size=3, max_size=3))
def test_a_stamp_names_one_content_and_a_content_one_stamp(types, steps, tainted):
    layer = DeviceLayer(CLUSTER.node_types, CLUSTER.partition_profiles, {})
    content_of: dict[int, tuple] = {}  # stamp -> content
    stamp_of: dict[tuple, int] = {}  # content (reached by `follow`) -> stamp
    for arrays, stamp, slot_type, marks in replayed(layer, types, steps, tainted[:len(types)]):
        for n in range(len(types)):
            content = (int(slot_type[n]), *(a[n].tobytes() for a in arrays), marks[n].tobytes())
            s = int(stamp[n])
            assert content_of.setdefault(s, content) == content, "one stamp, two contents"
            if not marks[n].any():  # an untainted node's content has one stamp, its type's when empty
                assert stamp_of.setdefault(content, s) == s, "one content, two stamps"
                if not arrays[0][n].any():
                    assert s == slot_type[n]
