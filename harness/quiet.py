"""Quiet stretches: the upcoming wake-ups of a loop's cadence at which it provably changes
nothing, so they pass in bulk (see `Simulation.run`).

A loop knows a wake-up is quiet when nothing it reads changed since a scan that did nothing
(no node, arrival or booking) and no clock of its own ran out: a scale-down delay, a backoff,
a nomination... A clock is (since, length): it runs out at the first instant t with
t - since >= length, the very comparison the loop makes (so a deadline d is (d, 0.0)). The
wake-ups are made with the loop's own arithmetic, so each is the instant it would have stepped
at, bit for bit; a stretch ends a wake-up past the earliest clock's approximate end, and
at most MAX_TICKS long (memory stays small over a long gap).
"""

from __future__ import annotations

import numpy as np

NO_TICKS = np.zeros(0)
MAX_TICKS = 1 << 16
Clock = tuple[float, float]


def grid_after(t: float, interval: float) -> float:
    """The scan after one at t on the grid 0, s, 2s, ...: where a scan sets the next."""
    return (np.floor(t / interval + 1e-9) + 1) * interval


def grid_ticks(start: float, before: float, interval: float) -> np.ndarray:
    """Consecutive scans from `start` on the grid (each `grid_after` the one before, exactly),
    those before `before`."""
    n = _count(start, before, interval)
    ticks = np.r_[start, (np.floor(start / interval + 1e-9) + np.arange(1, n)) * interval]
    exact = grid_after(ticks[:-1], interval) == ticks[1:]  # the recurrence holds (it does, bar huge t)
    return ticks[:min(leading(exact) + 1, leading(ticks < before))]


def quiet_scans(start: float, before: float, interval: float, clocks: list[Clock]) -> np.ndarray:
    """The scans on the grid from `start`, before `before`, that come before any clock runs out."""
    ticks = grid_ticks(start, min(before, ends(clocks) + interval), interval)
    return ticks[:still_quiet(ticks, clocks)]


def every(first: float, step: float, before: float) -> np.ndarray:
    """first, first + step, (first + step) + step, ...: a cadence that sets its next time by
    adding the step to the last (added one after another, as it does), those before `before`."""
    run = np.full(_count(first, before, step), step)
    run[0] = first
    run = np.add.accumulate(run, out=run)
    return run[:leading(run < before)]


def ends(clocks: list[Clock]) -> float:
    """About when the first of these clocks runs out (inf: never)."""
    return min((since + length for since, length in clocks), default=np.inf)


def still_quiet(ticks: np.ndarray, clocks: list[Clock]) -> int:
    """How many of these increasing instants come before any clock runs out."""
    n = len(ticks)
    for since, length in clocks:
        n = min(n, leading(ticks - since < length))
    return n


def leading(mask: np.ndarray) -> int:
    """How many leading entries of `mask` are true."""
    return len(mask) if mask.all() else int(np.argmin(mask))


def _count(first: float, before: float, step: float) -> int:
    """How many instants `step` apart from `first` to make: enough to pass `before` (one more),
    at most MAX_TICKS."""
    return min(int(max(before - first, 0.0) / step) + 2, MAX_TICKS)
