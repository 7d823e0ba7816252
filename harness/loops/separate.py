"""Separate loops: today's scheduler and a Cluster-Autoscaler-like autoscaler, side by side.

Two independent loops that share nothing but the cluster: the scheduler places pending pods
on ready nodes whenever something changes; the autoscaler wakes on its own cadence, reads
what the scheduler left pending, and adds or removes nodes with its own view of a pod.
With `autoscaler.provisioning_request` on, this is today's ProvisioningRequest bridge.
"""

from __future__ import annotations

import numpy as np

from harness.loops.cluster_autoscaler import ClusterAutoscaler
from harness.scheduler import Scheduler


class SeparateLoops:
    """The autoscaler is any object with attach(sim, scheduler), next_scan, scan(now) and
    idle_ticks(start, before): the Cluster-Autoscaler-like one, or the Karpenter-like one
    (harness.loops.karpenter)."""

    def __init__(self, scheduler: Scheduler, autoscaler: ClusterAutoscaler, name: str = "separate"):
        self.scheduler = scheduler
        self.autoscaler = autoscaler
        self.name = name

    def attach(self, sim) -> None:
        self.sim = sim
        self.scheduler.attach(sim)
        self.autoscaler.attach(sim, self.scheduler)

    def next_wakeup(self, now: float) -> float:
        return self.autoscaler.next_scan if self.sim.cluster.autoscaling else np.inf

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        """Upcoming wake-ups that provably change nothing (see `Simulation.run`): the
        autoscaler's; the scheduler has nothing to do while nothing changes."""
        return self.autoscaler.idle_ticks(start, before)

    def step(self, sim, now: float) -> None:
        self.scheduler.cycle(now)
        if sim.cluster.autoscaling and now >= self.autoscaler.next_scan:
            self.autoscaler.scan(now)
            self.scheduler.cycle(now)  # evicted pods are rescheduled at once
