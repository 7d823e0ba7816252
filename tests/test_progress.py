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


SEPARATE, KARPENTER, MERGED = replay.US_PER_POD


def test_a_long_replay_announces_its_span_and_an_estimate(tiny, tmp_path, capsys, monkeypatch):
    million = SimpleNamespace(w=SimpleNamespace(n_pods=1_000_000), horizon=30 * 86400.0, stop_when_done=False)
    assert replay.estimate(million, "merged", MERGED) == (
        "replay merged: 1,000,000 pods over 30.0 days of simulated time; estimated wall time 5 min to "
        "27 min 30 s (300-1,650 us a pod for merged loop (all capabilities, one decision) on the reference machine)")
    monkeypatch.setattr(replay, "LONG_S", 0.0)
    first = replay_err(tiny, tmp_path / "run", capsys).splitlines()[0]
    assert first.startswith("replay merged: 40 pods over 4.0 h of simulated time; estimated wall time")


def pods(n: int) -> SimpleNamespace:
    return SimpleNamespace(w=SimpleNamespace(n_pods=n), horizon=48 * 3600.0, stop_when_done=False)


def test_the_estimate_is_shown_when_it_exceeds_ten_seconds_and_only_then():
    """The bundled trace's 3,405 pods take 7-12 s under the separate loops: the line is shown;
    under the merged loop (3-6 s) it is not."""
    assert replay.estimate(pods(3405), "separate", SEPARATE).startswith(
        "replay separate: 3,405 pods over 2.0 days of simulated time; estimated wall time 4.8 s to 45.3 s")
    assert replay.estimate(pods(3405), "merged", MERGED) == ""
    assert replay.estimate(pods(6100), "merged", MERGED) != ""  # 10.07 s at 1,650 us a pod
    assert replay.estimate(pods(6000), "merged", MERGED) == ""  # 9.9 s


def test_the_estimate_uses_what_a_pod_costs_the_loops_family():
    cost = {family: replay.estimate(pods(100_000), "x", family).split("; ")[1] for family in replay.US_PER_POD}
    assert cost == {SEPARATE: "estimated wall time 2 min 20 s to 22 min 10 s (1,400-13,300 us a pod for separate loops "
                              "on the reference machine)",
                    KARPENTER: "estimated wall time 7 min 10 s to 10 min (4,300-6,000 us a pod for separate loops "
                               "with KarpenterAutoscaler on the reference machine)",
                    MERGED: "estimated wall time 30.0 s to 2 min 45 s (300-1,650 us a pod for merged loop (all "
                            "capabilities, one decision) on the reference machine)"}
    other = replay.estimate(pods(100_000), "x", "a loop of its own")
    assert "30.0 s to 22 min 10 s (300-13,300 us a pod" in other


class Clock:
    """A wall clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def paced(clock: Clock, **kwargs) -> replay.Progress:
    return replay.Progress("replay x", 1000.0, status=lambda t: f"sim {t:.0f} s", interval_s=0, clock=clock,
                           warmup=0.01, **kwargs)


def test_no_eta_from_the_steps_that_compile_the_kernels(capsys):
    """The first steps take 30 s for 10 of 1,000 simulated seconds (compiling), then 100 s pass
    each second: the ETA is the latter pace, never the 50 min the first steps would give."""
    clock = Clock()
    bar = paced(clock)
    clock.now = 30.0
    bar.update_to(5.0)  # before the warm-up's 1% of the simulated time
    bar.update_to(10.0)  # the warm-up is over: the pace is measured from here
    for second in range(1, 4):
        clock.now = 30.0 + second
        bar.update_to(10.0 + 100 * second)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["replay x   0%: sim 5 s, elapsed 30.0 s, ETA (warming up)",
                     "replay x   1%: sim 10 s, elapsed 30.0 s, ETA (warming up)",
                     "replay x  11%: sim 110 s, elapsed 31.0 s, ETA 8.9 s",
                     "replay x  21%: sim 210 s, elapsed 32.0 s, ETA 7.9 s",
                     "replay x  31%: sim 310 s, elapsed 33.0 s, ETA 6.9 s"]


def test_the_eta_follows_the_pace_of_the_last_seconds(capsys):
    """10 simulated seconds a second for 60 s, then 1 a second: over a 30 s window the ETA
    is the new pace (the pace since the start would say 1 min)."""
    clock = Clock()
    bar = paced(clock, window_s=30.0)
    done = 10.0
    bar.update_to(done)
    for second in range(1, 121):
        clock.now = float(second)
        done += 10.0 if second <= 60 else 1.0
        bar.update_to(done)
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == "replay x  67%: sim 670 s, elapsed 2 min, ETA 5 min 30 s"  # 330 s left at 1 a second


def test_no_eta_while_nothing_moves(capsys):
    clock = Clock()
    bar = paced(clock, window_s=5.0)
    bar.update_to(10.0)
    clock.now = 10.0
    bar.update_to(10.0)
    assert capsys.readouterr().err.splitlines()[-1] == "replay x   1%: sim 10 s, elapsed 10.0 s"


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
    assert ", ETA " in err and "s<" not in err, "the ETA after the warm-up, not tqdm's from the start"


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
    results.sweep(results.BY_NAME["loops_synthetic"], tmp_path / "runs", jobs=2)  # 17 loops x 5 seeds
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("results loops_synthetic   7%: 6 of 85 runs done, elapsed"), lines
