"""A run's nodes and pods over time, read back from its outputs, so that a timeline can be drawn
(harness/gantt.py) or exported (harness/exporters/perfetto.py) without replaying the run.

Each node's life (asked for, ready, gone) is in `nodes.parquet` and each job's wait in
`jobs.parquet`; which pod sat on which node, when, and the autoscaler's decisions are only in
the decision trace (`events.parquet`, written with `trace_events=true`): without it a timeline
has nodes and waits but no pods and no decisions, and says so (`missing`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from harness.errors import LoopbenchError

EVENTS = "events.parquet"
#: the decision trace's rows that are an autoscaler's decisions
DECISIONS = ["scale_up", "option", "backoff", "scale_down", "unremovable"]
#: what a timeline lacks without the decision trace
NO_EVENTS = (f"no {EVENTS} (replay with trace_events=true): no pods on nodes, no autoscaler decisions")


@dataclass
class RunTimeline:
    """One run's timeline; times are seconds of simulated time."""

    #: per node (instance): slot, pool, node_type, gpus, requested_s, ready_s (null: it never came
    #: up), removed_s, used; sorted by pool, then creation (`row`: that order, from 0)
    nodes: pl.DataFrame
    #: per job that arrived and was not refused: job_id, queue, pods, submit_s, start_s (null: never)
    jobs: pl.DataFrame
    end_s: float
    #: per stay of a pod on a node: pod_id, job_id, instance, devices (its GPUs, e.g. "0,1"; null:
    #: none), gpus, milli (per GPU), bound_s, started_s (null: never ran there), left_s, how it
    #: ended (finished, preempted, released: back to pending, running: still there at the end)
    stays: pl.DataFrame | None = None
    #: the autoscalers' decisions: t, event, pool, instance (null: not about one node), detail
    decisions: pl.DataFrame | None = None
    missing: list[str] = field(default_factory=list)


def _read(path: Path, columns: list[str] | None = None) -> pl.DataFrame:
    if not path.is_file():
        raise LoopbenchError(f"{path}: no such file (not a finished replay run?)")
    try:
        return pl.read_parquet(path, columns=columns)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise LoopbenchError(f"{path}: not a readable run output ({str(exc).splitlines()[0]})") from None


def read(run: Path) -> RunTimeline:
    """The timeline of the run in folder `run`."""
    run = Path(run)
    end_s = float(_read(run / "metrics.parquet", ["horizon_s"])["horizon_s"][0])
    nodes = (_read(run / "nodes.parquet").sort("pool", "instance")
             .with_columns(pl.col("ready_s").fill_nan(None), row=pl.int_range(pl.len()),
                           life=pl.col("instance").rank("ordinal").over("slot").cast(pl.Int64)))
    jobs = (_read(run / "jobs.parquet", ["job_id", "queue", "pods", "refused", "submit_s", "start_s"])
            .filter(~pl.col("refused")).drop("refused"))
    out = RunTimeline(nodes.drop("life"), jobs, end_s)
    if not (run / EVENTS).is_file():
        out.missing.append(NO_EVENTS)
        return out
    events = _read(run / EVENTS).with_row_index("i").with_columns(
        event=pl.col("event").cast(pl.String),
        # the slot's node at this row: slots are reused, each node from its node_requested row on
        life=(pl.col("event") == "node_requested").cast(pl.Int64).cum_sum().over("node"))
    events = events.join(nodes.select(pl.col("slot").cast(pl.Int32).alias("node"), "life", "instance"),
                         on=["node", "life"], how="left").sort("i")
    out.stays = _stays(events, end_s)
    pool = pl.coalesce("pool", pl.col("detail").str.extract(r"pool=(\S+)")).alias("pool")
    out.decisions = events.filter(pl.col("event").is_in(DECISIONS)).select("t", "event", pool, "instance", "detail")
    return out


def _stays(events: pl.DataFrame, end_s: float) -> pl.DataFrame:
    """Each pod's stays on a node: from a bound row to the pod's next finished or released row."""
    marks = (events.filter(pl.col("pod").is_not_null()
                           & pl.col("event").is_in(["bound", "started", "preempted", "released", "finished"]))
             .sort("pod", "i").with_columns(stay=(pl.col("event") == "bound").cum_sum().over("pod")))
    e, t = pl.col("event"), pl.col("t")
    bound = e == "bound"
    stays = marks.filter(pl.col("stay") > 0).group_by("pod", "stay").agg(
        i=pl.col("i").first(), pod_id=pl.col("pod_id").first(), job_id=pl.col("job_id").first(),
        instance=pl.col("instance").filter(bound).first(), bind=pl.col("detail").filter(bound).first(),
        bound_s=t.filter(bound).first(), started_s=t.filter(e == "started").first(),
        left_s=t.filter(e.is_in(["released", "finished"])).first(),
        finished=(e == "finished").any(), preempted=(e == "preempted").any())
    devices = pl.col("bind").str.extract(r"^([\d,]+)")
    return stays.sort("i").select(
        "pod_id", "job_id", "instance", devices.alias("devices"),
        pl.coalesce(devices.str.count_matches(",") + 1, 0).cast(pl.Int32).alias("gpus"),
        pl.coalesce(pl.col("bind").str.extract(r"milli=(\d+)").cast(pl.Int32),
                    pl.when(devices.is_not_null()).then(1000)).alias("milli"),
        "bound_s", "started_s", pl.col("left_s").fill_null(end_s),
        pl.when("finished").then(pl.lit("finished")).when("preempted").then(pl.lit("preempted"))
        .when(pl.col("left_s").is_not_null()).then(pl.lit("released")).otherwise(pl.lit("running")).alias("how"))


def lanes(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Rows for intervals so that no two in one group overlap on a row (the fewest rows, greedy
    by start): a trace viewer draws overlapping slices of one track wrongly. Rows count from 0."""
    order = np.lexsort((end, start, group))
    out = np.empty(len(order), np.int64)
    busy: list[tuple[float, int]] = []  # (free from, row) of the current group's rows
    free: list[int] = []
    last = None
    for k in order.tolist():
        if group[k] != last:
            last, busy, free = group[k], [], []
        while busy and busy[0][0] <= start[k]:
            heapq.heappush(free, heapq.heappop(busy)[1])
        row = heapq.heappop(free) if free else len(busy) + len(free)
        heapq.heappush(busy, (float(end[k]), row))
        out[k] = row
    return out
