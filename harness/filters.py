"""Feasibility filters: which nodes could take a pod now, as one boolean mask over node slots.

Reads only per-node summary arrays, never the node x GPU matrix (see `harness.state`).
"""

from __future__ import annotations

import numpy as np

from harness.state import WHOLE, ClusterState
from harness.workload import Workload


def feasible(state: ClusterState, w: Workload, pod: int, usable: np.ndarray | None = None) -> np.ndarray:
    """Mask of ready (or `usable`) nodes with room for pod: resources, GPU model, shares
    per device, partition profile and topology claims (NVLink, NUMA, NIC per GPU)."""
    mask = state.ready if usable is None else usable
    mask = mask & (state.cpu_free >= w.cpu[pod]) & (state.mem_free >= w.mem[pod])
    k = w.gpus[pod]
    if k == 0:
        return mask
    models = w.model_mask[pod]
    if models:
        mask &= (state.model_bit & models) != 0
    milli = w.milli[pod]
    if milli < WHOLE:
        mask &= state.max_share >= milli
        if w.profile_bit[pod]:
            mask &= (state.profile_bits & w.profile_bit[pod]) != 0
        return mask
    nvl, numa = w.nvlink[pod], w.numa[pod]
    if nvl and numa:
        mask &= state.both_whole >= k
    elif nvl:
        mask &= state.nvl_whole >= k
    elif numa:
        mask &= state.numa_whole >= k
    else:
        mask &= state.free_whole >= k
    if w.nic[pod]:
        mask &= state.nic_ok
    return mask
