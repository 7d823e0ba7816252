"""The `loopbench` command end to end, as a user runs it in a scratch folder: in this process
(tests/cli_in_process.py), and in a subprocess where the process itself is what is tested (a
whole replay as a user starts it, a pipe closed early)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.cli_in_process import Ran
from tests.cli_in_process import loopbench as run_cli
from tests.cli_process import ENV

ROOT = Path(__file__).resolve().parents[1]


def loopbench(*args: str, cwd: Path) -> Ran:
    return run_cli(*args, cwd=cwd, env={"LOOPBENCH_CONF": ENV["LOOPBENCH_CONF"]})


def loopbench_process(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=ENV, timeout=600)


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trace") / "small.parquet"
    r = loopbench("generate", "workload.n_jobs=80", "workload.span_s=14400", f"out={out}", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return out


def test_replay_writes_a_complete_run_directory(tmp_path, small_trace):
    r = loopbench_process("replay", f"trace.path={small_trace}", "loop=merged", f"hydra.run.dir={tmp_path}/run",
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
    assert not list(run.glob("*.log")), "nothing logs through Python logging: no empty log file"


def test_replay_multirun_sweeps_loops(tmp_path, small_trace):
    r = loopbench("replay", "-m", f"trace.path={small_trace}", "loop=separate,merged", "horizon_s=7200",
                  f"hydra.sweep.dir={tmp_path}/sweep", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    runs = sorted((tmp_path / "sweep").glob("*/metrics.parquet"))
    assert len(runs) == 2
    assert {pl.read_parquet(p)["loop"][0] for p in runs} == {"separate", "merged"}
    sweep = tmp_path / "sweep"  # the sweep ends naming its runs and the report that tables them
    assert f"loopbench: 2 runs in {sweep}; " in r.stderr and f"loopbench report {sweep} -o {sweep / 'report'}" in r.stderr


def test_a_compare_sweep_ends_naming_its_runs_and_the_report_over_them(tmp_path, small_trace):
    """2 seeds x 2 loops: 4 runs, in one folder per seed and loop, that the command tables."""
    sweep = tmp_path / "sweep"
    r = loopbench("compare", "-m", f"trace.path={small_trace}", "loops=separate,merged", "seed=0,1",
                  "horizon_s=1800", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (f"loopbench: 4 runs in {sweep}; their tables and plots, mean and "
                                                 f"spread over seeds: loopbench report {sweep} -o {sweep / 'report'}")


def test_compare_prints_all_loops_side_by_side(tmp_path, small_trace):
    r = loopbench("compare", f"trace.path={small_trace}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    loops = ["separate_2026", "separate_2026_karpenter", "separate_2026_priced", "merged", "separate"]
    for loop in loops[1:]:  # the verdict in ranges form, for one setting, against the strongest baseline
        assert re.search(rf"^({loop} vs separate_2026: NOT EQUAL WORK: .*\. )?{loop} (saves .* over|burns .* than) "
                         r"separate_2026 \(.*\) in one setting \(scoring ", r.stdout, re.M), r.stdout
    (csv,) = (tmp_path / "runs" / "compare").glob("*/comparison.csv")
    table = pl.read_csv(csv)
    assert table.columns == ["metric", *loops]
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


# ---- no traceback reaches a user: every bad input below is one line on stderr ----------------

#: What stderr holds besides an error: progress lines (harness/progress.py, off a terminal).
PROGRESS = re.compile(r"(compare|replay|import|generate)\b.*: ")


def one_line_error(r: Ran | subprocess.CompletedProcess, code: int = 1) -> str:
    """The error: one line, the last on stderr (only progress lines before it), no traceback."""
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == code, r.stderr
    *before, last = r.stderr.strip().splitlines()
    assert last.startswith("loopbench") and all(PROGRESS.match(line) for line in before), r.stderr
    return last


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _drop_column(path: Path, column: str) -> None:
    pl.read_parquet(path).drop(column).write_parquet(path)


BROKEN_RUNS = {  # what is done to the second of two finished runs -> the file the error names
    "truncated_metrics": (lambda d: _truncate(d / "metrics.parquet"), "metrics.parquet"),
    "truncated_jobs": (lambda d: _truncate(d / "jobs.parquet"), "jobs.parquet"),
    "config_not_yaml": (lambda d: (d / "config.yaml").write_text("loop: {name: [unclosed\n"), "config.yaml"),
    "config_not_mapping": (lambda d: (d / "config.yaml").write_text("- a\n- list\n"), "config.yaml"),
    "metrics_without_seed": (lambda d: _drop_column(d / "metrics.parquet", "seed"), "metrics.parquet"),
    "jobs_without_latency": (lambda d: _drop_column(d / "jobs.parquet", "start_latency_s"), "jobs.parquet"),
    "timeline_without_frag": (lambda d: _drop_column(d / "timeline.parquet", "frag_ratio"), "timeline.parquet"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_RUNS))
def test_report_refuses_a_broken_run_naming_its_file(case, tmp_path):
    from tests.test_report import loop_cfg, make_run

    make_run(tmp_path / "runs" / "a", loop_cfg("merged"), 0, 4.0, 60.0, 100.0)
    bad = make_run(tmp_path / "runs" / "b", loop_cfg("merged"), 1, 6.0, 80.0, 200.0)
    breaks, name = BROKEN_RUNS[case]
    breaks(bad)
    r = loopbench("report", str(tmp_path / "runs"), "-o", str(tmp_path / "out"), cwd=tmp_path)
    line = one_line_error(r)
    assert line.startswith("loopbench report: error: ") and str(bad.resolve() / name) in line, line
    assert not (tmp_path / "out").exists()


OUTPUT_UNDER_A_FILE = {  # command (with {bad}: a path below a plain file) -> whose message names it
    "report": ("report", "{runs}", "-o", "{bad}"),
    "import": ("import", "helios", str(ROOT / "tests" / "fixtures" / "helios" / "cluster_log.csv"), "-o", "{bad}"),
    "import_cluster": ("import", "openb", "--nodes", str(ROOT / "tests" / "fixtures" / "openb" / "nodes.csv"),
                       "--cluster-out", "{bad}"),
    "generate": ("generate", "workload.n_jobs=20", "out={bad}"),
    "export": ("export", "kubernetes", "--cluster", str(ROOT / "conf" / "cluster" / "default.yaml"),
               "--trace", str(ROOT / "benchmarks" / "data" / "small.parquet"), "-o", "{bad}"),
}


@pytest.mark.parametrize("case", sorted(OUTPUT_UNDER_A_FILE))
def test_an_output_below_a_plain_file_is_one_line(case, tmp_path):
    from tests.test_report import loop_cfg, make_run

    make_run(tmp_path / "runs" / "a", loop_cfg("merged"), 0, 4.0, 60.0, 100.0)
    (tmp_path / "plain").write_text("a file, not a folder\n")
    bad = tmp_path / "plain" / "x.out"
    args = [a.format(runs=tmp_path / "runs", bad=bad) for a in OUTPUT_UNDER_A_FILE[case]]
    line = one_line_error(loopbench(*args, cwd=tmp_path))
    assert line.startswith(f"loopbench {args[0]}: error: ") and str(tmp_path / "plain") in line, line
    assert (tmp_path / "plain").read_text() == "a file, not a folder\n"


@pytest.mark.parametrize("loops, says", [("loops=", "no loop to compare"),
                                         ("loops=nope", "unknown loop 'nope'; available: merged, merged_kueue, separate,"),
                                         ("loops=merged,nope,nada", "unknown loops 'nope', 'nada'; available: merged,"),
                                         ("loops=merged,merged", "loop 'merged' is listed twice")])
def test_compare_checks_every_loop_name_before_the_first_runs(loops, says, tmp_path, small_trace):
    r = loopbench("compare", f"trace.path={small_trace}", loops, cwd=tmp_path)
    line = one_line_error(r)
    assert line.startswith("loopbench compare: error: loops: ") and says in line, line
    assert not list(tmp_path.rglob("metrics.parquet")), "no loop ran"


def test_compare_unknown_override_is_hydras_short_error(tmp_path, small_trace):
    r = loopbench("compare", f"trace.path={small_trace}", "nosuch=1", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[0] == "Could not override 'nosuch'.", r.stderr
    assert not list(tmp_path.rglob("metrics.parquet"))


def test_compare_is_a_hydra_app(tmp_path, small_trace):
    r = loopbench("compare", "--cfg", "job", f"trace.path={small_trace}", "loops=merged,separate", "seed=3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cfg = yaml.safe_load(r.stdout)
    assert cfg["loops"] == ["merged", "separate"] and cfg["seed"] == 3 and cfg["trace"]["path"] == str(small_trace)
    assert not (tmp_path / "runs").exists()
    r = loopbench("compare", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("loopbench compare") and "powered by Hydra" not in r.stdout
    assert re.search(r"^\s+separate_provreq\s+Today's bridge", r.stdout, re.M), r.stdout
    # its examples are compare's own (replay's `loop=merged` is refused by compare)
    assert re.search(r"^\s+loopbench compare loops=separate,\S+ ", r.stdout, re.M), r.stdout
    assert "loop=merged" not in r.stdout


def test_compare_overrides_apply_to_every_loop(tmp_path, small_trace):
    r = loopbench("compare", f"trace.path={small_trace}", "loops=separate,merged", "seed=2", "horizon_s=3600",
                  "hydra.run.dir=out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for loop in ("separate", "merged"):
        m = pl.read_parquet(tmp_path / "out" / loop / "metrics.parquet")
        assert (m["loop"][0], m["seed"][0], m["horizon_s"][0]) == (loop, 2, 3600.0)
    assert pl.read_csv(tmp_path / "out" / "comparison.csv").columns == ["metric", "separate", "merged"]


def test_compare_takes_a_loop_setting_for_every_loop_that_has_it(tmp_path, small_trace):
    """`loop.KEY=VALUE` applies to each compared loop, though compare.yaml's default loop may
    not have the key; a compared loop without it is refused by name before any loop runs."""
    r = loopbench("compare", f"trace.path={small_trace}", "loops=separate,separate_provreq", "horizon_s=3600",
                  "loop.autoscaler.scan_interval_s=20", "hydra.run.dir=out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for loop in ("separate", "separate_provreq"):
        cfg = yaml.safe_load((tmp_path / "out" / loop / "config.yaml").read_text())
        assert cfg["loop"]["autoscaler"]["scan_interval_s"] == 20
    (tmp_path / "two").mkdir()
    r = loopbench("compare", f"trace.path={small_trace}", "loops=merged,separate", "loop.scan_interval_s=20",
                  cwd=tmp_path / "two")
    line = one_line_error(r)
    assert line == ("loopbench compare: error: loop.scan_interval_s: loop 'separate' has no such setting; "
                    "compare the loops that have it: loops=merged"), line
    assert not list((tmp_path / "two").rglob("metrics.parquet")), "no loop ran"


LOOPS = sorted(p.stem for p in (ROOT / "conf" / "loop").glob("*.yaml"))
POLICIES = sorted(p.stem for p in (ROOT / "conf" / "policy").glob("*.yaml"))


@pytest.mark.parametrize("command", [(), ("replay",), ("compare",)], ids=["loopbench", "replay", "compare"])
def test_help_lists_every_loop_and_policy_with_one_line(command, tmp_path):
    r = loopbench(*command, "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "powered by Hydra" not in r.stdout
    for name in LOOPS + POLICIES:
        line = re.search(rf"^\s+{name}\s+(\S.*)$", r.stdout, re.M)
        assert line, (name, r.stdout)


@pytest.mark.parametrize("command", ["replay", "compare"])
def test_help_lists_the_loops_and_policies_of_the_users_own_config_folder(command, tmp_path):
    """A policy or loop in a folder on Hydra's search path is one the user can pick: --help
    lists it beside the package's own."""
    for group, name, line in (("policy", "fewest_gpus", "Fewest free GPUs first."), ("loop", "mine", "My loop.")):
        (tmp_path / "myconf" / group).mkdir(parents=True)
        (tmp_path / "myconf" / group / f"{name}.yaml").write_text(f"# {line}\n_target_: my_policy.Mine\n")
    r = loopbench(command, f"hydra.searchpath=[file://{tmp_path}/myconf]", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^  fewest_gpus +Fewest free GPUs first\.$", r.stdout, re.M), r.stdout
    assert re.search(r"^  mine +My loop\.$", r.stdout, re.M) and re.search(r"^  merged +One planner", r.stdout, re.M)


@pytest.mark.parametrize("group", ["loop", "policy"])
def test_every_loop_and_policy_says_what_it_is_in_its_first_line(group):
    from harness.config import describe

    for path in sorted((ROOT / "conf" / group).glob("*.yaml")):
        text = describe(path)
        assert text.endswith((".", ")")) and len(text) <= 100, (path.name, text)


def test_a_cluster_error_names_its_yaml_file_and_pool(tmp_path, small_trace):
    (tmp_path / "myconf" / "cluster").mkdir(parents=True)
    mine = tmp_path / "myconf" / "cluster" / "mine.yaml"
    mine.write_text((ROOT / "tests" / "malformed" / "cluster" / "text_max_size.yaml").read_text())
    r = loopbench("replay", f"hydra.searchpath=[file://{tmp_path / 'myconf'}]", "cluster=mine",
                  f"trace.path={small_trace}", f"hydra.run.dir={tmp_path}/run", cwd=tmp_path)
    line = one_line_error(r)
    assert line == (f"loopbench replay: error: {mine}: pool 'gpu' at cluster.pools[0].max_size: "
                    "expected int, got '4'"), line


def test_a_cluster_error_names_the_overrides_too(tmp_path, small_trace):
    r = loopbench("compare", "cluster.pools.0.max_size=-1", f"trace.path={small_trace}", cwd=tmp_path)
    line = one_line_error(r)
    assert line.startswith(f"loopbench compare: error: {ROOT / 'conf' / 'cluster' / 'default.yaml'} "
                           "with cluster.pools.0.max_size=-1: pool '"), line


@pytest.mark.parametrize("args", [("--help",), ("compare", "--help"), ("replay", "--cfg", "job")])
def test_a_reader_that_stops_early_gets_no_traceback(args, tmp_path):
    """`loopbench compare --help | head -3`: the pipe closes before loopbench has written."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=tmp_path, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert (proc.returncode, err) == (141, ""), err


def test_generate_help_says_what_it_does(tmp_path):
    r = loopbench("generate", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("loopbench generate") and "powered by Hydra" not in r.stdout
    assert "workload: default, philly, scale" in r.stdout


def test_what_the_readmes_have_users_write_into_the_checkout_is_git_ignored():
    """Imported and generated traces, a config folder of one's own and an exported cluster, at
    the paths the README and traces/README.md use, stay out of `git status`; the bundled
    traces do not."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT).returncode == 0

    written = ["openb.parquet", "mine.parquet", "myconf/cluster/openb_static.yaml", "traces/azure.parquet",
               "traces/azure.services.parquet", "traces/seed7.parquet", "default.yaml"]
    assert [p for p in written if not ignored(p)] == []
    bundled = subprocess.run(["git", "ls-files", "traces"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert bundled and [p for p in bundled if ignored(p)] == []
