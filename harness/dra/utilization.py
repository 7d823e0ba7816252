"""How used a node's DRA devices are, as Cluster Autoscaler's scale-down reads it
(cluster-autoscaler/simulator/dynamicresources/utils/utilization.go): per pool of a driver, the
share of its atomic devices allocated and, for partitionable devices, per counter set the most
used of its counters, averaged over the counter sets the pool's devices draw on; a pool with
both kinds allocated weighs the two by their device counts (atomic devices, counter sets), a
pool with only one kind allocated is that kind's utilisation alone (upstream's early returns).
A node with DRA devices is as used as its most used pool (CPU and memory then do not count).

`PoolTable` compiles this once per node type, padded to the widest, so that the utilisation
of many nodes of any types is a few array operations on the cluster state's allocation arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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
                   np.array([len(d.slices) > 0 for d in types], bool))

    @property
    def n_pools(self) -> int:
        return max([len(p) for p in self.names] + [0])

    def pools(self, types: np.ndarray, taken: np.ndarray, cap_left: np.ndarray,
              counter_left: np.ndarray) -> np.ndarray:
        """Utilisation of each pool (nodes x pools, 0 where a type has fewer) of nodes of these
        types in these allocation states (rows of the cluster state's arrays, padded as here)."""
        n, n_p = len(types), self.n_pools
        if n == 0 or n_p == 0:
            return np.zeros((n, n_p))
        d, k = self.dev_pool.shape[1], self.counter_set.shape[1]
        capacity, multi = self.capacity[types], self.multi[types]
        in_use = taken[:, :d] | (multi & (cap_left[:, :d] < capacity).any(axis=2))
        in_pool = self.dev_pool[types][:, :, None] == np.arange(n_p)  # (N, D, P)
        atomic = self.atomic[types][:, :, None] & in_pool
        partitionable = ~self.atomic[types][:, :, None] & in_pool
        n_atomic = atomic.sum(axis=1)
        used_atomic = (atomic & in_use[:, :, None]).sum(axis=1)
        used_part = (partitionable & in_use[:, :, None]).sum(axis=1)
        cap = self.counter_cap[types]
        used = cap - counter_left[:, :k]
        ratio = np.divide(used, cap, out=np.zeros(used.shape), where=cap > 0)  # (N, K)
        n_s = self.set_pool.shape[1]
        in_set = self.counter_set[types][:, :, None] == np.arange(n_s)  # (N, K, S)
        set_top = np.where(in_set, ratio[:, :, None], 0.0).max(axis=1, initial=0.0)  # (N, S) its most used counter
        set_in_pool = self.set_pool[types][:, :, None] == np.arange(n_p)  # (N, S, P)
        n_sets = set_in_pool.sum(axis=1)
        part_sum = (set_top[:, :, None] * set_in_pool).sum(axis=1)
        atomic_util = np.divide(used_atomic, n_atomic, out=np.zeros((n, n_p)), where=n_atomic > 0)
        part_util = np.divide(part_sum, n_sets, out=np.zeros((n, n_p)), where=n_sets > 0)
        total = n_atomic + n_sets
        mixed = np.divide(used_atomic + part_sum, total, out=np.zeros((n, n_p)), where=total > 0)
        return np.where(used_part == 0, atomic_util, np.where(used_atomic == 0, part_util, mixed))

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
