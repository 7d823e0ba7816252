"""A Cluster-Autoscaler-like autoscaler: its own cadence, its own view of a pod.

Every `scan_interval_s` it looks at the pods the scheduler left pending, drops those that fit
capacity that exists or is being provisioned, estimates per pool how many new nodes the rest
need, picks one pool with an expander (harness/autoscalers/expanders.py; least-waste by default, as
Cluster Autoscaler since 1.33), caps the count by the cluster-wide limits (max nodes, cores and
memory in total) and asks the cloud. A pool whose request came back short is backed off,
exponentially as upstream's node-group backoff (harness/autoscalers/backoff.py: 5 min doubling to 30
min, forgotten 3 h after its last failure or once its scale-up finished: every node asked of
it is up). A node still booting `max_node_provision_time_s` after it was asked for (a silent
provider's shortage) is deleted and its pool backed off, as upstream's scale-up timeout
(clusterstate's expired scale-up requests, removeOldUnregisteredNodes); until then it counts
as capacity on its way.
One simulator answers both questions, as upstream's ClusterSnapshot does for the filter-out
step and the estimator: the same view of a pod, the same first-fit packer (harness/whatif.py).
The estimator is upstream's binpacking estimator: equivalence groups in decreasing size
relative to the pool's template (CPU/allocatable + memory/allocatable; GPUs are not in the
score), each group placed on the nodes this estimate opened, then on new nodes while a new node
takes at least one pod, up to the pool's free slots (the limiter).
Both packings go by pod equivalence group, as Cluster Autoscaler's: the pending pods
identical in its view are packed at once (exact per-node counts, one vector bind), so a scan
costs O(pod shapes), not O(pending pods).
Scale-down removes nodes whose accelerator utilisation stayed under a threshold long enough.

Its view of a pod is set by switches, all off by default as in typical deployments:
  topology_aware     sees NVLink/NUMA/NIC claims (else counts GPUs as an integer);
  sharing_aware      packs GPU shares and partitions per device (else rounds each up to a GPU);
  dra_aware          in a DRA cluster (harness/dra/layer.py), on by default as upstream: packs
                     pods by their ResourceClaims with the scheduler's allocator, a template node
                     bringing its node group's ResourceSlices (the two switches above then apply
                     only to pods without claims): the provider's template (`cluster.dra.templates`,
                     else what the type publishes) until a node of the pool has been ready for a
                     minute, then that node's own (harness/autoscalers/node_templates.py); off:
                     the pre-DRA view of the device columns;
  gang_aware         sizes a gang's pods together, all or nothing (else pod by pod);
  reservation_aware  prefers pools with free committed slots and prices them at 0 (and keeps
                     committed nodes, as `keep_committed`);
  keep_committed     never scales a committed node down: it is billed whether it runs or not
                     (the merged loop's rule; what an operator's min_size does for a pool that
                     holds nothing but the reservation);
  provisioning_request  gangs become ProvisioningRequests of `provisioning_class`
                     (harness/autoscalers/provisioning_request.py): one per scan, the whole gang
                     at once, its capacity booked in the autoscaler's own snapshot for
                     `booking_s`; the scheduler places the pods by itself. Behind Kueue's
                     ProvisioningRequest check (harness/kueue/provisioning.py) the requests
                     are the workloads Kueue reserved quota for, gangs or not; once admitted,
                     their pods are pending pods like any other to the scale-up.
Two steps of the scheduler-autoscaler interfaces proposed to SIG-Autoscaling (the third,
"requests", is the merged loop):
  scheduler_sees     (a) the autoscaler simulates with the scheduler's full view of a pod (its
                     claims and shares), both for whether a pending pod fits existing or
                     in-flight capacity and for what new nodes it would take;
  scheduler_prefers  (b) the scheduler states which provisionable capacity it prefers for a
                     pod or whole gang (a compatible pool, one rack for a rack-local gang,
                     committed slots first, then the cheapest); the autoscaler asks for
                     exactly that, best-effort, and the scheduler places the pods again.
Defaults follow Cluster Autoscaler's documented ones (scan 10 s, scale-down unneeded 10 min,
utilisation threshold 0.5, delay after add 10 min, node group backoff 5 min doubling to 30 min,
reset after 3 h, no node limit, 320,000 cores and 6,400,000 GiB in total, ProvisioningRequest
booking 10 min).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from harness.autoscalers import plan_price
from harness.autoscalers.backoff import NodeGroupBackoff
from harness.autoscalers.class_fits import ClassFits
from harness.autoscalers.expanders import (
    Chain,
    Expander,
    LeastWaste,
    Option,
    PlannerPrice,
    Reserved,
    SchedulerPreference,
    pod_prices,
)
from harness.autoscalers.node_templates import NodeTemplates
from harness.autoscalers.provision_timeout import ProvisionTimeout
from harness.autoscalers.provisioning_request import BEST_EFFORT_ATOMIC, CHECK_CAPACITY, ProvisioningRequests
from harness.autoscalers.scale_down import ScaleDown
from harness.cloud import Placement
from harness.description import (
    GANG,
    KEEP_COMMITTED,
    PLANNER_PRICE,
    PRE_DRA,
    PROVISIONING_REQUEST,
    RESERVATION,
    SCHEDULER_PREFERS,
    SCHEDULER_SEES,
    SHARING,
    TOPOLOGY,
    Description,
)
from harness.quiet import NO_TICKS, Cadence
from harness.scheduler import Scheduler
from harness.settings import check, component, duration, flag, integer, number, one_of, period
from harness.status import ABSENT, BOOTING, PENDING, READY, Event
from harness.view import SimulationView
from harness.whatif import Snapshot, classes, equivalence_classes, first_fit_count, view_of
from harness.workload import LOCALITY_CODE

if TYPE_CHECKING:  # the buffers' module reads the loops
    from harness.services.buffers import CapacityBuffer

#: upstream's --cores-total and --memory-total maxima (config/const.go DefaultMaxClusterCores,
#: DefaultMaxClusterMemory): 5000 nodes x 64 cores, x 20 GiB per core
MAX_CLUSTER_CORES = 5000 * 64
MAX_CLUSTER_MEMORY_GIB = 5000 * 64 * 20


@dataclass(frozen=True)
class Units:
    """Pending pods grouped as the autoscaler reasons about them, in queue order: unit i is
    pods[bounds[i]:bounds[i + 1]], a whole gang or a single pod. Two arrays, not a list of
    arrays: a scan of thousands of pending pods made, and read, one small array per pod."""

    pods: np.ndarray
    bounds: np.ndarray

    @staticmethod
    def single(pods: np.ndarray) -> Units:
        """Each pod a unit of its own."""
        return Units(pods, np.arange(len(pods) + 1))

    @staticmethod
    def of(unit: np.ndarray) -> Units:
        """One unit of these pods."""
        return Units(unit, np.array([0, len(unit)]))

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.pods[self.bounds[i]:self.bounds[i + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self.pods[a:b] for a, b in zip(self.bounds[:-1].tolist(), self.bounds[1:].tolist(), strict=True))

    def __add__(self, more: Units) -> Units:
        """These units, then `more`."""
        if not len(more):
            return self
        return Units(np.concatenate((self.pods, more.pods)),
                     np.concatenate((self.bounds, more.bounds[1:] + len(self.pods))))

    @property
    def first(self) -> np.ndarray:
        """Each unit's first pod."""
        return self.pods[self.bounds[:-1]]

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.bounds)

    def select(self, keep: np.ndarray) -> Units:
        """The units where `keep` (a mask over units) holds, in order."""
        if len(self.pods) == len(self):  # single pods
            return Units.single(self.pods[keep])
        sizes, starts = self.sizes[keep], self.bounds[:-1][keep]
        ends = np.cumsum(sizes)
        pods = self.pods[np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(starts - (ends - sizes), sizes)]
        return Units(pods, np.concatenate(([0], ends)))


