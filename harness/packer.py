"""The what-if packer's steps, compiled: pods of one shape packed first fit onto a few nodes.

Autoscalers pack pods onto what-if snapshots many times per scan (`harness.whatif`), and each
packing touches a handful of nodes, so in numpy it was a chain of small calls (a feasibility
mask over every slot to find the first few nodes, then per-node counts, devices and summaries)
whose ~1 us call overhead made ~60% of a separate_provreq replay. Each kernel here visits one
node at a time (the walk stops at the last node it needs) over the same struct-of-arrays state,
with the same results as the numpy steps it replaces; NUMBA_DISABLE_JIT=1 runs them as plain
Python (tests/test_jit.py).

A pod shape is passed as (cpu, mem, gpus, milli, kind) with `kind` one of the constants below
and `dom` the node type x GPU domain ids of its claim (`ClusterState.gpu_nvl`, `gpu_numa` or
`gpu_both`; any of them for the other kinds). Its filter is `filters.pod_rule` over the
`usable` nodes: a node passes when usable, with the pod's CPU and memory free, in the static
mask and with `column >= need`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.state import WHOLE

NO_GPU, SHARE, WHOLE_GPUS, DOMAIN = 0, 1, 2, 3  # kinds: share = one device's milli; DOMAIN = whole GPUs in one domain
_MANY = np.iinfo(np.int64).max


@njit(cache=True)
def fits_rule(n, usable, cpu_free, mem_free, cpu, mem, static, column, need):
    """Whether node n passes the pod's filter (`filters.pod_rule`, on a `usable` node)."""
    return usable[n] & (cpu_free[n] >= cpu) & (mem_free[n] >= mem) & static[n] & (column[n] >= need)


@njit(cache=True)
def _fits(n, cpu, mem, gpus, milli, kind, cpu_free, mem_free, gpu_free, free_whole, slot_type, dom):
    """How many pods of the shape node n takes one after another (`filters.fits_on`)."""
    count = _MANY
    if cpu:
        count = min(count, cpu_free[n] // cpu)
    if mem:
        count = min(count, mem_free[n] // mem)
    if kind == SHARE:  # each pod takes one device: the sum over devices
        room = 0
        for g in range(gpu_free.shape[1] if milli else 0):  # no milli (a profile the cluster lacks): none
            room += gpu_free[n, g] // milli
        count = min(count, room)
    elif kind == DOMAIN:  # each pod takes its GPUs from one domain: the sum over domains
        ids = dom[slot_type[n]]
        room = 0
        for g in range(gpu_free.shape[1]):
            if gpu_free[n, g] == WHOLE:
                same, first = 0, True
                for h in range(gpu_free.shape[1]):
                    if gpu_free[n, h] == WHOLE and ids[h] == ids[g]:
                        if h < g:  # counted at the domain's first whole GPU
                            first = False
                            break
                        same += 1
                if first:
                    room += same // gpus
        count = min(count, room)
    elif kind == WHOLE_GPUS:
        count = min(count, free_whole[n] // gpus)
    return count


@njit(cache=True)
def first_feasible(usable, cpu_free, mem_free, cpu, mem, static, column, need, k):
    """The first k nodes (slot order) that pass the pod's filter, walking until the k-th."""
    found = np.empty(min(k, len(usable)), np.int64)
    count = 0
    for n in range(len(usable)):
        if count == k:
            break
        if fits_rule(n, usable, cpu_free, mem_free, cpu, mem, static, column, need):
            found[count] = n
            count += 1
    return found[:count]


@njit(cache=True)
def first_fit(usable, static, column, need, k, cpu, mem, gpus, milli, kind, cpu_free, mem_free, gpu_free,
              free_whole, slot_type, dom):
    """Where k pods of the shape go first fit: the lowest-slot node that passes the filter takes
    all it can (`_fits`), then the next, until all k are placed or the k-th passing node (each
    takes one or more). Returns the nodes that take some and how many each takes."""
    nodes = np.empty(min(k, len(usable)), np.int64)
    got = np.empty(len(nodes), np.int64)
    count, passed, left = 0, 0, k
    for n in range(len(usable)):
        if left == 0 or passed == k:
            break
        if fits_rule(n, usable, cpu_free, mem_free, cpu, mem, static, column, need):
            passed += 1
            take = min(_fits(n, cpu, mem, gpus, milli, kind, cpu_free, mem_free, gpu_free, free_whole,
                             slot_type, dom), left)
            if take > 0:
                nodes[count], got[count] = n, take
                count += 1
                left -= take
    return nodes[:count], got[:count]


@njit(cache=True)
def fits_on(nodes, cpu, mem, gpus, milli, kind, cpu_free, mem_free, gpu_free, free_whole, slot_type, dom):
    """`_fits` of each of `nodes`."""
    out = np.empty(len(nodes), np.int64)
    for i in range(len(nodes)):
        out[i] = _fits(nodes[i], cpu, mem, gpus, milli, kind, cpu_free, mem_free, gpu_free, free_whole,
                       slot_type, dom)
    return out


@njit(cache=True)
def devices_taken(nodes, counts, gpus, milli, kind, gpu_free, slot_type, dom):
    """GPU milli (nodes x GPUs) that counts[i] pods of the shape take on nodes[i] when bound one
    after another with `ClusterState.pick_devices` (see `filters.devices_taken`): shares fill
    the fitting devices in order of (free milli, index); whole GPUs are the first free ones, or
    with a claim the first of each domain, domains filled in increasing id order."""
    n_gpus = gpu_free.shape[1]
    taken = np.zeros((len(nodes), n_gpus), np.int64)
    if kind == NO_GPU:
        return taken
    for i in range(len(nodes)):
        n, left = nodes[i], counts[i]
        row = gpu_free[n]
        if kind == SHARE:
            done = np.zeros(n_gpus, np.bool_)
            while left > 0:  # the fitting device with least free milli (lowest index on ties)
                best = -1
                for g in range(n_gpus):
                    if not done[g] and row[g] >= milli and (best < 0 or row[g] < row[best]):
                        best = g
                if best < 0:
                    break
                done[best] = True
                pods = min(left, row[best] // milli)
                taken[i, best] = pods * milli
                left -= pods
        elif kind == WHOLE_GPUS:
            want = left * gpus
            for g in range(n_gpus):
                if want > 0 and row[g] == WHOLE:
                    taken[i, g] = WHOLE
                    want -= 1
        else:
            ids = dom[slot_type[n]]
            last = -1
            while left > 0:  # the next domain id with a whole GPU free
                d = -1
                for g in range(n_gpus):
                    if row[g] == WHOLE and ids[g] > last and (d < 0 or ids[g] < d):
                        d = ids[g]
                if d < 0:
                    break
                last = d
                free = 0
                for g in range(n_gpus):
                    if row[g] == WHOLE and ids[g] == d:
                        free += 1
                want = min(left, free // gpus) * gpus
                left -= want // gpus
                for g in range(n_gpus):
                    if want > 0 and row[g] == WHOLE and ids[g] == d:
                        taken[i, g] = WHOLE
                        want -= 1
    return taken
