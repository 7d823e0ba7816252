"""Long tasks are never silent: progress lines off a terminal (a log, CI), an overall count
for `compare`, and an estimate of wall time before a long replay."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import replay
from harness.config import compose
from harness.generate import generate_task
from harness.replay import Replay
from tests.test_cli import loopbench


def tiny_trace(folder: Path) -> Path:
    """40 jobs over 2 h: a replay of a few seconds."""
    out = folder / "tiny.parquet"
    generate_task(compose("generate", ["workload.n_jobs=40", "workload.span_s=7200", f"out={out}"]))
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_trace(tmp_path_factory.mktemp("trace"))


def replay_err(trace: Path, out: Path, capsys, **kwargs) -> str:
    capsys.readouterr()
    cfg = compose("config", [f"trace.path={trace}", "loop=merged", "horizon_s=14400"])
    Replay(progress_interval_s=0).run(cfg, out, **kwargs)
    return capsys.readouterr().err


def test_a_replay_off_a_terminal_prints_progress_lines(tiny, tmp_path, capsys):
    err = replay_err(tiny, tmp_path / "run", capsys)  # capsys: stderr is no terminal
    lines = err.splitlines()
    line = re.compile(r"replay merged +\d+%: sim [\d.]+ (s|min|h)( [\d]+ s)? of 4\.0 h, [\d,]+ events "
                      r"\([\d,]+ events/s\), elapsed [\d.]+ s(, ETA .+)?")
    assert lines and all(line.fullmatch(x) for x in lines), lines[:3]
    assert len(lines) > 5, "interval 0: a line at every step"
    assert "\r" not in err


def test_no_progress_when_asked(tiny, tmp_path, capsys):
    assert replay_err(tiny, tmp_path / "run", capsys, progress=False) == ""


def test_a_long_replay_announces_its_span_and_an_estimate(tiny, tmp_path, capsys, monkeypatch):
    million = SimpleNamespace(w=SimpleNamespace(n_pods=1_000_000), horizon=30 * 86400.0)
    assert replay.estimate(million, "merged") == (
        "replay merged: 1,000,000 pods over 30.0 days of simulated time; estimated wall time 1 min 50 s to "
        "4 min 20 s (an estimate: 110-260 us a pod on the reference machine)")
    assert replay.estimate(SimpleNamespace(w=SimpleNamespace(n_pods=10_000), horizon=3600.0), "merged") == ""
    monkeypatch.setattr(replay, "LONG_S", 0.0)
    first = replay_err(tiny, tmp_path / "run", capsys).splitlines()[0]
    assert first.startswith("replay merged: 40 pods over 4.0 h of simulated time; estimated wall time")


def test_compare_counts_its_loops(tiny, tmp_path):
    r = loopbench("compare", f"trace.path={tiny}", "loops=separate,merged", "horizon_s=7200", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "compare: loop 1 of 2 (separate)" in r.stderr and "compare: loop 2 of 2 (merged)" in r.stderr


def test_on_a_terminal_a_bar_shows_the_same_status(tiny, tmp_path, capsys, monkeypatch):
    from harness import progress

    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    monkeypatch.setattr(progress, "BAR_REFRESH_S", 0.0)
    err = replay_err(tiny, tmp_path / "run", capsys)
    assert "\r" in err and "replay merged" in err and "%|" in err and "events/s)" in err


def test_an_import_off_a_terminal_prints_progress_lines(capsys, monkeypatch):
    from harness import progress
    from harness.importers import common
    from harness.importers.helios import read_helios

    monkeypatch.setattr(common, "PROGRESS_BYTES", 0)  # every file is large enough
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
    read_helios(Path(__file__).parent / "fixtures" / "helios" / "cluster_log.csv")
    err = capsys.readouterr().err
    assert re.search(r"^helios cluster_log\.csv +\d+%: read [\d.]+ of [\d.]+ MiB, elapsed [\d.]+ s", err, re.MULTILINE), err


def test_results_counts_the_finished_runs_of_its_sweep(tmp_path, capsys, monkeypatch):
    from harness import progress, results

    class Shard:  # a `loopbench replay -m` shard that finishes one run per poll, three in all
        def __init__(self, cmd, **kwargs):
            self.dir = Path(next(a for a in cmd if a.startswith("hydra.sweep.dir=")).split("=", 1)[1])
            self.done = 0

        def poll(self):
            if self.done == 3:
                return 0
            (self.dir / str(self.done)).mkdir(parents=True)
            (self.dir / str(self.done) / "metrics.parquet").write_bytes(b"")
            self.done += 1
            return None

        def wait(self):
            return 0

    monkeypatch.setattr(results.subprocess, "Popen", Shard)
    monkeypatch.setattr(results, "POLL_S", 0.0)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
    assert results.sweep_size({"loop": "a,b,c", "seed": "range(0,5)", "x": "1"}) == 15
    results.sweep(results.BY_NAME["loops_synthetic"], tmp_path / "runs", jobs=2)  # 15 loops x 5 seeds
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("results loops_synthetic   8%: 6 of 75 runs done, elapsed"), lines
