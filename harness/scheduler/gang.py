"""Gang plugins: how a job's pods wait for each other, at PreFilter, Permit and PostFilter.

A job's pods are tried together in a cycle. After the members that found a node are bound
(Reserve, then Bind: they hold their devices), Permit says what they wait for; a gang starts
once `min_member` of its pods are bound on ready nodes (the simulation's rule, upstream
Coscheduling's quorum). When a member finds no node, PostFilter says whether the members
reserved with it are rejected; a job whose PostFilter rejects before anything is reserved
(`rejects_all`) is placed on a trial of the state, kept only if every member fits.

A job's pods may arrive at different times. A gang plugin holds a gang until min_member of
its pods exist, each in its place: Coscheduling at PreFilter (the job is queued, so an
autoscaler sees its pods pending), Atomic and GangScheduling (pod_group.py) at PreEnqueue.

  NoGang        no point: members bind one by one as they fit and hold their devices while waiting;
  Coscheduling  scheduler-plugins Coscheduling: PreFilter refuses a gang while fewer than
                min_member of its pods exist (core.go PreFilter: `len(pods) < MinMember`, pods
                listed by their PodGroup label, whatever their phase; UnschedulableAndUnresolvable,
                so no preemption; a Pod/Add event requeues it). Permit waits up to `timeout_s` for the gang
                to start, then releases every member (PermitWaitingTimeSeconds, 60 s by
                default); PostFilter releases the waiting members at once when a member found
                no node and more than `reject_percentage` % of min_member is unassigned
                (PodGroupRejectPercentage, 10 by default), and its PreFilter then refuses
                the gang for `backoff_s` (PodGroupBackoffSeconds, 0 = off by default);
  Atomic        PreEnqueue holds a gang until min_member of its pods exist; PostFilter rejects
                the whole gang: its arrived members are placed in one cycle or not at all (a
                member arriving later is placed alone, as one left over by a started gang).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from harness.scheduler.plugin import Plugin, Profile
from harness.settings import check, duration, integer, period
from harness.status import BOUND

if TYPE_CHECKING:
    from harness.view import SimulationView


def quorum_exists(sim: SimulationView, j: int) -> bool:
    """At least min_member of job j's pods exist (have arrived): a gang may be tried."""
    return bool(sim.job_arrived[j] >= sim.w.job_min_member[j])


class NoGang(Plugin):
    """Members bind as they fit and hold their devices until the gang can start: the plugin of
    no extension point (loop/scheduler/gang=none)."""


