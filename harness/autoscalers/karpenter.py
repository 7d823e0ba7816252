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

Consolidation (`WhenEmptyOrUnderutilized`), every `poll_s` (10 s), over ready nodes whose pods
have not changed for `consolidate_after_s` (0 s, the v1 default; a change counts from the poll
or validation that sees it) and may all be evicted (a gang member may not, as if a
PodDisruptionBudget protected it), cheapest to disrupt first (the sum of their pods' eviction
costs, 1 + priority / 2^25 each, clamped to [-10, 10]; ties by slot), at most
ceil(`budget_nodes` x the nodes) minus the nodes booting or being deleted at once, one command
per poll, in Karpenter's order:
  1. empty nodes are deleted;
  2. multi-node: the longest prefix (2 or more) of the candidates, fewest pods first (at most
     `max_candidates`), whose pods fit the other nodes plus at most one new node cheaper than
     the whole prefix;
  3. single-node: the first candidate whose pods fit the other nodes (deleted), or those plus
     one new node cheaper than it (replaced).
As Karpenter, the what-if packs the pending pods together with the moved ones, and a moved pod
may not count on a node still booting. A command is re-validated `validation_s` (15 s,
`consolidationTTL`) after it was computed, polls waiting meanwhile: it is dropped unless every
node is still a candidate (so not nominated meanwhile), the budget still allows them all, the
emptiness command's nodes are still empty and, for the others, the what-if run again still
deletes them (or still needs one cheaper node); executed, the next poll follows at once, as
Karpenter's controller requeues. A replacement is launched first; the nodes it replaces
are tainted (no new pods) and deleted, their pods evicted to restart elsewhere, the instant it is
ready (a replacement refused by the provider drops the command and caches its offering).
Removing a committed node saves nothing, so only empty ones are deleted. `WhenEmpty`
(`consolidate_underutilized` false, from the global `consolidation`) stops after step 1.

Its view of a pod: Karpenter counts resources, so by default it ignores DRA-style topology
claims (NVLink, NUMA, NIC) and rounds a GPU share up to a whole device; `topology_aware` and
`sharing_aware` turn each on (the view of `harness.whatif.view_of`). No gang awareness: pod
by pod. Defaults are Karpenter's documented ones (settings BATCH_IDLE_DURATION,
BATCH_MAX_DURATION; NodePool disruption defaults).
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np

from harness.filters import devices_taken, feasible, fits_on
from harness.loops.base import SHARING, TOPOLOGY, Description, SimulationView
from harness.quiet import MAX_TICKS, NO_TICKS, Clock, ends, every, leading, still_quiet
from harness.scheduler import Scheduler
from harness.settings import check, duration, flag, fraction, integer, number, period
from harness.state import WHOLE
from harness.status import ABSENT, BOOTING, PENDING, READY
from harness.whatif import Snapshot, classes, equivalence_classes, view_of
from harness.workload import Workload

TAINT = -2  # `scheduler.booked_for` of a node being disrupted: usable by no job


def _agree(polls: np.ndarray, until: np.ndarray, was_free: np.ndarray) -> np.ndarray:
    """At each poll, whether every node's nomination (`until`) reads as it did (`was_free`:
    not nominated) then."""
    ok = np.ones(len(polls), bool)
    if was_free.any():
        ok &= polls >= until[was_free].max()
    if not was_free.all():
        ok &= polls < until[~was_free].min()
    return ok


