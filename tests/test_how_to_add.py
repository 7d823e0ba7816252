"""docs/architecture.md's "How to add" steps, followed as a user would: a placement policy and an
autoscaler of one's own, each one module outside the package and one YAML in a copy of conf/,
run through `loopbench replay` with their settings checked by the rules they declare; and an
importer, one module and one entry in `importers/cli.py::formats`, whose trace replays."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import polars as pl
import pytest

from harness.importers import cli as importers
from harness.trace import read_trace
from tests.test_loop_interface import RUN, loopbench

ROOT = Path(__file__).resolve().parents[1]
#: The user's modules, named as theirs: a config builds only these and the package's components.
PLUGINS = "my_policy,my_autoscaler"

#: A policy: score plugins read the struct-of-arrays state of the candidate nodes only.
USER_POLICY = '''
"""Fewest free whole GPUs first: pack GPU pods onto the nodes already most used."""
from harness.scores import ScorePlugin
from harness.settings import check, number


class FewestFreeGpus(ScorePlugin):
    SETTINGS = {"per_gpu": number("score lost per free whole GPU of a node", gt=0)}

    def __init__(self, per_gpu=1.0, weight=1.0):
        super().__init__(weight)
        check(self, "policy", per_gpu=per_gpu)
        self.per_gpu = float(per_gpu)

    def score(self, state, w, pod, nodes, rng):
        return -self.per_gpu * state.free_whole[nodes]
'''

#: An autoscaler for the separate loops: one node of the first pool per scan while pods wait.
USER_AUTOSCALER = '''
"""One node at a time: every scan, while a pod is pending and no node boots, ask for one node."""
import numpy as np

from harness.description import Description
from harness.settings import check, period
from harness.status import BOOTING, PENDING


class OneAtATime:
    SETTINGS = {"scan_interval_s": period("seconds between scans")}

    def __init__(self, scan_interval_s=30.0):
        check(self, "loop.autoscaler", scan_interval_s=scan_interval_s)
        self.scan_interval_s = float(scan_interval_s)
        self.next_scan = 0.0

    def attach(self, sim, scheduler):
        self.sim = sim

    def scan(self, now):
        self.next_scan = now + self.scan_interval_s
        sim = self.sim
        waiting = (sim.pod_status == PENDING).any()
        if waiting and not (sim.state.status == BOOTING).any() and sim.cloud.room(0) > 0:
            sim.provision(0, 1, atomic=False)

    def idle_ticks(self, start, before):
        return np.zeros(0)

    def describe(self):
        return Description("one node at a time", rank=4)
'''


@pytest.fixture(scope="module")
def user(tmp_path_factory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("user")
    mods, conf = root / "mods", root / "conf"
    mods.mkdir()
    (mods / "my_policy.py").write_text(USER_POLICY)
    (mods / "my_autoscaler.py").write_text(USER_AUTOSCALER)
    shutil.copytree(ROOT / "conf", conf)
    (conf / "policy" / "fewest_gpus.yaml").write_text(
        "# Fewest free whole GPUs first.\n_target_: my_policy.FewestFreeGpus\nper_gpu: 2\n")
    (conf / "loop" / "one_at_a_time.yaml").write_text(
        "# The scheduler beside an autoscaler that adds one node per scan.\n"
        "defaults:\n  - scheduler: default\n  - _self_\n"
        "_target_: harness.loops.separate.SeparateLoops\nname: one_at_a_time\n"
        "autoscaler:\n  _target_: my_autoscaler.OneAtATime\n  scan_interval_s: 30\n")
    r = loopbench("generate", "workload.n_jobs=60", "workload.span_s=7200", f"out={root / 'small.parquet'}",
                  cwd=root, mods=mods, conf=conf)
    assert r.returncode == 0, r.stderr
    return root, mods, conf


def test_a_policy_of_ones_own_places_pods_and_its_rule_refuses_a_bad_setting(user):
    root, mods, conf = user
    r = loopbench("replay", "policy=fewest_gpus", *RUN, "hydra.run.dir=runs/policy", cwd=root, mods=mods, conf=conf, plugins=PLUGINS)
    assert r.returncode == 0, r.stderr
    metrics = pl.read_parquet(root / "runs" / "policy" / "metrics.parquet")
    assert metrics["policy"][0] == "FewestFreeGpus" and metrics["pods_done"][0] > 0
    r = loopbench("replay", "policy=fewest_gpus", "policy.per_gpu=0", *RUN, cwd=root, mods=mods, conf=conf,
                  plugins=PLUGINS)
    assert r.returncode == 1 and "policy.per_gpu = 0: must be a number > 0" in r.stderr, r.stderr


def test_a_module_of_ones_own_not_named_in_loopbench_plugins_is_refused(user):
    root, mods, conf = user
    r = loopbench("replay", "policy=fewest_gpus", *RUN, cwd=root, mods=mods, conf=conf)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("loopbench replay: error: policy._target_ = 'my_policy.FewestFreeGpus': not a "
                               "loopbench component: ") and "LOOPBENCH_PLUGINS=my_policy if" in r.stderr, r.stderr


def test_an_autoscaler_of_ones_own_adds_nodes_beside_the_scheduler(user):
    root, mods, conf = user
    r = loopbench("replay", "loop=one_at_a_time", *RUN, "hydra.run.dir=runs/scaler", cwd=root, mods=mods, conf=conf, plugins=PLUGINS)
    assert r.returncode == 0, r.stderr
    metrics = pl.read_parquet(root / "runs" / "scaler" / "metrics.parquet")
    floor = 4  # RUN's four nodes there from the start
    assert metrics["loop"][0] == "one_at_a_time" and metrics["nodes_provisioned"][0] > floor
    r = loopbench("replay", "loop=one_at_a_time", "loop.autoscaler.scan_interval_s=0", *RUN, cwd=root, mods=mods,
                  conf=conf, plugins=PLUGINS)
    assert r.returncode == 1 and "loop.autoscaler.scan_interval_s = 0" in r.stderr, r.stderr


#: An importer: one row per job of a made-up log, mapped by the shared job-table helpers.
USER_IMPORTER = '''
"""A made-up job log (`id,team,gpus,machines,submitted,seconds`, epoch seconds) to the trace:
a job on `machines` machines is a gang of that many pods, `gpus` each, 4 cores each."""
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from harness.importers.common import Tally, concat, csv_batches, float_np, job_rows_to_pods, rebase, require

COLUMNS = ["id", "team", "gpus", "machines", "submitted", "seconds"]


def read_toy(path):
    file, tally, tables = str(path), Tally(), []
    for row0, b in csv_batches(path, COLUMNS):
        gpus = float_np(b.column("gpus"), file, "gpus", row0)
        require(gpus, gpus < 0, file, "gpus", row0, "must be >= 0")
        machines = float_np(b.column("machines"), file, "machines", row0)
        table = job_rows_to_pods(tally, file, row0, job_id=pc.utf8_trim_whitespace(b.column("id")),
                                 submit=float_np(b.column("submitted"), file, "submitted", row0),
                                 duration=float_np(b.column("seconds"), file, "seconds", row0),
                                 nodes=machines, gpus_per_pod=gpus, cpu_per_pod=np.full(len(gpus), 4.0),
                                 queue=b.column("team"), nodes_column="machines", submit_column="submitted")
        if table is not None:
            tables.append(table)
    table, meta = rebase(concat(tables, file), f"toy {Path(path).name}", "CC0", "a made-up log")
    return tally.result(table, meta, "jobs")
'''

TOY_LOG = """id,team,gpus,machines,submitted,seconds
a,vision,8,2,1700000000,600
b,speech,1,1,1700000060,300
c,vision,2,1,1700000120,0
d,speech,4,1,1700000180,1200
"""


@pytest.fixture()
def toy_format(user, monkeypatch):
    """The importer's module on the path and its entry in the table of formats."""
    root, mods, _ = user
    (mods / "my_importer.py").write_text(USER_IMPORTER)
    monkeypatch.syspath_prepend(str(mods))
    monkeypatch.delitem(sys.modules, "my_importer", raising=False)
    import my_importer

    known = importers.formats()
    monkeypatch.setattr(importers, "formats", lambda: {
        **known, "toy": importers.Format(importers.one_file(my_importer.read_toy), None, False, "toy.csv")})
    return root


