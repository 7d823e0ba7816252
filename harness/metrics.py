"""Metrics as exact integrals of piecewise-constant state, and their summary with polars.

Billed accelerators at any instant = GPUs of every node that exists (requested, booting or
ready, until removed) + GPUs of committed slots that hold no node. They split exactly into
  used        GPU milli bound to pods of started jobs on ready nodes, placeholders' aside,
  booting     all GPUs of nodes requested but not ready,
  unallocated free GPU milli on ready nodes,
  gang_wait   GPU milli on ready nodes held by pods whose job has not started,
  committed   GPUs of committed slots with no node in them,
  buffer      GPU milli held by running overprovisioning placeholders (pause pods: no work),
so idle = billed - used = booting + unallocated + gang_wait + committed + buffer (fractions
count as fractions). A phantom (a node a `silent` provider accepted but never brings up) is neither
billed nor booting: its slot counts as an empty committed slot if it is one, else as nothing.
The same idle split by GPU model, in accelerator-hours and in USD, each GPU at its slot's
price per GPU-hour (node price / GPUs: the pool's price, or its committed price in a committed
slot, as cost counts them), so an idle H100 does not count as an idle T4.
Fragmentation is the FGD measure over ready nodes (`harness.fragmentation`).
A node removed before its pool's `min_billed_s` ran out is still billed the rest (up to the
horizon), counted at its removal as what it was then (booting, or unallocated on a ready node:
a node goes empty), and costed at its pool's price; a phantom is never billed, and a node in a
committed slot costs nothing more than the slot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from numba import njit

from harness.idle_rates import recount
from harness.output import atomic_path
from harness.state import WHOLE
from harness.status import (
    BOOTING,
    BOUND,
    DONE,
    NOT_ARRIVED,
    PENDING,
    POD_STATUS,
    READY,
    REASON_NAMES,
    REFUSED,
    RUNNING,
    Event,
    PendingReason,
)

MILLI_HOUR = 1000.0 * 3600.0
NO_NODES = np.zeros(0, np.int64)  # an event's touched nodes when its transitions touched none

#: the integrals `Accounting.totals` names, in the order of the accounting's vector of totals
TOTALS = ("billed", "used", "booting", "unallocated", "gang_wait", "committed", "buffer",
          "frag_ratio_time", "frag_ratio_weight", "frag_amount_time", "frag_amount_weight", "cost")
PENDING_AT = len(TOTALS)  # then the pending pod-seconds per reason
CLASS_AT = PENDING_AT + len(PendingReason)  # then the idle GPU milli-seconds per price class


class ExtensionAccount(Protocol):
    """An extension's own accounts (the services', harness/services/metrics.py), integrated
    beside the accounting's: the same steps, samples and end, and its columns of the summary."""

    def advance(self, last: float, dt) -> None: ...
    def sample(self, times: np.ndarray) -> None: ...
    def finish(self, horizon: float) -> None: ...
    def totals(self) -> dict: ...


