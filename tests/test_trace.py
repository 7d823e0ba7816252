"""The canonical trace refuses bad input with file, column, row and rule."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.errors import TraceError
from harness.trace import GANG_AGREEMENT, SCHEMA, TraceMeta, read_trace, table_from_columns, write_trace

META = TraceMeta(source="test", licence="CC0-1.0", time_origin="trace start")


def good(n: int = 3, **over) -> dict:
    cols = {
        "pod_id": [f"p{i}" for i in range(n)], "job_id": [f"j{i}" for i in range(n)],
        "submit_s": [float(i) for i in range(n)], "duration_s": [60.0] * n,
        "cpu_milli": [1000] * n, "memory_mib": [1024] * n, "gpu_count": [1] * n, "gpu_milli": [1000] * n,
    }
    cols.update(over)
    return cols


def test_round_trip_keeps_schema_and_metadata(tmp_path):
    path = write_trace(table_from_columns(good()), tmp_path / "t.parquet", META)
    table, meta = read_trace(path)
    assert table.schema.equals(SCHEMA, check_metadata=False)
    assert meta == META
    assert pq.read_schema(path).metadata[b"loopbench.schema_version"] == b"1"


@pytest.mark.parametrize("over, column, row, rule", [
    ({"submit_s": [0.0, -1.0, 2.0]}, "submit_s", 1, "finite number"),
    ({"submit_s": [0.0, float("nan"), 2.0]}, "submit_s", 1, "finite number"),
    ({"duration_s": [60.0, 60.0, -5.0]}, "duration_s", 2, "finite seconds"),
    ({"gpu_milli": [1000, 1500, 1000]}, "gpu_milli", 1, "[0, 1000]"),
    ({"gpu_count": [2, 1, 1], "gpu_milli": [500, 1000, 1000]}, "gpu_milli", 0, "only allowed with gpu_count 1"),
    ({"gpu_count": [0, 1, 1], "gpu_milli": [500, 1000, 1000]}, "gpu_milli", 0, "must be 0 when gpu_count is 0"),
    ({"pod_id": ["a", "b", "a"]}, "pod_id", 2, "unique"),
    ({"cpu_milli": [1000, 10**12, 1000]}, "cpu_milli", 1, "must be in"),
    ({"job_id": ["g", "g", "x"], "min_member": [2, 3, 1]}, "min_member", 1, "disagree"),
    ({"min_member": [1, 2, 1]}, "min_member", 1, "fewer pods than its min_member"),
    ({"gang_locality": ["none", "planet", "none"]}, "gang_locality", 1, "must be one of"),
    ({"gpu_partition": [None, "1g.10gb", None]}, "gpu_partition", 1, "gpu_milli 0"),
])
def test_bad_values_are_refused_with_column_row_and_rule(over, column, row, rule):
    with pytest.raises(TraceError) as err:
        write_trace(table_from_columns(good(**over)), "/nonexistent/never-written.parquet", META)
    e = err.value
    assert (e.column, e.row) == (column, row) and rule in e.rule
    assert "never-written.parquet" in str(e) and f"row {row}" in str(e)


def test_missing_extra_and_mistyped_columns(tmp_path):
    table = table_from_columns(good())
    pq.write_table(table.drop(["cpu_milli"]), tmp_path / "missing.parquet")
    with pytest.raises(TraceError, match="missing.parquet, column 'cpu_milli': required column is missing"):
        read_trace(tmp_path / "missing.parquet")
    pq.write_table(table.append_column("colour", pa.array(["r", "g", "b"])), tmp_path / "extra.parquet")
    with pytest.raises(TraceError, match="column 'colour': unknown column"):
        read_trace(tmp_path / "extra.parquet")
    bad = table.set_column(SCHEMA.get_field_index("cpu_milli"), "cpu_milli", pa.array(["1", "x", "3"]))
    pq.write_table(bad, tmp_path / "typed.parquet")
    with pytest.raises(TraceError, match="column 'cpu_milli', row 1: expected type int64, got string 'x'"):
        read_trace(tmp_path / "typed.parquet")


def test_empty_truncated_and_absent_files(tmp_path):
    empty = table_from_columns(good()).slice(0, 0)
    pq.write_table(empty, tmp_path / "empty.parquet")
    with pytest.raises(TraceError, match="trace has no rows"):
        read_trace(tmp_path / "empty.parquet")
    write_trace(table_from_columns(good()), tmp_path / "ok.parquet", META)
    data = (tmp_path / "ok.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="cut.parquet: not a readable Parquet file"):
        read_trace(tmp_path / "cut.parquet")
    with pytest.raises(TraceError, match="file does not exist"):
        read_trace(tmp_path / "absent.parquet")


def test_failed_write_leaves_no_file(tmp_path):
    with pytest.raises(TraceError):
        write_trace(table_from_columns(good(submit_s=[0.0, -1.0, 0.0])), tmp_path / "t.parquet", META)
    assert list(tmp_path.iterdir()) == []


def test_a_jobs_pods_may_arrive_apart_but_agree_on_the_rest(tmp_path):
    """A gang's pods may have different submit_s (each arrives at its own; the job with its
    first); every other column of GANG_AGREEMENT must still be one value per job."""
    gang = {"job_id": ["g", "g", "g"], "min_member": [3, 3, 3], "submit_s": [0.0, 0.0, 100.0]}
    table, _ = read_trace(write_trace(table_from_columns(good(**gang)), tmp_path / "apart.parquet", META))
    assert table.column("submit_s").to_pylist() == [0.0, 0.0, 100.0]
    assert "submit_s" not in GANG_AGREEMENT
    disagree = {"min_member": [3, 3, 2], "priority": [0, 0, 5], "queue": ["q", "q", "r"],
                "gang_locality": ["rack", "rack", "block"]}
    assert set(disagree) == set(GANG_AGREEMENT)
    for column, values in disagree.items():
        with pytest.raises(TraceError) as err:
            write_trace(table_from_columns(good(**{**gang, column: values})), tmp_path / "bad.parquet", META)
        assert (err.value.column, err.value.row) == (column, 2) and "members of job 'g' disagree" in err.value.rule
