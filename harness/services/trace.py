"""Service traces: inference services beside a trace's pods, and the demand each one serves.

A service is a Deployment of identical replicas serving one model. A trace `X.parquet` (its
pods; possibly none) may carry two more Parquet tables beside it, `X.services.parquet` (one
row per service: the replica's shape, in the pod trace's columns and rules, its capacity,
cold start and replica bounds) and `X.demand.parquet` (one row per service per window:
demand units per second from `start_s` until that service's next row; 0 before its first
row; the last row holds to the end of the replay). Both are validated here, each refused
with the file, column, first bad row (data rows from 0, file order) and rule, and across the
two (every demand row names a service, every service has demand).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.errors import TraceError
from harness.output import atomic_path
from harness.trace import (
    MAX_TIME_S,
    check_shape,
    column_values,
    conform,
    duplicates,
    loopbench_metadata,
    one_line,
    refuse_rows,
)
from harness.trace import SCHEMA as POD_SCHEMA

SCHEMA_VERSION = "1"
#: More replicas than this for one service is a unit mistake, not a deployment.
MAX_REPLICAS = 100_000
#: At most this many demand rows (windows x services; 115 days of 10 s windows for ten
#: services): more is a date or a factor typed wrong, and would not fit in memory
MAX_DEMAND_ROWS = 10_000_000
#: At most this many replica slots over all services (each service holds max_replicas of
#: them, every one a pod of the replay)
MAX_REPLICA_SLOTS = 1_000_000

SERVICES_SCHEMA = pa.schema(
    [
        pa.field("service", pa.string(), nullable=False),
        # the replica's shape: the pod trace's own columns
        *(POD_SCHEMA.field(c) for c in ("cpu_milli", "memory_mib", "gpu_count", "gpu_milli", "gpu_partition",
                                        "gpu_models", "gpus_same_nvlink")),
        pa.field("capacity_per_replica", pa.float64(), nullable=False),
        pa.field("cold_start_s", pa.float64(), nullable=False),
        pa.field("min_replicas", pa.int32(), nullable=False),
        pa.field("max_replicas", pa.int32(), nullable=False),
        pa.field("priority", pa.int32(), nullable=False),
        pa.field("queue", pa.string(), nullable=False),
    ],
    metadata={
        "loopbench.schema_version": SCHEMA_VERSION,
        "loopbench.doc": (
            "one row per service (a Deployment of identical replicas); the replica's shape has the pod "
            "trace's columns and rules; capacity_per_replica = demand units per second one ready replica "
            "serves; cold_start_s = image pull + model load once its pod runs on a ready node"
        ),
    },
)

DEMAND_SCHEMA = pa.schema(
    [
        pa.field("service", pa.string(), nullable=False),
        pa.field("start_s", pa.float64(), nullable=False),
        pa.field("demand", pa.float64(), nullable=False),
    ],
    metadata={
        "loopbench.schema_version": SCHEMA_VERSION,
        "loopbench.doc": (
            "one row per service per window: demand units per second from start_s (seconds from the "
            "trace's time origin) until the service's next row; the last row holds to the end"
        ),
    },
)

SERVICE_DEFAULTS: dict[str, Any] = {
    "gpu_partition": None,
    "gpu_models": [],
    "gpus_same_nvlink": False,
    "min_replicas": 1,  # HPA's default minReplicas
    "priority": 0,
    "queue": "default",
}


@dataclass(frozen=True)
class ServicesMeta:
    """Footer metadata of a service trace; `demand_unit` says what one unit of demand is."""

    source: str
    licence: str
    time_origin: str
    demand_unit: str
    description: str = ""

    def to_metadata(self) -> dict[str, str]:
        return {
            "loopbench.schema_version": SCHEMA_VERSION,
            "loopbench.source": self.source,
            "loopbench.licence": self.licence,
            "loopbench.time_origin": self.time_origin,
            "loopbench.demand_unit": self.demand_unit,
            "loopbench.description": self.description,
        }

    @classmethod
    def from_metadata(cls, md: dict[str, str]) -> ServicesMeta:
        return cls(source=md.get("loopbench.source", "unknown"), licence=md.get("loopbench.licence", "unknown"),
                   time_origin=md.get("loopbench.time_origin", "trace start"),
                   demand_unit=md.get("loopbench.demand_unit", "unknown"),
                   description=md.get("loopbench.description", ""))


def service_paths(trace: str | os.PathLike) -> tuple[Path, Path]:
    """The services and demand files beside trace `X.parquet` (or stem `X`)."""
    stem = str(trace)
    stem = stem[: -len(".parquet")] if stem.endswith(".parquet") else stem
    return Path(stem + ".services.parquet"), Path(stem + ".demand.parquet")


def _from_columns(columns: dict, schema: pa.Schema, defaults: dict, file: str) -> pa.Table:
    n = len(columns[schema.names[0]])
    data = {}
    for field in schema:
        if field.name in columns:
            data[field.name] = columns[field.name]
        elif field.name in defaults:
            data[field.name] = [defaults[field.name]] * n
        else:
            raise TraceError(file, "required column is missing", column=field.name)
    unknown = sorted(set(columns) - set(schema.names))
    if unknown:
        raise TraceError(file, f"unknown column (the schema has: {', '.join(schema.names)})", column=unknown[0])
    try:
        return pa.table(data, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise TraceError(file, f"columns do not build a table ({one_line(exc)})") from None


def services_from_columns(columns: dict, file: str = "<memory>") -> pa.Table:
    """A services table from column lists (or arrays), optional columns at SERVICE_DEFAULTS."""
    return _from_columns(columns, SERVICES_SCHEMA, SERVICE_DEFAULTS, file)


def demand_from_columns(columns: dict, file: str = "<memory>") -> pa.Table:
    """A demand table from column lists (or arrays): service, start_s, demand."""
    return _from_columns(columns, DEMAND_SCHEMA, {}, file)


def validate_services(table: pa.Table, file: str) -> pa.Table:
    """The services table cast to SERVICES_SCHEMA, every value rule checked."""
    if table.num_rows == 0:
        raise TraceError(file, "services table has no rows")
    table = conform(table, SERVICES_SCHEMA, file)
    refuse_rows(duplicates(column_values(table, "service")), file, "service",
                "service names must be unique (duplicate)")
    check_shape(table, file)
    cap = column_values(table, "capacity_per_replica")
    refuse_rows(~np.isfinite(cap) | (cap <= 0), file, "capacity_per_replica",
                "must be a finite number > 0 (demand units per second one replica serves)")
    cold = column_values(table, "cold_start_s")
    refuse_rows(~np.isfinite(cold) | (cold < 0) | (cold > MAX_TIME_S), file, "cold_start_s",
                f"must be finite seconds in [0, {MAX_TIME_S:.0f}]")
    lo, hi = column_values(table, "min_replicas"), column_values(table, "max_replicas")
    refuse_rows((lo < 0) | (lo > MAX_REPLICAS), file, "min_replicas", f"must be in [0, {MAX_REPLICAS:,}]")
    refuse_rows((hi < np.maximum(lo, 1)) | (hi > MAX_REPLICAS), file, "max_replicas",
                f"must be >= max(1, min_replicas) and <= {MAX_REPLICAS:,}")
    if hi.sum() > MAX_REPLICA_SLOTS:
        raise TraceError(file, f"max_replicas add up to {int(hi.sum()):,} over {table.num_rows:,} services, more "
                               f"than the {MAX_REPLICA_SLOTS:,} replica slots a replay holds", column="max_replicas")
    return table


def validate_demand(table: pa.Table, file: str, services: pa.Table | None = None,
                    services_file: str = "<services>") -> pa.Table:
    """The demand table cast to DEMAND_SCHEMA, every value rule checked; with `services`,
    also that every row names one of them and that each of them has at least one row."""
    if table.num_rows == 0:
        raise TraceError(file, "demand table has no rows")
    if table.num_rows > MAX_DEMAND_ROWS:
        raise TraceError(file, f"{table.num_rows:,} demand rows, more than {MAX_DEMAND_ROWS:,}: wider windows")
    table = conform(table, DEMAND_SCHEMA, file)
    start = column_values(table, "start_s")
    refuse_rows(~np.isfinite(start) | (start < 0) | (start > MAX_TIME_S), file, "start_s",
                f"must be a finite number of seconds in [0, {MAX_TIME_S:.0f}]")
    demand = column_values(table, "demand")
    refuse_rows(~np.isfinite(demand) | (demand < 0), file, "demand", "must be a finite number >= 0 (units per second)")
    name = table.column("service")  # by hash and integer code: thousands of services stay fast
    code = name.combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    order = np.lexsort((np.arange(len(code)), code))  # by service, file order within one
    same = code[order][1:] == code[order][:-1]
    back = np.zeros(len(code), bool)
    back[order[1:]] = same & (start[order][1:] <= start[order][:-1])
    refuse_rows(back, file, "start_s", "must increase strictly within a service (windows in time order)")
    if services is not None:
        known = services.column("service")
        refuse_rows(~_member(name, known), file, "service", f"names no service of {services_file}")
        refuse_rows(~_member(known, name), services_file, "service", f"service has no demand row in {file}")
    return table


def _member(values: pa.ChunkedArray, of: pa.ChunkedArray) -> np.ndarray:
    """Per value: is it among `of` (a hash lookup, not numpy's comparison of objects)?"""
    return pc.is_in(values, value_set=of.combine_chunks()).to_numpy(zero_copy_only=False)


def write_services(services: pa.Table, demand: pa.Table, stem: str | os.PathLike,
                   meta: ServicesMeta) -> tuple[Path, Path]:
    """Validate both tables, then write each atomically beside trace `stem` (service_paths)."""
    spath, dpath = service_paths(stem)
    services = validate_services(services, str(spath))
    demand = validate_demand(demand, str(dpath), services, str(spath))
    ours = {k.encode(): v.encode() for k, v in meta.to_metadata().items()}
    for table, path, schema in ((services, spath, SERVICES_SCHEMA), (demand, dpath, DEMAND_SCHEMA)):
        table = table.replace_schema_metadata({**(schema.metadata or {}), **ours})
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp, compression="zstd")
    return spath, dpath


def _read(path: str | os.PathLike) -> tuple[pa.Table, dict[str, str]]:
    file = str(path)
    if not os.path.exists(file):
        raise TraceError(file, "file does not exist")
    try:
        table = pq.ParquetFile(file).read()
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise TraceError(file, f"not a readable Parquet file ({one_line(exc)})") from None
    md = loopbench_metadata(table.schema.metadata, file)
    version = md.get("loopbench.schema_version", "")
    if version and version != SCHEMA_VERSION:
        raise TraceError(file, f"schema version {version} is not supported (this loopbench reads {SCHEMA_VERSION})")
    return table, md


def read_services(services_path: str | os.PathLike,
                  demand_path: str | os.PathLike) -> tuple[pa.Table, pa.Table, ServicesMeta]:
    """Read and validate a service trace's two tables; the metadata is the services file's."""
    services, md = _read(services_path)
    demand, _ = _read(demand_path)
    services = validate_services(services, str(services_path))
    demand = validate_demand(demand, str(demand_path), services, str(services_path))
    return services, demand, ServicesMeta.from_metadata(md)
