"""The timeline streams to Parquet in row groups and appears only when closed."""

from __future__ import annotations

import pyarrow.parquet as pq

from harness.metrics import TIMELINE_SCHEMA, Timeline


def row(t: float) -> tuple:
    return (t, 8.0, 4.0, 0.0, 4.0, 0.0, 0.0, 0.1, 0.2, 1, 0, 0, 0, 0, 0, 0, 3.5)


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
