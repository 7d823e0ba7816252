"""Service traces (harness/services/trace.py): the two tables round-trip, and every broken
rule is refused with the file, column, first bad row and rule (the malformed cases live here,
written to tmp_path, not in tests/malformed/)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.errors import TraceError
from harness.services.trace import (
    ServicesMeta,
    demand_from_columns,
    read_services,
    service_paths,
    services_from_columns,
    validate_demand,
    validate_services,
    write_services,
)
from harness.trace import TraceMeta, read_trace, table_from_columns, write_trace

META = ServicesMeta(source="loopbench tests", licence="CC0-1.0", time_origin="trace start", demand_unit="tokens/s")


def services(**over) -> dict:
    """Three valid services: a whole GPU, two NVLink GPUs, a partition profile."""
    cols = {
        "service": ["chat", "large", "small"], "cpu_milli": [4000, 24000, 2000],
        "memory_mib": [16384, 200000, 8192], "gpu_count": [1, 2, 1], "gpu_milli": [1000, 1000, 0],
        "gpu_partition": [None, None, "3g.40gb"], "gpu_models": [["L4"], ["H100"], ["H100"]],
        "gpus_same_nvlink": [False, True, False], "capacity_per_replica": [500.0, 2600.0, 300.0],
        "cold_start_s": [60.0, 180.0, 45.0], "min_replicas": [1, 0, 2], "max_replicas": [10, 8, 2],
        "priority": [1000, 1000, 500], "queue": ["prod", "prod", "batch"],
    }
    cols.update(over)
    return cols


def demand(**over) -> dict:
    """Windows of each service, interleaved as a writer might list them."""
    cols = {"service": ["chat", "large", "small", "chat", "large", "chat"],
            "start_s": [0.0, 0.0, 0.0, 60.0, 30.0, 120.0], "demand": [100.0, 0.0, 50.0, 250.0, 900.0, 0.0]}
    cols.update(over)
    return cols


def test_round_trip_keeps_values_defaults_and_metadata(tmp_path):
    cols = services()
    del cols["min_replicas"]  # defaults to HPA's minReplicas 1
    spath, dpath = write_services(services_from_columns(cols), demand_from_columns(demand()),
                                  tmp_path / "X.parquet", META)
    assert (spath, dpath) == service_paths(tmp_path / "X") == (tmp_path / "X.services.parquet",
                                                               tmp_path / "X.demand.parquet")
    s, d, meta = read_services(spath, dpath)
    assert s.column("min_replicas").to_pylist() == [1, 1, 1]
    assert s.column("gpu_partition").to_pylist() == [None, None, "3g.40gb"]
    assert d.column("demand").to_pylist() == [100.0, 0.0, 50.0, 250.0, 900.0, 0.0]
    assert meta == META
    assert pq.read_schema(dpath).metadata[b"loopbench.demand_unit"] == b"tokens/s"


def test_an_empty_pods_table_is_a_valid_trace_only_when_allowed(tmp_path):
    """A services-only workload: no pods beside its services (harness/trace.py's allow_empty)."""
    empty = table_from_columns({"pod_id": [], "job_id": [], "submit_s": [], "cpu_milli": [], "memory_mib": [],
                                "gpu_count": [], "gpu_milli": []})
    meta = TraceMeta(source="t", licence="CC0-1.0", time_origin="trace start")
    with pytest.raises(TraceError, match="trace has no rows"):
        write_trace(empty, tmp_path / "X.parquet", meta)
    write_trace(empty, tmp_path / "X.parquet", meta, allow_empty=True)
    assert read_trace(tmp_path / "X.parquet", allow_empty=True)[0].num_rows == 0
    with pytest.raises(TraceError, match="trace has no rows"):
        read_trace(tmp_path / "X.parquet")


#: name -> (services overrides, demand overrides, file ("services" | "demand"), column, row, rule)
MALFORMED = {
    "duplicate_service": ({"service": ["chat", "large", "chat"]}, {}, "services", "service", 2, "unique"),
    "null_service": ({"service": ["chat", None, "small"]}, {}, "services", "service", 1, "must not be null"),
    "text_cpu": ({"cpu_milli": ["4000", "lots", "2000"]}, {}, "services", "cpu_milli", 1, "expected type int64"),
    "fractional_gpu_count": ({"gpu_count": [1.0, 1.5, 1.0]}, {}, "services", "gpu_count", 1, "expected type int32"),
    "share_of_two_gpus": ({"gpu_milli": [1000, 500, 0]}, {}, "services", "gpu_milli", 1, "fractional share"),
    "partition_with_whole_gpu": ({"gpu_milli": [1000, 1000, 1000]}, {}, "services", "gpu_partition", 2,
                                 "partition profile needs gpu_count 1"),
    "null_model_name": ({"gpu_models": [["L4"], ["H100", None], []]}, {}, "services", "gpu_models", 1,
                        "must not be null"),
    "zero_capacity": ({"capacity_per_replica": [500.0, 0.0, 300.0]}, {}, "services", "capacity_per_replica", 1,
                      "> 0"),
    "nan_capacity": ({"capacity_per_replica": [500.0, 2600.0, float("nan")]}, {}, "services",
                     "capacity_per_replica", 2, "finite"),
    "negative_cold_start": ({"cold_start_s": [60.0, -1.0, 45.0]}, {}, "services", "cold_start_s", 1, "seconds in [0"),
    "infinite_cold_start": ({"cold_start_s": [float("inf"), 1.0, 45.0]}, {}, "services", "cold_start_s", 0,
                            "finite"),
    "negative_min": ({"min_replicas": [1, -1, 2]}, {}, "services", "min_replicas", 1, "must be in [0"),
    "max_below_min": ({"max_replicas": [10, 8, 1]}, {}, "services", "max_replicas", 2, ">= max(1, min_replicas)"),
    "max_zero": ({"min_replicas": [1, 0, 2], "max_replicas": [10, 0, 2]}, {}, "services", "max_replicas", 1,
                 ">= max(1, min_replicas)"),
    "huge_max": ({"max_replicas": [10, 8, 10**6]}, {}, "services", "max_replicas", 2, "<= 100,000"),
    "unknown_service": ({}, {"service": ["chat", "large", "small", "chat", "lrage", "chat"]}, "demand",
                        "service", 4, "names no service of"),
    "service_without_demand": ({}, {"service": ["chat", "large", "chat", "chat", "large", "large"],
                                    "start_s": [0.0, 0.0, 30.0, 60.0, 30.0, 120.0]},
                               "services", "service", 2, "has no demand row in"),
    "negative_start": ({}, {"start_s": [0.0, 0.0, -5.0, 60.0, 30.0, 120.0]}, "demand", "start_s", 2,
                       "finite number of seconds"),
    "start_not_increasing": ({}, {"start_s": [0.0, 0.0, 0.0, 60.0, 30.0, 60.0]}, "demand", "start_s", 5,
                             "increase strictly within a service"),
    "start_repeated_in_service": ({}, {"start_s": [0.0, 30.0, 0.0, 60.0, 30.0, 120.0]}, "demand", "start_s", 4,
                                  "increase strictly within a service"),
    "negative_demand": ({}, {"demand": [100.0, 0.0, 50.0, -1.0, 900.0, 0.0]}, "demand", "demand", 3, ">= 0"),
    "nan_demand": ({}, {"demand": [100.0, float("nan"), 50.0, 1.0, 900.0, 0.0]}, "demand", "demand", 1, "finite"),
    "null_demand": ({}, {"demand": [100.0, 0.0, None, 1.0, 900.0, 0.0]}, "demand", "demand", 2, "must not be null"),
    "text_demand": ({}, {"demand": ["100", "0", "50", "x", "9", "0"]}, "demand", "demand", 3,
                    "expected type double"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_service_trace_is_refused_with_file_column_row_rule(name, tmp_path):
    over_s, over_d, which, column, row, rule = MALFORMED[name]
    spath, dpath = service_paths(tmp_path / "X")
    pq.write_table(pa.table(services(**over_s)), spath)  # raw: the point is that it is invalid
    pq.write_table(pa.table(demand(**over_d)), dpath)
    with pytest.raises(TraceError) as err:
        read_services(spath, dpath)
    e = err.value
    assert (e.file, e.column, e.row) == (str(spath if which == "services" else dpath), column, row), str(e)
    assert rule in e.rule, str(e)
    assert "\n" not in str(e)


def test_services_whose_replicas_add_up_past_the_slots_a_replay_holds_are_refused():
    """11 services of 100,000 replicas each (each within its bound) make 1.1 million slots."""
    n = 11
    table = services_from_columns({"service": [f"s{i}" for i in range(n)], "cpu_milli": [1000] * n,
                                   "memory_mib": [1024] * n, "gpu_count": [1] * n, "gpu_milli": [1000] * n,
                                   "capacity_per_replica": [10.0] * n, "cold_start_s": [60.0] * n,
                                   "max_replicas": [100_000] * n})
    with pytest.raises(TraceError) as err:
        validate_services(table, "S.parquet")
    assert err.value.column == "max_replicas" and "add up to 1,100,000 over 11 services" in err.value.rule


@pytest.mark.parametrize("table, column, rule", [
    (lambda s, d: (s.drop(["capacity_per_replica"]), d), "capacity_per_replica", "required column is missing"),
    (lambda s, d: (s.append_column("colour", pa.array(["r", "g", "b"])), d), "colour", "unknown column"),
    (lambda s, d: (s, d.drop(["demand"])), "demand", "required column is missing"),
    (lambda s, d: (s.slice(0, 0), d), None, "services table has no rows"),
    (lambda s, d: (s, d.slice(0, 0)), None, "demand table has no rows"),
])
def test_missing_unknown_columns_and_empty_tables_are_refused(table, column, rule, tmp_path):
    s, d = table(pa.table(services()), pa.table(demand()))
    spath, dpath = service_paths(tmp_path / "X")
    pq.write_table(s, spath)
    pq.write_table(d, dpath)
    with pytest.raises(TraceError) as err:
        read_services(spath, dpath)
    assert err.value.column == column and rule in err.value.rule, str(err.value)


def test_unreadable_missing_and_future_files_are_one_line_errors(tmp_path):
    spath, dpath = service_paths(tmp_path / "X")
    with pytest.raises(TraceError, match="file does not exist"):
        read_services(spath, dpath)
    spath.write_text("service,cpu_milli\nchat,1\n")
    pq.write_table(pa.table(demand()), dpath)
    with pytest.raises(TraceError, match="not a readable Parquet file") as err:
        read_services(spath, dpath)
    assert "\n" not in str(err.value)
    future = pa.table(services()).replace_schema_metadata({b"loopbench.schema_version": b"9"})
    pq.write_table(future, spath)
    with pytest.raises(TraceError, match="schema version 9 is not supported"):
        read_services(spath, dpath)


def test_invalid_tables_are_not_written(tmp_path):
    """Both tables are validated before either file is written: no half a service trace."""
    bad = demand_from_columns(demand(demand=[1.0, 2.0, 3.0, -4.0, 5.0, 6.0]))
    with pytest.raises(TraceError, match="demand"):
        write_services(services_from_columns(services()), bad, tmp_path / "X", META)
    assert list(tmp_path.iterdir()) == []


def test_thousands_of_services_are_validated_in_well_under_a_second_each():
    """2,000 services x 345 windows (the Azure trace copied 1,000 times: 690,000 demand rows).
    Matched by hash, this takes about 0.2 s; numpy's comparisons of object arrays took 26 s, while
    `import azure-llm` and the replay's build printed nothing. The bound leaves room for a loaded
    machine (calib.py 3)."""
    import time

    n, windows = 2000, 345
    names = [f"service-{i:04d}" for i in range(n)]
    services = services_from_columns({"service": names, "cpu_milli": [1000] * n, "memory_mib": [1024] * n,
                                      "gpu_count": [1] * n, "gpu_milli": [1000] * n,
                                      "capacity_per_replica": [10.0] * n, "cold_start_s": [60.0] * n,
                                      "max_replicas": [4] * n})
    demand = demand_from_columns({"service": np.repeat(np.array(names, object), windows),
                                  "start_s": np.tile(np.arange(windows) * 10.0, n), "demand": np.ones(n * windows)})
    started = time.perf_counter()
    validate_demand(demand, "D.parquet", validate_services(services, "S.parquet"), "S.parquet")
    assert time.perf_counter() - started < 5.0
