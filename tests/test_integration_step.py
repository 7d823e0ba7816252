"""The accounting's integration step (`metrics.add_event`, compiled) adds rate x dt / per to
every total with the same operations, in the same order, as the numpy vector steps it replaced,
so the integrals keep every bit: over random rates (the fragmentation's sums with and without
free or ready GPU milli), pending counts, idle milli per class, steps and divisors (1, or 3600
for the cost), it equals building the rate vector as the accounting did and adding
`rate * dt / per`; and the bulk path (`_integrate`, quiet stretches) takes the same rates."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics import add_event, add_rows_in_turn, step_rates

finite = st.floats(-1e12, 1e12, allow_nan=False, allow_subnormal=True)
milli = st.integers(0, 10**9).map(float)  # GPU milli: whole numbers
counts = st.lists(st.integers(0, 10**6), min_size=1, max_size=8)


def numpy_rates(r: tuple, reasons: np.ndarray, idle: np.ndarray) -> np.ndarray:
    """The rate vector as the accounting built it before the step was compiled."""
    billed, used, booting, unallocated, gang_wait, committed, buffer, ready_cap, frag, cost_rate = r
    idle_ready = ready_cap - (used + gang_wait + buffer)
    head = (billed, used, booting, unallocated, gang_wait, committed, buffer,
            frag / idle_ready if idle_ready > 0 else 0.0, 1.0 if idle_ready > 0 else 0.0,
            frag / ready_cap if ready_cap > 0 else 0.0, 1.0 if ready_cap > 0 else 0.0, cost_rate)
    rate = np.zeros(len(head) + len(reasons) + len(idle))
    rate[:len(head)] = head
    rate[len(head):len(head) + len(reasons)] = reasons
    rate[len(head) + len(reasons):] = idle
    return rate


@settings(max_examples=300, deadline=None)
@given(st.tuples(finite, milli, finite, finite, milli, finite, milli, milli, st.floats(0, 1e9, allow_nan=False),
                 finite),
       counts, counts, st.floats(0.0, 1e7, allow_nan=False), st.integers(1, 5), st.data())
def test_the_compiled_step_is_numpy_s_bit_for_bit(r, reasons, idle, dt, steps, data):
    reasons, idle = np.array(reasons, np.int64), np.array(idle, np.int64)
    n = 12 + len(reasons) + len(idle)
    total = np.array(data.draw(st.lists(finite, min_size=n, max_size=n)), np.float64)
    per = np.array(data.draw(st.lists(st.sampled_from([1.0, 3600.0]), min_size=n, max_size=n)), np.float64)
    want = total.copy()
    rate = numpy_rates(r, reasons, idle)
    for _ in range(steps):  # steps in turn, as a replay makes them
        want += rate * dt / per
        add_event(total, per, reasons, idle, dt, *r)
    assert want.tobytes() == total.tobytes()
    bulk = add_rows_in_turn(want, np.multiply.outer(np.r_[step_rates(*r), reasons, idle], [dt]) / per[:, None])
    assert bulk.tobytes() == add_rows_in_turn(want, np.multiply.outer(rate, [dt]) / per[:, None]).tobytes()
