"""The Job controller's pod-failure backoff: a Job whose pods were deleted gets them again only
after a delay that doubles with each failure since its last success.

Upstream (kubernetes/kubernetes pkg/controller/job): a deleted pod that had not succeeded
counts as failed (job_controller.go `isPodFailed`), whoever deleted it: the scheduler's
preemption, a drain through the Eviction API, a NoExecute taint. Per Job the controller keeps a
backoff record (backoff_utils.go `backoffRecord`: failures since the last success, the last
failure's time; `newBackoffRecord`), and `manageJob` creates the replacement pods only once
`getRemainingTimeForFailuresCount` says the delay is over: 10 s
(`DefaultJobPodFailureBackOff`) doubled per failure after the first, at most 10 min
(`MaxJobPodFailureBackOff`). A podFailurePolicy rule that ignores a failure keeps it off the
backoffLimit count but not off this record (job_controller.go `nonIgnoredFailedPodsCount` is
the count; the record takes every failed pod). A Job suspended by Kueue has its pods deleted
with their tracking finalizer removed first (`deleteJobPods`), so they are not counted.

Here a job's pods do not pend again, as the older simplification had them, the instant they
are evicted: while its backoff runs the job stays out of the scheduler's queue (so no
autoscaler sees it either, as upstream's replacement pods do not exist yet), its pods pending
`job_backoff`, and an event at the delay's end lets it in. A Deployment's pods (a service's
replicas, a buffer's placeholders) are recreated by their ReplicaSet at once and never wait.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from harness.status import Event, PendingReason

#: DefaultJobPodFailureBackOff and MaxJobPodFailureBackOff (job_controller.go; the Job
#: documentation's "capped at six minutes" is older than the code's 10 min)
BASE_S = 10.0
CAP_S = 600.0


def delay_s(failures: int, base_s: float = BASE_S, cap_s: float = CAP_S) -> float:
    """The wait after the last of `failures` failures: base_s doubled once per failure after
    the first, and cap_s as soon as a doubling reaches it (0: no failure)."""
    if failures <= 0:
        return 0.0
    wait = base_s
    for _ in range(1, failures):
        wait *= 2
        if wait >= cap_s:
            return cap_s
    return wait


def remaining_s(failures: int, last_failure: float, now: float, base_s: float = BASE_S,
                cap_s: float = CAP_S) -> float:
    """How much longer the replacements wait at `now` (upstream's
    getRemainingTimeForFailuresCount): 0 once the delay has passed, and 0 at its very end
    (reckoned from the end, last_failure + delay, the instant the simulation wakes the job at)."""
    wait = delay_s(failures, base_s, cap_s)
    if wait == 0.0:
        return 0.0
    end = last_failure + wait
    return end - now if now < end else 0.0


def next_record(failures: int, last_failure: float, succeeded_at: Sequence[float],
                failed_at: Sequence[float]) -> tuple[int, float]:
    """A job's record once these newly finished pods are counted (upstream's newBackoffRecord):
    failures only add up; a success forgets the record and keeps the failures after the
    latest success (one at the same instant is not after it). nan: no last failure."""
    if not succeeded_at:
        if not failed_at:
            return failures, last_failure
        return failures + len(failed_at), max(failed_at)
    last_success = max(succeeded_at)
    after = [t for t in failed_at if t > last_success]
    return len(after), (max(after) if after else math.nan)


class JobBackoff:
    """Per job, its backoff record; the job queue asks it whether a job may enter now."""

    def __init__(self, sim, base_s: float = BASE_S, cap_s: float = CAP_S):
        w = sim.w
        self.sim, self.base_s, self.cap_s = sim, base_s, cap_s
        #: per job: a Job's (its pods wait); a Deployment's replicas and placeholders do not
        self.counted = ~w.job_placeholder & (w.job_service < 0)
        self.failures = np.zeros(w.n_jobs, np.int64)  # failed pods since the last success
        self.last_failure = np.full(w.n_jobs, np.nan)
        sim.queue.wait_while(self.holds)

    def holds(self, j: int) -> bool:
        """Job j's replacement pods are not due yet."""
        return remaining_s(int(self.failures[j]), float(self.last_failure[j]), self.sim.now,
                           self.base_s, self.cap_s) > 0.0

    def failed(self, j: int, pods: int = 1) -> None:
        """`pods` pods of job j left their nodes deleted, now: its record grows, and the job
        (with any of its pods still queued) waits out the delay."""
        if not self.counted[j]:
            return
        sim = self.sim
        now = sim.now
        self.failures[j], self.last_failure[j] = next_record(
            int(self.failures[j]), float(self.last_failure[j]), (), (now,) * pods)
        queue = sim.queue
        if queue.holds[j]:  # its other pods pending: upstream's stay, ours wait with them
            queue.remove(j)
            queue.push(j)
            sim.acct.set_reasons(sim.unbound_pods(j), PendingReason.JOB_BACKOFF)
        sim.at(now + delay_s(int(self.failures[j]), self.base_s, self.cap_s), self.release, j)

    def succeeded(self, j: int) -> None:
        """A pod of job j finished: its record is forgotten and a waiting job enters at once."""
        self.failures[j], self.last_failure[j] = next_record(
            int(self.failures[j]), float(self.last_failure[j]), (self.sim.now,), ())
        self.release(j)

    def release(self, j: int) -> None:
        """Job j enters the queue if it waits for its backoff and that is over (an earlier
        event of a delay since lengthened, or of a job gone meanwhile, does nothing)."""
        sim = self.sim
        if not sim.queue.deferred[j] or self.holds(j):
            return
        if sim.queue.push(j):
            sim.acct.set_reasons(sim.unbound_pods(j), PendingReason.SHORTAGE)
            sim.hooks.emit(Event.QUEUED, job=j)
        else:  # the scheduler's PreEnqueue: fewer pods than its gang's quorum exist
            sim.acct.set_reasons(sim.unbound_pods(j), PendingReason.GANG_WAIT)
