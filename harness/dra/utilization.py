"""How used a node's DRA devices are, as Cluster Autoscaler's scale-down reads it
(cluster-autoscaler/simulator/dynamicresources/utils/utilization.go): per pool of a driver, the
share of its atomic devices allocated and, for partitionable devices, per counter set the most
used of its counters, averaged over the pool's atomic devices and counter sets together; a node
with DRA devices is as used as its most used pool (CPU and memory then do not count)."""

from __future__ import annotations

import numpy as np

from harness.dra.allocator import DeviceState, NodeDevices


def pool_utilization(devices: NodeDevices, state: DeviceState) -> dict[str, np.ndarray]:
    """"driver/pool" -> utilisation of each node row (0 to 1)."""
    pools = np.array([f"{s.driver}/{s.pool}" for s in devices.slices for _ in s.devices])
    atomic = ~devices.consumes.any(axis=1)  # no counters drawn (an empty consumesCounters too)
    in_use = state.taken | (devices.multi & (state.cap_left < devices.capacity[None]).any(axis=2))
    used = devices.counter_cap[None] - state.counter_left
    ratio = np.divide(used, devices.counter_cap[None], out=np.zeros(used.shape), where=devices.counter_cap[None] > 0)
    set_of = np.array([f"{p}/{cset}" for p, cset, _ in devices.counters])
    out = {}
    for pool in dict.fromkeys(pools.tolist()):
        mine = pools == pool
        total = in_use[:, mine & atomic].sum(axis=1).astype(np.float64)
        drawn = devices.consumes[mine].any(axis=0)  # counter columns a device of the pool draws on
        sets = list(dict.fromkeys(set_of[drawn].tolist()))
        for cset in sets:  # the most used counter of each set
            total += ratio[:, set_of == cset].max(axis=1)
        n = int((mine & atomic).sum()) + len(sets)
        out[pool] = total / n if n else np.zeros(len(state.taken))
    return out


def highest(devices: NodeDevices, state: DeviceState) -> tuple[list[str], np.ndarray]:
    """Per node row, its most used pool's name and utilisation ("" and 0: no DRA devices)."""
    util = pool_utilization(devices, state)
    if not util:
        return [""] * len(state.taken), np.zeros(len(state.taken))
    names = list(util)
    table = np.stack([util[p] for p in names], axis=1)
    best = table.argmax(axis=1)
    return [names[i] for i in best], table[np.arange(len(best)), best]
