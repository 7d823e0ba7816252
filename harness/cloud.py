"""The cloud provider behind the node pools: stock (fixed or varying over time), how a shortage
is answered, atomic requests, seeded boot delays.

A request for N nodes of a pool is bounded by the pool's free slots (max_size, a limit the
user configured) and by the provider's stock at that instant, counted against the nodes of the
pool that really exist. A pool whose `shortage` is `error` grants at most what stock allows and
says so at once (fewer than N for a best-effort request, none for an all-or-nothing request
where the pool honours atomicity). A `silent` pool accepts every node asked up to its free slots;
only what stock allows ever comes up, the rest are phantoms: booting forever, never billed,
until the loop gives up on them (`Simulation.remove_node`). A stock drop never removes a node
that exists. Granted nodes take the lowest free slots, so committed (reserved) slots fill first.

The Simulation keeps its Cloud to itself; loops get a `ProviderFacade` with only what a real
controller can read of its provider (harness/view.py `Provider`): free slots and room
under its own limits, never stock.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.cluster import Cluster, StockDraws, StockSteps
from harness.state import ClusterState
from harness.status import ABSENT

#: a phantom's boot delay: it never comes up
NEVER = np.inf
#: periods of a redrawn stock drawn at once: a long replay with a short period costs a few bulk
#: draws, not a Python call per period
STOCK_CHUNK = 1 << 14


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
        """Free slots of pool p's rack with the most free slots (for a rack-local gang)."""
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

    def request(self, p: int, count: int, atomic: bool, now: float,
                slots: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Ask pool p for `count` nodes at `now`, in the given free slots (racks) or the lowest
        free ones. Returns (slots, boot delays) of what was accepted; a phantom's delay is NEVER."""
        pool = self.cluster.pools[p]
        honoured = atomic and pool.atomic
        real = min(count, self.available(p, now))
        accept = real if pool.shortage == "error" else min(count, max(self.room(p), 0))
        if honoured and accept < count:
            accept = real = 0
        if honoured and real < accept:
            real = 0  # all or nothing: none of them comes up
        slots = (self.free_slots(p) if slots is None else np.asarray(slots, np.int64))[:accept]
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
