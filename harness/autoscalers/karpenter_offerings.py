"""The NodePool's offerings as Karpenter knows them, shared by its provisioner and its
consolidation: each pool is an offering (a node type in a zone/block, on-demand or committed)
with its price and the NodePool's limits (min_size, max_size). What it knows of the provider
is only what asking taught it: a launch answered with an insufficient-capacity error puts the
offering in the unavailable-offerings cache for `unavailable_ttl_s` (the AWS provider's
UnavailableOfferingsTTL); it never reads stock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from harness.status import ABSENT, Event

if TYPE_CHECKING:
    from harness.view import SimulationView


class Offerings:
    def __init__(self, sim: SimulationView, unavailable_ttl_s: float):
        cl, st = sim.cluster, sim.state
        self.sim, self.unavailable_ttl_s = sim, unavailable_ttl_s
        self.pool_type = np.array([cl.type_index(p.node_type) for p in cl.pools], np.int64)
        self.pool_price = np.array([p.price for p in cl.pools], np.float64)
        self.min_size = np.array([p.min_size for p in cl.pools], np.int64)
        self.max_size = np.array([p.max_size for p in cl.pools], np.int64)  # the NodePool's limit per offering
        self.unavailable_until = np.full(len(cl.pools), -np.inf)  # the unavailable-offerings cache
        self.node_price = np.where(st.slot_committed, 0.0, self.pool_price[st.slot_pool])  # per slot
        self.spare_key: tuple | None = None  # layout version and offerings of `spare_slots`
        self.spare_slots = np.zeros(st.n_slots, bool)

    def offered(self, now: float) -> np.ndarray:
        """Offerings not in the unavailable-offerings cache at `now`."""
        return now >= self.unavailable_until

    def next_return(self) -> float:
        """When the next offering cached unavailable leaves the cache (inf: none is): a deadline,
        at that instant it is offered again."""
        until = self.unavailable_until[self.unavailable_until > self.sim.now]
        return until.min() if len(until) else np.inf

    def room(self) -> np.ndarray:
        """Per offering, the nodes the NodePool's limit (max_size) still allows: what Karpenter
        knows before asking; never the provider's stock."""
        st = self.sim.state
        present = np.bincount(st.slot_pool[st.status != ABSENT], minlength=len(self.max_size))
        return np.maximum(self.max_size - present, 0)

    def spare(self) -> np.ndarray:
        """Absent slots a claim may use: as many per offering as the NodePool's limit still
        allows (`room`), none of an offering in the unavailable cache. Kept per layout and
        set of offerings."""
        st = self.sim.state
        offered = self.offered(self.sim.now)
        key = (st.layout_version, offered.tobytes())
        if self.spare_key != key:
            cloud, room = self.sim.cloud, self.room()
            self.spare_slots = np.zeros(st.n_slots, bool)
            for p in np.flatnonzero(offered).tolist():
                self.spare_slots[cloud.free_slots(p)[:room[p]]] = True
            self.spare_key = key
        return self.spare_slots

    def supply(self) -> tuple[np.ndarray, np.ndarray]:
        """Per offering, the nodes it may still be asked for (0 while cached unavailable) and
        its free committed slots (the provider's `free_committed` of every pool, counted in one
        step rather than asked pool by pool)."""
        st = self.sim.state
        free = (st.status == ABSENT) & st.slot_committed
        return (np.where(self.offered(self.sim.now), self.room(), 0),
                np.bincount(st.slot_pool[free], minlength=len(self.pool_type)).astype(np.int64))

    def cheapest(self, types: np.ndarray, allowed: np.ndarray, remaining: np.ndarray, committed: np.ndarray,
                 below: float = np.inf) -> int:
        """Cheapest pool of these node types, among the `allowed` ones, that can still supply a
        node (committed slot = 0), priced under `below`; -1 if none."""
        price = np.where(committed > 0, 0.0, self.pool_price)
        ok = np.isin(self.pool_type, types) & allowed & (remaining > 0) & (price < below)
        if not ok.any():
            return -1
        idx = np.flatnonzero(ok)
        return int(idx[np.argmin(price[idx])])

    def launch(self, pool: int, now: float, pods: np.ndarray) -> int:
        """Ask for one node of this offering for these pods (a NodeClaim's launch): its slot, or
        -1 when the provider answers with an insufficient-capacity error, which puts the
        offering in the unavailable cache for `unavailable_ttl_s`."""
        slots = self.sim.provision(pool, 1, atomic=False, pods=pods)
        if not len(slots):
            self.unavailable_until[pool] = now + self.unavailable_ttl_s
            self.sim.note(Event.BACKOFF, f"pool={self.sim.cluster.pools[pool].name} insufficient capacity: "
                                         f"unavailable for {self.unavailable_ttl_s:.0f} s")
            return -1
        return int(slots[0])
