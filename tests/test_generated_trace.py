"""A trace drawn at run time from the run's seed (harness/generated.py), the generator's gang
count, gang size and load knobs, and the Philly-distributed workload (conf/workload/philly.yaml)
against the published figures it is drawn from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from harness.config import compose
from harness.errors import ConfigError
from harness.generate import SyntheticWorkload
from harness.generated import trace_file
from harness.settings import check_config, instantiate
from harness.trace import read_trace

ROOT = Path(__file__).resolve().parent.parent


def _scenario(scenario: str, tmp_path: Path, *overrides: str):
    return compose("config", [f"+scenario={scenario}", f"trace.path={tmp_path / 'drawn.parquet'}", *overrides])


def _workload(scenario: str, *overrides: str) -> SyntheticWorkload:
    cfg = compose("config", [f"+scenario={scenario}", *overrides])
    check_config(cfg)
    return instantiate(cfg.workload, "workload", _convert_="all")


def _jobs(table: pa.Table) -> pa.Table:
    """One row per job: its class (job id prefix), submit time, pods and GPUs per pod."""
    first = pc.equal(pc.utf8_slice_codeunits(table.column("pod_id"), -3), "-00")
    jobs = table.filter(first)
    return pa.table({"cls": pc.utf8_slice_codeunits(jobs.column("job_id"), 0, 3), "submit": jobs.column("submit_s"),
                     "members": jobs.column("min_member"), "gpus": jobs.column("gpu_count"),
                     "duration": jobs.column("duration_s")})


def _gang_sizes(table: pa.Table) -> np.ndarray:
    jobs = _jobs(table)
    members = jobs.column("members").to_numpy()
    return members[members > 1]


def test_a_seed_draws_its_trace_once_and_another_seed_redraws_jobs_arrivals_and_gangs(tmp_path):
    first = trace_file(_scenario("synthetic_redrawn", tmp_path, "seed=1"))
    stamp = Path(first).stat().st_mtime_ns
    again = trace_file(_scenario("synthetic_redrawn", tmp_path, "seed=1"))
    assert again == first and Path(first).stat().st_mtime_ns == stamp  # cached: read, not redrawn
    other = trace_file(_scenario("synthetic_redrawn", tmp_path, "seed=2"))
    assert other != first
    a, b = read_trace(first)[0], read_trace(other)[0]
    ja, jb = _jobs(a), _jobs(b)
    mix = [pc.value_counts(j.column("cls")).to_pylist() for j in (ja, jb)]
    assert mix[0] != mix[1], "the job mix is redrawn"
    assert not np.array_equal(ja.column("submit").to_numpy()[:50], jb.column("submit").to_numpy()[:50])
    assert not np.array_equal(_gang_sizes(a), _gang_sizes(b)), "the gang sizes are redrawn"
    # a knob changed draws anew, into its own file
    assert trace_file(_scenario("synthetic_redrawn", tmp_path, "seed=1", "workload.gangs.n=30")) not in (first, other)


def test_seed_0_draws_the_bundled_trace():
    bundled, _ = read_trace(ROOT / "traces" / "default.parquet")
    assert _workload("synthetic_redrawn").table(0).equals(bundled)


def test_the_gang_knobs_give_what_was_asked():
    w = _workload("synthetic_redrawn", "workload.gangs.n=100")
    for seed in (0, 1):
        assert len(_gang_sizes(w.table(seed))) == 100
    sizes = _gang_sizes(_workload("synthetic_redrawn", "workload.gangs.n=400", "workload.gangs.members=[2,64]")
                        .table(0))
    assert len(sizes) == 400 and sizes.min() >= 2 and sizes.max() <= 64
    assert sizes.min() <= 4 and sizes.max() >= 60, "uniform over the whole range"
    assert abs(sizes.mean() - 33) < 3
    doubled = _workload("synthetic_redrawn", "workload.gangs.n=50", "workload.load=2").table(0)
    assert len(_gang_sizes(doubled)) == 100, "load multiplies a fixed count too"
    base, twice = (len(_jobs(_workload("philly_redrawn", f"workload.load={x}").table(0))) for x in (1, 2))
    assert 1.8 < twice / base < 2.2


@pytest.mark.parametrize("override, key", [
    ("workload.gangs.n=-1", "workload.gangs.n"),
    ("workload.gangs.n=1.5", "workload.gangs.n"),
    ("workload.load=0", "workload.load"),
    ("workload.gangs.members=[1,8]", "workload.gangs.members"),
    ("workload.gangs.members=[8,2]", "workload.gangs.members"),
    ("workload.gangs.member_weights.2=-1", r"workload.gangs.member_weights.2"),
])
def test_a_bad_knob_is_refused_by_its_key(override, key):
    with pytest.raises(ConfigError, match=key):
        _workload("philly_redrawn", override)


def test_knobs_that_contradict_each_other_are_refused_by_key(tmp_path):
    with pytest.raises(ConfigError, match=r"workload.gangs.member_weights: members already sets"):
        trace_file(_scenario("philly_redrawn", tmp_path, "workload.gangs.members=[2,8]"))
    with pytest.raises(ConfigError, match=r"workload.gangs.member_weights.1: a gang size must be"):
        trace_file(_scenario("philly_redrawn", tmp_path, "+workload.gangs.member_weights.1=0.5"))
    with pytest.raises(ConfigError, match=r"workload.gangs.n: n_jobs already fixes"):
        trace_file(_scenario("synthetic_redrawn", tmp_path, "workload.n_jobs=1000", "workload.gangs.n=20"))
    assert not list(tmp_path.iterdir()), "nothing drawn"


def test_the_philly_workload_matches_the_published_figures():
    """On ~100k jobs (120 days): the figures conf/workload/philly.yaml cites, within sampling
    tolerance: 856 jobs a day, GPUs per job mean 1.928 and median 1 (the 1-GPU share 76.45%, the
    multi-server share 1.25%, fitted), duration median 874 s and mean ~18,000 s."""
    days = 120
    jobs = _jobs(_workload("philly_redrawn", f"workload.span_s={days * 86400}").table(0))
    n = jobs.num_rows
    assert abs(n / days - 856.4) / 856.4 < 0.02
    gpus = jobs.column("gpus").to_numpy() * jobs.column("members").to_numpy()
    assert abs(gpus.mean() - 1.928) < 0.06 and np.median(gpus) == 1 and gpus.max() <= 128
    assert abs((gpus == 1).mean() - 0.7645) < 0.006
    assert abs((gpus > 8).mean() - 0.0125) < 0.0015
    duration = jobs.column("duration").to_numpy()
    assert abs(np.median(duration) / 874 - 1) < 0.03
    assert 14_000 < duration.mean() < 22_000  # a lognormal of sigma 2.46: its mean converges slowly


def test_a_generated_trace_replays(tmp_path):
    from harness.replay import build

    sim, loop = build(_scenario("philly_redrawn", tmp_path, "loop=merged", "workload.span_s=7200"))
    assert sim.cluster.name == "philly" and len(sim.w.job_id) > 0
    assert [p.name.split(".")[0] for p in tmp_path.glob("*.parquet")] == ["drawn"]  # its draw, beside trace.path


def test_each_cell_of_the_evidence_grid_names_its_trace_and_gang_count():
    from omegaconf import OmegaConf

    grid = OmegaConf.load(ROOT / "conf" / "experiment" / "loops_evidence.yaml").hydra.sweeper.params
    cells = str(grid.scenario).split(",")
    assert len(cells) == 6 and "openb_autoscaled" in cells
    for cell in cells:
        cfg = compose("config", ["experiment=loops_evidence", f"scenario={cell}"])
        check_config(cfg)
        assert Path(str(cfg.trace.path)).stem.startswith(cell.split("_g")[0].replace("_autoscaled", ""))
        if cell == "openb_autoscaled":
            assert not cfg.trace.get("generated") and cfg.get("workload") is None
        else:
            assert cfg.trace.generated and Path(str(cfg.trace.path)).stem == cell
            if cell.endswith("_load2"):  # the day at twice every rate: twice the gangs
                assert cfg.workload.load == 2.0 and cfg.workload.gangs.n == 40
            else:
                assert cfg.workload.gangs.n == int(cell.rsplit("_g", 1)[1])