class Accounting:
    """Integrates billed/used/idle accelerator time, cost, fragmentation and pending time.
    It reads the simulation's running totals from its ledger (`harness.ledger.Ledger`) and
    the phantoms from the provider's own mask `phantom` (slots that never come up)."""

    def __init__(self, sim, phantom: np.ndarray, timeline_interval_s: float):
        self.sim = sim
        self.ledger = sim.ledger
        self.phantom = phantom
        cluster = sim.cluster
        self.pool_price = np.array([p.price for p in cluster.pools])
        st = sim.state
        # per GPU slot, what one idle GPU milli in it adds to each model's idle milli (columns
        # 0..m-1: 1 in its model's column) and idle USD per second (columns m..2m-1). Slots of one
        # such row are a price class: the idle milli is integrated per class (`idle_rates`), and
        # per model it is the product of those integrals with the classes' rows
        self.models = list(cluster.models)
        m = len(self.models)
        model_of_type = {t.name: self.models.index(t.gpu_model) for t in cluster.node_types if t.gpus}
        gpu_slots = np.flatnonzero(st.gpu_cap > 0)
        model = np.array([model_of_type[cluster.node_types[t].name] for t in st.slot_type[gpu_slots]], np.int64)
        committed_price = np.array([p.committed_price for p in cluster.pools])
        node_price = np.where(st.slot_committed, committed_price[st.slot_pool], self.pool_price[st.slot_pool])
        weights = np.zeros((len(gpu_slots), 2 * m))
        weights[np.arange(len(gpu_slots)), model] = 1.0
        weights[np.arange(len(gpu_slots)), m + model] = node_price[gpu_slots] / 3600.0 / st.gpu_milli_cap[gpu_slots]
        self.class_weights, gpu_class = np.unique(weights, axis=0, return_inverse=True)
        self.slot_class = np.full(st.n_slots, -1, np.int64)  # -1: a slot without GPUs
        self.slot_class[gpu_slots] = gpu_class.reshape(-1)
        self.slot_milli = st.gpu_cap.astype(np.int64) * WHOLE
        self._counted = np.zeros(st.n_slots, np.int64)  # each slot's idle GPU milli as its class counts it
        self._class_idle = np.zeros(len(self.class_weights), np.int64)  # idle GPU milli per class, now
        recount(*self._recount_args(np.arange(st.n_slots)))
        # every integral in one vector (`TOTALS`, pending seconds, idle per class): a step adds
        # rate x dt / per to it at once; `per` divides the cost only (USD per hour)
        self._acc = np.zeros(CLASS_AT + len(self.class_weights))
        self._per = np.ones_like(self._acc)
        self._per[TOTALS.index("cost")] = 3600.0
        self.committed_cost_rate = sum(p.committed * p.committed_price for p in cluster.pools)
        self.min_billed_s = np.array([p.min_billed_s for p in cluster.pools])
        self._cost_key, self._cost = -1, 0.0
        self._phantom_key, self._phantom = -1, (0, 0, np.zeros(len(cluster.pools), np.int64))
        self.last = 0.0
        self.reason = sim.pod_reason
        #: placeholders wait for no work: never counted pending (None: a run without any)
        self.pause = sim.placeholder if sim.placeholder.any() else None
        self.reason_count = np.zeros(len(PendingReason), np.int64)
        self.interval = float(timeline_interval_s)
        self.next_sample = 0.0
        self.timeline = Timeline()
        #: extensions' own accounts (`ExtensionAccount`), in the order they attached
        self.extensions: list[ExtensionAccount] = []
        self.job_preemptions = np.zeros(sim.w.n_jobs, np.int32)  # times each job was preempted
        self.preempted_lost = 0.0  # GPU milli-seconds of work preempted pods lost
        self.placeholder_preemptions = 0  # placeholders preempted (counted apart: no work lost)
        self.job_taint_evictions = np.zeros(sim.w.n_jobs, np.int32)  # times a device taint evicted each job
        self.taint_lost = 0.0  # GPU milli-seconds of work pods evicted by device taints lost

    def preempted(self, jobs: np.ndarray, lost_milli_s: float) -> None:
        """These jobs were preempted once each (`Simulation.evict`), losing this much work."""
        self.job_preemptions[jobs] += 1
        self.preempted_lost += lost_milli_s

    def evicted_by_taint(self, jobs: np.ndarray, lost_milli_s: float) -> None:
        """These jobs were evicted once each by a NoExecute device taint, losing this much work."""
        self.job_taint_evictions[jobs] += 1
        self.taint_lost += lost_milli_s

    def removing(self, n: int, requested_at: float) -> None:
        """Node n goes now: bill what is left of its minimum billed time, at once (the
        integrals then stay those of the nodes that exist)."""
        st, now = self.sim.state, self.sim.now
        pool = int(st.slot_pool[n])
        rest = min(requested_at + self.min_billed_s[pool], self.sim.horizon) - now
        if rest <= 0 or self.phantom[n] or st.slot_committed[n]:
            return
        milli = float(st.gpu_milli_cap[n]) * rest
        acc = self._acc
        acc[TOTALS.index("billed")] += milli
        acc[TOTALS.index("booting" if st.status[n] == BOOTING else "unallocated")] += milli
        acc[CLASS_AT + self.slot_class[n]] += milli
        acc[TOTALS.index("cost")] += self.pool_price[pool] * rest / 3600.0

    @property
    def totals(self) -> dict[str, float]:
        """The integrals so far, by name (`TOTALS`): GPU milli-seconds, cost in USD and the
        fragmentation's time-weighted sums and weights."""
        return dict(zip(TOTALS, self._acc[:PENDING_AT].tolist(), strict=True))

    @property
    def pending_s(self) -> list[float]:
        """Pod-seconds pending so far, per reason (harness.status.PendingReason)."""
        return self._acc[PENDING_AT:CLASS_AT].tolist()

    @property
    def idle_by_model(self) -> np.ndarray:
        """Idle GPU milli-seconds (row 0) and idle USD (row 1) per GPU model so far."""
        return (self._acc[CLASS_AT:] @ self.class_weights).reshape(2, -1)

    def set_reason(self, p: int, reason: int) -> None:
        if self.pause is not None and self.pause[p]:
            return
        old = self.reason[p]
        if old >= 0:
            self.reason_count[old] -= 1
        if self.sim.hooks.event and reason != old and reason >= 0:
            self.sim.hooks.emit(Event.REASON, p, int(self.sim.w.job[p]), detail=REASON_NAMES[reason])
        self.reason[p] = reason
        if reason >= 0:
            self.reason_count[reason] += 1

    def set_reasons(self, pods: np.ndarray, reasons: np.ndarray | int) -> None:
        """set_reason for many distinct pods at once (one reason for all, or one each)."""
        each = reasons if isinstance(reasons, np.ndarray) and reasons.ndim else None
        if self.pause is not None:
            keep = ~self.pause[pods]
            pods = pods[keep]
            if each is not None:
                each = each[keep]
        if self.sim.hooks.event:
            old, new = self.reason[pods], np.broadcast_to(reasons if each is None else each, pods.shape)
            for p, r in zip(pods[(new != old) & (new >= 0)].tolist(), new[(new != old) & (new >= 0)].tolist(),
                            strict=True):
                self.sim.hooks.emit(Event.REASON, p, int(self.sim.w.job[p]), detail=REASON_NAMES[r])
        if each is not None:
            set_each(self.reason, self.reason_count, pods, each)
        else:
            set_all(self.reason, self.reason_count, pods, int(reasons))

    def rates(self) -> tuple[float, ...]:
        """Instantaneous rates of the current state: GPU milli billed, used, booting,
        unallocated, gang_wait, committed, buffer and ready; fragmentation F; cost in USD/h."""
        st, ledger = self.sim.state, self.ledger
        ready_cap = float(st.ready_milli)
        alloc = float(st.alloc_ready_milli)
        held = float(ledger.held_ready)
        buffer = float(ledger.buffer_ready)
        phantom_milli, phantom_committed_milli, _ = self._phantoms()
        booting = st.booting_milli - phantom_milli
        committed = st.committed_empty_milli + phantom_committed_milli
        return (ready_cap + booting + committed, alloc - held - buffer, float(booting),
                ready_cap - alloc, held, float(committed), buffer, ready_cap, max(ledger.frag_ready, 0.0),
                self._cost_rate())

    def _phantoms(self) -> tuple[int, int, np.ndarray]:
        """(GPU milli of phantoms, of those in committed slots, phantoms outside committed slots
        per pool), from the provider's own tally (no loop reads it); recounted
        only when nodes come or go."""
        st = self.sim.state
        if self._phantom_key != st.layout_version:
            self._phantom_key = st.layout_version
            phantom = self.phantom
            if phantom.any():
                milli = st.gpu_cap.astype(np.int64) * WHOLE
                committed = phantom & st.slot_committed
                paid = np.bincount(st.slot_pool[phantom & ~committed], minlength=len(self.pool_price))
                self._phantom = int(milli[phantom].sum()), int(milli[committed].sum()), paid
            else:
                self._phantom = 0, 0, np.zeros(len(self.pool_price), np.int64)
        return self._phantom

    def _cost_rate(self) -> float:
        """USD/h of the nodes that exist; recomputed only when nodes come or go."""
        st = self.sim.state
        if self._cost_key != st.layout_version:
            self._cost_key = st.layout_version
            self._cost = float((st.paid_per_pool - self._phantoms()[2]) @ self.pool_price) + self.committed_cost_rate
        return self._cost

    def idle_by_class(self) -> np.ndarray:
        """Idle GPU milli per price class now, the nodes the ledger's transitions touched since
        the last step recounted (`idle_rates.recount`)."""
        touched = self._touched()
        if len(touched):
            recount(*self._recount_args(touched))
        return self._class_idle

    def _touched(self) -> np.ndarray:
        """The nodes the ledger's transitions touched since last asked. Metrics integrate between
        a loop's steps, never inside a trial, whose changes are undone without a transition."""
        changed = self.ledger.take_changed()
        assert not (changed and self.sim.state.in_trial), "the accounting reads the state between trials"
        return np.array(changed, np.int64) if changed else NO_NODES

    def _recount_args(self, nodes: np.ndarray) -> tuple[np.ndarray, ...]:
        """`idle_rates.recount`'s arguments to recount the idle milli per class on `nodes`."""
        st, ledger = self.sim.state, self.ledger
        return (nodes, st.status, self.phantom, st.slot_committed, self.slot_milli, st.gpu_used, ledger.held,
                ledger.buffer_on, self.slot_class, self._counted, self._class_idle)

    def advance(self, t: float) -> None:
        """Integrate the current (constant) state from the last instant up to t. Timeline
        samples due in [last, t) record that state: a sample shows the state after the events
        of its own instant, as the integrals count it."""
        if t <= self.last:
            return
        r = self.rates()
        if self.next_sample < t:
            self._sample_until(min(t, self.sim.horizon), r, inclusive=False)
        step = (self._acc, self._per, self.reason_count, t - self.last, *r)
        recount_then_add(*self._recount_args(self._touched()), *step)
        for ext in self.extensions:
            ext.advance(self.last, t - self.last)
        self.last = t

    def advance_steps(self, times: np.ndarray) -> None:
        """`advance` to each of these increasing instants in turn, while the state stays
        constant (loop ticks that change nothing), in a few vector steps with the same
        arithmetic: each step's integral is added one after another, as stepping adds them."""
        r = self.rates()
        self._sample_until(min(float(times[-1]), self.sim.horizon), r, inclusive=False)
        self._integrate(r, np.diff(times, prepend=self.last))
        for ext in self.extensions:
            ext.advance(self.last, np.diff(times, prepend=self.last))
        self.last = float(times[-1])

    def _integrate(self, r: tuple, dt: np.ndarray) -> None:
        """Add the integrals of rates r, of the pending pods and of the idle milli per class over
        consecutive steps (an array of durations, added in turn), in one vector step. Each total
        gets rate x dt (the cost rate x dt / 3600, the fragmentation sums only while there is
        free or ready GPU milli), so its sum is the same, bit for bit, as stepping (`add_event`)."""
        rate = np.r_[step_rates(*r), self.reason_count, self.idle_by_class()]
        self._acc = add_rows_in_turn(self._acc, np.multiply.outer(rate, dt) / self._per[:, None])

    def finish(self) -> None:
        """Integrate up to the horizon and take the samples due at it (the final state)."""
        self.advance(self.sim.horizon)
        self._sample_until(self.sim.horizon, self.rates(), inclusive=True)
        for ext in self.extensions:
            ext.finish(self.sim.horizon)

    def _sample_until(self, t: float, r: tuple, inclusive: bool) -> None:
        """The samples due before t (or at it, if inclusive), all of the state of rates r:
        one by one when one is due, else in bulk (a long quiet stretch), at the same instants
        (the interval added one after another)."""
        while self.next_sample < t or (inclusive and self.next_sample == t):
            if not (self.next_sample + self.interval < t):  # one sample due (the usual case)
                self.timeline.append((self.next_sample, *self._row(r)))
                for ext in self.extensions:
                    ext.sample(np.array([self.next_sample]))
                self.next_sample += self.interval
                continue
            k = min(int((t - self.next_sample) / self.interval) + 2, self.timeline.ROW_GROUP)
            times = np.add.accumulate(np.r_[self.next_sample, np.full(k, self.interval)])
            due = min(int(np.count_nonzero((times <= t) if inclusive else (times < t))), k)
            self.timeline.extend(times[:due], self._row(r))
            for ext in self.extensions:
                ext.sample(times[:due])
            self.next_sample = float(times[due])

    def _row(self, r: tuple) -> tuple:
        """The timeline row of the state of rates r, without its instant."""
        billed, used, booting, unallocated, gang_wait, committed, buffer, ready_cap, frag, cost_rate = r
        idle_ready = ready_cap - (used + gang_wait + buffer)
        status = self.sim.state.status
        return (
            billed / 1000, used / 1000, booting / 1000, unallocated / 1000, gang_wait / 1000, committed / 1000,
            buffer / 1000,
            frag / idle_ready if idle_ready > 0 else 0.0,
            frag / ready_cap if ready_cap > 0 else 0.0,
            int((status == READY).sum()), int((status == BOOTING).sum()), *[int(c) for c in self.reason_count],
            cost_rate,
        )


