"""Node-group backoff: what a loop learns from failed requests, per pool, as Cluster Autoscaler
keeps it (upstream utils/backoff/exponential_backoff.go).

A pool that failed a request (came back short, or its nodes never came up) is not asked again
for a while: the initial backoff, doubled on each failure after the last backoff ran out (up to
a maximum), forgotten `reset_s` after the failure it records or once a request is granted in
full. Shared by every loop that learns capacity by asking (the Cluster-Autoscaler-like loop, the
merged planner), so they learn alike.
"""

from __future__ import annotations

import numpy as np

from harness.quiet import Clock


class NodeGroupBackoff:
    def __init__(self, n_pools: int, backoff_s: float = 300.0, max_backoff_s: float = 1800.0,
                 reset_s: float = 10800.0):
        self.backoff_s, self.max_backoff_s, self.reset_s = float(backoff_s), float(max_backoff_s), float(reset_s)
        self.until = np.full(n_pools, -np.inf)  # when each pool's last backoff ends
        self.length = np.zeros(n_pools)  # the last backoff's length; 0: no backoff on record
        self.failed_at = np.full(n_pools, -np.inf)
        self.seen_at = -np.inf  # the last instant `allowed` was asked about

    def failed(self, p: int, now: float) -> None:
        """Back pool p off: the initial backoff, or twice the last one (up to the max) if one is
        on record, not running now, and its failure is less than `reset_s` old (upstream
        forgets older ones). "Not running" is `until <= now`, as `allowed` reads it: upstream
        tests `until` strictly before now, but its loop never lands on `until` exactly while
        ours (a 10 s grid) does, and a retry at that instant must count as a new failure."""
        length = self.backoff_s
        known = self.length[p] > 0 and now <= self.failed_at[p] + self.reset_s
        if known and self.until[p] <= now:
            length = min(2 * self.length[p], self.max_backoff_s)
        self.length[p], self.until[p], self.failed_at[p] = length, now + length, now

    def succeeded(self, p: int) -> None:
        """Pool p's scale-up completed (for the merged planner: a request granted in full): its
        record is dropped, as upstream removes the backoff when a scale-up completes."""
        self.length[p] = 0.0

    def allowed(self, now: float) -> np.ndarray:
        """Per pool, whether it may be asked at `now` (no backoff running)."""
        self.seen_at = now
        return self.until <= now

    def clocks(self) -> list[Clock]:
        """The earliest end of the backoffs still running at the last `allowed`, as a deadline
        clock (harness/quiet.py): a scan after it may ask a pool it could not."""
        running = self.until[self.until > self.seen_at]
        return [(float(running.min()), 0.0)] if len(running) else []
