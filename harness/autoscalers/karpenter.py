"""A Karpenter-like autoscaler: batched provisioning of the cheapest compatible offering, and
consolidation that deletes or replaces nodes whenever that is cheaper.

It plugs into `harness.loops.separate.SeparateLoops` in place of the Cluster-Autoscaler-like one: the
scheduler still places every pod; this only adds and removes nodes. Pools are Karpenter's
offerings (a node type in a zone/block, on-demand or committed); all pools form one NodePool.

Provisioning. A pending pod (a job queued or re-queued while pods are pending: an arrival, an
eviction, a released gang member) opens a batch window that closes after `batch_idle_s` (1 s)
without another, or `batch_max_s` (10 s) after it opened; pods still pending re-trigger it every
`requeue_s` (10 s, the pod controller's requeue). At the close every pending pod is packed,
in Karpenter's queue order (CPU, then memory, largest first, then the older pod, then the pod
index as UID; no GPU key), one by one:
onto the first ready node with room, else an in-flight (booting) node, else a node claim opened
earlier in this batch, else a new claim (consecutive pods identical in its view are placed as one
run, with the same outcome). A claim holds every node type its pods fit together, so
the set narrows as pods join; it launches the cheapest offering of those types that the
NodePool's limit (a pool's max_size) still allows and that is not cached unavailable, a free
committed slot costing 0. Nodes the packing counted on for pending pods are nominated for
2 x `batch_max_s` and not disrupted meanwhile.

What it knows of the provider is only what asking taught it (it never reads stock). A launch
answered with an insufficient-capacity error (the request comes back empty) puts the offering
in the unavailable-offerings cache for `unavailable_ttl_s` (180 s, the AWS provider's
UnavailableOfferingsTTL) and the claim falls back to its next cheapest offering at once, as a
fleet request over the claim's offerings would; a claim with none left is dropped and its pods
wait for a later batch. A node still booting `registration_ttl_s` (900 s, liveness'
registrationTimeout) after it was asked for is deleted (its pods pending again, packed by the
next batch); as upstream, that marks no offering unavailable, so a pool that fails silently
is asked again.

Consolidation (`WhenEmptyOrUnderutilized`, harness/autoscalers/karpenter_consolidation.py) runs
every `poll_s` (10 s): it deletes or replaces nodes whenever that is cheaper, one command per
poll, re-validated `validation_s` (15 s) later. Both share Karpenter's scheduling simulation
(karpenter_scheduling.py) and what it knows of the NodePool's offerings (karpenter_offerings.py).

Its view of a pod: Karpenter counts resources, so by default it ignores DRA-style topology
claims (NVLink, NUMA, NIC) and rounds a GPU share up to a whole device; `topology_aware` and
`sharing_aware` turn each on (the view of `harness.whatif.view_of`); in a DRA cluster it
simulates pods' claims with the scheduler's allocator (`dra_aware`, on: ignoreDRARequests
false), a node not up yet (in flight, or a new claim) publishing what its instance type's
template says (`cluster.dra.templates`: the cloud provider's ResourceSliceTemplates, never
learned from the nodes). No gang awareness: pod by pod. Defaults are Karpenter's documented
ones (settings BATCH_IDLE_DURATION, BATCH_MAX_DURATION; NodePool disruption defaults).
"""

from __future__ import annotations

import numpy as np

from harness.autoscalers.karpenter_consolidation import Consolidation
from harness.autoscalers.karpenter_offerings import Offerings
from harness.autoscalers.karpenter_scheduling import WhatIf, queue_order
from harness.autoscalers.node_templates import NodeTemplates
from harness.autoscalers.provision_timeout import ProvisionTimeout
from harness.description import PRE_DRA, SHARING, TOPOLOGY, Description
from harness.quiet import MAX_TICKS, NO_TICKS, Cadence, Clock, ends, every, leading, still_quiet
from harness.scheduler import Scheduler
from harness.settings import check, duration, flag, fraction, integer, number, period
from harness.status import BOOTING, PENDING, READY, Event
from harness.view import SimulationView
from harness.whatif import ScratchState, Snapshot, equivalence_classes, view_of


def _agree(polls: np.ndarray, until: np.ndarray, was_free: np.ndarray) -> np.ndarray:
    """At each poll, whether every node's nomination (`until`) reads as it did (`was_free`:
    not nominated) then."""
    ok = np.ones(len(polls), bool)
    if was_free.any():
        ok &= polls >= until[was_free].max()
    if not was_free.all():
        ok &= polls < until[~was_free].min()
    return ok


