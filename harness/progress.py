"""Progress of long tasks (replays, imports, sweeps), on stderr, wherever it goes.

On a terminal it is a tqdm bar. Anywhere else (a log file, CI, a pipe) a bar's carriage
returns make one unreadable line, and tqdm's default hides it altogether, so instead a plain
line is printed every `interval_s` seconds of wall time: a fifteen-minute replay in a log is
never silent.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Self

from tqdm import tqdm

#: Seconds between two lines off a terminal.
INTERVAL_S = 10.0
#: Seconds between two refreshes of a terminal bar (its updates cost nothing in between).
BAR_REFRESH_S = 0.5
#: Seconds of paced progress (compiling left out) before an ETA is shown: a shorter span is noise.
MIN_PACE_S = 1.0


def on_terminal() -> bool:
    return sys.stderr.isatty()


class Progress:
    """`update_to(done)` as often as wanted; it shows at most every refresh interval.

    `status(done)` adds what the task knows (simulated time, events per second) to the
    elapsed time and the ETA. The ETA is the pace of `done` since the start, leaving out the
    seconds `excluded()` says tell nothing of the pace to come (compiling kernels:
    harness/compile_time.py); "ETA (warming up)" until a second of pace is measured. The whole
    pace, not that of the last seconds: a replay's pace swings with its loop's bursts and with
    the machine's load, and its average foretold the end best (harness/replay_progress.py says
    by how much). `clock` is the wall clock (tests pass a fake one).
    """

    def __init__(self, desc: str, total: float, unit: str = "", *, status: Callable[[float], str] | None = None,
                 interval_s: float | None = None, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic, excluded: Callable[[], float] = lambda: 0.0,
                 **bar_options):
        self.desc, self.total, self.unit, self.status = desc, float(total), unit, status
        self.enabled, self.clock, self.excluded = enabled, clock, excluded
        if status is not None:  # the status says what was done and the ETA: the bar shows how far and how long
            bar_options.setdefault("bar_format", "{desc} {percentage:3.0f}%|{bar}| {elapsed}{postfix}")
        on_tty = enabled and on_terminal()
        bar_options.setdefault("mininterval", 0)  # we pace redraws ourselves (BAR_REFRESH_S)
        self.bar = tqdm(total=round(total), desc=desc, unit=unit, leave=False, **bar_options) if on_tty else None
        self.every = BAR_REFRESH_S if self.bar is not None else INTERVAL_S if interval_s is None else interval_s
        self.started = self.last = clock()
        self.done = 0.0
        self.paced_start = self.started - excluded()  # the pace's clock: wall time, the excluded seconds left out

    def due(self) -> bool:
        """Would `update_to` show something now? A caller whose `done` costs to count asks first."""
        return self.enabled and self.clock() - self.last >= self.every

    def update(self, n: float) -> None:
        self.update_to(self.done + n)

    def update_to(self, done: float) -> None:
        self.done = done
        now = self.clock()
        if not self.enabled or now - self.last < self.every:
            return
        self.last = now
        if self.bar is not None:
            if self.status is not None:
                self.bar.set_postfix_str(", ".join(filter(None, (self.status(done).rstrip(), self.eta(now)))),
                                         refresh=False)
            self.bar.update(round(done) - self.bar.n)
        else:
            print(self.line(now), file=sys.stderr, flush=True)

    def line(self, now: float) -> str:
        """`replay merged  26%: sim 12.5 h of 48.0 h, ..., elapsed 1 min 2 s, ETA 2 min 56 s`"""
        elapsed = now - self.started
        if self.status is not None:
            what = self.status(self.done)
        else:
            what = f"{self.done:,.0f} of {self.total:,.0f} {self.unit}"
        parts = [what.rstrip(), f"elapsed {duration(elapsed)}", self.eta(now)]
        pct = f" {min(self.done / self.total, 1.0):4.0%}" if self.total > 0 else ""
        return f"{self.desc}{pct}: {', '.join(filter(None, parts))}"

    def eta(self, now: float) -> str:
        """`ETA 2 min 56 s` at the pace since the start, "" when done or stalled."""
        if not 0 <= self.done < self.total:
            return ""
        paced = now - self.excluded() - self.paced_start
        if paced < MIN_PACE_S:
            return "ETA (warming up)"
        rate = self.done / paced
        return f"ETA {duration((self.total - self.done) / rate)}" if rate > 0 else ""

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def steps(items: list, what: str, desc: str) -> Iterator:
    """Iterate `items`, saying which one of how many is under way: `compare: loop 2 of 3 (merged)`,
    as an overall bar on a terminal (the task's own bar shows below it), as a line elsewhere."""
    n = len(items)
    bar = tqdm(total=n, desc=desc, unit=what, leave=False) if on_terminal() else None
    try:
        for i, item in enumerate(items, 1):
            text = f"{what} {i} of {n} ({item})"
            if bar is not None:
                bar.set_description_str(f"{desc}: {text}")
            else:
                print(f"{desc}: {text}", file=sys.stderr, flush=True)
            yield item
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def duration(seconds: float) -> str:
    """A span of time as a person says it: 3.2 s, 4 min 10 s, 2.5 h, 30.0 days."""
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        m, s = divmod(round(seconds), 60)
        return f"{m} min {s} s" if s else f"{m} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