class ClusterAutoscaler:
    SETTINGS = {
        "scan_interval_s": period("seconds between autoscaler scans"),
        "expander": component(Expander, "how the autoscaler picks a pool; null = least-waste; pick one with "
                              "loop/autoscaler/expander=NAME, NAME a file of conf/loop/autoscaler/expander",
                              null=True),
        "topology_aware": flag("the autoscaler sees NVLink/NUMA/NIC claims"),
        "sharing_aware": flag("the autoscaler packs GPU shares per device instead of whole GPUs"),
        "dra_aware": flag("in a DRA cluster, simulate pods' ResourceClaims as the scheduler allocates them "
                          "(upstream's default; false: pre-DRA, device needs as extended resources and node "
                          "selectors)"),
        "gang_aware": flag("the autoscaler sizes a gang's pods together, all or nothing"),
        "reservation_aware": flag("the autoscaler prefers pools with free committed slots"),
        "keep_committed": flag("scale-down never removes a committed node (it is billed whether it runs or not)"),
        "provisioning_request": flag("gangs become ProvisioningRequests"),
        "scheduler_sees": flag("the autoscaler simulates with the scheduler's full view of a pod"),
        "scheduler_prefers": flag("the autoscaler asks for the capacity the scheduler prefers"),
        "booking_s": duration("seconds a ProvisioningRequest's capacity stays booked in the autoscaler's "
                              "snapshot, unless its pods are scheduled first"),
        "provisioning_class": one_of((BEST_EFFORT_ATOMIC, CHECK_CAPACITY),
                                     "what a ProvisioningRequest does: scale up for the whole gang "
                                     "at once, or only check the capacity that exists"),
        "backoff_s": duration("seconds a pool whose request came back short is first skipped (then doubled)"),
        "max_backoff_s": duration("the longest a pool's backoff grows to by doubling"),
        "backoff_reset_s": duration("seconds after its last failure a pool's backoff is forgotten"),
        "max_nodes_total": integer("nodes the cluster may hold in all; 0 = no limit", ge=0),
        "max_cores_total": number("cores the cluster may hold in all", ge=0),
        "max_memory_total_gib": number("GiB of memory the cluster may hold in all", ge=0),
        "max_node_provision_time_s": period("seconds a node may boot before the autoscaler deletes it and backs "
                                            "its pool off (--max-node-provision-time)"),
    }

    def __init__(self, scan_interval_s: float = 10.0, expander: Expander | None = None,
                 topology_aware: bool = False, sharing_aware: bool = False, gang_aware: bool = False,
                 reservation_aware: bool = False, provisioning_request: bool = False,
                 scheduler_sees: bool = False, scheduler_prefers: bool = False,
                 booking_s: float = 600.0, backoff_s: float = 300.0, max_backoff_s: float = 1800.0,
                 backoff_reset_s: float = 10800.0, max_nodes_total: int = 0,
                 max_cores_total: float = MAX_CLUSTER_CORES, max_memory_total_gib: float = MAX_CLUSTER_MEMORY_GIB,
                 scale_down: ScaleDown | None = None, provisioning_class: str = BEST_EFFORT_ATOMIC,
                 max_node_provision_time_s: float = 900.0, dra_aware: bool = True, keep_committed: bool = False):
        check(self, "loop.autoscaler",
              scan_interval_s=scan_interval_s,
              expander=expander, topology_aware=topology_aware, sharing_aware=sharing_aware, gang_aware=gang_aware,
              reservation_aware=reservation_aware, provisioning_request=provisioning_request,
              scheduler_sees=scheduler_sees, scheduler_prefers=scheduler_prefers, booking_s=booking_s,
              backoff_s=backoff_s, max_backoff_s=max_backoff_s, backoff_reset_s=backoff_reset_s,
              max_nodes_total=max_nodes_total, max_cores_total=max_cores_total,
              max_memory_total_gib=max_memory_total_gib, provisioning_class=provisioning_class,
              max_node_provision_time_s=max_node_provision_time_s, dra_aware=dra_aware,
              keep_committed=keep_committed)
        self.dra_aware = bool(dra_aware)
        self.keep_committed = bool(keep_committed or reservation_aware)
        self.scan_interval_s = float(scan_interval_s)
        self.topology_aware, self.sharing_aware = bool(topology_aware), bool(sharing_aware)
        self.gang_aware, self.reservation_aware = bool(gang_aware), bool(reservation_aware)
        self.provisioning_request = bool(provisioning_request)
        self.scheduler_sees, self.scheduler_prefers = bool(scheduler_sees), bool(scheduler_prefers)
        self.booking_s, self.backoff_s = float(booking_s), float(backoff_s)
        self.max_backoff_s, self.backoff_reset_s = float(max_backoff_s), float(backoff_reset_s)
        self.max_nodes_total = int(max_nodes_total)
        self.max_node_provision_time_s = float(max_node_provision_time_s)
        self.max_cores_total, self.max_memory_total_gib = float(max_cores_total), float(max_memory_total_gib)
        self.expander = self._choice(expander or Chain([LeastWaste()]))
        self.scale_down = scale_down or ScaleDown()
        self.provreq = ProvisioningRequests(self, provisioning_class, self.booking_s)
        self.buffer: CapacityBuffer | None = None  # `keep_buffer`

    def keep_buffer(self, buffer: CapacityBuffer) -> None:
        """Read this CapacityBuffer of the services (harness/services/buffers.py): its fake pods
        join every scale-up's pending pods and keep their nodes from scale-down."""
        self.buffer = buffer

    def describe(self) -> Description:
        """The separate loops on it are the ablation's family: each switch on is a capability."""
        priced = isinstance(self.expander, Chain) and any(isinstance(f, PlannerPrice) for f in self.expander.filters)
        on = [(self.topology_aware, TOPOLOGY), (self.gang_aware, GANG), (self.sharing_aware, SHARING),
              (self.reservation_aware, RESERVATION), (self.provisioning_request, PROVISIONING_REQUEST),
              (self.scheduler_sees, SCHEDULER_SEES), (self.scheduler_prefers, SCHEDULER_PREFERS),
              (priced, PLANNER_PRICE), (self.keep_committed and not self.reservation_aware, KEEP_COMMITTED),
              (not self.dra_aware, PRE_DRA)]
        return Description("separate loops", rank=0, switches=tuple(s for flag, s in on if flag), ablation=True)

    def _choice(self, expander: Expander) -> Expander:
        """The expander as the switches make it: the scheduler's preference replaces it; a
        reservation-aware autoscaler runs its chain behind the `Reserved` filter."""
        if self.scheduler_prefers:
            return SchedulerPreference()
        if self.reservation_aware and isinstance(expander, Chain):
            return Chain([Reserved(), *expander.filters], expander.fallback)
        if self.reservation_aware:
            return Chain([Reserved()], expander)
        return expander

    def attach(self, sim: SimulationView, scheduler: Scheduler) -> None:
        self.sim, self.scheduler = sim, scheduler
        seen = self.scheduler_sees or self.scheduler_prefers
        self.view = sim.w if seen else view_of(sim.w, self.topology_aware, self.sharing_aware, self.dra_aware)
        self.view_class = equivalence_classes(self.view)
        self.class_fits = ClassFits(sim.state, self.view, scheduler.really_changed_since)
        n_pools = len(sim.cluster.pools)
        self.backoff = NodeGroupBackoff(n_pools, self.backoff_s, self.max_backoff_s, self.backoff_reset_s)
        self.in_flight = np.zeros(sim.state.n_slots, bool)  # nodes it asked for, not yet seen up
        self.rng = np.random.default_rng([sim.seed, 3])
        self.scale_down.attach(sim)
        self.cadence = Cadence(self.scan_interval_s)  # its quiet key: `_situation` after a scan that did nothing
        self.timeout = ProvisionTimeout(self.max_node_provision_time_s, sim)
        self.scanned_mutations = -1
        self.scanned_at = -np.inf
        self.idle_key: tuple | None = None  # situation in which the last scale-up found nothing to do
        self.provreq_idle_key: tuple | None = None
        self.provreq.attach()
        self.provreq_seen = self.provreq.key()
        self.templates = NodeTemplates(sim, from_nodes=True)  # what it knows of each pool's nodes
        self.fits_pool = self.templates.fits(self.view)  # pools x pods, in its own view
        st, types = sim.state, {t.name: i for i, t in enumerate(sim.cluster.node_types)}
        pool_type = np.array([types[pool.node_type] for pool in sim.cluster.pools], np.int64)
        self.template_cpu, self.template_mem = st.type_cpu[pool_type], st.type_mem[pool_type]  # per pool
        self.template_gpus = st.type_gpus[pool_type] > 0
        self.pod_price = pod_prices(sim.cluster, self.view)  # per pod, for the price expander
        self.expander.attach(sim)
        svc = sim.w.services
        if self.buffer is not None and svc is not None:  # a fake pod is a copy of a service's slot 0
            self.buffer_pod = sim.w.pods_by_job[sim.w.job_bounds[svc.slot_job[svc.slot_bounds[:-1]]]]
            self.gpus_per_replica = svc.gpus_per_replica
        self.scanned_buffer = self._buffer_key()

    # ---- the scan --------------------------------------------------------------------------
    @property
    def next_scan(self) -> float:
        """The next scan on the grid 0, s, 2s, ...; none while there is nothing to do (no
        pending pod or open request, no node on its way to scale-down, no booking, no change
        since the last scan), so an idle cluster costs no steps. An event wakes it at the
        next grid point."""
        sim = self.sim
        now = sim.now
        if (not sim.queue and len(self.scale_down.low) == 0 and not self.provreq.booked and not self.provreq.open()
                and sim.state.mutations == self.scanned_mutations and self.provreq.key() == self.provreq_seen
                and self._buffer_key() == self.scanned_buffer):
            deadline = self.timeout.deadline()  # a node that never came up is still given up
            if not math.isfinite(deadline):
                return np.inf
            now = max(now, deadline)
        return self.cadence.due(now)

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        """The scans from `start` (the next one) on, before `before`, that would provably do what
        the last one did, nothing: no node, arrival or booking changed since, and no backoff,
        booking or scale-down clock runs out. The cadence moves past them."""
        if not self.cadence.quiet(self._situation()):
            return NO_TICKS
        clocks = self.scale_down.clocks()
        clocks += self.backoff.clocks()  # a backoff runs out
        clocks += self.timeout.clocks()  # a node reaches max_node_provision_time_s
        clocks += self.provreq.clocks(self.scanned_at)  # a booking expires, a request retries
        clocks += self.templates.clocks()  # a pool's node has been ready a minute: its template is replaced
        return self.cadence.skip(start, before, clocks)

    def _situation(self) -> tuple:
        """What a scan's outcome depends on, but for time: nodes, arrivals and bookings."""
        return self.sim.state.mutations, self.sim.queue.version, self.provreq.key(), self._buffer_key()

    def _scan_key(self, now: float) -> tuple:
        """What a scale-up's outcome depends on: nodes, arrivals, backoffs, the buffer's count."""
        sim = self.sim
        return sim.state.mutations, sim.queue.version, tuple(self.backoff.allowed(now)), self._buffer_key()

    def _buffer_key(self) -> tuple:
        """The CapacityBuffer's fake pods per service now (() without one)."""
        if self.buffer is None:
            return ()
        rs = self.sim.replicasets
        assert rs is not None, "a CapacityBuffer sizes itself on a trace's services"
        return tuple(self.buffer.pods(rs.replicas, self.gpus_per_replica).tolist())

    def _buffer_units(self) -> Units:
        """The CapacityBuffer's fake pods, service after service, as pending units (appended
        behind the real ones, as its pod list processor appends them)."""
        if self.buffer is None:
            return Units.single(np.zeros(0, np.int64))
        count = np.asarray(self._buffer_key(), np.int64)
        return Units.single(np.repeat(self.buffer_pod, count))

    def _buffer_nodes(self) -> np.ndarray:
        """The nodes the fake pods would occupy, first fit over the nodes that exist: kept from
        scale-down."""
        sim = self.sim
        keep = np.zeros(sim.state.n_slots, bool)
        count = np.asarray(self._buffer_key(), np.int64)
        if not count.any():
            return keep
        present = np.flatnonzero(sim.state.status != ABSENT)
        snap = Snapshot(sim.state, present, usable=np.ones(len(present), bool))
        for s in np.flatnonzero(count).tolist():  # a few services
            keep[present[snap.fit_alike(self.view, int(self.buffer_pod[s]), int(count[s]))]] = True
        return keep

    def scan(self, now: float) -> None:
        self.cadence.ran(now)
        self.scanned_at = now
        if self.templates.refresh(now):  # a node group's template is now a copy of its node, booting ones too
            self.fits_pool = self.templates.fits(self.view)
            self.idle_key = self.provreq_idle_key = None
        if self.sim.cluster.autoscaling:
            self._track_requests(now)
            if self.provisioning_request:
                self.provreq.refresh(now)
                self.provreq.process(now)
            elif self.scheduler_prefers:
                self._gang_requests(now)
            self._scale_up(now)
        booked_for = self.provreq.booked_for
        protect = booked_for >= 0  # booked capacity is not scaled down
        if self.buffer is not None:
            protect = protect | self._buffer_nodes()
        if self.keep_committed:
            protect = protect | self.sim.state.slot_committed  # removing it would save nothing
        self.scale_down.run(now, protect=protect, booked_for=booked_for)
        self.scanned_mutations = self.sim.state.mutations
        self.provreq_seen = self.provreq.key()
        self.scanned_buffer = self._buffer_key()
        self.cadence.rest(self._situation() if self._did_nothing(now) else None)

    def _track_requests(self, now: float) -> None:
        """What its requests came to. A pool whose asked nodes are all up completed its scale-up:
        its backoff record is dropped (upstream's clusterstate removes the backoff when a
        scale-up request is fulfilled). Nodes still booting max_node_provision_time_s after they
        were asked for are deleted and their pool backed off (upstream's scale-up timeout: the
        request expires, RegisterFailedScaleUp backs the node group off,
        removeOldUnregisteredNodes deletes what never registered); each pool once, however
        many of its nodes timed out."""
        sim = self.sim
        status = sim.state.status
        if self.in_flight.any():
            up = self.in_flight & (status == READY)
            self.in_flight &= status == BOOTING
            if up.any():
                waiting = np.bincount(sim.state.slot_pool[self.in_flight], minlength=len(sim.cluster.pools))
                for p in np.unique(sim.state.slot_pool[up]).tolist():
                    if waiting[p] == 0:
                        self.backoff.succeeded(p)
        late = self.timeout.give_up(now, self.provreq.release)  # harness/autoscalers/provision_timeout.py
        if len(late) == 0:
            return
        self.in_flight[late] = False
        for p in np.unique(sim.state.slot_pool[late]).tolist():
            self.backoff.failed(p, now)
        self.idle_key = self.provreq_idle_key = None

    def _did_nothing(self, now: float) -> bool:
        """Scale-up (and gang requests) ended on their idle keys, which hold the node changes
        to the end of the scan: nothing was asked, nothing removed, no backoff or booking set."""
        key = self._scan_key(now)
        if self.idle_key != key:
            return False
        if self.provisioning_request:
            return self.provreq.idle
        if self.scheduler_prefers:
            return self.provreq_idle_key == key
        return True

    def _pending_units(self, gangs: bool | None) -> Units:
        """Pending pods in queue order, grouped as the autoscaler reasons about them:
        whole gangs if gang-aware, else pod by pod. gangs=True/False selects gang jobs only
        or non-gang jobs only (for the ProvisioningRequest split), None takes all."""
        sim, w = self.sim, self.sim.w
        jobs = sim.queue.jobs()
        if gangs is not None:
            jobs = jobs[(w.job_min_member[jobs] > 1) == gangs]
        if len(jobs) == 0:
            return Units.single(np.zeros(0, np.int64))
        pods = self._placeable(w.pods_of(jobs))
        job = w.job[pods]
        whole = (w.job_min_member[job] > 1) & bool(self.gang_aware or gangs)  # the gang is one unit
        if not whole.any():
            return Units.single(pods)
        return Units(pods, np.r_[np.flatnonzero(~whole | np.r_[True, job[1:] != job[:-1]]), len(pods)])

    def _groups(self, units: Units, first: np.ndarray,
                alone: np.ndarray | None = None) -> list[tuple[bool, np.ndarray]]:
        """The order in which the autoscaler packs the units, as (is a group, unit indices).
        As Cluster Autoscaler's pod equivalence groups: the single-pod units of one class (in
        its view) form one group, packed at once where the class first appears in the queue,
        its pods in queue order; multi-pod units (gangs), and the single pods marked `alone`,
        stay units, each at its own place in the queue."""
        single = units.sizes == 1
        if alone is not None:
            single &= ~alone
        at = np.flatnonzero(single)
        c = classes(self.view_class, self.view, first[at])
        if 0 < len(at) == len(units) and (c == c[0]).all():  # the common scan: one class alone
            return [(True, at)]
        _, start, inverse, size = np.unique(c, return_index=True, return_inverse=True, return_counts=True)
        by_class, end = at[np.argsort(inverse, kind="stable")], np.cumsum(size)
        items = [(int(at[s]), True, by_class[e - n:e])
                 for s, e, n in zip(start.tolist(), end.tolist(), size.tolist(), strict=True)]
        items += [(int(i), False, np.array([i])) for i in np.flatnonzero(~single)]
        items.sort(key=lambda item: item[0])
        return [(is_group, idx) for _, is_group, idx in items]

    def _unplaced(self, units: Units) -> Units:
        """Units that fit neither ready nor in-flight capacity (in the autoscaler's view),
        packed first-fit on a what-if snapshot of the nodes that exist, by equivalence group
        (see `_groups`). A single pod of a job with booked nodes (ProvisioningRequest) may use
        those too, so it is packed alone. A group is packed on the nodes where a pod of its
        class fits now (`ClassFits`: the others would take none), and without a unit packed
        alone the snapshot copies those nodes alone: the same placements, at the cost of the
        few nodes each class may use."""
        if not len(units):
            return units
        sim = self.sim
        booked_for = self.provreq.booked_for  # the autoscaler's own bookings
        first = units.first
        booked_jobs = booked_for[booked_for >= 0]
        alone = np.isin(sim.w.job[first], booked_jobs) if len(booked_jobs) else None
        groups = self._groups(units, first, alone)
        left = np.zeros(len(units), bool)
        pods = first[[int(idx[0]) for _, idx in groups]]
        # a group's pods may go only where a pod of its class fits now (`ClassFits`)
        fits = {i: self.class_fits.nodes(c, p) for i, (c, p, (is_group, _)) in
                enumerate(zip(classes(self.view_class, self.view, pods).tolist(), pods.tolist(), groups, strict=True))
                if is_group}
        free = booked_for == -1
        if len(groups) == 1 and groups[0][0]:  # one group: counted on the real state, no snapshot
            idx, usable = groups[0][1], fits[0] & free
            placed = first_fit_count(sim.state, self.view, int(pods[0]), usable, len(idx)) if usable.any() else 0
            left[idx[placed:]] = True
            return units.select(left)
        if len(fits) == len(groups):  # the snapshot holds the nodes some group may use
            slots = np.flatnonzero(np.logical_or.reduce(list(fits.values())))
        else:  # a unit packed alone may use any node
            slots = np.flatnonzero(sim.state.status != ABSENT)
        snap = Snapshot(sim.state, slots, usable=np.ones(len(slots), bool), booked=booked_for[slots])
        for i, (is_group, idx) in enumerate(groups):
            pod = int(pods[i])
            if is_group:
                usable = free[slots] & fits[i][slots]
            if is_group and not usable.any():
                placed = 0
            elif is_group and i == len(groups) - 1:  # the last packing: nothing reads the snapshot after
                placed = first_fit_count(snap.state, self.view, pod, usable, len(idx))
            elif is_group:
                placed = len(snap.fit_alike(self.view, pod, len(idx), usable=usable))
            else:
                left[idx[0]] = snap.fit(self.view, units[idx[0]]) is None
                continue
            left[idx[placed:]] = True
        return units.select(left)

    def _estimate(self, p: int, units: Units,
                  groups: list | None = None) -> tuple[int, int, float, float, float, float]:
        """(new nodes, pods helped, least-waste score, pods helped's price, their share of the
        new nodes and the nodes' GPU milli as plan_price.taken) if pool p alone took the units: upstream's
        binpacking estimate onto empty template nodes of the pool (up to its free slots), by
        equivalence group (`groups`: `_groups` of the units in the view, the same for every
        pool), in the pool's decreasing order (`_ordered`). A group fills the nodes opened so
        far, then new ones, each taking as many as fit; a pod that fits no empty node opens
        none. The score is upstream's waste over the pods helped."""
        sim = self.sim
        preferred = self._preferred_slots(p, units[0]) if len(units) == 1 else None
        slots = sim.cloud.free_slots(p) if preferred is None else preferred
        slots = slots[:len(units.pods)]
        if len(slots) == 0:
            return 0, 0, np.inf, 0.0, 0.0, 0.0
        snap = Snapshot(sim.state, slots, openable=range(len(slots)), devices=self.templates.slot_devices())
        helped, paid = 0, 0.0
        first = units.first
        for is_group, idx in self._ordered(p, groups or self._groups(units, first), first):
            if is_group:
                if self.fits_pool[p, first[idx[0]]]:
                    placed = len(snap.fit_alike(self.view, int(first[idx[0]]), len(idx)))
                    helped += placed
                    paid += placed * float(self.pod_price[first[idx[0]]])  # alike: one price
            else:
                unit = units[idx[0]]
                if self.fits_pool[p, unit].all() and snap.fit(self.view, unit) is not None:
                    helped += len(unit)
                    paid += float(self.pod_price[unit].sum())
        new = np.array(snap.opened, np.int64)
        if len(new) == 0:
            return 0, 0, np.inf, 0.0, 0.0, 0.0
        st = snap.state
        waste = (float(st.cpu_free[new].sum() / st.cpu_cap[new].sum())
                 + float(st.mem_free[new].sum() / st.mem_cap[new].sum()))
        return len(new), helped, waste, paid, *plan_price.taken(st, new)

    def _ordered(self, p: int, groups: list[tuple[bool, np.ndarray]],
                 first: np.ndarray) -> list[tuple[bool, np.ndarray]]:
        """The groups as upstream's DecreasingPodOrderer sorts them for pool p: by the exemplar
        pod's CPU / template CPU + memory / template memory, largest first (GPUs are not in the
        score); equal scores keep queue order (upstream's sort is not stable, so any order)."""
        if len(groups) < 2:
            return groups
        w = self.view
        pods = first[[int(idx[0]) for _, idx in groups]]
        score = w.cpu[pods] / self.template_cpu[p] + w.mem[pods] / self.template_mem[p]
        return [groups[i] for i in np.argsort(-score, kind="stable").tolist()]

    def _option(self, p: int, nodes: int, helped: int, waste: float, paid: float, taken: float,
                gpu_milli: float) -> Option:
        """Pool p's estimate as an expander option, priced in the autoscaler's view: the free
        committed slots it would fill (the lowest free slots: the cloud fills them first) cost
        nothing if it knows of reservations."""
        committed = min(self.sim.cloud.free_committed(p), nodes)
        aware = self.reservation_aware or self.scheduler_prefers
        pool = self.sim.cluster.pools[p]
        return Option(p, nodes, helped, (nodes - committed * aware) * pool.price, waste, committed, pool.priority,
                      paid, int(self.template_cpu[p]), bool(self.template_gpus[p]),
                      int((self.sim.state.status == READY).sum()), pool.price, taken, gpu_milli)

    def _expand(self, options: list[Option]) -> tuple[int, int]:
        """(pool, node count) of the option the expander picks (options is never empty)."""
        best = self.expander.best_option(options, self.rng)
        assert best is not None
        if self.sim.noting:
            pools = self.sim.cluster.pools
            for o in options:
                chosen = " chosen" if o is best else ""
                self.sim.note(Event.OPTION, f"pool={pools[o.pool].name} nodes={o.nodes} helped={o.helped} "
                                            f"price={o.price:.2f} waste={o.waste:.3f}{chosen}")
        return best.pool, best.nodes

    def _candidate_pools(self, now: float) -> list[int]:
        return np.flatnonzero(self.backoff.allowed(now)).tolist()

    # ---- cluster-wide limits (upstream core/scaleup/resource) -----------------------------------
    def _headroom(self) -> tuple[float, float, float]:
        """(nodes, cores, MiB) the cluster may still grow by: the limits less what exists or
        is on its way (upstream counts node groups' target sizes). Cores per node are whole
        cores, rounded up, as upstream reads a node's capacity."""
        st = self.sim.state
        present = st.status != ABSENT
        nodes = np.inf if self.max_nodes_total <= 0 else self.max_nodes_total - int(present.sum())
        cores = self.max_cores_total - float(np.ceil(st.cpu_cap[present] / 1000).sum())
        mib = self.max_memory_total_gib * 1024 - float(st.mem_cap[present].sum())
        return nodes, cores, mib

    def _within_limits(self, p: int, count: int, headroom: tuple[float, float, float]) -> int:
        """How many of `count` new nodes of pool p the limits allow (upstream ApplyLimits; 0 =
        the pool is not an option, as CheckDeltaWithinLimits for one node)."""
        nodes, cores, mib = headroom
        per_cores, per_mib = math.ceil(int(self.template_cpu[p]) / 1000), int(self.template_mem[p])
        allowed = min(count, nodes, cores // per_cores if per_cores else np.inf, mib // per_mib if per_mib else np.inf)
        return max(int(allowed), 0)

    def _scale_up(self, now: float) -> None:
        key = self._scan_key(now)
        if key == self.idle_key:
            return  # nothing changed since a scan that found nothing to add
        requests_are_gangs = self.provisioning_request and self.provreq.source is None  # else admitted pods are pods
        units = self._pending_units(gangs=False if requests_are_gangs or self.scheduler_prefers else None)
        units = self._unplaced(units + self._buffer_units())
        if not len(units):
            self.idle_key = key
            return
        headroom = self._headroom()
        options = []
        if headroom[0] > 0:
            groups = self._groups(units, units.first)
            for p in self._candidate_pools(now):
                if self._within_limits(p, 1, headroom) == 0:
                    continue  # one more node of it would exceed a cluster-wide limit
                estimate = self._estimate(p, units, groups)
                if estimate[0]:
                    options.append(self._option(p, *estimate))
        if not options:
            self.idle_key = key
            return
        p, count = self._expand(options)
        count = self._within_limits(p, count, headroom)
        self._ask(now, p, count, units.pods)

    def _ask(self, now: float, p: int, count: int, pods: np.ndarray, atomic: bool = False,
             placement: Placement | None = None) -> np.ndarray:
        """Ask the cloud for `count` nodes of pool p for the `pods` the scan estimated. A short
        answer backs the pool off at once; the nodes accepted are tracked until they come up
        (`_track_requests`)."""
        granted = np.asarray(self.sim.provision(p, count, atomic=atomic, placement=placement, pods=pods,
                                                template=self.templates.template(p)), np.int64)
        if len(granted) < count:
            self.backoff.failed(p, now)
            self.sim.note(Event.BACKOFF, f"pool={self.sim.cluster.pools[p].name} asked={count} granted={len(granted)}")
        self.in_flight[granted] = True
        return granted

    # ---- gangs as units: what drives a whole-gang request (ProvisioningRequests, the scheduler) ----
    def pending_gangs(self) -> Units:
        """The pending pods of each pending gang, in queue order, a gang per unit."""
        return self._pending_units(gangs=True)

    def queued_gangs(self) -> np.ndarray:
        """The queued gangs, in queue order."""
        jobs = self.sim.queue.jobs()
        return jobs[self.sim.w.job_min_member[jobs] > 1]

    def pending_of(self, j: int) -> np.ndarray:
        """Job j's pending pods it could ever place, in `job_pods` order: its unit among
        `pending_gangs`' (none: it has no unit)."""
        return self._placeable(self.sim.w.job_pods[j])

    def _placeable(self, pods: np.ndarray) -> np.ndarray:
        """The pods among `pods` pending that some node could ever hold, in their order."""
        return pods[(self.sim.pod_status[pods] == PENDING) & ~self.sim.w.never_fits[pods]]

    def scale_up_whole(self, now: float, unit: np.ndarray, atomic: bool) -> np.ndarray | None:
        """Ask for every pod of the unit at once: the pool the expander picks among those (not
        backed off) that could take them all, for the nodes its estimate needs (in the rack
        the scheduler prefers, if it states one); `atomic`: all or nothing where the pool
        honours it. The nodes granted, or None if no pool could take the unit."""
        options = self._whole_unit_options(now, unit)
        if not options:
            return None
        p, count = self._expand(options)
        return self._ask(now, p, count, unit, atomic=atomic, placement=Placement() if self._in_one_rack(unit) else None)

    def _whole_unit_options(self, now: float, unit: np.ndarray) -> list[Option]:
        """An option per pool (not backed off) that could take every pod of the unit at once."""
        options = []
        for p in self._candidate_pools(now):
            estimate = self._estimate(p, Units.of(unit))
            if estimate[0] and estimate[1] == len(unit):
                options.append(self._option(p, *estimate))
        return options

    def _gang_requests(self, now: float) -> None:
        """With `scheduler_prefers` (and no ProvisioningRequests): each pending gang that fits
        nowhere gets its whole capacity asked, best-effort, of the pool the scheduler prefers."""
        key = self._scan_key(now)
        if key == self.provreq_idle_key:
            return  # nothing changed since a pass that asked for nothing
        self.provreq_idle_key = key
        for unit in self._unplaced(self.pending_gangs()):
            if self.scale_up_whole(now, unit, atomic=False) is not None:
                self.provreq_idle_key = None

    def _in_one_rack(self, unit: np.ndarray) -> bool:
        """The scheduler states a rack-local gang's preference for one rack: the nodes are
        asked for in one rack (a compact placement), the provider picks which."""
        w = self.sim.w
        return self.scheduler_prefers and w.job_locality[w.job[unit[0]]] == LOCALITY_CODE["rack"]

    def _preferred_slots(self, p: int, unit: np.ndarray) -> np.ndarray | None:
        """Where the estimate puts a rack-local gang the scheduler states a preference for: the
        free slots of the rack with the most of them (else the pool's)."""
        return self.sim.cloud.free_slots_in_emptiest_rack(p) if self._in_one_rack(unit) else None
