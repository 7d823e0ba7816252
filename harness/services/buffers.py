"""Today's workarounds for cold capacity, per service: overprovisioning placeholder pods
(`buffer=overprovisioning`) and Cluster Autoscaler's CapacityBuffer (`buffer=capacity_buffer`).

Cluster Autoscaler's FAQ ("How can I configure overprovisioning with Cluster Autoscaler?",
kubernetes/autoscaler cluster-autoscaler/FAQ.md): a Deployment of pause pods with a
PriorityClass below every workload's (-1 there) holds room; when a real pod needs it, the
scheduler's DefaultPreemption evicts a pause pod, the real pod takes its place, the Deployment
recreates the pause pod, which is pending, and the autoscaler buys a node for it. Pods whose
priority is below CA's --expendable-pods-priority-cutoff (-10) neither trigger a scale-up nor
keep a node from scale-down (the FAQ, "How does Cluster Autoscaler work with Pod Priority and
Preemption?"): a placeholder below it would hold nothing the autoscaler buys, so it is refused.

Here each service gets `placeholders` pause pods of its replica's shape (job ids
`<service>/pause-<k>`), so one preempted placeholder frees exactly the room one replica needs
(a pause pod of another shape may free room a replica cannot use, or leave it short). They
arrive at time 0, have no run time (they run until the end), the service's queue and the
buffer's priority. A preempted placeholder is pending again at once (`Simulation.evict`
requeues it, as the Deployment's new pod): the same pod stands for the one the ReplicaSet
recreates. They are no work: the GPUs they hold count idle (`buffer`), their preemptions are
counted apart and lose nothing, and they are in neither jobs.parquet nor the job metrics.
In a trace with pods beside its services, DefaultPreemption acts as upstream's: any pod of a
higher priority than the placeholders' may preempt them, one at or below it may not, and a
pending placeholder may itself preempt pods of a lower priority still (traces carry no
preemptionPolicy: Never).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.errors import ConfigError
from harness.services.trace import MAX_REPLICAS
from harness.settings import check, integer, number
from harness.view import Loop, WithAutoscaler


@runtime_checkable
class BufferReader(Protocol):
    """An autoscaler that reads a CapacityBuffer: its fake pods join every scale-up (the
    Cluster-Autoscaler-like one)."""

    def keep_buffer(self, buffer: CapacityBuffer) -> None: ...


class Overprovisioning:
    """Per service, `placeholders` pause pods of the replica's shape at PriorityClass `priority`."""

    SETTINGS = {
        "placeholders": integer("pause pods per service, each of its replica's shape (the Deployment's "
                                "spec.replicas)", ge=1, le=MAX_REPLICAS),
        "priority": integer("the pause pods' PriorityClass value: below every service's, and not below Cluster "
                            "Autoscaler's --expendable-pods-priority-cutoff (-10), under which no node is bought "
                            "for them", ge=-10, le=2**31 - 1),
    }

    def __init__(self, placeholders: int = 1, priority: int = -1):
        check(self, "buffer", placeholders=placeholders, priority=priority)
        self.placeholders = int(placeholders)
        self.priority = int(priority)

    def fit(self, loop: Loop, services: pa.Table) -> None:
        """Refuse, naming the key, a loop that cannot have placeholders or services they would not
        yield to: the scheduler must preempt (DefaultPreemption) and no admission layer may sit
        in front (Kueue would admit pause pods as workloads); every replica must outrank them."""
        scheduler = getattr(loop, "scheduler", None)  # the separate loops' (none in front of Kueue, nor merged)
        if scheduler is None:
            raise ConfigError("buffer", f"overprovisioning needs the separate loops without Kueue (loop "
                                        f"'{loop.name}'): placeholders are preempted by kube-scheduler's "
                                        "DefaultPreemption")
        if not scheduler.preempts:
            raise ConfigError("loop.scheduler.post_filter", f"loop '{loop.name}' does not preempt: overprovisioning "
                                                            "needs loop/scheduler/post_filter=default_preemption")
        lowest = int(pc.min(services.column("priority")).as_py())
        if self.priority >= lowest:
            raise ConfigError("buffer.priority", f"= {self.priority}: must be below every service's priority "
                                                 f"(lowest {lowest}), or no replica could preempt a placeholder")

    def table(self, services: pa.Table, slots: pa.Table) -> pa.Table:
        """The placeholders as pods of the trace schema: copies of each service's first replica
        slot (`slots`: `harness.services.workload.slot_table`, service after service)."""
        count = services.column("max_replicas").to_numpy(zero_copy_only=False).astype(np.int64)
        first = np.r_[0, np.cumsum(count)[:-1]]  # each service's slot 0
        names = services.column("service").to_pylist()
        ids = pa.array([f"{s}/pause-{k}" for s in names for k in range(self.placeholders)])
        t = slots.take(pa.array(np.repeat(first, self.placeholders)))
        n = t.num_rows
        for name, values in (("pod_id", ids), ("job_id", ids), ("submit_s", pa.array(np.zeros(n))),
                             ("priority", pa.array(np.full(n, self.priority, np.int32)))):
            t = t.set_column(t.schema.get_field_index(name), name, values)
        return t.cast(slots.schema)


