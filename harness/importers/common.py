"""What every importer shares: streaming CSV batches with located errors, unit conversions,
gang expansion, the drop tally the CLI prints, and node lists turned into cluster configs.

Assumptions common to several formats live here so they are stated once:

- CSV values are read as strings and converted here, so a bad value is reported with its
  file, column and data row (rows count from 0 after any header line, in file order).
- Null markers: empty, `NA`, `N/A`, `NaN`, `nan`, `null`, `NULL`, `None`.
- A trace that publishes CPUs but no memory gets `MEM_PER_CPU_MIB` per requested core, the
  ratio of common general-purpose cloud machines; node lists without memory get the same, so
  memory never binds before CPUs do.
- Prices (`node_price`) are plausible public-cloud list prices per hour, meant to rank pools
  and give costs the right order of magnitude, not to quote any provider.
"""

from __future__ import annotations

import io
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv

from harness.errors import TraceError
from harness.progress import Progress
from harness.trace import MAX_GPUS_PER_POD, SCHEMA, TraceMeta

NULLS = ["", "NA", "N/A", "NaN", "nan", "null", "NULL", "None"]
MEM_PER_CPU_MIB = 4096
#: More machines than this in one job is a unit mistake (the largest public jobs use a few thousand).
MAX_PODS_PER_JOB = 100_000
#: Submit times further than this from 1970 (about 3000 years) are not times.
MAX_EPOCH_S = 1e11
#: Inputs at least this large show a progress bar.
PROGRESS_BYTES = 32 << 20
BLOCK_BYTES = 2 << 20  # small blocks keep the peak near the output size


@dataclass
class ImportResult:
    """A canonical table (times from `meta.time_origin`) and what happened to each source row."""

    table: pa.Table
    meta: TraceMeta
    unit: str  # what one source row is: "jobs", "tasks", "instances", ...
    rows_read: int
    dropped: Counter = field(default_factory=Counter)  # reason -> source rows
    notes: Counter = field(default_factory=Counter)  # reason -> rows kept but adjusted

    @property
    def rows_kept(self) -> int:
        return self.rows_read - sum(self.dropped.values())


class Tally:
    """Counts source rows read, dropped by reason and adjusted, batch by batch."""

    def __init__(self):
        self.rows_read = 0
        self.dropped: Counter = Counter()
        self.notes: Counter = Counter()

    def drop(self, keep: np.ndarray, bad: np.ndarray, reason: str) -> np.ndarray:
        """Drop rows where `bad` holds among those still kept; return the new keep mask."""
        hit = keep & bad
        n = int(hit.sum())
        if n:
            self.dropped[reason] += n
        return keep & ~bad

    def note(self, mask: np.ndarray, reason: str) -> None:
        n = int(mask.sum())
        if n:
            self.notes[reason] += n

    def result(self, table: pa.Table, meta: TraceMeta, unit: str) -> ImportResult:
        return ImportResult(table, meta, unit, self.rows_read, self.dropped, self.notes)


# ---- reading ----------------------------------------------------------------------------

class _Counting(io.RawIOBase):
    """A file that advances a progress bar by the bytes read through it."""

    def __init__(self, raw, bar: Progress):
        self.raw, self.bar = raw, bar

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        n = self.raw.readinto(buf)
        self.bar.update(n)
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


def progress_bar(path: str | os.PathLike, desc: str) -> Progress:
    size = os.path.getsize(path)
    return Progress(desc, size, "B", enabled=size >= PROGRESS_BYTES,
                    status=lambda done: f"read {done / 2**20:,.1f} of {size / 2**20:,.1f} MiB")


def _has_header(path: Path, first_name: str) -> bool:
    with open(path, "rb") as f:
        first = f.readline().decode("utf-8", "replace")
    return first.split(",")[0].strip().strip('"') == first_name


