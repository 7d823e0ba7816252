"""`JobQueue`: the jobs waiting for the scheduler, kept in its QueueSort plugin's order.

A job is queued while any pod of it is pending and it has reached the scheduler (arrived, or
admitted by an admission layer) and passed the scheduler's PreEnqueue (a gang waits there for
its quorum of pods to exist); it leaves once all its arrived pods have a node. A job whose
pods its Job controller has not created again yet (their pod-failure backoff, harness/job_backoff.py)
waits out of it, `deferred`, until it is pushed again. `version` bumps when a job or more of its
pods join, so a loop can tell that nothing new has arrived since it last looked.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from harness.workload import Workload


class QueueOrder(Protocol):
    """The order the queue is kept in: the scheduler's QueueSort plugin
    (harness/scheduler/queue_sort.py)."""

    def key(self, w: Workload, j: int) -> tuple:
        """Where job j goes in the queue (smaller first), as it enters it."""
        ...



class JobQueue:
    def __init__(self, workload: Callable[[], Workload], n_jobs: int) -> None:
        """`workload`: the simulation's workload as it is now (the services' engine replaces it
        with one whose replica slots get their submission times as they are created)."""
        self.workload = workload
        self.entries: list[tuple[tuple, int]] = []  # (the QueueSort plugin's key, job), sorted
        self.order: list[int] = []  # the jobs of `entries`, in their order
        self.sort: QueueOrder | None = None  # the scheduler's QueueSort plugin (`order_by`)
        #: the scheduler's PreEnqueue plugins as one check (`enqueue_if`): may job j enter?
        self.pre_enqueue: Callable[[int], bool] | None = None
        #: the Job controller's backoff as one check (`wait_while`): must job j wait?
        self.backing_off: Callable[[int], bool] | None = None
        self.deferred = np.zeros(n_jobs, bool)  # per job: pushed while backing off, waiting out of the queue
        self._entry: dict[int, tuple[tuple, int]] = {}  # a queued job's entry in `entries`
        self._jobs: np.ndarray | None = None  # the queue's jobs as an array, until it changes
        self.holds = np.zeros(n_jobs, bool)  # per job: queued
        self.version = 0  # bumps when jobs arrive or re-enter the queue

    def __len__(self) -> int:
        return len(self.entries)

    def order_by(self, sort: QueueOrder) -> None:
        """Keep the queue in the order of this QueueSort plugin (the scheduler's, on attach)."""
        self.sort = sort

    def enqueue_if(self, pre_enqueue: Callable[[int], bool]) -> None:
        """Let a job in only when this says so (the scheduler's PreEnqueue, on attach)."""
        self.pre_enqueue = pre_enqueue

    def wait_while(self, backing_off: Callable[[int], bool]) -> None:
        """Keep a job out while this says so (the Job controller's backoff, harness/job_backoff.py)."""
        self.backing_off = backing_off

    def push(self, j: int) -> bool:
        """Queue job j unless it is queued; False: its backoff (then it is `deferred` until
        pushed again) or PreEnqueue keeps it out for now."""
        if not self.holds[j]:
            assert self.sort is not None, "the scheduler orders the queue when it attaches"
            if self.backing_off is not None and self.backing_off(j):
                self.deferred[j] = True
                return False
            self.deferred[j] = False
            if self.pre_enqueue is not None and not self.pre_enqueue(j):
                return False
            entry = self._entry[j] = (self.sort.key(self.workload(), j), j)
            at = bisect_right(self.entries, entry)
            self.entries.insert(at, entry)
            self.order.insert(at, j)
            self._jobs = None
            self.holds[j] = True
            self.version += 1
        return True

    def joined(self, j: int) -> None:
        """More pods of queued job j arrived: the scheduler has something new to try."""
        assert self.holds[j], "pods join a queued job"
        self.version += 1

    def remove(self, j: int) -> None:
        """Job j leaves the queue, or stops waiting to enter it (an admission layer took it back)."""
        self.deferred[j] = False
        if self.holds[j]:
            entry = self._entry.pop(j)
            at = bisect_left(self.entries, entry)  # entries are distinct (each holds its job) and sorted
            if at == len(self.entries) or self.entries[at] is not entry:  # a key that does not order (NaN)
                at = self.entries.index(entry)
            del self.entries[at], self.order[at]
            self._jobs = None
            self.holds[j] = False

    def jobs(self) -> np.ndarray:
        """The queued jobs in queue order, as an array (read-only: shared until the queue changes)."""
        if self._jobs is None:
            self._jobs = np.array(self.order, np.int64)
            self._jobs.flags.writeable = False
        return self._jobs
