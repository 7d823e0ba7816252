"""The accounting's integration step (`metrics.add_step`, compiled) adds rate x dt / per to
every total with the same operations, in the same order, as the numpy vector steps it replaced,
so the integrals keep every bit: over random totals, rates, steps and divisors (1, or 3600 for
the cost), it equals `total += rate * dt / per`."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics import add_step

finite = st.floats(-1e12, 1e12, allow_nan=False, allow_subnormal=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(finite, finite, st.sampled_from([1.0, 3600.0])), min_size=1, max_size=40),
       st.floats(0.0, 1e7, allow_nan=False), st.integers(1, 5))
def test_the_compiled_step_is_numpy_s_bit_for_bit(rows, dt, steps):
    total, rate, per = (np.array(col, np.float64) for col in zip(*rows, strict=True))
    want = total.copy()
    for _ in range(steps):  # steps in turn, as a replay makes them
        want += rate * dt / per
        add_step(total, rate, dt, per)
    assert want.tobytes() == total.tobytes()
