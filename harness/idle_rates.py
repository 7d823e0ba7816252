"""Idle GPU milli per price class, kept by per-node deltas for the idle split by GPU model, compiled.

The accounting splits idle accelerator time by GPU model and prices it per slot (`Accounting`).
Slots alike in both (a GPU model and a price per GPU milli) form a class, and the idle milli of a
class is a sum of integers: a slot's billed GPU milli less what started pods use on it when it
is ready. After an event only the nodes its transitions touched can have moved (the ledger's
`take_changed`), so only those are recounted, each moving its class's total by its difference:
O(nodes touched) per event, where a recount of every ready node cost a pass over thousands of
them. Integer sums are exact, so a class's total is the same whatever order nodes changed in.
NUMBA_DISABLE_JIT=1 runs it as plain Python.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.status import ABSENT, READY


@njit(cache=True)
def recount(nodes: np.ndarray, status: np.ndarray, phantom: np.ndarray, committed: np.ndarray,
            milli_cap: np.ndarray, gpu_used: np.ndarray, held: np.ndarray, buffer_on: np.ndarray,
            slot_class: np.ndarray, counted: np.ndarray, class_idle: np.ndarray) -> None:
    """Recount the idle GPU milli of each slot in `nodes` (repeats allowed): billed (a node that
    exists and is no phantom, or a committed slot) less, on a ready node, the milli of started
    pods (`gpu_used - held - buffer_on`); `counted[n]` and its class's `class_idle` follow."""
    for i in range(len(nodes)):
        n = nodes[i]
        c = slot_class[n]
        if c < 0:  # no GPUs
            continue
        idle = 0
        if (status[n] != ABSENT and not phantom[n]) or committed[n]:
            idle = milli_cap[n]
            if status[n] == READY:
                idle -= gpu_used[n] - held[n] - buffer_on[n]
        class_idle[c] += idle - counted[n]
        counted[n] = idle
