"""Long tasks are never silent: progress lines off a terminal (a log, CI), an overall count
for `compare`, and an estimate of wall time before a long replay."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness import kernel_cache, replay_progress
from harness.config import compose
from harness.generate import generate_task
from harness.progress import Progress
from harness.replay import Replay, build
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
    line = re.compile(r"replay merged +\d+%: sim [\d.]+ (s|min|h)( [\d]+ s)? of 4\.0 h, [\d,]+ of 40 pods done, "
                      r"[\d,]+ events \([\d,]+ events/s\), elapsed [\d.]+ s(, ETA .+)?")
    assert lines and all(line.fullmatch(x) for x in lines), lines[:3]
    assert len(lines) > 5, "interval 0: a line at every step"
    assert "\r" not in err


def test_no_progress_when_asked(tiny, tmp_path, capsys):
    assert replay_err(tiny, tmp_path / "run", capsys, progress=False) == ""


SEPARATE, KARPENTER, MERGED = replay_progress.US_PER_POD
BASIS = "calib.py 0.3-0.7); the ETA follows this run's own pace"


def pods(n: int, horizon_s: float = 48 * 3600.0) -> SimpleNamespace:
    """A simulation's trace of n pods, all arriving at 0."""
    w = SimpleNamespace(n_pods=n, job=np.arange(n), job_of_trace=np.ones(n, bool), submit=np.zeros(n))
    return SimpleNamespace(w=w, horizon=horizon_s, stop_when_done=False)


def test_a_long_replay_announces_its_span_and_an_estimate(tiny, tmp_path, capsys, monkeypatch):
    assert replay_progress.estimate(pods(1_000_000, 30 * 86400.0), "merged", MERGED) == (
        "replay merged: 1,000,000 pods over 30.0 days of simulated time; estimated wall time 3 min 20 s to "
        "27 min 30 s (200-1,650 us a pod: what merged loop (all capabilities, one decision) took on the bundled "
        f"trace, openb, 100k and 1M pods at {BASIS}")
    monkeypatch.setattr(replay_progress, "LONG_S", 0.0)
    first = replay_err(tiny, tmp_path / "run", capsys).splitlines()[0]
    assert first.startswith("replay merged: 40 pods over 4.0 h of simulated time; estimated wall time")


def test_the_estimate_is_shown_when_it_exceeds_ten_seconds_and_only_then():
    """The bundled trace's 3,405 pods take 7-12 s under the separate loops: the line is shown;
    under the merged loop (3-6 s) it is not."""
    assert replay_progress.estimate(pods(3405), "separate", SEPARATE).startswith(
        "replay separate: 3,405 pods over 2.0 days of simulated time; estimated wall time 1.7 s to 11.9 s")
    assert replay_progress.estimate(pods(3405), "merged", MERGED) == ""
    assert replay_progress.estimate(pods(6100), "merged", MERGED) != ""  # 10.07 s at 1,650 us a pod
    assert replay_progress.estimate(pods(6000), "merged", MERGED) == ""  # 9.9 s


def test_the_estimate_uses_what_a_pod_costs_the_loops_family():
    cost = {family: replay_progress.estimate(pods(100_000), "x", family).split("; ")[1]
            for family in replay_progress.US_PER_POD}
    on = "took on the bundled trace, openb, 100k and 1M pods at calib.py 0.3-0.7)"
    assert cost == {SEPARATE: f"estimated wall time 50.0 s to 5 min 50 s (500-3,500 us a pod: what separate "
                              f"loops {on}",
                    KARPENTER: "estimated wall time 2 min 30 s to 30 min 50 s (1,500-18,500 us a pod: what separate loops "
                               f"with KarpenterAutoscaler {on}",
                    MERGED: "estimated wall time 20.0 s to 2 min 45 s (200-1,650 us a pod: what merged loop (all "
                            f"capabilities, one decision) {on}"}
    other = replay_progress.estimate(pods(100_000), "x", "a loop of its own")
    assert "20.0 s to 30 min 50 s (200-18,500 us a pod" in other


class Clock:
    """A wall clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def paced(clock: Clock, **kwargs) -> Progress:
    return Progress("replay x", 1000.0, status=lambda t: f"sim {t:.0f} s", interval_s=0, clock=clock, **kwargs)


def test_no_eta_from_the_steps_that_compile_the_kernels(capsys):
    """The first steps take 30 s, all compiling, for 10 of 1,000 simulated seconds, then 100 s
    pass each second: the ETA is the latter pace (110 in 1 paced second: 8.1 s for 890), never
    the 50 min the first steps' wall time would give."""
    clock, compiled = Clock(), [0.0]
    bar = paced(clock, excluded=lambda: compiled[0])
    clock.now = compiled[0] = 30.0
    bar.update_to(5.0)
    bar.update_to(10.0)
    for second in range(1, 4):
        clock.now = 30.0 + second
        bar.update_to(10.0 + 100 * second)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["replay x   0%: sim 5 s, elapsed 30.0 s, ETA (warming up)",
                     "replay x   1%: sim 10 s, elapsed 30.0 s, ETA (warming up)",
                     "replay x  11%: sim 110 s, elapsed 31.0 s, ETA 8.1 s",
                     "replay x  21%: sim 210 s, elapsed 32.0 s, ETA 7.5 s",
                     "replay x  31%: sim 310 s, elapsed 33.0 s, ETA 6.7 s"]


