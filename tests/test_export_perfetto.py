"""`loopbench export perfetto`: a run as a Chrome / Perfetto trace, worked out by hand on a run
written file by file, checked against the Trace Event Format's rules, and end to end on a
bundled replay with and without its decision trace."""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from harness import run_timeline
from harness.exporters import perfetto
from tests.test_cli import ROOT, loopbench, one_line_error
from tests.test_explain import COLUMNS, ROWS

#: what every event of a phase must hold (the Trace Event Format; Perfetto's JSON importer)
REQUIRED = {"X": {"name", "pid", "tid", "ts", "dur"}, "i": {"name", "pid", "tid", "ts", "s"},
            "M": {"name", "pid", "tid", "args"}}
METADATA = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index",
            "thread_sort_index": "sort_index"}


def check_trace(doc: dict) -> None:
    """The trace loads in ui.perfetto.dev and chrome://tracing as drawn: the JSON object form,
    each event with its phase's fields, durations >= 0, every track named, and no two slices of
    one thread overlapping (a viewer nests or drops those)."""
    assert set(doc) >= {"traceEvents"} and isinstance(doc["traceEvents"], list)
    named: set[tuple[int, int]] = set()
    processes: set[int] = set()
    slices: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        assert e["ph"] in REQUIRED and REQUIRED[e["ph"]] <= set(e), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str), e
        if e["ph"] == "M":
            assert set(e["args"]) == {METADATA[e["name"]]}, e
            named |= {(e["pid"], e["tid"])} if e["name"] == "thread_name" else set()
            processes |= {e["pid"]} if e["name"] == "process_name" else set()
            continue
        assert isinstance(e["ts"], int) and e["ts"] >= 0, e
        assert isinstance(e.get("args", {}), dict), e
        if e["ph"] == "X":
            assert isinstance(e["dur"], int) and e["dur"] >= 0, e
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        else:
            assert e["s"] in ("g", "p", "t"), e
        assert (e["pid"], e["tid"]) in named and e["pid"] in processes, f"an unnamed track: {e}"
    for track, spans in slices.items():
        spans.sort()
        assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False)), f"slices overlap on {track}"
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN or Infinity


def hand_run(root: Path, events: bool = True) -> Path:
    """test_explain's rows as a run: node 0 (small) from the start; node 1 (big) asked at 100,
    ready at 400, removed at 2,000; its slot's next node asked at 3,000 never comes up; job g
    (queue q) submitted at 10, starts at 400; the run ends at 5,000. Pod g-1 is bound with a
    share of its GPU (milli=500)."""
    root.mkdir(parents=True)
    pl.DataFrame({"horizon_s": [5000.0]}).write_parquet(root / "metrics.parquet")
    pl.DataFrame({"instance": [0, 1, 2], "slot": [0, 1, 1], "pool": ["small", "big", "big"],
                  "node_type": ["s1", "b8", "b8"], "rack": [0, 0, 0], "committed_slot": [False] * 3,
                  "gpus": [1, 8, 8], "requested_s": [0.0, 100.0, 3000.0], "ready_s": [0.0, 400.0, math.nan],
                  "removed_s": [5000.0, 2000.0, 5000.0], "used": [False, True, False]}
                 ).write_parquet(root / "nodes.parquet")
    pl.DataFrame({"job_id": ["g"], "queue": ["q"], "pods": [2], "refused": [False], "submit_s": [10.0],
                  "start_s": [400.0]}).write_parquet(root / "jobs.parquet")
    if events:
        rows = [(*r[:7], "1 milli=500") if r[1] == "bound" and r[4] == "g-1" else r for r in ROWS]
        pl.DataFrame(rows, schema=dict(zip(COLUMNS, [pl.Float64, pl.String, pl.String, pl.Int32, pl.String, pl.Int32,
                                                     pl.String, pl.String], strict=True)), orient="row"
                     ).write_parquet(root / "events.parquet")
    return root


def test_a_runs_timeline_by_hand(tmp_path):
    tl = run_timeline.read(hand_run(tmp_path / "run"))
    assert tl.nodes.select("instance", "pool", "row").rows() == [(1, "big", 0), (2, "big", 1), (0, "small", 2)]
    assert tl.stays is not None and tl.stays.select(
        "pod_id", "instance", "devices", "gpus", "milli", "bound_s", "started_s", "left_s", "how").rows() == [
        ("g-0", 0, "0", 1, 1000, 100.0, None, 160.0, "released"),
        ("g-0", 1, "0", 1, 1000, 400.0, 400.0, 1000.0, "finished"),
        ("g-1", 1, "1", 1, 500, 400.0, 400.0, 1000.0, "finished")]
    assert tl.decisions is not None and tl.decisions.select("t", "event", "pool", "instance").rows() == [
        (100.0, "option", "small", None), (100.0, "option", "big", None), (100.0, "scale_up", "big", None),
        (2000.0, "scale_down", "big", 1), (3000.0, "scale_up", "big", None)]
    assert tl.missing == []


