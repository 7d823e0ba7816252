"""`loopbench explain`: a job's, pod's and node's story from a run's decision trace, worked out
by hand on a trace written row by row, and end to end on a bundled replay."""

from __future__ import annotations

import polars as pl
import pytest

from harness.errors import LoopbenchError
from harness.explain import explain_job, explain_node, explain_pod, pending_by_reason, read_events
from tests.test_cli import ROOT, loopbench, one_line_error

COLUMNS = ["t", "event", "job_id", "pod", "pod_id", "node", "pool", "detail"]
#: Node 0 there from the start; job g (pods 0, 1) arrives at 10, waits for a node (shortage),
#: the autoscaler weighs two pools at 100 and buys big (node 1), which boots until 400; pod 0 is
#: bound to node 0 at 100 and given back at 160 (its gang short), both bind at 400 and start;
#: they finish at 1,000. Node 1 is then found empty and removed at 2,000, and its slot taken
#: by a new node at 3,000 that runs nothing.
ROWS = [
    (0.0, "node_requested", None, None, None, 0, "small", "ready"),
    (10.0, "arrived", "g", None, None, None, None, None),
    (10.0, "reason", "g", 0, "g-0", None, None, "shortage"),
    (10.0, "reason", "g", 1, "g-1", None, None, "shortage"),
    (10.0, "unschedulable", "g", 0, "g-0", None, None,
     "0/1 nodes are available: 1 Insufficient nvidia.com/gpu (NodeResourcesFit)"),
    (100.0, "option", None, None, None, None, None, "pool=small nodes=2 helped=2 price=4.00 waste=0.500"),
    (100.0, "option", None, None, None, None, None, "pool=big nodes=1 helped=2 price=6.00 waste=0.100 chosen"),
    (100.0, "scale_up", None, None, None, None, None, "pool=big asked=1 granted=1"),
    (100.0, "node_requested", None, None, None, 1, "big", None),
    (100.0, "bound", "g", 0, "g-0", 0, "small", "0"),
    (100.0, "reason", "g", 1, "g-1", None, None, "booting"),
    (160.0, "released", "g", 0, "g-0", 0, "small", None),
    (160.0, "reason", "g", 0, "g-0", None, None, "booting"),
    (400.0, "node_ready", None, None, None, 1, "big", None),
    (400.0, "bound", "g", 0, "g-0", 1, "big", "0"),
    (400.0, "bound", "g", 1, "g-1", 1, "big", "1"),
    (400.0, "started", "g", 0, "g-0", 1, "big", None),
    (400.0, "started", "g", 1, "g-1", 1, "big", None),
    (1000.0, "finished", "g", 0, "g-0", 1, "big", None),
    (1000.0, "finished", "g", 1, "g-1", 1, "big", None),
    (2000.0, "scale_down", None, None, None, 1, "big", "empty, unneeded 1000 s"),
    (2000.0, "node_removed", None, None, None, 1, "big", None),
    (3000.0, "node_requested", None, None, None, 1, "big", None),
    (3000.0, "scale_up", None, None, None, None, None, "pool=big asked=1 granted=1"),
]


@pytest.fixture
def events() -> pl.DataFrame:
    return pl.DataFrame(ROWS, schema=dict(zip(COLUMNS, [pl.Float64, pl.String, pl.String, pl.Int32, pl.String,
                                                        pl.Int32, pl.String, pl.String], strict=True)),
                        orient="row")


def test_time_in_each_pending_reason_by_hand(events):
    """Pod 0: shortage 10-100 (90 s), then bound; booting 160-400 (240 s). Pod 1: shortage
    10-100 (90 s), booting 100-400 (300 s). Totals: booting 540 s, shortage 180 s."""
    got = dict(pending_by_reason(events).iter_rows())
    assert got == {"booting": 540.0, "shortage": 180.0}


def test_a_jobs_story_by_hand(events):
    assert explain_job(events, "g") == [
        "job g (2 pods): arrived at 10.0 s, started at 400 s (6 min 40 s in): waited 6 min 30 s",
        "  pending, per pod on average: booting 4 min 30 s, shortage 1 min 30 s",
        "  last turned away at 10.0 s: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu (NodeResourcesFit)",
        "  bound 3 times and given back 1 time before it ran (released: a gang short of its quorum, a node "
        "given up or an eviction)",
        "  ran on node 1 (big): bought at 100 s (1 min 40 s in) by a scale-up of big (asked 1, granted 1, "
        "price 6.00, waste 0.100; over small (price 4.00, waste 0.500))",
        "  finished at 1,000 s (16 min 40 s in)",
    ]


def test_a_pods_story_is_its_own_rows(events):
    lines = explain_pod(events, "g-1")
    assert lines[0] == "pod g-1 of job g: arrived at 10.0 s, started at 400 s (6 min 40 s in): waited 6 min 30 s"
    assert lines[1] == "  pending, per pod on average: booting 5 min, shortage 1 min 30 s"


def test_a_slot_held_by_two_nodes_tells_each(events):
    assert explain_node(events, 1) == [
        "slot 1 held 2 nodes, one after another:",
        "node 1 (big): bought at 100 s (1 min 40 s in) by a scale-up of big (asked 1, granted 1, price 6.00, "
        "waste 0.100; over small (price 4.00, waste 0.500))",
        "  ready at 400 s (6 min 40 s in)",
        "  ran 2 pods of 1 job (first: g)",
        "  removed as unneeded at 2,000 s (33 min 20 s in): empty, unneeded 1000 s",
        "  gone at 2,000 s (33 min 20 s in)",
        "node 1 (big): bought at 3,000 s (50 min in) by a scale-up of big (asked 1, granted 1)",
        "  ran no pod",
        "  still there at the end",
    ]
    assert explain_node(events, 0)[0] == "node 0 (small): there from the start"


def test_unknown_ids_and_a_run_without_a_trace_are_one_line(events, tmp_path):
    with pytest.raises(LoopbenchError, match="no job or pod 'nope' in the decision trace"):
        explain_pod(events, "nope")
    with pytest.raises(LoopbenchError, match="node 7 does not appear"):
        explain_node(events, 7)
    with pytest.raises(LoopbenchError, match="replay it with trace_events=true"):
        read_events(tmp_path)


def test_explain_end_to_end_on_a_bundled_replay(tmp_path):
    run = tmp_path / "run"
    r = loopbench("replay", "trace_events=true", "horizon_s=7200", f"hydra.run.dir={run}", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert pl.read_parquet(run / "events.parquet").columns == COLUMNS  # what the hand-made rows above hold
    r = loopbench("explain", str(run), "inf-000000", cwd=ROOT)
    assert r.returncode == 0 and r.stdout.startswith("job inf-000000 (1 pod): arrived at 30.9 s"), r.stdout
    assert "ran on node 64 (l4-ondemand): there from the start" in r.stdout
    r = loopbench("explain", str(run), "--node", "64", cwd=ROOT)
    assert r.returncode == 0 and r.stdout.startswith("node 64 (l4-ondemand): there from the start"), r.stdout
    assert "loopbench explain: error: no job or pod 'nope'" in one_line_error(loopbench("explain", str(run), "nope",
                                                                                         cwd=ROOT))
