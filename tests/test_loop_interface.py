"""A loop is what harness/view.py declares, nothing more: a new one is one module plus
one YAML and runs through `replay`, `compare` and `report` untouched; an object that is not a
loop is refused by config key before the replay starts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from harness.autoscalers.cluster_autoscaler import ClusterAutoscaler
from harness.config import compose
from harness.errors import ConfigError
from harness.loops.base import Autoscaler, conform, members
from harness.loops.separate import SeparateLoops
from harness.replay import build
from harness.scheduler import Scheduler
from harness.scores import LeastAllocated
from harness.view import Loop, SimulationView
from tests.cli_process import process_env

ROOT = Path(__file__).resolve().parents[1]

#: A loop of its own, as a user writes one: the scheduler alone on a cluster that never scales.
STATIC_LOOP = '''
"""A static cluster: the scheduler places pods on the nodes there are; nothing adds or removes any."""
import numpy as np

from harness.description import Description
from harness.scheduler import Scheduler


class StaticCluster:
    def __init__(self, policy, name="static"):
        self.scheduler = Scheduler(policy)
        self.name = name

    @property
    def policy(self):
        return self.scheduler.policy

    def describe(self):
        return Description("static cluster (the scheduler alone)", rank=3)

    def attach(self, sim):
        self.scheduler.attach(sim)

    def next_wakeup(self, now):
        return np.inf

    def idle_ticks(self, start, before):
        return np.zeros(0)

    def step(self, sim, now):
        self.scheduler.cycle(now)


class Unfinished:
    """Forgot most of the interface."""

    def __init__(self, policy, name="unfinished"):
        self.name = name

    def attach(self, sim):
        pass
'''


def loopbench(*args: str, cwd: Path, mods: Path, conf: Path, plugins: str = "") -> subprocess.CompletedProcess:
    """The CLI with the user's modules importable, those in `plugins` named as theirs (a config
    may build their classes), and the user's config folder."""
    env = {**process_env(mods, conf=conf), "LOOPBENCH_PLUGINS": plugins}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.fixture(scope="module")
