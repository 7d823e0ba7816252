"""Composable transforms of a canonical trace table (`harness.trace.SCHEMA`).

Each transform is a pure function of a table (seeded where random) that keeps gangs whole:
jobs are selected, copied or shifted as units, so the gang agreement rules of the schema
still hold. Each also exists as a small class with `__call__(table) -> table`, so a list of
them can be instantiated by Hydra (`_target_: harness.transforms.Window`, ...; see
`conf/transforms/`) and applied with `Pipeline` or `apply`.

- `window`: the jobs submitted in [start, end), shifted to start at 0;
- `compress`: arrivals `factor` times denser (durations too, optionally);
- `scale`: `factor` times the jobs, by sampling (< 1) or by replicating with fresh ids (> 1);
- `remap_models`: rename GPU models in the allowed-model lists;
- `inflate`: the FGD paper's "tune" step, appending jobs drawn with replacement until the
  requested GPU milli reaches `ratio` x a cluster's GPU milli.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.cluster import Cluster
from harness.errors import ConfigError
from harness.trace import SCHEMA


def _job_index(table: pa.Table) -> tuple[np.ndarray, int]:
    """Dense job index of each row (in order of first appearance) and the number of jobs."""
    enc = pc.dictionary_encode(table.column("job_id")).combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), len(enc.dictionary)


def _set(table: pa.Table, name: str, values) -> pa.Table:
    i = SCHEMA.get_field_index(name)
    return table.set_column(i, SCHEMA.field(name), pa.array(values, SCHEMA.field(name).type)
                            if not isinstance(values, (pa.Array, pa.ChunkedArray)) else values)


def _suffix_ids(table: pa.Table, suffix: pa.Array) -> pa.Table:
    """Append a per-row suffix to pod and job ids."""
    for name in ("pod_id", "job_id"):
        table = _set(table, name, pc.binary_join_element_wise(table.column(name).combine_chunks(), suffix, ""))
    return table


def _copies(table: pa.Table, rows: np.ndarray, tags: np.ndarray, marker: str) -> pa.Table:
    """Rows `rows` of `table`, ids suffixed `~<marker><tag>`; refuses ids that would collide."""
    out = table.take(pa.array(rows))
    suffix = pc.binary_join_element_wise(pa.scalar(f"~{marker}"), pa.array(tags).cast(pa.string()), "")
    out = _suffix_ids(out, suffix)
    clash = pc.any(pc.is_in(out.column("job_id"), value_set=table.column("job_id").combine_chunks())).as_py()
    if clash:
        raise ConfigError(f"transforms.{marker}", f"copied job ids (suffix '~{marker}N') collide with existing ids")
    return out


def window(table: pa.Table, start_s: float = 0.0, end_s: float | None = None) -> pa.Table:
    """The jobs submitted in [start_s, end_s), with submit times shifted by -start_s.

    Durations are kept: a job submitted inside the window may run past its end.
    """
    if end_s is not None and end_s <= start_s:
        raise ConfigError("transforms.window", f"end ({end_s}) must be after start ({start_s})")
    submit = table.column("submit_s")
    keep = pc.greater_equal(submit, start_s)
    if end_s is not None:
        keep = pc.and_(keep, pc.less(submit, end_s))
    out = table.filter(keep)
    return _set(out, "submit_s", pc.subtract(out.column("submit_s"), float(start_s)))


def compress(table: pa.Table, factor: float, durations: bool = False) -> pa.Table:
    """Divide submit times by `factor` (> 1 packs arrivals, raising the offered load); with
    `durations` also divide run times (the same load, replayed faster)."""
    if not factor > 0:
        raise ConfigError("transforms.compress", f"factor must be > 0 (got {factor})")
    table = _set(table, "submit_s", pc.divide(table.column("submit_s"), float(factor)))
    if durations:
        table = _set(table, "duration_s", pc.divide(table.column("duration_s"), float(factor)))
    return table


def scale(table: pa.Table, factor: float, seed: int = 0) -> pa.Table:
    """About `factor` times the jobs, whole gangs at a time.

    Below 1: a uniform sample of round(factor x jobs) jobs, without replacement, in trace
    order. Above 1: the trace, then floor(factor) - 1 full copies, then copies of a sample of
    the fractional part; copy k of a job has ids suffixed `~r<k>` and the original's times.
    """
    if not factor > 0:
        raise ConfigError("transforms.scale", f"factor must be > 0 (got {factor})")
    job, n_jobs = _job_index(table)
    rng = np.random.default_rng(seed)
    whole, frac = int(np.floor(factor)), factor - np.floor(factor)
    extra = rng.choice(n_jobs, size=int(round(frac * n_jobs)), replace=False)
    chosen = np.zeros(n_jobs, bool)
    chosen[extra] = True
    if whole == 0:
        return table.filter(pa.array(chosen[job]))
    rows = np.arange(table.num_rows)
    parts = [table]
    if whole > 1:
        tags = np.repeat(np.arange(1, whole), table.num_rows)
        parts.append(_copies(table, np.tile(rows, whole - 1), tags, "r"))
    picked = rows[chosen[job]]
    if len(picked):
        parts.append(_copies(table, picked, np.full(len(picked), whole), "r"))
    return pa.concat_tables(parts).combine_chunks()


def remap_models(table: pa.Table, mapping: Mapping[str, str]) -> pa.Table:
    """Rename GPU models in every pod's allowed-model list (`{"V100M16": "V100"}`)."""
    col = table.column("gpu_models").combine_chunks()
    flat = pc.list_flatten(col)
    old = pa.array(list(mapping), pa.string())
    new = pa.array(list(mapping.values()), pa.string())
    at = pc.index_in(flat, value_set=old)
    renamed = pc.if_else(pc.is_null(at), flat, new.take(pc.fill_null(at, 0)))
    offsets = pc.subtract(col.offsets, col.offsets[0])
    return _set(table, "gpu_models", pa.ListArray.from_arrays(offsets, renamed))


