"""Gang plugins: the Permit and PostFilter extension points for a job's pods.

A job's pods are tried together in a cycle. After the members that found a node are bound
(Reserve, then Bind: they hold their devices), Permit says what they wait for; a gang starts
once `min_member` of its pods are bound on ready nodes (the simulation's rule, upstream
Coscheduling's quorum). When a member finds no node, PostFilter says whether the members
reserved with it in the cycle are rejected at once; a job whose PostFilter rejects is placed
on a trial of the state, kept only if every member fits.

  NoGang        members bind one by one as they fit and hold their devices while waiting;
  Coscheduling  the same, and Permit waits up to `timeout_s` for the gang to start, then
                releases every member (scheduler-plugins Coscheduling, PermitWaitingTimeSeconds
                60 s by default; unlike upstream, an unschedulable member does not reject the
                others before the timeout);
  Atomic        PostFilter rejects the whole gang: it is placed in one cycle or not at all.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from harness.settings import check
from harness.workload import BOUND

if TYPE_CHECKING:
    from harness.scheduler.framework import Scheduler


class Gang:
    """Base plugin: Permit allows at once and PostFilter rejects nothing (= NoGang)."""

    def attach(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.sim = scheduler.sim

    def rejects_all(self, j: int) -> bool:
        """PostFilter: whether a member of job j that finds no node rejects the members
        reserved with it in the cycle (asked before the job is placed, to place it on a trial)."""
        return False

    def permit(self, j: int) -> None:
        """Permit, after the members of job j that fit were bound one by one."""


class NoGang(Gang):
    """Members bind as they fit and hold their devices until the gang can start."""


class Coscheduling(Gang):
    """Permit waits `timeout_s` for a partly bound gang to start, then releases it."""

    def __init__(self, timeout_s: float = 60.0):
        check("harness.scheduler.gang.Coscheduling", "loop.scheduler.gang", timeout_s=timeout_s)
        self.timeout_s = float(timeout_s)

    def attach(self, scheduler: Scheduler) -> None:
        super().attach(scheduler)
        self.armed = np.zeros(self.sim.w.n_jobs, bool)  # a timeout is pending for the job

    def permit(self, j: int) -> None:
        sim = self.sim
        if (not self.armed[j] and math.isnan(sim.job_started[j])
                and (sim.pod_status[sim.w.job_pods[j]] == BOUND).any()):
            self.armed[j] = True
            sim.at(sim.now + self.timeout_s, self._timeout, j)

    def _timeout(self, j: int) -> None:
        """The wait timed out: Unreserve every bound member of the gang that did not start."""
        sim = self.sim
        self.armed[j] = False
        if not math.isnan(sim.job_started[j]):
            return
        pods = sim.w.job_pods[j]
        for p in pods[sim.pod_status[pods] == BOUND]:
            sim.unbind(int(p))
        self.scheduler.back_off(j)


class Atomic(Gang):
    """A gang's members are placed all in one cycle, or none is."""

    def rejects_all(self, j: int) -> bool:
        return bool(self.sim.w.job_min_member[j] > 1)