def csv_batches(path: str | os.PathLike, columns: list[str], *, names: list[str] | None = None,
                desc: str = "") -> Iterator[tuple[int, pa.RecordBatch]]:
    """Stream a CSV as string batches of `columns`, yielding (first data row, batch).

    With `names` (the format's full column list) a header line is optional: files published
    without one (the PAI tables) are read with those names. Without `names` the header is
    required and must contain every column in `columns`; other columns are ignored.
    """
    path = Path(path)
    file = str(path)
    if not path.exists():
        raise TraceError(file, "file does not exist")
    header = names is None or _has_header(path, names[0])
    if names is None:
        with open(path, "rb") as f:
            present = [c.strip().strip('"') for c in f.readline().decode("utf-8", "replace").rstrip("\r\n").split(",")]
        for c in columns:
            if c not in present:
                raise TraceError(file, f"required column is missing (header has: {', '.join(present)})", column=c)
        read = pv.ReadOptions(use_threads=False, block_size=BLOCK_BYTES)
    else:  # the format's own names, robust to spacing in a header line
        read = pv.ReadOptions(use_threads=False, block_size=BLOCK_BYTES, column_names=names, skip_rows=int(header))
    skip = 1 + int(header)  # physical line numbers are 1-based and count the header
    bad_line: list[int | None] = []

    def on_invalid(row) -> str:
        bad_line.append(row.number)
        return "error"

    parse = pv.ParseOptions(invalid_row_handler=on_invalid)
    convert = pv.ConvertOptions(column_types={c: pa.string() for c in columns}, include_columns=columns,
                                strings_can_be_null=True, null_values=NULLS, quoted_strings_can_be_null=True)
    bar = progress_bar(path, desc or path.name)

    def located(exc: pa.ArrowInvalid) -> TraceError:
        row = bad_line[0] - skip if bad_line and bad_line[0] is not None else None
        msg = re.sub(r"^CSV parse error: (Row #\d+: )?", "", str(exc).splitlines()[0])
        return TraceError(file, f"malformed CSV line ({msg})", row=row)

    first = 0
    try:
        with open(path, "rb", buffering=0) as raw:
            try:  # the reader parses its first block when opened
                reader = pv.open_csv(_Counting(raw, bar), read_options=read, parse_options=parse,
                                     convert_options=convert)
            except pa.ArrowInvalid as exc:
                raise located(exc) from None
            except pa.ArrowKeyError as exc:  # the header line as the CSV parser reads it lacks a column
                raise TraceError(file, f"header line not readable as CSV ({exc})") from None
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                except pa.ArrowInvalid as exc:
                    raise located(exc) from None
                yield first, batch
                first += batch.num_rows
    finally:
        bar.close()


def read_csv(path: str | os.PathLike, columns: list[str], *, names: list[str] | None = None) -> pa.Table:
    """A whole (small) CSV as a table of string columns."""
    batches = [b for _, b in csv_batches(path, columns, names=names)]
    if not batches:
        raise TraceError(str(path), "file has no data rows")
    return pa.Table.from_batches(batches)


# ---- converting -------------------------------------------------------------------------

_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?(inf|Infinity)$"


def _first_bad(bad: pa.Array | np.ndarray) -> int:
    mask = bad.to_numpy(zero_copy_only=False) if isinstance(bad, (pa.Array, pa.ChunkedArray)) else bad
    return int(np.flatnonzero(mask)[0])


def numbers(col: pa.Array, file: str, column: str, row0: int) -> pa.Array:
    """Strings to float64 (nulls stay null); a non-number is refused with its row."""
    col = pc.utf8_trim_whitespace(col)
    try:
        return pc.cast(col, pa.float64())
    except pa.ArrowInvalid:
        bad = pc.and_(col.is_valid(), pc.invert(pc.match_substring_regex(col, _NUMBER)))
        i = _first_bad(pc.fill_null(bad, False))
        raise TraceError(file, f"not a number: {col[i].as_py()!r}", column=column, row=row0 + i) from None


def float_np(col: pa.Array, file: str, column: str, row0: int) -> np.ndarray:
    """Strings to a float64 numpy array with NaN for nulls."""
    return numbers(col, file, column, row0).to_numpy(zero_copy_only=False)


def require(values: np.ndarray, bad: np.ndarray, file: str, column: str, row0: int, rule: str) -> None:
    """Refuse the batch at the first row where `bad` holds."""
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        value = values[i]
        value = value.item() if isinstance(value, np.generic) else value  # -1.0, not np.float64(-1.0)
        raise TraceError(file, f"{rule} (got {value!r})", column=column, row=row0 + i)