class Coscheduling(Plugin):
    """Permit waits `timeout_s` for a partly bound gang to start, then releases it; PostFilter
    releases it at once when a member fits nowhere and the gap to quorum is too wide."""

    SETTINGS = {
        "timeout_s": period("seconds a partly placed gang holds its nodes before releasing them"),
        "reject_percentage": integer("PostFilter releases a partly placed gang at once when a member fits "
                                     "nowhere and more than this percentage of min_member is unassigned",
                                     ge=0, le=100),
        "backoff_s": duration("seconds PreFilter refuses a gang after PostFilter released it (0: no backoff)"),
    }

    def __init__(self, timeout_s: float = 60.0, reject_percentage: int = 10, backoff_s: float = 0.0):
        check(self, "loop.scheduler.gang", timeout_s=timeout_s,
              reject_percentage=reject_percentage, backoff_s=backoff_s)
        self.timeout_s = float(timeout_s)
        self.reject_percentage = int(reject_percentage)
        self.backoff_s = float(backoff_s)

    def attach(self, scheduler: Profile) -> None:
        super().attach(scheduler)
        #: each job's pending Permit timeout (the id `at` returned; -1: none): a gang's waiting
        #: members share one wait
        self.timer = np.full(self.sim.w.n_jobs, -1, np.int64)
        self.denied_until = np.full(self.sim.w.n_jobs, -np.inf)  # PodGroup backoff after a PostFilter rejection

    def pre_filter(self, j: int, usable: np.ndarray, group: int) -> int | None:
        """None for a gang rejected by PostFilter less than backoff_s ago ("failed recently")
        or with fewer than min_member pods in existence. No clock of its own: a cycle runs only
        when something changed, so the gang is next tried at the first change after the
        backoff (upstream: an event that requeues it), or when more of its pods arrive."""
        return group if self.sim.now >= self.denied_until[j] and quorum_exists(self.sim, j) else None

    def permit(self, j: int) -> None:
        """Wait `timeout_s` for the gang to start, once some member of it is bound."""
        sim = self.sim
        if (self.timer[j] < 0 and math.isnan(sim.job_started[j])
                and (sim.pod_status[sim.w.job_pods[j]] == BOUND).any()):
            self.timer[j] = sim.at(sim.now + self.timeout_s, self._timed_out, j)

    def rejects(self, assigned: int, min_member: int) -> bool:
        """Upstream's PostFilter rule: a gang below quorum is rejected when its unassigned
        share of min_member exceeds reject_percentage (integers: no rounding at exactly 10 %)."""
        return assigned < min_member and (min_member - assigned) * 100 > self.reject_percentage * min_member

    def post_filter_gang(self, j: int) -> bool:
        """Reject the waiting members now (True: they were released). Upstream tries a group's
        pods one by one and Permit sends the failed siblings back to the active queue, so the
        last PostFilter sees every member that could be assigned: the rule is applied once,
        after the job's attempt."""
        sim = self.sim
        if not (self.timer[j] >= 0 and self.rejects(int(sim.job_placed[j]), int(sim.w.job_min_member[j]))):
            return False
        self._stop_wait(j)
        self._release(j)
        if self.backoff_s > 0:
            self.denied_until[j] = sim.now + self.backoff_s
        return True

    def releases_after(self, j: int, bound: int) -> bool:
        """Whether an attempt of gang j, none of whose pods has a node, that binds `bound`
        members and then finds no node for the next ends with PostFilter releasing them (the
        gang does not start and the gap to quorum is too wide): the attempt is futile. The more
        members bound, the narrower the gap: what holds for `bound` holds for fewer (but one)."""
        sim = self.sim
        return bool(sim.job_placed[j] == 0 and math.isnan(sim.job_started[j]) and bound > 0
                    and self.rejects(bound, int(sim.w.job_min_member[j])))

    def futile_after(self, jobs: np.ndarray, bound: np.ndarray) -> np.ndarray:
        """Of these gangs, none of whose pods has a node, which would be let through by
        `pre_filter` and then released by PostFilter after an attempt that binds `bound` (each)
        and finds no node for the next: `pre_filter` and `releases_after` of each in a few array
        steps."""
        sim, min_member = self.sim, self.sim.w.job_min_member[jobs]
        # rejected (`rejects`): bound < min_member follows, the percentage being >= 0
        futile = ((sim.job_arrived[jobs] >= min_member) & (sim.job_placed[jobs] == 0) & np.isnan(sim.job_started[jobs])
                  & (bound > 0) & ((min_member - bound) * 100 > self.reject_percentage * min_member))
        if self.backoff_s > 0:  # else no gang is ever denied (`denied_until` stays -inf)
            futile &= sim.now >= self.denied_until[jobs]
        return futile

    def releases_alike(self, jobs: np.ndarray, trips: list[tuple[list[int], list[float]]], pods: np.ndarray
                       ) -> np.ndarray:
        """`release_at_once` of these gangs in turn (`futile_after` each), each on the nodes and
        with the F_n of a trip measured before on the nodes' contents as they are (`pods`: the
        members bound, gang after gang, `first_pending`): one step of the simulation for all
        (`round_trips`). Returns the capacity version after each gang's releases, which the
        scheduler backs it off at."""
        for j in jobs[self.timer[jobs] >= 0].tolist():
            self._stop_wait(j)
        versions = self.sim.round_trips(jobs, trips, pods)
        if self.backoff_s > 0:
            self.denied_until[jobs] = self.sim.now + self.backoff_s
        return versions

    def release_at_once(self, j: int, plan: list[tuple[int, int, np.ndarray]],
                        frags: list[float] | None = None) -> list[float]:
        """A futile attempt (`releases_after`) as its net effect: the members of `plan` (pod,
        node, devices) are bound and released at once (`bind_then_release`, which returns, and
        may be given back, `frags`), and the gang backs off as `post_filter_gang` leaves it.
        Permit would start a wait for them that PostFilter stops in the same cycle, so no timer
        is started; one left from before is stopped."""
        if self.timer[j] >= 0:
            self._stop_wait(j)
        frags = self.sim.bind_then_release(plan, frags)
        self.scheduler.back_off(j)
        if self.backoff_s > 0:
            self.denied_until[j] = self.sim.now + self.backoff_s
        return frags

    def evicted(self, j: int) -> None:
        """Upstream rejects a preempted waiting pod, and with it its group: the wait ends."""
        if self.timer[j] >= 0:
            self._stop_wait(j)

    def _stop_wait(self, j: int) -> None:
        """The gang's waiting members are rejected before their timeout: its timer is stopped
        (upstream's waitingPod.Reject stops every plugin's timer), so no event is left behind
        for it and members bound later wait a timeout of their own."""
        self.sim.cancel(int(self.timer[j]))
        self.timer[j] = -1

    def _timed_out(self, j: int) -> None:
        """The wait ran out (PermitWaitingTimeSeconds): the gang is released."""
        self.timer[j] = -1
        self._release(j)

    def _release(self, j: int) -> None:
        """The wait timed out or PostFilter rejected: Unreserve every bound member of the gang
        that did not start; it is retried when capacity next changes."""
        sim = self.sim
        if not math.isnan(sim.job_started[j]):
            return
        pods = sim.w.job_pods[j]
        sim.unbind_many(pods[sim.pod_status[pods] == BOUND])
        self.scheduler.back_off(j)


class Atomic(Plugin):
    """A gang's members are placed all in one cycle, or none is."""

    def pre_enqueue(self, j: int) -> bool:
        """A gang enters the queue once min_member of its pods exist, as with GangScheduling:
        placing fewer whole would bind members that cannot start."""
        return quorum_exists(self.sim, j)

    def rejects_all(self, j: int) -> bool:
        return bool(self.sim.w.job_min_member[j] > 1)
