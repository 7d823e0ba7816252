"""The robustness grid's arithmetic on hand-made run tables: t-based 95% intervals over seeds,
savings paired by seed per cell, the interface steps, and the headline in ranges form."""

from __future__ import annotations

import math

import polars as pl
import pytest

from harness import grid

approx = pytest.approx


def runs(idle: dict[tuple[str, str], list[float]], **cell) -> pl.DataFrame:
    """Run rows: idle hours per (loop, policy), one per seed in order; `cell` adds constant columns."""
    return pl.DataFrame([{"loop": loop, "policy": policy, "seed": s, "idle_accel_hours": v, **cell}
                         for (loop, policy), values in idle.items() for s, v in enumerate(values)])


#: policy A: merged saves 40 h on every seed (no spread); policy B: 10, 20, 0 h (mean 10, std 10).
TWO_CELLS = runs({("separate", "A"): [100.0, 110.0, 120.0], ("merged", "A"): [60.0, 70.0, 80.0],
                  ("separate", "B"): [100.0, 100.0, 100.0], ("merged", "B"): [90.0, 80.0, 100.0]}, trace="t.parquet")


def test_t_quantiles_from_the_table_and_beyond():
    assert grid.t975(2) == 4.303 and grid.t975(30) == 2.042
    assert grid.t975(31) == approx(2.0395, abs=1e-3) and grid.t975(120) == approx(1.9799, abs=1e-3)
    assert math.isnan(grid.t975(0))


def test_only_the_columns_that_vary_are_cells():
    assert grid.cell_columns(TWO_CELLS) == ["policy"]


def test_cell_means_and_intervals_by_hand():
    stats = grid.cell_stats(TWO_CELLS, ["policy"], ["idle_accel_hours"])
    a = stats.filter(pl.col("policy") == "A", pl.col("loop") == "separate").to_dicts()[0]
    # 100, 110, 120: mean 110, std 10, half-width 4.303 x 10 / sqrt(3) = 24.843
    assert (a["seeds"], a["mean"], a["half"]) == (3, 110.0, approx(24.843, abs=1e-3))
    one = grid.cell_stats(TWO_CELLS.filter(pl.col("seed") == 0), ["policy"], ["idle_accel_hours"])
    assert one["half"].null_count() == one.height  # one seed: no interval


def test_savings_are_paired_by_seed():
    s = {r["policy"]: r for r in grid.savings(TWO_CELLS, ["policy"], "merged", "separate").iter_rows(named=True)}
    # A: 40 h every seed: half-width 0, 40 / 110 = 36.4%, holds
    assert (s["A"]["saved"], s["A"]["half"], s["A"]["pct"], s["A"]["holds"]) == (40.0, 0.0, approx(36.364, abs=1e-3),
                                                                               True)
    # B: 10, 20, 0: mean 10, half-width 4.303 x 10 / sqrt(3) = 24.8 > 10: does not hold; 10 / 100 = 10%
    assert (s["B"]["saved"], s["B"]["half"], s["B"]["pct"], s["B"]["holds"]) == (10.0, approx(24.843, abs=1e-3),
                                                                               10.0, False)


def test_the_headline_in_ranges_form_names_the_cell_where_it_saves_least():
    per_cell = grid.savings(TWO_CELLS, ["policy"], "merged", "separate")
    assert grid.ranges_verdict("merged", "separate", per_cell, ["policy"]) == (
        "merged saves 10-36% of idle accelerator hours over separate, depending on scoring (2 settings). "
        "It saves the least (10%) with scoring B.")


def test_the_ranges_form_when_it_burns_more_somewhere_or_everywhere():
    mixed = runs({("separate", "A"): [100.0], ("merged", "A"): [50.0],
                  ("separate", "B"): [100.0], ("merged", "B"): [120.0]}, shortage="error").vstack(
        runs({("separate", "A"): [100.0], ("merged", "A"): [70.0],
              ("separate", "B"): [100.0], ("merged", "B"): [110.0]}, shortage="silent"))
    cols = grid.cell_columns(mixed)
    assert cols == ["policy", "shortage"]
    assert grid.ranges_verdict("merged", "separate", grid.savings(mixed, cols, "merged", "separate"), cols) == (
        "merged saves up to 50% of idle accelerator hours over separate but burns up to 20% more, depending on "
        "scoring and provider (4 settings). It burns the most (20% more) with scoring B, provider refuses at once.")
    worse = mixed.filter(pl.col("policy") == "B")
    assert grid.ranges_verdict("merged", "separate", grid.savings(worse, cols, "merged", "separate"), cols) == (
        "merged burns 10-20% more idle accelerator hours than separate, depending on scoring and provider "
        "(2 settings). It burns the most (20% more) with scoring B, provider refuses at once.")


def test_a_trace_is_named_by_its_file_and_its_cluster_goes_with_it():
    cell = {"trace": "runs/traces/openb_default_from112d_x40.parquet", "cluster": "openb", "policy": "P"}
    assert grid.describe(cell, ["trace", "cluster", "policy"]) == "trace openb_default_from112d_x40, scoring P"
    assert grid.depending(["trace", "cluster", "policy", "shortage"]) == "trace, scoring and provider"


def test_each_interface_step_over_the_one_before():
    idle = {("separate", "A"): [100.0, 100.0], ("separate_sees", "A"): [90.0, 80.0],
            ("separate_prefers", "A"): [85.0, 80.0], ("merged", "A"): [40.0, 40.0],
            ("separate_provreq", "A"): [100.0, 110.0]}
    st = {r["step"]: r for r in grid.steps(runs(idle), []).iter_rows(named=True)}
    assert list(st) == ["sees", "prefers", "requests (merged)", "provreq"]
    assert (st["sees"]["saved"], st["sees"]["pct"]) == (15.0, 15.0)  # 100 -> 85 on average
    assert st["prefers"]["saved"] == 2.5 and st["prefers"]["base"] == 85.0  # over sees, not over separate
    assert st["requests (merged)"]["saved"] == 42.5
    assert st["provreq"]["saved"] == -5.0 and st["provreq"]["holds"] is False


def test_a_range_from_no_saving_reads_0_not_plus_minus_0():
    """The low end of a range that rounds to nothing reads `0-42%`, not `±0-42%`."""
    assert grid.span([0.0, 42.0]) == "0-42%" and grid.span([0.01, 0.04]) == "±0%"
    assert grid.span([35.2, 61.9]) == "35-62%" and grid.span([-2.0, 87.0]) == "-2% to 87%"