class WhatIf:
    """Karpenter's scheduling simulation on a what-if snapshot (of every slot). A pod goes to
    the first node of the first tier (masks of existing nodes) with room (the snapshot's
    first-fit packer), else to the first claim still holding it, else opens a claim. A claim is
    one shadow node per node type (in a spare slot of a pool of that type); a pod joining it
    drops the shadows it does not fit."""

    def __init__(self, snap: Snapshot, view: Workload, tiers: list[np.ndarray], spare: np.ndarray):
        self.snap, self.st, self.w, self.tiers = snap, snap.state, view, tiers
        self.spare = spare.copy()
        self.claim_of = np.full(self.st.n_slots, -1, np.int64)
        self.n_claims = 0
        self.claim_pools: list[np.ndarray] = []  # per claim, the pools all its pods may use
        self.first_tier: dict[int, int] = {}  # shape -> tiers it already failed (tiers only fill up)
        self.hopeless: set[int] = set()  # shapes that fit nowhere, not even a new claim

    def place_run(self, pods: np.ndarray, max_claims: float = np.inf) -> np.ndarray:
        """Where each of these pods, identical in the view, goes when placed one after another:
        an existing node (>= 0), claim c (-2 - c), or -1 if it found no place. Each tier and
        each claim takes its share of the run in one vector step with exact per-node counts
        (`Snapshot.fit_alike`, `fits_on`), as pod-by-pod placement would."""
        st, w = self.st, self.w
        p, k = int(pods[0]), len(pods)
        shape = int(w.shape[p])
        out = np.full(k, -1, np.int64)
        if shape in self.hopeless:
            return out
        done = 0
        for i in range(self.first_tier.get(shape, 0), len(self.tiers)):
            went = self.snap.fit_alike(w, p, k - done, usable=self.tiers[i])
            out[done:done + len(went)] = went
            done += len(went)
            if done == k:
                return out
            self.first_tier[shape] = i + 1
        while done < k:
            shadows = self.claim_of >= 0
            fit = feasible(st, w, p, shadows) if shadows.any() else shadows
            if not fit.any():  # no claim holds it: open one, if allowed and some type fits
                if self.n_claims >= max_claims or not self._open_claim(p):
                    return out
                continue
            c = int(self.claim_of[fit].min())
            self.claim_pools[c] &= st.pool_allowed[w.placement[p]]
            mine = self.claim_of == c
            self.claim_of[mine & ~fit] = -1  # types that cannot also hold this pod
            nodes = np.flatnonzero(mine & fit)
            can = fits_on(st, w, p, nodes)
            take = int(min(k - done, can.max()))  # the claim takes pods while a shadow has room
            got = np.minimum(can, take)
            st.bind_many(nodes, got, int(w.cpu[p]), int(w.mem[p]), devices_taken(st, w, p, nodes, got))
            self.claim_of[nodes[can < take]] = -1  # shadows that could not take them all
            out[done:done + take] = -2 - c
            done += take
        return out

    def _open_claim(self, p: int) -> bool:
        """A new claim: one spare slot of each node type that can hold pod p, of the pools it
        may use (none: the pod's shape is hopeless)."""
        st = self.st
        placement = int(self.w.placement[p])
        idx = np.flatnonzero(self.spare & st.allowed[placement] if placement else self.spare)
        _, first = np.unique(st.slot_type[idx], return_index=True)
        new = idx[first]  # one spare slot per node type
        for n in new.tolist():
            st.add_node(n, ready=True)
        mask = np.zeros(st.n_slots, bool)
        mask[new] = True
        fit = feasible(st, self.w, p, mask)[new]
        for n in new[~fit].tolist():
            st.remove_node(n)
        if not fit.any():
            self.hopeless.add(int(self.w.shape[p]))
            return False
        kept = new[fit]
        self.spare[kept] = False
        self.claim_of[kept] = self.n_claims
        self.claim_pools.append(st.pool_allowed[placement].copy())
        self.n_claims += 1
        return True

    def claim_types(self, c: int) -> np.ndarray:
        return np.unique(self.st.slot_type[self.claim_of == c])

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
    }

    def __init__(self, batch_idle_s: float = 1.0, batch_max_s: float = 10.0, requeue_s: float = 10.0,
                 poll_s: float = 10.0, consolidate_underutilized: bool = True,
                 consolidate_after_s: float = 0.0, budget_nodes: float = 0.1, max_candidates: int = 100,
                 validation_s: float = 15.0, unavailable_ttl_s: float = 180.0, registration_ttl_s: float = 900.0,
                 topology_aware: bool = False, sharing_aware: bool = False):
        check(self, "loop.autoscaler", batch_idle_s=batch_idle_s,
              batch_max_s=batch_max_s, requeue_s=requeue_s, poll_s=poll_s,
              consolidate_underutilized=consolidate_underutilized, consolidate_after_s=consolidate_after_s,
              budget_nodes=budget_nodes, max_candidates=max_candidates, validation_s=validation_s,
              unavailable_ttl_s=unavailable_ttl_s, registration_ttl_s=registration_ttl_s,
              topology_aware=topology_aware, sharing_aware=sharing_aware)
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
        on = [(self.topology_aware, TOPOLOGY), (self.sharing_aware, SHARING)]
        switches = tuple(s for flag, s in on if flag)
        return Description("separate loops with KarpenterAutoscaler", rank=1, switches=switches)

    def attach(self, sim: SimulationView, scheduler: Scheduler) -> None:
        self.sim, self.scheduler = sim, scheduler
        self.view = view_of(sim.w, self.topology_aware, self.sharing_aware)
        self.view_class = equivalence_classes(self.view)
        w = sim.w  # Karpenter's EvictionCost per pod: 1 + priority / 2^25, clamped to [-10, 10]
        self.eviction_cost = np.clip(1.0 + w.job_priority[w.job].astype(np.float64) / 2.0**25, -10.0, 10.0)
        self.unit_costs = bool((self.eviction_cost == 1.0).all())
        cl, st = sim.cluster, sim.state
        self.pool_type = np.array([cl.type_index(p.node_type) for p in cl.pools], np.int64)
        self.pool_price = np.array([p.price for p in cl.pools], np.float64)
        self.min_size = np.array([p.min_size for p in cl.pools], np.int64)
        self.max_size = np.array([p.max_size for p in cl.pools], np.int64)  # the NodePool's limit per offering
        self.unavailable_until = np.full(len(cl.pools), -np.inf)  # the unavailable-offerings cache
        self.node_price = np.where(st.slot_committed, 0.0, self.pool_price[st.slot_pool])
        self.nominated_until = np.full(st.n_slots, -np.inf)
        self.nominated = np.zeros(0, np.int64)
        self.last_change = np.zeros(st.n_slots)
        self.seen: tuple[np.ndarray, ...] | None = None  # per-node (pods, cpu, GPU milli, status) at the last poll
        self.window_start: float | None = None
        self.last_trigger = -np.inf
        self.seen_version = -1
        self.next_poll = 0.0
        self.nominated_version = 0  # bumps when a batch nominates nodes anew
        self.quiet_key: tuple | None = None  # `_situation` after a poll that did nothing
        self.poll_clocks: list[Clock] = []  # ... and what could change its candidates meanwhile
        self.nominated_free = np.zeros(0, bool)  # ... and, per nominated node, not nominated then
        self.command: tuple[int, int, np.ndarray] | None = None  # replacement slot, its instance, replaced
        self.validating: tuple[float, np.ndarray, int, bool] | None = None  # at, candidates, pool or -1, emptiness
        self.idle_key: tuple | None = None  # situation in which the last batch launched nothing
        self.spare_key: tuple | None = None  # layout version and offerings of `spare`
        self.consolidation_idle_key: tuple | None = None  # ... and the last poll found no action

    # ---- cadence: the loop reads next_scan at every instant, so pending pods are seen at once --
    @property
    def next_scan(self) -> float:
        self._observe(self.sim.now)
        t = self.next_poll if self.validating is None else self.validating[0]  # polls wait for the validation
        if self.window_start is not None:
            t = min(t, self._window_close())
        elif self.sim.queue:
            t = min(t, self.last_trigger + self.requeue_s)
        if self.command is not None and self.sim.state.status[self.command[0]] == READY:
            t = self.sim.now  # the replacement is ready: disrupt now
        return min(t, self._registration_deadline())

    def _observe(self, now: float) -> None:
        """A new pending pod, or pods still pending a requeue period later, trigger the batcher."""
        sim = self.sim
        if sim.queue and (sim.arrived_version != self.seen_version or now >= self.last_trigger + self.requeue_s):
            if self.window_start is None:
                self.window_start = now
            self.last_trigger = now
        self.seen_version = sim.arrived_version

    def _window_close(self) -> float:
        assert self.window_start is not None, "a batch window is open"
        return min(self.window_start + self.batch_max_s, self.last_trigger + self.batch_idle_s)

    def scan(self, now: float) -> None:
        self._liveness(now)
        self._observe(now)
        if self.window_start is not None and now >= self._window_close():
            self.window_start = None
            self._provision(now)
        if self.command is not None:
            self._finish_command()
        if self.validating is not None and now >= self.validating[0]:
            # Karpenter's controller requeues at once after a command it executed, else after a period
            self.next_poll = now if self._validate(now) else now + self.poll_s
        if self.validating is None and now >= self.next_poll:
            self.next_poll = now + self.poll_s
            acted = self._consolidate(now)
            self.quiet_key = None if acted or self.command is not None else self._situation()
            if self.quiet_key is not None:
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
        waiting = ~(now - self.last_change >= self.consolidate_after_s)
        if waiting.any():  # the one changed the longest ago becomes quiet first
            self.poll_clocks.append((self.last_change[waiting].min(), self.consolidate_after_s))

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        """The wake-ups from the next one (`start`) on, before `before`, that would provably do
        nothing but keep the cadence: polls that would find what the last one found (no node,
        arrival, booking or nomination changed since it, no clock of `_remember_poll` runs out:
        the same candidates) and, while pods stay pending, the batches they re-trigger every
        `requeue_s`, each launching nothing (as the last one did) and renewing the nominations.
        The cadence moves past them."""
        sim = self.sim
        if self.quiet_key != self._situation() or self.window_start is not None:
            return NO_TICKS
        pending = bool(sim.queue)
        if pending and (self.idle_key != self._batch_key(sim.now)
                        or not min(self.batch_max_s, self.batch_idle_s) < self.requeue_s):
            return NO_TICKS  # a batch would pack the pods again, or windows would overlap
        if pending and len(self.nominated) and self.nomination_s <= self.requeue_s:
            return NO_TICKS  # nominations lapse between batches: polls see nodes come and go
        end = min(before, ends(self.poll_clocks) + self.poll_s, self._next_expiry())
        polls = every(self.next_poll, self.poll_s, end)  # as now + poll_s does
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
        if len(polls):
            self.next_poll = polls[-1] + self.poll_s
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
        until = self.unavailable_until[self.unavailable_until > self.sim.now]
        return min(self._registration_deadline(), until.min() if len(until) else np.inf)

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
        return self.sim.state.mutations, self.sim.arrived_version, self.scheduler.bookings, self.nominated_version

    # ---- shared helpers ------------------------------------------------------------------
    def _order(self, pods: np.ndarray) -> np.ndarray:
        """Karpenter's queue (`byCPUAndMemoryDescending`): CPU, then memory, largest first, then
        the older pod (creation time: its submit time), then the pod's UID (its index). No GPU key."""
        w = self.view
        return np.lexsort((pods, w.submit[pods], -w.mem[pods], -w.cpu[pods]))

    def _place_all(self, what_if: WhatIf, pods: np.ndarray, max_claims: float = np.inf) -> np.ndarray:
        """`WhatIf.place_run` over the ordered pods, a run of pods identical in the view at a
        time. Returns where each pod went."""
        if len(pods) == 0:
            return np.zeros(0, np.int64)
        cls = classes(self.view_class, self.view, pods)
        bounds = np.r_[0, np.flatnonzero(cls[1:] != cls[:-1]) + 1, len(pods)].tolist()
        return np.concatenate([what_if.place_run(pods[a:b], max_claims) for a, b in pairwise(bounds)])

    def _pending(self) -> np.ndarray:
        sim = self.sim
        pods = sim.w.pods_of(sim.queued_jobs())
        return pods[sim.pod_status[pods] == PENDING]

    def _spare(self) -> np.ndarray:
        """Absent slots a claim may use: as many per offering as the NodePool's limit still
        allows (`_room`), none of an offering in the unavailable cache. Kept per layout and
        set of offerings."""
        st = self.sim.state
        offered = self._offered(self.sim.now)
        key = (st.layout_version, offered.tobytes())
        if self.spare_key != key:
            cloud, room = self.sim.cloud, self._room()
            self.spare = np.zeros(st.n_slots, bool)
            for p in np.flatnonzero(offered).tolist():
                self.spare[cloud.free_slots(p)[:room[p]]] = True
            self.spare_key = key
        return self.spare

    def _room(self) -> np.ndarray:
        """Per offering, the nodes the NodePool's limit (max_size) still allows: what Karpenter
        knows before asking; never the provider's stock."""
        st = self.sim.state
        present = np.bincount(st.slot_pool[st.status != ABSENT], minlength=len(self.max_size))
        return np.maximum(self.max_size - present, 0)

    def _offered(self, now: float) -> np.ndarray:
        """Offerings not in the unavailable-offerings cache at `now`."""
        return now >= self.unavailable_until

    def _supply(self) -> tuple[np.ndarray, np.ndarray]:
        """Per offering, the nodes it may still be asked for (0 while cached unavailable) and
        its free committed slots."""
        cloud, n = self.sim.cloud, len(self.pool_type)
        return (np.where(self._offered(self.sim.now), self._room(), 0),
                np.array([cloud.free_committed(p) for p in range(n)], np.int64))

    def _launch(self, pool: int, now: float) -> int:
        """Ask for one node of this offering (a NodeClaim's launch): its slot, or -1 when the
        provider answers with an insufficient-capacity error, which puts the offering in the
        unavailable cache for `unavailable_ttl_s`."""
        slots = self.sim.provision(pool, 1, atomic=False)
        if not len(slots):
            self.unavailable_until[pool] = now + self.unavailable_ttl_s
            return -1
        return int(slots[0])

    def _registration_deadline(self) -> float:
        """When the first node still booting reaches its registration TTL (inf: none boots)."""
        booting = self.sim.state.status == BOOTING
        return float(self.sim.node_requested_at[booting].min()) + self.registration_ttl_s if booting.any() else np.inf

    def _liveness(self, now: float) -> None:
        """Karpenter's liveness check: a NodeClaim whose node has not registered (still
        booting) `registration_ttl_s` after it was asked for is deleted; pods planned on it
        return to pending and are packed again. As upstream, no offering is marked unavailable
        for it (only launch errors fill that cache)."""
        st, sim = self.sim.state, self.sim
        # the deadline's own sum (`_registration_deadline`): `now - requested_at` can round a hair
        # under the TTL at that instant, and the loop would wake up there forever
        late = np.flatnonzero((st.status == BOOTING) & (sim.node_requested_at + self.registration_ttl_s <= now))
        for n in late.tolist():  # per late node, inherently: each is deleted, its pods re-queued
            for pod in sim.pods_on(n):
                sim.unbind(pod)
            sim.remove_node(n)

    def _offering(self, types: np.ndarray, allowed: np.ndarray, remaining: np.ndarray, committed: np.ndarray,
                  below: float = np.inf) -> int:
        """Cheapest pool of these node types, among the `allowed` ones, that can still supply a
        node (committed slot = 0), priced under `below`; -1 if none."""
        price = np.where(committed > 0, 0.0, self.pool_price)
        ok = np.isin(self.pool_type, types) & allowed & (remaining > 0) & (price < below)
        if not ok.any():
            return -1
        idx = np.flatnonzero(ok)
        return int(idx[np.argmin(price[idx])])

    # ---- provisioning --------------------------------------------------------------------
    def _batch_key(self, now: float) -> tuple:
        """What a batch's outcome depends on: nodes, arrivals and the offerings available."""
        return self.sim.state.mutations, self.sim.arrived_version, self._offered(now).tobytes()

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
        sim_ = WhatIf(Snapshot(st), self.view, [(st.status == READY) & usable, (st.status == BOOTING) & usable],
                      self._spare())
        where = self._place_all(sim_, pods)
        remaining, committed = self._supply()
        launched: list[int] = []
        for c in range(sim_.n_claims):  # a claim's launch falls back to its next offering on an error
            types, allowed = sim_.claim_types(c), sim_.claim_pools[c]
            pool = self._offering(types, allowed, remaining, committed)
            while pool >= 0:
                slot = self._launch(pool, now)
                if slot >= 0:
                    launched.append(slot)
                    remaining[pool] -= 1
                    committed[pool] -= 1
                    break
                remaining[pool] = 0
                pool = self._offering(types, allowed, remaining, committed)
        self.nominated = np.unique(np.r_[where[where >= 0], np.asarray(launched, np.int64)]).astype(np.int64)
        self.nominated_version += 1
        self.nominated_until[self.nominated] = now + self.nomination_s
        self.idle_key = None if launched else self._batch_key(now)

    # ---- consolidation -------------------------------------------------------------------
    def _note_changes(self, now: float) -> None:
        """Nodes whose pods changed since the last look count as changed now (consolidateAfter)."""
        st = self.sim.state
        snap = (st.pods_on.copy(), st.cpu_free.copy(), st.gpu_used.copy(), st.status.copy())
        if self.seen is not None:
            changed = np.zeros(st.n_slots, bool)
            for old, new in zip(self.seen, snap, strict=True):
                changed |= old != new
            self.last_change[changed] = now
        self.seen = snap

    def _budget(self) -> int:
        """Karpenter's allowed disruptions: ceil(budget x the NodePool's nodes), less the nodes
        not ready (booting) or being deleted (tainted)."""
        st = self.sim.state
        present = st.status != ABSENT
        disrupting = (st.status == BOOTING) | (present & (self.scheduler.booked_for == TAINT))
        return math.ceil(self.budget_nodes * int(present.sum())) - int(disrupting.sum())

    def _consolidate(self, now: float) -> bool:
        """One disruption poll; returns whether it acted (computed a command, to be validated
        `validation_s` later)."""
        st = self.sim.state
        self._note_changes(now)
        if self.command is not None:
            return False  # one disruption at a time: wait for the replacement
        budget = self._budget()
        if budget <= 0:
            return False
        cands = self._candidates(now)
        if not len(cands):
            return False
        key = (st.mutations, cands.tobytes(), budget, self._offered(now).tobytes())
        if key == self.consolidation_idle_key:
            return False
        empty = cands[st.pods_on[cands] == 0]
        command = (empty[:budget], -1) if len(empty) else None  # emptiness first
        if command is None and self.underutilized:
            busy = cands[self.node_price[cands] > 0]  # removing a committed node saves nothing
            pending = self._pending()
            command = self._multi(busy[:min(budget, self.max_candidates)], pending) or self._single(busy, pending)
        if command is None:
            self.consolidation_idle_key = key
            return False
        self.validating = (now + self.validation_s, *command, bool(len(empty)))
        if self.validation_s == 0:
            self._validate(now)
        return True

    def _validate(self, now: float) -> bool:
        """Karpenter's validation, `validation_s` after the command was computed: every
        candidate is still one (ready, untainted, not nominated, no gang member, ...) and the
        budget still allows them all; an emptiness command's nodes are still empty; otherwise
        the what-if, run again, still deletes them (no new node) or still needs exactly one
        new node cheaper than them. Then the command is executed; else it is dropped. Returns
        whether it was executed."""
        assert self.validating is not None
        _, cands, pool, emptiness = self.validating
        self.validating = None
        st = self.sim.state
        self._note_changes(now)
        if len(cands) > self._budget():
            return False
        if not np.isin(cands, self._candidates(now)).all():
            return False
        if emptiness and (st.pods_on[cands] > 0).any():
            return False  # pod churn: an emptiness candidate is empty no more
        if not emptiness:
            ok, again = self._option(cands, self._pending())
            if not ok or (again < 0) != (pool < 0):
                return False
        self._execute(cands, pool)
        return True

    def _candidates(self, now: float) -> np.ndarray:
        """Disruptable nodes, cheapest to disrupt first (Karpenter's `sortCandidates`: the sum
        of its pods' eviction costs, 1 + priority / 2^25 each, clamped to [-10, 10]; no
        expireAfter, so the lifetime factor is 1; ties by slot): ready, not tainted or
        nominated, quiet for consolidate_after_s, no gang member on them, pools kept at
        min_size; at most max_candidates non-empty ones.

        In that order a node is skipped if it holds a gang member, or if its pool already gave
        up all the nodes it may lose (present - min_size): the k-th gang-free node of a pool is
        a candidate iff k < its room. The shortlist stops before the first busy candidate
        beyond max_candidates. All in vector steps (per-pool rank by a stable argsort, the cap
        by a cumulative count), as the one-node-at-a-time walk it replaces."""
        sim, st = self.sim, self.sim.state
        ok = ((st.status == READY) & (self.scheduler.booked_for == -1) & (self.nominated_until <= now)
              & (now - self.last_change >= self.consolidate_after_s))
        idx = np.flatnonzero(ok)
        if not len(idx):
            return idx
        idx = idx[np.lexsort((idx, self._disruption_cost(idx)))]
        busy = st.pods_on[idx] > 0
        free = sim.gang_pods_on[idx] == 0  # a gang member may not be evicted (as under a PDB)
        idx, busy = idx[free], busy[free]
        pool = st.slot_pool[idx]
        room = np.bincount(st.slot_pool[st.status != ABSENT], minlength=len(self.min_size)) - self.min_size
        by_pool = np.argsort(pool, kind="stable")
        rank = np.empty(len(idx), np.int64)
        rank[by_pool] = np.arange(len(idx)) - np.searchsorted(pool[by_pool], pool[by_pool])
        kept = rank < room[pool]
        idx, busy = idx[kept], busy[kept]
        over = np.flatnonzero(busy & (np.cumsum(busy) > self.max_candidates))
        if len(over):
            idx = idx[:over[0]]
        return idx.astype(np.int64, copy=False)

    def _disruption_cost(self, nodes: np.ndarray) -> np.ndarray:
        """Karpenter's disruption cost of these nodes: their pods' summed eviction costs (the
        pod count when every pod costs 1)."""
        st = self.sim.state
        if self.unit_costs:
            return st.pods_on[nodes].astype(np.float64)
        on = np.flatnonzero(self.sim.pod_node >= 0)
        cost = np.bincount(self.sim.pod_node[on], weights=self.eviction_cost[on], minlength=st.n_slots)
        return cost[nodes]

    def _option(self, cands: np.ndarray, pending: np.ndarray) -> tuple[bool, int]:
        """Can the candidates' pods go to the other nodes plus at most one new node cheaper than
        them? As Karpenter, pending pods are packed with them (largest first) and take their
        share; a candidate's pod may not count on a node still booting. Returns (possible,
        replacement pool or -1)."""
        sim, st, w = self.sim, self.sim.state, self.sim.w
        snap = Snapshot(st)
        moved = []
        # Per pod, inherently: these are the pods that would move, each released from its own
        # devices; their order (each node's in turn) breaks ties in the what-if's stable sort.
        for n in cands:
            for p in sim.node_pods[n]:
                snap.state.release(int(n), int(w.cpu[p]), int(w.mem[p]), sim.pod_gpus[p], int(w.milli[p]))
                moved.append(p)
        keep = self.scheduler.booked_for == -1
        keep[cands] = False
        sim_ = WhatIf(snap, self.view, [keep & (st.status == READY), keep & (st.status == BOOTING)],
                      self._spare())
        pods = np.r_[pending, np.array(moved, np.int64)]
        order = self._order(pods)
        where = self._place_all(sim_, pods[order], max_claims=1)
        mine = order >= len(pending)
        if (mine & ((where == -1) | ((where >= 0) & (st.status[np.maximum(where, 0)] == BOOTING)))).any():
            return False, -1
        if sim_.n_claims == 0:
            return True, -1
        remaining, committed = self._supply()
        pool = self._offering(sim_.claim_types(0), sim_.claim_pools[0], remaining, committed,
                              below=float(self.node_price[cands].sum()))
        return pool >= 0, pool

    def _multi(self, cands: np.ndarray, pending: np.ndarray) -> tuple[np.ndarray, int] | None:
        """Karpenter's heuristic: binary search for the longest consolidatable prefix (2 or
        more); the command (nodes, replacement pool or -1), or None."""
        if len(cands) < 2:
            return None
        lo, hi, best = 1, len(cands) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            ok, pool = self._option(cands[:mid + 1], pending)
            if ok:
                best, lo = (cands[:mid + 1], pool), mid + 1
            else:
                hi = mid - 1
        return best

    def _single(self, cands: np.ndarray, pending: np.ndarray) -> tuple[np.ndarray, int] | None:
        """The first candidate that can be deleted or replaced by a cheaper node: its command."""
        for i in np.flatnonzero(self._may_move(cands)) if len(cands) else ():
            ok, pool = self._option(cands[i:i + 1], pending)
            if ok:
                return cands[i:i + 1], pool
        return None

    def _may_move(self, cands: np.ndarray) -> np.ndarray:
        """Cheap necessary condition per candidate (totals, in the view): its pods' CPU, memory
        and GPUs fit the free capacity of the other nodes, alone or with one cheaper offering.
        A node's pods' totals are its allocations (capacity - free; `sim.gpus_on`, a share
        rounded up to a device, or its GPU milli when sharing-aware), in exact integers."""
        sim, st = self.sim, self.sim.state
        keep = (st.status != ABSENT) & (self.scheduler.booked_for == -1)
        if self.sharing_aware:  # GPU milli
            unit, gfree, gneed = WHOLE, st.gpu_cap.astype(np.int64) * WHOLE - st.gpu_used, st.gpu_used[cands]
        else:  # whole GPUs
            unit, gfree, gneed = 1, st.free_whole, sim.gpus_on[cands]
        free = np.stack([st.cpu_free, st.mem_free, gfree]).astype(np.int64)
        total = free[:, keep].sum(axis=1)
        need = np.stack([st.cpu_cap[cands] - st.cpu_free[cands], st.mem_cap[cands] - st.mem_free[cands],
                         gneed]).astype(np.int64)
        elsewhere = total[:, None] - free[:, cands]
        ok = (need <= elsewhere).all(axis=0)
        remaining, committed = self._supply()
        price = np.where(committed > 0, 0.0, self.pool_price)
        t = self.pool_type
        cap = np.stack([st.type_cpu[t], st.type_mem[t], st.type_gpus[t].astype(np.int64) * unit])  # 3 x pools
        cheaper = (price[None, :] < self.node_price[cands][:, None]) & (remaining > 0)[None, :]
        fits = (need.T[:, :, None] <= elsewhere.T[:, :, None] + cap[None, :, :]).all(axis=1)
        return ok | (cheaper & fits).any(axis=1)

    def _execute(self, cands: np.ndarray, pool: int) -> None:
        if pool < 0:
            self._delete(cands)
            return
        slot = self._launch(pool, self.sim.now)
        if slot >= 0:  # else an insufficient-capacity error: the command fails
            self.scheduler.book(cands, TAINT)
            self.command = (slot, int(self.sim.node_instance[slot]), cands)

    def _finish_command(self) -> None:
        assert self.command is not None
        slot, instance, cands = self.command
        if self.sim.node_instance[slot] != instance:  # the replacement is gone: call it off
            self.scheduler.book(cands, -1)
            self.command = None
        elif self.sim.state.status[slot] == READY:
            self.command = None
            self.nominated_until[slot] = self.sim.now + self.nomination_s  # for the evicted pods
            self._delete(cands)

    def _delete(self, nodes: np.ndarray) -> None:
        """Drain (evicted pods restart wherever the scheduler puts them) and delete."""
        sim = self.sim
        for n in nodes:  # per node and pod, inherently: each evicted pod is re-queued, each node removed
            for pod in sim.pods_on(int(n)):
                sim.unbind(pod)
            sim.remove_node(int(n))
            self.scheduler.book(n, -1)
