"""The simulation of a cluster: pods, jobs, nodes and the queue, shared by every loop.

The simulation owns the truth (cluster state, pod and job status, billing and accounting);
loops only decide. Its clock and event heap are `harness.engine.Engine`'s; its running totals
are `harness.ledger.Ledger`'s, fed by named transitions. Between events the state is constant,
so every metric is the exact integral of piecewise-constant rates (`harness.metrics.Accounting`).

At one instant the order is: events due (pod ends, nodes ready, timeouts), then arrivals,
then the loop's step (scheduler cycle, and the autoscaler or planner on its own cadence).

Extensions attach through `hooks` (harness/hooks.py): the services' replicas
(harness/services/engine.py) are one, an admission layer's gate (harness/admission.py) another.

Loops see only what a real controller could know: `cloud` is a facade without the
provider's stock, `w` is the workload without run times (reading one raises), and a booting
node's ready time stays in the event heap. The provider's truth is `_cloud`, the simulation's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, cast

import numpy as np

from harness.admission import AdmissionGate
from harness.cloud import Cloud, Placement, ProviderFacade
from harness.cluster import Cluster
from harness.dra.layer import ClaimedGpus
from harness.engine import Engine
from harness.eviction import evict
from harness.filters import feasible, pick_devices
from harness.fleet import Fleet
from harness.fragmentation import TargetWorkload
from harness.hooks import Hooks
from harness.job_backoff import JobBackoff
from harness.job_queue import JobQueue
from harness.ledger import Ledger
from harness.metrics import Accounting
from harness.pending_pods import first_pending
from harness.sealed import Sealed
from harness.services.engine import ReplicaSets
from harness.settings import check
from harness.state import ClusterState
from harness.status import (
    BOOTING,
    BOUND,
    DONE,
    NOT_ARRIVED,
    PENDING,
    READY,
    REFUSED,
    RUNNING,
    Event,
    PendingReason,
)
from harness.taint_eviction import DeviceTaintEviction
from harness.workload import Workload

if TYPE_CHECKING:  # what the simulation drives (harness/view.py)
    from harness.view import Loop



# `unbind_many` of fewer pods calls `unbind` for each: its vector steps cost more than a few
# pods' scalar ones (a gang released by Coscheduling has 2-7 bound members, mostly; the separate
# loop took 131.9 CPU s to reach 50,000 s of the 100k-pod scale trace with batches from 2 pods,
# 119.4 s from 8; calib.py 0.46)
UNBIND_IN_TURN_BELOW = 8


class Simulation(Engine):
    def __init__(self, workload: Workload, cluster: Cluster, seed: int, horizon_s: float,
                 timeline_interval_s: float = 60.0, target: TargetWorkload | None = None,
                 stop_when_done: bool = False, job_backoff: bool = True):
        check("", "", seed=seed, horizon_s=horizon_s, timeline_interval_s=timeline_interval_s)
        super().__init__()
        self._duration = workload.duration  # run times: the simulation's alone
        # a pod's placement and shape change when an admission layer keeps it to some nodes
        # (`AdmissionGate.admit`): this run's own copies, every view of the workload shares them
        self.w = w = replace(workload, duration=cast(np.ndarray, Sealed("a pod's duration")),
                             placement=workload.placement.copy(), shape=workload.shape.copy())
        self.cluster, self.seed, self.horizon = cluster, int(seed), float(horizon_s)
        #: end the run once every pod of the trace is done or refused (the horizon then moves
        #: to that instant): each loop's window is its own makespan, and all do the same work
        self.stop_when_done = bool(stop_when_done)
        self.state = ClusterState(cluster)
        self._cloud = Cloud(cluster, self.state, self.seed)
        self.cloud = ProviderFacade(self._cloud, lambda: self.now)
        rng = np.random.default_rng([self.seed, 1])
        self.rng = np.random.default_rng([self.seed, 2])
        #: tie-break order among equally scored nodes, random per seed (as the FGD simulator)
        self.node_rank = rng.permutation(self.state.n_slots)
        self.pod_status = np.full(w.n_pods, NOT_ARRIVED, np.int8)
        self.pod_node = np.full(w.n_pods, -1, np.int32)
        self.pod_gpus: list[np.ndarray | None] = [None] * w.n_pods
        self.pod_start = np.full(w.n_pods, np.nan)
        self.pod_end = np.full(w.n_pods, np.nan)
        self.pod_epoch = np.zeros(w.n_pods, np.int32)
        self.pod_reason = np.full(w.n_pods, -1, np.int8)
        self.placeholder = w.job_placeholder[w.job]  # overprovisioning pause pods (services/buffers.py)
        self.pods_left = int((~self.placeholder).sum())  # the trace's pods not yet done or refused
        self.job_ready_bound = np.zeros(w.n_jobs, np.int32)  # bound pods on ready nodes
        self.job_placed = np.zeros(w.n_jobs, np.int32)  # pods with a node (bound, running or done)
        self.job_anchor = np.full(w.n_jobs, -1, np.int64)  # the node of one of them (-1: none)
        self.job_started = np.full(w.n_jobs, np.nan)
        self.job_done = np.zeros(w.n_jobs, np.int32)
        self.job_finished = np.full(w.n_jobs, np.nan)
        self.job_admitted = np.full(w.n_jobs, np.nan)  # when a job's pods first reached the scheduler
        self.job_admissions = np.zeros(w.n_jobs, np.int32)  # times an admission layer let a job through
        self.queue = JobQueue(lambda: self.w, w.n_jobs)  # the jobs waiting for the scheduler, in QueueSort order
        #: the Job controller's pod-failure backoff (None: evicted pods pend again at once, the
        #: older simplification)
        self.job_backoff = JobBackoff(self) if job_backoff else None
        self.job_arrived = np.zeros(w.n_jobs, np.int32)  # pods of each job that have arrived
        self._stream_arrivals()
        self.job_never_fits = np.bincount(w.job, weights=w.never_fits, minlength=w.n_jobs) > 0
        self.may_preempt = False  # a loop that may preempt said so (`allow_preemption`)
        self.node_pods: list[set[int]] = [set() for _ in range(self.state.n_slots)]
        self.ledger = Ledger(self.state, w.job_min_member[w.job] > 1, w.gpus, target or TargetWorkload.from_pods(
            w.cpu, w.gpus.astype(np.int64), w.milli, w.model_mask))
        self.held, self.gang_pods_on, self.gpus_on = self.ledger.held, self.ledger.gang_pods_on, self.ledger.gpus_on
        self.hooks = Hooks()  # where extensions attach
        self.fleet = Fleet(self, self.state, self._cloud, self.ledger, self._came_up, self.hooks,
                           self.plan_as_published)
        #: every node instance the run had; each slot's instance, when a loop asked for it and
        #: when it became ready (its Ready condition's lastTransitionTime)
        self.nodes, self.node_instance, self.node_requested_at, self.node_ready_at = (
            self.fleet.records, self.fleet.instance, self.fleet.requested_at, self.fleet.ready_at)
        self.admission: AdmissionGate | None = None  # an admission layer's gate (`gate_arrivals`)
        self.acct = Accounting(self, self._cloud.phantom, timeline_interval_s)
        #: the services' replicas (None: a trace without services)
        self.replicasets = None if workload.services is None else ReplicaSets(self, workload.services)
        #: device taints coming and going, and the evictions they make (None: none configured)
        taints = None if cluster.devices is None else cluster.devices.taints
        self.taint_eviction = None if not taints else DeviceTaintEviction(self, taints)
        for p, pool in enumerate(cluster.pools):
            if pool.min_size:
                for n in self._cloud.free_slots(p)[:pool.min_size]:
                    self.fleet.add(int(n), ready=True)

    def advance_to(self, t: float) -> None:
        """Integrate metrics up to t, then run the events and arrivals due at t."""
        self.acct.advance(t)
        super().advance_to(t)

    # ---- jobs and pods -----------------------------------------------------------------
    def _stream_arrivals(self) -> None:
        """Each pod arrives at its own submit time: one arrival per job and instant, in order of
        time, then job index (a job whose pods share submit_s arrives once, whole). Replica
        slots arrive when created."""
        w = self.w
        order = np.lexsort((np.arange(w.n_pods), w.job, w.submit))
        self.arrival_order = order = order[w.job_service[w.job[order]] < 0]
        job, at = w.job[order], w.submit[order]
        starts = np.flatnonzero(np.r_[True, (job[1:] != job[:-1]) | (at[1:] != at[:-1])]) if len(order) else order
        self.arrival_job = job[starts]
        bounds = np.r_[starts, len(order)]
        self.stream(at[starts], lambda i: self.arrive(int(self.arrival_job[i]), order[bounds[i]:bounds[i + 1]]))

    def arrive(self, j: int, pods: np.ndarray | None = None) -> None:
        """Pods of job j arrive (all of them unless `pods`): refused if no node type can ever hold
        the job, else held by a gate, held by the scheduler's PreEnqueue (a gang short of its
        quorum), or queued. A gate takes a job once all its pods exist (Kueue admits it whole)."""
        w = self.w
        every = w.job_pods[j]
        pods = every if pods is None else pods
        self.job_arrived[j] += len(pods)
        self.hooks.emit(Event.ARRIVED, job=j)
        if self.job_never_fits[j]:
            self.pod_status[pods] = REFUSED  # no node type can ever hold it: refused, not waited on
            self.pods_left -= int((~self.placeholder[pods]).sum())
            self.hooks.emit(Event.REFUSED, job=j)
            return
        self.pod_status[pods] = PENDING
        if self.hooks.arrival and self.job_arrived[j] < len(every):
            self.acct.set_reasons(pods, PendingReason.NOT_ADMITTED)
            return
        for gate in self.hooks.arrival:
            if gate(j):
                return
        if math.isnan(self.job_admitted[j]):
            self.job_admitted[j] = self.now
        if self.queue.holds[j]:  # more pods of a queued job: worth another try
            self.acct.set_reasons(pods, PendingReason.SHORTAGE)
            self.queue.joined(j)
            self.hooks.emit(Event.QUEUED, job=j)
            return
        if not self.queue.push(j):  # its backoff, or PreEnqueue: fewer pods than its gang's quorum exist
            self.acct.set_reasons(pods, PendingReason.JOB_BACKOFF if self.queue.deferred[j]
                                  else PendingReason.GANG_WAIT)
            return
        pending = pods if len(pods) == len(every) else self.unbound_pods(j)
        if len(pending) == 1:
            self.acct.set_reason(int(pending[0]), PendingReason.SHORTAGE)
        else:
            self.acct.set_reasons(pending, PendingReason.SHORTAGE)
        self.hooks.emit(Event.QUEUED, job=j)

    def gate_arrivals(self, gate: Callable[[int], None], withdraw: Callable[[int], None]) -> AdmissionGate:
        """An admission layer (Kueue) in front of the scheduler: see `AdmissionGate`."""
        return AdmissionGate(self, gate, withdraw)

    def allow_preemption(self) -> None:
        """A loop that may preempt (`evict`) says so on attach: its runs report preemptions."""
        self.may_preempt = True

    def unbound_pods(self, j: int) -> np.ndarray:
        pods = self.w.job_pods[j]
        return pods[self.pod_status[pods] == PENDING]

    def bind(self, p: int, n: int, gpu_idx: np.ndarray, on_state: bool = False) -> None:
        """Bind pod p to node n (ready, or booting for a planned placement) on these GPUs;
        `on_state`: the cluster state already holds it (a kept trial placement)."""
        w, st = self.w, self.state
        j = int(w.job[p])
        if not on_state:
            st.bind(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
        self.pod_node[p] = n
        self.pod_gpus[p] = gpu_idx
        self.pod_status[p] = BOUND
        self.job_placed[j] += 1
        if self.job_anchor[j] < 0:
            self.job_anchor[j] = n
        self.node_pods[n].add(p)
        for hook in self.hooks.bound:
            hook(p, n)
        held = int(w.milli[p]) * len(gpu_idx) if math.isnan(self.job_started[j]) else 0
        if self.hooks.event:
            devices, milli = ",".join(str(g) for g in gpu_idx.tolist()), int(w.milli[p])
            self.hooks.emit(Event.BOUND, p, j, n, f"{devices} milli={milli}" if devices and milli < 1000 else devices)
        if st.status[n] == READY:  # it runs, or waits for its gang: its reason is set there
            self._bound_on_ready(p)
        else:
            self.acct.set_reason(p, PendingReason.BOOTING)
        self.ledger.placed(n, p, held)
        if self.job_placed[j] == self.job_arrived[j]:  # no pod of it is pending any more
            self.queue.remove(j)

    def _bound_on_ready(self, p: int) -> None:
        """A bound pod's node is ready: it runs if its job started, else the gang may start."""
        j = int(self.w.job[p])
        self.job_ready_bound[j] += 1
        if not math.isnan(self.job_started[j]):
            self._run(p)
        elif self.job_ready_bound[j] >= self.w.job_min_member[j]:
            self.start_job(j)
        else:
            self.acct.set_reason(p, PendingReason.GANG_WAIT)

    def _milli(self, p: int) -> int:
        """The GPU milli pod p holds on its node."""
        gpu_idx = self.pod_gpus[p]
        assert gpu_idx is not None, "a pod on a node holds its devices"
        return int(self.w.milli[p]) * len(gpu_idx)

    def _leave(self, p: int) -> None:
        """The one way a pod leaves its node (unbound, preempted, deleted or finished): the node
        gets its resources back, then the ledger hears of it, pod after pod."""
        w, n, gpu_idx = self.w, int(self.pod_node[p]), self.pod_gpus[p]
        assert gpu_idx is not None, "a pod on a node holds its devices"
        milli = int(w.milli[p]) * len(gpu_idx)
        self.state.release(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
        self.node_pods[n].discard(p)
        self.pod_gpus[p] = None
        for hook in self.hooks.left:
            hook(p)
        self.ledger.released(n, p, milli if math.isnan(self.job_started[w.job[p]]) else 0,
                             milli if self.placeholder[p] and self.pod_status[p] == RUNNING else 0)

    def unbind(self, p: int, deleted: bool = False) -> None:
        """Release a bound or running pod back to pending (gang timeout, rollback, eviction);
        `deleted`: the pod was deleted (evicted, drained): if it ran, a failure for its Job
        controller, which creates it again only after its backoff (a member waiting for its
        gang is rejected, not deleted, upstream: it waits in Permit, not bound)."""
        j, n = int(self.w.job[p]), int(self.pod_node[p])
        if deleted and self.job_backoff is not None and self.pod_status[p] == RUNNING:
            self.job_backoff.failed(j)
        if self.state.status[n] == READY:
            self.job_ready_bound[j] -= 1
        self._leave(p)
        self.pod_node[p] = -1
        self.pod_status[p] = PENDING
        self.job_placed[j] -= 1
        if self.job_placed[j] == 0:
            self.job_anchor[j] = -1
        self.pod_epoch[p] += 1
        self.pod_start[p] = np.nan
        for hook in self.hooks.unbound:
            hook(j)
        self.queue.push(j)
        self.acct.set_reason(p, PendingReason.JOB_BACKOFF if self.queue.deferred[j] else PendingReason.SHORTAGE)
        self.hooks.emit(Event.RELEASED, p, j, n)

    def unbind_many(self, pods: np.ndarray | list[int], deleted: bool = False) -> None:
        """`unbind` each of these distinct bound or running pods, in turn: the same outcome bit
        for bit, the bookkeeping in vector steps. Each pod leaves its node in order (`_leave`:
        `frag_ready` is a running float sum, and a node's F_n is measured after each of its pods)."""
        w = self.w
        pods = np.asarray(pods, np.int64)
        if len(pods) < UNBIND_IN_TURN_BELOW:  # a few pods: cheaper one by one than in vector steps
            for p in pods.tolist():
                self.unbind(p, deleted)
            return
        status = self.pod_status[pods]
        assert ((status == BOUND) | (status == RUNNING)).all(), "only pods on a node are unbound"
        jobs = w.job[pods]
        if deleted and self.job_backoff is not None:  # the pods that ran failed (`unbind`)
            for j, count in zip(*np.unique(jobs[status == RUNNING], return_counts=True), strict=True):
                self.job_backoff.failed(int(j), int(count))
        nodes = self.pod_node[pods].copy() if self.hooks.event else None
        np.subtract.at(self.job_ready_bound, jobs[self.state.status[self.pod_node[pods]] == READY], 1)
        for p in pods.tolist():
            self._leave(p)
        self.pod_node[pods] = -1
        self.pod_status[pods] = PENDING
        np.subtract.at(self.job_placed, jobs, 1)
        self.job_anchor[jobs[self.job_placed[jobs] == 0]] = -1
        self.pod_epoch[pods] += 1
        self.pod_start[pods] = np.nan
        order = [int(j) for j in dict.fromkeys(jobs.tolist())]  # the jobs, in the order of their first pod
        for j in order:
            for hook in self.hooks.unbound:
                hook(j)
        for j in order:
            self.queue.push(j)
        self.acct.set_reasons(pods, self.pending_reasons(jobs))
        if nodes is not None:
            for p, j, n in zip(pods.tolist(), jobs.tolist(), nodes.tolist(), strict=True):
                self.hooks.emit(Event.RELEASED, p, j, n)

    @property
    def binds_unheard(self) -> bool:
        """No handler listens to binds, releases or the decision trace: a bind undone at the
        same instant is seen only by its effects on the state, the ledger and the counters."""
        hooks = self.hooks
        return not (hooks.bound or hooks.left or hooks.unbound or hooks.event)

    def bind_then_release(self, plan: list[tuple[int, int, np.ndarray]], frags: list[float] | None = None
                          ) -> list[float]:
        """Pending pods of one job bound in turn (plan: pod, node, devices, in pod order) on ready
        nodes and, at the same instant, released again before the job could start (a gang
        attempt its PostFilter rejects at once): what `bind` of each then `unbind_many` of them
        leaves. The nodes come back as they were, so their rows are not written: their counters
        move as the binds and releases move them (`ClusterState.round_trip`), and the ledger's
        running sums go through every transition's fragmentation, in order (`Ledger.round_trip`:
        a running float sum), each F_n measured on a trial of the binds and releases; the pods'
        and the job's counters only by their net effect: pending again, each pod's epoch moved
        on, its reason the one a release gives. Only where nothing hears binds
        (`binds_unheard`) and no pod of the job had a node. Returns the F_n measured; a call with
        the same nodes and devices while the nodes hold what they held then may pass them back
        (`frags`), and no trial is made."""
        w, st, ledger = self.w, self.state, self.ledger
        j = int(w.job[plan[0][0]])
        assert self.binds_unheard and self.job_placed[j] == 0 and math.isnan(self.job_started[j]), \
            "a job of no bound pod, which does not start, and nothing listening"
        assert len(plan) < w.job_min_member[j] and self.queue.holds[j], "it stays queued, short of its quorum"
        pods = np.fromiter((p for p, _, _ in plan), np.int64, len(plan))
        nodes = [n for _, n, _ in plan]
        assert (self.pod_status[pods] == PENDING).all() and (st.status[nodes] == READY).all()
        if frags is None:
            frags = []
            st.fork()
            for p, n, gpu_idx in plan:
                st.bind(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
                frags.append(ledger.measure(n))
            for p, n, gpu_idx in plan:
                st.release(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
                frags.append(ledger.measure(n))
            st.revert()
        st.round_trip(nodes)
        ledger.round_trip(nodes, frags)
        self.pod_epoch[pods] += 1
        self.acct.set_reasons(pods, self.pending_reasons(w.job[pods]))
        return frags

    def fragmentation(self, n: int) -> float:
        """Node n's F_n as its contents are now, on a trial too (`Ledger.measure`)."""
        return self.ledger.measure(n)

    def first_pending(self, jobs: np.ndarray, heads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """How many pods of each of these jobs are pending, and the first heads[k] pending pods of
        jobs[k], job after job (each job's in `job_pods` order; fewer where fewer are pending)."""
        return first_pending(self.w.pods_by_job, self.w.job_bounds, self.pod_status, PENDING, jobs, heads)

    def round_trips(self, jobs: np.ndarray, trips: list[tuple[list[int], list[float]]], pods: np.ndarray
                    ) -> np.ndarray:
        """`bind_then_release` of each job in turn, each given the nodes and F_n of a trip
        measured before on the nodes' contents as they are (its first len(nodes) pending pods
        bound there in turn and released again, `frags` passed back): the nodes', ledger's and
        pods' counters move as those calls move them, in a few array steps for all, the
        pods' epochs and reasons in one. `pods`: those first pending pods, job after job
        (`first_pending`). Returns the capacity version after each job's releases
        (`ClusterState.round_trips`)."""
        bound = np.fromiter((len(nodes) for nodes, _ in trips), np.int64, len(trips))
        assert self.binds_unheard and (self.job_placed[jobs] == 0).all() and len(pods) == bound.sum(), \
            "jobs of no bound pod, a pod per bind, and nothing listening"
        versions = self.state.round_trips([nodes for nodes, _ in trips])
        self.ledger.round_trips(trips)
        self.pod_epoch[pods] += 1
        reasons = self.pending_reasons(jobs)
        self.acct.set_reasons(pods, np.repeat(reasons, bound) if isinstance(reasons, np.ndarray) else reasons)
        return versions

    def evict(self, pods: np.ndarray, taint: str = "", *, suspended: bool = False) -> None:
        """Preempt these bound or running pods (gangs whole): they restart from scratch (`evict`).
        `taint`: the NoExecute device taint that evicts them, counted apart from preemptions.
        `suspended`: their job was suspended (Kueue's eviction), its controller deleting its
        pods without counting them failed: no backoff."""
        if self.hooks.event:
            for p in np.asarray(pods).tolist():
                self.hooks.emit(Event.PREEMPTED, p, int(self.w.job[p]), int(self.pod_node[p]), taint)
        evict(self, pods, by_taint=bool(taint), deleted=not suspended)

    def pending_reasons(self, jobs: np.ndarray) -> np.ndarray | int:
        """The reason of pods of these jobs that just went back to pending and were pushed to the
        queue: shortage, or waiting out their job's backoff."""
        deferred = self.queue.deferred[jobs]
        if not deferred.any():
            return PendingReason.SHORTAGE
        return np.where(deferred, PendingReason.JOB_BACKOFF, PendingReason.SHORTAGE).astype(np.int8)

    def withdraw(self, j: int) -> None:
        """Job j, of one pod, is gone before it finished (a deleted replica): it leaves its node
        as a finished pod would (no work lost) and the queue, and is not arrived again (its
        epoch bumped: its pending events are void)."""
        p = int(self.w.job_pods[j][0])
        if self.pod_status[p] in (BOUND, RUNNING):
            self.unbind(p)  # releases the node (and readiness); queues the job, dequeued below
        self.queue.remove(j)
        self.pod_status[p] = NOT_ARRIVED
        self.job_arrived[j] = 0
        self.pod_epoch[p] += 1
        self.acct.set_reason(p, -1)
        self.job_started[j] = np.nan
        for hook in self.hooks.withdrawn:
            hook(j)
        self.hooks.emit(Event.WITHDRAWN, p, j)

    def start_job(self, j: int) -> None:
        """min_member pods are bound on ready nodes: the job starts, its duration runs from now."""
        self.job_started[j] = self.now
        pods = self.w.job_pods[j]
        for p in (pods if len(pods) == 1 else pods[self.pod_status[pods] == BOUND]).tolist():
            self.ledger.started(int(self.pod_node[p]), self._milli(p))
            self._run(p)

    def _run(self, p: int) -> None:
        n = int(self.pod_node[p])
        if self.state.status[n] != READY:
            return  # planned on a booting node: runs when the node is ready
        self.pod_status[p] = RUNNING
        self.pod_start[p] = self.now
        self.acct.set_reason(p, -1)
        self.hooks.emit(Event.STARTED, p, int(self.w.job[p]), n)
        for on_start in self.hooks.started:
            on_start(p, n)
        if self.placeholder[p]:  # holds room, does no work: its node is not used by it
            self.ledger.buffering(n, self._milli(p))
            return
        self.fleet.used(n)
        if math.isfinite(self._duration[p]):
            self.at(self.now + self._duration[p], self._finish, p, int(self.pod_epoch[p]))
        else:
            for hook in self.hooks.endless:
                hook(p)

    def _finish(self, p: int, epoch: int) -> None:
        if epoch != self.pod_epoch[p] or self.pod_status[p] != RUNNING:
            return
        n = int(self.pod_node[p])
        self._leave(p)
        j = int(self.w.job[p])
        self.hooks.emit(Event.FINISHED, p, j, n)
        self.pod_status[p] = DONE
        self.pod_end[p] = self.now
        self.pods_left -= int(not self.placeholder[p])
        self.job_done[j] += 1
        if self.job_backoff is not None and self.job_backoff.failures[j]:
            self.job_backoff.succeeded(j)
        if self.job_done[j] == len(self.w.job_pods[j]):
            self.job_finished[j] = self.now

    @property
    def noting(self) -> bool:
        return bool(self.hooks.event)

    def note(self, kind: int, detail: str = "", node: int = -1, pod: int = -1) -> None:
        self.hooks.emit(kind, pod, int(self.w.job[pod]) if pod >= 0 else -1, node, detail)

    # ---- nodes -------------------------------------------------------------------------
    def provision(self, p: int, count: int, atomic: bool, placement: Placement | None = None,
                  pods: np.ndarray | None = None, template: bool = True) -> np.ndarray:
        """Ask the cloud for nodes of pool p (`Fleet.provision`); `pods`, what they are for, is
        the loop's to state and the audit's to check (`SimulationView.provision`)."""
        return self.fleet.provision(p, count, atomic, placement, template)

    @property
    def last_scale_up(self) -> float:
        return self.fleet.last_scale_up

    def plan_as_published(self, n: int) -> None:
        """Booting node n, planned on the node-group template it was bought by
        (`ClusterState.dra_type`), has from now on the devices its type's nodes publish: it is
        about to be ready and publishes them, or its loop saw such a node publish them. Each pod
        planned on it gets its claims allocated anew on these devices, in pod order; one whose
        claims they cannot hold goes back to the queue (the template promised what the node
        does not have)."""
        st = self.state
        if st.dra is None or st.dra_type[n] == st.slot_type[n]:
            return
        planned = [p for p in sorted(self.node_pods[n]) if isinstance(self.pod_gpus[p], ClaimedGpus)]
        if planned:
            self.unbind_many(planned)
        st.publish(n)
        here, at = np.zeros(st.n_slots, bool), np.array([n])
        here[n] = True
        for p in planned:
            if feasible(st, self.w, p, here, at=at)[0]:
                self.bind(p, n, pick_devices(st, self.w, p, n))

    def _came_up(self, n: int) -> None:
        for p in sorted(self.node_pods[n]):  # pods planned onto this node while it booted
            if self.pod_status[p] == BOUND:
                self._bound_on_ready(int(p))

    def remove_node(self, n: int) -> None:
        """Remove node n. On a node still booting, the pods planned there first go back to the
        queue (a loop giving up on a node that does not come up)."""
        if self.state.status[n] == BOOTING:
            self.unbind_many(sorted(self.node_pods[n]))
        self.acct.removing(n, float(self.node_requested_at[n]))
        self.fleet.remove(n)

    def pods_on(self, n: int) -> list[int]:
        return sorted(self.node_pods[n])

    # ---- the run -----------------------------------------------------------------------
    def run(self, loop: Loop, progress=None) -> None:
        """Replay until the horizon (or, with `stop_when_done`, until the trace's pods are all
        done or refused): events, arrivals, then the loop's step at each instant.

        A loop that wakes on a cadence (a scan every s seconds) may have nothing it could change
        over a long quiet stretch: it hands over those wake-ups (`loop.idle_ticks(start,
        before)`, all before the next event), and they pass in bulk: the loop's cadence moves
        past them and the metrics integrate as if it had stepped at each one."""
        loop.attach(self)
        done = (lambda: self.pods_left == 0) if self.stop_when_done else None
        self.run_until(self.horizon, loop.next_wakeup, partial(loop.step, self), partial(self._pass_quiet, loop),
                       progress, done)
        if done is not None and done():
            self.horizon = self.now
        self.acct.finish()
        self.now = self.horizon
        for rec in self.nodes:
            if np.isnan(rec.removed_at):
                rec.removed_at = self.horizon

    def _pass_quiet(self, loop: Loop, t: float, before: float) -> bool:
        ticks = loop.idle_ticks(t, before)
        if not len(ticks):
            return False
        self.acct.advance_steps(ticks)
        self.now = float(ticks[-1])
        return True