def user(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(working folder, module folder, config folder): the loop module and its YAML are the only
    new files, beside a copy of conf/ and a small trace."""
    root = tmp_path_factory.mktemp("user")
    mods, conf = root / "mods", root / "conf"
    mods.mkdir()
    (mods / "static_loop.py").write_text(STATIC_LOOP)
    shutil.copytree(ROOT / "conf", conf)
    (conf / "loop" / "static.yaml").write_text(
        "# The scheduler alone: no autoscaler.\n_target_: static_loop.StaticCluster\nname: static\npolicy: ${policy}\n")
    (conf / "loop" / "unfinished.yaml").write_text(
        "# Not a loop.\n_target_: static_loop.Unfinished\nname: unfinished\npolicy: ${policy}\n")
    r = loopbench("generate", "workload.n_jobs=60", "workload.span_s=7200", f"out={root / 'small.parquet'}",
                  cwd=root, mods=mods, conf=conf)
    assert r.returncode == 0, r.stderr
    return root, mods, conf


#: overrides of every run below: the small trace, an hour, four nodes there from the start
RUN = ["trace.path=small.parquet", "horizon_s=3600", "cluster.pools.0.min_size=4"]
#: the user's module, named as theirs: a config may build its classes
PLUGIN = "static_loop"


def test_a_new_loop_runs_through_replay_compare_and_report(user):
    root, mods, conf = user
    r = loopbench("replay", "loop=static", *RUN, "hydra.run.dir=runs/one", cwd=root, mods=mods, conf=conf, plugins=PLUGIN)
    assert r.returncode == 0, r.stderr
    one = pl.read_parquet(root / "runs" / "one" / "metrics.parquet")
    assert (one["loop"][0], one["policy"][0]) == ("static", "1*LeastAllocated+1*BalancedAllocation")  # kube_default
    floor = sum(pool.min_size for pool in compose("config", RUN[1:]).cluster.pools)
    assert one["nodes_provisioned"][0] == floor  # the pools' minimums, never more

    r = loopbench("compare", "loops=separate,static", *RUN, "hydra.run.dir=runs/cmp", cwd=root, mods=mods, conf=conf, plugins=PLUGIN)
    assert r.returncode == 0, r.stderr
    table = pl.read_csv(root / "runs" / "cmp" / "comparison.csv")
    assert table.columns == ["metric", "separate", "static"]

    r = loopbench("report", "runs", "-o", "out", cwd=root, mods=mods, conf=conf, plugins=PLUGIN)
    assert r.returncode == 0, r.stderr
    md = (root / "out" / "summary.md").read_text()
    # the separate loops first, then the new loop's family, named as it describes itself
    assert "| separate | separate | separate loops, every switch off (baseline) |\n" \
           "| static | static | static cluster (the scheduler alone) |" in md
    runs = pl.read_csv(root / "out" / "runs.csv")
    assert sorted(runs["variant"].to_list()) == ["separate", "static", "static"]
    ablation = pl.read_csv(root / "out" / "ablation.csv")
    assert set(ablation["capability"]) == {"separate loops, every switch off (baseline)",
                                           "static cluster (the scheduler alone)"}


def test_an_object_that_is_not_a_loop_is_refused_by_its_config(user):
    root, mods, conf = user
    r = loopbench("replay", "loop=unfinished", *RUN, "hydra.run.dir=runs/bad", cwd=root, mods=mods, conf=conf, plugins=PLUGIN)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().splitlines() == [
        ("loopbench replay: error: loop 'unfinished': static_loop.Unfinished is no Loop: it has no policy, "
         "describe, next_wakeup, idle_ticks, step (see Loop in harness/view.py)")]
    assert not (root / "runs" / "bad" / "metrics.parquet").exists()


def test_an_autoscaler_that_is_not_one_is_refused_by_its_config():
    class HalfAutoscaler:
        def attach(self, sim, scheduler):
            pass

    with pytest.raises(ConfigError, match=r"^loop.autoscaler: .*HalfAutoscaler is no Autoscaler: it has no "
                                          r"next_scan, scan, idle_ticks, describe \(see Autoscaler in"):
        SeparateLoops(Scheduler(LeastAllocated()), HalfAutoscaler())


@pytest.mark.parametrize("target, says", [
    ("types.SimpleNamespace", "loop 'x': types.SimpleNamespace is no Loop: it has no policy, describe, "),
    ("harness.separate.SeparateLoops", ("loop: cannot instantiate: Error loading 'harness.separate.SeparateLoops': "
                                        "ModuleNotFoundError(\"No module named 'harness.separate'\")")),
    ("builtins.print", "loop._target_ = 'builtins.print': not a loopbench component: "),
])
def test_a_run_whose_loop_cannot_be_described_is_refused_by_its_config(target, says, tmp_path, monkeypatch):
    """A report names the run's config.yaml: its loop is none (a class of the user's module
    `types`), its class is gone (a run older than a move of the code), or it is no component."""
    from harness.errors import LoopbenchError

    monkeypatch.setenv("LOOPBENCH_PLUGINS", "types")
    from harness.report import build as report
    from tests.test_report import make_run

    run = make_run(tmp_path / "runs" / "0", {"_target_": target, "name": "x"}, 0, 1.0, 1.0, 1.0)
    with pytest.raises(LoopbenchError) as err:
        report([tmp_path / "runs"], tmp_path / "out")
    assert str(err.value).startswith(f"{run / 'config.yaml'}: its loop cannot be built: {says}"), str(err.value)
    assert str(err.value).endswith("; rerun that run or remove its directory")


def test_the_shipped_loops_and_the_simulation_meet_the_interfaces():
    sim, _ = build(compose("config", ["horizon_s=60"]))
    conform(sim, SimulationView, "sim")  # what the loops may ask of it, it has
    for name in sorted(p.stem for p in (ROOT / "conf" / "loop").glob("*.yaml")):
        conform(build(compose("config", [f"loop={name}", "horizon_s=60"]))[1], Loop, name)
    conform(ClusterAutoscaler(), Autoscaler, "autoscaler")
    assert members(Loop) == ["name", "policy", "describe", "attach", "next_wakeup", "idle_ticks", "step"]
