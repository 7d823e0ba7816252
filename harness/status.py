"""The codes every layer shares: a pod's status, a node slot's status, and why a pod waits.

They sit below everything else (no imports from the package), so the state, the scheduler, the
loops and the metrics name the same codes without importing each other.
"""

from __future__ import annotations

from enum import IntEnum

#: a pod's status during a replay (`Simulation.pod_status`), and its name in the metrics
NOT_ARRIVED, PENDING, BOUND, RUNNING, DONE, REFUSED = range(6)
POD_STATUS = ("not_arrived", "pending", "bound_waiting", "running", "done", "refused")

#: a node slot's status (`ClusterState.status`): no node, a node booting, a node ready
ABSENT, BOOTING, READY = 0, 1, 2


class PendingReason(IntEnum):
    """Why a pod is not running, as decided at its last scheduling attempt."""

    SHORTAGE = 0  # no node, ready or booting, has room for it
    TOPOLOGY = 1  # a ready node has room if its topology claims were ignored
    FRAGMENTATION = 2  # a ready node has the free GPU milli in total, but split across devices
    GANG_WAIT = 3  # bound, waiting for the rest of its gang
    BOOTING = 4  # a booting node has room for it (or it is planned onto one)
    NOT_ADMITTED = 5  # its job waits for admission by a queue manager (Kueue): not yet the scheduler's
    JOB_BACKOFF = 6  # deleted (evicted), its Job controller waits out the pod-failure backoff before creating it again


REASON_NAMES = [r.name.lower() for r in PendingReason]


class Event(IntEnum):
    """What happened to a pod, a job or a node: one row of the decision trace (`Hooks.event`,
    harness/decisions.py)."""

    ARRIVED = 0  # a job's pods reached the cluster
    REFUSED = 1  # no node type can ever hold the job: it is not waited on
    QUEUED = 2  # the job's pending pods reached the scheduler's queue (past any admission layer)
    REASON = 3  # a pod's pending reason changed (detail: the new reason)
    BOUND = 4  # a pod was bound to a node (detail: its GPUs, and `milli=M` of each for a share)
    STARTED = 5  # a bound pod runs
    PREEMPTED = 6  # a pod is evicted (preemption, consolidation): it restarts from scratch
    RELEASED = 7  # a pod left its node back to pending (gang timeout, a booting node given up, evicted)
    FINISHED = 8
    WITHDRAWN = 9  # a replica deleted before it finished
    SCALE_UP = 10  # a loop asked a pool for nodes (detail: pool, asked, granted)
    NODE_REQUESTED = 11
    NODE_READY = 12
    NODE_REMOVED = 13
    OPTION = 14  # a scale-up option an autoscaler weighed (detail: pool, nodes, pods helped, price, waste; chosen)
    BACKOFF = 15  # a pool backed off: the provider granted less than asked
    SCALE_DOWN = 16  # an autoscaler removes a node it found unneeded (detail: empty or drained, for how long)
    UNREMOVABLE = 17  # a node found unneeded whose pods fit nowhere else: kept, rechecked later
    UNSCHEDULABLE = 18  # a pod found no node in a cycle (detail: nodes turned away by each rule, as FitError)


EVENT_NAMES = [e.name.lower() for e in Event]