@njit(cache=True)
def step_rates(billed, used, booting, unallocated, gang_wait, committed, buffer, ready_cap, frag, cost_rate):
    """The rates of `TOTALS`, in order, from the state's rates (`Accounting.rates`): the
    fragmentation's sums run only while there is free (ratio) or ready (amount) GPU milli."""
    idle_ready = ready_cap - (used + gang_wait + buffer)  # the free GPU milli F is measured on
    return (float(billed), float(used), float(booting), float(unallocated), float(gang_wait), float(committed),
            float(buffer), frag / idle_ready if idle_ready > 0 else 0.0, 1.0 if idle_ready > 0 else 0.0,
            frag / ready_cap if ready_cap > 0 else 0.0, 1.0 if ready_cap > 0 else 0.0, float(cost_rate))


@njit(cache=True)
def add_event(total, per, reason_count, class_idle, dt, billed, used, booting, unallocated, gang_wait, committed,
              buffer, ready_cap, frag, cost_rate):
    """One step of dt at the state's rates (`Accounting.rates`, then the pending pods per reason
    and the idle milli per class): total += rate x dt / per, in place, each element by the same
    three operations numpy's vector steps make (so the same bits), in one compiled call: the
    rate vector was filled from Python (a tuple and two arrays) and added in another call."""
    head = step_rates(billed, used, booting, unallocated, gang_wait, committed, buffer, ready_cap, frag, cost_rate)
    for i in range(len(head)):
        total[i] += head[i] * dt / per[i]
    at = len(head)
    for k in range(len(reason_count)):
        total[at + k] += float(reason_count[k]) * dt / per[at + k]
    at += len(reason_count)
    for c in range(len(class_idle)):
        total[at + c] += float(class_idle[c]) * dt / per[at + c]


