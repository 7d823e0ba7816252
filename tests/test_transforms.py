"""Transforms keep the trace canonical and gangs whole, are seeded, and compose (also via Hydra)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import transforms as tf
from harness.cluster import Cluster
from harness.errors import ConfigError
from harness.importers.cli import main
from harness.trace import read_trace, table_from_columns, validate_table

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures"


def trace(sizes=(1, 3, 2, 1), gpus=(1, 8, 4, 0), submit=(0.0, 10.0, 20.0, 30.0), models=None) -> pa.Table:
    """Jobs j0.. with `sizes[i]` pods each of `gpus[i]` whole GPUs, submitted at `submit[i]`."""
    job = np.repeat(np.arange(len(sizes)), sizes)
    rank = np.concatenate([np.arange(s) for s in sizes])
    g = np.asarray(gpus)[job]
    return table_from_columns({
        "pod_id": [f"j{j}-{r}" for j, r in zip(job, rank, strict=True)], "job_id": [f"j{j}" for j in job],
        "min_member": np.asarray(sizes)[job].astype(np.int32), "submit_s": np.asarray(submit, float)[job],
        "duration_s": [100.0] * len(job), "cpu_milli": [1000] * len(job), "memory_mib": [1024] * len(job),
        "gpu_count": g.astype(np.int32), "gpu_milli": np.where(g > 0, 1000, 0).astype(np.int32),
        "gpu_models": models if models is not None else [[] for _ in job],
    })


def jobs_whole(table: pa.Table) -> None:
    validate_table(table, "test")  # gang agreement, min_member <= pods, unique pod ids
    job = table.column("job_id").to_numpy(zero_copy_only=False)
    _, counts = np.unique(job, return_counts=True)
    minm = dict(zip(job, table.column("min_member").to_pylist(), strict=True))
    assert sorted(counts.tolist()) == sorted(minm[j] for j in np.unique(job))


def test_window_keeps_and_shifts():
    t = tf.window(trace(), 10, 30)
    assert t.column("job_id").unique().to_pylist() == ["j1", "j2"]
    assert t.column("submit_s").to_pylist() == [0.0] * 3 + [10.0] * 2
    assert tf.window(trace(), 25).num_rows == 1
    with pytest.raises(ConfigError):
        tf.window(trace(), 30, 10)


def test_compress_arrivals_and_durations():
    t = tf.compress(trace(), 10)
    assert t.column("submit_s").to_pylist()[-1] == 3.0 and t.column("duration_s").to_pylist()[0] == 100.0
    assert tf.compress(trace(), 10, durations=True).column("duration_s").to_pylist()[0] == 10.0


def test_scale_down_samples_whole_jobs_deterministically():
    big = trace(sizes=[2] * 100, gpus=[1] * 100, submit=list(range(100)))
    half = tf.scale(big, 0.5, seed=3)
    assert half.num_rows == 100 and pa.compute.count_distinct(half.column("job_id")).as_py() == 50
    assert half.equals(tf.scale(big, 0.5, seed=3)) and not half.equals(tf.scale(big, 0.5, seed=4))
    jobs_whole(half)


def test_scale_up_replicates_with_fresh_ids():
    t = tf.scale(trace(), 2.5, seed=1)
    jobs_whole(t)
    ids = t.column("job_id").unique().to_pylist()
    assert len(ids) == 4 + 4 + 2 and "j1~r1" in ids
    assert {i.split("~")[0] for i in ids} == {"j0", "j1", "j2", "j3"}
    copy = t.filter(pa.compute.equal(t.column("job_id"), "j1~r1"))
    assert copy.column("pod_id").to_pylist() == ["j1-0~r1", "j1-1~r1", "j1-2~r1"]
    assert copy.column("submit_s").to_pylist() == [10.0] * 3
    assert tf.scale(t, 1.0).equals(t)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=12), factor=st.floats(0.05, 3.5), seed=st.integers(0, 9))
def test_scale_property_gangs_stay_whole(sizes, factor, seed):
    t = trace(sizes=sizes, gpus=[1] * len(sizes), submit=[0.0] * len(sizes))
    out = tf.scale(t, factor, seed)
    if out.num_rows:
        jobs_whole(out)
    n = len(sizes)
    assert pa.compute.count_distinct(out.column("job_id")).as_py() == int(np.floor(factor)) * n + int(round((factor % 1) * n))


def test_remap_models():
    t = trace(sizes=(1, 1), gpus=(1, 1), submit=(0, 1), models=[["V100M16", "V100M32"], []])
    out = tf.remap_models(t, {"V100M16": "V100", "T4": "L4"})
    assert out.column("gpu_models").to_pylist() == [["V100", "V100M32"], []]
    assert tf.remap_models(out.slice(1), {"V100": "X"}).column("gpu_models").to_pylist() == [[]]


def test_inflate_reaches_target_without_passing_it():
    cluster = 40_000  # 40 GPUs
    t = trace()  # 1 + 24 + 8 = 33 GPUs
    out = tf.inflate(t, 1.3, cluster, seed=7)
    jobs_whole(out)
    requested = tf.gpu_milli_requested(out).sum()
    assert requested <= 52_000
    added = out.slice(t.num_rows)
    assert all("~i" in j for j in added.column("job_id").to_pylist())
    assert out.slice(0, t.num_rows).equals(t)  # originals first, untouched
    assert tf.inflate(t, 1.3, cluster, seed=7).equals(out)
    assert tf.inflate(t, 0.5, cluster).equals(t)  # already above the target


def test_inflate_stops_at_first_draw_that_would_pass():
    t = trace(sizes=(1,), gpus=(2,), submit=(0,))  # every draw adds 2 GPUs
    out = tf.inflate(t, 1.0, 7_000)  # 2 -> 4 -> 6; the next would pass 7
    assert tf.gpu_milli_requested(out).sum() == 6000 and out.num_rows == 3


def test_inflate_against_a_cluster_config():
    cluster = Cluster(**{k: v for k, v in __import__("yaml").safe_load((ROOT / "conf/cluster/default.yaml").read_text()).items()
                         if k != "_target_"})
    total = tf.cluster_gpu_milli(cluster)
    assert total == tf.cluster_gpu_milli(ROOT / "conf/cluster/default.yaml") > 0
    out = tf.inflate(trace(), 1.0, cluster)
    assert total - 8000 < tf.gpu_milli_requested(out).sum() <= total


def test_hydra_pipeline_from_conf():
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    pipeline = instantiate(OmegaConf.load(ROOT / "conf/transforms/busy_day.yaml"))
    out = pipeline(trace(submit=(0.0, 40.0, 86_000.0, 90_000.0)))
    jobs_whole(out)
    assert pa.compute.count_distinct(out.column("job_id")).as_py() == 6
    assert max(out.column("submit_s").to_pylist()) == 86_000.0 / 4


def test_cli_transform_flags(tmp_path, capsys):
    out = tmp_path / "h.parquet"
    rc = main(["helios", str(FIX / "helios" / "cluster_log.csv"), "-o", str(out), "--window", ":1h",
               "--compress", "2", "--scale", "2", "--remap", "A=B", "--seed", "5"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "Window(start_s=0.0, end_s=3600.0): 7 -> 4 pods" in text and "Scale(factor=2.0, seed=5): 4 -> 8 pods" in text
    table, meta = read_trace(out)
    assert table.num_rows == 8 and max(table.column("submit_s").to_pylist()) == 900.0
    assert "transforms:" in meta.description
    assert main(["helios", str(FIX / "helios" / "cluster_log.csv"), "-o", str(out), "--inflate", "1.3"]) == 1
    assert "needs a cluster" in capsys.readouterr().err
