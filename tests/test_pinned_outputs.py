"""A replay's outputs are pinned: a change made for speed must leave every output table as it
was, integers exactly and floats but for the last bits of re-association.

The trace has many gangs (tests/fixtures/pinned/scale700.parquet: `loopbench generate
workload=scale workload.n_jobs=500 workload.span_s=1800 check_fits=false`, 739 pods in 500
jobs, 72 of them gangs, over 30 min), replayed for 2.5 h on the default cluster through the
separate loops with Cluster Autoscaler and with Karpenter, the strongest separate baseline
(Kueue in front) and the merged loop. Under Coscheduling its gangs are released again and again,
so the replay covers the churn the speed-ups target. The outputs (metrics, jobs, nodes,
timeline) were written by the code before the speed-ups (stale Permit timers left to fire, the
idle split by GPU model recomputed over every ready node): a float may move by re-association
only, by at most `FLOAT_RTOL` of its value. When a change of results is intended, write them
again and say so in the commit:
`python -m tests.test_pinned_outputs --write` (from the project root).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from harness.config import compose
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.replay import build

PINNED = Path(__file__).resolve().parent / "fixtures" / "pinned"
TRACE = PINNED / "scale700.parquet"
LOOPS = ("separate", "separate_karpenter", "separate_2026", "merged")
TABLES = ("metrics", "jobs", "nodes", "timeline")
HORIZON_S = 9000.0
#: floats may differ by re-association (sums taken in another order, a few units of the 15th
#: digit), far less than any change of what happened moves them
FLOAT_RTOL = 1e-12


def replay(loop: str) -> dict[str, pl.DataFrame]:
    sim, lp = build(compose("config", [f"loop={loop}", f"trace.path={TRACE}", f"horizon_s={HORIZON_S}"]))
    sim.run(lp)
    jobs, nodes = jobs_frame(sim), nodes_frame(sim)
    return {"metrics": summary_row(sim, jobs, nodes, {"loop": loop}), "jobs": jobs, "nodes": nodes,
            "timeline": sim.acct.timeline.frame()}


def largest_float_change(pinned: pl.DataFrame, now: pl.DataFrame, table: str) -> tuple[float, str]:
    """The largest relative change of a float cell (and its column); any other column must be
    equal, nulls and NaNs where they were."""
    assert now.columns == pinned.columns and now.shape == pinned.shape, table
    worst = (0.0, "")
    for col in pinned.columns:
        was, got = pinned[col], now[col]
        if not was.dtype.is_float():
            assert got.equals(was), f"{table}.{col} changed"
            continue
        assert got.is_null().equals(was.is_null()), f"{table}.{col}: nulls moved"
        a, b = was.fill_null(0.0).to_numpy(), got.fill_null(0.0).to_numpy()
        assert (np.isnan(a) == np.isnan(b)).all(), f"{table}.{col}: NaNs moved"
        a, b = np.nan_to_num(a), np.nan_to_num(b)
        scale = np.maximum(np.abs(a), np.abs(b))
        rel = np.divide(np.abs(a - b), scale, out=np.zeros_like(a), where=scale > 0)
        if len(rel) and rel.max() > worst[0]:
            worst = (float(rel.max()), f"{table}.{col}")
    return worst


@pytest.mark.parametrize("loop", LOOPS)
def test_outputs_are_as_pinned(loop):
    now = replay(loop)
    for table in TABLES:
        change, where = largest_float_change(pl.read_parquet(PINNED / loop / f"{table}.parquet"), now[table], table)
        assert change <= FLOAT_RTOL, f"{loop}: {where} moved by {change:.3g} of its value"


def write() -> None:
    """Write the pinned outputs again from this code (an intended change of results)."""
    for loop in LOOPS:
        (PINNED / loop).mkdir(parents=True, exist_ok=True)
        for table, frame in replay(loop).items():
            frame.write_parquet(PINNED / loop / f"{table}.parquet")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.test_pinned_outputs --write")
    write()
