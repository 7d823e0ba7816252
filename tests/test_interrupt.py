"""A replay, and a sweep, killed mid-way (SIGINT, SIGKILL) never leave output that looks
complete (a run directory is complete iff metrics.parquet exists, see harness/output.py), and
rerunning them gives the metrics of an uninterrupted run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from harness import replay
from harness.config import compose
from harness.errors import LoopbenchError
from harness.output import COMPLETE_MARKER, is_complete, write_parquet
from harness.replay import Replay
from harness.report import find_runs
from tests.cli_in_process import loopbench
from tests.cli_process import ENV

ROOT = Path(__file__).resolve().parents[1]
#: a trace whose merged-loop replay takes a couple of seconds, so a kill lands mid-run
N_JOBS = 3000


def cli(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_here(*args: str, cwd: Path) -> None:
    """A command run to its end in this process: only a run that is killed needs its own."""
    ran = loopbench(*args, cwd=cwd, env={"LOOPBENCH_CONF": ENV["LOOPBENCH_CONF"]})
    assert ran.returncode == 0, ran.stderr


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("interrupt") / "t.parquet"
    run_here("generate", f"workload.n_jobs={N_JOBS}", f"out={out}", cwd=ROOT)
    return out


@pytest.fixture(scope="module")
def reference(trace, tmp_path_factory) -> dict[int, pl.DataFrame]:
    """Metrics of uninterrupted runs, per seed (in-process: the same code path as the CLI task)."""
    refs = {}
    for seed in (0, 1):
        cfg = compose("config", [f"trace.path={trace}", "loop=merged", f"seed={seed}"])
        refs[seed] = Replay().run(cfg, tmp_path_factory.mktemp(f"ref{seed}"), progress=False)
    return refs


def same_metrics(run_dir: Path, ref: pl.DataFrame) -> None:
    """Equal metrics; floats to 1e-12 relative, as numpy's SIMD sums may differ in the last bit
    between processes whose arrays sit at different alignments (the reference runs in pytest)."""
    got = pl.read_parquet(run_dir / COMPLETE_MARKER).to_dicts()[0]
    want = ref.to_dicts()[0]
    text = {k for k, v in want.items() if isinstance(v, str)}
    assert {k: got[k] for k in text} == {k: want[k] for k in text}
    assert {k: v for k, v in got.items() if k not in text} == pytest.approx(
        {k: v for k, v in want.items() if k not in text}, rel=1e-12, abs=0, nan_ok=True)


def assert_not_looking_complete(run_dir: Path) -> None:
    assert not is_complete(run_dir), f"{run_dir} looks complete after the kill"
    for p in run_dir.glob("*.parquet"):  # whatever was written is whole (atomic writes)
        pq.read_metadata(p)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"exited before {path} appeared: {proc.communicate()[1]}"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def kill_mid_run(proc: subprocess.Popen, started: Path, sig: signal.Signals) -> None:
    """Wait until the run has started (Hydra wrote its config), give it a moment, signal it."""
    wait_for(started, proc)
    time.sleep(0.4)
    if proc.poll() is not None:
        pytest.fail("the run finished before it could be interrupted: use a bigger trace")
    proc.send_signal(sig)
    proc.communicate(timeout=120)
    assert proc.returncode != 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_killed_replay_looks_unfinished_and_reruns_identically(sig, trace, reference, tmp_path):
    run = tmp_path / "run"
    args = ("replay", f"trace.path={trace}", "loop=merged", "seed=0", f"hydra.run.dir={run}")
    kill_mid_run(cli(*args, cwd=tmp_path), run / ".hydra" / "config.yaml", sig)
    assert_not_looking_complete(run)
    run_here(*args, cwd=tmp_path)  # into the same directory
    assert is_complete(run)
    same_metrics(run, reference[0])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_killed_sweep_keeps_finished_runs_and_reruns_identically(sig, trace, reference, tmp_path):
    sweep = tmp_path / "sweep"
    args = ("replay", "-m", f"trace.path={trace}", "loop=merged", "seed=0,1", f"hydra.sweep.dir={sweep}")
    kill_mid_run(cli(*args, cwd=tmp_path), sweep / "1" / ".hydra" / "config.yaml", sig)
    same_metrics(sweep / "0", reference[0])  # the run that finished before the kill is whole
    assert_not_looking_complete(sweep / "1")
    run_here(*args, cwd=tmp_path)
    for seed in (0, 1):
        same_metrics(sweep / str(seed), reference[seed])


def test_killed_rerun_with_another_config_looks_unfinished(trace, reference, tmp_path):
    """A run directory holding a finished run of config A, rerun with config B (how a sweep is
    resumed after a config change) and killed: A's metrics.parquet must not make B's partial
    outputs look complete; the finished rerun is B's."""
    run = tmp_path / "run"
    args = ("replay", f"trace.path={trace}", "loop=merged", f"hydra.run.dir={run}")
    run_here(*args, "seed=0", cwd=tmp_path)
    same_metrics(run, reference[0])
    (run / ".hydra" / "config.yaml").unlink()  # so that kill_mid_run waits for the rerun to start
    kill_mid_run(cli(*args, "seed=1", cwd=tmp_path), run / ".hydra" / "config.yaml", signal.SIGKILL)
    assert_not_looking_complete(run)
    run_here(*args, "seed=1", cwd=tmp_path)
    same_metrics(run, reference[1])
    assert OmegaConf.load(run / "config.yaml").seed == 1


