"""`loopbench explain RUN ID` and `loopbench explain RUN --node N`: a job's, a pod's or a node's
story in a few lines, read from the run's decision trace (`events.parquet`, written with
`trace_events=true`, harness/decisions.py).

A job: when it arrived and started, how long its pods waited and why (the time spent in each
pending reason, averaged over its pods), how often members were bound and given back (a gang
short of its quorum), the nodes it ran on and how each came to exist (the scale-up that asked
for it, and the options that scale-up weighed), and how it ended. A node: the scale-up that
bought it, when it came up, what ran on it, and why it went. Only what the trace recorded is
told: nothing is re-simulated.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from harness.errors import LoopbenchError
from harness.progress import duration

EVENTS = "events.parquet"
#: how many scale-up options a node's story names beside the chosen one
OPTIONS_SHOWN = 3


def read_events(run: Path) -> pl.DataFrame:
    path = Path(run) / EVENTS
    if not path.is_file():
        raise LoopbenchError(f"{run}: no {EVENTS}: replay it with trace_events=true to record its decisions")
    return pl.read_parquet(path)


def _at(t: float) -> str:
    return f"{t:,.0f} s ({duration(t)} in)" if t >= 60 else f"{t:,.1f} s"


def _kv(detail: str | None) -> dict[str, str]:
    """`pool=a asked=2 granted=1` -> its fields."""
    return dict(part.split("=", 1) for part in (detail or "").split() if "=" in part)


def pending_by_reason(rows: pl.DataFrame) -> pl.DataFrame:
    """Per pending reason, the seconds the pods spent in it: a reason holds from its row to the
    pod's next reason, bind or end (its wait after the last bind, if released, counts too)."""
    marks = rows.filter(pl.col("pod").is_not_null() & pl.col("event").is_in(
        ["reason", "bound", "started", "finished", "withdrawn", "preempted", "released"])).sort("pod", "t",
                                                                                              maintain_order=True)
    spans = marks.with_columns(until=pl.col("t").shift(-1).over("pod")).filter(
        (pl.col("event") == "reason") & pl.col("until").is_not_null())
    return (spans.group_by("detail").agg(seconds=(pl.col("until") - pl.col("t")).sum())
            .filter(pl.col("seconds") > 0).sort("seconds", descending=True))


def lives(events: pl.DataFrame, node: int) -> list[pl.DataFrame]:
    """A slot's rows split into the nodes that held it, one after another (a removed node's
    slot is taken by the next one bought in its pool): each from its node_requested row on."""
    rows = events.with_row_index("i").filter(pl.col("node") == node)
    starts = rows.filter(pl.col("event") == "node_requested")["i"].to_list()
    if not starts:
        return [rows]
    bounds = [*starts[1:], None]
    return [rows.filter((pl.col("i") >= lo) & (pl.col("i") < hi) if hi is not None else pl.col("i") >= lo)
            for lo, hi in zip(starts, bounds, strict=True)]


def scale_up_of(events: pl.DataFrame, life: pl.DataFrame) -> str:
    """How one node came to exist: the scale-up of its pool at the instant it was requested,
    with the options that scale-up weighed."""
    asked = life.filter(pl.col("event") == "node_requested")
    if asked.is_empty() or asked["detail"][0] == "ready":
        return "there from the start"
    t, pool = asked["t"][0], asked["pool"][0]
    same = events.filter(pl.col("t") == t)
    ups = [d for d in same.filter(pl.col("event") == "scale_up")["detail"].to_list() if _kv(d).get("pool") == pool]
    if not ups:
        return f"requested at {_at(t)}"
    up = _kv(ups[0])
    options = [_kv(d) for d in same.filter(pl.col("event") == "option")["detail"].to_list()]
    others = [o for o in options if o.get("pool") != pool][:OPTIONS_SHOWN]
    over = "; over " + ", ".join(f"{o['pool']} ({_weighed(o) or '?'})" for o in others) if others else ""
    mine = next((o for o in options if o.get("pool") == pool), {})
    weighed = f", {_weighed(mine)}" if _weighed(mine) else ""
    return (f"bought at {_at(t)} by a scale-up of {pool} (asked {up.get('asked', '?')}, granted "
            f"{up.get('granted', '?')}{weighed}{over})")


def _weighed(option: dict) -> str:
    """How an autoscaler weighed a scale-up option: Cluster Autoscaler's price and waste, the
    merged planner's plan price."""
    if "price" in option and "waste" in option:
        return f"price {option['price']}, waste {option['waste']}"
    if "plan_price" in option:
        return f"plan price {option['plan_price']} per hour"
    return ""


def _life_at(events: pl.DataFrame, node: int, t: float) -> pl.DataFrame:
    """The node that held slot `node` at time t."""
    held = [life for life in lives(events, node) if float(life["t"][0]) <= t]
    return held[-1]


def _first(rows: pl.DataFrame, event: str | None = None) -> float | None:
    """The time of the first row (of this event), None if there is none."""
    t = (rows if event is None else rows.filter(pl.col("event") == event))["t"]
    return float(t[0]) if t.len() else None