def cluster_gpu_milli(cluster: Cluster | Mapping | str | os.PathLike | int) -> int:
    """Total GPU milli of a cluster at its maximum size (a static inventory: all its nodes).

    Accepts a `Cluster`, a cluster config mapping (`_target_` optional), a cluster YAML
    path, or the number itself.
    """
    if isinstance(cluster, (int, np.integer)):
        return int(cluster)
    if isinstance(cluster, (str, os.PathLike)):
        from omegaconf import OmegaConf

        cluster = cast(Mapping, OmegaConf.to_container(OmegaConf.load(os.fspath(cluster)), resolve=True))
    if isinstance(cluster, Mapping):
        cluster = Cluster(**{k: v for k, v in cluster.items() if k != "_target_"})
    gpus = {t.name: t.gpus for t in cluster.node_types}
    return 1000 * sum(p.max_size * gpus[p.node_type] for p in cluster.pools)


def gpu_milli_requested(table: pa.Table, partition_milli: Mapping[str, int] | None = None) -> np.ndarray:
    """GPU milli each pod requests: GPUs x share, or its partition profile's milli."""
    gpus = table.column("gpu_count").to_numpy().astype(np.int64)
    milli = table.column("gpu_milli").to_numpy().astype(np.int64)
    total = gpus * milli
    prof = table.column("gpu_partition")
    if prof.null_count < len(prof):
        profiles = dict(partition_milli or {})
        names = pa.array(list(profiles), pa.string())
        at = pc.index_in(prof, value_set=names)
        known = pc.or_(pc.is_valid(at), pc.is_null(prof)).to_numpy(zero_copy_only=False)
        if not known.all():
            missing = prof[int(np.flatnonzero(~known)[0])].as_py()
            raise ConfigError("transforms.inflate", f"partition profile '{missing}' is not in the cluster")
        values = pa.array(list(profiles.values()), pa.int64()).take(pc.fill_null(at, 0))
        total = np.where(prof.is_valid().to_numpy(zero_copy_only=False), values.to_numpy(), total)
    return total


