"""The robustness grid (results/loops_robustness): what holds across settings, not in one.

A *cell* is one setting of the grid: a trace with its cluster, a scoring policy, a provider
behaviour (`cluster.shortage`); the runs of a cell differ only by seed. Per cell and loop the
report shows means with 95% confidence intervals, t-based over seeds. A loop's saving over
another is paired by seed (the same seed draws the same boot delays and tie-breaks for both),
so its interval is that of the per-seed differences. The headline states a saving as the range
of its per-cell values, `merged saves A-B% of idle accelerator hours over separate, depending
on scoring and provider`, with the cell where it saves the least. A cell whose paired runs did
not do the same work (harness/work.py) is never counted as a saving: it is named and counted
apart.
"""

from __future__ import annotations

import math

import polars as pl

from harness import work
from harness.summary import BY_COLUMN, VERDICT, percent, provider

#: Columns that tell the settings of runs apart (the first two go together: a trace is
#: replayed on its own cluster), with what the verdict calls each.
CELL = {"trace": "trace", "cluster": "cluster", "policy": "scoring", "shortage": "provider",
        "replicas": "replica autoscaler"}
#: The interface steps: (name, loop, the loop of the step before it). Each step is measured
#: over the one before; provreq (the ProvisioningRequest bridge) over the separate loops too.
#: Then the strongest baseline: what 2026 practice gives over bare separate, and merged's gain
#: over it split into the merged planner's pricing given to the separate loops (as an external
#: expander) and what merging adds on top.
STEPS = [("sees", "separate_sees", "separate"), ("prefers", "separate_prefers", "separate_sees"),
         ("requests (merged)", "merged", "separate_prefers"), ("provreq", "separate_provreq", "separate"),
         ("2026 practice", "separate_2026", "separate"), ("pricing alone", "separate_2026_priced", "separate_2026"),
         ("merging on top", "merged", "separate_2026_priced"), ("merged over 2026", "merged", "separate_2026"),
         ("merged over 2026 Karpenter", "merged", "separate_2026_karpenter")]
BASE = "separate"
#: The strongest separate baselines a 2026 cluster runs (docs/model.md): the headline's
#: references, which the merged loops are measured against first.
STRONGEST = ("separate_2026", "separate_2026_karpenter")
#: The merged loop, alone and behind the same Kueue as the baselines.
MERGED = ("merged", "merged_kueue")
#: Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (any statistics table;
#: numpy and polars have no t distribution and scipy is not a dependency for 30 numbers).
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t975(df: int) -> float:
    """Student's t 97.5% quantile; beyond the table, its first Cornish-Fisher terms (< 0.001 off)."""
    if df < 1:
        return math.nan
    if df <= len(T975):
        return T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def cell_columns(metrics: pl.DataFrame) -> list[str]:
    """The CELL columns whose values differ between the runs (the grid's dimensions)."""
    return [c for c in CELL if c in metrics.columns and metrics[c].n_unique() > 1]


def describe(cell: dict, cols: list[str]) -> str:
    """`trace default, scoring bin_packing, provider fails silently` (the cluster goes with its
    trace, so it is named only when the trace is not a dimension)."""
    shown = [c for c in cols if not (c == "cluster" and "trace" in cols)]
    return ", ".join(f"{CELL[c]} {_value(c, cell[c])}" for c in shown) or "one setting"


def _value(column: str, value) -> str:
    """A cell's value as its description says it: a trace by its file's stem, the provider's
    behaviour in words."""
    if value is None:
        return "none"
    return _short(value) if column == "trace" else provider(value) if column == "shortage" else str(value)


def _short(trace: str) -> str:
    """A trace path by its file name, without the extension."""
    name = str(trace).replace("\\", "/").rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] if "." in name else name


def _ci(n: pl.Expr, std: pl.Expr) -> pl.Expr:
    """Half-width of the 95% interval of a mean of n values with this std (null for one value)."""
    return pl.when(n > 1).then(n.map_elements(lambda k: t975(k - 1), return_dtype=pl.Float64) * std / n.sqrt())


def cell_stats(metrics: pl.DataFrame, cols: list[str], columns: list[str]) -> pl.DataFrame:
    """Per cell, loop and metric: seeds, mean and the 95% half-width over seeds."""
    present = [c for c in columns if c in metrics.columns]
    long = (metrics.select(*cols, "loop", "seed", *present).with_columns(pl.col(present).cast(pl.Float64))
            .unpivot(index=[*cols, "loop", "seed"], variable_name="metric").filter(pl.col("value").is_not_nan()))
    out = long.group_by(*cols, "loop", "metric").agg(pl.len().alias("seeds"), pl.col("value").mean().alias("mean"),
                                                     pl.col("value").std().alias("std"))
    return out.with_columns(half=_ci(pl.col("seeds"), pl.col("std"))).drop("std").sort(*cols, "loop", "metric")