@njit(cache=True)
def recount_then_add(changed, status, phantom, committed, milli_cap, gpu_used, held, buffer_on, slot_class, counted,
                     class_idle, total, per, reason_count, dt, billed, used, booting, unallocated, gang_wait,
                     committed_milli, buffer, ready_cap, frag, cost_rate):
    """An event's step (`Accounting.advance`): the idle milli per class recounted on the nodes
    its transitions touched (`idle_rates.recount`), then `add_event`, in one compiled call where
    they were two (a call's cost is mostly its arguments' passing, paid after every event)."""
    recount(changed, status, phantom, committed, milli_cap, gpu_used, held, buffer_on, slot_class, counted,
            class_idle)
    add_event(total, per, reason_count, class_idle, dt, billed, used, booting, unallocated, gang_wait,
              committed_milli, buffer, ready_cap, frag, cost_rate)


@njit(cache=True)
def set_each(reason: np.ndarray, count: np.ndarray, pods: np.ndarray, reasons: np.ndarray) -> None:
    """reason[pods[i]] = reasons[i] for distinct pods, `count` (pods per reason, -1 counted
    nowhere) following: integers, so the counts numpy's bincounts gave, in one compiled call (a
    futile gang attempt's pods are a handful, where a dozen numpy calls cost the most)."""
    for i in range(len(pods)):
        p = pods[i]
        if reason[p] >= 0:
            count[reason[p]] -= 1
        reason[p] = reasons[i]
        if reasons[i] >= 0:
            count[reasons[i]] += 1


