"""Karpenter's consolidation (`WhenEmptyOrUnderutilized`): the disruption controller that
deletes or replaces nodes whenever that is cheaper, beside the provisioner
(harness/autoscalers/karpenter.py, which polls it every `poll_s`).

Each poll looks at the ready nodes whose pods have not changed for `consolidate_after_s` (0 s,
the v1 default; a change counts from the poll or validation that sees it) and may all be
evicted (a gang member may not, as if a PodDisruptionBudget protected it), cheapest to disrupt
first (the sum of their pods' eviction costs, 1 + priority / 2^25 each, clamped to [-10, 10];
ties by slot), at most ceil(`budget_nodes` x the nodes) minus the nodes booting or being
deleted at once, one command per poll, in Karpenter's order:
  1. empty nodes are deleted;
  2. multi-node: the longest prefix (2 or more) of the candidates, fewest pods first (at most
     `max_candidates`), whose pods fit the other nodes plus at most one new node cheaper than
     the whole prefix;
  3. single-node: the first candidate whose pods fit the other nodes (deleted), or those plus
     one new node cheaper than it (replaced).
As Karpenter, the what-if (harness/autoscalers/karpenter_scheduling.py) packs the pending pods
together with the moved ones, and a moved pod may not count on a node still booting. A
command is re-validated `validation_s` (15 s, `consolidationTTL`) after it was computed, polls
waiting meanwhile: it is dropped unless every node is still a candidate (so not nominated
meanwhile), the budget still allows them all, the emptiness command's nodes are still empty
and, for the others, the what-if run again still deletes them (or still needs one cheaper
node); executed, the next poll follows at once, as Karpenter's controller requeues. A
replacement is launched first; the nodes it replaces are tainted (no new pods) and deleted,
their pods evicted to restart elsewhere, the instant it is ready (a replacement refused by the
provider drops the command and caches its offering). Removing a committed node saves nothing,
so only empty ones are deleted. `WhenEmpty` (`consolidate_underutilized` false, from the
global `consolidation`) stops after step 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from harness.autoscalers.disruption_cost import disruption_costs
from harness.autoscalers.karpenter_offerings import Offerings
from harness.autoscalers.karpenter_scheduling import WhatIf, queue_order
from harness.autoscalers.node_templates import NodeTemplates
from harness.quiet import Clock
from harness.state import WHOLE
from harness.status import ABSENT, BOOTING, READY, Event
from harness.whatif import ScratchState, Snapshot

if TYPE_CHECKING:
    from harness.scheduler import Scheduler
    from harness.view import SimulationView
    from harness.workload import Workload

TAINT = -2  # `scheduler.booked_for` of a node being disrupted: usable by no job


class Consolidation:
    """Karpenter's disruption controller over the NodePool's `offerings`, the provisioner's
    nominations (`nominated_until`, renewed by its batches: a nominated node is no candidate)
    and its pending pods (`pending`), in the autoscaler's `view` of a pod."""

    def __init__(self, sim: SimulationView, scheduler: Scheduler, view: Workload, view_class: np.ndarray,
                 offerings: Offerings, nominated_until: np.ndarray, nomination_s: float,
                 pending: Callable[[], np.ndarray], underutilized: bool, consolidate_after_s: float,
                 budget_nodes: float, max_candidates: int, validation_s: float, sharing_aware: bool,
                 templates: NodeTemplates, scratch: ScratchState):
        self.sim, self.scheduler, self.view, self.view_class = sim, scheduler, view, view_class
        self.templates = templates  # a replacement is simulated by its instance type's template
        self.scratch = scratch  # the copy its what-ifs pack on
        self.offerings, self.nominated_until, self.nomination_s = offerings, nominated_until, nomination_s
        self.pending = pending
        self.underutilized, self.consolidate_after_s = underutilized, consolidate_after_s
        self.budget_nodes, self.max_candidates = budget_nodes, max_candidates
        self.validation_s, self.sharing_aware = validation_s, sharing_aware
        w = sim.w  # Karpenter's EvictionCost per pod: 1 + priority / 2^25, clamped to [-10, 10]
        self.eviction_cost = np.clip(1.0 + w.job_priority[w.job].astype(np.float64) / 2.0**25, -10.0, 10.0)
        self.unit_costs = bool((self.eviction_cost == 1.0).all())
        self.last_change = np.zeros(sim.state.n_slots)
        self.seen: tuple[np.ndarray, ...] | None = None  # per-node (pods, cpu, GPU milli, status) at the last poll
        self.command: tuple[int, int, np.ndarray] | None = None  # replacement slot, its instance, replaced
        self.validating: tuple[float, np.ndarray, int, bool] | None = None  # at, candidates, pool or -1, emptiness
        self.idle_key: tuple | None = None  # the situation of the last poll that found no action

    def replacement_ready(self) -> bool:
        """A replacement launched for a command is ready: the command goes on now."""
        return self.command is not None and self.sim.state.status[self.command[0]] == READY

    def clocks(self, now: float) -> list[Clock]:
        """What could make a node a candidate later, nothing else changing: the node changed
        the longest ago becoming quiet for consolidateAfter."""
        waiting = ~(now - self.last_change >= self.consolidate_after_s)
        return [(self.last_change[waiting].min(), self.consolidate_after_s)] if waiting.any() else []

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

    def poll(self, now: float) -> bool:
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
        key = (st.mutations, cands.tobytes(), budget, self.offerings.offered(now).tobytes())
        if key == self.idle_key:
            return False
        empty = cands[st.pods_on[cands] == 0]
        command = (empty[:budget], -1) if len(empty) else None  # emptiness first
        if command is None and self.underutilized:
            busy = cands[self.offerings.node_price[cands] > 0]  # removing a committed node saves nothing
            pending = self.pending()
            command = self._multi(busy[:min(budget, self.max_candidates)], pending) or self._single(busy, pending)
        if command is None:
            self.idle_key = key
            return False
        self.validating = (now + self.validation_s, *command, bool(len(empty)))
        if self.validation_s == 0:
            self.validate(now)
        return True

    def validate(self, now: float) -> bool:
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
            ok, again = self._option(cands, self.pending())
            if not ok or (again < 0) != (pool < 0):
                return False
        self._execute(cands, pool, emptiness)
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
        min_size = self.offerings.min_size
        room = np.bincount(st.slot_pool[st.status != ABSENT], minlength=len(min_size)) - min_size
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
        return disruption_costs(self.sim.pod_node, self.eviction_cost, nodes, st.n_slots)

    def _option(self, cands: np.ndarray, pending: np.ndarray) -> tuple[bool, int]:
        """Can the candidates' pods go to the other nodes plus at most one new node cheaper than
        them? As Karpenter, pending pods are packed with them (largest first) and take their
        share; a candidate's pod may not count on a node still booting. Returns (possible,
        replacement pool or -1)."""
        sim, st = self.sim, self.sim.state
        snap = Snapshot(st, devices=self.templates.slot_devices(), scratch=self.scratch)
        # The candidates' pods move; their nodes are in no tier of the what-if (nor spare), so no
        # step of it reads those nodes' rows, and the pods are not taken off them in the copy.
        moved = np.fromiter(chain.from_iterable(sim.node_pods[n] for n in cands.tolist()), np.int64)
        keep = self.scheduler.booked_for == -1
        keep[cands] = False
        sim_ = WhatIf(snap, self.view, [keep & (st.status == READY), keep & (st.status == BOOTING)],
                      self.offerings.spare())
        pods = np.r_[pending, moved]
        order = queue_order(self.view, pods)
        mine = order >= len(pending)
        booting = st.status == BOOTING
        # the first moved pod left without a place, or on a node still booting, settles it: the
        # pods after it change nothing of the answer
        for a, went in sim_.place_runs(pods[order], self.view_class, max_claims=1):
            if (mine[a:a + len(went)] & ((went == -1) | ((went >= 0) & booting[np.maximum(went, 0)]))).any():
                return False, -1
        if sim_.n_claims == 0:
            return True, -1
        remaining, committed = self.offerings.supply()
        pool = self.offerings.cheapest(sim_.claim_types(0), sim_.claim_pools[0], remaining, committed,
                              below=float(self.offerings.node_price[cands].sum()))
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
        remaining, committed = self.offerings.supply()
        price = np.where(committed > 0, 0.0, self.offerings.pool_price)
        t = self.offerings.pool_type
        cap = np.stack([st.type_cpu[t], st.type_mem[t], st.type_gpus[t].astype(np.int64) * unit])  # 3 x pools
        cheaper = (price[None, :] < self.offerings.node_price[cands][:, None]) & (remaining > 0)[None, :]
        fits = (need.T[:, :, None] <= elsewhere.T[:, :, None] + cap[None, :, :]).all(axis=1)
        return ok | (cheaper & fits).any(axis=1)

    def _execute(self, cands: np.ndarray, pool: int, emptiness: bool) -> None:
        if pool < 0:
            self._delete(cands, "empty" if emptiness else "underutilized: its pods fit on the other nodes")
            return
        moved = np.array([p for n in cands.tolist() for p in self.sim.pods_on(n)], np.int64)  # what it is for
        slot = self.offerings.launch(pool, self.sim.now, moved)
        if slot >= 0:  # else an insufficient-capacity error: the command fails
            self.sim.note(Event.OPTION, f"consolidation: {len(cands)} node(s) replaced by one cheaper, "
                                        f"pool={self.sim.cluster.pools[pool].name} chosen")
            self.scheduler.book(cands, TAINT)
            self.command = (slot, int(self.sim.node_instance[slot]), cands)

    def finish_command(self) -> None:
        """A replacement ready: its command goes on (the replaced nodes drained and deleted); a
        replacement gone: the command is called off."""
        if self.command is None:
            return
        slot, instance, cands = self.command
        if self.sim.node_instance[slot] != instance:  # the replacement is gone: call it off
            self.scheduler.book(cands, -1)
            self.command = None
        elif self.sim.state.status[slot] == READY:
            self.command = None
            self.nominated_until[slot] = self.sim.now + self.nomination_s  # for the evicted pods
            pool = self.sim.cluster.pools[int(self.sim.state.slot_pool[slot])]
            self._delete(cands, f"replaced by a cheaper node of {pool.name}")

    def _delete(self, nodes: np.ndarray, why: str) -> None:
        """Drain (evicted pods restart wherever the scheduler puts them) and delete; `why`
        for the decision trace."""
        sim = self.sim
        for n in nodes:  # per node and pod, inherently: each evicted pod is re-queued, each node removed
            sim.note(Event.SCALE_DOWN, f"karpenter consolidation: {why}", node=int(n))
            for pod in sim.pods_on(int(n)):
                sim.unbind(pod, deleted=True)
            sim.remove_node(int(n))
            self.scheduler.book(n, -1)