def savings(metrics: pl.DataFrame, cols: list[str], loop: str, over: str, column: str = VERDICT[0]) -> pl.DataFrame:
    """What `loop` saves over `over` in each cell, paired by seed: seeds, the mean of `over`,
    saved = mean of (over - loop) with its 95% half-width, pct = saved / mean of `over` x 100,
    equal_work = every pair of runs did the same work, holds = the interval excludes 0 on the
    saving side and the work was equal (null with one seed of equal work)."""
    def side(name):
        return (metrics.filter(pl.col("loop") == name).select(*cols, "seed", pl.col(column).cast(pl.Float64))
                .filter(pl.col(column).is_not_nan()))

    keys = cols or ["_one_cell"]  # a single setting: one group
    pairs = side(over).join(side(loop), on=[*cols, "seed"], suffix="_new").with_columns(_one_cell=pl.lit(0))
    d = pl.col(column) - pl.col(f"{column}_new")
    out = pairs.group_by(*keys).agg(pl.len().alias("seeds"), pl.col(column).mean().alias("base"),
                                    d.mean().alias("saved"), d.std().alias("std"))
    out = out.with_columns(half=_ci(pl.col("seeds"), pl.col("std"))).drop("std")
    equal = (work.pairs(metrics, "loop", over, cols).filter(pl.col("loop") == loop).with_columns(_one_cell=pl.lit(0))
             .group_by(*keys).agg(equal_work=pl.col("equal").all()))
    out = out.join(equal, on=keys, how="left").with_columns(pl.col("equal_work").fill_null(True))
    return out.with_columns(pct=pl.when(pl.col("base") != 0).then(pl.col("saved") / pl.col("base").abs() * 100),
                            holds=(pl.col("saved") - pl.col("half") > 0) & pl.col("equal_work")
                            ).sort(keys).drop("_one_cell", strict=False)


def steps(metrics: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    """`savings` of every interface step whose two loops ran, one row per step and cell."""
    loops = set(metrics["loop"].to_list())
    frames = [savings(metrics, cols, loop, over).select(pl.lit(name).alias("step"), pl.lit(loop).alias("loop"),
                                                        pl.lit(over).alias("over"), pl.all())
              for name, loop, over in STEPS if {loop, over} <= loops]
    return pl.concat(frames) if frames else pl.DataFrame()


def strongest(metrics: pl.DataFrame, cols: list[str], loops: list[str], column: str = VERDICT[0]) -> str:
    """Of `loops`, the one with the least `column` over the grid: the best mean rank over its
    cells (each cell's loops ranked by their mean over seeds; ties: the earlier loop)."""
    keys = cols or ["_one_cell"]
    means = (metrics.with_columns(_one_cell=pl.lit(0)).filter(pl.col("loop").is_in(loops))
             .group_by(*keys, "loop").agg(pl.col(column).cast(pl.Float64).mean().alias("mean"))
             .with_columns(rank=pl.col("mean").rank("min").over(keys)))
    rank = dict(means.group_by("loop").agg(pl.col("rank").mean()).iter_rows())
    return min(loops, key=lambda loop: rank.get(loop, math.inf))


def span(pcts: list[float]) -> str:
    """`35-62%`, `0-42%`, `-2 to 87%` (one figure when both ends read the same)."""
    lo, hi = percent(min(pcts)), percent(max(pcts))
    if lo == hi:
        return lo
    return f"{lo} to {hi}" if lo.startswith("-") else f"{lo.rstrip('%').lstrip('±')}-{hi}"


def depending(cols: list[str]) -> str:
    """`scoring and provider`, `trace, scoring and provider`: the grid's dimensions."""
    names = [CELL[c] for c in cols if not (c == "cluster" and "trace" in cols)]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def work_note(metrics: pl.DataFrame, cols: list[str], loop: str, over: str) -> str | None:
    """harness/work.py's note of `loop`'s runs against `over`'s across the grid, one per trace
    (counts of different traces are not averaged together); None: equal work."""
    pairs = work.pairs(metrics, "loop", over, cols).filter(pl.col("loop") == loop)
    if "trace" not in cols:
        return work.note(pairs, loop, over)
    notes = [work.note(part, loop, over, f" with trace {_short(trace)}")
             for (trace,), part in pairs.group_by("trace", maintain_order=True)]
    return " — ".join(n for n in notes if n) or None


def ranges_verdict(name: str, over: str, per_cell: pl.DataFrame, cols: list[str], column: str = VERDICT[0],
                   unequal: str | None = None) -> str:
    """The headline in ranges form from `savings` rows: `merged saves A-B% of idle accelerator
    hours over separate, depending on scoring and provider (8 settings). It saves the least
    (A%) with trace ..., scoring ..., provider ....` A saving that is negative somewhere says
    so (`burns up to C% more`). Cells of unequal work are left out of the range and named
    first, with `unequal` (work_note) saying how the work differed."""
    rows = [r for r in per_cell.iter_rows(named=True) if r["pct"] is not None]
    label = BY_COLUMN[column].label
    if not rows:
        return f"{name} vs {over}: {label} n/a"
    apart = [r for r in rows if r.get("equal_work") is False]
    rows = [r for r in rows if r.get("equal_work") is not False]
    first = ""
    if apart:
        where_apart = "; ".join(describe(r, cols) for r in apart)
        first = (f"{name} vs {over}: {unequal or work.MARK}. {len(apart)} of {len(apart) + len(rows)} settings "
                 f"are counted apart ({where_apart}). ")
        if not rows:
            return f"{first}No saving is stated: no setting did equal work."
        first += f"In the other {len(rows)}: "
    pcts = [r["pct"] for r in rows]
    where = f"depending on {depending(cols)} ({len(rows)} settings)"
    least = min(rows, key=lambda r: r["pct"])
    if min(pcts) >= 0 or percent(min(pcts)) == "±0%":
        head = f"{name} saves {span(pcts)} of {label} over {over}, {where}"
    elif max(pcts) <= 0:
        head = f"{name} burns {span([-p for p in pcts])} more {label} than {over}, {where}"
    else:
        head = (f"{name} saves up to {percent(max(pcts))} of {label} over {over} but burns up to "
                f"{percent(-min(pcts))} more, {where}")
    fares = (f"saves the least ({percent(least['pct'])})" if least["pct"] >= 0
             else f"burns the most ({percent(-least['pct'])} more)")
    return f"{first}{head}. It {fares} with {describe(least, cols)}."
