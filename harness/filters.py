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


def capacity(state: ClusterState, w: Workload, pod: int, mask: np.ndarray) -> np.ndarray:
    """Upper bound, per node, of how many pods shaped like `pod` it could still take (0 where
    `mask` or the filter says no). Cheap enough to prune whole racks or blocks before a trial
    placement of a gang: a group whose bound is below the gang size cannot hold it."""
    ok = feasible(state, w, pod, mask)
    big = np.iinfo(np.int64).max
    n = np.where(ok, big, 0)
    if w.cpu[pod]:
        n = np.minimum(n, state.cpu_free // w.cpu[pod])
    if w.mem[pod]:
        n = np.minimum(n, state.mem_free // w.mem[pod])
    if w.gpus[pod]:
        if w.milli[pod] < WHOLE:
            free_milli = state.gpu_cap.astype(np.int64) * WHOLE - state.gpu_used
            n = np.minimum(n, free_milli // w.milli[pod])
        else:
            n = np.minimum(n, state.free_whole // w.gpus[pod])
    return np.where(ok, n, 0)


def groups_that_fit(state: ClusterState, w: Workload, pods: np.ndarray, mask: np.ndarray,
                    groups: np.ndarray) -> np.ndarray:
    """Racks or blocks (values of `groups`, in increasing order) that may hold the gang: for a
    gang of one pod shape, those whose capacity bound reaches the gang's size; otherwise those
    where its first pod fits."""
    if (w.shape[pods] != w.shape[pods[0]]).any():
        return np.unique(groups[feasible(state, w, int(pods[0]), mask)])
    cap = capacity(state, w, int(pods[0]), mask)
    nodes = np.flatnonzero(cap)
    if len(nodes) == 0:
        return nodes
    ids, inverse = np.unique(groups[nodes], return_inverse=True)
    total = np.bincount(inverse, weights=np.minimum(cap[nodes], len(pods)))
    return ids[total >= len(pods)]
