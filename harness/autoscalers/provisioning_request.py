"""ProvisioningRequests as Cluster Autoscaler handles them (cluster-autoscaler/provisioningrequest/
and processors/provreq/): every pending gang is one request for its pods, all or nothing.

Each scan, before scale-up:
  refresh   a booking ends when all the gang's pods are scheduled (consumed) or once it is
            older than `booking_s` (BookingExpired, 10 min); its nodes then follow the normal
            scale-down rules;
  process   ONE request, the first pending gang in queue order that is neither booked nor
            waiting out its retry backoff (GetPodsFromNextRequest). If its pods fit the
            capacity that exists or is on its way (in the autoscaler's view, booked nodes
            counted as taken), it is Provisioned and that capacity booked. Otherwise
            `check-capacity` marks it not provisioned, and `best-effort-atomic-scale-up`
            asks one pool for all of its nodes at once (all-or-nothing where the pool
            honours it, else best effort), Provisioned at once with the granted nodes booked.
            A request not provisioned is retried after 1 min, doubling up to 10 min.
The requests come from the pending gangs, or, once an admission layer `serve`s them (Kueue's
ProvisioningRequest check, harness/kueue/provisioning.py), from the workloads it reserved
quota for, one request per workload, of its class; it hears each outcome as it happens
(Provisioned; Failed: not provisioned under the `noRetry` parameter, not retried here).
A booking lives in the autoscaler's own snapshot only, as upstream's fake pods (bookCapacity):
other pods do not count it as room and scale-down keeps its nodes; the scheduler knows
nothing of it and may place any pod there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

import numpy as np

from harness.quiet import Clock
from harness.whatif import Snapshot, classes

if TYPE_CHECKING:
    from harness.autoscalers.class_fits import ClassFits
    from harness.view import SimulationView
    from harness.workload import Workload

BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up"
CHECK_CAPACITY = "check-capacity"
CLASSES = (BEST_EFFORT_ATOMIC, CHECK_CAPACITY)
INITIAL_RETRY_S = 60.0  # provisioning-request-initial-backoff-time
MAX_RETRY_S = 600.0  # provisioning-request-max-backoff-time


class RequestSource(Protocol):
    """An admission layer that creates the requests (Kueue's ProvisioningRequest check)."""

    provisioning_class: str
    no_retry: bool
    version: int

    def requests(self) -> list[tuple[int, np.ndarray]]: ...
    def jobs(self) -> np.ndarray: ...
    def provisioned(self, j: int, now: float) -> None: ...
    def failed(self, j: int, now: float) -> None: ...


class ScaleUp(Protocol):
    """What the requests ask of the Cluster Autoscaler that processes them
    (harness/autoscalers/cluster_autoscaler.py): its simulation and view of a pod, where each
    class of pods fits, the queued gangs and a gang's pending pods, and a scale-up for a whole request."""

    sim: SimulationView
    view: Workload
    view_class: np.ndarray
    class_fits: ClassFits

    def queued_gangs(self) -> np.ndarray: ...
    def pending_of(self, j: int) -> np.ndarray: ...
    def scale_up_whole(self, now: float, unit: np.ndarray, atomic: bool) -> np.ndarray | None: ...


class ProvisioningRequests:
    def __init__(self, ca: ScaleUp, provisioning_class: str, booking_s: float):
        self.ca, self.provisioning_class, self.booking_s = ca, provisioning_class, booking_s
        self.source: RequestSource | None = None  # None: the pending gangs are the requests

    def serve(self, source: RequestSource) -> None:
        """From now on the requests are `source`'s, of its class, their outcomes told to it."""
        self.source, self.provisioning_class = source, source.provisioning_class

    def attach(self) -> None:
        sim = self.ca.sim
        #: node -> job whose booking holds it, -1 = free (the autoscaler's snapshot only)
        self.booked_for = np.full(sim.state.n_slots, -1, np.int64)
        self.size = np.diff(sim.w.job_bounds)  # pods per job
        self.booked: dict[int, tuple[float, np.ndarray]] = {}  # job -> (Provisioned at, its nodes)
        self.failed: dict[int, float] = {}  # job -> when its request was last not provisioned
        self.retry_s: dict[int, float] = {}  # job -> the wait before its next retry
        self.version = 0  # bumps on every change of the bookings or the failed requests
        self.idle = True  # the last scan processed no request and changed no booking

    # ---- refresh: bookings end ----------------------------------------------------------
    def refresh(self, now: float) -> None:
        placed = self.ca.sim.job_placed
        done = [j for j, (since, _) in self.booked.items()
                if since + self.booking_s < now or placed[j] >= self.size[j]]  # expired or consumed
        for j in done:
            self.booked_for[self.booked.pop(j)[1]] = -1
        if done:
            self.version += 1
        self.idle = not done
        if self.failed:  # a request whose gang left the queue (or its source) is gone with it
            jobs = np.fromiter(self.failed, np.int64, len(self.failed))
            live = self.ca.sim.queue.jobs() if self.source is None else self.source.jobs()
            gone = set(jobs[~np.isin(jobs, live)].tolist())
            if gone:
                self.failed = {j: t for j, t in self.failed.items() if j not in gone}
                self.retry_s = {j: r for j, r in self.retry_s.items() if j not in gone}

    def release(self, n: int) -> None:
        """Node n is deleted (it never came up): no booking holds it any more. Upstream's
        best-effort-atomic class admits the workload once the scale-up is requested, without
        waiting for the nodes, so the request stays Provisioned; its booking loses the node."""
        j = int(self.booked_for[n])
        if j >= 0:
            since, nodes = self.booked[j]
            self.booked[j] = (since, nodes[nodes != n])
            self.booked_for[n] = -1
            self.version += 1

    def key(self) -> tuple[int, ...]:
        """What the requests' outcome depends on beyond nodes and arrivals."""
        return (self.version,) if self.source is None else (self.version, self.source.version)

    def open(self) -> bool:
        """A source's request awaits processing (pending gangs keep the autoscaler awake by
        themselves: they are in the scheduler's queue)."""
        return self.source is not None and bool(len(self.source.jobs()))

    def clocks(self, since: float) -> list[Clock]:
        """The booking expiries and retry backoffs that run out after `since` (the last scan),
        as (since, length): runs out at t - since >= length (the checks are strict, `<`)."""
        clocks = [(t, self.booking_s) for t, _ in self.booked.values() if t + self.booking_s >= since]
        clocks += [(t, self.retry_s[j]) for j, t in self.failed.items() if t + self.retry_s[j] >= since]
        return clocks

    # ---- process: one request per scan ----------------------------------------------------
    def process(self, now: float) -> None:
        for j, unit in self._due(now):
            if j in self.failed:
                self.retry_s[j] = min(2 * self.retry_s[j], MAX_RETRY_S)
            self.idle = False
            self._provision(now, j, unit)
            return

    def _due(self, now: float) -> Iterator[tuple[int, np.ndarray]]:
        """(job, its pending pods) of each request neither booked nor waiting out its retry
        backoff, in order. The pending gangs' pods are read one gang at a time, as it comes to
        be processed (a gang with none pending that the autoscaler could place makes no
        request): one request is processed per scan, and most gangs before it are booked or
        backing off."""
        if self.source is not None:
            requests: Iterable[tuple[int, np.ndarray | None]] = self.source.requests()
        else:
            requests = ((j, None) for j in self.ca.queued_gangs().tolist())
        for j, unit in requests:
            if j in self.booked or (j in self.failed and not self.failed[j] + self.retry_s[j] < now):
                continue
            if unit is None:
                unit = self.ca.pending_of(j)
                if not len(unit):
                    continue
            yield j, unit

    def _provision(self, now: float, j: int, unit: np.ndarray) -> None:
        nodes, rest = self._fit_existing(j, unit)
        if len(rest) and self.provisioning_class == BEST_EFFORT_ATOMIC:
            granted = self._scale_up(now, rest)
            if len(granted):
                nodes, rest = np.r_[nodes, granted], rest[:0]
        self.version += 1
        if len(rest) and self.source is not None and self.source.no_retry:  # Failed, not retried here
            self.source.failed(j, now)
            return
        if len(rest):  # Provisioned=False: retried after a backoff
            self.failed[j] = now
            self.retry_s.setdefault(j, INITIAL_RETRY_S)
            return
        self.failed.pop(j, None)  # Provisioned=True: the backoff is forgotten
        self.retry_s.pop(j, None)
        self.booked[j] = (now, nodes)
        self.booked_for[nodes] = j
        if self.source is not None:
            self.source.provisioned(j, now)

    def _fit_existing(self, j: int, unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the nodes, the pods left): the gang's pods packed first fit, class by class, on the
        nodes that exist or are on their way (in the autoscaler's view, other bookings taken),
        as upstream filters out the request's pods that are schedulable before scaling up; each
        class on the nodes where one of its pods fits now (`ClassFits`), the only ones that
        could take one."""
        ca = self.ca
        cls = classes(ca.view_class, ca.view, unit)
        _, first = np.unique(cls, return_index=True)
        order = cls[np.sort(first)].tolist()
        # a class's pods go only where one of them fits now (`ClassFits`): the snapshot holds those nodes
        fits = [ca.class_fits.nodes(c, int(unit[cls == c][0])) for c in order]
        slots = np.flatnonzero(np.logical_or.reduce(fits))
        booked = self.booked_for[slots]
        snap = Snapshot(ca.sim.state, slots, usable=(booked == -1) | (booked == j))
        used, left = [], []
        for c, where in zip(order, fits, strict=True):
            pods, usable = unit[cls == c], snap.usable & where[slots]
            local = snap.fit_alike(ca.view, int(pods[0]), len(pods), usable=usable) if usable.any() else slots[:0]
            used.append(slots[local])
            left.append(pods[len(local):])
        return np.unique(np.concatenate(used)), np.concatenate(left)

    def _scale_up(self, now: float, pods: np.ndarray) -> np.ndarray:
        """best-effort-atomic: one pool that can take all these pods, by the expander; the
        nodes it granted (all or nothing where the pool honours it; none if no pool can)."""
        granted = self.ca.scale_up_whole(now, pods, atomic=True)
        return pods[:0] if granted is None else granted
