"""The discrete-event core: pods, jobs, nodes and time, shared by every loop.

The simulation owns the truth (cluster state, pod and job status, the event heap, billing
and accounting); loops only decide. Between events the state is constant, so every metric
is the exact integral of piecewise-constant rates (see `harness.metrics.Accounting`).

At one instant the order is: events due (pod ends, nodes ready, timeouts), then arrivals,
then the loop's step (scheduler cycle, and the autoscaler or planner on its own cadence).

Loops see only what a real controller could know (issue 18): `cloud` is a facade without the
provider's stock, `w` is the workload without run times (reading one raises), and a booting
node's ready time stays in the event heap. The provider's truth is `_cloud`, the simulation's.
"""

from __future__ import annotations

import heapq
import itertools
import math
from bisect import insort
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NoReturn, cast

import numpy as np

from harness.cloud import Cloud, ProviderFacade
from harness.cluster import Cluster
from harness.errors import LoopbenchError
from harness.fragmentation import TargetWorkload, node_fragmentation
from harness.metrics import Accounting
from harness.services.metrics import ServiceAccounting
from harness.services.replicaset import deletion_order
from harness.settings import check
from harness.state import ClusterState
from harness.status import BOOTING, BOUND, DONE, NOT_ARRIVED, PENDING, READY, REFUSED, RUNNING, PendingReason
from harness.workload import Workload

if TYPE_CHECKING:  # the loops' package is above the simulation: for annotations only
    from harness.loops.base import Loop
    from harness.scheduler.queue_sort import QueueSort


@dataclass
class NodeRecord:
    """One node instance's life, for the per-node output."""

    slot: int
    pool: int
    requested_at: float
    ready_at: float = float("nan")
    removed_at: float = float("nan")
    used: bool = False  # ran a pod of a started job at some point


class Sealed:
    """A field of what the simulation hands loops that no loop may read: any use raises."""

    def __init__(self, what: str):
        self._what = what

    def _refuse(self, *_) -> NoReturn:
        raise LoopbenchError(f"a loop may not read {self._what} (issue 18: no loop knows what a real one could not)")

    __getitem__ = __array__ = __len__ = __iter__ = _refuse


# `unbind_many` of fewer pods calls `unbind` for each: its ~30 vector steps cost more than a few
# pods' scalar ones (a gang released by Coscheduling has 2-7 bound members, mostly; the separate
# loop took 131.9 CPU s to reach 50,000 s of the 100k-pod scale trace with batches from 2 pods,
# 119.4 s from 8; calib.py 0.46)
UNBIND_IN_TURN_BELOW = 8


