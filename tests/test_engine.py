"""The event engine (harness/engine.py): a call taken back (`cancel`) never runs, counts as no
event and wakes no instant; the others run as if it had never been scheduled."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engine import Engine


def test_a_cancelled_call_neither_runs_nor_wakes_its_instant():
    """Calls at 1, 2, 3 s; the one at 2 s is taken back: a driver stepping at each next event
    steps at 0 (the start), 1 and 3 s, two calls run, two events counted."""
    engine, ran, steps = Engine(), [], []
    engine.at(1.0, ran.append, "a")
    middle = engine.at(2.0, ran.append, "b")
    engine.at(3.0, ran.append, "c")
    engine.cancel(middle)
    engine.run_until(10.0, lambda now: np.inf, steps.append, lambda t, before: False)
    assert ran == ["a", "c"] and steps == [0.0, 1.0, 3.0] and engine.n_events == 2


def test_a_cancelled_call_at_the_top_of_the_heap_leaves_the_next_event_time():
    engine = Engine()
    first = engine.at(5.0, print)
    engine.at(7.0, print)
    engine.cancel(first)
    assert engine.next_event_time() == 7.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.booleans()), max_size=40), st.data())
def test_the_calls_not_cancelled_run_in_order_and_alone(calls, data):
    """Calls at random whole seconds (several at one instant), some taken back at once and some
    by a call that runs before them: the calls that run are exactly those never cancelled before
    their time, in order of time then scheduling; each counts one event; the driver steps at 0
    and at the instants of those calls only."""
    engine, ran, steps = Engine(), [], []
    ids = [engine.at(float(t), ran.append, i) for i, (t, _) in enumerate(calls)]
    cancelled = {i for i, (_, now) in enumerate(calls) if now}
    for i in sorted(cancelled):
        engine.cancel(ids[i])
    # a call at 0.5 s takes back some later ones still pending (a timer stopped by an event)
    later = [i for i, (t, _) in enumerate(calls) if t >= 1 and i not in cancelled]
    stopped = set(data.draw(st.lists(st.sampled_from(later), unique=True))) if later else set()
    engine.at(0.5, lambda: [engine.cancel(ids[i]) for i in sorted(stopped)])
    engine.run_until(100.0, lambda now: np.inf, steps.append, lambda t, before: False)
    kept = sorted((t, i) for i, (t, _) in enumerate(calls) if i not in cancelled | stopped)
    assert ran == [i for _, i in kept]
    assert engine.n_events == len(kept) + 1  # and the call at 0.5 s
    assert steps == sorted({0.0, 0.5} | {float(t) for t, _ in kept})
