"""The GPU milli in use on each ready node, for the idle split by GPU model (`Accounting`), compiled.

After nearly every event the accounting reads, for each ready node, its allocated GPU milli less
what unstarted jobs and placeholders hold: three gathers and two subtractions over every ready
node in numpy, one pass compiled (numba, cached on disk). The product with the per-slot weights
stays numpy's, so the sums are those it always gave. NUMBA_DISABLE_JIT=1 runs it as plain Python.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def used_on(ready: np.ndarray, gpu_used: np.ndarray, held: np.ndarray, buffer_on: np.ndarray) -> np.ndarray:
    """gpu_used - held - buffer_on at each node of `ready`, in its order (int64)."""
    out = np.empty(len(ready), np.int64)
    for i in range(len(ready)):
        n = ready[i]
        out[i] = gpu_used[n] - held[n] - buffer_on[n]
    return out
