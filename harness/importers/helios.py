"""SenseTime Helios (SC'21) `cluster_log.csv` to the canonical trace.

Mapping, one CSV row per job:
- a job on `node_num` machines is a gang of `node_num` pods named `<job_id>-<rank>`;
  each pod asks for `gpu_num / node_num` GPUs (rounded up when it does not divide, counted
  as an adjustment) and `cpu_num / node_num` cores; Helios publishes no memory, so each pod
  gets `MEM_PER_CPU_MIB` per core (see `harness.importers.common`);
- `submit_time` is local time in Asia/Shanghai (UTC+8, no daylight saving); times are
  seconds from the first submission, and the trace's `time_origin` is that instant in UTC;
- the duration is the `duration` column (run time in seconds, the end minus the start of
  the run); the original queueing delay (`queue` column) is not replayed, the loops make
  their own; a missing duration means the job runs to the end of the replay;
- `vc` (virtual cluster) is the queue/tenant; `user` and `state` are not used;
- any GPU model, priority 0, no topology claims.
Dropped and counted: rows without a submit time, with `node_num` missing or < 1, or with
zero duration (cancelled before it ran). The 3.4M-row log is streamed in CSV batches.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.importers.common import ImportResult, Tally, concat, node_job_log, rebase

COLUMNS = ["job_id", "vc", "gpu_num", "cpu_num", "node_num", "submit_time", "duration"]
TZ = "Asia/Shanghai"
LICENCE = "CC-BY-4.0"


def read_helios(path: str | os.PathLike) -> ImportResult:
    file = str(path)
    tally = Tally()
    tables = node_job_log(path, COLUMNS, tally, f"helios {Path(path).name}", queue="vc", tz=TZ)
    table, meta = rebase(concat(tables, file), f"SenseTime Helios {Path(path).name}", LICENCE,
                         "one pod per machine of each job; see harness/importers/helios.py")
    return tally.result(table, meta, "jobs")