@njit(cache=True)
def set_all(reason: np.ndarray, count: np.ndarray, pods: np.ndarray, new: int) -> None:
    """`set_each` with one reason for every pod."""
    for i in range(len(pods)):
        p = pods[i]
        if reason[p] >= 0:
            count[reason[p]] -= 1
        reason[p] = new
        if new >= 0:
            count[new] += 1


def add_rows_in_turn(total: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """total + steps[..., 0] + steps[..., 1] + ..., added in that order along the last axis
    (numpy's accumulate is sequential along it, unlike its pairwise sum), so each result is
    exactly that of stepping. Steps of 0 change nothing (a total is never -0.0: it starts at
    +0.0)."""
    if not steps.any():
        return total
    run = np.concatenate([total[..., None], steps], axis=-1)
    return np.add.accumulate(run, axis=-1)[..., -1]


TIMELINE_SCHEMA = pa.schema(
    [(c, pa.float64()) for c in ("t_s", "billed_gpus", "used_gpus", "booting_gpus", "unallocated_gpus",
                                 "gang_wait_gpus", "committed_idle_gpus", "buffer_gpus", "frag_ratio",
                                 "frag_amount")]
    + [(c, pa.int64()) for c in ("nodes_ready", "nodes_booting", *[f"pending_{n}" for n in REASON_NAMES])]
    + [("cost_rate_usd_h", pa.float64())])


class Timeline:
    """Timeline samples, streamed to Parquet in row groups once a path is given, so memory
    does not grow with the length of a replay; the file appears (renamed) only on `close`.
    Samples come one by one (rows) or as a block of constant samples (a quiet stretch)."""

    ROW_GROUP = 8192

    def __init__(self):
        self.rows: list[tuple] = []  # the latest single samples
        self.blocks: list[pa.Table] = []  # earlier samples not yet written, in order
        self.held = 0  # samples in `blocks`
        self.writer = None

    def stream_to(self, path: Path, metadata: dict[str, str] | None = None) -> None:
        """Stream to `path`, whose footer will hold the key-value `metadata` (fixed at open)."""
        self.path = Path(path)
        self.atomic = atomic_path(self.path)
        self.writer = pq.ParquetWriter(self.atomic.__enter__(), TIMELINE_SCHEMA.with_metadata(metadata or {}))

    def append(self, row: tuple) -> None:
        self.rows.append(row)
        if self.writer is not None and self.held + len(self.rows) >= self.ROW_GROUP:
            self._flush(whole_groups=True)

    def extend(self, times: np.ndarray, row: tuple) -> None:
        """Samples at each of `times`, all reading `row` (the columns after t_s)."""
        self._seal()
        columns = [times, *(np.full(len(times), v) for v in row)]
        self.blocks.append(pa.table([pa.array(c, f.type) for c, f in zip(columns, TIMELINE_SCHEMA, strict=True)],
                                    schema=TIMELINE_SCHEMA))
        self.held += len(times)
        if self.writer is not None and self.held >= self.ROW_GROUP:
            self._flush(whole_groups=True)

    def frame(self) -> pl.DataFrame:
        """The samples not yet streamed (all of them when not streaming)."""
        return cast(pl.DataFrame, pl.from_arrow(self._table()))  # a table converts to a frame

    def close(self) -> None:
        assert self.writer is not None, "close() ends what stream_to() began"
        self._flush(whole_groups=False)
        self.writer.close()
        self.atomic.__exit__(None, None, None)

    def _seal(self) -> None:
        """The single samples so far become a block (they precede what comes next)."""
        if self.rows:
            columns = list(zip(*self.rows, strict=True))
            self.blocks.append(pa.table([pa.array(c, f.type) for c, f in zip(columns, TIMELINE_SCHEMA, strict=True)],
                                        schema=TIMELINE_SCHEMA))
            self.held += len(self.rows)
            self.rows = []

    def _table(self) -> pa.Table:
        self._seal()
        return pa.concat_tables(self.blocks) if self.blocks else TIMELINE_SCHEMA.empty_table()

    def _flush(self, whole_groups: bool) -> None:
        """Write the samples held in row groups of ROW_GROUP; with `whole_groups`, the rest
        (less than a group) stays held."""
        table = self._table()
        n = len(table) - len(table) % self.ROW_GROUP if whole_groups else len(table)
        assert self.writer is not None, "only a streaming timeline flushes"
        if n:
            self.writer.write_table(table.slice(0, n), row_group_size=self.ROW_GROUP)
        self.blocks = [table.slice(n)] if n < len(table) else []
        self.held = len(table) - n


def _quantiles(values: np.ndarray) -> dict[str, float]:
    if len(values) == 0:
        return {f"gang_latency_{k}_s": float("nan") for k in ("p50", "p90", "p95", "p99", "max")}
    s = pl.Series(values)
    # polars types these Optional: None is for an empty or all-null series, and this one is neither
    return {
        "gang_latency_p50_s": cast(float, s.quantile(0.5, "linear")),
        "gang_latency_p90_s": cast(float, s.quantile(0.9, "linear")),
        "gang_latency_p95_s": cast(float, s.quantile(0.95, "linear")),
        "gang_latency_p99_s": cast(float, s.quantile(0.99, "linear")),
        "gang_latency_max_s": float(cast(float, s.max())),
    }


def jobs_frame(sim) -> pl.DataFrame:
    """One row per job of the trace (a service's replicas are in services.parquet)."""
    w = sim.w
    status = sim.pod_status
    df = pl.DataFrame({
        "job_id": w.job_id,
        "pods": np.bincount(w.job, minlength=w.n_jobs).astype(np.int32),
        "min_member": w.job_min_member,
        "is_gang": w.job_min_member > 1,
        "priority": w.job_priority,
        "queue": w.job_queue,
        "submit_s": w.job_submit,
        "admitted_s": sim.job_admitted,
        "start_s": sim.job_started,
        "finish_s": sim.job_finished,
        "refused": np.bincount(w.job, weights=status == REFUSED, minlength=w.n_jobs) > 0,
        "preemptions": sim.acct.job_preemptions,
    }, nan_to_null=True)
    if w.services is not None:  # the trace's jobs: no replica slot, no placeholder (harness/services/buffers.py)
        df = df.filter(pl.Series(w.job_of_trace))
    return df.with_columns(
        (pl.col("admitted_s") - pl.col("submit_s")).alias("admission_wait_s"),
        (pl.col("start_s") - pl.col("submit_s")).alias("start_latency_s"),
        (pl.col("finish_s") - pl.col("submit_s")).alias("completion_s"),
    )


def nodes_frame(sim) -> pl.DataFrame:
    cluster, st = sim.cluster, sim.state
    recs = sim.nodes
    pool = np.array([r.pool for r in recs], np.int32)
    slot = np.array([r.slot for r in recs], np.int64)
    return pl.DataFrame({
        "instance": np.arange(len(recs)),
        "slot": slot,
        "pool": [cluster.pools[p].name for p in pool],
        "node_type": [cluster.pools[p].node_type for p in pool],
        "rack": st.slot_rack[slot] if len(recs) else np.zeros(0, np.int32),
        "committed_slot": st.slot_committed[slot] if len(recs) else np.zeros(0, bool),
        "gpus": st.gpu_cap[slot] if len(recs) else np.zeros(0, np.int32),
        "requested_s": np.array([r.requested_at for r in recs]),
        "ready_s": np.array([r.ready_at for r in recs]),
        "removed_s": np.array([r.removed_at for r in recs]),
        "used": np.array([r.used for r in recs], bool),
    }, nan_to_null=True)


def idle_by_model(acct: Accounting) -> dict[str, float]:
    """Idle accelerator hours and their USD in total and per GPU model (columns
    `idle_accel_usd`, `idle_accel_hours_model_<M>`, `idle_accel_usd_model_<M>`)."""
    hours, usd = acct.idle_by_model
    return {"idle_accel_usd": float(usd.sum()),
            **{f"idle_accel_hours_model_{m}": float(h) / MILLI_HOUR for m, h in zip(acct.models, hours, strict=True)},
            **{f"idle_accel_usd_model_{m}": float(u) for m, u in zip(acct.models, usd, strict=True)}}


def admission_waits(sim, jobs: pl.DataFrame) -> dict[str, float | int]:
    """Per queue of the trace, behind an admission layer (Kueue): the mean seconds from
    submission to admission of its admitted jobs (`admission_wait_mean_s_<queue>`) and how
    many arrived jobs it never admitted (`jobs_not_admitted_<queue>`; in all, the jobs and
    their pods: `jobs_not_admitted`, `pods_not_admitted`, work the loop never did, so its
    comparisons say so, harness/work.py); behind admission checks
    (Kueue's ProvisioningRequest check), the mean seconds from quota reservation to admission
    (`check_wait_mean_s_<queue>`). Nothing without one: every job is admitted as it arrives."""
    gate = sim.admission
    if gate is None:
        return {}
    arrived = jobs.filter((pl.col("submit_s") <= sim.horizon) & ~pl.col("refused"))
    queues = arrived["queue"].to_numpy()
    waits = arrived["admission_wait_s"].to_numpy(allow_copy=True).astype(float)
    never = arrived["admitted_s"].is_null().to_numpy()
    names = sorted(set(queues.tolist()))
    row: dict[str, float | int] = {"jobs_not_admitted": int(never.sum()),
                                   "pods_not_admitted": int(arrived["pods"].to_numpy()[never].sum())}
    for q in names:
        mine = queues == q
        row[f"admission_wait_mean_s_{q}"] = _mean(waits[mine])
        row[f"jobs_not_admitted_{q}"] = int(never[mine].sum())
    if np.isfinite(gate.reserved).any():  # admission checks: from quota reservation to admission
        checked = sim.job_admitted - gate.reserved
        for q in names:
            row[f"check_wait_mean_s_{q}"] = _mean(checked[sim.w.job_queue == q])
    return row


def _mean(values: np.ndarray) -> float:
    """The mean of the defined values (nan: none), summed in one fixed order: a multi-threaded
    group-by's partial sums would make the last digit vary from run to run."""
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if len(defined) else float("nan")


def preemption_losses(sim) -> dict[str, float | int]:
    """Preemptions, the jobs they hit and the accelerator-hours of work they threw away, for a
    loop that may preempt (`allow_preemption`); nothing for one that never does."""
    if not sim.may_preempt:
        return {}
    return {"preemptions": int(sim.acct.job_preemptions.sum()),
            "jobs_preempted": int((sim.acct.job_preemptions > 0).sum()),
            "preempted_accel_hours_lost": sim.acct.preempted_lost / MILLI_HOUR}


def taint_eviction_losses(sim) -> dict[str, float | int]:
    """Device taints during the run: how many came, the evictions their NoExecute effect made,
    the jobs they hit and the accelerator-hours of work thrown away; nothing in a cluster
    without them."""
    if sim.taint_eviction is None:
        return {}
    return {"device_taints": sim.taint_eviction.applied,
            "taint_evictions": int(sim.acct.job_taint_evictions.sum()),
            "jobs_evicted_by_taint": int((sim.acct.job_taint_evictions > 0).sum()),
            "taint_evicted_accel_hours_lost": sim.acct.taint_lost / MILLI_HOUR}


def buffer_rows(sim) -> dict[str, float | int]:
    """With overprovisioning placeholders: how many, the accelerator-hours they held (idle: they do
    no work) and how often a pod preempted one; nothing without any."""
    pause = sim.w.job_placeholder
    if not pause.any():
        return {}
    return {"idle_accel_hours_buffer": sim.acct.totals["buffer"] / MILLI_HOUR, "placeholders": int(pause.sum()),
            "placeholder_preemptions": sim.acct.placeholder_preemptions}


def summary_row(sim, jobs: pl.DataFrame, nodes: pl.DataFrame, extra: dict) -> pl.DataFrame:
    """The one-row metrics table of a run (placeholders are no pods or jobs of it: `buffer_rows`)."""
    tot = sim.acct.totals
    # a service's replicas are counted in services.parquet; placeholders nowhere (no work)
    trace_jobs = sim.w.job_of_trace
    trace_pods = trace_jobs[sim.w.job]
    counts = np.bincount(sim.pod_status[trace_pods], minlength=len(POD_STATUS))
    gangs = jobs.filter(pl.col("is_gang") & ~pl.col("refused"))
    started = gangs.filter(pl.col("start_s").is_not_null())
    done = jobs.filter(pl.col("finish_s").is_not_null())
    idle = {k: tot[k] / MILLI_HOUR for k in ("booting", "unallocated", "gang_wait", "committed")}
    row = {
        **extra,
        "pods": int(trace_pods.sum()),
        "jobs": int(trace_jobs.sum()),
        "gangs": gangs.height,
        "horizon_s": sim.horizon,
        "billed_accel_hours": tot["billed"] / MILLI_HOUR,
        "used_accel_hours": tot["used"] / MILLI_HOUR,
        "idle_accel_hours": (tot["billed"] - tot["used"]) / MILLI_HOUR,
        **{f"idle_accel_hours_{k}": v for k, v in idle.items()},
        **buffer_rows(sim),
        "accel_utilization": tot["used"] / tot["billed"] if tot["billed"] else float("nan"),
        "frag_ratio": tot["frag_ratio_time"] / tot["frag_ratio_weight"] if tot["frag_ratio_weight"] else 0.0,
        "frag_amount": tot["frag_amount_time"] / tot["frag_amount_weight"] if tot["frag_amount_weight"] else 0.0,
        **_quantiles(started["start_latency_s"].to_numpy()),
        "gangs_never_started": gangs.height - started.height,
        "cost_usd": tot["cost"],
        **idle_by_model(sim.acct),
        **{f"pending_s_{n}": float(v) for n, v in zip(REASON_NAMES, sim.acct.pending_s, strict=True)
           if (n != "not_admitted" or sim.admission is not None)  # only behind an admission layer
           and (n != "job_backoff" or sim.job_backoff is not None)},  # only with the Job controller's backoff
        **admission_waits(sim, jobs),
        **preemption_losses(sim),
        **taint_eviction_losses(sim),
        **{k: v for ext in sim.acct.extensions for k, v in ext.totals().items()},  # e.g. a trace with services
        "nodes_provisioned": nodes.height,
        "nodes_never_used": int((~nodes["used"]).sum()),
        "job_completion_p50_s": done["completion_s"].median() if done.height else float("nan"),
        "job_completion_mean_s": done["completion_s"].mean() if done.height else float("nan"),
        **{f"pods_{POD_STATUS[s]}": int(counts[s]) for s in (DONE, RUNNING, BOUND, PENDING, REFUSED, NOT_ARRIVED)},
        "jobs_done": done.height,
    }
    return pl.DataFrame([row])
