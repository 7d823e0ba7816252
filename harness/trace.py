"""The canonical workload trace: one row per pod, a typed Parquet schema, strict validation.

Every importer writes this schema and every replay reads it, so a trace is validated once,
here, and refused with the file, column, row and rule it breaks. Row numbers count data rows
from 0 in file order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.errors import TraceError
from harness.output import atomic_path

SCHEMA_VERSION = "1"

#: Largest values accepted; anything above is a unit mistake, not a workload.
MAX_TIME_S = 10 * 365 * 86400.0
MAX_CPU_MILLI = 100_000_000
MAX_MEMORY_MIB = 1 << 40
MAX_GPUS_PER_POD = 64

GANG_LOCALITY = ("none", "rack", "block")

SCHEMA = pa.schema(
    [
        pa.field("pod_id", pa.string(), nullable=False),
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("min_member", pa.int32(), nullable=False),
        pa.field("submit_s", pa.float64(), nullable=False),
        pa.field("duration_s", pa.float64(), nullable=True),
        pa.field("cpu_milli", pa.int64(), nullable=False),
        pa.field("memory_mib", pa.int64(), nullable=False),
        pa.field("gpu_count", pa.int32(), nullable=False),
        pa.field("gpu_milli", pa.int32(), nullable=False),
        pa.field("gpu_partition", pa.string(), nullable=True),
        pa.field("gpu_models", pa.list_(pa.string()), nullable=False),
        pa.field("gpus_same_nvlink", pa.bool_(), nullable=False),
        pa.field("gpus_same_numa", pa.bool_(), nullable=False),
        pa.field("nic_per_gpu", pa.bool_(), nullable=False),
        pa.field("gang_locality", pa.string(), nullable=False),
        pa.field("priority", pa.int32(), nullable=False),
        pa.field("queue", pa.string(), nullable=False),
        pa.field("claim", pa.string(), nullable=True),
    ],
    metadata={
        "loopbench.schema_version": SCHEMA_VERSION,
        "loopbench.doc": (
            "one row per pod; times in seconds from time_origin; duration null = runs to the end; "
            "gpu_milli = share of each GPU (1000 = whole), below 1000 only with gpu_count 1; "
            "gpu_partition = MIG-like profile (then gpu_count 1, gpu_milli 0); "
            "gpu_models empty = any model; a job whose min_member > 1 is a gang; a job's pods may "
            "have different submit_s (each arrives at its own; the job arrives with its first)"
        ),
    },
)

#: Columns whose value must be the same for every pod of a job. Not `submit_s`: a job's pods
#: may arrive at different times (a gang that waits at PreEnqueue for its last pod).
GANG_AGREEMENT = ("min_member", "priority", "queue", "gang_locality")

DEFAULTS: dict[str, Any] = {
    "duration_s": None,
    "gpu_partition": None,
    "gpu_models": [],
    "gpus_same_nvlink": False,
    "gpus_same_numa": False,
    "nic_per_gpu": False,
    "gang_locality": "none",
    "priority": 0,
    "queue": "default",
    "min_member": 1,
    "claim": None,
}

#: Columns a file may leave out (written before they existed, or unused): read as null.
#: `claim` names a ResourceClaim template of the cluster's `dra.claims`, which a DRA cluster
#: allocates in place of the row's device columns (null: the claim the columns make).
OPTIONAL = ("claim",)


@dataclass(frozen=True)
class TraceMeta:
    """Key-value metadata stored in the Parquet footer."""

    source: str
    licence: str
    time_origin: str
    description: str = ""

    def to_metadata(self) -> dict[str, str]:
        return {
            "loopbench.schema_version": SCHEMA_VERSION,
            "loopbench.source": self.source,
            "loopbench.licence": self.licence,
            "loopbench.time_origin": self.time_origin,
            "loopbench.description": self.description,
        }

    @classmethod
    def from_metadata(cls, md: dict[str, str]) -> TraceMeta:
        return cls(
            source=md.get("loopbench.source", "unknown"),
            licence=md.get("loopbench.licence", "unknown"),
            time_origin=md.get("loopbench.time_origin", "trace start"),
            description=md.get("loopbench.description", ""),
        )


def table_from_columns(columns: dict, file: str = "<memory>") -> pa.Table:
    """Build a canonical table from column lists, filling optional columns with defaults."""
    n = len(columns["pod_id"])
    data = {}
    for field in SCHEMA:
        if field.name in columns:
            data[field.name] = columns[field.name]
        elif field.name in DEFAULTS:
            data[field.name] = [DEFAULTS[field.name]] * n
        else:
            raise TraceError(file, "required column is missing", column=field.name)
    return pa.table(data, schema=SCHEMA)


def write_trace(table: pa.Table, path: str | os.PathLike, meta: TraceMeta, *, allow_empty: bool = False) -> Path:
    """Validate and write a trace atomically (temp file + rename): no half-written trace.
    `allow_empty`: no pods is valid (a services-only workload writes its services beside)."""
    path = Path(path)
    table = validate_table(table, str(path), allow_empty=allow_empty)
    ours = {k.encode(): v.encode() for k, v in meta.to_metadata().items()}
    table = table.replace_schema_metadata({**(SCHEMA.metadata or {}), **ours})
    for name in OPTIONAL:  # left out when unused: the file reads as it did before the column existed
        if table.column(name).null_count == table.num_rows:
            table = table.drop_columns([name])
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return path


def read_trace(path: str | os.PathLike, *, allow_empty: bool = False) -> tuple[pa.Table, TraceMeta]:
    """Read and validate a canonical trace; refuse it with file, column, row and rule.
    `allow_empty`: a trace without pods is valid (one whose services are read beside it)."""
    file = str(path)
    if not os.path.exists(file):
        raise TraceError(file, "file does not exist")
    try:
        pf = pq.ParquetFile(file)
        table = pf.read()
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise TraceError(file, f"not a readable Parquet file ({one_line(exc)})") from None
    md = loopbench_metadata(table.schema.metadata, file)
    meta = TraceMeta.from_metadata(md)
    version = md.get("loopbench.schema_version", "")
    if version and version != SCHEMA_VERSION:
        raise TraceError(file, f"schema version {version} is not supported (this loopbench reads {SCHEMA_VERSION})")
    return validate_table(table, file, allow_empty=allow_empty), meta


def loopbench_metadata(md: dict[bytes, bytes] | None, file: str) -> dict[str, str]:
    """The footer's `loopbench.*` entries as text; other tools' entries may be binary and are not read."""
    out = {}
    for key, value in (md or {}).items():
        if key.startswith(b"loopbench."):
            try:
                out[key.decode()] = value.decode()
            except UnicodeDecodeError:
                name = key.decode("utf-8", "replace")
                raise TraceError(file, f"footer metadata '{name}' is not UTF-8 text") from None
    return out


def one_line(exc: Exception) -> str:
    """pyarrow's messages span lines; an error is reported as one line."""
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def refuse_rows(mask: np.ndarray, file: str, column: str, rule: str) -> None:
    """Raise on the first row where `mask` (True = bad) holds."""
    if mask.any():
        raise TraceError(file, rule, column=column, row=_first(mask))