def explain_job(events: pl.DataFrame, job_id: str, pods: list[int] | None = None) -> list[str]:
    rows = events.filter(pl.col("job_id") == job_id)
    if rows.is_empty():
        raise LoopbenchError(f"no job or pod {job_id!r} in the decision trace")
    if pods is not None:
        rows = rows.filter(pl.col("pod").is_in(pods) | pl.col("pod").is_null())
    members = rows["pod"].drop_nulls().unique().sort().to_list()
    if pods is not None:
        what = f"pod {rows.filter(pl.col('pod_id').is_not_null())['pod_id'][0]} of job {job_id}"
    else:
        what = f"job {job_id} ({_count(len(members), 'pod')})"
    arrived, started, finished, refused = (_first(rows, e) for e in ("arrived", "started", "finished", "refused"))
    lines = [f"{what}: arrived at {_at(arrived)}" if arrived is not None else what]
    if refused is not None:
        lines.append(f"  refused at {_at(refused)}: no node type can ever hold it")
        return lines
    if started is not None and arrived is not None:
        lines[0] += f", started at {_at(started)}: waited {duration(started - arrived)}"
    else:
        lines[0] += ", never started"
    waits = pending_by_reason(rows)
    if waits.height:
        per = ", ".join(f"{r['detail']} {duration(r['seconds'] / max(len(members), 1))}"
                        for r in waits.iter_rows(named=True))
        lines.append(f"  pending, per pod on average: {per}")
    said = rows.filter(pl.col("event") == "unschedulable")
    if said.height:  # the scheduler's FitError: the words of its last cycle for a member
        lines.append(f"  last turned away at {_at(said['t'][-1])}: {said['detail'][-1]}")
    binds, gone = (rows.filter(pl.col("event") == e).height for e in ("bound", "released"))
    if gone:
        lines.append(f"  bound {_count(binds, 'time')} and given back {_count(gone, 'time')} before it ran "
                     "(released: a gang short of its quorum, a node given up or an eviction)")
    preempted = rows.filter(pl.col("event") == "preempted").height
    if preempted:
        lines.append(f"  preempted {preempted:,} times (restarted from scratch)")
    ran = rows.filter(pl.col("event") == "started").group_by("node", "pool", maintain_order=True).agg(
        pl.col("t").min())
    for node, pool, t in ran.iter_rows():
        lines.append(f"  ran on node {node} ({pool}): {scale_up_of(events, _life_at(events, node, t))}")
    if finished is not None:
        lines.append(f"  finished at {_at(finished)}")
    return lines


def explain_pod(events: pl.DataFrame, pod_id: str) -> list[str]:
    pod = events.filter(pl.col("pod_id") == pod_id)
    if pod.is_empty():
        raise LoopbenchError(f"no job or pod {pod_id!r} in the decision trace")
    return explain_job(events, pod["job_id"][0], [int(pod["pod"][0])])


def explain_node(events: pl.DataFrame, node: int) -> list[str]:
    held = lives(events, node)
    if held[0].is_empty():
        raise LoopbenchError(f"node {node} does not appear in the decision trace")
    lines = [] if len(held) == 1 else [f"slot {node} held {len(held)} nodes, one after another:"]
    for life in held:
        lines += [f"node {node} ({life['pool'].drop_nulls()[0]}): {scale_up_of(events, life)}"]
        ready = life.filter(pl.col("event") == "node_ready")["t"]
        if ready.len():
            lines.append(f"  ready at {_at(ready[0])}")
        started = life.filter(pl.col("event") == "started")
        jobs = started["job_id"].unique(maintain_order=True).to_list()
        lines.append(f"  ran {_count(started.height, 'pod')} of {_count(len(jobs), 'job')} (first: "
                     f"{', '.join(jobs[:3])}{', ...' if len(jobs) > 3 else ''})" if jobs else "  ran no pod")
        for e, what in (("unremovable", "kept"), ("scale_down", "removed as unneeded")):
            for t, detail in life.filter(pl.col("event") == e).select("t", "detail").iter_rows():
                lines.append(f"  {what} at {_at(t)}: {detail}")
        removed = life.filter(pl.col("event") == "node_removed")["t"]
        lines.append(f"  gone at {_at(removed[0])}" if removed.len() else "  still there at the end")
    return lines


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="loopbench explain", description=__doc__.split("\n")[0])
    ap.add_argument("run", help="a run directory replayed with trace_events=true")
    ap.add_argument("id", nargs="?", help="a job_id or pod_id of the trace")
    ap.add_argument("--node", type=int, help="a node's story instead (its slot number, as events.parquet has it)")
    args = ap.parse_args(argv)
    if (args.id is None) == (args.node is None):
        ap.error("give a job or pod id, or --node N")
    events = read_events(Path(args.run))
    if args.node is not None:
        lines = explain_node(events, args.node)
    elif events.filter(pl.col("job_id") == args.id).height:
        lines = explain_job(events, args.id)
    else:
        lines = explain_pod(events, args.id)
    print("\n".join(lines))
    return 0
