"""The provision timeout: a node still booting `limit_s` after it was asked for (a request the
provider accepted and never served, or a boot slower than the limit: a loop cannot tell them
apart) is given up and removed. Every loop that buys nodes applies this one rule: Cluster
Autoscaler's --max-node-provision-time (the merged planner's too) and Karpenter's
registration TTL (its liveness check).

The rule reads the deadline as the sum `requested_at + limit_s`, both where it finds the late
nodes and where it tells a loop when to wake: a loop woken at a deadline finds that node late
there. (`now - requested_at >= limit_s` can round a hair under the limit at the deadline's own
instant, and a loop waking there woke there forever.) What a loop learns from a node given up
is its own: Cluster Autoscaler backs the node's pool off, the merged planner also caps the
pool at the nodes left, Karpenter marks no offering (as upstream).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from harness.quiet import Clock
from harness.status import BOOTING

if TYPE_CHECKING:
    from harness.view import SimulationView


class ProvisionTimeout:
    def __init__(self, limit_s: float, sim: SimulationView):
        self.limit_s, self.sim = float(limit_s), sim
        self.read_at = -1  # the state's layout version when `first_due` was read
        self.first_due = np.inf

    def deadline(self) -> float:
        """When the node booting the longest reaches the limit (inf: none boots). A node is
        asked for, comes up or goes only with a change of the state's layout: the slots are
        read once per layout, not at every scan."""
        st = self.sim.state
        if self.read_at != st.layout_version:
            assert not st.in_trial, "the deadline is read between trials"
            booting = st.status == BOOTING
            self.first_due = float(self.sim.node_requested_at[booting].min()) + self.limit_s if booting.any() \
                else np.inf
            self.read_at = st.layout_version
        return self.first_due

    def clocks(self) -> list[Clock]:
        """The deadline as a clock of the quiet stretches (harness/quiet.py): at it, a scan
        gives a node up."""
        deadline = self.deadline()
        return [(deadline, 0.0)] if np.isfinite(deadline) else []

    def give_up(self, now: float, release: Callable[[int], None]) -> np.ndarray:
        """Remove every node still booting at its deadline or past it, oldest slot first, each
        after `release(n)` let the loop take back what it planned there (pods, bookings);
        returns their slots."""
        sim = self.sim
        if now < self.deadline():  # none is late (a sum rounds up with its term: the first due is the least)
            return np.zeros(0, np.int64)
        late = np.flatnonzero((sim.state.status == BOOTING) & (sim.node_requested_at + self.limit_s <= now))
        for n in late.tolist():  # rare: per late node, each removed, its pods re-queued
            release(n)
            sim.remove_node(n)
        return late