class Simulation:
    def __init__(self, workload: Workload, cluster: Cluster, seed: int, horizon_s: float,
                 timeline_interval_s: float = 60.0, target: TargetWorkload | None = None):
        check("", "", seed=seed, horizon_s=horizon_s, timeline_interval_s=timeline_interval_s)
        self._duration = workload.duration  # run times: the simulation's alone
        # a pod's placement and shape change when an admission layer keeps it to some nodes
        # (`admit`): this run's own copies, every view of the workload shares them
        #: the services' truth, demand included (None: a trace without services)
        self.services = svc = workload.services
        # a replica's creation instant becomes its slot's submit time (`create_replicas`)
        self.w = replace(workload, duration=cast(np.ndarray, Sealed("a pod's duration")),
                         placement=workload.placement.copy(), shape=workload.shape.copy())
        if svc is not None:
            self.w = replace(self.w, job_submit=workload.job_submit.copy(), submit=workload.submit.copy(),
                             services=svc.sealed(Sealed("a service's demand (demand_now: now's)")))
        self._compiled_shape = workload.shape
        self._shape_of: dict[tuple[int, int], int] = {}  # (compiled shape, placement) -> shape
        self._n_shapes = int(workload.shape.max()) + 1 if workload.n_pods else 0
        self.cluster = cluster
        self.seed = int(seed)
        self.horizon = float(horizon_s)
        self.now = 0.0
        self.state = ClusterState(cluster)
        self._cloud = Cloud(cluster, self.state, self.seed)
        self.cloud = ProviderFacade(self._cloud, lambda: self.now)
        rng = np.random.default_rng([self.seed, 1])
        self.rng = np.random.default_rng([self.seed, 2])
        #: tie-break order among equally scored nodes, random per seed (as the FGD simulator)
        self.node_rank = rng.permutation(self.state.n_slots)
        w = workload
        self.pod_status = np.full(w.n_pods, NOT_ARRIVED, np.int8)
        self.pod_node = np.full(w.n_pods, -1, np.int32)
        self.pod_gpus: list[np.ndarray | None] = [None] * w.n_pods
        self.pod_start = np.full(w.n_pods, np.nan)
        self.pod_end = np.full(w.n_pods, np.nan)
        self.pod_epoch = np.zeros(w.n_pods, np.int32)
        self.pod_reason = np.full(w.n_pods, -1, np.int8)
        self.job_ready_bound = np.zeros(w.n_jobs, np.int32)  # bound pods on ready nodes
        self.job_placed = np.zeros(w.n_jobs, np.int32)  # pods with a node (bound, running or done)
        self.job_anchor = np.full(w.n_jobs, -1, np.int64)  # the node of one of them (-1: none)
        self.job_started = np.full(w.n_jobs, np.nan)
        self.job_done = np.zeros(w.n_jobs, np.int32)
        self.job_finished = np.full(w.n_jobs, np.nan)
        self.queue: list[tuple[tuple, int]] = []  # (the QueueSort plugin's key, job), sorted
        self.queue_sort: QueueSort | None = None  # the scheduler's QueueSort plugin (`order_queue`)
        self._queue_entry: dict[int, tuple[tuple, int]] = {}  # a queued job's entry in `queue`
        self._queued_jobs: np.ndarray | None = None  # the queue's jobs as an array, until it changes
        self.in_queue = np.zeros(w.n_jobs, bool)
        order = np.lexsort((np.arange(w.n_jobs), w.job_submit))
        self.arrival_order = order[w.job_service[order] < 0]  # replica slots arrive when created
        self.job_never_fits = np.bincount(w.job, weights=w.never_fits, minlength=w.n_jobs) > 0
        self.next_arrival = 0
        self.gate: Callable[[int], None] | None = None  # an admission layer's arrival gate (`gate_arrivals`)
        self.withdraw: Callable[[int], None] | None = None  # ... and what it hears of deleted replicas
        self.may_preempt = False  # a loop that may preempt said so (`allow_preemption`)
        self.job_admitted = np.full(w.n_jobs, np.nan)  # when a job's pods first reached the scheduler
        self.job_admissions = np.zeros(w.n_jobs, np.int32)  # times `admit` let a gated job through
        self.job_reserved = np.full(w.n_jobs, np.nan)  # its quota's last reservation before its admission
        self.arrived_version = 0  # bumps when jobs arrive or re-enter the queue
        self.node_pods: list[set[int]] = [set() for _ in range(self.state.n_slots)]
        self.held = np.zeros(self.state.n_slots, np.int64)  # GPU milli held by unstarted jobs
        self.in_gang = w.job_min_member[w.job] > 1
        self.gang_pods_on = np.zeros(self.state.n_slots, np.int32)  # bound or running gang members
        self.gpus_on = np.zeros(self.state.n_slots, np.int64)  # GPUs (a share counts 1) of bound or running pods
        self.held_ready = 0  # ... on ready nodes
        #: overprovisioning placeholders (pause pods, harness/services/buffers.py): per pod, and
        #: the GPU milli their running pods hold per node and in all (running: on a ready node)
        self.placeholder = w.job_placeholder[w.job]
        self.buffer_on = np.zeros(self.state.n_slots, np.int64)
        self.buffer_ready = 0
        self.frag = np.zeros(self.state.n_slots)  # F_n of ready nodes (0 elsewhere)
        self.frag_ready = 0.0
        self._frag_memo: dict[tuple, float] = {}
        self.node_instance = np.full(self.state.n_slots, -1, np.int64)
        self.node_requested_at = np.full(self.state.n_slots, np.nan)  # when a loop asked for the node
        self.nodes: list[NodeRecord] = []
        self.last_scale_up = -np.inf
        self._heap: list = []
        self._seq = itertools.count()
        self.n_events = 0  # events and job arrivals processed (for throughput figures)
        gpus_all = w.gpus.astype(np.int64)
        self.target = target or TargetWorkload.from_pods(w.cpu, gpus_all, w.milli, w.model_mask)
        n_svc = 0 if svc is None else svc.n
        self.replicas = np.zeros(n_svc, np.int64)  # created replicas per service (spec.replicas)
        self.replicas_ready = np.zeros(n_svc, np.int64)
        self.replicas_recommended = np.zeros(n_svc, np.int64)  # the replica autoscaler's (`ReplicaLoop`)
        self.replica_created = np.zeros(w.n_jobs, bool)  # per job: a replica slot in use
        self.job_ready_at = np.full(w.n_jobs, np.nan)  # when a replica became ready (nan: it is not)
        self._demand = np.zeros(n_svc)  # each service's demand now (0 before its first window)
        if svc is not None:
            for s_, first in enumerate(svc.demand_bounds[:-1].tolist()):
                self.at(float(svc.demand_start[first]), self._demand_window, s_, first)  # then one after another
        self.acct = Accounting(self, timeline_interval_s)
        if svc is not None:
            self.acct.services = self._svc_acct = ServiceAccounting(self)
        for p, pool in enumerate(cluster.pools):
            if pool.min_size:
                for n in self._cloud.free_slots(p)[:pool.min_size]:
                    self._add_node(int(n), ready=True)

    # ---- events ------------------------------------------------------------------------
    def at(self, time: float, fn, *args) -> None:
        """Schedule fn(*args) at `time` (events at one instant run in scheduling order)."""
        heapq.heappush(self._heap, (float(time), next(self._seq), fn, args))

    def next_event_time(self) -> float:
        t = self._heap[0][0] if self._heap else np.inf
        if self.next_arrival < len(self.arrival_order):
            t = min(t, self.w.job_submit[self.arrival_order[self.next_arrival]])
        return t

    def advance_to(self, t: float) -> None:
        """Integrate metrics up to t, then run the events and arrivals due at t."""
        self.acct.advance(t)
        self.now = t
        while self._heap and self._heap[0][0] <= t:
            _, _, fn, args = heapq.heappop(self._heap)
            fn(*args)
            self.n_events += 1
        order, w = self.arrival_order, self.w
        while self.next_arrival < len(order) and w.job_submit[order[self.next_arrival]] <= t:
            self._arrive(int(order[self.next_arrival]))
            self.next_arrival += 1
            self.n_events += 1

    # ---- jobs and pods -----------------------------------------------------------------
    def _arrive(self, j: int) -> None:
        pods = self.w.job_pods[j]
        if self.job_never_fits[j]:
            self.pod_status[pods] = REFUSED  # no node type can ever hold it: refused, not waited on
            return
        self.pod_status[pods] = PENDING
        if self.gate is not None:  # held until the admission layer lets the job through (`admit`)
            self.acct.set_reasons(pods, PendingReason.NOT_ADMITTED)
            self.gate(j)
            return
        self.job_admitted[j] = self.now
        if len(pods) == 1:
            self.acct.set_reason(int(pods[0]), PendingReason.SHORTAGE)
        else:
            self.acct.set_reasons(pods, PendingReason.SHORTAGE)
        self._enqueue(j)

    def gate_arrivals(self, gate: Callable[[int], None], withdraw: Callable[[int], None]) -> None:
        """From now on an arriving job is handed to `gate` (its pods pending, not admitted)
        instead of the scheduler's queue: an admission layer in front of the scheduler
        (Kueue) lets it through with `admit`. A replica deleted once it arrived is handed to
        `withdraw`: its workload is gone from the layer's books."""
        self.gate, self.withdraw = gate, withdraw

    def allow_preemption(self) -> None:
        """A loop that may preempt (`evict`) says so on attach: its runs report preemptions."""
        self.may_preempt = True

    def admit(self, j: int, nodes: np.ndarray | None = None) -> None:
        """An arrived job's pending pods reach the scheduler's queue (its admission), kept to
        the slots of the mask `nodes` (None: any), as Kueue writes the node labels of the
        flavor it assigned into the pods' nodeSelector."""
        if math.isnan(self.job_admitted[j]):
            self.job_admitted[j] = self.now
        self.job_admissions[j] += 1
        self._keep_to(j, 0 if nodes is None else self.state.placement(nodes))
        self.acct.set_reasons(self.unbound_pods(j), PendingReason.SHORTAGE)
        self._enqueue(j)

    def reserve(self, j: int) -> None:
        """An admission layer reserved quota for gated job j, its admission checks still to
        pass: the wait until its first admission is reported (the last reservation's)."""
        if math.isnan(self.job_admitted[j]):
            self.job_reserved[j] = self.now

    def _keep_to(self, j: int, placement: int) -> None:
        """Job j's pods may use only the nodes of `placement` (0: any). Their shape changes
        with it (a shape per compiled shape and placement), so pods kept to different nodes
        are never alike for the filters' and autoscalers' per-shape shortcuts."""
        w, pods = self.w, self.w.job_pods[j]
        if (w.placement[pods] == placement).all():
            return
        w.placement[pods] = placement
        compiled = self._compiled_shape[pods]
        if placement == 0:
            w.shape[pods] = compiled
            return
        kinds, inverse = np.unique(compiled, return_inverse=True)
        ids = [self._shape_of.setdefault((s, placement), self._n_shapes + len(self._shape_of)) for s in kinds.tolist()]
        w.shape[pods] = np.array(ids, np.int32)[inverse.ravel()]

    def order_queue(self, queue_sort: QueueSort) -> None:
        """Keep the queue in the order of this QueueSort plugin (the scheduler's, on attach)."""
        self.queue_sort = queue_sort

    def _enqueue(self, j: int) -> None:
        if not self.in_queue[j]:
            assert self.queue_sort is not None, "the scheduler orders the queue when it attaches"
            entry = self._queue_entry[j] = (self.queue_sort.key(self.w, j), j)
            insort(self.queue, entry)
            self._queued_jobs = None
            self.in_queue[j] = True
            self.arrived_version += 1

    def dequeue(self, j: int) -> None:
        if self.in_queue[j]:
            self.queue.remove(self._queue_entry.pop(j))
            self._queued_jobs = None
            self.in_queue[j] = False

    def queued_jobs(self) -> np.ndarray:
        """The queued jobs in queue order, as an array (read-only: shared until the queue changes)."""
        if self._queued_jobs is None:
            self._queued_jobs = np.fromiter((j for _, j in self.queue), np.int64, len(self.queue))
            self._queued_jobs.flags.writeable = False
        return self._queued_jobs

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
        self.gang_pods_on[n] += self.in_gang[p]
        self.gpus_on[n] += w.gpus[p]
        self.acct.set_reason(p, PendingReason.BOOTING)
        if math.isnan(self.job_started[j]):
            self._hold(n, int(w.milli[p]) * len(gpu_idx))
        if st.status[n] == READY:
            self._bound_on_ready(p)
        self._refrag(n)
        if self.job_placed[j] == len(w.job_pods[j]):  # no pod of it is pending any more
            self.dequeue(j)

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

    def unbind(self, p: int) -> None:
        """Release a bound or running pod back to pending (gang timeout, rollback, eviction)."""
        w, st = self.w, self.state
        j, n = int(w.job[p]), int(self.pod_node[p])
        gpu_idx = self.pod_gpus[p]
        assert gpu_idx is not None, "a bound pod holds its devices"
        if math.isnan(self.job_started[j]):
            self._hold(n, -int(w.milli[p]) * len(gpu_idx))
        if st.status[n] == READY:
            self.job_ready_bound[j] -= 1
        if self.placeholder[p] and self.pod_status[p] == RUNNING:
            self._buffer(n, p, -1)
        st.release(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
        self.node_pods[n].discard(p)
        self.gang_pods_on[n] -= self.in_gang[p]
        self.gpus_on[n] -= w.gpus[p]
        self._refrag(n)
        self.pod_node[p] = -1
        self.pod_gpus[p] = None
        self.pod_status[p] = PENDING
        self.job_placed[j] -= 1
        if self.job_placed[j] == 0:
            self.job_anchor[j] = -1
        self.pod_epoch[p] += 1
        self.pod_start[p] = np.nan
        if not math.isnan(self.job_ready_at[j]):  # a ready replica off its node serves no more
            self._unready(j)
        self.acct.set_reason(p, PendingReason.SHORTAGE)
        self._enqueue(j)

    def unbind_many(self, pods: np.ndarray | list[int]) -> None:
        """`unbind` each of these distinct bound or running pods, in turn: the same outcome bit
        for bit, the bookkeeping in vector steps. Only what a float or a node's own sequence
        depends on goes pod by pod, in order: each pod's release of its node and the node's
        fragmentation (`frag_ready` is a running sum, and a node's F_n after each of its pods)."""
        w, st = self.w, self.state
        pods = np.asarray(pods, np.int64)
        if len(pods) < UNBIND_IN_TURN_BELOW:  # a few pods: cheaper one by one than in ~30 vector steps
            for p in pods.tolist():
                self.unbind(p)
            return
        status = self.pod_status[pods]
        assert ((status == BOUND) | (status == RUNNING)).all(), "only pods on a node are unbound"
        jobs, nodes = w.job[pods], self.pod_node[pods].astype(np.int64)
        devices = [g for p in pods.tolist() if (g := self.pod_gpus[p]) is not None]
        assert len(devices) == len(pods), "a bound pod holds its devices"
        milli = w.milli[pods].astype(np.int64) * np.array([len(g) for g in devices], np.int64)
        ready = st.status[nodes] == READY
        waiting = np.isnan(self.job_started[jobs])  # its pods' devices count as held (`_hold`)
        np.subtract.at(self.held, nodes[waiting], milli[waiting])
        self.held_ready -= int(milli[waiting & ready].sum())
        np.subtract.at(self.job_ready_bound, jobs[ready], 1)
        buffer = self.placeholder[pods] & (status == RUNNING)
        if buffer.any():
            np.subtract.at(self.buffer_on, nodes[buffer], milli[buffer])
            self.buffer_ready -= int(milli[buffer].sum())
        for p, n, cpu, mem, m, g in zip(pods.tolist(), nodes.tolist(), w.cpu[pods].tolist(), w.mem[pods].tolist(),
                                        w.milli[pods].tolist(), devices, strict=True):
            st.release(n, cpu, mem, g, m)
            self.node_pods[n].discard(p)
            self.pod_gpus[p] = None
            self._refrag(n)
        np.subtract.at(self.gang_pods_on, nodes, self.in_gang[pods].astype(self.gang_pods_on.dtype))
        np.subtract.at(self.gpus_on, nodes, w.gpus[pods])
        self.pod_node[pods] = -1
        self.pod_status[pods] = PENDING
        np.subtract.at(self.job_placed, jobs, 1)
        self.job_anchor[jobs[self.job_placed[jobs] == 0]] = -1
        self.pod_epoch[pods] += 1
        self.pod_start[pods] = np.nan
        order = [int(j) for j in dict.fromkeys(jobs.tolist())]  # the jobs, in the order of their first pod
        for j in order:
            if not math.isnan(self.job_ready_at[j]):  # a ready replica off its node serves no more
                self._unready(j)
        self.acct.set_reasons(pods, PendingReason.SHORTAGE)
        for j in order:
            self._enqueue(j)

    def evict(self, pods: np.ndarray) -> None:
        """Preempt these bound or running pods: each goes back to pending and restarts from
        scratch. A gang goes whole: every member that has a node or finished goes back, and it
        must gather its quorum again (a job with no pod left on a node starts again: its
        `job_started` becomes its next start). The accelerator work the running (and, in a gang,
        the finished) pods of the trace did is lost, and each job touched counts one preemption."""
        w = self.w
        assert np.isin(self.pod_status[pods], (BOUND, RUNNING)).all(), "only pods on a node are evicted"
        jobs = np.unique(w.job[pods])
        gang = w.job_min_member[jobs] > 1
        members = w.pods_of(jobs[gang]) if gang.any() else pods[:0]
        singles = pods[~self.in_gang[pods]]
        out = np.union1d(members[self.pod_status[members] != PENDING], singles)
        # a placeholder did no work, and a replica's serving is not lost work (its unserved
        # demand while it cold-starts again is the service metrics'): neither loses any
        work = out[~self.placeholder[out] & (w.job_service[w.job[out]] < 0)]
        running, done = work[self.pod_status[work] == RUNNING], work[self.pod_status[work] == DONE]
        ran = np.r_[self.now - self.pod_start[running], self.pod_end[done] - self.pod_start[done]]
        gpu_milli = w.gpus[np.r_[running, done]].astype(np.float64) * w.milli[np.r_[running, done]]
        pause = w.job_placeholder[jobs]
        self.acct.preempted(jobs[~pause], float(ran @ gpu_milli))
        self.acct.placeholder_preemptions += int(pause.sum())
        self.unbind_many(out[self.pod_status[out] != DONE])
        if len(done):  # finished members of a preempted gang run again
            self.pod_status[done] = PENDING
            self.pod_node[done] = -1
            self.pod_end[done] = self.pod_start[done] = np.nan
            self.pod_epoch[done] += 1
            for p in done.tolist():
                self.pod_gpus[p] = None
            np.subtract.at(self.job_done, w.job[done], 1)
            np.subtract.at(self.job_placed, w.job[done], 1)
            np.subtract.at(self.job_ready_bound, w.job[done], 1)  # it ran: it was bound on a ready node
            self.acct.set_reasons(done, PendingReason.SHORTAGE)
            for j in np.unique(w.job[done]).tolist():
                if self.job_placed[j] == 0:
                    self.job_anchor[j] = -1
                self._enqueue(j)
        self.job_started[jobs[self.job_placed[jobs] == 0]] = np.nan  # none of it runs: it starts again

    def start_job(self, j: int) -> None:
        """min_member pods are bound on ready nodes: the job starts, its duration runs from now."""
        self.job_started[j] = self.now
        pods = self.w.job_pods[j]
        for p in (pods if len(pods) == 1 else pods[self.pod_status[pods] == BOUND]).tolist():
            self._hold(int(self.pod_node[p]), -int(self.w.milli[p]) * len(self.pod_gpus[p]))
            self._run(p)

    def _run(self, p: int) -> None:
        n = int(self.pod_node[p])
        if self.state.status[n] != READY:
            return  # planned on a booting node: runs when the node is ready
        self.pod_status[p] = RUNNING
        self.pod_start[p] = self.now
        self.acct.set_reason(p, -1)
        if self.placeholder[p]:  # holds room, does no work: its node is not used by it
            self._buffer(n, p, 1)
            return
        self.nodes[self.node_instance[n]].used = True
        if math.isfinite(self._duration[p]):
            self.at(self.now + self._duration[p], self._finish, p, int(self.pod_epoch[p]))
        elif self.services is not None and (s := int(self.w.job_service[self.w.job[p]])) >= 0:
            self.at(self.now + self.services.cold_start[s], self._replica_ready, p, int(self.pod_epoch[p]))

    def _finish(self, p: int, epoch: int) -> None:
        if epoch != self.pod_epoch[p] or self.pod_status[p] != RUNNING:
            return
        w, n, j = self.w, int(self.pod_node[p]), int(self.w.job[p])
        gpu_idx = self.pod_gpus[p]
        assert gpu_idx is not None, "a running pod holds its devices"
        self.state.release(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
        self.node_pods[n].discard(p)
        self.gang_pods_on[n] -= self.in_gang[p]
        self.gpus_on[n] -= w.gpus[p]
        self._refrag(n)
        self.pod_status[p] = DONE
        self.pod_end[p] = self.now
        self.job_done[j] += 1
        if self.job_done[j] == len(w.job_pods[j]):
            self.job_finished[j] = self.now

    # ---- service replicas ---------------------------------------------------------------
    def demand_now(self) -> np.ndarray:
        """Each service's demand now (units per second): the window holding `now`, never a
        later one (a copy: loops may keep it)."""
        return self._demand.copy()

    def _demand_window(self, s: int, i: int) -> None:
        """Service s's demand window i starts: an event, so metrics integrate exactly across it."""
        svc = self.services
        assert svc is not None, "only a trace's services have demand windows"
        self._demand[s] = svc.demand_value[i]
        if i + 1 < svc.demand_bounds[s + 1]:
            self.at(svc.demand_start[i + 1], self._demand_window, s, i + 1)

    def create_replicas(self, s: int, k: int) -> None:
        """k dormant replica slots of service s (the lowest first) arrive now, as any
        arrival: refused if no node type could hold them, else to the scheduler's queue."""
        svc = self.services
        assert svc is not None, "only a trace's services have replicas"
        slots = svc.slots(s)
        new = slots[~self.replica_created[slots]][:k]
        assert len(new) == k, f"service {svc.name[s]}: {k} replicas asked for, {len(new)} slots dormant"
        self.replica_created[new] = True
        self.replicas[s] += k
        self._svc_acct.created[s] += k
        self.w.job_submit[new] = self.now
        self.w.submit[self.w.pods_of(new)] = self.now
        self.job_admitted[new] = self.job_reserved[new] = np.nan  # a new pod: its admission is to come
        for j in new.tolist():
            self._arrive(j)

    def delete_replicas(self, s: int, k: int) -> None:
        """k replicas of service s leave now, in ReplicaSet's order (`deletion_order`). A deleted
        replica releases its node as a finished pod would (no preemption, no work lost) and its
        slot becomes dormant again (its epoch bumped: its pending events are void)."""
        svc = self.services
        assert svc is not None, "only a trace's services have replicas"
        slots = svc.slots(s)
        live = slots[self.replica_created[slots]]
        assert len(live) >= k, f"service {svc.name[s]}: {k} replicas to delete, {len(live)} created"
        pods = self.w.pods_by_job[self.w.job_bounds[live]]  # a slot is one pod
        victims = live[deletion_order(self, pods)[:k]]
        for j in victims.tolist():
            p = int(self.w.job_pods[j][0])
            if self.pod_status[p] in (BOUND, RUNNING):
                self.unbind(p)  # releases the node (and readiness); queues the slot, dequeued below
            self.dequeue(j)
            self.pod_status[p] = NOT_ARRIVED
            self.pod_epoch[p] += 1
            self.acct.set_reason(p, -1)
            self.job_started[j] = np.nan
            if self.withdraw is not None:
                self.withdraw(j)
        self.replica_created[victims] = False
        self.replicas[s] -= k
        self._svc_acct.deleted[s] += k

    def _replica_ready(self, p: int, epoch: int) -> None:
        """A replica's cold start is over (image pulled, model loaded): it serves."""
        if epoch != self.pod_epoch[p] or self.pod_status[p] != RUNNING:
            return
        j = int(self.w.job[p])
        self.job_ready_at[j] = self.now
        self.replicas_ready[self.w.job_service[j]] += 1
        self._svc_acct.cold_starts[self.w.job_service[j]] += 1

    def _unready(self, j: int) -> None:
        self.job_ready_at[j] = np.nan
        self.replicas_ready[self.w.job_service[j]] -= 1

    # ---- nodes -------------------------------------------------------------------------
    def provision(self, p: int, count: int, atomic: bool, slots: np.ndarray | None = None) -> np.ndarray:
        """Ask the cloud for nodes of pool p; accepted nodes boot (a phantom, forever). Returns
        the accepted slots: what the provider said yes to, phantoms included."""
        slots, delays = self._cloud.request(p, count, atomic, self.now, slots)
        for n, d in zip(slots.tolist(), delays.tolist(), strict=True):
            self._add_node(n, ready=False)
            if math.isfinite(d):
                self.at(self.now + d, self._node_ready, n, self.node_instance[n])
        if len(slots):
            self.last_scale_up = self.now
        return slots

    def _add_node(self, n: int, ready: bool) -> None:
        self.state.add_node(n, ready)
        self.node_instance[n] = len(self.nodes)
        self.node_requested_at[n] = self.now
        self.nodes.append(NodeRecord(slot=n, pool=int(self.state.slot_pool[n]), requested_at=self.now,
                                     ready_at=self.now if ready else np.nan))
        self.held[n] = 0
        self._refrag(n)

    def _node_ready(self, n: int, instance: int) -> None:
        if self.node_instance[n] != instance or self.state.status[n] != BOOTING:
            return
        self.state.make_ready(n)
        self.held_ready += int(self.held[n])
        self.nodes[instance].ready_at = self.now
        self._refrag(n)
        for p in sorted(self.node_pods[n]):  # pods planned onto this node while it booted
            if self.pod_status[p] == BOUND:
                self._bound_on_ready(int(p))

    def remove_node(self, n: int) -> None:
        """Remove node n. On a node still booting, the pods planned there first go back to the
        queue (a loop giving up on a node that does not come up)."""
        if self.state.status[n] == BOOTING:
            self.unbind_many(sorted(self.node_pods[n]))
        self._set_frag(n, 0.0)
        self.state.remove_node(n)
        self._cloud.released(n)
        self.nodes[self.node_instance[n]].removed_at = self.now
        self.node_instance[n] = -1
        self.node_requested_at[n] = np.nan
        self.held[n] = 0

    def pods_on(self, n: int) -> list[int]:
        return sorted(self.node_pods[n])

    def _buffer(self, n: int, p: int, sign: int) -> None:
        """Placeholder p starts (+1) or stops (-1) running on node n (a ready node)."""
        gpu_idx = self.pod_gpus[p]
        assert gpu_idx is not None, "a running pod holds its devices"
        milli = sign * int(self.w.milli[p]) * len(gpu_idx)
        self.buffer_on[n] += milli
        self.buffer_ready += milli

    def _hold(self, n: int, milli: int) -> None:
        """GPU milli on node n held by pods of a job that has not started."""
        self.held[n] += milli
        if self.state.status[n] == READY:
            self.held_ready += milli

    def _set_frag(self, n: int, value: float) -> None:
        self.frag_ready += value - self.frag[n]
        self.frag[n] = value

    def _refrag(self, n: int) -> None:
        st = self.state
        if st.status[n] != READY:
            self._set_frag(n, 0.0)
            return
        # F_n depends only on the node's type, free CPU and multiset of free GPU milli
        key = (int(st.slot_type[n]), int(st.cpu_free[n]), *sorted(st.gpu_free[n, :st.gpu_cap[n]].tolist()))
        f = self._frag_memo.get(key)
        if f is None:
            if len(self._frag_memo) >= 1 << 18:
                self._frag_memo.clear()  # bounded memory on long replays
            f = self._frag_memo[key] = node_fragmentation(
                st.gpu_free[n:n + 1], st.gpu_cap[n:n + 1], st.cpu_free[n:n + 1], st.model_bit[n:n + 1], self.target)[0]
        self._set_frag(n, f)

    # ---- the run -----------------------------------------------------------------------
    def run(self, loop: Loop, progress=None) -> None:
        """Replay until the horizon: events, arrivals, then the loop's step at each instant.

        A loop that wakes on a cadence (a scan every s seconds) may have nothing it could change
        over a long quiet stretch: it hands over those wake-ups (`loop.idle_ticks(start,
        before)`, all before the next event), and they pass in bulk: the loop's cadence moves
        past them and the metrics integrate as if it had stepped at each one."""
        loop.attach(self)
        self.advance_to(0.0)
        loop.step(self, 0.0)
        while True:
            t_event = self.next_event_time()
            t = min(t_event, loop.next_wakeup(self.now))
            if t > self.horizon or not math.isfinite(t):
                break
            if t < t_event:
                ticks = loop.idle_ticks(t, min(t_event, np.nextafter(self.horizon, np.inf)))
                if len(ticks):
                    self.acct.advance_steps(ticks)
                    self.now = float(ticks[-1])
                    if progress is not None:
                        progress(self.now)
                    continue
            self.advance_to(t)
            loop.step(self, t)
            if progress is not None:
                progress(t)
        self.acct.finish()
        self.now = self.horizon
        for rec in self.nodes:
            if np.isnan(rec.removed_at):
                rec.removed_at = self.horizon
