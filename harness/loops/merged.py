"""The merged loop: one planner that places pending work on existing, in-flight and
provisionable capacity in one decision.

Each job (a gang, or a single pod) is planned as a unit, in queue order:
  1. on ready nodes, all members at once (topology, shares, locality understood);
  2. else, on a provisioning tick, on the room it has (free room on ready nodes: a job of
     several pods may fit there in part; then nodes already booting) and new nodes of one pool:
     every pool not backed off is tried (for a rack-local gang, in the pool's rack with the
     most free slots), the cheapest plan wins, committed slots counting as free. Exactly the
     plan's nodes are requested, all or nothing (a rack-local job's as a compact placement:
     the provider picks the slots, and the plan is bound where they came). If no pool can
     hold the whole job, it waits.
A plan's cost weighs dollars against idle accelerators (harness/autoscalers/plan_price.py, which
the separate loops' `planner_price` expander shares): the hourly price of its new nodes
times the job's dominant share of them (CPU, memory or GPU, whichever it takes most of) plus
the share of their GPUs that the demand it sees for the pool would leave idle. That demand is
what a controller knows: the queued pods that fit the pool, and the pods that arrived in the
last `demand_window_s` (by default the scale-down's unneeded time: while a node waits that
long for work, about as much again is likely to arrive). A lone 1-GPU job pays for a whole
node and buys the cheapest; the first of eight pays an eighth of an 8-GPU node, which the seven
behind it fill. Priced by the whole node, each job bought the cheapest small node: on
openb_autoscaled, ~800 two-GPU nodes whose second GPU idled.
The plan is bound at once onto the booting nodes, so the placement is decided once: pods run
when their nodes are ready (a gang when min_member of them are), and a node that a plan
counts on is never scaled down.

Like a real controller it learns the provider's capacity only by asking: it sees a pool's room
(its free slots, max_size minus the nodes present: a limit it configured), never its stock. A
request that comes back short backs the pool off (harness/autoscalers/backoff.py, as the
Cluster-Autoscaler-like loop) and the planner remembers what the pool could hold then (the
nodes present after the grant, its `ceiling`); the job is planned again at once. A pool backed
off is still planned on within its ceiling (a single node where a gang's four failed), and
asked beyond it only once its backoff ran out (a probe: granted in full, the ceiling is
forgotten); the nodes granted are kept,
as in-flight capacity the new plans of that scan count first (cost 0: their boot is under
way); those no plan uses by the scan's end are removed at once (they would only idle through
their boot and the scale-down delay). A node still booting `max_node_provision_time_s` after
it was asked for (a request the provider accepted but never served) is given up, as upstream's
--max-node-provision-time: the pods planned on it (its job's not-started members) go back to
the queue, the node is removed, its pool backed off and its ceiling set to the nodes left.

Among booting and new nodes the plan is first fit (oldest in-flight node first, then new nodes
in slot order), not the score policy: by design. The plan decides how many nodes to buy, so it
packs, as Cluster Autoscaler's binpacking estimator does for its scale-up; a spreading policy
(LeastAllocated) would open a node per pod. The policy places on ready nodes (the `placer`).
"""

from __future__ import annotations

import math

import numpy as np

from harness.autoscalers import plan_price
from harness.autoscalers.backoff import NodeGroupBackoff
from harness.autoscalers.node_templates import NodeTemplates
from harness.autoscalers.plan_price import Demand
from harness.autoscalers.provision_timeout import ProvisionTimeout
from harness.autoscalers.scale_down import ScaleDown
from harness.cloud import Placement
from harness.description import Description
from harness.filters import feasible
from harness.quiet import NO_TICKS, Cadence
from harness.scheduler import Scheduler
from harness.scores import ScorePlugin
from harness.settings import check, duration, number, period
from harness.status import BOOTING, BOUND, NOT_ARRIVED, RUNNING, Event
from harness.view import SimulationView
from harness.whatif import Snapshot
from harness.workload import LOCALITY_CODE


