"""What-if packing: how an autoscaler sees pods, and first-fit packing of pods onto a scratch
copy of the cluster (an autoscaler's estimate of what fits where, never the real placement).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.filters import devices_taken, feasible, fits_on
from harness.state import ClusterState
from harness.workload import Workload


def view_of(w: Workload, topology_aware: bool, sharing_aware: bool) -> Workload:
    """The workload as an autoscaler with these switches sees it."""
    changes = {}
    if not sharing_aware:
        changes["milli"] = np.where(w.gpus > 0, 1000, 0).astype(np.int32)
        changes["profile_bit"] = np.zeros_like(w.profile_bit)
    if not topology_aware:
        no = np.zeros(w.n_pods, bool)
        changes.update(nvlink=no, numa=no, nic=no)
    return replace(w, **changes) if changes else w


def equivalence_classes(w: Workload) -> np.ndarray:
    """Per pod, its class of pods identical in this view. `w.shape` classes the full pods, so
    in a blind view (claims and shares forgotten) several shapes may be one class."""
    if w.n_pods == 0:
        return w.shape
    _, first, shape = np.unique(w.shape, return_index=True, return_inverse=True)  # one pod per shape
    key = np.stack([w.cpu[first], w.mem[first], w.gpus[first], w.milli[first], w.profile_bit[first],
                    w.model_mask[first], w.nvlink[first], w.numa[first], w.nic[first]], axis=1)
    _, cls = np.unique(key, axis=0, return_inverse=True)
    return cls.ravel()[shape.ravel()]


def first_fit_many(scratch: ClusterState, w: Workload, pod: int, mask: np.ndarray, k: int,
                   bind: bool = True) -> int:
    """Bind up to k pods shaped like `pod` first-fit over the `mask` nodes in slot order (see
    `first_fit_nodes`). Returns how many were placed; with bind=False only counts them (the
    last packing of a scan: nothing reads the scratch after it)."""
    if bind:
        return int(first_fit_nodes(scratch, w, pod, mask, k)[1].sum())
    nodes = np.flatnonzero(feasible(scratch, w, pod, mask))[:k]  # each takes one or more
    if len(nodes) == k:
        return k
    return int(min(np.minimum(fits_on(scratch, w, pod, nodes), k).sum(), k))


def first_fit_nodes(scratch: ClusterState, w: Workload, pod: int, mask: np.ndarray,
                    k: int) -> tuple[np.ndarray, np.ndarray]:
    """Bind up to k pods shaped like `pod` first-fit over the `mask` nodes in slot order, in
    one vector step: the lowest-index node takes all it exactly can, then the next, and each
    takes the devices that binding them one by one would. The same placements as k rounds of
    (feasible, first node, pick_devices, bind). Returns the nodes used and how many each took."""
    nodes = np.flatnonzero(feasible(scratch, w, pod, mask))[:k]  # each takes one or more
    if k == 1 or len(nodes) == 0:  # at most one node: bound as one pod is (fewer array steps)
        got = np.ones(len(nodes), np.int64)
        if len(nodes):
            n = int(nodes[0])
            g = scratch.pick_devices(n, int(w.gpus[pod]), int(w.milli[pod]), bool(w.nvlink[pod]), bool(w.numa[pod]))
            scratch.bind(n, int(w.cpu[pod]), int(w.mem[pod]), g, int(w.milli[pod]))
        return nodes, got
    can = np.minimum(fits_on(scratch, w, pod, nodes), k)
    got = np.clip(k - (np.cumsum(can) - can), 0, can)
    nodes, got = nodes[got > 0], got[got > 0]
    if len(nodes):
        scratch.bind_many(nodes, got, int(w.cpu[pod]), int(w.mem[pod]), devices_taken(scratch, w, pod, nodes, got))
    return nodes, got
