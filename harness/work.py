"""Equal work: loops compared side by side must have finished the same work by the horizon.

A loop that never admits a queue's jobs, or leaves more pods pending or still running at the
horizon, burns nothing on that work, so its saving is not a saving on the same work. Each
comparison pairs a loop's run with the reference loop's run of the same setting and seed; where
their counts differ, every output says so before any saving (harness/summary.py, report.py,
grid.py). Equal means identical counts of pods and jobs done and of pods and jobs never
admitted, gangs never started and pods not started; a pod still running at the horizon is not
done, so a loop that is slower and leaves more running did less work.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
import polars.selectors as cs

#: Per-queue counts of jobs an admission layer never admitted (harness/metrics.py), summed
#: when a run has no total.
NOT_ADMITTED_QUEUE = "jobs_not_admitted_"
#: Counts that must be identical between paired runs (a column no run has is not checked).
EQUAL = ["pods_done", "jobs_done", "pods_not_admitted", "jobs_not_admitted", "gangs_never_started",
         "pods_not_started"]
#: What a run left undone by its horizon, as the note names it (noun, what), in this order.
UNDONE = {"pods_not_admitted": ("pod", "never admitted"), "jobs_not_admitted": ("job", "never admitted"),
          "gangs_never_started": ("gang", "never started"), "pods_not_started": ("pod", "not started"),
          "pods_running": ("pod", "still running"), "pods_refused": ("pod", "refused")}
MARK = "NOT EQUAL WORK"


def counts(metrics: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """`keys` and the work counts of each run, as floats; null where a run does not say.
    Without an admission layer every job is admitted as it arrives: 0 never admitted."""
    have = metrics.columns

    def col(name: str) -> pl.Expr:
        return (pl.col(name).cast(pl.Float64) if name in have else pl.lit(None, pl.Float64)).alias(name)

    queues = [c for c in have if c.startswith(NOT_ADMITTED_QUEUE)]
    per_queue = pl.sum_horizontal(pl.col(queues).cast(pl.Float64)) if queues else pl.lit(0.0)
    return metrics.select(
        *keys, col("pods"), col("jobs"), col("pods_done"), col("jobs_done"),
        pl.coalesce(col("jobs_not_admitted"), per_queue).alias("jobs_not_admitted"),
        col("pods_not_admitted").fill_null(0.0) if "pods_not_admitted" in have else col("pods_not_admitted"),
        col("gangs_never_started"),
        (col("pods_pending") + col("pods_bound_waiting")).alias("pods_not_started"),
        col("pods_running"), col("pods_refused"))


def pairs(metrics: pl.DataFrame, name: str, reference: str, by: Sequence[str] = ()) -> pl.DataFrame:
    """Each run of a `name` other than `reference` beside the reference's run of the same `by`
    columns and seed (its counts suffixed `_ref`), with `equal`: every count both runs have is
    identical."""
    keys = [*by, "seed"]
    runs = counts(metrics, [name, *keys])
    ref = runs.filter(pl.col(name) == reference).drop(name)
    joined = runs.filter(pl.col(name) != reference).join(ref, on=keys, suffix="_ref")
    same = [(pl.col(c) == pl.col(f"{c}_ref")).fill_null(True) for c in EQUAL]
    return joined.with_columns(equal=pl.all_horizontal(same))


def _count(x: float) -> str:
    """A count, or a mean of counts: 3,161, 2.4, 0.03 (never a 0.0 that hides a difference)."""
    return f"{x:,.0f}" if x == round(x) else f"{x:,.1f}" if abs(x) >= 0.1 else f"{x:.1g}"


def _things(x: float, noun: str, what: str) -> str:
    """`1 gang never started`, `244 pods not started`."""
    return f"{_count(x)} {noun}{'' if x == 1 else 's'} {what}"


def note(pairs_of_one: pl.DataFrame, name: str, reference: str, where: str = "") -> str | None:
    """`NOT EQUAL WORK: separate_kueue left 244 jobs never admitted, 244 pods not started; 3,161
    of 3,405 pods done in separate_kueue against 3,405 in merged` for the pairs of one loop
    against the reference (several: `in k of n runs`, counts as means over the k), `where`
    after the mark (` with trace default`); None when every pair did equal work."""
    runs = pairs_of_one.height
    differ = pairs_of_one.filter(~pl.col("equal"))
    unequal = differ.height
    if not unequal:
        return None
    means = differ.select(cs.numeric()).mean().row(0, named=True)
    sides = []
    for side, other, who, whom in (("", "_ref", name, reference), ("_ref", "", reference, name)):
        mine, theirs = {c: means[c + side] for c in UNDONE}, {c: means[c + other] for c in UNDONE}
        left = [_things(mine[c], *words) + (f" ({_count(theirs[c])} in {whom})" if theirs[c] else "")
                for c, words in UNDONE.items()
                if mine[c] is not None and theirs[c] is not None and mine[c] > theirs[c]]
        if left:
            sides.append(f"{who} left {', '.join(left)}")
    done = means["pods_done"], means["pods_done_ref"]
    parts = []
    if None not in done:
        total = f" of {_count(means['pods'])}" if means["pods"] is not None else ""
        parts.append(f"{_count(done[0])}{total} pods done in {name} against {_count(done[1])} in {reference}")
    if means["jobs_done"] is not None and means["jobs_done_ref"] is not None:
        parts.append(f"{_count(means['jobs_done'])} jobs done against {_count(means['jobs_done_ref'])}")
    where += f" in {unequal} of {runs} runs" + (" (means over those)" if unequal > 1 else "") if runs > 1 else ""
    return f"{MARK}{where}: " + "; ".join([*sides, *([", ".join(parts)] if parts else [])] or ["the counts differ"])


def notes(metrics: pl.DataFrame, name: str, reference: str, by: Sequence[str] = ()) -> dict[str, str]:
    """`note` of each `name` whose runs did not do the reference's work (runs without a seed
    column are one seed)."""
    if "seed" not in metrics.columns:
        metrics = metrics.with_columns(seed=pl.lit(0))
    paired = pairs(metrics, name, reference, by)
    found = {str(key): note(group, str(key), reference)
             for (key,), group in paired.group_by(name, maintain_order=True)}
    return {key: text for key, text in found.items() if text}
