"""What-if packing: how an autoscaler sees pods, and the what-if snapshot every autoscaler
packs pods onto with one first-fit packer (an estimate of what fits where, never the real
placement).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from harness.filters import first_feasible, first_fit, first_fit_bind, fits_count, pick_devices
from harness.state import ClusterState
from harness.workload import Workload


def view_of(w: Workload, topology_aware: bool, sharing_aware: bool, dra_aware: bool = True) -> Workload:
    """The workload as an autoscaler with these switches sees it. In a DRA cluster a DRA-aware
    autoscaler sees each pod's claims as the scheduler does, whatever the other switches say;
    one that is not (pre-DRA: device needs as extended resources and node selectors) sees the
    device columns, through `topology_aware` and `sharing_aware`."""
    changes: dict[str, Any] = {}
    claimed = np.zeros(w.n_pods, bool) if w.claim is None or not dra_aware else w.claim >= 0
    if not dra_aware and w.claim is not None:
        changes["claim"] = None
    if not sharing_aware:
        changes["milli"] = np.where(claimed, w.milli, np.where(w.gpus > 0, 1000, 0)).astype(np.int32)
        changes["profile_bit"] = np.where(claimed, w.profile_bit, 0)
    if not topology_aware:
        changes.update(nvlink=w.nvlink & claimed, numa=w.numa & claimed, nic=w.nic & claimed)
    return replace(w, **changes) if changes else w


def equivalence_classes(w: Workload) -> np.ndarray:
    """Per pod, its class of pods identical in this view. `w.shape` classes the full pods, so
    in a blind view (claims and shares forgotten) several shapes may be one class."""
    if w.n_pods == 0:
        return w.shape
    _, first, shape = np.unique(w.shape, return_index=True, return_inverse=True)  # one pod per shape
    key = np.stack([w.cpu[first], w.mem[first], w.gpus[first], w.milli[first], w.profile_bit[first],
                    w.model_mask[first], w.nvlink[first], w.numa[first], w.nic[first],
                    *([] if w.claim is None else [w.claim[first]])], axis=1)
    _, cls = np.unique(key, axis=0, return_inverse=True)
    return cls.ravel()[shape.ravel()]


def classes(view_class: np.ndarray, w: Workload, pods: np.ndarray) -> np.ndarray:
    """The pods' classes now: their `equivalence_classes` (taken on attach, before any
    admission), kept apart by the nodes an admission layer keeps them to (`Workload.placement`)."""
    return view_class[pods] + w.n_pods * w.placement[pods].astype(np.int64)


def first_fit_count(state: ClusterState, w: Workload, pod: int, mask: np.ndarray, k: int) -> int:
    """How many of k pods shaped like `pod` first fit over the `mask` nodes would place, with
    no bind (the last packing of a scan, or a count on the real state: nothing reads it after)."""
    return int(first_fit(state, w, pod, mask, k)[1].sum())


class ScratchState:
    """The scratch copy a loop's what-ifs of every slot pack on, kept from one to the next:
    `take` returns it equal to a fresh `ClusterState.copy` of the state, rewriting only the
    rows changed since the last take (`ClusterState.refresh_copy`), so a what-if costs
    O(rows changed) to set up rather than a copy of every slot's devices. One snapshot at a
    time: a take spends the previous one."""

    def __init__(self, state: ClusterState):
        self.state = state
        self.twin: ClusterState | None = None
        self.since = -1  # the state's `mutations` at the last take

    def take(self) -> ClusterState:
        if self.twin is None:
            self.twin = self.state.copy()
        else:
            self.state.refresh_copy(self.twin, self.since)
        self.since = self.state.mutations
        return self.twin


class Snapshot:
    """A what-if copy of some slots of the cluster, as Cluster Autoscaler's ClusterSnapshot:
    pods are packed onto it, never onto the real state. Local node i is slot `slots[i]` (all
    slots, in order, when `slots` is None); a copy of a few candidate slots costs O(len(slots)).

    The one first-fit packer of every autoscaler: a pod goes to the first (lowest local index)
    `usable` node it fits, else the next `openable` slot is opened (a node to ask for) and
    becomes usable. With `booked` (local copy of the scheduler's `booked_for`), a pod may use
    only free nodes and those booked for its own job, as the scheduler would. `devices` (per
    slot of the cluster, harness/autoscalers/node_templates.py) is the device type the loop
    simulates the node of an absent slot with once opened (`ClusterState.retype`); None: the
    slot's node type's own. `scratch` (of `state`, all slots): pack on its kept copy rather
    than a new one."""

    def __init__(self, state: ClusterState, slots: np.ndarray | None = None, usable: np.ndarray | None = None,
                 openable: Iterable[int] = (), booked: np.ndarray | None = None, devices: np.ndarray | None = None,
                 scratch: ScratchState | None = None):
        assert scratch is None or (scratch.state is state and slots is None), "a scratch copy of every slot"
        self.slots = slots
        if scratch is not None:
            self.state = scratch.take()
        else:
            self.state = state.copy() if slots is None else state.subset(slots)
        if devices is not None:
            self.state.retype(devices if slots is None else devices[slots])
        self.usable = np.zeros(self.state.n_slots, bool) if usable is None else np.array(usable, bool)
        self.openable = list(openable)
        self.opened: list[int] = []  # local slots opened, in order
        self.booked = booked

    def global_slots(self, local) -> np.ndarray:
        return np.asarray(local, np.int64) if self.slots is None else self.slots[local]

    def _open(self) -> int:
        n = self.openable.pop(0)
        self.state.add_node(n, ready=False)
        self.usable[n] = True
        self.opened.append(n)
        return n

    def fit(self, w: Workload, pods: np.ndarray | list[int],
            undo: bool = True) -> list[tuple[int, int, np.ndarray]] | None:
        """First-fit the pods one by one, all or nothing: returns [(pod, local node, GPUs)], or
        None and the snapshot as before (a trial on its state: binds and openings undone, the
        opened slots back at the front of `openable`). undo=False: a caller that drops the
        snapshot on failure skips the undo record."""
        st, opened = self.state, len(self.opened)
        if undo:
            st.fork()
        plan, job, mask = [], -1, self.usable
        for p in np.asarray(pods).tolist():
            if self.booked is not None and w.job[p] != job:
                job = int(w.job[p])
                allowed = (self.booked == -1) | (self.booked == job)
            if self.booked is not None:
                mask = self.usable & allowed
            cand = first_feasible(st, w, p, mask, 1)
            if len(cand) == 0 and self.openable:
                self._open()
                mask = self.usable if self.booked is None else self.usable & allowed
                cand = first_feasible(st, w, p, mask, 1)
            if len(cand) == 0:
                if undo:
                    self._revert(opened)
                return None
            n = int(cand[0])
            g = pick_devices(st, w, p, n)
            st.bind(n, int(w.cpu[p]), int(w.mem[p]), g, int(w.milli[p]))
            plan.append((p, n, g))
        if undo:
            st.keep()
        return plan

    def fit_alike(self, w: Workload, pod: int, k: int, usable: np.ndarray | None = None,
                  slots: np.ndarray | None = None) -> np.ndarray:
        """`fit` for k pods shaped like `pod`, counting rather than all or nothing, in bulk: first
        fit over the usable nodes (or the `usable` given), then, if some are left, the next
        openable slots, as many as the rest need (empty nodes of one pool: each takes the same
        count; none if not even one pod fits an empty one). The same placements as k rounds of
        `fit`. Returns the local node of each pod placed (the first ones). `slots`: the slots
        `usable` holds, where the caller keeps them (a walk then visits only those), in the
        order the first fit tries them: ascending, or any order for pods with claims (their walk
        follows it; the others' walk slot order)."""
        st = self.state
        mask = self.usable if usable is None else usable
        nodes, got = first_fit_nodes(st, w, pod, mask, k, slots)
        placed = int(got.sum())
        if placed == k or not self.openable:
            return np.repeat(nodes, got)
        st.fork()  # one empty node tells how many each new node takes
        n = self._open()
        each = int(fits_count(st, w, pod, np.arange(st.n_slots) == n)[n])
        if each == 0:  # not even one pod fits an empty node: as `fit`, the node is not kept
            self._revert(len(self.opened) - 1)
            return np.repeat(nodes, got)
        st.keep()
        for _ in range(min(-(-(k - placed) // each), len(self.openable) + 1) - 1):
            self._open()
        more, got_more = first_fit_nodes(st, w, pod, self.usable, k - placed)
        return np.r_[np.repeat(nodes, got), np.repeat(more, got_more)]

    def _revert(self, opened: int) -> None:
        """Undo the trial on the state and the openings after the first `opened`."""
        self.state.revert()
        back = self.opened[opened:]
        del self.opened[opened:]
        self.usable[back] = False
        self.openable[:0] = back


def first_fit_nodes(scratch: ClusterState, w: Workload, pod: int, mask: np.ndarray, k: int,
                    slots: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bind up to k pods shaped like `pod` first-fit over the `mask` nodes in slot order, in
    one step: the lowest-index node takes all it exactly can, then the next, and each takes the
    devices that binding them one by one would. The same placements as k rounds of (feasible,
    first node, pick_devices, bind). Returns the nodes used and how many each took. `slots`:
    the mask's slots where the caller keeps them, ascending (pods with claims: in the order to
    try them, `filters.first_fit_bind`)."""
    return first_fit_bind(scratch, w, pod, mask, k, slots)
