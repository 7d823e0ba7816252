"""Alibaba PAI GPU trace (v2020, NSDI'22 "MLaaS in the Wild") to the canonical trace.

Sources: `pai_task_table` (required) and `pai_job_table` (optional, gives the user). The
tables are published without a header line (their columns are in the `.header` files); a
header line, if present, is accepted. A file is recognised by `task_table` / `job_table` in
its name, else by its number of columns (10 / 6).

Mapping, one task row (a task of a job: "worker", "ps", ...) at a time:
- the `inst_num` instances of a task run together: a gang of `inst_num` pods with job id
  `<job_name>/<task_name>` and pod ids `<job_name>/<task_name>-<rank>`; tasks of one job are
  separate gangs (they start at different times in the trace);
- per pod: `plan_gpu` is percent of one GPU (50 = a 500-milli share of one GPU, 800 = 8
  GPUs; above 100 a fraction of a GPU is rounded up to a whole one), `plan_cpu` percent of
  a core (600 = 6 cores), `plan_mem` GB (read as GiB; missing: `MEM_PER_CPU_MIB` per core);
- `gpu_type` is the model the task ran on and becomes its one allowed model, except `MISC`
  (a mix of older models) and empty, which allow any model; CPU-only pods allow any model;
- times: the trace has no submit time, so a task is submitted at its `start_time` and lasts
  `end_time - start_time`; a missing `end_time` (still running) runs to the end of the
  replay. Times are seconds with a constant shift (weekday and time of day kept in UTC+8);
  they are rebased so the first kept task starts at 0, and `time_origin` is that shifted
  epoch, not a real date;
- the queue/tenant is the job's `user` from `pai_job_table` (else "default"); priority 0.
Dropped and counted: no `start_time` (never started), `inst_num` missing or < 1, end before
start, zero duration, more than 64 GPUs per instance.

`pai_machine_spec` (`machine, gpu_type, cap_cpu, cap_mem, cap_gpu`; cores, GB, GPUs) becomes
a static cluster, one fixed-size pool per distinct shape; `gpu_type` CPU means no GPUs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.errors import TraceError
from harness.importers.common import (
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
from harness.trace import TraceMeta

TASK_COLUMNS = ["job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                "plan_cpu", "plan_mem", "plan_gpu", "gpu_type"]
JOB_COLUMNS = ["job_name", "inst_id", "user", "status", "start_time", "end_time"]
MACHINE_COLUMNS = ["machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"]
ANY_MODEL = ("MISC", "CPU")
LICENCE = "CC-BY-4.0"


def _kind(path: Path) -> str:
    if "task_table" in path.name:
        return "task"
    if "job_table" in path.name:
        return "job"
    if not path.exists():
        raise TraceError(str(path), "file does not exist")
    with open(path, "rb") as f:
        fields = f.readline().decode("utf-8", "replace").count(",") + 1
    kinds = {len(TASK_COLUMNS): "task", len(JOB_COLUMNS): "job"}
    if fields not in kinds:
        raise TraceError(str(path), f"not a PAI task table ({len(TASK_COLUMNS)} columns) or job table "
                                    f"({len(JOB_COLUMNS)} columns): first line has {fields}")
    return kinds[fields]


def _users(path: Path) -> tuple[pa.Array, pa.Array]:
    t = read_csv(path, ["job_name", "user"], names=JOB_COLUMNS)
    return t.column("job_name").combine_chunks(), t.column("user").combine_chunks()


def read_pai(paths: Sequence[str | os.PathLike]) -> ImportResult:
    by_kind: dict[str, Path] = {}
    for p in map(Path, paths):
        kind = _kind(p)
        if kind in by_kind:
            raise TraceError(str(p), f"a second PAI {kind} table (already have {by_kind[kind]})")
        by_kind[kind] = p
    if "task" not in by_kind:
        raise TraceError(", ".join(map(str, paths)), "the PAI importer needs pai_task_table")
    users = _users(by_kind["job"]) if "job" in by_kind else None
    path = by_kind["task"]
    file = str(path)
    tally = Tally()
    tables = []
    for row0, b in csv_batches(path, TASK_COLUMNS, names=TASK_COLUMNS, desc=f"pai {path.name}"):
        start = float_np(b.column("start_time"), file, "start_time", row0)
        end = float_np(b.column("end_time"), file, "end_time", row0)
        cpu = float_np(b.column("plan_cpu"), file, "plan_cpu", row0) / 100
        gpus = float_np(b.column("plan_gpu"), file, "plan_gpu", row0) / 100
        job = pc.utf8_trim_whitespace(b.column("job_name"))
        queue = None
        if users is not None:
            queue = users[1].take(pc.index_in(job, value_set=users[0]))
        has_gpu = pa.array(np.nan_to_num(gpus) > 0)
        table = job_rows_to_pods(
            tally, file, row0,
            job_id=pc.binary_join_element_wise(job, pc.utf8_trim_whitespace(b.column("task_name")), "/"),
            submit=start, duration=end - start, nodes=float_np(b.column("inst_num"), file, "inst_num", row0),
            nodes_column="inst_num", submit_column="start_time (never started)", gpus_per_pod=gpus, cpu_per_pod=cpu,
            mem_per_pod_mib=float_np(b.column("plan_mem"), file, "plan_mem", row0) * 1024, queue=queue,
            gpu_models=model_lists(pc.if_else(has_gpu, b.column("gpu_type"), pa.scalar(None, pa.string())), ANY_MODEL))
        if table is not None:
            tables.append(table)
    table = concat(tables, file)
    origin = pc.min(table.column("submit_s")).as_py()
    table, meta = rebase(table, f"Alibaba PAI GPU v2020 {path.name}", LICENCE,
                         "one pod per task instance; see harness/importers/pai.py", origin_s=origin)
    meta = TraceMeta(meta.source, meta.licence, f"{origin:.0f} s on the trace's shifted clock", meta.description)
    return tally.result(table, meta, "tasks")


def read_pai_machines(path: str | os.PathLike) -> dict:
    file = str(path)
    t = read_csv(path, MACHINE_COLUMNS, names=MACHINE_COLUMNS)
    gpus = float_np(t.column("cap_gpu"), file, "cap_gpu", 0)
    cpus = float_np(t.column("cap_cpu"), file, "cap_cpu", 0)
    mem = float_np(t.column("cap_mem"), file, "cap_mem", 0)
    require(gpus, ~((gpus >= 0) & (gpus <= 64)) | (gpus != np.floor(gpus)), file, "cap_gpu", 0,
            "must be a whole number in [0, 64]")
    require(cpus, ~((cpus > 0) & (cpus <= 100_000)), file, "cap_cpu", 0, "must be in (0, 100000]")
    require(mem, ~((mem > 0) & (mem <= 1_000_000)), file, "cap_mem", 0, "must be in (0, 1000000] GB")
    models = pc.fill_null(pc.utf8_trim_whitespace(t.column("gpu_type")), "").to_numpy(zero_copy_only=False)
    return static_cluster({"gpu_model": models, "gpus": gpus, "cpu_milli": cpus * 1000, "memory_mib": mem * 1024},
                          name="alibaba-pai-v2020")
