"""The ledger's running fragmentation sum goes transition by transition: futile round trips
taken in one compiled pass (`Ledger.round_trips`) end on the bits `Ledger.round_trip` of each
in turn ends on, which are not those of the exact sum or of another association."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.ledger import set_in_turn
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc


def ledger(start: list[float]):
    """The ledger of four ready nodes, their F_n `start`, nothing noted."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=4, max_size=4)], autoscaling=False)
    lg = Simulation(compile_workload(sc.trace([{}]), cl), cl, seed=0, horizon_s=1.0).ledger
    lg.frag[:] = start
    lg.frag_ready = np.float64(sum(start))
    lg.take_changed()
    return lg


def test_the_running_sum_rounds_at_every_transition():
    """Hand count, each step rounded as a float: from F = 0 on nodes 0 and 1, a trip over [0, 1]
    sets F_0 = 0.1, F_1 = 0.7, F_0 = 0.3, F_1 = 0.1. The sum moves by 0.1 (0.1), by 0.7
    (0.1 + 0.7 = 0.7999999999999999), by 0.3 - 0.1 = 0.19999999999999998 (0.9999999999999999)
    and by 0.1 - 0.7 = -0.6, ending at 0.3999999999999999, not at 0.4, the sum of the F_n left
    (nor at 0.4, where adding the new F_n after taking the old one off leads)."""
    one = ledger([0.0] * 4)
    one.round_trips([([0, 1], [0.1, 0.7, 0.3, 0.1])])
    assert one.frag_ready == 0.3999999999999999 and one.frag[[0, 1]].tolist() == [0.3, 0.1]
    assert one.changed == [0, 1, 0, 1]


@settings(max_examples=60, deadline=None)
@given(trips=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=4), min_size=1, max_size=6),
       start=st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4), data=st.data())
def test_round_trips_in_one_pass_end_on_the_bits_of_each_in_turn(trips, start, data):
    """Any trips over four nodes, from any F_n, each transition's F_n any fraction: the noted
    nodes, the F_n left and the running sum (bit for bit, and a numpy float as the transitions'
    own arithmetic leaves it) as `round_trip` of each in turn leaves them."""
    trips = [(nodes, data.draw(st.lists(st.floats(0.0, 1.0), min_size=2 * len(nodes), max_size=2 * len(nodes))))
             for nodes in trips]
    one, each = ledger(start), ledger(start)
    one.round_trips(trips)
    for nodes, frags in trips:
        each.round_trip(nodes, frags)
    assert one.changed == each.changed
    assert np.array_equal(one.frag, each.frag)
    assert repr(one.frag_ready) == repr(each.frag_ready)


@settings(max_examples=60, deadline=None)
@given(start=st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4),
       steps=st.lists(st.tuples(st.integers(0, 3), st.floats(0.0, 1.0)), max_size=12))
def test_the_compiled_pass_is_its_python(start, steps):
    """`set_in_turn` compiled and as plain Python (what NUMBA_DISABLE_JIT=1 runs; the replays of
    tests/test_jit.py take no futile attempt whole, so it is checked here): the same F_n and the
    same sum, bit for bit."""
    nodes = np.array([n for n, _ in steps], np.int64)
    values = np.array([f for _, f in steps], np.float64)
    compiled, plain = np.array(start), np.array(start)
    total = float(sum(start))
    sums = set_in_turn(compiled, total, nodes, values), set_in_turn.py_func(plain, total, nodes, values)
    assert repr(float(sums[0])) == repr(float(sums[1]))
    assert np.array_equal(compiled, plain)