def epoch_seconds(col: pa.Array, file: str, column: str, row0: int, tz: str | None = None,
                  ambiguous: str = "earliest") -> np.ndarray:
    """Datetimes to float64 UTC epoch seconds, NaN for nulls.

    `tz=None` expects an explicit offset (`2023-03-01 00:18:22+08:00`, `T` also accepted);
    otherwise the text is local time in `tz` (`YYYY-MM-DD HH:MM:SS`). In a daylight-saving
    fall-back hour the earlier instant is taken, and a time in the spring-forward gap is
    moved to the last instant before it (`ambiguous="latest"` takes the later instant).
    """
    col = pc.utf8_trim_whitespace(col)
    col = pc.replace_substring_regex(col, r"^(\d{4}-\d\d-\d\d)T", r"\1 ")
    fmt = "%Y-%m-%d %H:%M:%S" + ("%z" if tz is None else "")
    ts = pc.strptime(col, format=fmt, unit="s", error_is_null=True)
    # strptime rolls impossible dates over (April 31 -> May 1): the date must print back as written
    date = pc.utf8_slice_codeunits(col, 0, 10)
    same = pc.equal(pc.strftime(pc.strptime(date, format="%Y-%m-%d", unit="s", error_is_null=True),
                                format="%Y-%m-%d"), date)
    bad = pc.and_(col.is_valid(), pc.invert(pc.fill_null(pc.and_(ts.is_valid(), same), False)))
    if pc.any(bad).as_py():
        i = _first_bad(bad)
        want = "YYYY-MM-DD HH:MM:SS" + ("+HH:MM" if tz is None else f" ({tz} local time)")
        raise TraceError(file, f"not a datetime {want}: {col[i].as_py()!r}", column=column, row=row0 + i)
    if tz is not None:
        ts = pc.assume_timezone(ts, tz, ambiguous=ambiguous, nonexistent="earliest")
    return pc.cast(pc.cast(ts, pa.int64()), pa.float64()).to_numpy(zero_copy_only=False)


