"""The cloud provider behind the node pools: finite stock, atomic requests, seeded boot delays.

A request for N nodes of a pool yields at most what the pool's stock and max_size allow:
fewer than N for a best-effort request, none for an all-or-nothing request on a pool whose
provider honours atomicity (`Pool.atomic`). Granted nodes take the lowest free slots, so
committed (reserved) slots fill first. The shortfall is known when the request returns.
"""

from __future__ import annotations

import numpy as np

from harness.cluster import Cluster
from harness.state import ABSENT, ClusterState


class Cloud:
    def __init__(self, cluster: Cluster, state: ClusterState, seed: int):
        self.cluster = cluster
        self.state = state
        # one stream per pool, so a pool's delays do not depend on other pools' requests
        self.rngs = [np.random.default_rng([seed, 7919, p]) for p in range(len(cluster.pools))]

    def free_slots(self, p: int) -> np.ndarray:
        sl = self.state.pool_slots(p)
        return np.flatnonzero(self.state.status[sl] == ABSENT) + sl.start

    def free_slots_in_emptiest_rack(self, p: int) -> np.ndarray:
        """Free slots of pool p's rack with the most free slots (for a rack-local gang)."""
        slots = self.free_slots(p)
        if len(slots) == 0:
            return slots
        racks, counts = np.unique(self.state.slot_rack[slots], return_counts=True)
        return slots[self.state.slot_rack[slots] == racks[np.argmax(counts)]]

    def available(self, p: int) -> int:
        """Nodes the pool could still supply now (stock and max_size)."""
        pool = self.cluster.pools[p]
        sl = self.state.pool_slots(p)
        present = int((self.state.status[sl] != ABSENT).sum())
        room = pool.max_size - present
        if pool.stock is not None:
            room = min(room, pool.stock - present)
        return max(room, 0)

    def free_committed(self, p: int) -> int:
        sl = self.state.pool_slots(p)
        return int(((self.state.status[sl] == ABSENT) & self.state.slot_committed[sl]).sum())

    def request(self, p: int, count: int, atomic: bool,
                slots: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Ask pool p for `count` nodes, in the given free slots (racks) or the lowest free ones.
        Returns (slots, boot delays) of what was granted."""
        pool = self.cluster.pools[p]
        grant = min(count, self.available(p))
        if atomic and pool.atomic and grant < count:
            grant = 0
        slots = (self.free_slots(p) if slots is None else np.asarray(slots, np.int64))[:grant]
        d = pool.boot_delay
        delays = self.rngs[p].uniform(d.min_s, d.max_s, size=grant) if d.max_s > d.min_s else np.full(grant, d.min_s)
        return slots, delays
