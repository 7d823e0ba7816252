"""Importer for the Alibaba "openb" GPU trace (cluster-trace-gpu-v2023, the FGD paper's data).

Pod lists (`openb_pod_list_*.csv`) become canonical trace tables; node lists
(`openb_node_list_*.csv`) become a static cluster config. Every variant family shares the
first five pod columns; the times and `gpu_spec` are optional, because some `multigpu*` and
`gpushare*` files carry only `name, cpu_milli, memory_mib, num_gpu, gpu_milli`. Cells are
read as text and checked column by column, so a bad file is refused with its file, column,
data row (from 0) and rule rather than a parser traceback.
"""

from __future__ import annotations

import csv
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from harness.errors import TraceError
from harness.trace import MAX_CPU_MILLI, MAX_GPUS_PER_POD, MAX_MEMORY_MIB, MAX_TIME_S, refuse_rows, table_from_columns

POD_REQUIRED = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
NODE_REQUIRED = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_INT = r"^\s*[0-9]+\s*$"
_NUMBER = r"^\s*[0-9]+(\.[0-9]*)?\s*$"


def _read_text_csv(path, required: tuple[str, ...]) -> pa.Table:
    """Every column as text; a ragged or unreadable file is located by row before refusing it."""
    file = str(path)
    if not os.path.exists(file):
        raise TraceError(file, "file does not exist")
    try:
        with open(file, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), None)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(file, f"not a readable CSV header ({exc})") from None
    if not header:
        raise TraceError(file, "empty file (expected a header line)")
    header = [h.strip() for h in header]
    for name in required:
        if name not in header:
            raise TraceError(file, f"required column is missing (header: {', '.join(header)})", column=name)
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise TraceError(file, "column appears twice in the header", column=dup)
    try:
        return pacsv.read_csv(
            file,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            convert_options=pacsv.ConvertOptions(column_types={h: pa.string() for h in header},
                                                 strings_can_be_null=False),
        )
    except pa.ArrowInvalid as exc:
        try:
            with open(file, newline="", encoding="utf-8", errors="replace") as fh:
                rows = csv.reader(fh)
                next(rows)
                for i, row in enumerate(rows):
                    if len(row) != len(header):
                        raise TraceError(file, f"expected {len(header)} fields, got {len(row)}", row=i) from None
        except csv.Error as inner:
            raise TraceError(file, f"not a readable CSV file ({inner})") from None
        raise TraceError(file, f"not a readable CSV file ({exc})") from None


def _ints(table: pa.Table, name: str, file: str, lo: int, hi: int) -> np.ndarray:
    col = table.column(name)
    refuse_rows(~pc.match_substring_regex(col, _INT).to_numpy(zero_copy_only=False), file, name,
                "must be a non-negative integer")
    refuse_rows(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(col)), 18).to_numpy(zero_copy_only=False), file, name,
                f"must be in [{lo}, {hi}]")  # more digits would overflow int64
    values = pc.cast(pc.utf8_trim_whitespace(col), pa.int64()).to_numpy()
    refuse_rows((values < lo) | (values > hi), file, name, f"must be in [{lo}, {hi}]")
    return values


def _times(table: pa.Table, name: str, file: str, optional: bool) -> np.ndarray:
    """Seconds as float64; NaN where an optional cell is empty."""
    col = pc.utf8_trim_whitespace(table.column(name))
    empty = pc.equal(col, "").to_numpy(zero_copy_only=False)
    ok = pc.match_substring_regex(col, _NUMBER).to_numpy(zero_copy_only=False)
    rule = "must be a non-negative number of seconds" + (" or empty" if optional else "")
    refuse_rows(~ok & ~(empty & optional), file, name, rule)
    values = pc.cast(pc.if_else(pc.equal(col, ""), "nan", col), pa.float64()).to_numpy()
    refuse_rows(values > MAX_TIME_S, file, name, f"must be at most {MAX_TIME_S:.0f} s")
    return values


