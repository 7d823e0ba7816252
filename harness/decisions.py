"""The decision trace of a run (`events.parquet`, with `trace_events=true`): one row per thing
that happened to a pod, a job or a node, in the order it happened, so that a surprising result
can be followed to why a pod waited or why a node was bought.

Rows come from the simulation's `Hooks.event` (harness/hooks.py): a job arrived, was refused or
queued for the scheduler; a pod's pending reason changed, it was bound (with its GPUs), started,
preempted, released back to pending, finished or withdrawn; a loop asked a pool for nodes (how
many, how many the provider granted); a node was requested, came up or went. Recording only
appends to lists: the run's other outputs are the same with it on or off.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from harness.status import ABSENT, EVENT_NAMES, Event


class DecisionTrace:
    """Listens to a simulation's events from attach on; the nodes already there (a pool's
    minimum) are recorded as requested, ready, at the time of attach."""

    def __init__(self, sim):
        self.sim = sim
        self.t: list[float] = []
        self.kind: list[int] = []
        self.pod: list[int] = []
        self.job: list[int] = []
        self.node: list[int] = []
        self.detail: list[str] = []
        for n in np.flatnonzero(sim.state.status != ABSENT).tolist():
            self.record(Event.NODE_REQUESTED, -1, -1, n, "ready")
        sim.hooks.event.append(self.record)

    def record(self, kind: int, pod: int, job: int, node: int, detail: str) -> None:
        self.t.append(self.sim.now)
        self.kind.append(kind)
        self.pod.append(pod)
        self.job.append(job)
        self.node.append(node)
        self.detail.append(detail)

    def __len__(self) -> int:
        return len(self.t)

    def frame(self) -> pl.DataFrame:
        """The rows, jobs by their trace id and nodes with their pool (null where none)."""
        w, st = self.sim.w, self.sim.state
        job, node = np.array(self.job, np.int64), np.array(self.node, np.int64)
        ids = np.array([*w.job_id, None], dtype=object)  # the last: no job
        job_id = ids[np.where(job >= 0, job, len(ids) - 1)]
        pool = np.array([p.name for p in self.sim.cluster.pools], dtype=object)[st.slot_pool[np.maximum(node, 0)]]
        pool[node < 0] = None
        pod = np.array(self.pod, np.int64)
        pod_ids = np.array([*w.pod_id, None], dtype=object)[np.where(pod >= 0, pod, len(w.pod_id))]
        return pl.DataFrame({
            "t": np.array(self.t, np.float64),
            "event": pl.Series(np.array(EVENT_NAMES)[np.array(self.kind, np.int64)], dtype=pl.String).cast(
                pl.Enum(EVENT_NAMES)),
            "job_id": pl.Series(job_id.tolist(), dtype=pl.String),
            "pod": pl.Series(pod, dtype=pl.Int32).replace(-1, None),
            "pod_id": pl.Series(pod_ids.tolist(), dtype=pl.String),
            "node": pl.Series(node, dtype=pl.Int32).replace(-1, None),
            "pool": pl.Series(pool.tolist(), dtype=pl.String),
            "detail": pl.Series([d or None for d in self.detail], dtype=pl.String),
        })
