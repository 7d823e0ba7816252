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

from harness.importers.common import ImportResult, Tally, concat, node_job_log, rebase

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
    tables = node_job_log(path, columns, tally, f"acme {Path(path).name}", queue="user",
                          memory_gb=KALOS_MEMORY if KALOS_MEMORY in columns else None)
    name = Path(path).name
    cluster = "Kalos" if "kalos" in name.lower() else "Seren" if "seren" in name.lower() else "Acme"
    table, meta = rebase(concat(tables, file), f"Shanghai AI Lab Acme {cluster} {name}", LICENCE,
                         "one pod per machine of each job; see harness/importers/acme.py")
    return tally.result(table, meta, "jobs")
