"""Shanghai AI Lab Acme (NSDI'24) `trace_seren.csv` / `trace_kalos.csv` to the canonical trace.

Mapping, one CSV row per job (the same as Helios, see `harness.importers.helios`):
- a job on `node_num` machines is a gang of `node_num` pods named `<job_id>-<rank>`, each
  with `gpu_num / node_num` GPUs (rounded up, counted) and `cpu_num / node_num` cores;
- memory: Kalos' `mem_per_pod_GB` (per pod; GB read as GiB) when present, else
  `MEM_PER_CPU_MIB` per core; Kalos' `shared_mem_per_pod`, `fail_time` and `stop_time`
  are not used (the run time is the `duration` column either way);
- datetimes carry their UTC offset (`2023-03-01 00:18:22+08:00`) and are converted to UTC;
  times are seconds from the first submission;
- `user` is the queue/tenant (Acme has no virtual clusters); `type` and `state` are not used;
- any GPU model, priority 0, no topology claims; a missing duration runs to the end.
Dropped and counted: no submit time, `node_num` missing or < 1, zero duration.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from harness.importers.common import ImportResult, Tally, concat, csv_batches, epoch_seconds, float_np, \
    job_rows_to_pods, rebase

COLUMNS = ["job_id", "user", "node_num", "gpu_num", "cpu_num", "submit_time", "duration"]
KALOS_MEMORY = "mem_per_pod_GB"
LICENCE = "CC-BY-4.0"


def _header(path: str | os.PathLike) -> list[str]:
    with open(path, "rb") as f:
        return [c.strip().strip('"') for c in f.readline().decode("utf-8", "replace").rstrip("\r\n").split(",")]


def read_acme(path: str | os.PathLike) -> ImportResult:
    file = str(path)
    columns = COLUMNS + ([KALOS_MEMORY] if os.path.exists(path) and KALOS_MEMORY in _header(path) else [])
    tally = Tally()
    tables = []
    for row0, b in csv_batches(path, columns, desc=f"acme {Path(path).name}"):
        nodes = float_np(b.column("node_num"), file, "node_num", row0)
        gpus = float_np(b.column("gpu_num"), file, "gpu_num", row0)
        cpus = float_np(b.column("cpu_num"), file, "cpu_num", row0)
        mem = None
        if KALOS_MEMORY in columns:
            mem = float_np(b.column(KALOS_MEMORY), file, KALOS_MEMORY, row0) * 1024
        with np.errstate(invalid="ignore", divide="ignore"):
            per_pod = gpus / nodes
            tally.note((nodes >= 1) & (np.ceil(per_pod) != per_pod), "gpu_num not divisible by node_num: rounded up")
            table = job_rows_to_pods(
                tally, file, row0,
                job_id=pc.utf8_trim_whitespace(b.column("job_id")),
                submit=epoch_seconds(b.column("submit_time"), file, "submit_time", row0),
                duration=float_np(b.column("duration"), file, "duration", row0),
                nodes=nodes, gpus_per_pod=np.ceil(per_pod), cpu_per_pod=cpus / nodes,
                mem_per_pod_mib=mem, queue=b.column("user"))
        if table is not None:
            tables.append(table)
    name = Path(path).name
    cluster = "Kalos" if "kalos" in name.lower() else "Seren" if "seren" in name.lower() else "Acme"
    table, meta = rebase(concat(tables, file), f"Shanghai AI Lab Acme {cluster} {name}", LICENCE,
                         "one pod per machine of each job; see harness/importers/acme.py")
    return tally.result(table, meta, "jobs")
