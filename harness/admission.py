"""`AdmissionGate`: an admission layer (Kueue, harness/kueue/) in front of the scheduler.

Once a layer puts up its gate (`Simulation.gate_arrivals`), an arriving job is handed to it,
its pods pending and not admitted, instead of reaching the scheduler's queue; the layer lets
it through with `admit`. A job withdrawn once it arrived (a deleted replica) is handed to the
layer's `withdraw`: its workload is gone from the layer's books. The gate attaches through the
simulation's `hooks` (arrival, withdrawn), as any extension.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from harness.status import Event, PendingReason


class AdmissionGate:
    def __init__(self, sim, arrived: Callable[[int], None], withdraw: Callable[[int], None]):
        self.sim, self.arrived = sim, arrived
        w = sim.w
        self.reserved = np.full(w.n_jobs, np.nan)  # its quota's last reservation before its admission
        self._compiled_shape = w.shape.copy()  # a pod's shape before any admission kept it to nodes
        self._shape_of: dict[tuple[int, int], int] = {}  # (compiled shape, placement) -> shape
        self._n_shapes = int(w.shape.max()) + 1 if w.n_pods else 0
        sim.hooks.arrival.append(self._hold)
        sim.hooks.withdrawn.append(withdraw)
        sim.admission = self

    def _hold(self, j: int) -> bool:
        """Arriving job j waits for its admission: every arrival is the layer's."""
        self.reserved[j] = np.nan  # a new pod (a replica created again): its admission is to come
        self.sim.acct.set_reasons(self.sim.w.job_pods[j], PendingReason.NOT_ADMITTED)
        self.arrived(j)
        return True

    def admit(self, j: int, nodes: np.ndarray | None = None) -> None:
        """An arrived job's pending pods reach the scheduler's queue (its admission), kept to
        the slots of the mask `nodes` (None: any), as Kueue writes the node labels of the
        flavor it assigned into the pods' nodeSelector."""
        sim = self.sim
        if math.isnan(sim.job_admitted[j]):
            sim.job_admitted[j] = sim.now
        sim.job_admissions[j] += 1
        self._keep_to(j, 0 if nodes is None else sim.state.placement(nodes))
        sim.queue.push(j)
        if sim.queue.deferred[j]:  # its pods deleted before, their backoff not over: they come then
            sim.acct.set_reasons(sim.unbound_pods(j), PendingReason.JOB_BACKOFF)
            return
        sim.acct.set_reasons(sim.unbound_pods(j), PendingReason.SHORTAGE)
        if sim.hooks.event:
            sim.hooks.emit(Event.QUEUED, job=j)

    def reserve(self, j: int) -> None:
        """The layer reserved quota for gated job j, its admission checks still to pass: the
        wait until its first admission is reported (the last reservation's)."""
        if math.isnan(self.sim.job_admitted[j]):
            self.reserved[j] = self.sim.now

    def _keep_to(self, j: int, placement: int) -> None:
        """Job j's pods may use only the nodes of `placement` (0: any). Their shape changes
        with it (a shape per compiled shape and placement), so pods kept to different nodes
        are never alike for the filters' and autoscalers' per-shape shortcuts."""
        w = self.sim.w
        pods = w.job_pods[j]
        if (w.placement[pods] == placement).all():
            return
        w.placement[pods] = placement
        compiled = self._compiled_shape[pods]
        if placement == 0:
            w.shape[pods] = compiled
            return
        kinds, inverse = np.unique(compiled, return_inverse=True)
        ids = [self._shape_of.setdefault((s, placement), self._n_shapes + len(self._shape_of)) for s in kinds.tolist()]
        w.shape[pods] = np.array(ids, np.int32)[inverse.ravel()]
