"""Importers: every format's fixture (written from the published schemas, with their quirks),
located errors for malformed input, node lists to loadable clusters, the import CLI, and the
public files in ../shared/traces read in place."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml

from harness.cluster import Cluster
from harness.errors import TraceError
from harness.importers import philly
from harness.importers.acme import read_acme
from harness.importers.alibaba_spot import read_spot_jobs, read_spot_nodes
from harness.importers.cli import main
from harness.importers.common import MEM_PER_CPU_MIB, autoscaled_cluster
from harness.importers.dlrm import read_dlrm
from harness.importers.helios import read_helios
from harness.importers.pai import read_pai, read_pai_machines
from harness.trace import read_trace, validate_table

FIX = Path(__file__).parent / "fixtures"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"public traces not found at {SHARED} (../shared/traces)")


def rows(table: pa.Table) -> dict[str, dict]:
    return {r["pod_id"]: r for r in table.to_pylist()}


def load_cluster(config: dict) -> Cluster:
    return Cluster(**{k: v for k, v in config.items() if k != "_target_"})


def assert_gangs_whole(table: pa.Table) -> None:
    validate_table(table, "test")
    job = table.column("job_id").to_numpy(zero_copy_only=False)
    _, counts = np.unique(job, return_counts=True)
    assert set(table.column("min_member").to_pylist()) <= set(counts.tolist())


# ---- formats ------------------------------------------------------------------------------

def test_helios_gangs_times_and_drops():
    r = read_helios(FIX / "helios" / "cluster_log.csv")
    assert (r.rows_read, r.rows_kept) == (7, 5)
    assert r.dropped == {"zero duration (never ran)": 1, "node_num missing or < 1": 1}
    assert r.notes["gpu_num not divisible by node_num: rounded up"] == 1
    assert r.meta.time_origin == "2020-03-31T16:00:00Z"  # 00:00 in Asia/Shanghai
    p = rows(r.table)
    assert p["j2-0"]["min_member"] == p["j2-1"]["min_member"] == 2
    assert (p["j2-0"]["gpu_count"], p["j2-0"]["cpu_milli"], p["j2-0"]["submit_s"]) == (8, 32000, 600.0)
    assert p["j2-0"]["memory_mib"] == 32 * MEM_PER_CPU_MIB
    assert p["j5-0"]["gpu_count"] == 2  # 3 GPUs on 2 nodes rounded up
    assert p["j6-0"]["duration_s"] is None and p["j6-0"]["queue"] == "default"  # "NA" duration and vc
    assert_gangs_whole(r.table)


def test_acme_offsets_and_kalos_columns():
    seren = read_acme(FIX / "acme" / "trace_seren.csv")
    p = rows(seren.table)
    assert seren.meta.time_origin == "2023-02-28T16:00:00Z"
    assert p["s4-0"]["submit_s"] == 1800.0  # 16:30 UTC is 00:30 at +08:00
    assert p["s1-0"]["submit_s"] == 18 * 60 + 22
    assert len([k for k in p if k.startswith("s2-")]) == 4 and p["s2-0"]["gpu_count"] == 8
    assert p["s1-0"]["queue"] == "ua"
    kalos = read_acme(FIX / "acme" / "trace_kalos.csv")
    k = rows(kalos.table)
    assert len([x for x in k if x.startswith("k1-")]) == 128 and k["k1-0"]["gpu_count"] == 8
    assert k["k1-0"]["memory_mib"] == 1800 * 1024
    assert k["k3-0"]["memory_mib"] == int(np.ceil(500.5 * 1024))
    assert k["k2-0"]["memory_mib"] == 32 * MEM_PER_CPU_MIB  # "NA" memory falls back per core
    assert kalos.notes == {"no memory: MEM_PER_CPU_MIB per core": 1}


def test_pai_headerless_tables_shares_and_users():
    r = read_pai([FIX / "pai" / "pai_task_table.csv", FIX / "pai" / "pai_job_table.csv"])
    assert (r.rows_read, r.rows_kept) == (8, 4)
    assert r.dropped == {"no start_time (never started)": 1, "inst_num missing or < 1": 1,
                         "negative duration": 1, "zero duration (never ran)": 1}
    p = rows(r.table)
    assert [p[f"a1b2/worker-{i}"]["min_member"] for i in range(4)] == [4] * 4
    w = p["a1b2/worker-0"]
    assert (w["gpu_count"], w["gpu_milli"], w["cpu_milli"], w["memory_mib"], w["gpu_models"]) == (1, 1000, 6000, 30000, ["V100"])
    assert w["queue"] == "alice" and w["duration_s"] == 3600.0 and w["submit_s"] == 0.0
    ps = p["a1b2/ps-0"]
    assert (ps["gpu_count"], ps["gpu_milli"], ps["gpu_models"]) == (0, 0, [])
    share = p["c3d4/tensorflow-0"]
    assert (share["gpu_count"], share["gpu_milli"], share["gpu_models"]) == (1, 500, [])  # MISC = any model
    big = p["e5f6/PyTorchWorker-1"]
    assert (big["gpu_count"], big["duration_s"], big["gpu_models"]) == (8, None, ["V100M32"])


def test_pai_accepts_a_header_line(tmp_path):
    src = tmp_path / "pai_task_table.csv"
    header = (SHARED / "alibaba-gpu-v2020" / "pai_task_table.header")
    line = header.read_text().strip() if header.exists() else \
        "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type"
    src.write_text(line + "\n" + (FIX / "pai" / "pai_task_table.csv").read_text())
    assert read_pai([src]).table.equals(read_pai([FIX / "pai" / "pai_task_table.csv"]).table)


def test_philly_quirks():
    r = philly.read_philly([FIX / "philly" / "cluster_job_log"])
    assert r.rows_read == 7
    assert r.dropped == {"no attempts (never ran)": 2, "no attempt started": 1, "ends before it starts": 1}
    p = rows(r.table)
    assert r.meta.time_origin == "2017-10-03T17:00:00Z"  # 10:00 PDT
    assert [p[f"application_1_0001-{i}"]["gpu_count"] for i in range(2)] == [4, 2]  # members differ
    assert p["application_1_0001-0"]["min_member"] == 2
    # the last started attempt is replayed; its end lies in the repeated fall-back hour
    assert p["application_1_0003-0"]["gpu_count"] == 8 and p["application_1_0003-0"]["duration_s"] == 1500.0
    late = p["application_1_0004-0"]
    assert late["duration_s"] is None  # attempt with a null end: still running
    assert late["submit_s"] == 59 * 86400  # Oct 3 PDT to Dec 1 PST: 59 days, DST-aware
    assert late["queue"] == "vc-b"


def test_philly_streams_in_small_chunks(monkeypatch):
    whole = philly.read_philly([FIX / "philly" / "cluster_job_log"]).table
    monkeypatch.setattr(philly, "CHUNK_BYTES", 7)
    assert philly.read_philly([FIX / "philly" / "cluster_job_log"]).table.equals(whole)


def test_spot_jobs_priority_models_and_shares():
    r = read_spot_jobs(FIX / "alibaba_spot" / "job_info_df.csv")
    assert r.dropped == {"zero duration (never ran)": 1, "worker_num missing or < 1": 1}
    p = rows(r.table)
    assert [p[f"job-1-{i}"]["min_member"] for i in range(4)] == [4] * 4
    assert (p["job-1-0"]["priority"], p["job-1-0"]["gpu_models"], p["job-1-0"]["queue"]) == (1, ["A100-SXM4-80GB"], "org-a")
    assert (p["job-2-0"]["priority"], p["job-2-0"]["submit_s"]) == (0, 30.0)
    assert (p["job-3-0"]["gpu_count"], p["job-3-0"]["gpu_milli"], p["job-3-0"]["gpu_models"]) == (1, 500, [])
    assert p["job-3-0"]["duration_s"] is None


def test_dlrm_instances_before_the_window_and_still_running():
    r = read_dlrm(FIX / "dlrm" / "disaggregated_DLRM_trace.csv")
    assert r.dropped == {"zero duration (never ran)": 1}
    p = rows(r.table)
    assert (p["instance_0-0"]["submit_s"], p["instance_0-0"]["duration_s"]) == (0.0, None)
    assert (p["instance_1-0"]["submit_s"], p["instance_1-0"]["duration_s"]) == (0.0, 3600.0)
    assert (p["instance_2-0"]["submit_s"], p["instance_2-0"]["duration_s"]) == (100.0, None)
    assert p["instance_3-0"]["duration_s"] == pytest.approx(4800.0)
    hn = p["instance_0-0"]
    assert (hn["gpu_count"], hn["cpu_milli"], hn["memory_mib"], hn["queue"], hn["min_member"]) == (1, 12000, 120 * 1024, "app_0", 1)


# ---- malformed input ------------------------------------------------------------------------

def test_bad_number_names_file_column_and_row(tmp_path):
    src = tmp_path / "cluster_log.csv"
    lines = (FIX / "helios" / "cluster_log.csv").read_text().splitlines()
    lines[3] = lines[3].replace(",0,4,1,", ",zero,4,1,")  # data row 2, gpu_num
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as err:
        read_helios(src)
    assert (err.value.file, err.value.column, err.value.row) == (str(src), "gpu_num", 2)
    assert "not a number: 'zero'" in str(err.value)


def test_ragged_csv_line_names_the_row(tmp_path):
    src = tmp_path / "job_info_df.csv"
    lines = (FIX / "alibaba_spot" / "job_info_df.csv").read_text().splitlines()
    lines[4] = lines[4].rsplit(",", 1)[0]  # data row 3 loses a field
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as err:
        read_spot_jobs(src)
    assert err.value.row == 3 and "Expected 9 columns" in err.value.rule


def test_bad_datetime_and_missing_column(tmp_path):
    src = tmp_path / "trace_seren.csv"
    text = (FIX / "acme" / "trace_seren.csv").read_text()
    src.write_text(text.replace("2023-03-01 01:00:00+08:00", "yesterday"))
    with pytest.raises(TraceError) as err:
        read_acme(src)
    assert (err.value.column, err.value.row) == ("submit_time", 2)
    src.write_text(text.replace("node_num,", "nodes,"))
    with pytest.raises(TraceError, match="required column is missing") as err:
        read_acme(src)
    assert err.value.column == "node_num"


def test_malformed_philly_json_names_the_job(tmp_path):
    src = tmp_path / "cluster_job_log"
    src.write_text((FIX / "philly" / "cluster_job_log").read_text().replace('"jobid": "application_1_0004",', '"jobid": ,'))
    with pytest.raises(TraceError, match="malformed JSON") as err:
        philly.read_philly([src])
    assert err.value.row == 3
    src.write_text((FIX / "philly" / "cluster_job_log").read_text().replace("2017-12-01 09:00:10", "12/01/2017"))
    with pytest.raises(TraceError) as err:
        philly.read_philly([src])
    assert (err.value.column, err.value.row) == ("start_time", 3)


def test_cli_prints_one_line_and_returns_1(tmp_path, capsys):
    src = tmp_path / "cluster_log.csv"
    src.write_text((FIX / "helios" / "cluster_log.csv").read_text().replace(",16,64,2,", ",16,64,1.5,"))
    out = tmp_path / "t.parquet"
    assert main(["helios", str(src), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "column 'node_num', row 1" in err and "whole number" in err
    assert not out.exists()


# ---- node lists and the CLI -------------------------------------------------------------------

def test_node_lists_become_loadable_clusters():
    spot = read_spot_nodes(FIX / "alibaba_spot" / "node_info_df.csv")
    c = load_cluster(spot)
    assert not c.autoscaling and c.n_slots == 6
    assert all(p.min_size == p.max_size for p in c.pools)
    a100 = next(t for t in c.node_types if t.gpu_model == "A100-SXM4-80GB")
    assert (a100.gpus, a100.cpu_milli, a100.memory_mib) == (8, 128000, 128 * MEM_PER_CPU_MIB)
    scaled = load_cluster(autoscaled_cluster(spot))
    assert scaled.autoscaling and scaled.n_slots == 6 and all(p.min_size == 0 for p in scaled.pools)
    assert all(p.price_on_demand > 0 and p.boot_delay.max_s >= p.boot_delay.min_s > 0 for p in scaled.pools)
    ph = load_cluster(philly.read_philly_machines(FIX / "philly" / "cluster_machine_list"))
    assert sorted(ph.models) == ["philly-12gb", "philly-24gb"] and ph.n_slots == 5


def test_cli_writes_trace_cluster_and_summary(tmp_path, capsys):
    out, cl = tmp_path / "spot.parquet", tmp_path / "spot.yaml"
    rc = main(["alibaba_spot", str(FIX / "alibaba_spot" / "job_info_df.csv"), "-o", str(out),
               "--nodes", str(FIX / "alibaba_spot" / "node_info_df.csv"), "--cluster-out", str(cl), "--autoscaled"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "rows read" in text and "worker_num missing or < 1" in text and "zero duration" in text
    table, meta = read_trace(out)
    assert table.num_rows == 6 and "Alibaba GPU spot" in meta.source
    from hydra.utils import instantiate

    cluster = instantiate(yaml.safe_load(cl.read_text()))
    assert isinstance(cluster, Cluster) and cluster.autoscaling


def test_cli_needs_output_and_refuses_unknown_node_lists(tmp_path, capsys):
    assert main(["helios", str(FIX / "helios" / "cluster_log.csv")]) == 1
    assert main(["helios", str(FIX / "helios" / "cluster_log.csv"), "-o", str(tmp_path / "t.parquet"),
                 "--nodes", "x.csv"]) == 1
    assert "publishes no node list" in capsys.readouterr().err


# ---- the public traces, in place ---------------------------------------------------------------

@pytest.mark.shared_traces
@shared
def test_shared_pai_machine_spec(tmp_path):
    spec = SHARED / "alibaba-gpu-v2020" / "pai_machine_spec.csv"
    c = load_cluster(read_pai_machines(spec))
    assert c.n_slots == 1897 and not c.autoscaling
    gpus = {t.name: t.gpus for t in c.node_types}
    assert sum(p.max_size * gpus[p.node_type] for p in c.pools) == 798 * 2 + 497 * 2 + (280 + 135 + 59 + 45) * 8
    assert set(c.models) == {"P100", "T4", "MISC", "V100M32", "V100"}
    out = tmp_path / "pai.yaml"
    assert main(["pai", "--nodes", str(spec), "--cluster-out", str(out)]) == 0
    assert load_cluster(yaml.safe_load(out.read_text())).n_slots == 1897


@pytest.mark.shared_traces
@shared
def test_shared_spot_node_list(tmp_path):
    nodes = SHARED / "alibaba-v2026-spot-gpu" / "node_info_df.csv"
    static = read_spot_nodes(nodes)
    assert load_cluster(static).n_slots == 4278
    scaled = load_cluster(autoscaled_cluster(static))
    assert scaled.n_slots == 4278 and scaled.autoscaling
    assert {"H800", "A100-SXM4-80GB", "A10"} <= set(scaled.models)


@pytest.mark.shared_traces
@shared
def test_shared_dlrm_trace(tmp_path, capsys):
    src = SHARED / "alibaba-gpu-v2025" / "disaggregated_DLRM_trace.csv"
    out = tmp_path / "dlrm.parquet"
    assert main(["dlrm", str(src), "-o", str(out)]) == 0
    assert "23,871 instances" in capsys.readouterr().out
    table, _ = read_trace(out)
    r = read_dlrm(src)
    assert table.num_rows == r.rows_kept == 23871 - sum(r.dropped.values())
    assert r.dropped.keys() <= {"zero duration (never ran)", "negative duration"}
    assert set(table.column("gpu_count").to_pylist()) == {0, 1}


@pytest.mark.shared_traces
@shared
def test_shared_openb_with_fgd_inflation(tmp_path, capsys):
    base = SHARED / "alibaba-gpu-v2023"
    out = tmp_path / "openb.parquet"
    assert main(["openb", str(base / "openb_pod_list_default.csv"), "-o", str(out), "--autoscaled",
                 "--nodes", str(base / "openb_node_list_gpu_node.csv"), "--inflate", "1.3", "--seed", "42"]) == 0
    table, _ = read_trace(out)
    from harness.transforms import gpu_milli_requested

    requested = gpu_milli_requested(table).sum()
    assert 1.3 * 6212 * 1000 - 8000 < requested <= 1.3 * 6212 * 1000
    cluster = load_cluster(yaml.safe_load((tmp_path / "openb.cluster.yaml").read_text()))
    assert cluster.autoscaling and cluster.n_slots == 1213