def test_the_trace_of_a_run_by_hand(tmp_path):
    text, _ = perfetto.export(hand_run(tmp_path / "run"))
    doc = json.loads(text)
    check_trace(doc)
    ev = doc["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["name"] == "thread_name"}
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    assert procs == {1: "pool big", 2: "pool small", 3: "pending (job waits)"}
    # big: its autoscaler, node 1 and its two lanes of pods, node 2 (no pods)
    assert [names[(1, t)] for t in sorted(t for p, t in names if p == 1)] == [
        "autoscaler", "node 1 (b8, slot 1)", "node 1 pods", "node 1 pods 2", "node 2 (b8, slot 1)"]
    where = {v: k for k, v in names.items()}
    got = sorted((names[(e["pid"], e["tid"])], e["name"], e["ts"], e["dur"]) for e in ev if e["ph"] == "X")
    assert got == [
        ("node 0 (s1, slot 0)", "ready", 0, 5_000_000_000),
        ("node 0 pods", "g-0", 100_000_000, 60_000_000),
        ("node 1 (b8, slot 1)", "booting", 100_000_000, 300_000_000),
        ("node 1 (b8, slot 1)", "ready", 400_000_000, 1_600_000_000),
        ("node 1 pods", "g-0", 400_000_000, 600_000_000),
        ("node 1 pods 2", "g-1", 400_000_000, 600_000_000),
        ("node 2 (b8, slot 1)", "booting", 3_000_000_000, 2_000_000_000),  # never came up
        ("q", "g", 10_000_000, 390_000_000)]
    share = next(e for e in ev if e["name"] == "g-1")
    assert share["args"] == {"job_id": "g", "gpus": 1, "devices": "1", "milli": 500, "queue": "q", "started_s": 400.0,
                             "how": "finished"}
    instants = sorted((names[(e["pid"], e["tid"])], e["name"], e["ts"]) for e in ev if e["ph"] == "i")
    assert instants == [("autoscaler", "option", 100_000_000), ("autoscaler", "option (chosen)", 100_000_000),
                        ("autoscaler", "scale-up", 100_000_000), ("autoscaler", "scale-up", 3_000_000_000),
                        ("node 1 (b8, slot 1)", "scale-down", 2_000_000_000)]
    assert where["autoscaler"] in {(1, 1), (2, 1)}
    assert doc["otherData"]["missing"] == "nothing"


def test_lanes_are_the_fewest_rows_without_overlap():
    group = np.array([0, 0, 0, 0, 1, 0])
    start = np.array([0.0, 1.0, 2.0, 5.0, 0.0, 3.0])
    end = np.array([10.0, 3.0, 20.0, 6.0, 1.0, 4.0])
    # 0-10 row 0, 1-3 row 1, 2-20 row 2, 3-4 row 1 again (1-3 ended), 5-6 row 1; the other group's own row 0
    assert run_timeline.lanes(group, start, end).tolist() == [0, 1, 2, 1, 0, 1]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("perfetto") / "run"
    r = loopbench("replay", "trace_events=true", "horizon_s=7200", f"hydra.run.dir={run}", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return run


def test_export_end_to_end_on_a_bundled_replay(replayed, tmp_path):
    out = tmp_path / "run.trace.json"
    r = loopbench("export", "perfetto", str(replayed), "-o", str(out), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "missing" not in r.stdout and f"wrote {out}" in r.stdout
    doc = json.loads(out.read_text())
    check_trace(doc)
    ev = doc["traceEvents"]
    stays = pl.read_parquet(replayed / "events.parquet").filter(pl.col("event") == "bound").height
    assert sum(e.get("cat") == "pod" for e in ev) == stays  # every stay on a node, as a slice
    assert {e["name"] for e in ev if e["ph"] == "i"} >= {"scale-up", "option (chosen)"}


def test_without_a_decision_trace_it_has_nodes_and_waits_and_says_so(replayed, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(replayed, run)
    (run / "events.parquet").unlink()
    out = tmp_path / "run.trace.json"
    r = loopbench("export", "perfetto", str(run), "-o", str(out), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "missing: no events.parquet (replay with trace_events=true)" in r.stdout
    doc = json.loads(out.read_text())
    check_trace(doc)
    assert {e.get("cat") for e in doc["traceEvents"] if e["ph"] == "X"} == {"node", "pending"}
    assert "no events.parquet" in doc["otherData"]["missing"]
    assert "loopbench export: error: " in one_line_error(loopbench("export", "perfetto", str(tmp_path / "none"),
                                                                   "-o", str(out), cwd=ROOT))
