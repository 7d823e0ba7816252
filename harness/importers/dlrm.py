"""Alibaba disaggregated DLRM serving trace (v2025) to the canonical trace.

One row per service instance, `role` CN (CPU node: embedding/feature serving, no GPU) or
HN (heterogeneous node: GPU inference). Mapping:
- each instance is one pod of its own (services are not gangs): job id `instance_sn`, pod id
  `<instance_sn>-0`; instances of one `app_name` form a replica group, which becomes the
  queue/tenant;
- requests, not limits: `cpu_request` cores, `memory_request` GB (read as GiB),
  `gpu_request` GPUs (a value below 1 is a share of one GPU); RDMA bandwidth, disk and
  `max_instance_per_node` (a spread constraint) are not modelled;
- times are seconds from the trace start and stay so (`time_origin` is the trace start, not
  rebased). An instance with no `creation_time` already existed when the window opened: it
  is submitted at 0 and runs from 0. The duration is the time it ran, `deletion_time -
  scheduled_time`; a missing `deletion_time` means it was still running at the window's
  end: it runs to the end of the replay;
- any GPU model, priority 0, no topology claims.
Dropped and counted: zero duration (deleted when scheduled), deletion before scheduling.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from harness.importers.common import ImportResult, Tally, concat, csv_batches, float_np, job_rows_to_pods, require
from harness.trace import TraceMeta

COLUMNS = ["instance_sn", "role", "app_name", "cpu_request", "gpu_request", "memory_request",
           "creation_time", "scheduled_time", "deletion_time"]
ROLES = ("CN", "HN")
LICENCE = "Alibaba clusterdata terms (research use)"


def read_dlrm(path: str | os.PathLike) -> ImportResult:
    file = str(path)
    tally = Tally()
    tables = []
    for row0, b in csv_batches(path, COLUMNS, desc=f"dlrm {Path(path).name}"):
        role = pc.utf8_trim_whitespace(b.column("role")).to_numpy(zero_copy_only=False)
        require(role, ~np.isin(role, ROLES), file, "role", row0, f"must be one of {', '.join(ROLES)}")
        created = float_np(b.column("creation_time"), file, "creation_time", row0)
        scheduled = float_np(b.column("scheduled_time"), file, "scheduled_time", row0)
        deleted = float_np(b.column("deletion_time"), file, "deletion_time", row0)
        table = job_rows_to_pods(
            tally, file, row0,
            job_id=pc.utf8_trim_whitespace(b.column("instance_sn")),
            submit=np.nan_to_num(created, nan=0.0),
            duration=deleted - np.where(np.isnan(scheduled), np.nan_to_num(created, nan=0.0), scheduled),
            nodes=np.ones(b.num_rows), gpus_per_pod=float_np(b.column("gpu_request"), file, "gpu_request", row0),
            cpu_per_pod=float_np(b.column("cpu_request"), file, "cpu_request", row0),
            mem_per_pod_mib=float_np(b.column("memory_request"), file, "memory_request", row0) * 1024,
            queue=b.column("app_name"))
        if table is not None:
            tables.append(table)
    meta = TraceMeta(source=f"Alibaba disaggregated DLRM serving v2025 {Path(path).name}", licence=LICENCE,
                     time_origin="trace start (seconds as published)",
                     description="one pod per serving instance; see harness/importers/dlrm.py")
    return tally.result(concat(tables, file), meta, "instances")