def test_rerun_interrupted_between_its_outputs_is_not_reported(trace, reference, tmp_path, monkeypatch):
    """Interrupted after jobs.parquet is replaced (before nodes.parquet), a rerun with another
    config leaves a directory that is not complete, at every write, and that no report reads."""
    run = tmp_path / "sweep" / "0"
    Replay().run(compose("config", [f"trace.path={trace}", "loop=merged", "seed=0"]), run, progress=False)
    assert is_complete(run)
    cfg_b = compose("config", [f"trace.path={trace}", "loop=merged", "seed=1"])
    seen = []

    def write_then_stop(df, path, metadata):
        seen.append((path.name, is_complete(run)))
        if path.name == "nodes.parquet":
            raise KeyboardInterrupt
        return write_parquet(df, path, metadata)

    monkeypatch.setattr(replay, "write_parquet", write_then_stop)
    with pytest.raises(KeyboardInterrupt):
        replay.Replay().run(cfg_b, run, progress=False)
    assert seen == [("jobs.parquet", False), ("nodes.parquet", False)]
    assert_not_looking_complete(run)
    with pytest.raises(LoopbenchError, match="no finished run"):
        find_runs([tmp_path / "sweep"])
    monkeypatch.undo()
    replay.Replay().run(cfg_b, run, progress=False)
    same_metrics(run, reference[1])
    assert (run / "config.yaml").read_text() == OmegaConf.to_yaml(cfg_b)
    assert find_runs([tmp_path / "sweep"]) == [run.resolve()]


def interrupt_replay(tmp_path: Path, trace: Path, ready=None, **streams) -> subprocess.Popen:
    """A replay Ctrl-C'd mid-run: SIGINT once Hydra has written the run's config and, if
    given, `ready()` holds (polled, so a loaded machine only makes the test slower)."""
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "replay", f"trace.path={trace}", "loop=merged",
                             f"hydra.run.dir={run}"], cwd=tmp_path, env=ENV, **streams)
    wait_for(run / ".hydra" / "config.yaml", proc)
    time.sleep(0.4)
    deadline = time.monotonic() + 120
    while ready is not None and not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.fail("the run finished before it could be interrupted: use a bigger trace")
    proc.send_signal(signal.SIGINT)
    return proc


def test_ctrl_c_is_exit_130_and_one_line(trace, tmp_path):
    proc = interrupt_replay(tmp_path, trace, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err.splitlines()) == (130, ["loopbench: interrupted"]), err


def test_ctrl_c_under_a_progress_bar_is_one_line(trace, tmp_path):
    """On a terminal the replay shows a tqdm bar; Ctrl-C clears it and leaves the one line."""
    import fcntl
    import pty
    import struct
    import termios
    import threading

    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 0 columns would hide the bar
    seen = bytearray()

    def drain():
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other end closed
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    # Ctrl-C once the bar is drawn (a fixed delay missed it on a loaded machine)
    proc = interrupt_replay(tmp_path, trace, ready=lambda: b"replay merged" in seen,
                            stdout=subprocess.DEVNULL, stderr=child)
    os.close(child)
    proc.wait(timeout=120)
    reader.join(timeout=10)
    os.close(main)
    text = seen.decode("utf-8", "replace")
    assert "replay merged" in text, "no progress bar was shown: the test does not test it"
    shown = [part.strip() for part in re.split(r"[\r\n]", text) if part.strip()]
    assert proc.returncode == 130 and "Traceback" not in text, text
    assert shown[-1] == "loopbench: interrupted" and not any("Traceback" in s for s in shown), shown


@pytest.mark.parametrize("wrapper", [SystemError, RuntimeError])
def test_ctrl_c_while_numba_loads_a_cached_kernel_is_still_an_interrupt(wrapper, monkeypatch, tmp_path, capsys):
    """numba's cache loader turns a KeyboardInterrupt into a SystemError raised from it, and
    its compiler may raise an error of its own while handling one: still exit 130 and the one
    line, not Hydra's "Error executing job" and traceback."""
    from harness import cli, replay

    def loading_kernel(cfg):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise wrapper("<function _numba_unpickle> returned a result with an exception set") from exc

    monkeypatch.setattr(replay, "replay_task", loading_kernel)
    assert cli.main(["replay", "horizon_s=10", f"hydra.run.dir={tmp_path / 'run'}"]) == 130
    assert capsys.readouterr().err.splitlines() == ["loopbench: interrupted"]
    assert not cli.caused_by_interrupt(SystemError("a SystemError of its own"))


@pytest.mark.parametrize("runs_on_s", [2.0, 0.0], ids=["runs-on", "ends-at-once"])
def test_ctrl_c_that_lands_in_a_finaliser_still_stops_the_command(runs_on_s, monkeypatch, tmp_path, capsys):
    """Python only reports an exception raised in `__del__` (llvmlite frees compiled code there,
    so a Ctrl-C while numba compiles can land in one): the command stops all the same, also
    when it would end before the interrupt is delivered again."""
    from harness import cli, replay

    class Finalised:
        def __del__(self):
            raise KeyboardInterrupt

    def compiling(cfg):
        Finalised()  # freed at once: its KeyboardInterrupt is reported as ignored, not raised
        for _ in range(int(runs_on_s * 100)):
            time.sleep(0.01)
        return "ran on to its end"

    monkeypatch.setattr(replay, "replay_task", compiling)
    # Ctrl-C raises KeyboardInterrupt, as in the command's own process, whatever a test before left
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert cli.main(["replay", "horizon_s=10", f"hydra.run.dir={tmp_path / 'run'}"]) == 130
    finally:
        signal.signal(signal.SIGINT, before)
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "loopbench: interrupted" and "Exception ignored" not in err, err