def test_an_importer_of_ones_own_writes_a_trace_that_replays(toy_format, user, capsys):
    root, mods, conf = user
    (root / "toy.csv").write_text(TOY_LOG)
    assert importers.main(["toy", str(root / "toy.csv"), "-o", str(root / "toy.parquet")]) == 0
    assert "zero duration" in capsys.readouterr().out  # job c never ran: dropped, counted
    table, _ = read_trace(root / "toy.parquet")
    pods = table.to_pydict()
    assert pods["submit_s"] == [0.0, 0.0, 60.0, 180.0] and pods["gpu_count"] == [8, 8, 1, 4]
    assert pods["min_member"] == [2, 2, 1, 1]
    assert pods["queue"] == ["vision", "vision", "speech", "speech"]
    r = loopbench("replay", "trace.path=toy.parquet", "horizon_s=3600", "hydra.run.dir=runs/toy", cwd=root,
                  mods=mods, conf=conf)
    assert r.returncode == 0, r.stderr
    assert pl.read_parquet(root / "runs" / "toy" / "metrics.parquet")["pods_done"][0] == 4


def test_an_importer_of_ones_own_refuses_a_bad_row_by_file_column_and_row(toy_format, capsys):
    """Rows count from 0, the first after the header."""
    root = toy_format
    (root / "bad.csv").write_text(TOY_LOG.replace("b,speech,1,", "b,speech,-1,"))
    assert importers.main(["toy", str(root / "bad.csv"), "-o", str(root / "bad.parquet")]) == 1
    err = capsys.readouterr().err
    assert "bad.csv" in err and "gpus" in err and "row 1" in err and "must be >= 0 (got -1.0)" in err, err
    assert not (root / "bad.parquet").exists()
