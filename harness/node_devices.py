"""One node's GPUs as a pod comes or goes, compiled: its devices taken or given back, its summaries
recomputed, and which devices a pod takes.

Each of these visits the handful of GPUs of one node per pod bound or released, which in numpy
or plain Python costs a few dozen scalar operations (~1 us each, whatever the work); compiled
(numba, cached on disk) one call does it all. They are pure: the state's arrays in, written in
place, a status out. NUMBA_DISABLE_JIT=1 runs them as plain Python (tests/test_jit.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

WHOLE = 1000  # milli of one GPU (as harness.state)
OK, OVER_ALLOCATED, NO_TABLE = 0, 1, 2  # `summarize`'s answer


@njit(cache=True)
def summarize(n: int, gpu_free: np.ndarray, gpu_cap: np.ndarray, slot_table: np.ndarray, tables: np.ndarray,
              free_whole: np.ndarray, max_share: np.ndarray, nvl_whole: np.ndarray, numa_whole: np.ndarray,
              both_whole: np.ndarray) -> int:
    """Recompute node n's summaries from its GPU row: the most free milli on one GPU, and, from
    the row `slot_table[n]` + (pattern of its whole-free GPUs, bit g = GPU g) of `tables`, its
    free whole GPUs and the most whole-free GPUs in one NVLink / NUMA / NVLink-and-NUMA domain.
    OVER_ALLOCATED if a GPU has less than nothing free; NO_TABLE if its type has no table (more
    than 12 GPUs): the caller then computes the whole-GPU summaries."""
    k = gpu_cap[n]
    if k == 0:
        free_whole[n] = max_share[n] = nvl_whole[n] = numa_whole[n] = both_whole[n] = 0
        return OK
    most = gpu_free[n, 0]
    pattern = 0
    for g in range(k):
        free = gpu_free[n, g]
        if free < 0:
            return OVER_ALLOCATED
        most = max(most, free)
        if free == WHOLE:
            pattern |= 1 << g
    max_share[n] = most
    if slot_table[n] < 0:
        return NO_TABLE
    row = slot_table[n] + pattern
    free_whole[n], nvl_whole[n], numa_whole[n], both_whole[n] = (
        tables[row, 0], tables[row, 1], tables[row, 2], tables[row, 3])
    return OK


@njit(cache=True)
def take(n: int, sign: int, cpu: int, mem: int, gpu_idx: np.ndarray, milli: int, cpu_free: np.ndarray,
         mem_free: np.ndarray, gpu_free: np.ndarray, gpu_used: np.ndarray, pods_on: np.ndarray,
         gpu_cap: np.ndarray, slot_table: np.ndarray, tables: np.ndarray, free_whole: np.ndarray,
         max_share: np.ndarray, nvl_whole: np.ndarray, numa_whole: np.ndarray, both_whole: np.ndarray) -> int:
    """A pod comes onto node n (sign 1) or leaves it (sign -1): its CPU, memory and `milli` of
    each GPU in gpu_idx taken (or given back), then the node re-summarized (`summarize`, whose
    answer this is; OVER_ALLOCATED also when CPU or memory fell below nothing)."""
    cpu_free[n] -= sign * cpu
    mem_free[n] -= sign * mem
    for g in gpu_idx:
        gpu_free[n, g] -= sign * milli
    gpu_used[n] += sign * milli * len(gpu_idx)
    pods_on[n] += sign
    if cpu_free[n] < 0 or mem_free[n] < 0:
        return OVER_ALLOCATED
    return summarize(n, gpu_free, gpu_cap, slot_table, tables, free_whole, max_share, nvl_whole, numa_whole,
                     both_whole)


@njit(cache=True)
def pick(n: int, gpus: int, milli: int, gpu_free: np.ndarray, gpu_cap: np.ndarray, slot_type: np.ndarray,
         gpu_domain: np.ndarray, claim: bool) -> int:
    """The GPUs a pod of `gpus` devices of `milli` each takes on node n, as a mask (bit g = GPU g;
    a number, not an array: returning an array costs more than choosing): for a share, the
    fitting GPU with the least free milli (lowest index on ties); else the first whole-free
    GPUs, all in the lowest-numbered domain with enough if `claim` (gpu_domain: node type x
    GPU -> domain). 0 when none fits."""
    k = gpu_cap[n]
    if milli < WHOLE:
        best = -1
        for g in range(k):
            free = gpu_free[n, g]
            if free >= milli and (best < 0 or free < gpu_free[n, best]):
                best = g
        return 0 if best < 0 else 1 << best
    t = slot_type[n]
    chosen = -1
    if claim:  # the lowest-numbered domain with enough whole-free GPUs (a handful: counted one by one)
        top = -1
        for g in range(k):
            top = max(top, gpu_domain[t, g])
        for d in range(top + 1):
            count = 0
            for g in range(k):
                if gpu_domain[t, g] == d and gpu_free[n, g] == WHOLE:
                    count += 1
            if count >= gpus:
                chosen = d
                break
    mask = 0
    got = 0
    for g in range(k):
        if got == gpus:
            break
        if gpu_free[n, g] == WHOLE and (not claim or gpu_domain[t, g] == chosen):
            mask |= 1 << g
            got += 1
    return mask