def validate_table(table: pa.Table, file: str, *, allow_empty: bool = False) -> pa.Table:
    """Check columns, types and every value rule; return the table cast to SCHEMA. An empty
    table is refused unless `allow_empty` (a services-only workload: harness/services/trace.py)."""
    if table.num_rows == 0 and not allow_empty:
        raise TraceError(file, "trace has no rows")
    table = conform(table, SCHEMA, file)
    _check_values(table, file)
    return table


def conform(table: pa.Table, schema: pa.Schema, file: str) -> pa.Table:
    """`table` cast to `schema`: every column present once, none unknown, each value castable
    without loss, no null where the schema forbids one; refused by column and first bad row."""
    names = set(table.column_names)
    if len(names) != table.num_columns:
        dup = next(n for n in table.column_names if table.column_names.count(n) > 1)
        raise TraceError(file, "column appears more than once", column=dup)
    for field in schema:
        if field.name in OPTIONAL and field.name not in names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
            names.add(field.name)
        if field.name not in names:
            raise TraceError(file, "required column is missing", column=field.name)
    extra = sorted(names - set(schema.names))
    if extra:
        raise TraceError(file, f"unknown column (the schema has: {', '.join(schema.names)})", column=extra[0])
    cols = []
    for field in schema:
        col = _cast(table.column(field.name), field, file)
        if not field.nullable and col.null_count:
            refuse_rows(col.is_null().to_numpy(zero_copy_only=False), file, field.name, "value must not be null")
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=schema)


def _cast(col: pa.ChunkedArray, field: pa.Field, file: str) -> pa.ChunkedArray:
    """`col` as the field's type; refused with the first row whose value does not fit."""
    try:
        return col.cast(field.type, safe=True)
    except pa.ArrowNotImplementedError:  # no cast between the two types, whatever the values
        raise TraceError(file, f"expected type {field.type}, got {col.type}", column=field.name) from None
    except pa.ArrowInvalid:
        row = _first_uncastable(col, field.type)
        raise TraceError(file, f"expected type {field.type}, got {col.type} {col[row].as_py()!r}",
                         column=field.name, row=row) from None


def _first_uncastable(col: pa.ChunkedArray, type_: pa.DataType) -> int:
    """Bisect for the first value that does not cast: about one more cast of the column in all."""
    lo, hi = 0, len(col)  # the first bad value is in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            col.slice(lo, mid - lo).cast(type_, safe=True)
            lo = mid
        except pa.ArrowInvalid:
            hi = mid
    return lo


def column_values(table: pa.Table, name: str, fill=None) -> np.ndarray:
    """A column as a numpy array (nulls filled with `fill` when given), for row checks."""
    col = table.column(name)
    if fill is not None:
        col = col.fill_null(fill)
    return col.to_numpy(zero_copy_only=False)


#: C0 and C1 control characters (ANSI escapes start with one), as an RE2 class
CONTROL = r"[\x00-\x1f\x7f-\x9f]"


