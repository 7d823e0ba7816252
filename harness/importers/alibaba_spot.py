"""Alibaba GPU spot trace (v2026, ASPLOS'26): `job_info_df.csv` jobs and `node_info_df.csv` nodes.

Jobs, one CSV row per job:
- a job of `worker_num` workers is a gang of `worker_num` pods named `<job_name>-<rank>`;
  `gpu_request` and `cpu_request` are per worker (cores; a GPU request below 1 is a share of
  one GPU); memory is not published: `MEM_PER_CPU_MIB` per core;
- `gpu_model` is the one allowed GPU model (empty = any);
- `submit_time` and `duration` are seconds (from the first job); a missing duration runs to
  the end; times are shifted so the first kept submission is 0;
- `job_type` HP (high priority) gets priority 1, Spot gets 0 (preemption is not modelled);
- `organization` is the queue/tenant.
Dropped and counted: no submit time, `worker_num` missing or < 1, zero duration.

Nodes: `gpu_model, gpu_capacity_num, cpu_num, node_name`; memory is not published, so a
node gets `MEM_PER_CPU_MIB` per core (pods are given the same ratio). Each distinct shape is
a node type with a fixed-size pool (see `harness.importers.common.static_cluster`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.importers.common import (
    MEM_PER_CPU_MIB,
    ImportResult,
    Tally,
    concat,
    csv_batches,
    float_np,
    job_rows_to_pods,
    model_lists,
    read_csv,
    rebase,
    require,
    static_cluster,
)

COLUMNS = ["job_name", "organization", "gpu_model", "cpu_request", "gpu_request", "worker_num",
           "submit_time", "duration", "job_type"]
NODE_COLUMNS = ["gpu_model", "gpu_capacity_num", "cpu_num", "node_name"]
PRIORITY = {"HP": 1, "Spot": 0}
LICENCE = "Alibaba clusterdata terms (research use)"


def read_spot_jobs(path: str | os.PathLike) -> ImportResult:
    file = str(path)
    tally = Tally()
    tables = []
    for row0, b in csv_batches(path, COLUMNS, desc=f"spot {Path(path).name}"):
        kind = pc.utf8_trim_whitespace(b.column("job_type")).to_numpy(zero_copy_only=False)
        known = np.isin(kind, list(PRIORITY))
        require(kind, ~known, file, "job_type", row0, f"must be one of {', '.join(PRIORITY)}")
        gpus = float_np(b.column("gpu_request"), file, "gpu_request", row0)
        table = job_rows_to_pods(
            tally, file, row0,
            job_id=pc.utf8_trim_whitespace(b.column("job_name")),
            submit=float_np(b.column("submit_time"), file, "submit_time", row0),
            duration=float_np(b.column("duration"), file, "duration", row0),
            nodes=float_np(b.column("worker_num"), file, "worker_num", row0), nodes_column="worker_num",
            gpus_per_pod=gpus, cpu_per_pod=float_np(b.column("cpu_request"), file, "cpu_request", row0),
            queue=b.column("organization"), priority=np.where(kind == "HP", PRIORITY["HP"], PRIORITY["Spot"]),
            gpu_models=model_lists(pc.if_else(pa.array(np.nan_to_num(gpus) > 0), b.column("gpu_model"),
                                              pa.scalar(None, pa.string()))))
        if table is not None:
            tables.append(table)
    table, meta = rebase(concat(tables, file), f"Alibaba GPU spot v2026 {Path(path).name}", LICENCE,
                         "one pod per worker; see harness/importers/alibaba_spot.py")
    return tally.result(table, meta, "jobs")


def read_spot_nodes(path: str | os.PathLike) -> dict:
    file = str(path)
    t = read_csv(path, NODE_COLUMNS)
    gpus = float_np(t.column("gpu_capacity_num"), file, "gpu_capacity_num", 0)
    cpus = float_np(t.column("cpu_num"), file, "cpu_num", 0)
    require(gpus, ~((gpus >= 0) & (gpus <= 64)) | (gpus != np.floor(gpus)), file, "gpu_capacity_num", 0,
            "must be a whole number in [0, 64]")
    require(cpus, ~((cpus > 0) & (cpus <= 100_000)), file, "cpu_num", 0, "must be in (0, 100000]")
    models = pc.fill_null(pc.utf8_trim_whitespace(t.column("gpu_model")), "").to_numpy(zero_copy_only=False)
    require(models, (gpus > 0) & (models == ""), file, "gpu_model", 0, "a node with GPUs needs a model")
    return static_cluster({"gpu_model": models, "gpus": gpus, "cpu_milli": cpus * 1000,
                           "memory_mib": cpus * MEM_PER_CPU_MIB}, name=f"alibaba-spot-{Path(path).stem}")
