"""The nodes of a run: how each came and went, and what a loop asked for.

A slot of the cluster state holds one node instance at a time; the fleet keeps which
instance that is, when a loop asked for it, when it became ready, and a record of every
instance the run had (what the metrics bill and the per-node output lists). A node asked for
boots until its ready event (a phantom, one the provider will never deliver, boots forever),
planned on its type's node-group template if the loop asked so (harness/dra/layer.py); then it
publishes its own devices (`publish`, the simulation's: the pods planned on the template are
allocated anew) and the pods planned on it while it booted may run (`came_up`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.cloud import Cloud, Placement
from harness.engine import Engine
from harness.hooks import Hooks
from harness.ledger import Ledger
from harness.state import ClusterState
from harness.status import BOOTING, Event


@dataclass
class NodeRecord:
    """One node instance's life, for the per-node output."""

    slot: int
    pool: int
    requested_at: float
    ready_at: float = float("nan")
    removed_at: float = float("nan")
    used: bool = False  # ran a pod of a started job at some point


class Fleet:
    def __init__(self, engine: Engine, state: ClusterState, cloud: Cloud, ledger: Ledger,
                 came_up: Callable[[int], None], hooks: Hooks, publish: Callable[[int], None]):
        self.engine, self.state, self.cloud, self.ledger, self.came_up = engine, state, cloud, ledger, came_up
        self.hooks, self.publish = hooks, publish
        self.records: list[NodeRecord] = []
        self.instance = np.full(state.n_slots, -1, np.int64)  # the record of each slot's node (-1: none)
        self.requested_at = np.full(state.n_slots, np.nan)  # when a loop asked for the node
        self.ready_at = np.full(state.n_slots, np.nan)  # when the node became ready (nan: not ready, or none)
        self.last_scale_up = -np.inf

    def provision(self, p: int, count: int, atomic: bool, placement: Placement | None = None,
                  template: bool = True) -> np.ndarray:
        """Ask the cloud for nodes of pool p; accepted nodes boot (a phantom, forever), planned on
        their type's node-group template (`template`) or on its own devices. Returns the
        accepted slots: what the provider said yes to, where it put them, phantoms included."""
        now = self.engine.now
        slots, delays = self.cloud.request(p, count, atomic, now, placement)
        layer = self.state.dra if template else None
        for n, d in zip(slots.tolist(), delays.tolist(), strict=True):
            self.add(n, ready=False, devices=None if layer is None else int(layer.template_of[self.state.slot_type[n]]))
            if math.isfinite(d):
                self.engine.at(now + d, self._ready, n, self.instance[n])
        if len(slots):
            self.last_scale_up = now
        if self.hooks.event:
            self.hooks.emit(Event.SCALE_UP, detail=f"pool={self.state.cluster.pools[p].name} asked={count} "
                                                   f"granted={len(slots)}")
        return slots

    def add(self, n: int, ready: bool, devices: int | None = None) -> None:
        """A node in slot n, asked for now (ready: at once, as a pool's minimum at the start;
        `devices`: the device type it is planned with while it boots)."""
        now = self.engine.now
        self.state.add_node(n, ready, devices)
        self.instance[n] = len(self.records)
        self.requested_at[n] = now
        if ready:
            self.ready_at[n] = now
        self.records.append(NodeRecord(slot=n, pool=int(self.state.slot_pool[n]), requested_at=now,
                                       ready_at=now if ready else np.nan))
        self.ledger.node_added(n)
        if self.hooks.event:
            self.hooks.emit(Event.NODE_REQUESTED, node=n, detail="ready" if ready else "")

    def _ready(self, n: int, instance: int) -> None:
        if self.instance[n] != instance or self.state.status[n] != BOOTING:
            return
        self.publish(n)
        self.state.make_ready(n)
        self.records[instance].ready_at = self.ready_at[n] = self.engine.now
        self.ledger.node_ready(n)
        if self.hooks.event:
            self.hooks.emit(Event.NODE_READY, node=n)
        self.came_up(n)

    def remove(self, n: int) -> None:
        """Node n is gone, its pods already off it."""
        if self.hooks.event:
            self.hooks.emit(Event.NODE_REMOVED, node=n)
        self.ledger.node_removed(n)
        self.state.remove_node(n)
        self.cloud.released(n)
        self.records[self.instance[n]].removed_at = self.engine.now
        self.instance[n] = -1
        self.requested_at[n] = self.ready_at[n] = np.nan

    def used(self, n: int) -> None:
        """Node n ran a pod of a started job."""
        self.records[self.instance[n]].used = True
