"""Wall seconds this process spends compiling the kernels, or loading them from numba's cache.

A first run compiles for tens of seconds at its start, and again whenever a loop first calls
another kernel (a first scale-down, a first consolidation): a pace measured over those seconds
says nothing of the pace to come. numba announces each time it holds its compiler lock
(numba.core.event, "numba:compiler_lock": compiling, or loading a compiled kernel), so the
seconds can be counted and left out.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from numba.core import event


class CompileClock(event.Listener):
    """`clock()`: the seconds spent holding numba's compiler lock since it was installed (nested
    holds once), the hold under way included."""

    def __init__(self) -> None:
        self.depth, self.total, self.started = 0, 0.0, 0.0

    def on_start(self, ev: event.Event) -> None:
        if self.depth == 0:
            self.started = time.monotonic()
        self.depth += 1

    def on_end(self, ev: event.Event) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.total += time.monotonic() - self.started

    def __call__(self) -> float:
        return self.total + (time.monotonic() - self.started if self.depth else 0.0)


@contextmanager
def compiling() -> Iterator[CompileClock]:
    """A `CompileClock` counting while the block runs."""
    clock = CompileClock()
    with event.install_listener("numba:compiler_lock", clock):
        yield clock