def test_no_eta_before_anything_is_done_and_a_longer_one_while_nothing_moves(capsys):
    """Nothing done in 10 s: no ETA. 100 of 1,000 in 10 s: 90 s left; still 100 at 20 s: 180 s."""
    clock = Clock()
    bar = paced(clock)
    clock.now = 10.0
    bar.update_to(0.0)
    bar.update_to(100.0)
    clock.now = 20.0
    bar.update_to(100.0)
    assert capsys.readouterr().err.splitlines() == ["replay x   0%: sim 0 s, elapsed 10.0 s",
                                                    "replay x  10%: sim 100 s, elapsed 10.0 s, ETA 1 min 30 s",
                                                    "replay x  10%: sim 100 s, elapsed 20.0 s, ETA 3 min"]


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


# ---- the share of the work, the first run, compiling left out ----------------------------------

def early_pods_and_a_long_one(folder: Path) -> Path:
    """20 one-GPU pods of 10 min arriving in the first 32 min, and one pod of 20 days: nearly
    all the work is in the first hour of a 20-day replay (openb's shape)."""
    from harness.trace import TraceMeta, table_from_columns, write_trace

    n = 21
    cols = {"pod_id": [f"p{i}" for i in range(n)], "job_id": [f"j{i}" for i in range(n)],
            "submit_s": [100.0 * i for i in range(n)], "duration_s": [600.0] * (n - 1) + [20 * 86400.0],
            "cpu_milli": [4000] * n, "memory_mib": [16384] * n, "gpu_count": [1] * n, "gpu_milli": [1000] * n}
    out = folder / "early.parquet"
    write_trace(table_from_columns(cols), out, TraceMeta(source="test", licence="CC0-1.0", time_origin="start"))
    return out


SIM_BEFORE_2_DAYS = re.compile(r"replay merged +(\d+)%: sim [\d.]+ (s|min|h)\b")


def test_progress_is_the_share_of_the_pods_not_of_simulated_time(tmp_path, capsys):
    """When the 20 short pods are done (sim under a day of the 20 the long pod runs), 41 of the
    42 half-shares are done: 97%, not the 0-4% that simulated time says."""
    cfg = compose("config", [f"trace.path={early_pods_and_a_long_one(tmp_path)}", "loop=merged",
                             "stop_when_done=true", "horizon_s=2592000"])
    capsys.readouterr()
    Replay(progress_interval_s=0).run(cfg, tmp_path / "run")
    early = [int(m.group(1)) for m in map(SIM_BEFORE_2_DAYS.match, capsys.readouterr().err.splitlines()) if m]
    assert early and max(early) >= 95, early


def test_the_estimate_counts_the_pods_that_arrive_before_the_horizon(tiny):
    """The tiny trace's 40 jobs arrive over 2 h: a 1 h horizon replays about half of them."""
    sim, _ = build(compose("config", [f"trace.path={tiny}", "horizon_s=3600"]))
    arriving = int((sim.w.submit <= 3600).sum())
    assert 0 < arriving < sim.w.n_pods
    assert len(replay_progress.trace_pods(sim)) == arriving
    assert replay_progress.estimate(sim, "x", MERGED, first_run=True).startswith(f"replay x: {arriving} pods over 1.0 h")


def test_a_services_replica_slots_are_no_pods_of_the_trace():
    """The bundled services trace has no pods; its replica slots (max_replicas each) are not work
    an estimate counts: it says nothing up front."""
    sim, _ = build(compose("config", ["+scenario=services_synthetic", "replicas=hpa", "horizon_s=3600"]))
    assert sim.w.n_pods > 0 and len(replay_progress.trace_pods(sim)) == 0
    assert replay_progress.estimate(sim, "x", SEPARATE) == ""


def test_a_first_run_adds_the_kernels_compiling():
    """3,405 pods under merged: 0.7-5.6 s, under LONG_S; on a first run 25 s more, so said."""
    assert replay_progress.estimate(pods(3405), "merged", MERGED) == ""
    assert replay_progress.estimate(pods(3405), "merged", MERGED, first_run=True) == (
        "replay merged: 3,405 pods over 2.0 days of simulated time; estimated wall time 25.7 s to 30.6 s (about "
        "25.0 s compiling the kernels, a first run, then 200-1,650 us a pod: what merged loop (all capabilities, one "
        f"decision) took on the bundled trace, openb, 100k and 1M pods at {BASIS}")


def test_an_empty_kernel_cache_is_told_from_a_filled_one(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert kernel_cache.empty()
    folder = kernel_cache.cache_dirs(str(tmp_path))[0]
    folder.mkdir(parents=True)
    (folder / "idle_rates.used_on-10.py311.nbi").write_bytes(b"")
    assert not kernel_cache.empty()


def test_compiling_is_left_out_of_the_pace(capsys):
    """10% a second, then 20 s compiling a kernel during which 1% passes, then 8% in a second:
    500 of 1,000 done in 5 paced seconds (100 a second: the ETA for the last 500 is 5.0 s), not
    in 25 s of wall time (20 a second: 25.0 s)."""
    clock, compiled = Clock(), [0.0]
    bar = paced(clock, excluded=lambda: compiled[0])
    bar.update_to(10.0)
    for second in range(1, 5):
        clock.now = float(second)
        bar.update_to(10.0 + 100 * second)  # 41% at 4 s
    clock.now, compiled[0] = 24.0, 20.0
    bar.update_to(420.0)
    clock.now = 25.0
    bar.update_to(500.0)
    assert capsys.readouterr().err.splitlines()[-1] == "replay x  50%: sim 500 s, elapsed 25.0 s, ETA 5.0 s"


def test_the_compile_clock_counts_numba_compiling():
    import numba

    from harness.compile_time import compiling

    @numba.njit(cache=False)
    def add_one(x):
        return x + 1

    with compiling() as clock:
        assert clock() == 0.0
        add_one(1)
        spent = clock()
        add_one(2)  # compiled once
    assert spent > 0 and clock() == spent
