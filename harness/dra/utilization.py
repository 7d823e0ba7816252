"""How used a node's DRA devices are, as Cluster Autoscaler's scale-down reads it
(cluster-autoscaler/simulator/dynamicresources/utils/utilization.go): per pool of a driver, the
share of its atomic devices allocated and, for partitionable devices, per counter set the most
used of its counters, averaged over the counter sets the pool's devices draw on; a pool with
both kinds allocated weighs the two by their device counts (atomic devices, counter sets), a
pool with only one kind allocated is that kind's utilisation alone (upstream's early returns).
A node with DRA devices is as used as its most used pool (CPU and memory then do not count).

`PoolTable` compiles this once per node type, padded to the widest, so that the utilisation
of many nodes of any types is one compiled pass over the cluster state's allocation arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from harness.dra.allocator import DeviceState, NodeDevices


@dataclass(frozen=True)
class PoolTable:
    """Per node type (row), padded: each device's pool, whether it is atomic (draws no
    counter) or multi-allocatable and its full capacities, each counter column's set, each
    set's pool, and whether the type publishes any slice."""

    names: tuple[tuple[str, ...], ...]  # per type, its pools ("driver/pool"), in publishing order
    dev_pool: np.ndarray  # (T, D) pool of each device (-1: padding)
    atomic: np.ndarray  # (T, D)
    multi: np.ndarray  # (T, D)
    capacity: np.ndarray  # (T, D, Q) milli-units when whole
    counter_set: np.ndarray  # (T, K) set of each counter column (-1: padding)
    set_pool: np.ndarray  # (T, S) pool of each set a device draws on (-1: padding or none draws on it)
    counter_cap: np.ndarray  # (T, K)
    published: np.ndarray  # (T,) the type publishes ResourceSlices
    n_pools: int  # the most pools a type has

    @classmethod
    def of(cls, types: Sequence[NodeDevices]) -> PoolTable:
        n_t = len(types)
        width = max([d.n_devices for d in types] + [0])
        n_q = max([len(d.capacities) for d in types] + [0])
        n_k = max([len(d.counters) for d in types] + [0])
        n_s = max([len({(p, s) for p, s, _ in d.counters}) for d in types] + [0])
        names: list[tuple[str, ...]] = []
        dev_pool = np.full((n_t, width), -1, np.int64)
        atomic = np.zeros((n_t, width), bool)
        multi = np.zeros((n_t, width), bool)
        capacity = np.zeros((n_t, width, n_q), np.int64)
        counter_set = np.full((n_t, n_k), -1, np.int64)
        set_pool = np.full((n_t, n_s), -1, np.int64)
        counter_cap = np.zeros((n_t, n_k), np.int64)
        for t, dev in enumerate(types):
            pools = [f"{s.driver}/{s.pool}" for s in dev.slices for _ in s.devices]
            own = tuple(dict.fromkeys(f"{s.driver}/{s.pool}" for s in dev.slices))
            names.append(own)
            d = dev.n_devices
            dev_pool[t, :d] = [own.index(p) for p in pools]
            atomic[t, :d] = ~(dev.consumes > 0).any(axis=1)
            multi[t, :d] = dev.multi
            capacity[t, :d, :len(dev.capacities)] = dev.capacity
            sets = list(dict.fromkeys((p, s) for p, s, _ in dev.counters))
            k = len(dev.counters)
            counter_set[t, :k] = [sets.index((p, s)) for p, s, _ in dev.counters]
            counter_cap[t, :k] = dev.counter_cap
            drawn = np.flatnonzero((dev.consumes > 0).any(axis=0))  # counter columns some device draws on
            for i in sorted(set(counter_set[t, drawn].tolist())):
                set_pool[t, i] = own.index(sets[i][0])
        return cls(tuple(names), dev_pool, atomic, multi, capacity, counter_set, set_pool, counter_cap,
                   np.array([len(d.slices) > 0 for d in types], bool), max([len(p) for p in names] + [0]))

    def pools(self, types: np.ndarray, taken: np.ndarray, cap_left: np.ndarray,
              counter_left: np.ndarray) -> np.ndarray:
        """Utilisation of each pool (nodes x pools, 0 where a type has fewer) of nodes of these
        types in these allocation states (rows of the cluster state's arrays, padded as here)."""
        return self._pools(np.arange(len(types)), types, taken, cap_left, counter_left)

    def most_used(self, rows: np.ndarray, types: np.ndarray, taken: np.ndarray, cap_left: np.ndarray,
                  counter_left: np.ndarray) -> np.ndarray:
        """Per node, its most used pool's utilisation (0 without pools): `highest`'s figure for
        the `rows` of these allocation arrays, read where they are (a scale-down pass judges a
        few nodes of thousands: no copy of their rows)."""
        d, k = self.dev_pool.shape[1], self.counter_set.shape[1]
        return _most_used(np.asarray(rows, np.int64), np.asarray(types, np.int64), taken[:, :d],
                          cap_left[:, :d, :self.capacity.shape[2]], counter_left[:, :k], self.dev_pool, self.atomic,
                          self.multi, self.capacity, self.counter_set, self.set_pool, self.counter_cap, self.n_pools)

    def _pools(self, rows: np.ndarray, types: np.ndarray, taken: np.ndarray, cap_left: np.ndarray,
               counter_left: np.ndarray) -> np.ndarray:
        d, k = self.dev_pool.shape[1], self.counter_set.shape[1]
        return _pools(np.asarray(rows, np.int64), np.asarray(types, np.int64), taken[:, :d],
                      cap_left[:, :d, :self.capacity.shape[2]], counter_left[:, :k], self.dev_pool, self.atomic,
                      self.multi, self.capacity, self.counter_set, self.set_pool, self.counter_cap, self.n_pools)

    def highest(self, types: np.ndarray, taken: np.ndarray, cap_left: np.ndarray,
                counter_left: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per node, its most used pool (index into its type's `names`, -1: none) and that
        pool's utilisation (0 without pools)."""
        util = self.pools(types, taken, cap_left, counter_left)
        if util.shape[1] == 0:
            return np.full(len(types), -1, np.int64), np.zeros(len(types))
        best = util.argmax(axis=1)
        has = best < np.array([len(p) for p in self.names], np.int64)[types]
        return np.where(has, best, -1), util[np.arange(len(types)), best]


@njit(cache=True)
def _pools(rows, types, taken, cap_left, counter_left, dev_pool, atomic, multi, capacity, counter_set, set_pool,
           counter_cap, n_pools):
    """`PoolTable.pools` of the allocation arrays' `rows`, node by node (a scale-down pass judges
    a few nodes: no per-call array overhead)."""
    n, n_d, n_q = len(types), dev_pool.shape[1], capacity.shape[2]
    n_k, n_s = counter_set.shape[1], set_pool.shape[1]
    out = np.zeros((n, n_pools))
    for i in range(n):
        t, r = types[i], rows[i]
        n_atomic = np.zeros(n_pools, np.int64)
        used_atomic = np.zeros(n_pools, np.int64)
        used_part = np.zeros(n_pools, np.int64)
        for d in range(n_d):
            p = dev_pool[t, d]
            if p < 0:
                continue
            use = taken[r, d]
            if not use and multi[t, d]:
                for q in range(n_q):
                    if cap_left[r, d, q] < capacity[t, d, q]:
                        use = True
                        break
            if atomic[t, d]:
                n_atomic[p] += 1
                used_atomic[p] += use
            else:
                used_part[p] += use
        set_top = np.zeros(n_s)  # each counter set's most used counter
        for c in range(n_k):
            s = counter_set[t, c]
            if s >= 0 and counter_cap[t, c] > 0:
                set_top[s] = max(set_top[s], (counter_cap[t, c] - counter_left[r, c]) / counter_cap[t, c])
        n_sets = np.zeros(n_pools, np.int64)
        part_sum = np.zeros(n_pools)
        for s in range(n_s):
            p = set_pool[t, s]
            if p >= 0:
                n_sets[p] += 1
                part_sum[p] += set_top[s]
        for p in range(n_pools):
            if used_part[p] == 0:  # only atomic devices allocated (or none): their share alone
                out[i, p] = used_atomic[p] / n_atomic[p] if n_atomic[p] else 0.0
            elif used_atomic[p] == 0:  # only partitionable ones: the counter sets' average alone
                out[i, p] = part_sum[p] / n_sets[p] if n_sets[p] else 0.0
            else:  # both: weighed by atomic devices and counter sets
                out[i, p] = (used_atomic[p] + part_sum[p]) / (n_atomic[p] + n_sets[p])
    return out


@njit(cache=True)
def _most_used(rows, types, taken, cap_left, counter_left, dev_pool, atomic, multi, capacity, counter_set, set_pool,
               counter_cap, n_pools):
    """`PoolTable.most_used`: per node, the highest of its pools' utilisations (`_pools`), 0
    without pools, in the same compiled call."""
    util = _pools(rows, types, taken, cap_left, counter_left, dev_pool, atomic, multi, capacity, counter_set,
                  set_pool, counter_cap, n_pools)
    out = np.zeros(len(rows))
    for i in range(len(rows)):
        for p in range(n_pools):
            out[i] = util[i, p] if p == 0 else max(out[i], util[i, p])
    return out


def pool_utilization(devices: NodeDevices, state: DeviceState) -> dict[str, np.ndarray]:
    """"driver/pool" -> utilisation of each node row (0 to 1), nodes of one type."""
    table = PoolTable.of([devices])
    util = table.pools(np.zeros(len(state.taken), np.int64), state.taken, state.cap_left, state.counter_left)
    return {name: util[:, i] for i, name in enumerate(table.names[0])}


def highest(devices: NodeDevices, state: DeviceState) -> tuple[list[str], np.ndarray]:
    """Per node row, its most used pool's name and utilisation ("" and 0: no DRA devices)."""
    table = PoolTable.of([devices])
    best, util = table.highest(np.zeros(len(state.taken), np.int64), state.taken, state.cap_left,
                               state.counter_left)
    return [table.names[0][b] if b >= 0 else "" for b in best.tolist()], util