def _check_values(table: pa.Table, file: str) -> None:
    submit = column_values(table, "submit_s")
    refuse_rows(~np.isfinite(submit) | (submit < 0) | (submit > MAX_TIME_S), file, "submit_s",
                f"must be a finite number of seconds in [0, {MAX_TIME_S:.0f}]")
    duration = column_values(table, "duration_s", fill=0.0)
    refuse_rows(~np.isfinite(duration) | (duration < 0) | (duration > MAX_TIME_S), file, "duration_s",
                f"must be null (runs to the end) or finite seconds in [0, {MAX_TIME_S:.0f}]")
    check_shape(table, file)
    minm = column_values(table, "min_member")
    refuse_rows(minm < 1, file, "min_member", "must be >= 1")
    loc = column_values(table, "gang_locality")
    refuse_rows(~np.isin(loc, GANG_LOCALITY), file, "gang_locality", f"must be one of {GANG_LOCALITY}")
    for name in ("pod_id", "job_id", "queue", "gpu_partition", "claim"):  # names a terminal or report shows
        has_control = pa.compute.match_substring_regex(table.column(name), CONTROL).fill_null(False)
        refuse_rows(has_control.to_numpy(zero_copy_only=False), file, name,
                    "must not hold control characters (an escape sequence would reach the terminal)")
    pod_ids = table.column("pod_id")
    if pa.compute.count_distinct(pod_ids).as_py() != table.num_rows:
        refuse_rows(duplicates(column_values(table, "pod_id")), file, "pod_id", "pod ids must be unique (duplicate)")
    _check_gangs(table, file)


def duplicates(values: np.ndarray) -> np.ndarray:
    """True where a value already appeared in an earlier row."""
    _, first_idx = np.unique(values, return_index=True)
    dup = np.ones(len(values), bool)
    dup[first_idx] = False
    return dup


def check_shape(table: pa.Table, file: str) -> None:
    """The resource shape of a pod (or of a service's replica): CPU, memory, GPUs, share,
    partition profile and model names, each within its rule."""
    cpu = column_values(table, "cpu_milli")
    refuse_rows((cpu < 0) | (cpu > MAX_CPU_MILLI), file, "cpu_milli", f"must be in [0, {MAX_CPU_MILLI}]")
    mem = column_values(table, "memory_mib")
    refuse_rows((mem < 0) | (mem > MAX_MEMORY_MIB), file, "memory_mib", f"must be in [0, {MAX_MEMORY_MIB}]")
    gpus = column_values(table, "gpu_count")
    refuse_rows((gpus < 0) | (gpus > MAX_GPUS_PER_POD), file, "gpu_count", f"must be in [0, {MAX_GPUS_PER_POD}]")
    milli = column_values(table, "gpu_milli")
    refuse_rows((milli < 0) | (milli > 1000), file, "gpu_milli", "must be in [0, 1000] (milli of one GPU)")
    partitioned = table.column("gpu_partition").is_valid().to_numpy(zero_copy_only=False)
    refuse_rows(partitioned & ((gpus != 1) | (milli != 0)), file, "gpu_partition",
                "a partition profile needs gpu_count 1 and gpu_milli 0 (the profile sets the share)")
    whole = ~partitioned
    refuse_rows(whole & (gpus > 0) & (milli == 0), file, "gpu_milli", "must be > 0 when gpu_count > 0")
    refuse_rows(whole & (gpus == 0) & (milli != 0), file, "gpu_milli", "must be 0 when gpu_count is 0")
    refuse_rows((milli > 0) & (milli < 1000) & (gpus != 1), file, "gpu_milli",
                "a fractional share (< 1000) is only allowed with gpu_count 1")
    models = table.column("gpu_models")
    null_model = pa.compute.list_flatten(models).is_null().to_numpy(zero_copy_only=False)
    if null_model.any():
        row = pa.compute.list_parent_indices(models)[_first(null_model)].as_py()
        raise TraceError(file, "a GPU model name must not be null", column="gpu_models", row=row)


def _check_gangs(table: pa.Table, file: str) -> None:
    """Members of one job agree on gang attributes, and a job has at least min_member pods."""
    job = column_values(table, "job_id")
    if not len(job):
        return
    _, job_idx, counts = np.unique(job, return_inverse=True, return_counts=True)
    order = np.argsort(job_idx, kind="stable")
    starts = np.r_[0, np.flatnonzero(np.diff(job_idx[order])) + 1]
    for name in GANG_AGREEMENT:
        values = column_values(table, name)
        first_of_job = values[order][starts]
        expected = first_of_job[np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(order)]))]
        bad_sorted = values[order] != expected
        if bad_sorted.any():
            row = int(order[np.flatnonzero(bad_sorted)[0]])
            raise TraceError(file, f"members of job '{job[row]}' disagree on {name}", column=name, row=row)
    minm = column_values(table, "min_member")
    short = minm > counts[job_idx]
    refuse_rows(short, file, "min_member", "job has fewer pods than its min_member")
