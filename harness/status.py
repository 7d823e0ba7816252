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


REASON_NAMES = [r.name.lower() for r in PendingReason]
