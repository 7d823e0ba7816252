"""Microsoft Philly (ATC'19) `cluster_job_log` (JSON) and `cluster_machine_list` (CSV).

The job log is one JSON array of jobs, 6.6 GB uncompressed, so it is streamed: chunks of
bytes are decoded and each job object is parsed with `json.JSONDecoder.raw_decode` as soon
as it is complete; memory stays bounded by the chunk size plus the output columns.

Mapping, one job at a time:
- the attempt that is replayed is the last one that started (earlier attempts failed and
  were retried; their time is not replayed); its `detail` lists the machines it ran on: a
  gang of one pod per machine, pod ids `<jobid>-<rank>`, each with `len(gpus)` GPUs of that
  machine (members may differ);
- Philly publishes no CPU or memory: each pod requests `CPU_PER_GPU_MILLI` cores per GPU
  (one GPU's worth for a machine listed with none) and `MEM_PER_CPU_MIB` per core; machines
  get the same per GPU, so CPU and memory never bind before GPUs;
- `submitted_time`, `start_time`, `end_time` are US Pacific local time
  ("YYYY-MM-DD HH:MM:SS", daylight saving applies: converted with America/Los_Angeles, the
  earlier instant in the repeated fall-back hour, except an end that would then precede its
  start, which takes the later one); the job is submitted at `submitted_time`
  and runs `end_time - start_time` of the replayed attempt; a null `end_time` (the job was
  still running when the log ends) runs to the end of the replay;
- `vc` is the queue/tenant; `status`, `user` are not used; any GPU model, priority 0.
Dropped and counted: jobs without attempts, without a started attempt, whose replayed
attempt lists no machines, or that end before they start.

`cluster_machine_list` (`machineId, number of GPUs, single GPU mem`): the GPU model is named
by its memory (`philly-24gb`); each machine has `CPU_PER_GPU_MILLI` cores and
`MEM_PER_CPU_MIB` per core per GPU; one fixed-size pool per shape.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.errors import TraceError
from harness.importers.common import (
    MEM_PER_CPU_MIB,
    ImportResult,
    Tally,
    epoch_seconds,
    expand_gangs,
    float_np,
    progress_bar,
    read_csv,
    rebase,
    require,
    static_cluster,
)

TZ = "America/Los_Angeles"
CPU_PER_GPU_MILLI = 4000
MACHINE_COLUMNS = ["machineId", "number of GPUs", "single GPU mem"]
CHUNK_BYTES = 1 << 20
#: A job larger than this is malformed JSON rather than a job still being read.
MAX_JOB_CHARS = 64 << 20
LICENCE = "CC-BY-4.0"
_SPACE = " \t\r\n"


def iter_json_array(path: str | os.PathLike) -> Iterator[tuple[int, object]]:
    """Yield (index, element) of a top-level JSON array without loading the file."""
    file = str(path)
    if not os.path.exists(file):
        raise TraceError(file, "file does not exist")
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    bar = progress_bar(path, f"philly {Path(path).name}")
    buf, pos, eof, index = "", 0, False, 0
    with open(path, "rb") as f:
        def more() -> bool:
            nonlocal buf, pos, eof
            if eof:
                return False
            raw = f.read(CHUNK_BYTES)
            bar.update(len(raw))
            eof = not raw
            buf, pos = buf[pos:] + utf8.decode(raw, final=eof), 0
            return not eof

        def next_char() -> str:
            nonlocal pos
            while True:
                while pos < len(buf) and buf[pos] in _SPACE:
                    pos += 1
                if pos < len(buf) or not more():
                    return buf[pos] if pos < len(buf) else ""

        try:
            if next_char() != "[":
                raise TraceError(file, "a Philly job log is one JSON array: expected '['", row=None)
            pos += 1
            if next_char() == "]":
                return
            while True:
                try:
                    item, end = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError as exc:
                    if len(buf) - pos < MAX_JOB_CHARS and more():
                        continue
                    raise TraceError(file, f"malformed JSON ({exc.msg})", row=index) from None
                pos = end
                yield index, item
                index += 1
                c = next_char()
                if c == "]":
                    return
                if c != ",":
                    raise TraceError(file, f"malformed JSON (expected ',' or ']' after job, got {c!r})", row=index)
                pos += 1
                next_char()
        except UnicodeDecodeError as exc:
            raise TraceError(file, f"not UTF-8 text ({exc.reason} at byte {exc.start} of a chunk)", row=index) from None
        finally:
            bar.close()


def _job_fields(job: object, file: str, row: int) -> tuple[dict, str, str, str]:
    """The job checked to be an object, with its id, submit time and queue."""
    if not isinstance(job, dict):
        raise TraceError(file, "each job must be a JSON object", row=row)
    for key in ("jobid", "submitted_time"):
        if not isinstance(job.get(key), str) or not job[key]:
            raise TraceError(file, "must be a non-empty string", column=key, row=row)
    attempts = job.get("attempts")
    if attempts is not None and not isinstance(attempts, list):
        raise TraceError(file, "must be a list of attempts or null", column="attempts", row=row)
    return job, job["jobid"], job["submitted_time"], str(job.get("vc") or "default")


def read_philly(paths: Sequence[str | os.PathLike]) -> ImportResult:
    tally = Tally()
    job_id, vc, submitted, started, ended, rows, n_pods = [], [], [], [], [], [], []
    gpus: list[int] = []
    files = []
    for path in paths:
        file = str(path)
        for row, job in iter_json_array(path):
            tally.rows_read += 1
            job, jid, sub, queue = _job_fields(job, file, row)
            attempts = job.get("attempts") or []
            if not attempts:
                tally.dropped["no attempts (never ran)"] += 1
                continue
            ran = [a for a in attempts if isinstance(a, dict) and a.get("start_time")]
            if not ran:
                tally.dropped["no attempt started"] += 1
                continue
            last = ran[-1]
            machines = last.get("detail") or []
            if not machines:
                tally.dropped["replayed attempt lists no machines"] += 1
                continue
            if not all(isinstance(m, dict) and isinstance(m.get("gpus", []), list) for m in machines):
                raise TraceError(file, "each machine must be an object with a list of gpus", column="attempts", row=row)
            job_id.append(jid)
            vc.append(queue)
            submitted.append(sub)
            started.append(last["start_time"])
            ended.append(last.get("end_time"))
            rows.append(row)
            files.append(file)
            n_pods.append(len(machines))
            gpus.extend(len(m.get("gpus") or []) for m in machines)
    where = ", ".join(map(str, paths))
    if not job_id:
        raise TraceError(where, "no jobs left to import")
    rows_np = np.asarray(rows)

    def times(values: list, column: str, ambiguous: str = "earliest") -> np.ndarray:
        try:
            return epoch_seconds(pa.array(values, pa.string()), where, column, 0, tz=TZ, ambiguous=ambiguous)
        except TraceError as exc:  # name the job's own file and row
            assert exc.row is not None  # epoch_seconds names the row of every value it refuses
            raise TraceError(files[exc.row], exc.rule, column=column, row=int(rows_np[exc.row])) from None

    submit, start, end = times(submitted, "submitted_time"), times(started, "start_time"), times(ended, "end_time")
    duration = end - start
    # an end in the repeated fall-back hour that seems to precede its start is its second pass
    late = times(ended, "end_time", "latest") - start
    duration = np.where((duration < 0) & (late >= 0), late, duration)
    keep = np.ones(len(job_id), bool)
    keep = tally.drop(keep, duration < 0, "ends before it starts")
    tally.note(keep & np.isnan(duration), "attempt with null end_time: runs to the end of the replay")
    n = np.asarray(n_pods)
    pod_gpus = np.asarray(gpus, np.int64)
    pod_keep = np.repeat(keep, n)
    pod_gpus = pod_gpus[pod_keep]
    cpu = np.maximum(pod_gpus, 1) * CPU_PER_GPU_MILLI
    sel = pa.array(keep)
    table = expand_gangs(
        {"job_id": pa.array(job_id, pa.string()).filter(sel), "submit_s": submit[keep],
         "duration_s": pa.array(duration[keep], from_pandas=True), "queue": pa.array(vc, pa.string()).filter(sel)},
        n[keep],
        pods={"gpu_count": pod_gpus.astype(np.int32), "gpu_milli": np.where(pod_gpus > 0, 1000, 0).astype(np.int32),
              "cpu_milli": cpu, "memory_mib": cpu * MEM_PER_CPU_MIB // 1000})
    table, meta = rebase(table, f"Microsoft Philly {', '.join(Path(p).name for p in paths)}", LICENCE,
                         "one pod per machine of the last started attempt; see harness/importers/philly.py")
    return tally.result(table, meta, "jobs")


def read_philly_machines(path: str | os.PathLike) -> dict:
    file = str(path)
    t = read_csv(path, MACHINE_COLUMNS, names=MACHINE_COLUMNS)
    gpus = float_np(t.column("number of GPUs"), file, "number of GPUs", 0)
    require(gpus, ~((gpus >= 1) & (gpus <= 64)) | (gpus != np.floor(gpus)), file, "number of GPUs", 0,
            "must be a whole number in [1, 64]")
    mem = pc.utf8_upper(pc.utf8_trim_whitespace(pc.fill_null(t.column("single GPU mem"), "")))
    mem = mem.to_numpy(zero_copy_only=False)
    require(mem, ~pc.match_substring_regex(pa.array(mem), r"^\d+(\.\d+)?\s*GB$").to_numpy(zero_copy_only=False),
            file, "single GPU mem", 0, "must look like '24GB'")
    models = np.char.add("philly-", np.char.lower(np.char.replace(mem.astype(str), " ", "")))
    cpu = gpus * CPU_PER_GPU_MILLI
    return static_cluster({"gpu_model": models, "gpus": gpus, "cpu_milli": cpu,
                           "memory_mib": cpu * MEM_PER_CPU_MIB // 1000}, name="philly")
