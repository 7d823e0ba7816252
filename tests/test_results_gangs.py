"""`loopbench results loops_gangs`: the gang-size sweep (philly_redrawn_mN: every gang exactly N
servers, placed anywhere) and the 400-gang cells, for separate_2026 and merged."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from harness import results
from harness.config import compose
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.replay import build
from harness.settings import check_config, instantiate

EXP = results.BY_NAME["loops_gangs"]
SIZES = (2, 8, 32, 64)


def _params(sets=()):
    return results.sweep_params(EXP, results._hydra_config(EXP.name, []), sets)


def _gangs(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per gang (its first pod): size, locality, submit time and duration."""
    col = lambda name: table.column(name).to_numpy(zero_copy_only=False)  # noqa: E731
    minm, job = col("min_member"), col("job_id")
    first = (minm > 1) & np.r_[True, job[1:] != job[:-1]]
    return minm[first], col("gang_locality")[first], col("submit_s")[first], col("duration_s")[first]


def test_the_sweep_is_4_sizes_and_2_gang_tails_x_2_loops_x_3_seeds():
    values = results._sweep_values(_params())
    assert values["scenario"] == [f"philly_redrawn_m{m}" for m in SIZES] + ["philly_redrawn_g400",
                                                                          "synthetic_redrawn_g400"]
    assert values["loop"] == ["separate_2026", "merged"] and values["seed"] == ["0", "1", "2"]
    assert results.sweep_size(_params()) == 36
    for cfg in results._each_config(EXP, None, _params()):  # every cell runs to completion, named for its trace
        check_config(cfg)
        assert cfg.stop_when_done and cfg.trace.generated
    cells = {c: compose("config", ["experiment=loops_gangs", f"scenario={c}"]) for c in values["scenario"]}
    assert {c: str(cfg.trace.path).rsplit("/", 1)[1] for c, cfg in cells.items()} == {
        c: f"{c}.parquet" for c in values["scenario"]}
    assert [cells[c].workload.gangs.n for c in values["scenario"]] == [100] * 4 + [400] * 2


def test_a_size_cell_draws_exactly_that_size_anywhere_with_the_same_arrivals_and_durations():
    """Seed 1 of each size cell: 100 gangs, all of exactly N pods of 8 GPUs with locality none;
    the gangs' arrival times and durations are the same in every cell (the gang stream draws
    them before the sizes), so a cell differs from another by the gang size alone."""
    drawn = {}
    for m in SIZES:
        cfg = compose("config", [f"+scenario=philly_redrawn_m{m}"])
        workload = instantiate(cfg.workload, "workload", _convert_="all")
        workload.check_gangs_fit(instantiate(cfg.cluster, "cluster", _convert_="all"))
        size, locality, submit, duration = _gangs(workload.table(1))
        assert len(size) == 100 and set(size) == {m} and set(locality) == {"none"}
        drawn[m] = (submit, duration)
    for m in SIZES[1:]:
        assert np.array_equal(drawn[m][0], drawn[2][0]) and np.array_equal(drawn[m][1], drawn[2][1])


@pytest.mark.parametrize("loop", ["separate_2026", "merged"])
@pytest.mark.parametrize("m", SIZES)
def test_a_two_gang_version_of_each_size_cell_replays_and_starts_both_gangs(m, loop, tmp_path):
    """Two gangs of the cell's size and an hour of the other jobs, to the last pod: both gangs
    start, every pod is done, and the cluster grew to hold the largest (64 servers)."""
    cfg = compose("config", [f"+scenario=philly_redrawn_m{m}", f"loop={loop}", "seed=0", "workload.gangs.n=2",
                             "workload.span_s=3600", f"trace.path={tmp_path / 'drawn.parquet'}"])
    sim, built = build(cfg)
    sim.run(built)
    row = summary_row(sim, jobs_frame(sim), nodes_frame(sim), {"loop": loop}).row(0, named=True)
    assert row["gangs"] == 2 and row["gangs_never_started"] == 0
    assert row["pods_done"] == row["pods"] == len(sim.w.job)
    assert int(np.max(sim.w.job_min_member)) == m
