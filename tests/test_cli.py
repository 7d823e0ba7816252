"""The `loopbench` command end to end, as a user runs it (subprocesses in a scratch folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: PYTHONPATH passed on, so that a worktree sharing another checkout's venv runs its own code
ENV = {"LOOPBENCH_CONF": str(ROOT / "conf"), "PATH": "/usr/bin:/bin",
       **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}


def loopbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=ENV, timeout=600)


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trace") / "small.parquet"
    r = loopbench("generate", "workload.n_jobs=80", "workload.span_s=14400", f"out={out}", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return out


def test_replay_writes_a_complete_run_directory(tmp_path, small_trace):
    r = loopbench("replay", f"trace.path={small_trace}", "loop=merged", f"hydra.run.dir={tmp_path}/run",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    run = tmp_path / "run"
    for name in ("metrics.parquet", "jobs.parquet", "nodes.parquet", "timeline.parquet", "config.yaml"):
        assert (run / name).exists(), name
    m = pl.read_parquet(run / "metrics.parquet")
    assert m.height == 1 and m["loop"][0] == "merged"
    for col in ("idle_accel_hours", "idle_accel_hours_booting", "idle_accel_hours_unallocated",
                "idle_accel_hours_gang_wait", "idle_accel_hours_committed", "frag_ratio", "frag_amount",
                "gang_latency_p50_s", "gang_latency_p90_s", "gang_latency_p99_s", "gang_latency_max_s",
                "gangs_never_started", "cost_usd", "accel_utilization", "nodes_never_used",
                "pending_s_shortage", "pending_s_topology", "pending_s_fragmentation", "pending_s_gang_wait",
                "pending_s_booting"):
        assert col in m.columns, col
    jobs = pl.read_parquet(run / "jobs.parquet")
    assert jobs.height == 80
    assert not list(run.glob(".*.tmp")), "no temp files left behind"


def test_replay_multirun_sweeps_loops(tmp_path, small_trace):
    r = loopbench("replay", "-m", f"trace.path={small_trace}", "loop=separate,merged", "horizon_s=7200",
                  f"hydra.sweep.dir={tmp_path}/sweep", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    runs = sorted((tmp_path / "sweep").glob("*/metrics.parquet"))
    assert len(runs) == 2
    assert {pl.read_parquet(p)["loop"][0] for p in runs} == {"separate", "merged"}


def test_compare_prints_all_loops_side_by_side(tmp_path, small_trace):
    r = loopbench("compare", f"trace.path={small_trace}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "separate_provreq vs separate: " in r.stdout and "merged vs separate: " in r.stdout
    (csv,) = (tmp_path / "runs" / "compare").glob("*/comparison.csv")
    table = pl.read_csv(csv)
    assert table.columns == ["metric", "separate", "separate_provreq", "merged"]
    assert "idle_accel_hours" in table["metric"].to_list()


def test_bad_input_is_one_clear_line(tmp_path):
    r = loopbench("replay", "trace.path=/nonexistent/t.parquet", cwd=tmp_path)
    assert r.returncode == 1
    assert "/nonexistent/t.parquet: file does not exist" in r.stderr and "Traceback" not in r.stderr
    r = loopbench("replay", "loop.autoscaler.expander=cheapest", f"hydra.run.dir={tmp_path}/x", cwd=ROOT)
    assert r.returncode == 1
    assert "expander" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x" / "metrics.parquet").exists()


def test_an_interrupted_sweep_reruns_only_unfinished_runs(tmp_path, small_trace):
    args = ("replay", "-m", f"trace.path={small_trace}", "loop=separate,merged", "horizon_s=3600",
            f"hydra.sweep.dir={tmp_path}/sweep")
    assert loopbench(*args, cwd=tmp_path).returncode == 0
    done = sorted((tmp_path / "sweep").glob("*/metrics.parquet"))
    kept, redo = done
    before = kept.stat().st_mtime_ns
    reference = redo.read_bytes()
    redo.unlink()  # as if that run had been killed before it finished
    r = loopbench(*args, cwd=tmp_path)
    assert r.returncode == 0 and "already complete with this config, skipped" in r.stdout
    assert kept.stat().st_mtime_ns == before
    assert redo.read_bytes() == reference  # the rerun's metrics, byte for byte
