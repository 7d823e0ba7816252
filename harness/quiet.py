"""Cadences and their quiet stretches: the upcoming wake-ups of a loop's cadence at which it
provably changes nothing, so they pass in bulk (see `Simulation.run`). `Cadence` is the one
cadence every loop and autoscaler that wakes on a period keeps.

A loop knows a wake-up is quiet when nothing it reads changed since a scan that did nothing
(no node, arrival or booking) and no clock of its own ran out: a scale-down delay, a backoff,
a nomination... A clock is (since, length): it runs out at the first instant t with
t - since >= length, the very comparison the loop makes (so a deadline d is (d, 0.0)). The
wake-ups are made with the loop's own arithmetic, so each is the instant it would have stepped
at, bit for bit; a stretch ends a wake-up past the earliest clock's approximate end, and
at most MAX_TICKS long (memory stays small over a long gap).
"""

from __future__ import annotations

import math

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


class Cadence:
    """A loop's scans, one every `interval_s` seconds, and the quiet stretches between them:
    the one cadence of every loop and autoscaler that wakes on a period.

    On the grid (`grid`, the Cluster-Autoscaler-like autoscaler and the merged planner) scans
    fall on 0, s, 2s, ...: a scan at t sets the next at `grid_after(t)`, and a loop an event
    wakes scans at the first grid point not before it (`due`). Off the grid (Karpenter's
    disruption poll, whose controller requeues itself a period after it ran, or at once) the
    next scan is the last plus s. The two are kept apart, not folded into one: each is the
    arithmetic its loop always did, so every wake-up stays the instant it was, bit for bit.
    A scan that changed nothing leaves what it saw (`rest`); while the loop still sees that
    (`quiet`), its next scans up to the first clock that runs out change nothing either and
    pass in bulk (`skip`)."""

    def __init__(self, interval_s: float, grid: bool = True):
        self.interval_s, self.grid = float(interval_s), grid
        self.next = 0.0  # the next scan's instant, at the earliest
        self.quiet_key: tuple | None = None  # what the last scan saw, if it changed nothing

    def due(self, now: float) -> float:
        """When the next scan is due for a loop awake at `now`: on the grid, the first grid
        point at or after `now`, never before `next`; off the grid, `next`."""
        if not self.grid:
            return self.next
        return max(self.next, math.ceil(now / self.interval_s - 1e-9) * self.interval_s)

    def ran(self, now: float) -> None:
        """A scan ran at `now`: the next is a period on."""
        self.next = grid_after(now, self.interval_s) if self.grid else now + self.interval_s

    def rest(self, key: tuple | None) -> None:
        """What the scan just run saw, if it changed nothing (None: it changed something)."""
        self.quiet_key = key

    def quiet(self, key: tuple) -> bool:
        """Does the loop see now what a scan that changed nothing saw?"""
        return self.quiet_key == key

    def scans(self, start: float, before: float) -> np.ndarray:
        """Its scans from `start` on, those before `before`, as it would set each from the last."""
        if self.grid:
            return grid_ticks(start, before, self.interval_s)
        return every(start, self.interval_s, before)

    def passed(self, ticks: np.ndarray) -> None:
        """These scans passed in bulk: the next follows the last of them."""
        if len(ticks):
            self.ran(float(ticks[-1]))

    def skip(self, start: float, before: float, clocks: list[Clock]) -> np.ndarray:
        """The scans from `start` on, before `before`, that come before any of these clocks runs
        out: they pass (call it only while `quiet`)."""
        ticks = self.scans(start, min(before, ends(clocks) + self.interval_s))
        ticks = ticks[:still_quiet(ticks, clocks)]
        self.passed(ticks)
        return ticks


def _count(first: float, before: float, step: float) -> int:
    """How many instants `step` apart from `first` to make: enough to pass `before` (one more),
    at most MAX_TICKS."""
    return min(int(max(before - first, 0.0) / step) + 2, MAX_TICKS)
