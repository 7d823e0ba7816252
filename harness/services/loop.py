"""`ReplicaLoop`: a replica autoscaler (HPA or KEDA, conf/replicas/) beside any loop.

The third loop of a cluster that serves models: at each of its syncs it reads each service's
created replicas (the Deployment's spec.replicas) and the demand observed now (never a later
one), asks the autoscaler (harness/services/replicas.py) for the desired counts, and creates
or deletes the difference (`Replicas.create` / `delete`): created
replicas are pending pods the wrapped loop's scheduler places and its node autoscaler reacts
to, as any. Its sync cadence is a clock of its own: the wrapped loop's quiet wake-ups pass in
bulk only up to the next sync.

Behind Kueue (loop=separate_kueue, merged_kueue) this loop wraps the KueueLoop, as a
Deployment's controllers stand before Kueue upstream: the replicas it creates arrive at
Kueue's gate and wait for quota like any pod (harness/kueue/loop.py), and the replicas it
deletes give their quota back there. It wakes at the earlier of its sync and the KueueLoop's
wake-up; Kueue acts on events and steps only, so the quiet stretches stay the innermost
loop's, cut at the next sync.
"""

from __future__ import annotations

import numpy as np

from harness.description import Description
from harness.loops.base import conform
from harness.scores import ScorePlugin
from harness.services.replicas import HorizontalPodAutoscaler, KedaScaledObject
from harness.view import Loop, SimulationView


class ReplicaLoop:
    def __init__(self, inner: Loop, autoscaler: HorizontalPodAutoscaler):
        conform(inner, Loop, "loop")
        self.inner = inner
        self.autoscaler = autoscaler
        self.name = inner.name

    @property
    def policy(self) -> ScorePlugin:
        return self.inner.policy

    def describe(self) -> Description:
        return self.inner.describe()

    def attach(self, sim: SimulationView) -> None:
        """The wrapped loop attaches, then each service starts with its floor of replicas at
        time 0: min_replicas, at least 1 under a plain HPA (its minReplicas is >= 1; only
        KEDA scales to zero)."""
        self.inner.attach(sim)
        svc = sim.w.services
        assert svc is not None, "replay wraps a loop in ReplicaLoop only for a trace with services"
        self.autoscaler.attach(svc.capacity, svc.min_replicas, svc.max_replicas)
        floor = svc.min_replicas if isinstance(self.autoscaler, KedaScaledObject) else np.maximum(svc.min_replicas, 1)
        self.max_replicas = svc.max_replicas
        rs = sim.replicasets
        assert rs is not None, "a trace with services has replicas"
        rs.recommended[:] = floor
        for s in np.flatnonzero(floor).tolist():
            rs.create(s, int(floor[s]))

    def next_wakeup(self, now: float) -> float:
        return min(self.inner.next_wakeup(now), self.autoscaler.next_sync(now))

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        return self.inner.idle_ticks(start, min(before, self.autoscaler.next_sync(start)))

    def step(self, sim: SimulationView, now: float) -> None:
        """A sync when one is due (replicas created or deleted), then the wrapped loop's step."""
        if self.autoscaler.next_sync(now) <= now:
            rs = sim.replicasets
            assert rs is not None, "a trace with services has replicas"
            current = rs.replicas.copy()
            desired = self.autoscaler.sync(now, current, rs.demand_now())
            assert ((desired >= 0) & (desired <= self.max_replicas)).all(), "desired replicas within [0, max]"
            rs.recommended[:] = self.autoscaler.recommended(desired)
            for s in np.flatnonzero(desired > current).tolist():
                rs.create(s, int(desired[s] - current[s]))
            for s in np.flatnonzero(desired < current).tolist():
                rs.delete(s, int(current[s] - desired[s]))
        self.inner.step(sim, now)
