"""A Gantt view of one run's nodes over time: where a report's aggregates say how many
accelerator-hours went idle, this shows which nodes, when, and whether they ever held a pod.

A row per node, sorted by pool and then by creation; its bar is orange while it boots, grey once
ready, pale red if it never ran a pod; inside, the GPUs its pods held (their share of the node's
GPUs, a colour scale; pods without GPUs at its bottom). Pods need the run's decision trace
(events.parquet): without it the bars alone are drawn. Past MAX_ROWS nodes, rows are sampled
evenly in that order (every pool keeps its share of rows) and the caption says how many.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from harness.run_timeline import RunTimeline

#: rows drawn at most: past ~200 a row is thinner than a pixel at the report's size
MAX_ROWS = 200
BOOTING, READY, NEVER_USED = "#e67e22", "#d5d8dc", "#f1948a"
CMAP = "viridis"


def quotas(counts: dict[str, int]) -> dict[str, int]:
    """Rows per pool, MAX_ROWS in all: a pool smaller than an even share keeps every node, the
    larger ones share what is left evenly (a pool of 10 nodes stays readable beside one of 1,000)."""
    left, out = MAX_ROWS, {}
    for k, (pool, n) in enumerate(sorted(counts.items(), key=lambda kv: (kv[1], kv[0]))):
        out[pool] = min(n, left // (len(counts) - k))
        left -= out[pool]
    return out


def shown(nodes: pl.DataFrame) -> pl.DataFrame:
    """The nodes drawn: all, or per pool its quota, sampled evenly in creation order."""
    if nodes.height <= MAX_ROWS:
        return nodes
    quota = quotas(dict(nodes.group_by("pool").len().iter_rows()))
    parts = [part[np.unique(np.linspace(0, part.height - 1, quota[part["pool"][0]]).round().astype(np.int64))]
             for part in nodes.sort("row").partition_by("pool", maintain_order=True)]
    return pl.concat(parts).sort("row")


def occupancy(tl: RunTimeline) -> pl.DataFrame:
    """Per node, the spans in which it held pods: instance, from_s, to_s, pods, and the share of
    its GPUs they held (0 for a node without GPUs)."""
    assert tl.stays is not None
    held = tl.stays.select("instance", (pl.col("gpus") * pl.col("milli").fill_null(0) / 1000).alias("g"),
                           "bound_s", "left_s")
    changes = pl.concat([held.select("instance", t="bound_s", dg="g", dn=pl.lit(1)),
                         held.select("instance", t="left_s", dg=-pl.col("g"), dn=pl.lit(-1))])
    on = "instance"
    spans = (changes.group_by(on, "t").agg(pl.col("dg").sum(), pl.col("dn").sum()).sort(on, "t")
             .with_columns(held=pl.col("dg").cum_sum().over(on), pods=pl.col("dn").cum_sum().over(on),
                           to_s=pl.col("t").shift(-1).over(on))
             .filter((pl.col("pods") > 0) & (pl.col("to_s") > pl.col("t"))))
    share = pl.when(pl.col("gpus") > 0).then((pl.col("held") / pl.col("gpus")).clip(0, 1)).otherwise(0.0)
    return spans.join(tl.nodes.select(on, "gpus"), on=on).select(
        on, pl.col("t").alias("from_s"), "to_s", "pods", share.alias("share"))


def _boxes(y: np.ndarray, start: np.ndarray, end: np.ndarray, height: float) -> list[np.ndarray]:
    """Rectangles (4 corners each) in hours, for one PolyCollection: drawing thousands of bars one by one is slow."""
    x0, x1 = start / 3600, end / 3600
    lo, hi = y - height / 2, y + height / 2
    return list(np.stack([np.c_[x0, lo], np.c_[x1, lo], np.c_[x1, hi], np.c_[x0, hi]], axis=1))


def plot(tl: RunTimeline, title: str):
    """The Gantt figure (matplotlib, no pyplot state) and its caption's facts."""
    from matplotlib import colormaps
    from matplotlib.collections import PolyCollection
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.patches import Patch

    rows = shown(tl.nodes).with_columns(y=pl.int_range(pl.len()))
    n = rows.height
    fig = MplFigure(figsize=(12, 1.6 + 0.032 * max(n, 20)), layout="constrained")
    ax = fig.subplots()
    ready = rows["ready_s"].to_numpy().astype(np.float64)
    y, req, gone = rows["y"].to_numpy(), rows["requested_s"].to_numpy(), rows["removed_s"].to_numpy()
    up = np.where(np.isnan(ready), gone, ready)
    used = rows["used"].to_numpy()
    ax.add_collection(PolyCollection(_boxes(y, req, up, 0.9), facecolors=BOOTING, linewidths=0))
    ax.add_collection(PolyCollection(_boxes(y, up, gone, 0.9), facecolors=np.where(used, READY, NEVER_USED),
                                     linewidths=0))
    cmap = colormaps[CMAP]
    if tl.stays is not None:
        spans = occupancy(tl).join(rows.select("instance", "y"), on="instance")
        ax.add_collection(PolyCollection(
            _boxes(spans["y"].to_numpy(), spans["from_s"].to_numpy(), spans["to_s"].to_numpy(), 0.6),
            facecolors=cmap(spans["share"].to_numpy()), linewidths=0))
        fig.colorbar(_scale(cmap), ax=ax, label="GPUs its pods held (share of the node's)", fraction=0.02,
                     shrink=0.6, pad=0.01)
    ax.set_xlim(0, tl.end_s / 3600)
    ax.set_ylim(n - 0.5, -0.5)  # the first pool on top
    pools = rows.group_by("pool", maintain_order=True).agg(first=pl.col("y").min(), last=pl.col("y").max(),
                                                           drawn=pl.len())
    total = dict(tl.nodes.group_by("pool").len().iter_rows())
    ax.set_yticks([(a + b) / 2 for _, a, b, _ in pools.iter_rows()],
                  [f"{p}\n{total[p]:,} nodes" + (f" ({d} shown)" if d < total[p] else "")
                   for p, _, _, d in pools.iter_rows()], fontsize=7)
    for b in pools["last"].to_list()[:-1]:
        ax.axhline(b + 0.5, color="0.3", lw=0.6)
    ax.set_xlabel("time (h)")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.legend(handles=[Patch(color=BOOTING, label="booting"), Patch(color=READY, label="ready"),
                       Patch(color=NEVER_USED, label="ready, never ran a pod")],
              fontsize=7, loc="outside lower center", ncols=3)
    return fig


def caption(tl: RunTimeline) -> str:
    """What the figure shows and leaves out."""
    n = tl.nodes.height
    rows = (f"all {n:,} nodes" if n <= MAX_ROWS else
            f"{shown(tl.nodes).height} of its {n:,} nodes: a pool smaller than an even share of {MAX_ROWS} rows "
            "shows every node, a larger one an even sample of its nodes, as its label says")
    pods = ("Inside each bar, the share of the node's GPUs its pods held (pods without GPUs at the scale's bottom)."
            if tl.stays is not None else
            "No pods are drawn: the run has no events.parquet (replay with trace_events=true to see them).")
    return (f"A row per node ({rows}), by pool, then by when it was asked for: orange while it boots, grey once "
            f"ready, pale red if it never ran a pod. {pods}")


def _scale(cmap):
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    return ScalarMappable(Normalize(0, 1), cmap)
