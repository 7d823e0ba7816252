"""The cloud provider behind the node pools: stock (fixed or varying over time), how a shortage
is answered, atomic requests, seeded boot delays.

A request for N nodes of a pool is bounded by the pool's free slots (max_size, a limit the
user configured) and by the provider's stock at that instant, counted against the nodes of the
pool that really exist. A pool whose `shortage` is `error` grants at most what stock allows and
says so at once (fewer than N for a best-effort request, none for an all-or-nothing request
where the pool honours atomicity). A `silent` pool accepts every node asked up to its free slots;
only what stock allows ever comes up, the rest are phantoms: booting forever, never billed,
until the loop gives up on them (`Simulation.remove_node`). A stock drop never removes a node
that exists.

The provider, not the loop, decides where granted nodes go. A plain request takes the lowest
free slots, so committed (reserved) slots fill first. A request with a `Placement` (a
compact-placement policy: every node in one rack) is served from one rack the provider picks
from its own free slots (`compact_rack`: its `emptiest`, or `packed`, the fullest that holds
the whole request), or from the rack of a node it joins; that rack's free slots bound the
request as stock does, so it fails or comes back short like a request beyond stock. A pool is
one block, so every request is block-compact.

The Simulation keeps its Cloud to itself; loops get a `ProviderFacade` with only what a real
controller can read of its provider (harness/view.py `Provider`): free slots and room
under its own limits, never stock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.cluster import Cluster, StockDraws, StockSteps
from harness.state import ClusterState
from harness.status import ABSENT

#: a phantom's boot delay: it never comes up
NEVER = np.inf
#: periods of a redrawn stock drawn at once: a long replay with a short period costs a few bulk
#: draws, not a Python call per period
STOCK_CHUNK = 1 << 14


@dataclass(frozen=True)
class Placement:
    """A compact-placement policy on a request (a cloud's placement group): all its nodes in one
    rack, the provider's choice of rack, or the rack of node slot `near` (a group it joins)."""

    near: int = -1


class StockStream:
    """A pool's redrawn stock, period by period, from the pool's own stream: drawn a chunk at a
    time in period order, so each period gets the value one draw at a time would give; only the
    current chunk is kept, as the simulation asks in time order."""

    def __init__(self, draws: StockDraws, rng: np.random.Generator):
        self.draws, self.rng = draws, rng
        self.start, self.chunk = 0, np.zeros(0, np.int64)  # the chunk's first period, its stock

    def at(self, now: float) -> int:
        period = int(now // self.draws.period_s)
        assert period >= self.start, "a redrawn stock is asked in time order"
        while period >= self.start + len(self.chunk):
            self.start += len(self.chunk)
            self.chunk = self.rng.integers(self.draws.low, self.draws.high + 1, size=STOCK_CHUNK)
        return int(self.chunk[period - self.start])


class Cloud:
    def __init__(self, cluster: Cluster, state: ClusterState, seed: int):
        self.cluster = cluster
        self.state = state
        # one stream per pool, so a pool's delays do not depend on other pools' requests
        self.rngs = [np.random.default_rng([seed, 7919, p]) for p in range(len(cluster.pools))]
        # and one per pool for its stock draws, so they do not depend on the requests at all
        self.stock_draws = [StockStream(pool.stock_varies, np.random.default_rng([seed, 7919, p, 1]))
                            if isinstance(pool.stock_varies, StockDraws) else None
                            for p, pool in enumerate(cluster.pools)]
        #: per slot: a node the provider accepted but will never bring up
        self.phantom = np.zeros(state.n_slots, bool)

    def free_slots(self, p: int) -> np.ndarray:
        sl = self.state.pool_slots(p)
        return np.flatnonzero(self.state.status[sl] == ABSENT) + sl.start

    def free_slots_in_emptiest_rack(self, p: int) -> np.ndarray:
        """Free slots of pool p's rack with the most free slots: where a rack-local gang's plan
        may hope to fit (the provider decides where its nodes go)."""
        slots = self.free_slots(p)
        if len(slots) == 0:
            return slots
        racks, counts = np.unique(self.state.slot_rack[slots], return_counts=True)
        return slots[self.state.slot_rack[slots] == racks[np.argmax(counts)]]

    def room(self, p: int) -> int:
        """Nodes pool p may still add under its own max_size (phantoms take slots too)."""
        sl = self.state.pool_slots(p)
        return self.cluster.pools[p].max_size - int((self.state.status[sl] != ABSENT).sum())

    def stock(self, p: int, now: float) -> int | None:
        """Pool p's stock at `now` (None: unlimited)."""
        draws, pool = self.stock_draws[p], self.cluster.pools[p]
        if draws is not None:
            return draws.at(now)
        varies = pool.stock_varies
        if varies is None:
            return pool.stock
        assert isinstance(varies, StockSteps), "a StockDraws has its stream"
        return varies.stock[int(np.searchsorted(varies.at_s, now, side="right")) - 1]

    def available(self, p: int, now: float) -> int:
        """Nodes the pool could still bring up at `now` (stock and max_size): the provider's
        secret, read only by the Simulation."""
        room = self.room(p)
        stock = self.stock(p, now)
        if stock is not None:
            sl = self.state.pool_slots(p)
            real = int(((self.state.status[sl] != ABSENT) & ~self.phantom[sl]).sum())
            room = min(room, stock - real)
        return max(room, 0)

    def free_committed(self, p: int) -> int:
        sl = self.state.pool_slots(p)
        return int(((self.state.status[sl] == ABSENT) & self.state.slot_committed[sl]).sum())

    def placed(self, p: int, count: int, placement: Placement | None) -> np.ndarray:
        """The free slots of pool p a request for `count` nodes may take, in the order it fills
        them: all of them, or those of the one rack its placement gets."""
        free = self.free_slots(p)
        if placement is None or len(free) == 0:
            return free
        racks = self.state.slot_rack[free]
        if placement.near >= 0:
            return free[racks == self.state.slot_rack[placement.near]]
        ids, counts = np.unique(racks, return_counts=True)
        pick = int(np.argmax(counts))
        if self.cluster.pools[p].compact_rack == "packed" and counts[pick] >= count:
            fits = np.flatnonzero(counts >= count)
            pick = int(fits[np.argmin(counts[fits])])
        return free[racks == ids[pick]]

    def request(self, p: int, count: int, atomic: bool, now: float,
                placement: Placement | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Ask pool p for `count` nodes at `now`, anywhere or as `placement` says (`placed`).
        Returns (slots, boot delays) of what was accepted; a phantom's delay is NEVER."""
        pool = self.cluster.pools[p]
        honoured = atomic and pool.atomic
        slots = self.placed(p, count, placement)
        real = min(count, self.available(p, now), len(slots))
        accept = real if pool.shortage == "error" else min(count, len(slots))
        if honoured and accept < count:
            accept = real = 0
        if honoured and real < accept:
            real = 0  # all or nothing: none of them comes up
        slots = slots[:accept]
        d = pool.boot_delay
        drawn = self.rngs[p].uniform(d.min_s, d.max_s, size=real) if d.max_s > d.min_s else np.full(real, d.min_s)
        k = min(real, len(slots))
        delays = np.full(len(slots), NEVER)
        delays[:k] = drawn[:k]
        self.phantom[slots[k:]] = True
        return slots, delays

    def released(self, n: int) -> None:
        """Slot n's node is gone (removed by a loop): a phantom there is forgotten."""
        self.phantom[n] = False


class ProviderFacade:
    """What loops may read of the provider (harness/view.py `Provider`): nothing of stock."""

    def __init__(self, cloud: Cloud, clock: Callable[[], float]):
        self._cloud, self._clock = cloud, clock

    def free_slots(self, p: int) -> np.ndarray:
        return self._cloud.free_slots(p)

    def free_slots_in_emptiest_rack(self, p: int) -> np.ndarray:
        return self._cloud.free_slots_in_emptiest_rack(p)

    def free_committed(self, p: int) -> int:
        return self._cloud.free_committed(p)

    def room(self, p: int) -> int:
        """Nodes pool p may still add under its max_size."""
        return max(self._cloud.room(p), 0)
