"""A run as a Chrome / Perfetto trace (the Trace Event Format's JSON object form), to open in
ui.perfetto.dev or chrome://tracing and scroll through what happened.

- a process per pool, a thread per node in it (by creation), its life as "booting" and "ready"
  slices, with the autoscaler's scale-downs (and nodes it kept) as instants on it;
- each pod's stay on a node as a slice named by its pod id (args: job, GPUs and devices, milli
  per GPU, queue, when it started, how it ended) on a thread "pods" below its node: pods that
  overlap on one node go to further threads (a viewer draws overlapping slices of one thread
  wrongly);
- a thread "autoscaler" per pool: each scale-up (asked, granted), each option weighed (with
  its price and waste, "chosen"), each backoff, as instants;
- a process "pending": each job's wait from submission to its first start, a thread per queue
  (and again more where waits overlap).

Timestamps are microseconds of simulated time. Pods and decisions come from the decision trace
(events.parquet): without it the trace holds nodes and waits only, and says so in `otherData`.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from harness import run_timeline
from harness.run_timeline import RunTimeline, lanes

US = 1_000_000


def _us(seconds: pl.Expr) -> pl.Expr:
    return (seconds * US).round().cast(pl.Int64)


def _complete(df: pl.DataFrame, name: str, cat: str, start: str, end: str, args: list[str]) -> list[dict]:
    """"X" events, one per row with columns pid and tid; durations >= 0 by construction."""
    rows = df.select(pl.col(name).alias("name"), "pid", "tid", _us(pl.col(start)).alias("ts"),
                     (_us(pl.col(end)) - _us(pl.col(start))).clip(lower_bound=0).alias("dur"),
                     pl.struct(args).alias("args"))
    return [{"ph": "X", "cat": cat, **r} for r in rows.to_dicts()]


def _instants(df: pl.DataFrame, cat: str) -> list[dict]:
    rows = df.select("name", "pid", "tid", _us(pl.col("t")).alias("ts"), pl.struct("detail").alias("args"))
    return [{"ph": "i", "s": "t", "cat": cat, **r} for r in rows.to_dicts()]


def _meta(kind: str, pid: int, tid: int, name: str, sort: int) -> list[dict]:
    """Name a process or thread and place it: viewers sort tracks by these indices."""
    return [{"ph": "M", "name": f"{kind}_name", "pid": pid, "tid": tid, "args": {"name": name}},
            {"ph": "M", "name": f"{kind}_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": sort}}]


def _threads(pid: int, first: int, names: list[str]) -> list[dict]:
    return [m for k, name in enumerate(names) for m in _meta("thread", pid, first + k, name, first + k)]


def _nodes(tl: RunTimeline, pid: dict[str, int]) -> tuple[list[dict], pl.DataFrame]:
    """Each node's thread and its life, then its pods' threads and stays; with where each node
    is (instance, pid, tid)."""
    nodes = tl.nodes.with_columns(pid=pl.col("pool").replace_strict(pid, return_dtype=pl.Int64))
    stays = tl.stays if tl.stays is not None else pl.DataFrame(
        schema={"instance": pl.Int64, "bound_s": pl.Float64, "left_s": pl.Float64})
    stays = stays.with_columns(lane=lanes(*(stays[c].to_numpy() for c in ("instance", "bound_s", "left_s"))))
    # per pool: its autoscaler (tid 1), then per node its own thread and one per lane of its pods
    rows = (nodes.join(stays.group_by("instance").agg(lanes=pl.col("lane").max() + 1), on="instance", how="left")
            .with_columns(pl.col("lanes").fill_null(0)).sort("row"))
    rows = rows.with_columns(tid=2 + (pl.col("lanes") + 1).cum_sum().over("pid") - (pl.col("lanes") + 1))
    events: list[dict] = []
    for r in rows.select("pid", "tid", "instance", "slot", "node_type", "lanes").iter_rows(named=True):
        node = f"node {r['instance']}"
        pods = [f"{node} pods" + (f" {k + 1}" if k else "") for k in range(r["lanes"])]
        events += _threads(r["pid"], r["tid"], [f"{node} ({r['node_type']}, slot {r['slot']})", *pods])
    where = rows.select("instance", "pid", "tid")
    life = nodes.join(where, on="instance").with_columns(ready=pl.coalesce("ready_s", "removed_s"))
    args = ["instance", "slot", "pool", "node_type", "gpus", "used"]
    events += _complete(life.filter(pl.col("ready") > pl.col("requested_s")).with_columns(name=pl.lit("booting")),
                        "name", "node", "requested_s", "ready", args)
    events += _complete(life.filter(pl.col("ready_s").is_not_null()).with_columns(name=pl.lit("ready")),
                        "name", "node", "ready_s", "removed_s", args)
    if tl.stays is not None:
        placed = stays.join(where, on="instance").join(tl.jobs.select("job_id", "queue"), on="job_id", how="left")
        events += _complete(placed.with_columns(pl.col("tid") + 1 + pl.col("lane")), "pod_id", "pod", "bound_s",
                            "left_s", ["job_id", "gpus", "devices", "milli", "queue", "started_s", "how"])
    return events, where


def _decisions(decisions: pl.DataFrame, pid: dict[str, int], where: pl.DataFrame, elsewhere: int) -> list[dict]:
    """Instants: about a node on its thread, else on its pool's autoscaler (else `elsewhere`'s)."""
    d = decisions.with_columns(name=pl.col("event").replace(
        {"scale_up": "scale-up", "scale_down": "scale-down", "unremovable": "kept"})
        + pl.when(pl.col("detail").str.ends_with(" chosen")).then(pl.lit(" (chosen)")).otherwise(pl.lit("")))
    on_node = d.filter(pl.col("instance").is_not_null()).join(where, on="instance")
    by_pool = d.filter(pl.col("instance").is_null()).with_columns(
        pid=pl.col("pool").replace_strict(pid, default=elsewhere, return_dtype=pl.Int64), tid=pl.lit(1, pl.Int64))
    events = []
    if (by_pool["pid"] == elsewhere).any():  # a decision naming no pool
        events = _meta("process", elsewhere, 0, "autoscaler", elsewhere) + _threads(elsewhere, 1, ["decisions"])
    return events + _instants(pl.concat([on_node.select(by_pool.columns), by_pool]).sort("t"), "autoscaler")


def _waits(tl: RunTimeline, pid: int) -> list[dict]:
    """Each job's wait from submission to its first start (or the run's end), a thread per queue
    and one more for each wait that overlaps the others."""
    waits = tl.jobs.filter(pl.coalesce("start_s", tl.end_s) > pl.col("submit_s")).with_columns(
        until=pl.col("start_s").fill_null(tl.end_s), started=pl.col("start_s").is_not_null(), pid=pl.lit(pid))
    queues = sorted(waits["queue"].unique().to_list())
    index = waits["queue"].replace_strict({q: i for i, q in enumerate(queues)}, return_dtype=pl.Int64)
    waits = waits.with_columns(lane=lanes(index.to_numpy(), waits["submit_s"].to_numpy(), waits["until"].to_numpy()))
    width = waits.group_by("queue").agg(lanes=pl.col("lane").max() + 1).sort("queue").with_columns(
        first=2 + pl.col("lanes").cum_sum() - pl.col("lanes"))
    events = _meta("process", pid, 0, "pending (job waits)", pid)
    for q, n, first in width.iter_rows():
        events += _threads(pid, first, [q + (f" {k + 1}" if k else "") for k in range(n)])
    waits = waits.join(width, on="queue").with_columns(tid=pl.col("first") + pl.col("lane"))
    return events + _complete(waits, "job_id", "pending", "submit_s", "until", ["queue", "pods", "started"])


def trace_events(tl: RunTimeline) -> list[dict]:
    """The trace's events: a process per pool (its autoscaler, its nodes and their pods), then
    one for the job waits, and one for decisions naming no pool if there are any."""
    named = [] if tl.decisions is None else tl.decisions["pool"].drop_nulls().to_list()
    pools = sorted({*tl.nodes["pool"].to_list(), *named})  # a pool weighed but never bought too
    pid = {p: i + 1 for i, p in enumerate(pools)}
    events = [m for p in pools
              for m in _meta("process", pid[p], 0, f"pool {p}", pid[p]) + _threads(pid[p], 1, ["autoscaler"])]
    nodes, where = _nodes(tl, pid)
    events += nodes
    if tl.decisions is not None:
        events += _decisions(tl.decisions, pid, where, len(pools) + 2)
    return events + _waits(tl, len(pools) + 1)


def export(run: Path) -> tuple[str, RunTimeline]:
    """The run's trace as JSON text, with the timeline it was made from."""
    tl = run_timeline.read(run)
    doc = {"traceEvents": trace_events(tl), "displayTimeUnit": "ms",
           "otherData": {"run": str(run), "time": "simulated seconds x 1e6 (us)",
                         "missing": "; ".join(tl.missing) or "nothing"}}
    return json.dumps(doc, separators=(",", ":")), tl
