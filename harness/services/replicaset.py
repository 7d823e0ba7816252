"""Which replicas a scale-down deletes first: the ReplicaSet controller's order.

After kubernetes/kubernetes pkg/controller/replicaset/replica_set.go (getPodsToDelete,
getPodsRankedByRelatedPodsOnSameNode) and pkg/controller/controller_utils.go
(ActivePodsWithRanks.Less, with the LogarithmicScaleDown feature on, its default since 1.22):
  1. not yet assigned to a node before assigned,
  2. phase Pending before Running (a pod bound to a booting node is still Pending),
  3. not ready before ready,
  4. (pod-deletion-cost: not modelled, every replica costs the same)
  5. more replicas of the service on the same node before fewer (the rank),
  6. both ready: ready for less time first, compared in whole powers of two of nanoseconds,
  7. (container restarts: none are modelled)
  8. created more recently first, in the same power-of-two buckets,
then upstream compares UIDs (a random tie-break): here the higher slot index first.
"""

from __future__ import annotations

import numpy as np

from harness.status import BOUND, RUNNING


def log2_age(now: float, t: np.ndarray) -> np.ndarray:
    """logarithmicRankDiff's rank of each instant: int64(log2(now - t in ns)), -1 when not before now."""
    age_ns = (now - np.nan_to_num(t, nan=now)) * 1e9
    with np.errstate(divide="ignore"):
        return np.where(age_ns > 0, np.floor(np.log2(np.maximum(age_ns, 1.0))), -1).astype(np.int64)


def deletion_order(sim, pods: np.ndarray, ready_at: np.ndarray | None = None) -> np.ndarray:
    """Positions into `pods` (one service's created replicas, one pod each) in the order a
    ReplicaSet deletes them; `ready_at`: when each job became a ready replica (nan: not ready;
    None: `sim.job_ready_at`, a view that carries it)."""
    status, node = sim.pod_status[pods], sim.pod_node[pods]
    jobs = sim.w.job[pods]
    assigned = np.isin(status, (BOUND, RUNNING))
    running = status == RUNNING
    ready_at = (sim.job_ready_at if ready_at is None else ready_at)[jobs]
    ready = ~np.isnan(ready_at)
    _, where, count = np.unique(np.where(assigned, node, -1), return_inverse=True, return_counts=True)
    rank = count[where.ravel()]
    ready_age = np.where(ready, log2_age(sim.now, ready_at), 0)
    created_age = log2_age(sim.now, sim.w.job_submit[jobs])
    return np.lexsort((-jobs, created_age, ready_age, -rank, ready, running, assigned))
