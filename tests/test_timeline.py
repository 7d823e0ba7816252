"""The timeline streams to Parquet in row groups, appears only when closed, and samples the
state after the events of each sample instant, up to and including the horizon."""

from __future__ import annotations

import pyarrow.parquet as pq

from harness.metrics import TIMELINE_SCHEMA, Timeline
from tests import scenarios as sc


def row(t: float) -> tuple:
    return (t, 8.0, 4.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.1, 0.2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 3.5)  # buffer, nodes, 7 reasons


def test_timeline_streams_in_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(Timeline, "ROW_GROUP", 4)
    tl = Timeline()
    path = tmp_path / "timeline.parquet"
    tl.stream_to(path)
    for i in range(10):
        tl.append(row(60.0 * i))
        assert len(tl.rows) < 4  # memory holds at most one row group
    assert not path.exists()  # not before close: an interrupted run leaves no timeline
    tl.close()
    f = pq.ParquetFile(path)
    assert f.metadata.num_row_groups == 3 and f.schema_arrow.equals(TIMELINE_SCHEMA)
    assert f.read().column("t_s").to_pylist() == [60.0 * i for i in range(10)]


def test_a_sample_shows_the_state_after_its_instants_events_and_the_horizon_is_sampled():
    # one ready node; a one-GPU pod arrives at 60 s (a sample instant) and ends at 120 s, the
    # horizon (also a sample instant): the samples at 0, 60, 120 read 0, 1 and 0 GPUs in use
    cl = sc.cluster([sc.node_type("gpu8")], [sc.pool("a", "gpu8", min_size=1, max_size=1)], autoscaling=False)
    _, sim = sc.run(sc.trace([{"submit_s": 60.0, "duration_s": 60.0}]), cl, sc.separate(), horizon_s=120.0)
    tl = sim.acct.timeline.frame()
    assert tl["t_s"].to_list() == [0.0, 60.0, 120.0]
    assert tl["used_gpus"].to_list() == [0.0, 1.0, 0.0]
    assert tl["billed_gpus"].to_list() == [8.0, 8.0, 8.0]
