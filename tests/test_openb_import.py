"""The openb importer (harness/importers/openb.py): pod lists -> canonical trace, node lists ->
static cluster; malformed files refused with file, column, row and rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.cluster import Cluster
from harness.errors import TraceError
from harness.importers.openb import openb_node_slots, read_openb_nodes, read_openb_pods
from harness.trace import validate_table

FIX = Path(__file__).resolve().parent / "fixtures" / "openb"
TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "alibaba-gpu-v2023"
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"


def test_full_pod_list():
    t = read_openb_pods(FIX / "pods.csv")
    validate_table(t, "pods.csv")
    rows = {r["pod_id"]: r for r in t.to_pylist()}
    assert t.num_rows == 14
    r = rows["p-07"]  # file order is kept: the first row
    assert t.column("pod_id")[0].as_py() == "p-07"
    assert (r["job_id"], r["min_member"], r["submit_s"], r["duration_s"]) == ("p-07", 1, 5.0, 895.0)
    assert (r["cpu_milli"], r["memory_mib"], r["gpu_count"], r["gpu_milli"], r["gpu_models"]) == (6000, 12288, 1, 460, [])
    assert rows["p-01"]["duration_s"] is None  # no deletion_time: runs to the end
    assert rows["p-03"]["gpu_count"] == 0 and rows["p-03"]["gpu_milli"] == 0
    assert rows["p-05"]["gpu_models"] == ["V100M16", "V100M32", "V100M32"]
    assert rows["p-02"]["gpu_models"] == ["T4"]


def test_five_column_pod_list_has_no_times():
    t = read_openb_pods(FIX / "pods_short.csv")
    assert t.column("submit_s").to_pylist() == [0.0] * 4
    assert t.column("duration_s").null_count == 4
    assert t.column("gpu_count").to_pylist() == [1, 1, 8, 0]


def test_share_on_cpu_only_pod_is_dropped(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,100,0,300\n")
    assert read_openb_pods(f).column("gpu_milli").to_pylist() == [0]


BAD = [
    # (data rows, column, row, words of the rule)
    (["a,1000,100,1,500", "b,1x00,100,1,500"], "cpu_milli", 1, "integer"),
    (["a,-5,100,1,500"], "cpu_milli", 0, "integer"),
    (["a,1000,100,2,500"], "gpu_milli", 0, "num_gpu 1"),
    (["a,1000,100,1,0"], "gpu_milli", 0, "> 0"),
    (["a,1000,100,1,1200"], "gpu_milli", 0, "[0, 1000]"),
    (["a,1000,100,99,1000"], "num_gpu", 0, "[0, 64]"),
    (["a,1000,100,1,500", "a,1000,100,1,500"], "name", 1, "unique"),
    (["a,1000,100,1,500", ",1000,100,1,500"], "name", 1, "empty"),
]


@pytest.mark.parametrize("rows,column,row,rule", BAD)
def test_malformed_pod_list(tmp_path, rows, column, row, rule):
    f = tmp_path / "bad.csv"
    f.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + "\n".join(rows) + "\n")
    with pytest.raises(TraceError) as err:
        read_openb_pods(f)
    e = err.value
    assert (e.file, e.column, e.row) == (str(f), column, row)
    assert rule in e.rule
    assert str(f) in str(e) and column in str(e) and f"row {row}" in str(e)


def test_malformed_times(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text(HEADER + "\na,1,1,0,0,,LS,Running,10,5,10\n")
    with pytest.raises(TraceError, match="deletion_time.*row 0.*before creation_time"):
        read_openb_pods(f)
    f.write_text(HEADER + "\na,1,1,0,0,,LS,Running,soon,5,10\n")
    with pytest.raises(TraceError, match="creation_time.*row 0.*number of seconds"):
        read_openb_pods(f)


def test_structural_errors(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("name,cpu_milli,memory_mib,num_gpu\na,1,1,0\n")
    with pytest.raises(TraceError, match="column 'gpu_milli': required column is missing"):
        read_openb_pods(f)
    f.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,0,0\nb,1,1,0,0,7\n")
    with pytest.raises(TraceError, match="row 1: expected 5 fields, got 6"):
        read_openb_pods(f)
    f.write_text("")
    with pytest.raises(TraceError, match="empty file"):
        read_openb_pods(f)
    with pytest.raises(TraceError, match="does not exist"):
        read_openb_pods(tmp_path / "missing.csv")


def test_node_list_to_static_cluster():
    d = read_openb_nodes(FIX / "nodes.csv")
    cluster = Cluster(**d)
    assert cluster.autoscaling is False
    assert [(t.gpus, t.gpu_model, t.cpu_milli) for t in cluster.node_types] == [
        (8, "G2", 96000), (2, "T4", 104000), (4, "V100M16", 32000), (0, "", 32000)]
    assert [(p.min_size, p.max_size) for p in cluster.pools] == [(3, 3), (2, 2), (1, 1), (1, 1)]
    assert all(t.nvlink_domains == 1 and t.numa_domains == 1 for t in cluster.node_types)
    # rows n-00..n-06 -> slots: G2 pool first (rows 0, 2, 5), then T4 (1, 4), V100 (3), CPU (6)
    assert openb_node_slots(FIX / "nodes.csv").tolist() == [0, 3, 1, 5, 4, 2, 6]


def test_malformed_node_list(tmp_path):
    f = tmp_path / "nodes.csv"
    f.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,96000,1024,8,G2\nn1,96000,1024,8,\n")
    with pytest.raises(TraceError) as err:
        read_openb_nodes(f)
    assert (err.value.column, err.value.row) == ("model", 1)
    f.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,0,1024,8,G2\n")
    with pytest.raises(TraceError, match="cpu_milli.*row 0"):
        read_openb_nodes(f)


def shared_files(pattern: str) -> list[Path]:
    if not TRACES.exists():
        pytest.skip(f"public traces not found at {TRACES} (the shared folder beside the repo)")
    files = sorted(TRACES.glob(pattern))
    assert files, f"no {pattern} under {TRACES}"
    return files


@pytest.mark.shared_traces
def test_every_shared_pod_list_imports():
    for f in shared_files("openb_pod_list_*.csv"):
        t = validate_table(read_openb_pods(f), str(f))
        assert 7000 <= t.num_rows <= 11000, f
        d = t.column("duration_s").to_numpy(zero_copy_only=False)
        assert not np.any(np.asarray(d, float) < 0)


@pytest.mark.shared_traces
def test_every_shared_node_list_imports():
    for f in shared_files("openb_node_list_*.csv"):
        cluster = Cluster(**read_openb_nodes(f))
        assert cluster.n_slots == len(openb_node_slots(f))
    gpu = Cluster(**read_openb_nodes(TRACES / "openb_node_list_gpu_node.csv"))
    count = lambda attr: sum(getattr(t, attr) * p.max_size for p in gpu.pools  # noqa: E731
                             for t in gpu.node_types if t.name == p.node_type)
    assert (gpu.n_slots, count("gpus"), count("cpu_milli")) == (1213, 6212, 107_018_000)