class CapacityBuffer:
    """Cluster Autoscaler's CapacityBuffer (autoscaling.x-k8s.io), one per service, its
    scalableRef the service's Deployment: room for `pods` more replicas kept free.

    After kubernetes/autoscaler cluster-autoscaler: the buffer controller's translator turns a
    buffer into a pod template and a count (capacitybuffer/translators/replicas.go
    getBufferNumberOfPods: `replicas` at least, `percentage` of the scalable object's replicas
    if larger, both capped by what `limits` hold, here `limit_gpus`); the pod list processor
    (processors/capacitybuffer/pod_list_processor.go) makes that many fake pods and appends
    them to the unschedulable pods, ahead of the default processors (FilterOutSchedulable), at
    every scale-up: fake pods that fit existing or upcoming capacity are dropped, the rest
    make the autoscaler buy nodes. The scheduler never sees them: a real pod takes the room,
    the next scan finds the fake pods without it and buys again. The room is free, so its
    GPUs are `unallocated` idle. Scale-down keeps the nodes the fake pods would occupy (as the
    Karpenter design's consolidation protection; the CA code read has no scale-down hook:
    without one the autoscaler would remove the empty node it bought and buy it back).
    """

    SETTINGS = {
        "replicas": integer("fake pods of the service's replica shape the buffer keeps room for, at least "
                            "(spec.replicas; null: none)", ge=0, le=MAX_REPLICAS, null=True),
        "percentage": integer("... or this percent of the service's replicas now, if more (spec.percentage, "
                              "of its scalableRef; null: none)", ge=0, le=10_000, null=True),
        "limit_gpus": number("at most this many GPUs of fake pods (spec.limits of nvidia.com/gpu; null: no limit)",
                             ge=0, null=True),
    }

    def __init__(self, replicas: int | None = 1, percentage: int | None = None, limit_gpus: float | None = None):
        check(self, "buffer", replicas=replicas, percentage=percentage, limit_gpus=limit_gpus)
        if replicas is None and percentage is None and limit_gpus is None:
            raise ConfigError("buffer", "replicas, percentage and limit_gpus are all null: a CapacityBuffer needs one "
                                        "(upstream: 'replicas, percentage and limits are not defined')")
        self.replicas, self.percentage, self.limit_gpus = replicas, percentage, limit_gpus

    def fit(self, loop: Loop, services: pa.Table) -> None:
        """Only an autoscaler that reads CapacityBuffers (a `BufferReader`: Cluster Autoscaler's)
        may have one: refused elsewhere, naming the key."""
        autoscaler = loop.autoscaler if isinstance(loop, WithAutoscaler) else None  # none behind Kueue, nor merged
        if not isinstance(autoscaler, BufferReader):
            raise ConfigError("buffer", f"a CapacityBuffer is read by the Cluster-Autoscaler-like autoscaler of the "
                                        f"separate loops (without Kueue), not by loop '{loop.name}'")
        autoscaler.keep_buffer(self)

    def pods(self, scalable: np.ndarray, gpus_per_replica: np.ndarray) -> np.ndarray:
        """Fake pods per service (getBufferNumberOfPods) from its replicas now (the Deployment's
        spec.replicas): max(replicas, percentage x replicas // 100), capped by limit_gpus //
        a replica's GPUs (a replica without GPUs: the limit names none of its requests, none)."""
        n = np.full(len(scalable), -1, np.int64)
        if self.replicas is not None:
            n[:] = self.replicas
        if self.percentage is not None:
            n = np.maximum(n, self.percentage * scalable // 100)
        if self.limit_gpus is not None:
            with np.errstate(divide="ignore"):
                cap = np.where(gpus_per_replica > 0, np.floor(self.limit_gpus / gpus_per_replica), 0)
            n = np.where(n >= 0, np.minimum(n, cap), cap)
        return n.astype(np.int64)

    def table(self, services: pa.Table, slots: pa.Table) -> None:
        """No pod of the trace: its fake pods live in the autoscaler alone."""
        return None


#: what `buffer=` builds
Buffer = Overprovisioning | CapacityBuffer
