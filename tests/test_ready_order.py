"""The ready nodes in the seeded node order (`sampling.ready_in_order`, the walk's order that
`Scheduler.ready_order` keeps) are those numpy selected: every slot in rank order, kept where
ready, over random node states and orders."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.scheduler.sampling import ready_in_order
from harness.status import ABSENT, BOOTING, READY


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([ABSENT, BOOTING, READY]), max_size=60), st.randoms(use_true_random=False))
def test_the_ready_nodes_in_rank_order_are_numpy_s(status, rng):
    status = np.array(status, np.int8)
    by_rank = np.array(rng.sample(range(len(status)), len(status)), np.int64)
    want = by_rank[(status == READY)[by_rank]]
    assert ready_in_order(by_rank, status == READY).tolist() == want.tolist()
