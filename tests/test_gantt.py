"""The Gantt view of a run's nodes over time in report.html: rows per pool at 1,000 nodes, the
GPUs held worked out by hand, one run per variant named in its caption, none for `loopbench
results`, and the page rendered in headless Chromium."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import polars as pl
from matplotlib import colormaps

from harness import gantt, report, run_timeline
from tests.test_explain import COLUMNS
from tests.test_export_perfetto import hand_run
from tests.test_report import check_rendered, loop_cfg, make_run, retouch

SCHEMA = dict(zip(COLUMNS, [pl.Float64, pl.String, pl.String, pl.Int32, pl.String, pl.Int32, pl.String, pl.String],
                  strict=True))


def test_rows_per_pool_keep_a_small_pool_whole():
    assert gantt.quotas({"big": 990, "small": 10}) == {"small": 10, "big": 190}
    assert gantt.quotas({"a": 500, "b": 500, "c": 3}) == {"c": 3, "a": 98, "b": 99}
    nodes = pl.DataFrame({"instance": range(1000), "pool": ["big"] * 990 + ["small"] * 10, "row": range(1000)})
    rows = gantt.shown(nodes)
    assert rows.height == gantt.MAX_ROWS and rows["row"].is_sorted()
    big = rows.filter(pl.col("pool") == "big")["row"].to_list()
    assert (big[0], big[-1], len(big)) == (0, 989, 190)  # first and last kept, evenly between
    assert rows.filter(pl.col("pool") == "small")["row"].to_list() == list(range(990, 1000))


def test_gpus_held_by_hand(tmp_path):
    """Node 0 (1 GPU): g-0 holds it 100-160. Node 1 (8 GPUs): g-0 a whole GPU and g-1 half of one,
    400-1,000: 1.5 of 8."""
    spans = gantt.occupancy(run_timeline.read(hand_run(tmp_path / "run")))
    assert spans.sort("instance").rows() == [(0, 100.0, 160.0, 1, 1.0), (1, 400.0, 1000.0, 2, 1.5 / 8)]


def big_run(d: Path, loop: str, seed: int, nodes: int = 1000) -> Path:
    """A made run with `nodes` nodes in three pools (one of 7), each asked for at 60 s x its number,
    ready 300 s later, gone 2 h later, each running one 4-GPU pod for its first hour; every job's
    wait is 60 s."""
    make_run(d, loop_cfg(loop), seed, 10.0, 100.0, 60.0)
    retouch(d, {"horizon_s": 60.0 * nodes + 7500.0})
    n = np.arange(nodes)
    pool = np.where(n < 7, "tiny", np.where(n % 2 == 0, "even", "odd"))
    asked = 60.0 * n
    pl.DataFrame({"instance": n, "slot": n, "pool": pool, "node_type": "g8", "gpus": 8, "requested_s": asked,
                  "ready_s": asked + 300, "removed_s": asked + 7500, "used": True}).write_parquet(d / "nodes.parquet")
    pods = [f"p{i}" for i in n]
    pl.DataFrame({"job_id": pods, "queue": "q", "pods": 1, "refused": False, "submit_s": asked + 240,
                  "start_s": asked + 300, "is_gang": False, "start_latency_s": 60.0}).write_parquet(d / "jobs.parquet")
    rows = pl.concat([
        pl.DataFrame({"t": asked, "event": "node_requested", "node": n, "pool": pool}),
        pl.DataFrame({"t": asked + 300, "event": "bound", "job_id": pods, "pod": n, "pod_id": pods, "node": n,
                      "pool": pool, "detail": "0,1,2,3"}),
        pl.DataFrame({"t": asked + 3900, "event": "finished", "job_id": pods, "pod": n, "pod_id": pods, "node": n,
                      "pool": pool})], how="diagonal")
    rows.select(pl.col(c).cast(t) if c in rows.columns else pl.lit(None, t).alias(c) for c, t in SCHEMA.items()
                ).sort("t", maintain_order=True).write_parquet(d / "events.parquet")
    return d


def test_a_report_draws_one_run_per_variant_readable_at_1000_nodes(tmp_path):
    root = tmp_path / "runs"
    for loop, seeds in (("separate", (1, 0)), ("merged", (0,))):
        for seed in seeds:
            big_run(root / f"{loop}-{seed}", loop, seed)
    rep = report.build([root], tmp_path / "out")
    drawn = [f for f in rep.figures if f.id.startswith("gantt")]
    assert [f.title for f in drawn] == ["Nodes over time: separate, seed 0", "Nodes over time: merged, seed 0"]
    assert drawn[0].note.startswith("One run: separate, seed 0 (its lowest seed). A row per node (200 of its 1,000 "
                                    "nodes: a pool smaller than an even share of 200 rows shows every node")
    from PIL import Image

    width, height = Image.open(io.BytesIO(drawn[0].png)).size
    assert width == 960 and height <= 720  # 200 rows at 80 dpi: a screen's height, a row of ~3 px
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "![Nodes over time: merged, seed 0](gantt-1.png)" in md and (tmp_path / "out" / "gantt-1.png").exists()
    check_rendered(tmp_path / "out" / "report.html", tmp_path, {f.id for f in rep.figures}, {t.id for t in rep.tables})


def test_the_figure_reads_its_rows_and_pods(tmp_path, monkeypatch):
    """Rows by pool, labelled with how many nodes each has and how many are shown; a bar per
    node, booting and ready; a segment per span of GPUs held, coloured by their share."""
    figures = []
    monkeypatch.setattr(report, "_png", lambda fig: figures.append(fig) or b"\x89PNG")
    big_run(tmp_path / "runs" / "0", "separate", 0)
    report.build([tmp_path / "runs"], tmp_path / "out")
    fig = figures[-1]
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["even\n496 nodes (96 shown)", "odd\n497 nodes (97 shown)",
                                                            "tiny\n7 nodes"]
    booting, ready, held = ax.collections
    assert len(booting.get_paths()) == len(ready.get_paths()) == len(held.get_paths()) == gantt.MAX_ROWS
    assert np.allclose(held.get_facecolors()[0], colormaps[gantt.CMAP](0.5))  # 4 of 8 GPUs


def test_results_and_a_run_without_nodes_have_no_gantt(tmp_path):
    big_run(tmp_path / "runs" / "0", "separate", 0)
    assert not [f for f in report.build([tmp_path / "runs"], tmp_path / "a", gantt_view=False).figures
                if f.id.startswith("gantt")]
    make_run(tmp_path / "old" / "0", loop_cfg("separate"), 0, 10.0, 100.0, 60.0)  # no nodes.parquet
    assert not [f for f in report.build([tmp_path / "old"], tmp_path / "b").figures if f.id.startswith("gantt")]


def test_without_a_decision_trace_the_caption_says_no_pods(tmp_path):
    d = big_run(tmp_path / "runs" / "0", "separate", 0, nodes=12)
    (d / "events.parquet").unlink()
    fig = next(f for f in report.build([tmp_path / "runs"], tmp_path / "out").figures if f.id == "gantt-0")
    assert "A row per node (all 12 nodes)" in fig.note and "No pods are drawn: the run has no events.parquet" in fig.note
