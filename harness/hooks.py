"""`Hooks`: where extensions attach to a simulation (the services' replicas, an admission gate).

Each hook is a list of handlers, called in the order they attached; the simulation calls them
at the named transitions of a job or pod, and knows nothing of what they do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Hooks:
    #: a job arrives, its pods pending: a handler returning True holds it (an admission gate)
    arrival: list[Callable[[int], bool]] = field(default_factory=list)
    #: a job's pod left its node back to pending (unbound, preempted, its node given up)
    unbound: list[Callable[[int], None]] = field(default_factory=list)
    #: a pod that never finishes by itself started running (a service's replica)
    endless: list[Callable[[int], None]] = field(default_factory=list)
    #: a pod was bound to a node (pod, node): its devices are `Simulation.pod_gpus[pod]`
    bound: list[Callable[[int, int], None]] = field(default_factory=list)
    #: a bound pod started running on its node (pod, node): bound as upstream's API sees it,
    #: its gang's wait in Permit over and its node ready
    started: list[Callable[[int, int], None]] = field(default_factory=list)
    #: a pod left its node, whatever the reason (finished, unbound, preempted, withdrawn)
    left: list[Callable[[int], None]] = field(default_factory=list)
    #: a job is withdrawn before it finished (a deleted replica)
    withdrawn: list[Callable[[int], None]] = field(default_factory=list)
    #: anything the decision trace records: (harness.status.Event, pod, job, node, detail), -1
    #: where none; the simulation builds a detail only when a handler listens
    event: list[Callable[[int, int, int, int, str], None]] = field(default_factory=list)

    def emit(self, kind: int, pod: int = -1, job: int = -1, node: int = -1, detail: str = "") -> None:
        for handler in self.event:
            handler(kind, pod, job, node, detail)
