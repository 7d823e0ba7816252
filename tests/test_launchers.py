"""Sweeps through the launchers of conf/hydra/launcher (the `sweep` extra): a 2 loops x 2 seeds
multirun with the joblib launcher and on a local Ray instance delivers every run directory, and
the runs aggregate into one table that does not depend on the launcher."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from harness.output import COMPLETE_MARKER
from harness.report import find_runs

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["loop=separate,merged", "seed=0,1", "horizon_s=3600"]
EXPECTED = {("separate", 0), ("separate", 1), ("merged", 0), ("merged", 1)}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # never join a user's cluster
    env["LOOPBENCH_CONF"] = str(ROOT / "conf")
    return env


def _needs(module: str, extra: str = "sweep"):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"{module} not installed (pip install -e '.[{extra}]')")


def cli(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("launchers") / "small.parquet"
    proc = cli("generate", "workload.n_jobs=40", "workload.span_s=3600", f"out={out}", cwd=out.parent)
    assert proc.returncode == 0, proc.stderr
    return out


def sweep(launcher: str, trace: Path, where: Path, *extra: str) -> pl.DataFrame:
    """Run the sweep from a directory other than the sweep's; return the aggregated metrics table."""
    sweep_dir = where / f"sweep_{launcher}"
    proc = cli("replay", "-m", f"hydra/launcher={launcher}", *SWEEP, f"trace.path={trace}",
               f"hydra.sweep.dir={sweep_dir}", *extra, cwd=where)
    assert proc.returncode == 0, f"{launcher} sweep failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    runs = find_runs([sweep_dir])
    assert [r.name for r in runs] == ["0", "1", "2", "3"]  # Hydra's job numbers, one per run
    return pl.concat([pl.read_parquet(r / COMPLETE_MARKER) for r in runs], how="vertical")


def _check(table: pl.DataFrame) -> None:
    assert table.height == 4
    assert set(zip(table["loop"], table["seed"], strict=True)) == EXPECTED
    assert table["idle_accel_hours"].is_not_null().all() and (table["idle_accel_hours"] >= 0).all()


@pytest.fixture(scope="module")
def joblib_table(trace, tmp_path_factory) -> pl.DataFrame:
    return sweep("joblib_local", trace, tmp_path_factory.mktemp("joblib"), "hydra.launcher.n_jobs=2")


@_needs("hydra_plugins.hydra_joblib_launcher")
def test_joblib_sweep_delivers_every_run(joblib_table):
    _check(joblib_table)


@_needs("hydra_plugins.hydra_ray_launcher")
@_needs("hydra_plugins.hydra_joblib_launcher")
def test_ray_sweep_delivers_every_run_and_matches_joblib(trace, tmp_path, joblib_table):
    table = sweep("ray_local", trace, tmp_path, "hydra.launcher.ray.init.num_cpus=2")
    _check(table)
    key = ["loop", "seed"]
    assert table.sort(key).equals(joblib_table.sort(key))
