"""Which feasible nodes a cycle scores: kube-scheduler's walk from nextStartNodeIndex, compiled.

The walk visits one node at a time and stops early, which numpy can only express as a roll, a
cumulative sum and a search over every ready node (~25% of a separate replay at 100k pods);
compiled (numba, cached on disk) it costs the nodes it visits. NUMBA_DISABLE_JIT=1 runs it as
plain Python, with the same results (tests/test_jit.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def walk_feasible(order: np.ndarray, start: int, mask: np.ndarray, k: int) -> tuple[np.ndarray, int]:
    """Walk `order` (node slots) from index `start`, wrapping round, until k nodes with `mask`
    set are found. Returns those nodes in slot order and how many nodes were checked: up to and
    including the k-th feasible one, or all of them when no more than k are feasible."""
    n_all = len(order)
    found = np.empty(min(k, n_all), np.int64)
    count = 0
    checked = n_all
    for i in range(n_all):
        node = order[(start + i) % n_all]
        if mask[node]:
            if count == k:  # a (k+1)-th feasible node exists: the walk stopped at the k-th
                break
            found[count] = node
            count += 1
            checked = i + 1
    else:  # no more than k feasible: every node was checked
        checked = n_all
    return np.sort(found[:count]), checked


@njit(cache=True)
def ready_in_order(by_rank: np.ndarray, ready: np.ndarray) -> np.ndarray:
    """The slots of `by_rank` (every slot, in the seeded node order) that are `ready`, in that
    order: the order a walk visits the ready nodes in, one pass over the slots where numpy
    gathered and selected over all of them in two."""
    out = np.empty(len(by_rank), np.int64)
    k = 0
    for n in by_rank:
        if ready[n]:
            out[k] = n
            k += 1
    return out[:k]
