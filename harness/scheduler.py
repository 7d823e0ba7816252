"""A kube-scheduler-like scheduler: queue, vectorized filter, weighted score, bind, gang modes.

It only ever places pods on nodes that exist and are ready. Queue order is priority, then
arrival. A job that found no room is retried only when the cluster's capacity changes (a node
becomes ready or a pod releases resources), and within one cycle a pod shape that found no
node is not scanned again (equivalence classes).

Gang modes:
  none          members bind one by one as they fit and hold their devices while waiting;
  coscheduling  members are reserved as they fit and wait up to `gang_timeout_s` for the
                rest, then all are released (the scheduler-plugins Coscheduling default: 60 s);
  atomic        the whole gang is placed in one cycle or nothing is.
Gang locality claims (one rack / one block) restrict all members to one group of nodes.
With `waits_for_capacity` (the first proposed scheduler-autoscaler interface step: the
scheduler *sees* in-flight capacity) a gang reserves nothing until all its members fit on
ready plus booting nodes: it waits for capacity rather than hold devices it cannot use.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.errors import ConfigError
from harness.filters import feasible, groups_that_fit
from harness.metrics import PendingReason
from harness.scores import ScorePlugin
from harness.state import BOOTING, READY, WHOLE
from harness.workload import BOUND, LOCALITY_CODE, PENDING

GANG_MODES = ("none", "coscheduling", "atomic")


class Scheduler:
    def __init__(self, policy: ScorePlugin, gang_mode: str = "coscheduling", gang_timeout_s: float = 60.0,
                 waits_for_capacity: bool = False):
        if gang_mode not in GANG_MODES:
            raise ConfigError("loop.scheduler.gang_mode", f"must be one of {GANG_MODES}, got '{gang_mode}'")
        self.policy = policy
        self.gang_mode = gang_mode
        self.gang_timeout_s = float(gang_timeout_s)
        self.waits_for_capacity = bool(waits_for_capacity)

    def attach(self, sim) -> None:
        self.sim = sim
        w = sim.w
        self.tried_at = np.full(w.n_jobs, -1, np.int64)  # capacity version of the last failure
        self.timeout_armed = np.zeros(w.n_jobs, bool)
        self.reasons: dict | None = None
        self.any_booked = False
        self.seen = (-1, -1, -1)
        no = np.zeros(w.n_pods, bool)
        self.w_no_claims = replace(w, nvlink=no, numa=no, nic=no)
        #: node -> job it is booked for (ProvisioningRequest), -1 = free for all
        self.booked_for = np.full(sim.state.n_slots, -1, np.int64)

    # ---- the cycle ---------------------------------------------------------------------
    def cycle(self, now: float) -> None:
        """Try every queued job whose situation changed since its last failure."""
        sim = self.sim
        key = (sim.state.version, sim.arrived_version, sim.state.layout_version)
        if key == self.seen:
            return
        if not sim.queue:  # nothing waits: only remember that capacity was seen
            sim.state.grown.clear()
            self.seen = key
            return
        relabel = key[2] != self.seen[2]  # nodes came, went or became ready: reasons may change
        failed_shapes: set[int] = set()
        self.any_booked = bool((self.booked_for >= 0).any())
        self.reasons = None if self.any_booked else {}  # per-cycle cache of pending reasons by shape
        self.free_ready = sim.state.ready & (self.booked_for == -1)
        hint = self._queueing_hint(self.any_booked)
        for _, _, j in list(sim.queue):
            if self.tried_at[j] >= 0 and self.tried_at[j] != sim.state.version and not hint(j):
                self.tried_at[j] = sim.state.version  # no grown node could take any of its pods
            if self.tried_at[j] == sim.state.version:
                if relabel:
                    for p in sim.unbound_pods(j):
                        self._mark_failed(int(p), self.usable(j))
                continue
            if self.gang_mode == "atomic" and sim.w.job_min_member[j] > 1:
                placed = self._place_atomic(j, failed_shapes)
            else:
                placed = self._place_incremental(j, failed_shapes)
            self.tried_at[j] = -1 if placed else sim.state.version  # an evicted job comes back new
        self.seen = (sim.state.version, sim.arrived_version, sim.state.layout_version)

    def _queueing_hint(self, any_booked: bool):
        """Like kube-scheduler's QueueingHints: a job that failed is worth retrying only if
        one of its pods fits one of the nodes whose capacity grew since the last cycle."""
        st, w = self.sim.state, self.sim.w
        grown = np.unique(np.array(st.grown, np.int64))
        st.grown.clear()
        if any_booked:
            return lambda j: True
        if len(grown) == 0:
            return lambda j: False  # capacity grew nowhere
        sub = st.subset(grown)
        usable = sub.status == READY
        fits: dict[int, bool] = {}

        def hint(j: int) -> bool:
            for p in self.sim.unbound_pods(j):
                s = int(w.shape[p])
                if s not in fits:
                    fits[s] = bool(feasible(sub, w, int(p), usable).any())
                if fits[s]:
                    return True
            return False
        return hint

    def usable(self, j: int) -> np.ndarray:
        """Ready nodes job j may use: all but those booked for other jobs (or tainted)."""
        if not self.any_booked:
            return self.free_ready
        return self.sim.state.ready & ((self.booked_for == -1) | (self.booked_for == j))

    def choose(self, p: int, mask: np.ndarray) -> int:
        """Best node by the policy's score among `mask`; ties by the seeded node order."""
        cand = np.flatnonzero(mask)
        if len(cand) == 0:
            return -1
        if len(cand) > 1:
            s = self.policy.score(self.sim.state, self.sim.w, p, cand, self.sim.rng)
            cand = cand[s >= s.max()]
        return int(cand[np.argmin(self.sim.node_rank[cand])])

    def groups_of(self, j: int) -> np.ndarray | None:
        loc = self.sim.w.job_locality[j]
        if loc == LOCALITY_CODE["rack"]:
            return self.sim.state.slot_rack
        if loc == LOCALITY_CODE["block"]:
            return self.sim.state.slot_block
        return None

    # ---- atomic: all unbound members in one cycle, or none ------------------------------
    def _place_atomic(self, j: int, failed_shapes: set[int]) -> bool:
        sim = self.sim
        pods = sim.unbound_pods(j)
        shapes = sim.w.shape[pods]
        if any(int(s) in failed_shapes for s in shapes):
            for p in pods:
                self._mark_failed(int(p), self.usable(j))
            return False
        usable = self.usable(j)
        groups = self.groups_of(j)
        if groups is None:
            plan = self.try_place(pods, usable)
        else:
            plan = None
            for g in groups_that_fit(sim.state, sim.w, pods, usable, groups):
                plan = self.try_place(pods, usable & (groups == g))
                if plan is not None:
                    break
        if plan is None:
            if len(pods) == 1:
                failed_shapes.add(int(shapes[0]))
            for p in pods:
                self._mark_failed(int(p), usable)
            return False
        for p, n, gpu_idx in plan:
            sim.bind(p, n, gpu_idx)
        return True

    def try_place(self, pods: np.ndarray, usable: np.ndarray) -> list | None:
        """Place pods one by one on the real state as a trial, then undo it.
        Returns [(pod, node, gpus)] if every pod found a node, else None."""
        st, w = self.sim.state, self.sim.w
        version, grown = st.version, len(st.grown)
        plan = []
        ok = True
        for p in pods:
            p = int(p)
            n = self.choose(p, feasible(st, w, p, usable))
            if n < 0:
                ok = False
                break
            gpu_idx = self.policy.pick_devices(st, w, p, n)
            st.bind(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
            plan.append((p, n, gpu_idx))
        for p, n, gpu_idx in reversed(plan):
            st.release(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
        st.version = version  # a trial is not a change of capacity
        del st.grown[grown:]
        return plan if ok else None

    # ---- none / coscheduling: members bind as they fit ----------------------------------
    def _place_incremental(self, j: int, failed_shapes: set[int]) -> bool:
        sim = self.sim
        st, w = sim.state, sim.w
        usable = self.usable(j)
        groups = self.groups_of(j)
        if self.waits_for_capacity and w.job_min_member[j] > 1 and sim.job_ready_bound[j] == 0:
            where = self._fits_with_inflight(j, usable | ((st.status == BOOTING) & (self.booked_for < 0)))
            if where is None:
                for p in sim.unbound_pods(j):
                    self._mark_failed(int(p), usable)
                return False
            usable = usable & where  # reserve only where the whole gang will fit
        all_placed = True
        for p in sim.unbound_pods(j):
            p = int(p)
            mask, restricted = usable, False
            if groups is not None:
                members = w.job_pods[j]
                bound_nodes = sim.pod_node[members][sim.pod_node[members] >= 0]
                if len(bound_nodes):
                    mask, restricted = mask & (groups == groups[bound_nodes[0]]), True
            shape = int(w.shape[p])
            n = -1 if shape in failed_shapes else self.choose(p, feasible(st, w, p, mask))
            if n < 0:
                if not restricted:  # found no node anywhere: no pod of this shape will this cycle
                    failed_shapes.add(shape)
                self._mark_failed(p, usable)
                all_placed = False
                continue
            sim.bind(p, n, self.policy.pick_devices(st, w, p, n))
        if self.gang_mode == "coscheduling" and np.isnan(sim.job_started[j]) and not self.timeout_armed[j]:
            if (sim.pod_status[w.job_pods[j]] == BOUND).any():
                self.timeout_armed[j] = True
                sim.at(sim.now + self.gang_timeout_s, self._gang_timeout, j)
        return all_placed

    def _fits_with_inflight(self, j: int, usable: np.ndarray) -> np.ndarray | None:
        """The nodes (ready and booting; one group if the gang is local) on which the whole
        gang would fit, or None."""
        pods = self.sim.unbound_pods(j)
        groups = self.groups_of(j)
        if groups is None:
            return usable if self.try_place(pods, usable) is not None else None
        for g in groups_that_fit(self.sim.state, self.sim.w, pods, usable, groups):
            if self.try_place(pods, usable & (groups == g)) is not None:
                return groups == g
        return None

    def _gang_timeout(self, j: int) -> None:
        """Coscheduling Permit timed out: release every reserved member of the gang."""
        sim = self.sim
        self.timeout_armed[j] = False
        if not np.isnan(sim.job_started[j]):
            return
        pods = sim.w.job_pods[j]
        for p in pods[sim.pod_status[pods] == BOUND]:
            sim.unbind(int(p))
        self.tried_at[j] = sim.state.version  # back off until capacity changes again

    # ---- why a pod is still pending ---------------------------------------------------
    def _mark_failed(self, p: int, usable: np.ndarray) -> None:
        sim = self.sim
        if sim.pod_status[p] != PENDING:
            return
        if self.reasons is None:
            reason = self.classify(p, usable)
        else:
            key = (int(sim.w.shape[p]), int(sim.w.job_locality[sim.w.job[p]]), sim.w.job_min_member[sim.w.job[p]] > 1)
            reason = self.reasons.get(key)
            if reason is None:
                reason = self.reasons[key] = self.classify(p, usable)
        sim.acct.set_reason(p, reason)

    def classify(self, p: int, usable: np.ndarray) -> PendingReason:
        st, w = self.sim.state, self.sim.w
        if feasible(st, w, p, st.status == BOOTING).any():
            return PendingReason.BOOTING
        if feasible(st, w, p, usable).any():  # it fits alone: its gang or gang locality failed
            j = int(w.job[p])
            return PendingReason.TOPOLOGY if w.job_locality[j] else PendingReason.GANG_WAIT
        if (w.nvlink[p] or w.numa[p] or w.nic[p]) and feasible(st, self.w_no_claims, p, usable).any():
            return PendingReason.TOPOLOGY
        if w.gpus[p]:
            need = int(w.gpus[p]) * int(w.milli[p])
            total_free = st.gpu_cap.astype(np.int64) * WHOLE - st.gpu_used
            roomy = usable & (st.cpu_free >= w.cpu[p]) & (st.mem_free >= w.mem[p]) & (total_free >= need)
            if w.model_mask[p]:
                roomy &= (st.model_bit & w.model_mask[p]) != 0
            if roomy.any():
                return PendingReason.FRAGMENTATION
        return PendingReason.SHORTAGE