def gpu_shape(gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GPUs per pod (possibly fractional) to (gpu_count, gpu_milli).

    Below one GPU the pod takes a share of one device (milli, at least 1, at most 999);
    from one GPU up a fractional count is rounded up to whole devices.
    """
    g = np.nan_to_num(np.asarray(gpus, np.float64), nan=0.0)
    share = (g > 0) & (g < 1)
    count = np.where(share, 1, np.ceil(g - 1e-9)).clip(0, MAX_GPUS_PER_POD + 1).astype(np.int64)  # no overflow
    milli = np.where(share, np.clip(np.rint(g * 1000), 1, 999), np.where(count > 0, 1000, 0)).astype(np.int32)
    return count, milli


def too_many_gpus(count: np.ndarray) -> np.ndarray:
    return count > MAX_GPUS_PER_POD


TOO_MANY_GPUS = f"more than {MAX_GPUS_PER_POD} GPUs per pod"


def expand_gangs(jobs: dict[str, np.ndarray | pa.Array], pods_per_job: np.ndarray,
                 pods: dict[str, np.ndarray] | None = None) -> pa.Table:
    """One row per job to one row per pod: each job becomes `pods_per_job` pods, identical
    except for the per-pod columns in `pods` (already one value per pod, in job order).

    Pods are named `<job_id>-<rank>`; every pod of a job carries min_member = its pod count,
    so a job of one pod is not a gang and a job of n pods is a gang of n.
    """
    n = np.asarray(pods_per_job, np.int64)
    job_of_pod = np.repeat(np.arange(len(n)), n)
    starts = np.cumsum(n) - n
    rank = np.arange(len(job_of_pod)) - np.repeat(starts, n)
    take = pa.array(job_of_pod)
    cols = {}
    for name, values in jobs.items():
        arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
        cols[name] = arr.take(take)
    cols["pod_id"] = pc.binary_join_element_wise(cols["job_id"], pa.array(rank).cast(pa.string()), "-")
    cols["min_member"] = pa.array(n[job_of_pod].astype(np.int32))
    cols.update(pods or {})
    return canonical(cols, len(job_of_pod))


def canonical(cols: dict, n: int) -> pa.Table:
    """Fill defaults for absent columns and cast to SCHEMA; times stay absolute until `rebase`."""
    defaults = {
        "duration_s": pa.nulls(n, pa.float64()),
        "gpu_partition": pa.nulls(n, pa.string()),
        "gpu_models": None,
        "gpus_same_nvlink": np.zeros(n, bool),
        "gpus_same_numa": np.zeros(n, bool),
        "nic_per_gpu": np.zeros(n, bool),
        "gang_locality": _constant("none", n),
        "priority": np.zeros(n, np.int32),
        "queue": _constant("default", n),
        "min_member": np.ones(n, np.int32),
        "claim": pa.nulls(n, pa.string()),
    }
    arrays = []
    for f in SCHEMA:
        value = cols[f.name] if f.name in cols else defaults[f.name]
        if value is None:
            value = pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.string()))
        arr = value if isinstance(value, (pa.Array, pa.ChunkedArray)) else pa.array(value)
        arrays.append(arr.cast(f.type))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def _constant(value: str, n: int) -> pa.Array:
    return pa.array([value]).take(pa.array(np.zeros(n, np.int64)))


def model_lists(models: pa.Array | np.ndarray, any_model: tuple[str, ...] = ()) -> pa.Array:
    """One GPU model per row to `gpu_models` lists; null, empty or `any_model` means any model."""
    arr = models if isinstance(models, (pa.Array, pa.ChunkedArray)) else pa.array(models, pa.string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = pc.utf8_trim_whitespace(arr.cast(pa.string()))
    some = pc.and_(arr.is_valid(), pc.invert(pc.is_in(arr, pa.array(("", *any_model), pa.string()))))
    some = pc.fill_null(some, False).to_numpy(zero_copy_only=False)
    offsets = np.r_[0, np.cumsum(some)].astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), arr.filter(pa.array(some)))


def rebase(table: pa.Table, source: str, licence: str, description: str,
           origin_s: float | None = None) -> tuple[pa.Table, TraceMeta]:
    """Shift absolute epoch submit times so the trace starts at 0; record the origin as UTC."""
    submit = table.column("submit_s")
    origin = float(pc.min(submit).as_py()) if origin_s is None else origin_s
    table = table.set_column(SCHEMA.get_field_index("submit_s"), SCHEMA.field("submit_s"),
                             pc.subtract(submit, origin))
    when = np.datetime64(int(origin), "s").astype(str) + "Z"
    return table, TraceMeta(source=source, licence=licence, time_origin=when, description=description)


def concat(tables: list[pa.Table], file: str) -> pa.Table:
    if not tables:
        raise TraceError(file, "no rows left to import")
    return pa.concat_tables(tables)


# ---- node lists to cluster configs ------------------------------------------------------

#: On-demand price per GPU-hour by model (USD, rounded list prices of comparable cloud GPUs).
GPU_HOURLY = {
    "H100": 11.0, "H800": 11.0, "H20": 4.5, "A100-SXM4-80GB": 4.1, "A800-SXM4-80GB": 4.1,
    "A100": 3.7, "A800": 3.7, "L40S": 1.9, "A10": 1.0, "L4": 0.7, "V100M32": 3.9, "V100": 3.06,
    "V100M16": 3.06, "P100": 1.46, "T4": 0.35, "P40": 1.2, "K80": 0.45,
}
DEFAULT_GPU_HOURLY = 2.0  # unknown or anonymised models ("MISC", "GPU-series-1", "G2", ...)
CPU_HOURLY = 0.04  # per core
MEM_HOURLY_PER_GIB = 0.005


def node_price(gpu_model: str, gpus: int, cpu_milli: int, memory_mib: int) -> float:
    price = gpus * GPU_HOURLY.get(gpu_model, DEFAULT_GPU_HOURLY) + cpu_milli / 1000 * CPU_HOURLY
    return round(price + memory_mib / 1024 * MEM_HOURLY_PER_GIB, 2)


def boot_delay(gpus: int) -> dict:
    """Seconds from request to ready: CPU nodes 1-3 min; GPU nodes 4-7 min (small) or 5-10 min
    (4+ GPUs: driver, fabric manager and image pulls), in line with Cluster Autoscaler's
    15-minute max provision time."""
    if gpus == 0:
        return {"min_s": 60.0, "max_s": 180.0}
    if gpus < 4:
        return {"min_s": 240.0, "max_s": 420.0}
    return {"min_s": 300.0, "max_s": 600.0}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def static_cluster(nodes: dict[str, np.ndarray], name: str) -> dict:
    """A node list (gpu_model, gpus, cpu_milli, memory_mib per node) to a static cluster config:
    one node type and one fixed-size pool per distinct shape, autoscaling off."""
    model = np.where(np.asarray(nodes["gpus"]) > 0, np.asarray(nodes["gpu_model"], object), "")
    keys = list(zip(model.tolist(), *(np.asarray(nodes[k]).astype(np.int64).tolist()
                                       for k in ("gpus", "cpu_milli", "memory_mib")), strict=True))
    counts = Counter(keys)
    node_types, pools = [], []
    for (m, gpus, cpu, mem), count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        tname = _slug(f"{m or 'cpu'}-{gpus}g-{cpu // 1000}c-{mem // 1024}gi")
        node_types.append({"name": tname, "cpu_milli": cpu, "memory_mib": mem, "gpus": gpus, "gpu_model": m})
        pools.append({"name": tname, "node_type": tname, "min_size": count, "max_size": count,
                      "price_on_demand": node_price(m, gpus, cpu, mem), "boot_delay": boot_delay(gpus)})
    return {"_target_": "harness.cluster.Cluster", "name": name, "autoscaling": False,
            "node_types": node_types, "pools": pools}


def autoscaled_cluster(static: dict, name: str | None = None) -> dict:
    """A static inventory to an autoscaled cloud: one pool per node model (each distinct node
    shape of the inventory), min 0, max = that model's node count in the inventory (the
    replay can grow back to the original fleet, never beyond), on-demand priced by
    `node_price`, booted per `boot_delay`."""
    types = {t["name"]: t for t in static["node_types"]}
    per_type: Counter = Counter()
    for pool in static["pools"]:
        per_type[pool["node_type"]] += int(pool["max_size"])
    pools = []
    for tname, count in per_type.most_common():
        t = types[tname]
        gpus = int(t.get("gpus", 0))
        model = t.get("gpu_model", "") if gpus else ""
        pools.append({"name": tname, "node_type": tname, "min_size": 0, "max_size": count,
                      "price_on_demand": node_price(model, gpus, t["cpu_milli"], t["memory_mib"]),
                      "boot_delay": boot_delay(gpus)})
    return {"_target_": "harness.cluster.Cluster", "name": name or f"{static.get('name', 'cluster')}-autoscaled",
            "autoscaling": True, "partition_profiles": static.get("partition_profiles") or {},
            "node_types": [types[n] for n in per_type], "pools": pools}


# ---- one row per job, `nodes` identical pods per job --------------------------------------

def node_job_log(path: str | os.PathLike, columns: list[str], tally: Tally, desc: str, *, queue: str,
                 tz: str | None = None, memory_gb: str | None = None) -> list[pa.Table]:
    """A job log with `node_num` machines, `gpu_num` GPUs and `cpu_num` cores per job in all
    (Helios, Acme): one pod per machine, GPUs (rounded up, counted) and cores split evenly;
    `memory_gb` names a per-pod memory column in GB, if the log has one."""
    file = str(path)
    tables = []
    for row0, b in csv_batches(path, columns, desc=desc):
        nodes = float_np(b.column("node_num"), file, "node_num", row0)
        gpus = float_np(b.column("gpu_num"), file, "gpu_num", row0)
        cpus = float_np(b.column("cpu_num"), file, "cpu_num", row0)
        mem = float_np(b.column(memory_gb), file, memory_gb, row0) * 1024 if memory_gb else None
        with np.errstate(invalid="ignore", divide="ignore"):
            per_pod = gpus / nodes
            tally.note((nodes >= 1) & (np.ceil(per_pod) != per_pod), "gpu_num not divisible by node_num: rounded up")
            table = job_rows_to_pods(
                tally, file, row0,
                job_id=pc.utf8_trim_whitespace(b.column("job_id")),
                submit=epoch_seconds(b.column("submit_time"), file, "submit_time", row0, tz=tz),
                duration=float_np(b.column("duration"), file, "duration", row0),
                nodes=nodes, gpus_per_pod=np.ceil(per_pod), cpu_per_pod=cpus / nodes,
                mem_per_pod_mib=mem, queue=b.column(queue))
        if table is not None:
            tables.append(table)
    return tables


def job_rows_to_pods(tally: Tally, file: str, row0: int, *, job_id: pa.Array, submit: np.ndarray,
                     duration: np.ndarray, nodes: np.ndarray, gpus_per_pod: np.ndarray,
                     cpu_per_pod: np.ndarray, mem_per_pod_mib: np.ndarray | None = None,
                     queue: pa.Array | None = None, priority: np.ndarray | None = None,
                     gpu_models: pa.Array | None = None, nodes_column: str = "node_num",
                     submit_column: str = "submit_time") -> pa.Table | None:
    """The shared mapping of job tables (Helios, Acme, spot): a job on `nodes` machines is a
    gang of `nodes` identical pods, each with the given per-pod GPUs and cores.

    Drops (counted): no submit time, node count missing, < 1 or above MAX_PODS_PER_JOB, negative or zero duration
    (a job that never ran holds nothing), more GPUs per pod than the schema allows.
    Adjustments (counted): a missing duration runs to the end of the replay, missing cores
    become 0, memory missing from the trace is `MEM_PER_CPU_MIB` per core.
    """
    tally.rows_read += len(submit)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # dropped rows may hold inf/NaN
        return _job_rows_to_pods(tally, file, row0, job_id, submit, duration, nodes, gpus_per_pod, cpu_per_pod,
                                 mem_per_pod_mib, queue, priority, gpu_models, nodes_column, submit_column)


def _job_rows_to_pods(tally, file, row0, job_id, submit, duration, nodes, gpus_per_pod, cpu_per_pod,
                      mem_per_pod_mib, queue, priority, gpu_models, nodes_column, submit_column):
    whole = np.isnan(nodes) | (nodes == np.floor(nodes))
    require(nodes, ~whole, file, nodes_column, row0, "must be a whole number of machines")
    require(submit, np.abs(submit) > MAX_EPOCH_S, file, submit_column.split(" ")[0], row0,
            f"must be a time within {MAX_EPOCH_S:.0e} s of the epoch")
    keep = np.ones(len(submit), bool)
    keep = tally.drop(keep, np.isnan(submit), f"no {submit_column}")
    keep = tally.drop(keep, np.isnan(nodes) | (nodes < 1), f"{nodes_column} missing or < 1")
    keep = tally.drop(keep, nodes > MAX_PODS_PER_JOB, f"{nodes_column} above {MAX_PODS_PER_JOB:,}")
    keep = tally.drop(keep, duration < 0, "negative duration")
    keep = tally.drop(keep, duration == 0, "zero duration (never ran)")
    count, milli = gpu_shape(gpus_per_pod)
    keep = tally.drop(keep, too_many_gpus(count), TOO_MANY_GPUS)
    tally.note(keep & np.isnan(duration), "no duration: runs to the end of the replay")
    tally.note(keep & np.isnan(cpu_per_pod), "no CPU count: 0 cores")
    cpu = np.ceil(np.nan_to_num(cpu_per_pod) * 1000 - 1e-6).astype(np.int64)
    if mem_per_pod_mib is None:
        mem = cpu * MEM_PER_CPU_MIB // 1000
    else:
        tally.note(keep & np.isnan(mem_per_pod_mib), "no memory: MEM_PER_CPU_MIB per core")
        mem = np.where(np.isnan(mem_per_pod_mib), cpu * MEM_PER_CPU_MIB // 1000,
                       np.ceil(np.nan_to_num(mem_per_pod_mib) - 1e-6)).astype(np.int64)
    if not keep.any():
        return None
    sel = pa.array(keep)
    jobs = {
        "job_id": job_id.filter(sel),
        "submit_s": submit[keep],
        "duration_s": pa.array(duration[keep], from_pandas=True),
        "cpu_milli": cpu[keep],
        "memory_mib": mem[keep],
        "gpu_count": count[keep].astype(np.int32),
        "gpu_milli": milli[keep],
    }
    if queue is not None:
        jobs["queue"] = pc.fill_null(queue, "default").filter(sel)
    if priority is not None:
        jobs["priority"] = priority[keep].astype(np.int32)
    if gpu_models is not None:
        jobs["gpu_models"] = gpu_models.filter(sel)
    return expand_gangs(jobs, nodes[keep].astype(np.int64))
