"""The discrete-event core: a clock, a heap of scheduled calls and the run loop, no domain.

As simpy's core: `at` schedules a call at an instant (calls at one instant run in the order
they were scheduled), `advance_to` moves the clock and runs what is due, `run_until` alternates
that with a driver's steps until a horizon. A `stream` of calls at times known in advance (a
trace's arrivals) stays out of the heap. What the calls do is the caller's.

A scheduled call can be taken back (`cancel`), as a Go timer is stopped: it never runs, counts
as no event and wakes no instant. It leaves the heap lazily, when it reaches the top (asyncio's
event loop drops its cancelled timers the same way), so cancelling costs O(1).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from typing import cast

import numpy as np


class Engine:
    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list = []
        self._seq = itertools.count()
        self.n_events = 0  # calls run
        self._cancelled: set[int] = set()  # ids of calls taken back, still in the heap
        self._stream_times: np.ndarray = np.zeros(0)
        self._stream_fn: Callable[[int], None] | None = None
        self._stream_next = 0

    def at(self, time: float, fn, *args) -> int:
        """Schedule fn(*args) at `time` (events at one instant run in scheduling order); returns
        the call's id, which `cancel` takes."""
        call = next(self._seq)
        heapq.heappush(self._heap, (float(time), call, fn, args))
        return call

    def cancel(self, call: int) -> None:
        """Take back a scheduled call that has not run yet (`call`: the id `at` returned)."""
        self._cancelled.add(call)

    def stream(self, times: np.ndarray, fn: Callable[[int], None]) -> None:
        """Call fn(i) at times[i] for i = 0, 1, ... (times sorted); at one instant these
        calls run after the heap's."""
        self._stream_times, self._stream_fn, self._stream_next = times, fn, 0

    def next_event_time(self) -> float:
        heap, cancelled = self._heap, self._cancelled
        while cancelled and heap and heap[0][1] in cancelled:
            cancelled.discard(heapq.heappop(heap)[1])
        t = heap[0][0] if heap else np.inf
        if self._stream_next < len(self._stream_times):
            t = min(t, self._stream_times[self._stream_next])
        return t

    def advance_to(self, t: float) -> None:
        """Move the clock to t and run the calls due by then."""
        self.now = t
        heap, cancelled = self._heap, self._cancelled
        while heap and heap[0][0] <= t:
            _, call, fn, args = heapq.heappop(heap)
            if cancelled and call in cancelled:
                cancelled.discard(call)
                continue
            fn(*args)
            self.n_events += 1
        times, fn = self._stream_times, cast("Callable[[int], None]", self._stream_fn)  # by name: no type built
        while self._stream_next < len(times) and times[self._stream_next] <= t:
            fn(self._stream_next)
            self._stream_next += 1
            self.n_events += 1

    def run_until(self, until: float, wakeup: Callable[[float], float], step: Callable[[float], None],
                  skip: Callable[[float, float], bool], progress: Callable[[float], None] | None = None,
                  done: Callable[[], bool] | None = None) -> None:
        """Step at 0, then at each next instant (the next event or the driver's `wakeup(now)`)
        up to `until`, or until `done()` holds after a step. A wake-up before the next event is
        first offered to `skip(t, before)`, which may pass the driver's quiet wake-ups from t on,
        before `before`, in bulk (it moves the clock itself and says so)."""
        self.advance_to(0.0)
        step(0.0)
        while True:
            t_event = self.next_event_time()
            t = min(t_event, wakeup(self.now))
            if t > until or not math.isfinite(t):
                break
            if t < t_event and skip(t, min(t_event, np.nextafter(until, np.inf))):
                if progress is not None:
                    progress(self.now)
                continue
            self.advance_to(t)
            step(t)
            if progress is not None:
                progress(t)
            if done is not None and done():
                break
