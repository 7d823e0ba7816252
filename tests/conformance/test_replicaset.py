"""Conformance: the ReplicaSet's deletion order (harness/services/replicaset.py) against
kubernetes/kubernetes pkg/controller/controller_utils_test.go TestSortingActivePodsWithRanks,
with the LogarithmicScaleDown feature on (upstream's default) and PodDeletionCost unset.

Each case is upstream's pair (lesser, greater) with their ranks (replicas of the service on
the same node); `lesser` must be deleted first. Upstream's pods are rebuilt as replica slots
of a fake simulation: unscheduled = pending, scheduled-but-Pending = bound to a node not yet
ready, running = running, ready = a readiness instant. A rank of 2 is a second replica on the
pod's node (a filler, running and not ready, whose own place is not checked). Not translated:
the unknown phase (no such state here), restart counts (none modelled), deletion cost, and a
ready pod without a lastTransitionTime (every ready replica here has its instant).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from harness.services.replicaset import deletion_order
from harness.status import BOUND, PENDING, RUNNING

NOW = 100 * 86400.0
HOUR = 3600.0
MONTH = 30 * 86400.0
# name: (status, ready_since (nan: not ready), created), upstream's pods at `now`
PODS = {
    "unscheduled": (PENDING, np.nan, NOW),
    "pending": (BOUND, np.nan, NOW),
    "not-ready": (RUNNING, np.nan, NOW),
    "ready-now": (RUNNING, NOW, NOW),
    "ready-then": (RUNNING, NOW - MONTH, NOW - MONTH),
    "ready-now-created-then": (RUNNING, NOW, NOW - MONTH),
    "unscheduled-5-hours": (PENDING, np.nan, NOW - 5 * HOUR),
    "unscheduled-10-hours": (PENDING, np.nan, NOW - 8 * HOUR),  # upstream's name, 8 hours ago
    "ready-2-hours": (RUNNING, NOW - 2 * HOUR, NOW - MONTH),
    "ready-5-hours": (RUNNING, NOW - 5 * HOUR, NOW - MONTH),
    "ready-10-hours": (RUNNING, NOW - 8 * HOUR, NOW - MONTH),
}


def order(pairs: list[tuple[str, int]]) -> list[int]:
    """deletion_order over these (pod, rank) (each on a node of its own, plus rank - 1
    fillers beside it), as positions into `pairs` (fillers left out)."""
    status, ready, created, node, who = [], [], [], [], []
    for i, (name, rank) in enumerate(pairs):
        s, r, c = PODS[name]
        for k in range(rank):
            filler = k > 0
            status.append(RUNNING if filler else s)
            ready.append(np.nan if filler else r)
            created.append(NOW if filler else c)
            node.append(i if status[-1] != PENDING else -1)
            who.append(-1 if filler else i)
    n = len(status)
    sim = SimpleNamespace(now=NOW, pod_status=np.array(status, np.int8), pod_node=np.array(node, np.int32),
                          job_ready_at=np.array(ready), w=SimpleNamespace(job=np.arange(n), job_submit=np.array(created)))
    ranked = np.array(who)[deletion_order(sim, np.arange(n))]
    return ranked[ranked >= 0].tolist()


@pytest.mark.parametrize(("lesser", "greater"), [
    (("unscheduled", 1), ("pending", 2)),
    (("unscheduled", 2), ("pending", 1)),
    (("pending", 1), ("not-ready", 2)),
    (("not-ready", 1), ("ready-now", 1)),
    (("ready-now", 1), ("ready-then", 1)),
    (("ready-now", 2), ("ready-then", 1)),
    (("ready-now", 1), ("ready-now-created-then", 1)),
    (("ready-now-created-then", 2), ("ready-now", 1)),
    (("ready-2-hours", 1), ("ready-5-hours", 1)),
])
def test_sorting_active_pods_with_ranks_inequality(lesser, greater):
    """controller_utils_test.go TestSortingActivePodsWithRanks, inequalityTests: `lesser` is
    deleted first, whichever comes first in the list."""
    assert order([lesser, greater]) == [0, 1]
    assert order([greater, lesser]) == [1, 0]


@pytest.mark.parametrize(("p1", "p2"), [("unscheduled-5-hours", "unscheduled-10-hours"),
                                        ("ready-5-hours", "ready-10-hours")])
def test_sorting_active_pods_with_ranks_equality(p1, p2):
    """controller_utils_test.go TestSortingActivePodsWithRanks, equalityTests: 5 and 8 hours
    are the same power of two of nanoseconds (2^44), so neither goes first by age; upstream then
    compares UIDs (random), here the higher slot goes first, whichever pod it is."""
    assert order([(p1, 1), (p2, 1)]) == [1, 0]
    assert order([(p2, 1), (p1, 1)]) == [1, 0]


def test_more_replicas_on_the_node_go_before_a_shorter_readiness():
    """controller_utils.go ActivePodsWithRanks.Less checks the rank (step 5) before the ready
    time (step 6); upstream's cases pair them only against a zero time or restarts, so this
    pair is ours: ready a month on a node with two replicas goes before ready now alone."""
    assert order([("ready-then", 2), ("ready-now", 1)]) == [0, 1]
