"""Every output is traceable: run tables carry loopbench's version, the git commit, the config's
hash and the trace's source in their Parquet metadata; reports list their runs' provenance; the
wall time is kept beside the results (run.json), so identical runs give identical files."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness import provenance, report, results
from harness.config import compose
from harness.openb_packing import report_main
from harness.provenance import PROVENANCE, RUN_INFO, git_commit, run_provenance, wall_s
from harness.replay import Replay
from harness.trace import read_trace
from tests.cli_process import ENV

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
TRACE = ROOT / "traces" / "default.parquet"
SHORT = ["horizon_s=1800", "loop=merged", f"trace.path={TRACE}"]
TABLES = ("metrics.parquet", "jobs.parquet", "nodes.parquet", "timeline.parquet")


def kv(path: Path) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (pq.read_schema(path).metadata or {}).items()}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path, object]:
    cfg = compose("config", SHORT)
    dirs = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    for d in dirs:
        Replay().run(cfg, d, progress=False)
    return *dirs, cfg


def test_identical_runs_write_identical_tables(two_runs):
    a, b, _ = two_runs
    for name in TABLES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert pq.read_metadata(a / "metrics.parquet").created_by == pq.read_metadata(b / "metrics.parquet").created_by


def test_wall_time_is_kept_beside_the_results(two_runs):
    a, _, _ = two_runs
    assert "wall_s" not in pl.read_parquet(a / "metrics.parquet").columns
    info = json.loads((a / RUN_INFO).read_text())
    assert info["wall_s"] == wall_s(a) > 0
    assert wall_s(a.parent / "no-such-run") is None


def test_run_tables_carry_their_provenance(two_runs):
    a, _, cfg = two_runs
    _, trace = read_trace(TRACE)
    want = {
        "loopbench.version": provenance.version(),
        "loopbench.git_commit": git_commit(ROOT),
        "loopbench.config_sha256": hashlib.sha256(OmegaConf.to_yaml(cfg, resolve=True).encode()).hexdigest(),
        "loopbench.trace.source": trace.source,
        "loopbench.trace.licence": trace.licence,
    }
    assert want["loopbench.version"] != "unknown" and want["loopbench.git_commit"] != "unknown"
    for name in TABLES:
        md = kv(a / name)
        assert {k: md.get(k) for k in want} == want, name
        assert "loopbench.trace.doc" not in md  # the schema's documentation, not the trace's
    assert run_provenance(a) == {k: v for k, v in kv(a / "metrics.parquet").items() if k.startswith("loopbench.")}


def test_replay_prints_the_wall_time_apart_from_the_results(tmp_path):
    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "replay", *SHORT, f"hydra.run.dir={run}"],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    table, rest = done.stdout.split("wall time:", 1)
    assert "wall_s" not in table and "merged" in table
    assert rest.split()[0] == f"{wall_s(run):.1f}"


# ---- git commit -------------------------------------------------------------------------------------

def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


def test_git_commit_says_dirty_and_unknown_but_never_fails(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "f.py").write_text("a")
    git(repo, "add", "f.py")
    git(repo, "commit", "-qm", "one")
    head = git(repo, "rev-parse", "HEAD")
    assert git_commit(repo) == head
    (repo / "untracked.txt").write_text("runs and scratch files do not make a tree dirty")
    assert git_commit(repo) == head
    (repo / "f.py").write_text("b")
    assert git_commit(repo) == f"{head}-dirty"
    (repo / "sub").mkdir()
    assert git_commit(repo / "sub") == "unknown"  # a package inside another project's repository
    assert git_commit(tmp_path) == "unknown"  # no repository
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert git_commit(repo) == "unknown"  # no git


# ---- reports ------------------------------------------------------------------------------------------

def test_a_report_lists_its_runs_provenance_and_check_ignores_it(two_runs, tmp_path):
    a, b, _ = two_runs
    out = tmp_path / "report"
    report.build([a, b], out, "t")
    prov = json.loads((out / PROVENANCE).read_text())
    assert prov["loopbench.version"] == provenance.version() and prov["loopbench.git_commit"] == git_commit(ROOT)
    assert [r["seed"] for r in prov["runs"]] == [0, 0]
    assert all(r["loopbench.config_sha256"] == kv(a / "metrics.parquet")["loopbench.config_sha256"]
               for r in prov["runs"])
    other = tmp_path / "other"
    other.mkdir()
    for f in out.iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    (other / PROVENANCE).write_text("{}")  # another commit, or a machine without git
    assert results.differences(out, other) == []
    (other / PROVENANCE).unlink()
    assert results.differences(out, other) == []  # committed results made before provenance existed


def test_packing_runs_and_report_are_traceable(tmp_path):
    overrides = ["experiment=openb_packing", f"runner.pods_csv={FIX / 'openb' / 'pods.csv'}",
                 f"runner.nodes_csv={FIX / 'openb' / 'nodes.csv'}", "policy=best_fit"]
    for seed in (1, 2):
        cfg = compose("config", [*overrides, f"seed={seed}"])
        out = tmp_path / "sweep" / str(seed)
        metrics = instantiate(cfg.runner).run(cfg, out)
        assert "wall_s" not in metrics.columns and wall_s(out) > 0
        for name in ("metrics.parquet", "curve.parquet"):
            md = kv(out / name)
            assert md["loopbench.config_sha256"] == hashlib.sha256(
                OmegaConf.to_yaml(cfg, resolve=True).encode()).hexdigest()
            assert "pods.csv" in md["loopbench.trace.source"] and md["loopbench.git_commit"] == git_commit(ROOT)
    assert report_main([str(tmp_path / "sweep"), "-o", str(tmp_path / "report")]) == 0
    prov = json.loads((tmp_path / "report" / PROVENANCE).read_text())
    assert [(r["policy"], r["seed"]) for r in prov["runs"]] == [("BestFit", 1), ("BestFit", 2)]