def read_openb_pods(path) -> pa.Table:
    """An openb pod list as a canonical trace table (one independent pod per row).

    Times are optional: without `creation_time` every pod is submitted at 0, and without a
    `deletion_time` (column or cell) the pod runs to the end. `gpu_milli` is ignored (0)
    for pods without GPUs, as some files carry a share there.
    """
    file = str(path)
    t = _read_text_csv(path, POD_REQUIRED)
    if t.num_rows == 0:
        raise TraceError(file, "pod list has no rows")
    names = pc.utf8_trim_whitespace(t.column("name"))
    refuse_rows(pc.equal(names, "").to_numpy(zero_copy_only=False), file, "name", "must not be empty")
    names = names.to_numpy(zero_copy_only=False)
    _, first = np.unique(names, return_index=True)
    dup = np.ones(len(names), bool)
    dup[first] = False
    refuse_rows(dup, file, "name", "pod names must be unique (duplicate)")
    cpu = _ints(t, "cpu_milli", file, 0, MAX_CPU_MILLI)
    mem = _ints(t, "memory_mib", file, 0, MAX_MEMORY_MIB)
    gpus = _ints(t, "num_gpu", file, 0, MAX_GPUS_PER_POD)
    milli = np.where(gpus == 0, 0, _ints(t, "gpu_milli", file, 0, 1000))
    refuse_rows((gpus > 0) & (milli == 0), file, "gpu_milli", "must be > 0 when num_gpu > 0")
    refuse_rows((milli < 1000) & (gpus > 1), file, "gpu_milli",
                "a GPU share below 1000 is only allowed with num_gpu 1")

    n = t.num_rows
    has_creation = "creation_time" in t.column_names
    submit = _times(t, "creation_time", file, optional=False) if has_creation else np.zeros(n)
    duration = np.full(n, np.nan)
    if "deletion_time" in t.column_names:
        deletion = _times(t, "deletion_time", file, optional=True)
        duration = deletion - submit
        refuse_rows(duration < 0, file, "deletion_time", "must not be before creation_time")
    if "gpu_spec" in t.column_names:
        specs = pc.utf8_trim_whitespace(t.column("gpu_spec")).to_pylist()
        models = [[m.strip() for m in s.split("|") if m.strip()] if s else [] for s in specs]
    else:
        models = [[] for _ in range(n)]
    names = names.tolist()
    return table_from_columns({
        "pod_id": names,
        "job_id": names,
        "min_member": np.ones(n, np.int32),
        "submit_s": submit,
        "duration_s": pa.array(duration, pa.float64(), from_pandas=True),
        "cpu_milli": cpu,
        "memory_mib": mem,
        "gpu_count": gpus.astype(np.int32),
        "gpu_milli": milli.astype(np.int32),
        "gpu_models": models,
    }, file=file)


def _read_nodes(path):
    """Validated node list columns in file order."""
    file = str(path)
    t = _read_text_csv(path, NODE_REQUIRED)
    if t.num_rows == 0:
        raise TraceError(file, "node list has no rows")
    sn = pc.utf8_trim_whitespace(t.column("sn"))
    refuse_rows(pc.equal(sn, "").to_numpy(zero_copy_only=False), file, "sn", "must not be empty")
    cpu = _ints(t, "cpu_milli", file, 1, MAX_CPU_MILLI)
    mem = _ints(t, "memory_mib", file, 1, MAX_MEMORY_MIB)
    gpu = _ints(t, "gpu", file, 0, MAX_GPUS_PER_POD)
    model = pc.utf8_trim_whitespace(t.column("model")).to_numpy(zero_copy_only=False).astype(str)
    refuse_rows((gpu > 0) & (model == ""), file, "model", "a node with GPUs needs a GPU model")
    model = np.where(gpu == 0, "", model)
    return cpu, mem, gpu, model


def _node_types(cpu, mem, gpu, model):
    """Distinct (cpu, memory, gpu, model) in order of first appearance, and each row's type."""
    keys = list(zip(cpu.tolist(), mem.tolist(), gpu.tolist(), model.tolist(), strict=True))
    index: dict = {}
    row_type = np.array([index.setdefault(k, len(index)) for k in keys], np.int64)
    return list(index), row_type


def read_openb_nodes(path) -> dict:
    """A static cluster config (`harness.cluster.Cluster(**d)`) for an openb node list.

    One node type per distinct (cpu_milli, memory_mib, gpu, model), one fixed-size pool per
    type, pools in order of the type's first row: see `openb_node_slots` for which slot
    each file row lands in. openb gives no NVLink or NUMA layout, so each node is one domain.
    """
    cpu, mem, gpu, model = _read_nodes(path)
    types, row_type = _node_types(cpu, mem, gpu, model)
    counts = np.bincount(row_type, minlength=len(types))
    node_types, pools = [], []
    for (c, m, g, mod), count in zip(types, counts.tolist(), strict=True):
        name = f"{mod or 'cpu'}x{g}-{c}m-{m}Mi"
        node_types.append({"name": name, "cpu_milli": c, "memory_mib": m, "gpus": g, "gpu_model": mod,
                           "nvlink_domains": 1, "numa_domains": 1})
        pools.append({"name": name, "node_type": name, "min_size": count, "max_size": count})
    return {"name": os.path.basename(str(path)).removesuffix(".csv"), "autoscaling": False,
            "node_types": node_types, "pools": pools}


def openb_node_slots(path) -> np.ndarray:
    """Slot of each node-list row in the cluster of `read_openb_nodes` (file order within a pool)."""
    types, row_type = _node_types(*_read_nodes(path))
    order = np.argsort(row_type, kind="stable")
    slots = np.empty(len(row_type), np.int64)
    slots[order] = np.arange(len(row_type))
    return slots
