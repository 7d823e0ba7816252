"""The scheduler's reading of its queue, kept fast without changing what it reads: the queue's
jobs in QueueSort order as pushes and removals come (`JobQueue.jobs`), and the pending reasons
set after a cycle (`Scheduler._relabel`), each equal to a plain reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.job_queue import JobQueue
from harness.scheduler import Scheduler
from harness.status import PENDING
from tests.test_pod_group_shortcuts import crowded_replay


class ByKey:
    def __init__(self, keys):
        self.keys = keys

    def key(self, w, j):
        return (self.keys[j],)


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(0, 5), min_size=1, max_size=30), data=st.data())
def test_the_queue_lists_its_jobs_in_key_then_arrival_order(keys, data):
    """Pushes and removals in any order: `jobs()` is the queued jobs sorted by (key, job)."""
    queue = JobQueue(lambda: None, len(keys))
    queue.order_by(ByKey(keys))
    held: set[int] = set()
    for push, j in data.draw(st.lists(st.tuples(st.booleans(), st.integers(0, len(keys) - 1)), max_size=60)):
        if push:
            queue.push(j)
            held.add(j)
        else:
            queue.remove(j)
            held.discard(j)
        assert queue.jobs().tolist() == sorted(held, key=lambda k: (keys[k], k))


def plain_relabel(self, jobs):
    """`_relabel` as it was: each job's reason asked in turn."""
    sim, w = self.sim, self.sim.w
    js = np.array(jobs, np.int64)
    pods = w.pods_of(js)
    pods = pods[sim.pod_status[pods] == PENDING]
    if len(pods) == 0:
        return
    if self.job_uniform[js].all():
        first = self.job_first_pod[js]
        keys = self._reason_key(first).tolist()
        reasons = [self._reason(k, p) for k, p in zip(keys, first.tolist(), strict=True)]
        if reasons.count(reasons[0]) == len(reasons):
            sim.acct.set_reasons(pods, reasons[0])
        else:
            pending = self.job_size[js] - sim.job_placed[js]
            sim.acct.set_reasons(pods, np.repeat(np.array(reasons, np.int8), pending))
        return
    keys, first, inverse = np.unique(self._reason_key(pods), return_index=True, return_inverse=True)
    codes = zip(keys.tolist(), pods[first].tolist(), strict=True)
    sim.acct.set_reasons(pods, np.fromiter((self._reason(key, p) for key, p in codes), np.int8, len(keys))[inverse])


@settings(max_examples=15, deadline=None)
@given(n_nodes=st.integers(1, 3),
       gangs=st.lists(st.tuples(st.integers(2, 3), st.sampled_from([2, 4, 8]), st.integers(0, 300),
                                st.integers(300, 1800), st.sampled_from(["none", "rack"])), min_size=2, max_size=10),
       lone=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 2400), st.integers(20, 300)), min_size=2, max_size=20))
def test_the_reasons_set_after_a_cycle_are_the_plain_ones(n_nodes, gangs, lone):
    """At every `_relabel` of replays of queued gangs and lone pods: the reasons (and their
    counts) it leaves are those the plain reference leaves on the same state."""
    relabel = Scheduler._relabel

    def checked(self, jobs):
        acct = self.sim.acct
        was = acct.reason.copy(), acct.reason_count.copy()
        relabel(self, jobs)
        got = acct.reason.copy(), acct.reason_count.copy()
        acct.reason[:], acct.reason_count[:] = was
        plain_relabel(self, jobs)
        np.testing.assert_array_equal(acct.reason, got[0])
        np.testing.assert_array_equal(acct.reason_count, got[1])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Scheduler, "_relabel", checked)
        crowded_replay(n_nodes, gangs, lone, True, memo_runs=True)
