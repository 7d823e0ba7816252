"""QueueSort: the order in which the scheduler tries the queued jobs.

As kube-scheduler's QueueSort extension point, exactly one plugin orders the queue. The
simulation keeps the queue sorted by the plugin's key, taken when a job enters the queue
(on arrival, or when a timeout or an eviction sends its pods back): a key is a tuple, smaller
first, and ties go to the lower job index.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from harness.workload import Workload


@runtime_checkable
class QueueSort(Protocol):
    def key(self, w: Workload, j: int) -> tuple:
        """Where job j goes in the queue (smaller first), as it enters it."""
        ...


class PrioritySort:
    """kube-scheduler's PrioritySort (and Coscheduling's `Less`): higher priority first, then
    earlier submission (a job's, its first pod's: a PodGroup is created once, whenever its
    pods arrive)."""

    def key(self, w: Workload, j: int) -> tuple:
        return -int(w.job_priority[j]), float(w.job_submit[j])