def inflate(table: pa.Table, ratio: float, cluster: Cluster | Mapping | str | os.PathLike | int,
            seed: int = 0) -> pa.Table:
    """Append jobs drawn uniformly with replacement from the trace (CPU-only jobs included)
    until the requested GPU milli reaches `ratio` x the cluster's GPU milli, stopping at the
    first draw that would pass it (the FGD paper's inflation; with openb every job is one pod).

    The appended jobs follow the original rows in draw order, draw k with ids suffixed
    `~i<k>` and the drawn job's times. A trace already at or above the target is unchanged.
    """
    if not ratio > 0:
        raise ConfigError("transforms.inflate", f"ratio must be > 0 (got {ratio})")
    profiles = None
    if isinstance(cluster, Cluster):
        profiles = cluster.partition_profiles
    elif isinstance(cluster, Mapping):
        profiles = cluster.get("partition_profiles")
    target = ratio * cluster_gpu_milli(cluster)
    job, n_jobs = _job_index(table)
    per_job = np.bincount(job, weights=gpu_milli_requested(table, profiles), minlength=n_jobs)
    have = per_job.sum()
    if have >= target:
        return table
    if not per_job.any():
        raise ConfigError("transforms.inflate", "the trace requests no GPUs, so it cannot be inflated")
    rng = np.random.default_rng(seed)
    need = target - have
    draws = np.zeros(0, np.int64)
    while per_job[draws].sum() <= need:  # draw in blocks sized by the mean request
        block = int(2 * need / per_job.mean()) + 64
        draws = np.concatenate([draws, rng.integers(0, n_jobs, block)])
    passed = np.flatnonzero(np.cumsum(per_job[draws]) > need)[0]
    draws = draws[:passed]
    if not len(draws):
        return table
    order = np.argsort(job, kind="stable")
    starts = np.r_[0, np.cumsum(np.bincount(job, minlength=n_jobs))]
    sizes = starts[draws + 1] - starts[draws]
    pos = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    rows = order[np.repeat(starts[draws], sizes) + pos]
    copies = _copies(table, rows, np.repeat(np.arange(len(draws)), sizes), "i")
    return pa.concat_tables([table, copies]).combine_chunks()


# ---- Hydra-instantiable steps -----------------------------------------------------------

class Window:
    def __init__(self, start_s: float = 0.0, end_s: float | None = None):
        self.start_s, self.end_s = start_s, end_s

    def __call__(self, table: pa.Table) -> pa.Table:
        return window(table, self.start_s, self.end_s)


class Compress:
    def __init__(self, factor: float, durations: bool = False):
        self.factor, self.durations = factor, durations

    def __call__(self, table: pa.Table) -> pa.Table:
        return compress(table, self.factor, self.durations)


class Scale:
    def __init__(self, factor: float, seed: int = 0):
        self.factor, self.seed = factor, seed

    def __call__(self, table: pa.Table) -> pa.Table:
        return scale(table, self.factor, self.seed)


class RemapModels:
    def __init__(self, mapping: Mapping[str, str]):
        self.mapping = dict(mapping)

    def __call__(self, table: pa.Table) -> pa.Table:
        return remap_models(table, self.mapping)


class Inflate:
    """`cluster` is a `Cluster` (e.g. `${cluster}` instantiated by Hydra), a config mapping,
    a cluster YAML path or a GPU milli total."""

    def __init__(self, ratio: float, cluster, seed: int = 0):
        self.ratio, self.cluster, self.seed = ratio, cluster, seed

    def __call__(self, table: pa.Table) -> pa.Table:
        return inflate(table, self.ratio, self.cluster, self.seed)


class Pipeline:
    """Steps applied in order; itself a transform."""

    def __init__(self, steps: Sequence):
        self.steps = list(steps)

    def __call__(self, table: pa.Table) -> pa.Table:
        return apply(table, self.steps)


def apply(table: pa.Table, steps: Sequence) -> pa.Table:
    for step in steps:
        table = step(table)
    return table
