"""Filter: which nodes could take a pod now, as one boolean mask over node slots, and why a
pod that fits nowhere does not.

kube-scheduler runs each Filter plugin per node; here a plugin answers for every node at
once (or for the few slots `at`), so a cycle never loops over nodes in Python.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numba import njit

from harness.filters import claims_of, feasible, pod_rule
from harness.scheduler.plugin import Plugin
from harness.state import WHOLE, ClusterState
from harness.status import PendingReason
from harness.workload import Workload

# what `unfit` found, in the order it looks
ON_BOOTING, FITS_ALONE, FITS_UNCLAIMED, ROOM_SPLIT, NO_ROOM = range(5)


class Filter(Protocol):
    def filter(self, state: ClusterState, w: Workload, pod: int, usable: np.ndarray,
               at: np.ndarray | int | None = None) -> np.ndarray:
        """Mask of the `usable` nodes (or of the slots `at`) that can take `pod`."""
        ...

    def reason(self, state: ClusterState, w: Workload, pod: int, usable: np.ndarray,
               booting: np.ndarray) -> PendingReason:
        """Why `pod` is pending after a cycle, given the nodes it may use and those booting."""
        ...

    def rejections(self, state: ClusterState, w: Workload, pod: int, usable: np.ndarray) -> str:
        """What kube-scheduler's FitError says of `pod` over the nodes it may use: how many
        nodes each rule turned it away from, with the plugin that holds the rule."""
        ...


class NodeResourcesFit(Plugin):
    """Room for the pod: CPU, memory, GPU model, shares per device, partition profile and
    topology claims (NVLink, NUMA, NIC per GPU), as `harness.filters.feasible` checks them."""

    #: its verdict on a node is a function of that node's state and the pod alone
    stateless = True

    def filter(self, state, w, pod, usable, at=None):
        return feasible(state, w, pod, usable, at=at)

    def reason(self, state, w, pod, usable, booting):
        """A booting node has room (BOOTING); else a usable node has room, so its gang or gang
        locality failed (GANG_WAIT, or TOPOLOGY for a local gang); else one would without the
        pod's topology claims (TOPOLOGY); else a usable node of a type that could hold it has the
        GPU milli free in total, split across devices (FRAGMENTATION); else SHORTAGE."""
        cpu, mem, static, column, need = pod_rule(state, w, pod)
        claims = bool(w.nvlink[pod] or w.numa[pod] or w.nic[pod])
        _, _, open_static, open_column, open_need = pod_rule(state, w, pod, claims=False) if claims else \
            (cpu, mem, static, column, need)
        k = int(w.gpus[pod])
        placement = int(w.placement[pod]) if len(state.allowed) > 1 else 0
        room = state.pod_static(int(w.model_mask[pod]), int(w.profile_bit[pod]), False, placement, -1)
        found = unfit(usable, booting, state.cpu_free, state.mem_free, state.gpu_cap, state.gpu_used, cpu, mem,
                      static, column, need, claims, open_static, open_column, open_need, room, k * int(w.milli[pod]))
        if found == FITS_ALONE:
            return PendingReason.TOPOLOGY if w.job_locality[w.job[pod]] else PendingReason.GANG_WAIT
        return _REASON[found]

    def rejections(self, state, w, pod, usable):
        """`0/N nodes are available: ...` as upstream words it: each node counted once, by the
        first rule it fails in the order GPU model / profile / NIC / placement (what never
        changes on the node), CPU, memory, then the pod's devices; a node that passes every
        rule held no place for the pod's gang (its quorum or its rack/block did not fit)."""
        nodes = np.flatnonzero(usable)
        cpu, mem, static, _, _ = pod_rule(state, w, pod)
        fits = feasible(state, w, pod, usable, at=nodes) if len(nodes) else np.zeros(0, bool)
        rules = [(~static[nodes], "didn't match the pod's GPU model, partition profile, NIC or placement "
                                  "(NodeAffinity)"),
                 (state.cpu_free[nodes] < cpu, "Insufficient cpu (NodeResourcesFit)"),
                 (state.mem_free[nodes] < mem, "Insufficient memory (NodeResourcesFit)"),
                 (~fits, _device_rule(w, pod))]
        left = np.ones(len(nodes), bool)
        parts = []
        for failed, words in rules:
            hit = left & failed
            if hit.any():
                parts.append(f"{int(hit.sum()):,} {words}")
            left &= ~hit
        if left.any():
            parts.append(f"{int(left.sum()):,} had room for the pod but not for its gang "
                         "(quorum, rack or block: the gang plugin)")
        return f"0/{len(nodes):,} nodes are available" + (": " + ", ".join(parts) if parts else "")


def _device_rule(w: Workload, pod: int) -> str:
    """The words for a node whose devices cannot take the pod, by what the pod asks."""
    if claims_of(w, pod) is not None:
        return "cannot allocate the pod's ResourceClaim (DynamicResources)"
    if w.milli[pod] < WHOLE:
        return f"no GPU with {int(w.milli[pod]):,} milli free (GPU sharing)"
    if w.nvlink[pod] or w.numa[pod] or w.nic[pod]:
        return "too few free GPUs (or NICs) in one NVLink or NUMA domain (the pod's topology claims)"
    return "Insufficient nvidia.com/gpu (NodeResourcesFit)"


_REASON = {ON_BOOTING: PendingReason.BOOTING, FITS_UNCLAIMED: PendingReason.TOPOLOGY,
           ROOM_SPLIT: PendingReason.FRAGMENTATION, NO_ROOM: PendingReason.SHORTAGE}


@njit(cache=True)
def unfit(usable: np.ndarray, booting: np.ndarray, cpu_free: np.ndarray, mem_free: np.ndarray,
          gpu_cap: np.ndarray, gpu_used: np.ndarray, cpu: int, mem: int, static: np.ndarray,
          column: np.ndarray, need: int, claims: bool, open_static: np.ndarray, open_column: np.ndarray,
          open_need: int, room: np.ndarray, milli: int) -> int:
    """The first of ON_BOOTING (a `booting` slot passes the rule of `pod_rule`), FITS_ALONE (a
    usable node does), FITS_UNCLAIMED (one passes the rule without claims, `open_*`), ROOM_SPLIT
    (a usable node in `room` has the CPU, memory and `milli` GPU milli free in total; milli 0:
    never) that holds, else NO_ROOM; in one pass over the nodes that stops at a node that fits."""
    for n in booting:
        if static[n] and cpu_free[n] >= cpu and mem_free[n] >= mem and column[n] >= need:
            return ON_BOOTING
    unclaimed = split = False
    for n in range(len(usable)):
        if not usable[n] or cpu_free[n] < cpu or mem_free[n] < mem:
            continue
        if static[n] and column[n] >= need:
            return FITS_ALONE
        unclaimed |= claims and open_static[n] and open_column[n] >= open_need
        split |= milli > 0 and room[n] and np.int64(gpu_cap[n]) * WHOLE - gpu_used[n] >= milli
    if unclaimed:
        return FITS_UNCLAIMED
    if split:
        return ROOM_SPLIT
    return NO_ROOM
