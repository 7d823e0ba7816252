"""Bad input a run meets outside the corpus's files (tests/test_malformed.py): a config file
that is not YAML, a value built from Python with numpy numbers, a bad `loopbench results
--jobs`, a corrupt cache of compiled kernels. Each is one line naming what and where, never a
traceback; the cache is repaired and the run goes on."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numba
import numpy as np
import pytest

from harness import results
from harness.config import compose
from harness.errors import ConfigError, printable
from harness.kernel_cache import DIGEST_FILE, cache_dirs, corrupt, drop_stale, sources_digest
from harness.settings import SettingError
from tests import scenarios as sc
from tests.cli_process import ENV
from tests.test_cli import ROOT, loopbench, one_line_error
from tests.test_kueue import kueue, queue, static_cluster

NOT_YAML = {
    "duplicate_key": ("name: mine\nautoscaling: true\nautoscaling: false\n", 3,
                      "not valid YAML: found duplicate key autoscaling"),
    "tab_indent": ("name: mine\npools:\n\t- {name: a}\n", 3, "not valid YAML: found character '\\t'"),
    "open_bracket": ("name: mine\npools: [{name: a}\n", 3, "not valid YAML: expected ',' or ']'"),
}


def my_cluster(tmp_path, text: str):
    (tmp_path / "cluster").mkdir()
    path = tmp_path / "cluster" / "mine.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", sorted(NOT_YAML))
def test_a_config_file_that_is_not_yaml_is_one_error_naming_file_and_line(case, tmp_path):
    text, line, rule = NOT_YAML[case]
    path = my_cluster(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        compose("config", [f"hydra.searchpath=[file://{tmp_path}]", "cluster=mine"])
    assert err.value.where == f"{path}, line {line}" and rule in err.value.rule, str(err.value)


@pytest.mark.parametrize("command", ["replay", "compare"])
def test_the_command_says_a_duplicate_key_in_one_line(command, tmp_path):
    path = my_cluster(tmp_path, NOT_YAML["duplicate_key"][0])
    r = loopbench(command, f"hydra.searchpath=[file://{tmp_path}]", "cluster=mine", cwd=tmp_path)
    assert one_line_error(r) == (f"loopbench {command}: error: {path}, line 3: not valid YAML: "
                                 "found duplicate key autoscaling")
    assert not list(tmp_path.rglob("*.parquet"))


def test_hydras_own_errors_stay_short(tmp_path):
    r = loopbench("replay", "nosuch=1", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[0] == "Could not override 'nosuch'.", r.stderr


# ---- numbers built from Python show as numbers ---------------------------------------------------

def test_a_numpy_price_shows_as_a_plain_number():
    with pytest.raises(ConfigError) as err:
        sc.cluster([sc.node_type("h8")], [sc.pool("a", "h8", price_on_demand=np.float64("nan"))])
    assert str(err.value).endswith("expected finite float, got nan"), str(err.value)


def test_a_numpy_quota_shows_as_a_plain_number():
    with pytest.raises(ConfigError) as err:
        static_cluster(kueue(queue("q", np.float64(-5.0))))
    assert str(err.value).endswith("got -5.0") and "np." not in str(err.value), str(err.value)


def test_a_numpy_setting_shows_as_a_plain_number():
    with pytest.raises(SettingError) as err:
        sc.separate(scan_interval_s=np.float64(-5.0))
    assert str(err.value).startswith("loop.autoscaler.scan_interval_s = -5.0: must be a number >= 1")


# ---- loopbench results ---------------------------------------------------------------------------

@pytest.mark.parametrize("jobs", ["0", "-3"])
def test_results_refuses_fewer_than_one_job(jobs, tmp_path):
    with pytest.raises(ConfigError) as err:
        results.main(["--jobs", jobs, "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs")])
    assert str(err.value) == f"--jobs: must be an integer >= 1 (concurrent replay processes), got {jobs}"
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def processes_naming(text: str) -> list[int]:
    """Live processes whose command line holds `text` (Linux's /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and text in (d / "cmdline").read_bytes().decode(errors="replace"):
                out.append(int(d.name))
        except OSError:  # gone meanwhile
            pass
    return out


def test_results_owns_its_shards_and_its_folder(tmp_path):
    """While one `results` runs an experiment, a second on it is refused (it would delete the
    first's runs); SIGTERM to the first ends its shards too, not only itself."""
    runs = tmp_path / "runs"
    argv = ["results", "loops_synthetic", "--set", "seed=0", "--jobs", "2", "--out", str(tmp_path / "out"),
            "--runs", str(runs)]
    first = subprocess.Popen([sys.executable, "-m", "harness.cli", *argv], cwd=ROOT, env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(processes_naming(f"hydra.sweep.dir={runs}")) < 2:  # both shards started
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read() if first.stderr else ""
            time.sleep(0.2)
        second = loopbench(*argv, cwd=ROOT)
        assert "loops_synthetic: in use by process" in one_line_error(second) or "in use by process" in second.stderr
        assert (runs / "loops_synthetic").is_dir()  # the first's runs are still there
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130
    deadline = time.monotonic() + 30
    while processes_naming(f"hydra.sweep.dir={runs}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_naming(f"hydra.sweep.dir={runs}") == []



# ---- a corrupt cache of compiled kernels ---------------------------------------------------------

def kernel_files(cache_dir: Path, kernel: str) -> list[Path]:
    return sorted(cache_dir.glob(f"{kernel}-*.nbi")) + sorted(cache_dir.glob(f"{kernel}-*.nbc"))


def test_only_a_kernel_whose_files_do_not_load_is_removed(tmp_path):
    """Garbage, an empty file, or an index naming garbage data: that kernel's files go; an
    index of another numba version (which numba ignores) and sound files stay."""
    version = numba.__version__
    sound = pickle.dumps(version) + pickle.dumps(("stamp", {"sig": "ok.f-1.py311.1.nbc"}))
    files = {"ok.f-1.py311.nbi": sound, "ok.f-1.py311.1.nbc": pickle.dumps(("payload",)),
             "garbage.f-1.py311.nbi": b"garbage", "garbage.f-1.py311.1.nbc": b"",
             "empty.f-1.py311.nbi": b"",
             "bad_data.f-1.py311.nbi": sound.replace(b"ok.f", b"bd.f"), "bd.f-1.py311.1.nbc": b"\x80\x05junk",
             "old.f-1.py311.nbi": pickle.dumps("0.1") + b"anything"}
    for name, body in files.items():
        (tmp_path / name).write_bytes(body)
    assert {p.name for p in corrupt(tmp_path, version)} == {
        "garbage.f-1.py311.nbi", "garbage.f-1.py311.1.nbc", "empty.f-1.py311.nbi", "bad_data.f-1.py311.nbi"}


def test_a_replay_repairs_a_corrupt_kernel_cache_and_runs(tmp_path):
    """A copy of this machine's cache with one kernel's index garbage and another's data empty
    (each failed every run: UnpicklingError, EOFError): the replay removes those, says so,
    compiles the two again and finishes."""
    copy = cache_dirs(str(tmp_path / "cache"))
    for src, dst in zip(cache_dirs(os.environ.get("NUMBA_CACHE_DIR")), copy, strict=True):
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.pyc"))
    harness_cache = copy[0]  # the package's own folder: folders sorted, it comes first
    garbage, empty = kernel_files(harness_cache, "idle_rates.recount"), kernel_files(harness_cache, "node_devices.take")
    if not (garbage and empty):
        pytest.skip("no compiled kernels cached here yet (tests/test_jit.py compiles them)")
    garbage[0].write_bytes(b"garbage\n")
    next(p for p in empty if p.suffix == ".nbc").write_bytes(b"")
    env = {**ENV, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "harness.cli", "replay", "loop=merged", "horizon_s=600",
                        f"trace.path={ROOT / 'traces' / 'default.parquet'}", f"hydra.run.dir={tmp_path}/run"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"loopbench: removed {len(garbage) + len(empty)} unreadable files of the compiled kernels' cache" in r.stderr
    assert (tmp_path / "run" / "metrics.parquet").exists()
    assert not corrupt(harness_cache, numba.__version__)  # both compiled again, and cached
    assert kernel_files(harness_cache, "idle_rates.recount") and kernel_files(harness_cache, "node_devices.take")


def test_a_cache_filled_from_other_kernel_sources_is_dropped_whole(tmp_path):
    """A kernel inlines the kernels it calls from other modules, and numba checks it against its
    own file only: when any kernel module changes, every kernel of the package compiles again;
    a change to a module without kernels, or none, keeps the cache."""
    package, root = tmp_path / "pkg", str(tmp_path / "cache")
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("from numba import njit\n")
    (package / "sub" / "b.py").write_text("from numba import njit\n")
    (package / "plain.py").write_text("x = 1\n")

    def fill() -> list[Path]:
        files = []
        for cache_dir in cache_dirs(root, package):
            cache_dir.mkdir(parents=True, exist_ok=True)
            files += [cache_dir / "k.f-1.py311.nbi", cache_dir / "k.f-1.py311.1.nbc"]
        for f in files:
            f.write_bytes(b"compiled")
        return files

    files = fill()
    assert sorted(drop_stale(root, package)) == sorted(files)  # no digest recorded: of unknown sources
    record = cache_dirs(root, package)[0] / DIGEST_FILE
    assert record.read_text() == sources_digest(package)
    files = fill()
    assert drop_stale(root, package) == [] and all(f.exists() for f in files)
    (package / "plain.py").write_text("x = 2\n")
    assert drop_stale(root, package) == []
    (package / "sub" / "b.py").write_text("from numba import njit\n# the callee changed\n")
    assert sorted(drop_stale(root, package)) == sorted(files) and not any(f.exists() for f in files)
    assert record.read_text() == sources_digest(package)


def test_the_tests_run_on_a_cache_recorded_from_these_kernel_sources():
    """tests/conftest.py drops a stale cache before any test runs a kernel, and records the digest."""
    record = cache_dirs(os.environ.get("NUMBA_CACHE_DIR"))[0] / DIGEST_FILE
    assert record.read_text() == sources_digest()


def test_an_escape_sequence_in_what_a_user_typed_is_shown_not_obeyed(tmp_path):
    """A trace path carrying an ANSI escape (clear screen, red) comes back in the error as
    the characters `\\x1b`, not as the control character the terminal would act on: in
    loopbench's own error, and in Hydra's when the override does not parse."""
    path = f"{tmp_path}/\x1b[2J\x1b[31mx.parquet"
    r = loopbench("replay", f"trace.path='{path}'", f"hydra.run.dir={tmp_path}/run", cwd=ROOT)
    assert "\x1b" not in r.stderr and "\\x1b[2J\\x1b[31mx.parquet: file does not exist" in one_line_error(r)
    r = loopbench("replay", f"trace.path={path}", f"hydra.run.dir={tmp_path}/run", cwd=ROOT)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "\x1b" not in r.stderr and "\\x1b[2J" in r.stderr


def test_printable_keeps_newlines_and_escapes_the_other_control_characters():
    assert printable("a\tb\nc\x07d\x1b[0m\x9b") == "a\tb\nc\\x07d\\x1b[0m\\x9b"