class KarpenterAutoscaler:
    SETTINGS = {
        "batch_idle_s": duration("seconds without a new pending pod that close a batch window"),
        "batch_max_s": duration("seconds after which a batch window closes anyway"),
        "requeue_s": period("seconds after which a still-pending pod re-triggers provisioning"),
        "poll_s": period("seconds between consolidation polls"),
        "consolidate_underutilized": flag("consolidationPolicy WhenEmptyOrUnderutilized (true) or WhenEmpty "
                                          "(false: only empty nodes are removed); conf/loop/separate_karpenter.yaml "
                                          "sets it from the global `consolidation`"),
        "consolidate_after_s": duration("seconds a node's pods stay unchanged before it may be consolidated"),
        "budget_nodes": fraction("share of the NodePool's nodes disrupted at once"),
        "max_candidates": integer("nodes multi-node consolidation considers at most", ge=0),
        "validation_s": duration("seconds a consolidation command waits before it is re-validated and executed"),
        "unavailable_ttl_s": duration("seconds an offering that answered with an insufficient-capacity error "
                                      "stays in the unavailable-offerings cache (0: never cached)"),
        "registration_ttl_s": number("seconds a node may boot before its NodeClaim is deleted as never "
                                     "registered", gt=0),
        "topology_aware": flag("read DRA-style claims (NVLink/NUMA/NIC)"),
        "sharing_aware": flag("pack GPU shares per device instead of whole GPUs"),
        "dra_aware": flag("in a DRA cluster, simulate pods' ResourceClaims as the scheduler allocates them "
                          "(upstream's default; false: pre-DRA, device needs as extended resources and node "
                          "selectors)"),
    }

    def __init__(self, batch_idle_s: float = 1.0, batch_max_s: float = 10.0, requeue_s: float = 10.0,
                 poll_s: float = 10.0, consolidate_underutilized: bool = True,
                 consolidate_after_s: float = 0.0, budget_nodes: float = 0.1, max_candidates: int = 100,
                 validation_s: float = 15.0, unavailable_ttl_s: float = 180.0, registration_ttl_s: float = 900.0,
                 topology_aware: bool = False, sharing_aware: bool = False, dra_aware: bool = True):
        check(self, "loop.autoscaler", batch_idle_s=batch_idle_s,
              batch_max_s=batch_max_s, requeue_s=requeue_s, poll_s=poll_s,
              consolidate_underutilized=consolidate_underutilized, consolidate_after_s=consolidate_after_s,
              budget_nodes=budget_nodes, max_candidates=max_candidates, validation_s=validation_s,
              unavailable_ttl_s=unavailable_ttl_s, registration_ttl_s=registration_ttl_s,
              topology_aware=topology_aware, sharing_aware=sharing_aware, dra_aware=dra_aware)
        self.dra_aware = bool(dra_aware)
        self.batch_idle_s, self.batch_max_s, self.requeue_s = float(batch_idle_s), float(batch_max_s), float(requeue_s)
        self.poll_s = float(poll_s)
        self.underutilized = bool(consolidate_underutilized)
        self.consolidate_after_s = float(consolidate_after_s)
        self.budget_nodes = float(budget_nodes)
        self.max_candidates = int(max_candidates)
        self.validation_s = float(validation_s)
        self.unavailable_ttl_s, self.registration_ttl_s = float(unavailable_ttl_s), float(registration_ttl_s)
        self.topology_aware, self.sharing_aware = bool(topology_aware), bool(sharing_aware)
        self.nomination_s = 2 * self.batch_max_s  # Karpenter's nomination window

    def describe(self) -> Description:
        """The separate loops with Karpenter, after the ablation's family."""
        on = [(self.topology_aware, TOPOLOGY), (self.sharing_aware, SHARING), (not self.dra_aware, PRE_DRA)]
        switches = tuple(s for flag, s in on if flag)
        return Description("separate loops with KarpenterAutoscaler", rank=1, switches=switches)

    def attach(self, sim: SimulationView, scheduler: Scheduler) -> None:
        self.sim, self.scheduler = sim, scheduler
        self.view = view_of(sim.w, self.topology_aware, self.sharing_aware, self.dra_aware)
        self.view_class = equivalence_classes(self.view)
        self.offerings = Offerings(sim, self.unavailable_ttl_s)
        # a node not initialized yet has its instance type's devices as the cloud provider's
        # ResourceSliceTemplates say, never learned from the nodes (harness/autoscalers/node_templates.py)
        self.templates = NodeTemplates(sim, from_nodes=False)
        self.scratch = ScratchState(sim.state)  # the copy its what-ifs pack on, and its consolidation's
        self.nominated_until = np.full(sim.state.n_slots, -np.inf)
        self.nominated = np.zeros(0, np.int64)  # the nodes the last batch nominated
        self.consolidation = Consolidation(
            sim, scheduler, self.view, self.view_class, self.offerings, self.nominated_until, self.nomination_s,
            self._pending, self.underutilized, self.consolidate_after_s, self.budget_nodes, self.max_candidates,
            self.validation_s, self.sharing_aware, self.templates, self.scratch)
        self.window_start: float | None = None
        self.last_trigger = -np.inf
        self.seen_version = -1
        self.polls = Cadence(self.poll_s, grid=False)  # its quiet key: `_situation` after a poll that did nothing
        self.timeout = ProvisionTimeout(self.registration_ttl_s, sim)  # liveness' registration TTL
        self.nominated_version = 0  # bumps when a batch nominates nodes anew
        self.poll_clocks: list[Clock] = []  # what could change the candidates of a poll that did nothing
        self.nominated_free = np.zeros(0, bool)  # ... and, per nominated node, not nominated then
        self.idle_key: tuple | None = None  # situation in which the last batch launched nothing

    # ---- cadence: the loop reads next_scan at every instant, so pending pods are seen at once --
    @property
    def next_scan(self) -> float:
        self._observe(self.sim.now)
        validating = self.consolidation.validating
        t = self.polls.due(self.sim.now) if validating is None else validating[0]  # polls wait for the validation
        if self.window_start is not None:
            t = min(t, self._window_close())
        elif self.sim.queue:
            t = min(t, self.last_trigger + self.requeue_s)
        if self.consolidation.replacement_ready():
            t = self.sim.now  # disrupt now
        return min(t, self.timeout.deadline())

    def _observe(self, now: float) -> None:
        """A new pending pod, or pods still pending a requeue period later, trigger the batcher."""
        sim = self.sim
        if sim.queue and (sim.queue.version != self.seen_version or now >= self.last_trigger + self.requeue_s):
            if self.window_start is None:
                self.window_start = now
            self.last_trigger = now
        self.seen_version = sim.queue.version

    def _window_close(self) -> float:
        assert self.window_start is not None, "a batch window is open"
        return min(self.window_start + self.batch_max_s, self.last_trigger + self.batch_idle_s)

    def scan(self, now: float) -> None:
        self.timeout.give_up(now, self._unbind_all)  # liveness: no offering is marked unavailable for it
        self._observe(now)
        if self.window_start is not None and now >= self._window_close():
            self.window_start = None
            self._provision(now)
        consolidation = self.consolidation
        consolidation.finish_command()
        if consolidation.validating is not None and now >= consolidation.validating[0]:
            # Karpenter's controller requeues at once after a command it executed, else after a period
            if consolidation.validate(now):
                self.polls.next = now
            else:
                self.polls.ran(now)
        if consolidation.validating is None and now >= self.polls.next:
            self.polls.ran(now)
            acted = consolidation.poll(now)
            quiet = not acted and consolidation.command is None
            self.polls.rest(self._situation() if quiet else None)
            if quiet:
                self._remember_poll(now)

    def _remember_poll(self, now: float) -> None:
        """What could give a later poll other candidates than this one, nothing else changing:
        a node's nomination running out (the nominated nodes apart: batches renew them; see
        `_renewals_agree`) or a node becoming quiet for consolidateAfter."""
        until = self.nominated_until
        free = until <= now
        renewed = np.zeros(len(until), bool)
        renewed[self.nominated] = True
        self.nominated_free = free[self.nominated]
        held = until[~free & ~renewed]
        self.poll_clocks = [(held.min(), 0.0)] if len(held) else []
        self.poll_clocks += self.consolidation.clocks(now)

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        """The wake-ups from the next one (`start`) on, before `before`, that would provably do
        nothing but keep the cadence: polls that would find what the last one found (no node,
        arrival, booking or nomination changed since it, no clock of `_remember_poll` runs out:
        the same candidates) and, while pods stay pending, the batches they re-trigger every
        `requeue_s`, each launching nothing (as the last one did) and renewing the nominations.
        The cadence moves past them."""
        sim = self.sim
        if not self.polls.quiet(self._situation()) or self.window_start is not None:
            return NO_TICKS
        pending = bool(sim.queue)
        if pending and (self.idle_key != self._batch_key(sim.now)
                        or not min(self.batch_max_s, self.batch_idle_s) < self.requeue_s):
            return NO_TICKS  # a batch would pack the pods again, or windows would overlap
        if pending and len(self.nominated) and self.nomination_s <= self.requeue_s:
            return NO_TICKS  # nominations lapse between batches: polls see nodes come and go
        end = min(before, ends(self.poll_clocks) + self.poll_s, self._next_expiry())
        polls = self.polls.scans(self.polls.next, end)
        triggers = every(self.last_trigger + self.requeue_s, self.requeue_s, end) if pending else NO_TICKS
        for made in (polls, triggers):
            if len(made) == MAX_TICKS:  # cut short: none past its last
                end = min(end, made[-1])
        polls = polls[polls < end]
        closes = np.minimum(triggers + self.batch_max_s, triggers + self.batch_idle_s)  # `_window_close`
        quiet = min(still_quiet(polls, self.poll_clocks), leading(self._renewals_agree(polls, closes)))
        if quiet < len(polls):
            end = polls[quiet]
        polls, triggers, closes = polls[polls < end], triggers[triggers < end], closes[closes < end]
        self.polls.passed(polls)
        if len(triggers):
            self.last_trigger = triggers[-1]
            self.window_start = triggers[-1] if len(closes) < len(triggers) else None
        if len(closes):
            self.nominated_until[self.nominated] = closes[-1] + self.nomination_s
        return np.unique(np.concatenate((polls, triggers, closes)))

    def _next_expiry(self) -> float:
        """The next instant a clock of the provider's answers runs out: a node reaching its
        registration TTL, or an offering leaving the unavailable cache (both are deadlines: at
        that instant the loop already acts otherwise)."""
        return min(self.timeout.deadline(), self.offerings.next_return())

    def _renewals_agree(self, polls: np.ndarray, closes: np.ndarray) -> np.ndarray:
        """At each poll, whether every nominated node reads nominated or not as at the last
        poll, its nomination renewed at each batch close (a poll at a close's instant sees it)."""
        until, was_free = self.nominated_until[self.nominated], self.nominated_free
        ok = _agree(polls, until, was_free)
        if not len(closes) or not len(until):
            return ok
        last = np.searchsorted(closes, polls, side="right") - 1  # the last close by each poll
        first = last < 0
        free = closes[np.maximum(last, 0)] + self.nomination_s <= polls  # one value for them all
        if was_free.all():
            return first & ok | ~first & free
        if not was_free.any():
            return first & ok | ~first & ~free
        return first & ok

    def _situation(self) -> tuple[int, int, int, int]:
        """What a poll's outcome depends on, but for time: nodes, arrivals, bookings and the
        nominated nodes."""
        return self.sim.state.mutations, self.sim.queue.version, self.scheduler.bookings, self.nominated_version

    # ---- provisioning --------------------------------------------------------------------
    def _order(self, pods: np.ndarray) -> np.ndarray:
        """Karpenter's queue order of these pods (`queue_order`, in its view)."""
        return queue_order(self.view, pods)

    def _pending(self) -> np.ndarray:
        sim = self.sim
        pods = sim.w.pods_of(sim.queue.jobs())
        return pods[sim.pod_status[pods] == PENDING]

    def _unbind_all(self, n: int) -> None:
        """Node n's NodeClaim is deleted (liveness): the pods planned on it return to pending and
        are packed again."""
        for pod in self.sim.pods_on(n):
            self.sim.unbind(pod)

    def _batch_key(self, now: float) -> tuple:
        """What a batch's outcome depends on: nodes, arrivals and the offerings available."""
        return self.sim.state.mutations, self.sim.queue.version, self.offerings.offered(now).tobytes()

    def _provision(self, now: float) -> None:
        st = self.sim.state
        if self._batch_key(now) == self.idle_key:  # same situation as a batch that launched nothing
            self.nominated_until[self.nominated] = now + self.nomination_s
            return
        pods = self._pending()
        if not len(pods):
            return
        pods = pods[self._order(pods)]
        usable = self.scheduler.booked_for == -1
        sim_ = WhatIf(Snapshot(st, devices=self.templates.slot_devices(), scratch=self.scratch), self.view,
                      [(st.status == READY) & usable, (st.status == BOOTING) & usable], self.offerings.spare())
        where = sim_.place_all(pods, self.view_class)
        remaining, committed = self.offerings.supply()
        launched: list[int] = []
        for c in range(sim_.n_claims):  # a claim's launch falls back to its next offering on an error
            types, allowed = sim_.claim_types(c), sim_.claim_pools[c]
            pool = self.offerings.cheapest(types, allowed, remaining, committed)
            while pool >= 0:
                slot = self.offerings.launch(pool, now, pods)
                if slot >= 0:
                    if self.sim.noting:
                        self.sim.note(Event.OPTION, f"nodeclaim {c}: the cheapest compatible offering, "
                                                    f"pool={self.sim.cluster.pools[pool].name} chosen")
                    launched.append(slot)
                    remaining[pool] -= 1
                    committed[pool] -= 1
                    break
                remaining[pool] = 0
                pool = self.offerings.cheapest(types, allowed, remaining, committed)
        self.nominated = np.unique(np.r_[where[where >= 0], np.asarray(launched, np.int64)]).astype(np.int64)
        self.nominated_version += 1
        self.nominated_until[self.nominated] = now + self.nomination_s
        self.idle_key = None if launched else self._batch_key(now)
