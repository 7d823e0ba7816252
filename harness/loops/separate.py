"""Separate loops: today's scheduler and a Cluster-Autoscaler-like autoscaler, side by side.

Two independent loops that share nothing but the cluster: the scheduler places pending pods
on ready nodes whenever something changes; the autoscaler wakes on its own cadence, reads
what the scheduler left pending, and adds or removes nodes with its own view of a pod.
With `autoscaler.provisioning_request` on, this is today's ProvisioningRequest bridge.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.description import GANGS_WAIT, POD_GROUPS, PREEMPTION, Description
from harness.loops.base import Autoscaler, conform
from harness.scheduler import Scheduler
from harness.scores import ScorePlugin
from harness.view import SimulationView


class SeparateLoops:
    """The scheduler beside any `Autoscaler`: the Cluster-Autoscaler-like one
    (harness.autoscalers.cluster_autoscaler) or the Karpenter-like one (harness.autoscalers.karpenter)."""

    def __init__(self, scheduler: Scheduler, autoscaler: Autoscaler, name: str = "separate"):
        conform(autoscaler, Autoscaler, "loop.autoscaler")
        self.scheduler = scheduler
        self.autoscaler = autoscaler
        self.name = name

    @property
    def policy(self) -> ScorePlugin:
        return self.scheduler.policy

    def describe(self) -> Description:
        """The autoscaler's family, with the scheduler's switches among its own."""
        d = self.autoscaler.describe()
        mine = ((GANGS_WAIT,) if self.scheduler.waits_for_capacity else ()) + (
            (PREEMPTION,) if self.scheduler.preempts else ()) + (
            (POD_GROUPS,) if self.scheduler.pod_groups is not None else ())
        return replace(d, switches=tuple(sorted(d.switches + mine, key=lambda s: s.rank)))

    def attach(self, sim: SimulationView) -> None:
        self.sim = sim
        self.scheduler.attach(sim)
        self.autoscaler.attach(sim, self.scheduler)

    def next_wakeup(self, now: float) -> float:
        return self.autoscaler.next_scan if self.sim.cluster.autoscaling else np.inf

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        """Upcoming wake-ups that provably change nothing (see `Simulation.run`): the
        autoscaler's; the scheduler has nothing to do while nothing changes."""
        return self.autoscaler.idle_ticks(start, before)

    def step(self, sim: SimulationView, now: float) -> None:
        self.scheduler.cycle(now)
        if sim.cluster.autoscaling and now >= self.autoscaler.next_scan:
            self.autoscaler.scan(now)
            self.scheduler.cycle(now)  # evicted pods are rescheduled at once