class MergedLoop:
    SETTINGS = {
        "scan_interval_s": period("seconds between the merged loop's scans"),
        "max_node_provision_time_s": number("seconds a node asked for may stay booting before it is given "
                                            "up and its pool backed off", gt=0),
        "backoff_s": duration("seconds a pool whose request came back short is first skipped (then doubled)"),
        "max_backoff_s": duration("the longest a pool's backoff grows to by doubling"),
        "backoff_reset_s": duration("seconds after its last failure a pool's backoff is forgotten"),
        "demand_window_s": duration("seconds of past arrivals a plan counts as demand for the free GPUs of "
                                    "the nodes it buys (0: the queue only)"),
    }

    def __init__(self, placer: Scheduler, scan_interval_s: float = 10.0,
                 scale_down: ScaleDown | None = None, name: str = "merged",
                 max_node_provision_time_s: float = 900.0, backoff_s: float = 300.0,
                 max_backoff_s: float = 1800.0, backoff_reset_s: float = 10800.0,
                 demand_window_s: float = 600.0):
        check(self, "loop", scan_interval_s=scan_interval_s,
              max_node_provision_time_s=max_node_provision_time_s, backoff_s=backoff_s,
              max_backoff_s=max_backoff_s, backoff_reset_s=backoff_reset_s, demand_window_s=demand_window_s)
        self.placer = placer  # whole jobs onto ready nodes: a profile whose gang plugin is Atomic
        self.scan_interval_s = float(scan_interval_s)
        self.max_node_provision_time_s = float(max_node_provision_time_s)
        self.backoff_s, self.max_backoff_s = float(backoff_s), float(max_backoff_s)
        self.backoff_reset_s = float(backoff_reset_s)
        self.demand_window_s = float(demand_window_s)
        self.scale_down = scale_down or ScaleDown()
        self.name = name

    @property
    def policy(self) -> ScorePlugin:
        return self.placer.policy

    def describe(self) -> Description:
        return Description("merged loop (all capabilities, one decision)", rank=2)

    def attach(self, sim: SimulationView) -> None:
        self.sim = sim
        self.placer.attach(sim)
        self.scale_down.attach(sim)
        self.cadence = Cadence(self.scan_interval_s)  # its quiet key: (node changes, arrivals, missing)
        self.timeout = ProvisionTimeout(self.max_node_provision_time_s, sim)
        self.scanned_mutations = -1
        self.scanned_missing = b""  # `_missing_key` at the last scan
        self.planned_at = np.full(sim.w.n_jobs, -1, np.int64)  # layout version of the last failed plan
        self.backoff = NodeGroupBackoff(len(sim.cluster.pools), self.backoff_s, self.max_backoff_s,
                                        self.backoff_reset_s)
        self.allowed = np.ones(len(sim.cluster.pools), bool)  # the pools not backed off at the last scan
        self.ceiling = np.full(len(sim.cluster.pools), np.inf)  # nodes a pool held when it last fell short
        self.templates = NodeTemplates(sim, from_nodes=True)  # what it knows of a pool's nodes: as CA
        self.demand = Demand(sim, self.demand_window_s, self.templates)
        self.scan_now = 0.0  # the instant of the last scan
        self.demand_milli: np.ndarray | None = None  # GPU milli of the demand the scan sees, per pool (`_seen`)

    def next_wakeup(self, now: float) -> float:
        """The next scan on the grid 0, s, 2s, ...; none while idle (nothing queued, no node
        on its way to scale-down, no change since the last scan): an event wakes it."""
        sim = self.sim
        if not sim.cluster.autoscaling:
            return np.inf
        if (sim.queue or len(self.scale_down.low) or sim.state.mutations != self.scanned_mutations
                or self._missing_key() != self.scanned_missing):
            return self.cadence.due(now)
        # idle, but a node asked for may never come up: the scan at its deadline gives it up
        deadline = self.timeout.deadline()
        return self.cadence.due(max(now, deadline)) if math.isfinite(deadline) else np.inf

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        """The scans from `start` (the next one) on, before `before`, that would provably do what
        the last one did, nothing: no node changed and nothing arrived since (every queued job
        already failed to plan on this layout), no node ripens for scale-down, no backoff runs
        out and no node asked for reaches its provision timeout. The cadence moves past them."""
        sim = self.sim
        if not self.cadence.quiet((sim.state.mutations, sim.queue.version, self._missing_key())):
            return NO_TICKS
        clocks = self.scale_down.clocks() + self.backoff.clocks() + self.timeout.clocks() + self.templates.clocks()
        return self.cadence.skip(start, before, clocks)

    def step(self, sim: SimulationView, now: float) -> None:
        self.placer.cycle(now)  # 1. whole jobs onto ready capacity
        # a scan before the cadence's next is never due (`next_wakeup` is that or later)
        if not sim.cluster.autoscaling or now < self.cadence.due(now) or now < self.next_wakeup(now):
            return
        self.cadence.ran(now)
        before = sim.state.mutations
        self._give_up_unserved(now)
        allowed = self.backoff.allowed(now)
        learned = self.templates.refresh(now)  # a pool's nodes seen: its booting ones planned anew too
        if (allowed & ~self.allowed).any() or learned:  # a pool's backoff ran out: every job may plan again
            self.planned_at[:] = -1
        self.allowed = allowed
        self.unplanned: list[int] = []  # nodes of short grants, kept while a plan may use them
        self.scan_now, self.demand_milli = now, None
        for j in sim.queue.jobs().tolist():  # 2. in-flight and provisionable capacity
            if self.planned_at[j] != sim.state.layout_version and not self._provision_for(j):
                self.planned_at[j] = sim.state.layout_version
        self._warm_for_recommended()
        for n in self.unplanned:  # granted short and no plan of this scan took them: not worth booting
            if not sim.node_pods[n]:
                sim.remove_node(n)
        # never remove a node a plan counts on, nor a committed one (removing it saves nothing)
        self.scale_down.run(now, protect=(sim.held > 0) | sim.state.slot_committed)
        self.scanned_mutations = sim.state.mutations
        self.scanned_missing = self._missing_key()
        # a plan binds or provisions and scale-down removes: each changes a node
        self.cadence.rest((sim.state.mutations, sim.queue.version, self.scanned_missing)
                          if sim.state.mutations == before else None)
        self.placer.cycle(now)

    def _seen(self) -> np.ndarray:
        """`_demand` at this scan, found when a plan first needs it (most scans plan nothing) and
        asked before the scan first changes the cluster: what the scan's start saw."""
        if self.demand_milli is None:
            self.demand_milli = self._demand(self.scan_now)
        return self.demand_milli

    def _demand(self, now: float) -> np.ndarray:
        """GPU milli per pool of the demand it sees: the queued pods, those that arrived (or
        replicas created) in the last `demand_window_s` and were placed since, and the replicas
        recommended but not created yet, that a node of the pool could hold."""
        milli = self.demand.seen_milli(now)
        if self.sim.w.services is None:
            return milli
        return milli + self.demand.milli(np.r_[self._recent_replicas(now), self._missing_replicas()])

    # ---- what it learns by asking -----------------------------------------------------
    def _give_up_unserved(self, now: float) -> None:
        """Give up every node still booting `max_node_provision_time_s` after it was asked for
        (harness/autoscalers/provision_timeout.py) and back its pool off, once per node."""
        for n in self.timeout.give_up(now, self._unplan).tolist():
            self._fell_short(int(self.sim.state.slot_pool[n]), now)

    def _unplan(self, n: int) -> None:
        """Return the pods planned on node n to the queue, with their job's other not-started
        members, so the job is planned again as a unit."""
        sim = self.sim
        jobs = {int(sim.w.job[p]) for p in sim.pods_on(n)}
        for j in sorted(jobs):
            pods = sim.w.job_pods[j]
            planned = pods[sim.pod_status[pods] == BOUND]
            if not math.isnan(sim.job_started[j]):  # a started job loses only the pods on n
                planned = planned[sim.pod_node[planned] == n]
            sim.unbind_many(planned)

    def _present(self, p: int) -> int:
        return self.sim.cluster.pools[p].max_size - self.sim.cloud.room(p)

    def _fell_short(self, p: int, now: float) -> None:
        """Pool p could not supply what it was asked: back it off, remember what it holds."""
        self.backoff.failed(p, now)
        self.allowed[p] = False
        self.ceiling[p] = self._present(p)

    # ---- planning over provisionable capacity ---------------------------------------
    def _provision_for(self, j: int) -> bool:
        sim = self.sim
        pods = sim.unbound_pods(j)
        if len(pods) == 0 or sim.w.never_fits[pods].any():
            return False
        best = self._cheapest(j, pods)
        if best is None:
            return False
        count, pool, opened, plan = best
        seen = self._seen()  # before the plan changes the cluster
        if count:
            granted = self._buy(pool, opened, pods, self._placement(j, opened, plan))
            if len(granted) < count:  # short: the granted nodes are in flight for the new plans
                self.unplanned += granted.tolist()
                return self._provision_for(j)
            where = dict(zip(opened, granted.tolist(), strict=True))  # the provider's slots, alike nodes
            plan = [(p, where.get(n, n), gpu_idx) for p, n, gpu_idx in plan]
        for p, n, gpu_idx in plan:
            sim.bind(p, n, gpu_idx)
            self.placer.reserve(sim.state, sim.w, p, n)  # Reserve: e.g. GpuClustering tags planned pods
        self.demand_milli = seen - self.demand.milli(pods)  # planned: no longer queued
        return True

    def _warm_for_recommended(self) -> None:
        """Capacity for the replicas the replica autoscaler recommends and has not created yet
        (its scaling policies let the count up a step per period; KEDA wakes a service at one
        replica): each service's missing replicas are planned as a job would be, on the room it
        has (ready, booting) or new nodes, which it buys now, unbound: the replicas land there
        when they are created. The recommendation is the autoscaler's own, from demand up to
        now; a node bought this way idles through the scale-down delay if demand falls."""
        w = self.sim.w
        if w.services is None:  # no replicas to recommend
            return
        missing = self._missing_replicas()
        self._seen()  # before a plan changes the cluster
        service = w.job_service[w.job[missing]]
        for s in np.unique(service).tolist():
            pods = missing[service == s]
            if w.never_fits[pods].any() or (best := self._cheapest(int(w.job[pods[0]]), pods)) is None:
                continue
            count, pool, opened, _ = best
            if count:
                self._buy(pool, opened, pods)  # short: what was granted is capacity toward them still
            self.demand_milli = self._seen() - self.demand.milli(pods)

    def _missing_key(self) -> bytes:
        """The replicas recommended and not created yet, per service: a change wakes a scan."""
        rs = self.sim.replicasets
        return b"" if rs is None else (rs.recommended - rs.replicas).tobytes()

    def _missing_replicas(self) -> np.ndarray:
        """Pods of the replicas recommended and not created yet: each service's first dormant
        slots (a slot is one pod)."""
        sim = self.sim
        svc, rs = sim.w.services, sim.replicasets
        if svc is None or rs is None:
            return np.zeros(0, np.int64)
        missing = np.maximum(rs.recommended - rs.replicas, 0)
        dormant = svc.slot_job[sim.pod_status[sim.w.pods_of(svc.slot_job)] == NOT_ARRIVED]
        service = sim.w.job_service[dormant]  # ascending: slots are kept by service
        rank = np.arange(len(dormant)) - np.searchsorted(service, service)  # k-th dormant slot of its service
        return sim.w.pods_of(dormant[rank < missing[service]])

    def _recent_replicas(self, now: float) -> np.ndarray:
        """Pods of the replicas created in the last `demand_window_s` and placed since (a
        replica's creation is its slot's submit time, set after `attach` sorted the trace's)."""
        sim = self.sim
        svc = sim.w.services
        if svc is None:
            return np.zeros(0, np.int64)
        pods = sim.w.pods_of(svc.slot_job)
        created = sim.w.job_submit[svc.slot_job]
        placed = (sim.pod_status[pods] == BOUND) | (sim.pod_status[pods] == RUNNING)
        return pods[placed & (created > now - self.demand_window_s) & (created <= now)]

    def _cheapest(self, j: int, pods: np.ndarray):
        """The cheapest plan for job j's `pods` over the room it has and each pool's new nodes:
        (new nodes, pool, their slots, [(pod, node, gpus)]), or None if no pool can hold them."""
        sim = self.sim
        best = None  # (cost, new nodes, pool, slots, plan)
        have = np.concatenate((self._room_on_ready(pods), np.flatnonzero(sim.state.status == BOOTING)))
        weighed = []  # (pool, new nodes, cost) of each feasible plan, for the decision trace
        for pool, slots in self._options(j, pods, len(have) > 0):
            found = self._pack(pods, pool, slots, j, have)
            if found is None:
                continue
            opened, plan, share = found
            cost = self._cost(pool, opened, share)
            weighed.append((pool, len(opened), cost))
            if best is None or (cost, len(opened)) < best[:2]:
                best = (cost, len(opened), pool, opened, plan)
        if best is not None and best[1] and sim.noting:
            self._note_plans(weighed, best[2], len(pods))
        return None if best is None else best[1:]

    def _note_plans(self, weighed: list[tuple], chosen: int | None, helped: int) -> None:
        """The plans that bought nodes, weighed against each other, for the decision trace: the
        pool (none: the room the cluster has), its new nodes and the plan's price per hour."""
        pools = self.sim.cluster.pools
        for pool, nodes, cost in weighed:
            mark = " chosen" if pool == chosen else ""
            name = pools[pool].name if pool is not None else "none"
            self.sim.note(Event.OPTION, f"pool={name} nodes={nodes} helped={helped} plan_price={cost:.2f}{mark}")

    def _placement(self, j: int, opened: list[int], plan: list) -> Placement | None:
        """How a plan's new nodes are asked for: a rack-local job's in one rack, that of the
        nodes it already has in the plan (joining their group) or the provider's pick."""
        if self.sim.w.job_locality[j] != LOCALITY_CODE["rack"]:
            return None
        new = set(opened)
        return Placement(near=min((n for _, n, _ in plan if n not in new), default=-1))

    def _buy(self, pool: int, opened: list[int], pods: np.ndarray, placement: Placement | None = None) -> np.ndarray:
        """Ask pool for as many nodes as the plan opened for these pods, all or nothing, placed
        as it needs (the provider picks the slots); a short grant backs it off."""
        sim = self.sim
        granted = sim.provision(pool, len(opened), atomic=True, placement=placement, pods=pods,
                                template=self.templates.template(pool))
        if len(granted) < len(opened):
            self._fell_short(pool, sim.now)
            return granted
        self.backoff.succeeded(pool)
        if self._present(pool) > self.ceiling[pool]:  # a probe past the ceiling was served
            self.ceiling[pool] = np.inf
        return granted

    def _options(self, j: int, pods: np.ndarray, booting: bool):
        """(pool, candidate new slots) pairs to try: one per pool whose nodes can hold every pod
        (for a rack-local gang, in the pool's rack with the most free slots), at most one slot
        per pod: the pool's room (max_size minus the nodes present) is all it knows of it, not
        the provider's stock, cut to its ceiling while it is backed off. Pool None = only nodes
        already booting (if any are)."""
        sim = self.sim
        if booting:
            yield None, np.zeros(0, np.int64)
        rack_local = sim.w.job_locality[j] == LOCALITY_CODE["rack"]
        for p in np.flatnonzero(self.demand.fits(pods).all(axis=1)).tolist():
            free = sim.cloud.free_slots_in_emptiest_rack(p) if rack_local else sim.cloud.free_slots(p)
            want = len(pods)
            if not self.allowed[p]:
                want = min(want, int(self.ceiling[p]) - self._present(p)) if np.isfinite(self.ceiling[p]) else 0
            if want > 0 and len(free):
                yield p, free[:want]

    def _room_on_ready(self, pods: np.ndarray) -> np.ndarray:
        """Ready nodes with room for some pod of the job: a plan uses them before buying. The
        placer found no room for the whole job, but a gang may fit there in part, and the
        placer's cycle may pass over a pod that fits (its queueing hints skip a job it tried at
        this capacity: on openb_autoscaled, a pod evicted by scale-down, then bought a node of
        its own 140 times out of 875)."""
        sim = self.sim
        shapes = pods[np.unique(sim.w.shape[pods], return_index=True)[1]]
        return np.flatnonzero(np.logical_or.reduce([feasible(sim.state, sim.w, int(p)) for p in shapes]))

    def _pack(self, pods: np.ndarray, pool: int | None, slots: np.ndarray, j: int, have: np.ndarray):
        """First-fit every pod onto nodes it has, `have` (ready ones with room, then booting
        ones; of the gang's rack/block if it asks), or onto new nodes from `slots`, on a
        what-if snapshot of just those candidates. Returns (opened slots, [(pod, node, gpus)],
        the share of the opened nodes the plan leaves to pay for: see `_share`) or None."""
        w, st = self.sim.w, self.sim.state
        groups = self.placer.groups_of(j)
        if groups is not None:
            if pool is not None and len(slots):
                have = have[groups[have] == groups[slots[0]]]
            elif w.job_min_member[j] > 1:
                return None  # a local gang on nodes it has only: left to the pool options
        idx = np.concatenate([have, slots]).astype(np.int64)
        snap = Snapshot(st, idx, usable=np.arange(len(idx)) < len(have), openable=range(len(have), len(idx)),
                        devices=self.templates.slot_devices())
        plan = snap.fit(w, pods, undo=False)  # ready, then oldest in-flight first (pack what it has), then new
        if plan is None:
            return None
        share = self._share(snap.state, np.array(snap.opened, np.int64), pool)
        return snap.global_slots(snap.opened).tolist(), [(p, int(idx[n]), gpu_idx) for p, n, gpu_idx in plan], share

    def _share(self, st, new: np.ndarray, pool: int | None) -> float:
        """The share of the new nodes (local slots `new` of the packed snapshot `st`) a plan
        pays for: the job's dominant share of them, plus the share of their GPUs beyond the
        demand it sees for the pool (the job's own included); at most 1."""
        if pool is None or len(new) == 0:
            return 0.0
        return plan_price.share(*plan_price.taken(st, new), self._seen()[pool])

    def _cost(self, pool: int | None, opened: list[int], share: float) -> float:
        """Hourly price of the new nodes, times the share of them the plan pays for (`_share`);
        committed slots are already paid for."""
        if pool is None or not opened:
            return 0.0
        committed = int(self.sim.state.slot_committed[np.array(opened)].sum())
        return plan_price.cost(self.sim.cluster.pools[pool].price, len(opened), committed, share)
