"""`stop_when_done`: the replay ends when the trace's last pod is done, so each loop's window is
its own makespan. Numbers by hand on one static node of one GPU: p0 runs 0 to 3,600, p1
(submitted at 100, 50 s long) waits for the GPU and runs 3,600 to 3,650."""

from __future__ import annotations

import pytest

from harness.config import compose
from harness.errors import ConfigError
from harness.replay import Replay
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc

H = 3600.0


def one_gpu():
    return sc.cluster([sc.node_type("g1", gpus=1)], [sc.pool("a", "g1", min_size=1, max_size=1)], autoscaling=False)


TWO = [{}, {"submit_s": 100.0, "duration_s": 50.0}]


def test_the_run_ends_at_the_last_pods_end_and_its_window_is_the_makespan():
    row, sim = sc.run(sc.trace(TWO), one_gpu(), sc.separate(), horizon_s=100 * H, stop_when_done=True)
    assert sim.horizon == 3650.0 and row["horizon_s"] == 3650.0
    assert row["pods_done"] == 2 and row["idle_accel_hours"] == 0.0  # the GPU was busy all along


def test_without_it_the_run_goes_on_to_the_horizon_and_counts_the_idle_tail():
    row, sim = sc.run(sc.trace(TWO), one_gpu(), sc.separate(), horizon_s=100 * H)
    assert sim.horizon == 100 * H and row["pods_done"] == 2
    assert row["idle_accel_hours"] == pytest.approx((100 * H - 3650.0) / H)


def test_work_left_at_the_horizon_ends_the_run_there_and_is_not_done():
    row, sim = sc.run(sc.trace(TWO), one_gpu(), sc.separate(), horizon_s=1000.0, stop_when_done=True)
    assert sim.horizon == 1000.0 and row["pods_done"] == 0 and row["pods_running"] == 1


def test_a_refused_pod_is_not_waited_for():
    # p1 asks for 2 GPUs: no node type holds it, refused on arrival; the run ends with p0
    row, sim = sc.run(sc.trace([{}, {"submit_s": 100.0, "gpu_count": 2}]), one_gpu(), sc.separate(),
                      horizon_s=100 * H, stop_when_done=True)
    assert sim.horizon == H and row["pods_done"] == 1 and row["pods_refused"] == 1


def test_a_trace_with_services_is_refused_naming_the_setting(tmp_path):
    cfg = compose("config", ["+scenario=services_synthetic", "replicas=hpa", "stop_when_done=true", "horizon_s=600"])
    with pytest.raises(ConfigError, match="stop_when_done.*services"):
        Replay().run(cfg, tmp_path / "run", progress=False)


def test_the_estimate_and_progress_say_the_horizon_is_a_cap(monkeypatch):
    from harness import replay_progress

    sim = Simulation(compile_workload(sc.trace(TWO), one_gpu()), one_gpu(), seed=0, horizon_s=100 * H,
                     stop_when_done=True)
    monkeypatch.setattr(replay_progress, "LONG_S", 0.0)  # every estimate shown
    assert "2 pods until its last pod is done (at most 4.2 days of simulated time)" in replay_progress.estimate(
        sim, "x", "y")
    progress = replay_progress.ReplayProgress(sim, "x", interval_s=None, enabled=False)
    assert "of at most 4.2 days" in progress.status(0.0)
