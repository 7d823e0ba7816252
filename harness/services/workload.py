"""A trace's services compiled into the workload: replica slots the loops schedule as pods.

A service with max_replicas R gets R single-pod jobs, its replica slots (job and pod ids
`<service>/<k>`), compiled with the trace's pods through the same path (`compile_workload`:
shapes, never_fits and pools_fit hold for them unchanged). A slot has the service's priority
and queue, no run time (a replica runs until it is deleted) and no arrival in the trace: its
submit time is inf until the replica autoscaler creates it (`ReplicaSets.create`
sets it to the creation instant). The demand series stay the simulation's: loops get the
workload with them sealed (`Services.sealed`).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pyarrow as pa

from harness.cluster import Cluster
from harness.errors import TraceError
from harness.trace import SCHEMA
from harness.workload import Services, Workload, compile_workload


class Buffer(Protocol):
    """Room kept warm for the services' replicas (harness/services/buffers.py): what the
    compiled workload needs of it is its placeholder pods, if it has any."""

    def table(self, services: pa.Table, slots: pa.Table) -> pa.Table | None:
        """Its placeholders as pods of the trace schema (None: it has no pods)."""
        ...


def slot_table(services: pa.Table) -> pa.Table:
    """The replica slots of a services table as pods of the trace schema (submit inf)."""
    col = lambda name: services.column(name).to_pylist()  # noqa: E731
    count = np.asarray(services.column("max_replicas").to_numpy(zero_copy_only=False), np.int64)
    rep = lambda name: [v for v, c in zip(col(name), count.tolist(), strict=True) for _ in range(c)]  # noqa: E731
    ids = [f"{s}/{k}" for s, c in zip(col("service"), count.tolist(), strict=True) for k in range(c)]
    n = len(ids)
    data = {
        "pod_id": ids, "job_id": ids, "min_member": [1] * n, "submit_s": [np.inf] * n, "duration_s": [None] * n,
        **{c: rep(c) for c in ("cpu_milli", "memory_mib", "gpu_count", "gpu_milli", "gpu_partition", "gpu_models",
                               "gpus_same_nvlink", "priority", "queue")},
        "gpus_same_numa": [False] * n, "nic_per_gpu": [False] * n, "gang_locality": ["none"] * n,
        "claim": [None] * n,
    }
    return pa.table({f.name: data[f.name] for f in SCHEMA}, schema=SCHEMA.remove_metadata())


def compile_services(trace: pa.Table, services: pa.Table, demand: pa.Table, cluster: Cluster,
                     trace_file: str = "<trace>", unit: str = "", buffer: Buffer | None = None) -> Workload:
    """The trace's pods and its services' replica slots (and a buffer's placeholders) as one
    workload (tables validated by harness/trace.py and harness/services/trace.py)."""
    slots = slot_table(services)
    pause = None if buffer is None else buffer.table(services, slots)  # a CapacityBuffer has no pods
    extra = slots if pause is None else pa.concat_tables([slots, pause])
    clash = np.intersect1d(np.asarray(trace.column("job_id").to_pylist(), object),
                           np.asarray(extra.column("job_id").to_pylist(), object))
    if len(clash):
        raise TraceError(trace_file, f"job id '{clash[0]}' is also a replica slot's (<service>/<k>) or a "
                                     "placeholder's (<service>/pause-<k>) of the services beside it: rename the job "
                                     "or the service", column="job_id")
    w = compile_workload(pa.concat_tables([trace.replace_schema_metadata(None).cast(SCHEMA.remove_metadata()),
                                           extra]), cluster, trace_file)
    if pause is not None:
        w.job_placeholder[np.searchsorted(w.job_id, pause.column("job_id").to_numpy(zero_copy_only=False))] = True
    names = np.asarray(services.column("service").to_pylist(), object)
    count = services.column("max_replicas").to_numpy(zero_copy_only=False).astype(np.int64)
    slot_job = np.searchsorted(w.job_id, slots.column("job_id").to_numpy(zero_copy_only=False)).astype(np.int64)
    w.job_service[slot_job] = np.repeat(np.arange(len(names), dtype=np.int32), count)
    first = trace.num_rows + np.r_[0, np.cumsum(count)[:-1]]  # each service's slot 0, a pod after the trace's
    d_name = np.asarray(demand.column("service").to_pylist(), object)
    by_name = np.argsort(names)
    d_service = by_name[np.searchsorted(names, d_name, sorter=by_name)]
    order = np.lexsort((np.arange(len(d_name)), d_service))  # by service, file (time) order within one
    num = lambda t, c: t.column(c).to_numpy(zero_copy_only=False).astype(np.float64)  # noqa: E731
    w.services = Services(
        name=names, capacity=num(services, "capacity_per_replica"), cold_start=num(services, "cold_start_s"),
        min_replicas=services.column("min_replicas").to_numpy(zero_copy_only=False).astype(np.int64),
        max_replicas=count,
        gpus_per_replica=w.gpu_milli_total[first] / 1000.0,
        slot_bounds=np.r_[0, np.cumsum(count)].astype(np.int64), slot_job=slot_job,
        demand_bounds=np.r_[0, np.cumsum(np.bincount(d_service, minlength=len(names)))].astype(np.int64),
        demand_start=num(demand, "start_s")[order], demand_value=num(demand, "demand")[order], unit=unit)
    return w


def refuse_unplaceable(w: Workload, services: pa.Table, cluster: Cluster, services_file: str) -> None:
    """A TraceError naming the first service whose replica no node type of the cluster can
    hold (its shape, how many more, the node types there are): each of its replicas would be
    refused as it is created and its demand left unserved to the horizon."""
    svc = w.services
    if svc is None:
        return
    first_pod = w.pods_of(svc.slot_job[svc.slot_bounds[:-1]])  # each service's slot 0 (one pod a slot)
    never = np.flatnonzero(w.never_fits[first_pod])
    if not len(never):
        return
    names = [str(svc.name[s]) for s in never.tolist()]
    more = ("" if len(names) == 1 else f" (1 more service: '{names[1]}')" if len(names) == 2
            else f" ({len(names) - 1} more services, first '{names[1]}')")
    types = ", ".join(f"{t.name} ({t.gpus} x {t.gpu_model})" if t.gpus else t.name for t in cluster.node_types)
    raise TraceError(services_file, f"no node type of cluster '{cluster.name}' can hold a replica of service "
                                    f"'{names[0]}' ({replica_text(services, int(never[0]))}), so its demand could "
                                    f"never be served{more}; node types: {types}", column="service", row=int(never[0]))


def replica_text(services: pa.Table, i: int) -> str:
    """A service's replica as a user reads it in its services file: GPUs (count, share or
    partition, models), then cpu and memory."""
    row = services.slice(i, 1).to_pylist()[0]
    g = int(row["gpu_count"])
    parts = []
    if g:
        unit = (f"GPU partition{'' if g == 1 else 's'} {row['gpu_partition']}" if row.get("gpu_partition")
                else f"GPU share{'' if g == 1 else 's'} of {row['gpu_milli']} milli" if row["gpu_milli"] < 1000
                else f"GPU{'' if g == 1 else 's'}")
        models = row.get("gpu_models") or []
        parts.append(f"{g} {unit}" + (f" of model {' or '.join(models)}" if models else ""))
    parts += [f"{int(row['cpu_milli']) / 1000:g} cpu", f"{int(row['memory_mib']) / 1024:g} GiB"]
    return ", ".join(parts)
