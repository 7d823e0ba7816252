"""Concurrent runs never mix or lose results: a folder being written is held by one process (a
second is refused, naming the holder), default folders of runs started in the same second are
distinct, an import never writes over its inputs, and a failed write leaves no temp file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness import output
from harness.config import compose
from harness.errors import LoopbenchError
from harness.importers.cli import main as import_main
from harness.output import LOCK, atomic_dir, is_complete, run_lock, write_text
from harness.replay import Replay
from tests.cli_process import ENV

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
TRACE = ROOT / "traces" / "default.parquet"
SHORT = ["horizon_s=1800", "loop=merged", f"trace.path={TRACE}"]  # the first half hour: a quick replay


def cli(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def temp_files(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.tmp"))


# ---- one writer per folder -----------------------------------------------------------------------

def test_a_second_replay_into_a_running_folder_is_refused_and_the_first_completes(tmp_path):
    run = tmp_path / "run"
    # the whole bundled trace: several seconds
    args = ("replay", "loop=merged", f"trace.path={TRACE}", f"hydra.run.dir={run}")
    first = cli(*args, cwd=tmp_path)
    started = run / ".hydra" / "config.yaml"
    deadline = time.monotonic() + 120
    while not started.exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.02)
    second = cli(*args, cwd=tmp_path)
    _, err = second.communicate(timeout=300)
    assert second.returncode == 1, "the second run was not refused"
    assert first.poll() is None, "the first run finished before the second tried: use a longer run"
    assert f"in use by process {first.pid}" in err and str(run) in err and "Traceback" not in err
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert is_complete(run) and not temp_files(run) and not (run / LOCK).exists()


def test_a_held_folder_is_refused_in_process_and_left_alone(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".jobs.parquet.abc.tmp").write_text("another writer's temp file")
    with run_lock(run):
        with pytest.raises(LoopbenchError, match=f"in use by process {os.getpid()}"):
            Replay().run(compose("config", SHORT), run, progress=False)
        assert (run / ".jobs.parquet.abc.tmp").exists()  # the refused run deleted nothing
    Replay().run(compose("config", SHORT), run, progress=False)
    assert is_complete(run) and not temp_files(run)  # the holder's leftovers go once it is free


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK).write_text(f"{dead.pid}\n")  # left by a run killed with SIGKILL
    Replay().run(compose("config", SHORT), run, progress=False)
    assert is_complete(run) and not (run / LOCK).exists()


def test_a_held_packing_run_folder_is_refused(tmp_path):
    overrides = ["experiment=openb_packing", f"runner.pods_csv={FIX / 'openb' / 'pods.csv'}",
                 f"runner.nodes_csv={FIX / 'openb' / 'nodes.csv'}", "policy=best_fit", "seed=1"]
    cfg = compose("config", overrides)
    out = tmp_path / "run"
    with run_lock(out), pytest.raises(LoopbenchError, match="in use by process"):
        instantiate(cfg.runner).run(cfg, out)
    assert not is_complete(out)


def test_a_report_folder_has_one_builder_at_a_time(tmp_path):
    out = tmp_path / "report"
    with atomic_dir(out, "summary.md") as first:
        (first / "summary.md").write_text("first")
        with pytest.raises(LoopbenchError, match="in use by process"), atomic_dir(out, "summary.md"):
            pass
        assert (first / "summary.md").exists()  # the refused build did not clear the first one's
    assert (out / "summary.md").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no lock or scratch folder left


# ---- distinct default folders ----------------------------------------------------------------------

@pytest.mark.parametrize("config, run, sweep", [("config", "runs/2025-01-02/03-04-05", "multirun/2025-01-02/03-04-05"),
                                               ("compare", "runs/compare/2025-01-02_03-04-05",
                                                "multirun/compare/2025-01-02/03-04-05")])
def test_runs_started_in_the_same_second_get_distinct_default_folders(config, run, sweep):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    instants = iter(datetime(2025, 1, 2, 3, 4, 5, us) for us in range(1000, 10**6, 1000))
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        # Hydra's ${now:...} reads a clock whose successive calls fall in one second
        OmegaConf.register_new_resolver("now", lambda pattern: next(instants).strftime(pattern), replace=True)
        try:
            a, b = [(h.run.dir, h.sweep.dir) for h in
                    (hydra_compose(config, return_hydra_config=True).hydra for _ in range(2))]
        finally:
            OmegaConf.register_new_resolver("now", lambda pattern: datetime.now().strftime(pattern), replace=True)
    assert a[0] != b[0] and a[1] != b[1]
    assert a[0].startswith(run) and a[1].startswith(sweep)


# ---- import outputs ----------------------------------------------------------------------------------

@pytest.fixture
def openb(tmp_path) -> tuple[Path, Path]:
    pods, nodes = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    pods.write_bytes((FIX / "openb" / "pods.csv").read_bytes())
    nodes.write_bytes((FIX / "openb" / "nodes.csv").read_bytes())
    return pods, nodes


@pytest.mark.parametrize("flags", [
    ["-o", "{pods}"],
    ["-o", "{nodes}", "--nodes", "{nodes}"],
    ["-o", "{tmp}/t.parquet", "--nodes", "{nodes}", "--cluster-out", "{nodes}"],
    ["-o", "{tmp}/t.parquet", "--nodes", "{nodes}", "--cluster-out", "{pods}"],
], ids=["trace-onto-source", "trace-onto-nodes", "cluster-onto-nodes", "cluster-onto-source"])
def test_import_refuses_to_write_over_an_input(openb, tmp_path, capsys, flags):
    pods, nodes = openb
    argv = ["openb", str(pods), *[f.format(pods=pods, nodes=nodes, tmp=tmp_path) for f in flags]]
    before = pods.read_bytes(), nodes.read_bytes()
    assert import_main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is an input of this import" in err
    assert (pods.read_bytes(), nodes.read_bytes()) == before
    assert not (tmp_path / "t.parquet").exists()


def test_import_refuses_an_input_reached_by_another_name(openb, tmp_path, capsys):
    pods, _ = openb
    (tmp_path / "link.csv").symlink_to(pods)
    assert import_main(["openb", str(tmp_path / "link.csv"), "-o", str(tmp_path / "." / "pods.csv")]) == 1
    assert "is an input of this import" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["-o", "--cluster-out"])
def test_import_refuses_a_directory_as_output(openb, tmp_path, capsys, flag):
    pods, nodes = openb
    folder = tmp_path / "out"
    folder.mkdir()
    argv = ["openb", str(pods), "--nodes", str(nodes), "-o", str(tmp_path / "t.parquet"), flag, str(folder)]
    assert import_main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flag}: {folder}: is a directory" in err
    assert list(folder.iterdir()) == []


def test_import_refuses_one_file_for_trace_and_cluster(openb, tmp_path, capsys):
    pods, nodes = openb
    out = tmp_path / "both.yaml"
    assert import_main(["openb", str(pods), "--nodes", str(nodes), "-o", str(out), "--cluster-out", str(out)]) == 1
    assert "--cluster-out" in capsys.readouterr().err and not out.exists()


# ---- a failed write leaves nothing -----------------------------------------------------------------

@pytest.mark.parametrize("fail", ["replace", "chmod"])
@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()], ids=["OSError", "KeyboardInterrupt"])
def test_a_failed_rename_leaves_no_temp_file(tmp_path, monkeypatch, fail, exc):
    def failing(*args, **kwargs):
        raise exc

    monkeypatch.setattr(output.os, fail, failing)
    with pytest.raises(type(exc)):
        write_text("x", tmp_path / "out.txt")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_a_write_that_fails_is_one_error_naming_the_output_and_leaves_nothing(tmp_path):
    """A full disk met while writing (simulated): a LoopbenchError naming the file, no temp left."""
    import errno

    full = pytest.raises(LoopbenchError, match=r"out\.txt: cannot write it: No space left on device$")
    with full, output.atomic_path(tmp_path / "out.txt"):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_files_written_together_appear_together_or_not_at_all(tmp_path):
    with pytest.raises(KeyboardInterrupt), output.written_together():
        write_text("a", tmp_path / "a.txt")
        assert not (tmp_path / "a.txt").exists()  # kept back until the block ends
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    with output.written_together():
        write_text("a", tmp_path / "a.txt")
        write_text("b", tmp_path / "b.txt")
    assert sorted(p.read_text() for p in tmp_path.iterdir()) == ["a", "b"]


def test_a_disk_error_from_any_command_is_one_line_naming_the_file(monkeypatch, capsys):
    """Whatever writes the file (a library's own writer too), a full disk ends the command with
    one line naming it, exit status 1; another OSError is not hidden."""
    import errno

    from harness import cli

    def full(command, rest):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/out.parquet")

    monkeypatch.setattr(cli, "_dispatch", full)
    assert cli.main(["report", "x"]) == 1
    assert capsys.readouterr().err == ("loopbench report: error: /data/out.parquet: cannot write: "
                                       "No space left on device\n")

    def other(command, rest):
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(cli, "_dispatch", other)
    with pytest.raises(OSError, match="Bad file descriptor"):
        cli.main(["report", "x"])
