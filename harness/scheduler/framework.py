"""The scheduler framework: one cycle through the extension points, each a list of plugins,
as kube-scheduler's (pkg/scheduler/framework/runtime/framework.go).

It only ever places pods on nodes that exist and are ready. A profile
(conf/loop/scheduler/default.yaml, the `scheduler:` of a loop) has one QueueSort plugin and
names its other plugins; each is registered at every extension point whose hook it defines
(harness/scheduler/plugin.py says the hooks), in the profile's order:

  QueueSort   `queue_sort` (harness.scheduler.queue_sort): the order of the queued jobs;
  PreEnqueue  `gang` (GangScheduling, Atomic): a gang enters the queue once min_member of its
              pods exist;
  PreFilter   `gang` (Coscheduling: a PodGroup backoff, fewer than min_member pods exist),
              `pre_filter` (WaitsForCapacity:
              a gang reserves nothing until it fits ready plus booting nodes);
  Filter      `filter` (harness.scheduler.filter): a mask of the nodes that can take a pod;
  PostFilter  `post_filter` (DefaultPreemption, harness.scheduler.preemption): may a pod that
              fits nowhere evict pods of lower priority to make room? Then `gang`
              (harness.scheduler.gang): does a member that fits nowhere reject the members
              reserved with it (Atomic: all in one cycle; Coscheduling: when the gap to quorum
              exceeds its reject percentage)?
  Score       `policy` (harness.scores): an array of scores over the feasible nodes;
              (Filter, the walk, Score and the pick run as one compiled call,
              harness/scheduler/placement_step.py, when every Filter and Score plugin is a
              built-in it computes: `select`);
  Reserve     `policy` picks the devices (`pick_devices`) and records the placement
              (`on_bind`); Unreserve: a trial rolls back (`checkpoint` / `restore`);
  Permit      `gang`: what bound members wait for (Coscheduling: a timeout);
  Bind        `binder` (harness.scheduler.bind.DefaultBinder): `Simulation.bind`.

The lists are made once, when the profile is built: a point no plugin implements is skipped,
and a point of one plugin calls it directly. What a cycle learns (which pod shapes found no
node, the pending reasons, whether it preempted) is its `CycleState`, forgotten when it ends.

A job that found no room is retried only when the cluster's capacity changes (a node becomes
ready or a pod releases resources; like kube-scheduler's QueueingHints), and within one cycle
a pod shape that found no node is not scanned again (equivalence classes). Gang locality
claims (one rack / one block) restrict all members to one group of nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.filters import fits_on, groups_that_fit
from harness.scheduler.bind import DefaultBinder
from harness.scheduler.filter import NodeResourcesFit
from harness.scheduler.gang import Coscheduling
from harness.scheduler.placement_step import PlacementStep
from harness.scheduler.plugin import CycleState, Plugin, by_point, implements
from harness.scheduler.queue_sort import PrioritySort, QueueSort
from harness.scheduler.sampling import ready_in_order, walk_feasible
from harness.scores import ScorePlugin
from harness.settings import check, component, integer
from harness.status import BOOTING, PENDING, Event
from harness.workload import LOCALITY_CODE

if TYPE_CHECKING:  # the loops' package is above the scheduler: for annotations only
    from harness.view import SimulationView

GANG = -2  # the group of a failure key for a whole gang

#: A gang attempt that ends in a release is taken as its net effect where that is exact
#: (`Scheduler.futile_gang`). Not a behaviour switch: the outputs are the same either way, bit
#: for bit; off, every attempt runs member by member (the reference the tests compare with).
FUTILE_ATTEMPTS_AT_ONCE = True
#: Futile attempts that follow each other in a cycle, each of a gang class whose plan is current,
#: are taken in one step (`Scheduler._futile_run`). Not a behaviour switch either: off, each is
#: taken on its own turn through the cycle (`Scheduler._futile_as_before`, the reference).
FUTILE_RUNS_AT_ONCE = True
#: A gang class's futile plan outlives a change of the nodes while none of the nodes it depends
#: on changed (`Scheduler._current_plan`). Not a behaviour switch either: off, a plan is
#: forgotten at the first change of any node, the reference the tests compare with.
FUTILE_PLANS_KEPT = True


@dataclass(slots=True)
class FutilePlan:
    """What a futile attempt of a gang class does (its members' nodes and devices, and the F_n
    after each bind and release), and what it depends on: the nodes its first member's Filter
    passed (`feasible`: the attempt scored them all, so the walk played no part), their contents,
    the ready nodes and taints. `content` and `stamp` say when it was last known to hold
    (`Scheduler.content`, `ClusterState.mutations`)."""

    content: int
    stamp: int
    usable_key: tuple[int, int]
    feasible: np.ndarray
    nodes: list[int]
    devices: list[np.ndarray]
    frags: list[float]
    touched: np.ndarray  # the distinct nodes, ascending


#: upstream's minFeasibleNodesToFind and minFeasibleNodesPercentageToFind (schedule_one.go)
MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENTAGE = 5


def num_feasible_nodes_to_find(percentage: int, n_all: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind: how many feasible nodes a cycle looks for before
    it stops filtering. Under 100 nodes all of them; else `percentage` % of them, 0 meaning
    adaptive, 50 - n_all // 125 percent but at least 5; never fewer than 100 nodes."""
    if n_all < MIN_FEASIBLE_NODES:
        return n_all
    if percentage == 0:
        percentage = max(50 - n_all // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(n_all * percentage // 100, MIN_FEASIBLE_NODES)


def default_plugins() -> dict[str, Any]:
    """The plugins of a profile that names none of its own (upstream's default profile, here
    with Coscheduling): a name the profile gives replaces the default of that name."""
    return {"gang": Coscheduling(), "filter": NodeResourcesFit(), "binder": DefaultBinder()}


class Scheduler:
    """A scheduling profile: its plugins, listed per extension point, and the cycle that runs them."""

    SETTINGS = {
        "percentage_of_nodes_to_score": integer("percentage of the nodes a cycle looks for feasible ones "
                                                "among before scoring them (0: kube-scheduler's adaptive "
                                                "default)", ge=0, le=100),
        "policy": component(ScorePlugin, "the Score plugin (policy=NAME)"),
        "queue_sort": component(QueueSort, "the QueueSort plugin (null: PrioritySort)", null=True),
        "*": component(Plugin, "a plugin of the profile, at every extension point it implements (null: none "
                       "of that name), e.g. loop/scheduler/gang=NAME, loop/scheduler/pre_filter=waits_for_capacity",
                       null=True),
    }

    def __init__(self, policy: ScorePlugin, queue_sort: QueueSort | None = None,
                 percentage_of_nodes_to_score: int = 0, **plugins):
        """`policy` is the Score plugin named `policy` (the global `policy=`); `plugins` the
        others by name (gang=..., post_filter=..., pre_filter=..., ...), after the defaults
        (`default_plugins`) in their order; None drops a default."""
        check(self, "loop.scheduler", policy=policy, queue_sort=queue_sort,
              percentage_of_nodes_to_score=percentage_of_nodes_to_score, **plugins)
        self.percentage_of_nodes_to_score = int(percentage_of_nodes_to_score)
        self.queue_sort = queue_sort if queue_sort is not None else PrioritySort()
        named = {"policy": policy, **default_plugins()}
        named.update(plugins)
        #: by name, in the profile's order; a plugin's hooks are found by name (`implements`)
        self.plugins: dict[str, Any] = {name: plugin for name, plugin in named.items() if plugin is not None}
        self.policy = policy
        at = self.points()
        # hooks of one plugin are called directly; empty points are skipped
        pre_enqueues = [p.pre_enqueue for p in at["PreEnqueue"]]
        self.pre_enqueue: Callable[[int], bool] | None = (
            (pre_enqueues[0] if len(pre_enqueues) == 1 else lambda j: all(check(j) for check in pre_enqueues))
            if pre_enqueues else None)
        self.pre_filters = tuple(p.pre_filter for p in at["PreFilter"])
        filters = [p.filter for p in at["Filter"]]
        self.filter: Callable[..., np.ndarray] = filters[0] if len(filters) == 1 else _all_of(filters)
        self.diagnose = next(p.reason for p in at["Filter"] if implements(p, "reason"))  # pending reasons
        #: the FitError words of a pending pod, for the decision trace
        self.rejections = next((p.rejections for p in at["Filter"] if implements(p, "rejections")), None)
        self.said: dict[int, str] = {}  # what the decision trace last said of each pending pod
        self.post_filters = tuple(p.post_filter for p in at["PostFilter"] if implements(p, "post_filter"))
        self.gang_post_filters = tuple(p.post_filter_gang for p in at["PostFilter"]
                                       if implements(p, "post_filter_gang"))
        rejects_all = [p.rejects_all for p in at["PostFilter"] if implements(p, "rejects_all")]
        self.rejects_all = rejects_all[0] if len(rejects_all) == 1 else (
            (lambda j: any(r(j) for r in rejects_all)) if rejects_all else None)
        #: a PostFilter may evict pods (a failure then holds only at the pod's priority)
        self.preempts = any(getattr(p, "preempts", False) for p in at["PostFilter"])
        #: a PreFilter lets a gang wait for in-flight capacity (the loop's GANGS_WAIT switch)
        self.waits_for_capacity = any(getattr(p, "waits_for_capacity", False) for p in at["PreFilter"])
        self.score = _weighted_sum(at["Score"])
        #: Filter, walk, Score and pick as one compiled call, when the profile's plugins are
        #: built-ins it computes (else None: the Python path, the reference)
        self.step = PlacementStep.covering(at["Filter"], at["Score"])
        self.by_rank_of: np.ndarray | None = None  # the node order `by_rank` sorts (`ready_order`)
        self.by_rank = np.zeros(0, np.int64)
        self.reservers = at["Reserve"]
        self.reserve = self.reservers[0].on_bind if len(self.reservers) == 1 else self._reserve_all
        self.pick_devices = next(p.pick_devices for p in self.reservers if implements(p, "pick_devices"))
        self.permits = tuple(p.permit for p in at["Permit"])
        #: a plugin that schedules gangs in pod-group cycles (GangScheduling), or None
        self.pod_groups = at["PodGroup"][0] if at["PodGroup"] else None
        self.on_evicted = tuple(p.evicted for p in at["Permit"] if implements(p, "evicted"))
        self.bind = at["Bind"][0].bind

    def points(self) -> dict[str, tuple]:
        """Each extension point's plugins, in the profile's order."""
        return by_point(self.plugins.values())

    def _reserve_all(self, state, w, p: int, n: int) -> None:
        for plugin in self.reservers:
            plugin.on_bind(state, w, p, n)

    def attach(self, sim: SimulationView) -> None:
        self.sim = sim
        w = sim.w
        sim.queue.order_by(self.queue_sort)
        if self.pre_enqueue is not None:
            sim.queue.enqueue_if(self.pre_enqueue)
        for plugin in self.plugins.values():
            if implements(plugin, "attach"):
                plugin.attach(self)
        self.cycle_state = CycleState()
        self.tried_at = np.full(w.n_jobs, -1, np.int64)  # capacity version of the last failure
        self.admissions = np.zeros(w.n_jobs, np.int32)  # sim.job_admissions when last seen queued
        self.arrived = np.zeros(w.n_jobs, np.int32)  # sim.job_arrived when last seen queued
        self.job_size = np.diff(w.job_bounds)
        starts, pods = w.job_bounds[:-1], w.pods_by_job
        lo, hi = np.minimum.reduceat(w.shape[pods], starts), np.maximum.reduceat(w.shape[pods], starts)
        self.job_uniform = lo == hi  # a job's pods are all of one shape (a placement keeps it so)
        self.job_first_pod = pods[starts]
        self.any_tainted = False
        self.seen = (-1, -1, -1)
        #: node -> -1 usable, below -1 tainted (unschedulable, e.g. Karpenter disrupting it);
        #: written by `book`. ProvisioningRequest bookings live in the autoscaler, not here.
        self.booked_for = np.full(sim.state.n_slots, -1, np.int64)
        self.bookings = 0  # bumps on every change of booked_for
        self.usable_key: tuple[int, int] | None = None
        self.next_start = 0  # nextStartNodeIndex: where the next search for feasible nodes begins
        self.order_key = -1  # layout version of `node_order`
        self.futile_gang = self._futile_gang()
        #: a gang class's futile plan outlives changes of nodes it does not depend on
        #: (`_current_plan`): FUTILE_PLANS_KEPT, and every Score plugin scores the candidates by
        #: their own contents
        self.plans_kept = FUTILE_PLANS_KEPT and all(getattr(p, "scores_candidates_alone", False)
                                                    for p in self.points()["Score"])
        #: (pod shape, gang locality) -> what a futile attempt of that class does while the nodes
        #: it depends on stay as they were
        self.futile_plans: dict[tuple[int, int], FutilePlan] = {}
        #: per node, `ClusterState.changed_at` just after the last futile round trip on it, and an
        #: upper bound of its last other change's (`_note_trips`, `really_changed_since`)
        self.trip_end = np.full(sim.state.n_slots, -1, np.int64)
        self.changed_before_trips = np.zeros(sim.state.n_slots, np.int64)
        self.content = 0  # names the nodes' contents: moves when they change (`_content`)
        self.content_key: tuple[int, int, int] | None = None  # `_state_key` when `content` was last confirmed
        #: pod shape -> (`ClusterState.mutations`, the usable nodes' key) when a pod of it last
        #: fitted no usable node: a failure that holds until one of the nodes changed since fits
        #: it (`_fails_as_before`)
        self.shape_failed: dict[int, tuple[int, tuple[int, int]]] = {}

    def _futile_gang(self) -> Any:
        """The gang plugin whose futile attempts are taken as their net effect, or None: where
        that is provably exact. An attempt of a gang of one pod shape binds its members one by
        one until one fits nowhere; when its PostFilter then releases them at once, all that is
        left is what `Coscheduling.release_at_once` applies, provided that
          - the gang plugin is the profile's only Permit, PostFilter and PreFilter plugin and
            defines `release_at_once` (Coscheduling; not Atomic or GangScheduling, which place
            gangs otherwise, nor NoGang): no preemption (DefaultPreemption's PostFilter evicts),
            no WaitsForCapacity (its PreFilter reserves on a trial);
          - every Filter, Score and Reserve plugin is `stateless` (the built-in Filter; the
            policies that record no placement and draw no random number: not FGD, GpuClustering
            or RandomScore, nor a user's plugin that does not declare itself stateless), and the
            Bind plugin is DefaultBinder;
        and, per attempt (`_futile_attempt`): the gang is of one shape with no pod on a node, and
        nothing listens to binds (no decision trace, no hooks). Off with FUTILE_ATTEMPTS_AT_ONCE."""
        if not FUTILE_ATTEMPTS_AT_ONCE:
            return None
        at = self.points()
        gangs = at["Permit"]
        if len(gangs) != 1 or not implements(gangs[0], "release_at_once"):
            return None
        gang = gangs[0]
        if at["PostFilter"] != (gang,) or any(p is not gang for p in at["PreFilter"]) or at["PodGroup"]:
            return None
        if not all(p.stateless for p in at["Filter"] + at["Score"] + at["Reserve"]):
            return None
        if len(at["Bind"]) != 1 or type(at["Bind"][0]) is not DefaultBinder:
            return None
        return gang

    def book(self, slots, owner: int) -> None:
        """Taint nodes (an owner below -1: usable by no pod) or untaint them (-1)."""
        assert owner < 0, "the scheduler honours taints, not bookings for a job"
        self.booked_for[slots] = owner
        self.bookings += 1

    def evict(self, pods: np.ndarray) -> None:
        """Preempt these pods (their gangs whole, `Simulation.evict`); the Permit plugins
        forget what the evicted jobs waited for."""
        self.sim.evict(pods)
        for j in np.unique(self.sim.w.job[pods]).tolist():
            for evicted in self.on_evicted:
                evicted(j)
        self.cycle_state.preempted = True

    # ---- the cycle ---------------------------------------------------------------------
    def cycle(self, now: float) -> None:
        """Try every queued job whose situation changed since its last failure; after a cycle
        that preempted, once more at once for the victims (upstream requeues them at once)."""
        if self._cycle(now):
            self.seen = (-1, -1, -1)
            self._cycle(now)

    def _cycle(self, now: float) -> bool:
        """One pass over the queue with a new CycleState; whether it preempted."""
        sim = self.sim
        st = sim.state
        key = (st.version, sim.queue.version, st.layout_version)
        if key == self.seen:
            return False
        if not sim.queue:  # nothing waits: only remember that capacity was seen
            st.take_grown()
            self.seen = key
            return False
        relabel = key[2] != self.seen[2]  # nodes came, went or became ready: reasons may change
        if self.usable_key != (st.layout_version, self.bookings):  # ready nodes or bookings changed
            self.usable_key = (st.layout_version, self.bookings)
            self.free_ready = st.ready & (self.booked_for == -1)  # not tainted
            self.any_tainted = bool((self.booked_for != -1).any())
            self.booting_slots = np.flatnonzero(st.status == BOOTING)  # pending reasons: room on its way
        cs = self.cycle_state = CycleState()
        jobs = sim.queue.jobs()
        back = sim.job_admissions[jobs] != self.admissions[jobs]
        if back.any():  # let through again by an admission layer: new pods, whatever failed before
            self.tried_at[jobs[back]] = -1
            self.admissions[jobs[back]] = sim.job_admissions[jobs[back]]
        joined = sim.job_arrived[jobs] != self.arrived[jobs]
        if joined.any():  # more of its pods arrived (upstream: a Pod/Add event requeues the group)
            self.tried_at[jobs[joined]] = -1
            self.arrived[jobs[joined]] = sim.job_arrived[jobs[joined]]
        self._skip_unhelped(jobs)
        failed = cs.failed
        retry = self.tried_at[jobs] != st.version
        # jobs with pods still pending after this cycle whose reason may have changed
        waiting = jobs[~retry].tolist() if relabel else []
        groups = self.pod_groups
        order = self._in_turn(jobs[retry])
        i = 0
        while i < len(order):
            if self.futile_plans and FUTILE_RUNS_AT_ONCE and (run := self._futile_run(order, i, failed)):
                waiting += order[i:i + run]
                i += run
                continue
            if groups is not None and (run := groups.rejected_run(order, i)):  # the memo rejects them alike
                self.tried_at[order[i:i + run]] = st.version
                waiting += order[i:i + run]
                i += run
                continue
            j = order[i]
            i += 1
            if self._failed_key(j, self.job_shape(j)) in failed:  # its only shape found no node
                self.tried_at[j] = st.version
                waiting.append(j)
                if groups is not None and groups.is_gang(j):
                    groups.reject(j, len(sim.unbound_pods(j)))
                continue
            if self._fails_as_before(j):  # as trying it would, with nothing else to change
                failed[self._failed_key(j, self.job_shape(j))] = 1
                self.tried_at[j] = st.version
                waiting.append(j)
                continue
            if groups is not None and groups.is_gang(j):
                placed = groups.schedule_group(j)
            else:
                atomic = self.rejects_all is not None and self.rejects_all(j)
                place = self._place_atomic if atomic else self._place_incremental
                placed = place(j, failed)
            self.tried_at[j] = -1 if placed else st.version  # an evicted job comes back new
            if not placed:
                waiting.append(j)
        if waiting:
            self._relabel(waiting)
        self.seen = (st.version, sim.queue.version, st.layout_version)
        return cs.preempted

    def _in_turn(self, jobs: np.ndarray) -> list[int]:
        """The jobs to try, in queue order; gangs in the backoff queue after the others (popped
        once the active queue is empty) or, without that, not until their back-off ends."""
        groups = self.pod_groups
        if groups is None:
            return jobs.tolist()
        backing = groups.backing_off(jobs)
        if not backing.any():
            return jobs.tolist()
        if groups.pop_from_backoff_queue:
            return np.r_[jobs[~backing], jobs[backing]].tolist()
        self.tried_at[jobs[backing]] = self.sim.state.version  # their back-off's end requeues them
        return jobs[~backing].tolist()

    def _skip_unhelped(self, jobs: np.ndarray) -> None:
        """Like kube-scheduler's QueueingHints: a job that failed is worth retrying only if
        one of its pending pods fits one of the nodes whose capacity grew since the last
        cycle (for a local gang with members already placed, a grown node of their group).
        Jobs not worth it are marked as tried at the current capacity version."""
        sim, st, w = self.sim, self.sim.state, self.sim.w
        tried = self.tried_at[jobs]
        stale = jobs[(tried >= 0) & (tried != st.version)]
        grown = set(st.take_grown())  # a few nodes, often one
        if len(stale) == 0 or self.any_tainted:  # taints change what a job may use: retry all
            return
        if not grown:  # capacity grew nowhere
            self.tried_at[stale] = st.version
            return
        nodes = np.fromiter(grown, np.int64, len(grown))
        # the pods to test: one per job of a single shape, every pending one of the others
        uniform = self.job_uniform[stale]
        if uniform.all():
            pods, owner = self.job_first_pod[stale], None
        else:
            mixed = np.flatnonzero(~uniform)
            more = w.pods_of(stale[mixed])
            more_owner = np.repeat(mixed, self.job_size[stale[mixed]])
            pending = sim.pod_status[more] == PENDING
            pods = np.r_[self.job_first_pod[stale[uniform]], more[pending]]
            owner = np.r_[np.flatnonzero(uniform), more_owner[pending]]
        # one filter of the grown nodes per pod shape (pods alike share the verdict)
        _, first, inverse = np.unique(w.shape[pods], return_index=True, return_inverse=True)
        seen = np.argsort(first)  # the shapes in the order they first appear, filtered in that order
        row = np.argsort(seen)[inverse]
        reps = pods[first[seen]]
        at = int(nodes[0]) if len(nodes) == 1 else nodes  # one node: the filter on scalars is quicker
        fits = np.array([self.filter(st, w, p, self.free_ready, at=at) for p in reps.tolist()],
                        bool).reshape(len(reps), len(nodes))[row]  # pod x node
        # the rack or block that placed members of a local gang restrict the others to
        loc, anchor = w.job_locality[stale], sim.job_anchor[stale]
        local = (loc != LOCALITY_CODE["none"]) & (anchor >= 0)
        if local.any():
            block = loc == LOCALITY_CODE["block"]
            group = np.where(block, st.slot_block[anchor], st.slot_rack[anchor])
            if owner is not None:
                local, block, group = local[owner], block[owner], group[owner]
            where = np.where(block[:, None], st.slot_block[nodes], st.slot_rack[nodes])  # pod x node
            fits &= ~local[:, None] | (where == group[:, None])
        fit_any = fits.any(axis=1)
        helped = fit_any if owner is None else np.bincount(owner, weights=fit_any, minlength=len(stale)) > 0
        self.tried_at[stale[~helped]] = st.version

    def _relabel(self, jobs: list[int]) -> None:
        """Decide, after the cycle, why the pending pods of these jobs are pending."""
        sim, w = self.sim, self.sim.w
        js = np.array(jobs, np.int64)
        pods = w.pods_of(js)
        pods = pods[sim.pod_status[pods] == PENDING]
        if len(pods) == 0:
            return
        if sim.noting:
            self._say_why(pods)
        if self.job_uniform[js].all():  # the common case: each job's pods are alike
            first = self.job_first_pod[js]
            keys = self._reason_key(first)
            if (keys == keys[0]).all():
                sim.acct.set_reasons(pods, self._reason(int(keys[0]), int(first[0])))
                return
            # each key's reason from its first job's pod, as `_reason` keeps the first it is asked
            keys, at, inverse = np.unique(keys, return_index=True, return_inverse=True)
            codes = zip(keys.tolist(), first[at].tolist(), strict=True)
            reasons = np.fromiter((self._reason(key, p) for key, p in codes), np.int8, len(keys))[inverse]
            if (reasons == reasons[0]).all():
                sim.acct.set_reasons(pods, int(reasons[0]))
            else:  # a job's pending pods follow each other in `pods`
                pending = self.job_size[js] - sim.job_placed[js]
                sim.acct.set_reasons(pods, np.repeat(reasons, pending))
            return
        keys, first, inverse = np.unique(self._reason_key(pods), return_index=True, return_inverse=True)
        codes = zip(keys.tolist(), pods[first].tolist(), strict=True)
        by_key = np.fromiter((self._reason(key, p) for key, p in codes), np.int8, len(keys))
        sim.acct.set_reasons(pods, by_key[inverse])

    def _say_why(self, pods: np.ndarray) -> None:
        """With the decision trace on: each pending pod's FitError (how many nodes each rule
        turned it away from), when it differs from what was last said of the pod."""
        if self.rejections is None:
            return
        sim, whys = self.sim, self.cycle_state.whys
        for p, key in zip(pods.tolist(), self._reason_key(pods).tolist(), strict=True):
            why = whys.get(key)
            if why is None:
                why = whys[key] = self.rejections(sim.state, sim.w, p, self.free_ready)
            if self.said.get(p) != why:
                self.said[p] = why
                sim.note(Event.UNSCHEDULABLE, why, pod=p)

    def _reason(self, key: int, p: int) -> int:
        """Why pod p (of reason key `key`) is pending; pods alike share the verdict in a cycle."""
        reasons = self.cycle_state.reasons
        reason = reasons.get(key)
        if reason is None:
            reason = reasons[key] = self.diagnose(self.sim.state, self.sim.w, p, self.free_ready, self.booting_slots)
        return reason

    def usable(self, j: int) -> np.ndarray:
        """Ready nodes job j may use: all but the tainted ones."""
        return self.free_ready

    def requeue(self, j: int) -> None:
        """Job j is tried again in the next cycle, whatever changed (its back-off ended)."""
        self.tried_at[j] = -1
        self.seen = (-1, -1, -1)

    def back_off(self, j: int) -> None:
        """Job j is not retried until capacity changes again (its gang was released)."""
        self.tried_at[j] = self.sim.state.version

    def select(self, p: int, allowed: np.ndarray) -> int:
        """Filter and Score: the node pod p goes to among the `allowed` nodes (-1: none fits),
        by the compiled step where the profile allows it, else `choose` over the Filter's mask."""
        st, w = self.sim.state, self.sim.w
        if self.step is None:
            return self.choose(p, self.filter(st, w, p, allowed))
        order = self.ready_order()
        k = num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, len(order))
        node, self.next_start = self.step.place(st, w, p, allowed, order, self.next_start, k, self.sim.node_rank)
        return node

    def choose(self, p: int, mask: np.ndarray) -> int:
        """Score: the best node by the policy among the feasible nodes found (`mask`, the
        Filter's verdict, sampled by `feasible_to_score`); ties by the seeded node order."""
        cand = self.feasible_to_score(mask)
        if len(cand) == 0:
            return -1
        if len(cand) > 1:
            s = self.score(self.sim.state, self.sim.w, p, cand, self.sim.rng)
            cand = cand[s >= s.max()]
        return int(cand[np.argmin(self.sim.node_rank[cand])])

    def feasible_to_score(self, mask: np.ndarray) -> np.ndarray:
        """The feasible nodes kube-scheduler would score: walking the ready nodes in the seeded
        node order from `next_start` (wrapping round), it stops once it has found
        `num_feasible_nodes_to_find` feasible ones; the next search starts after the last node
        checked (all of them: where it started). One vector step, no loop over nodes."""
        self.ready_order()
        n_all = len(self.node_order)
        k = num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, n_all)
        if k >= n_all:  # every node is checked: the start index comes back to where it was
            return mask.nonzero()[0]
        cand, checked = walk_feasible(self.node_order, self.next_start, mask, k)
        self.next_start = (self.next_start + checked) % n_all
        return cand

    def nodes_to_find(self) -> int:
        """How many feasible nodes a walk looks for now: one over a mask of no more nodes than
        this checks them all and leaves nextStartNodeIndex where it was (`walk_feasible`)."""
        return num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, len(self.ready_order()))

    def ready_order(self) -> np.ndarray:
        """The ready nodes in the seeded node order (the order filters walk them in), ties by
        slot: every slot in that order (sorted once per node order) kept where ready."""
        st = self.sim.state
        if self.order_key != st.layout_version:
            rank = self.sim.node_rank
            if self.by_rank_of is not rank:
                self.by_rank, self.by_rank_of = np.argsort(rank, kind="stable"), rank
            self.node_order = ready_in_order(self.by_rank, st.ready)
            self.order_key = st.layout_version
            self.next_start %= max(len(self.node_order), 1)
        return self.node_order

    def job_shape(self, j: int) -> int:
        """The shape of all of job j's pods now (an admission may change it: `AdmissionGate.admit`),
        -1 if they differ."""
        return int(self.sim.w.shape[self.job_first_pod[j]]) if self.job_uniform[j] else -1

    def groups_of(self, j: int) -> np.ndarray | None:
        loc = self.sim.w.job_locality[j]
        if loc == LOCALITY_CODE["rack"]:
            return self.sim.state.slot_rack
        if loc == LOCALITY_CODE["block"]:
            return self.sim.state.slot_block
        return None

    # ---- PostFilter rejects all (Atomic): all unbound members in one cycle, or none ------
    def _failed_key(self, j: int, shape: int, group: int = -1) -> tuple:
        """What a failure says within one cycle, where capacity only shrinks: no pod of that
        shape finds a node (in that rack or block, for a local gang's restricted members;
        group GANG: no gang of that shape and locality with as many pods or more finds a
        place). When pods may preempt, the failure holds only at the job's priority."""
        w = self.sim.w
        loc = int(w.job_locality[j]) if group >= 0 or group == GANG else 0
        return shape, loc, group, int(w.job_priority[j]) if self.preempts else 0

    def _place_atomic(self, j: int, failed: dict[tuple, int]) -> bool:
        """A gang of one shape fails exactly when no group's exact count (`fits_on`) reaches
        its size, so a failed size rules out larger gangs of that shape in the cycle."""
        sim = self.sim
        pods = sim.unbound_pods(j)
        gang = self._failed_key(j, self.job_shape(j), GANG)
        if failed.get(gang, len(pods) + 1) <= len(pods):
            return False
        shapes = sim.w.shape[pods]
        if any(self._failed_key(j, s) in failed for s in shapes.tolist()):
            return False
        usable = self.usable(j)
        groups = self.groups_of(j)
        if groups is None:
            plan = self.try_place(pods, usable, keep=True)
        else:
            plan = None
            for g in groups_that_fit(sim.state, sim.w, pods, usable, groups):
                plan = self.try_place(pods, usable & (groups == g), keep=True)
                if plan is not None:
                    break
        if plan is None:
            if gang[0] >= 0:
                failed[gang] = min(failed.get(gang, len(pods)), len(pods))
            if len(pods) == 1:
                failed[self._failed_key(j, int(shapes[0]))] = 1
            return False
        for p, n, gpu_idx in plan:
            self.bind(p, n, gpu_idx, on_state=True)
        return True

    def try_place(self, pods: np.ndarray, usable: np.ndarray, keep: bool = False,
                  need: int | None = None) -> list | None:
        """Place pods one by one on the real state as a trial, then undo it (unless `keep`
        and it succeeded: the caller then binds the plan with `on_state`). The policy sees
        each trial placement (`on_bind`) and forgets them with the trial.
        `need`: as `place_each`; by default every pod must fit.
        Returns [(pod, node, gpus)] of the pods that found a node, or None if too few did."""
        st = self.sim.state
        st.fork()
        saved = [plugin.checkpoint() for plugin in self.reservers]
        plan = self.place_each(pods, usable, len(pods) if need is None else need)
        if plan is not None and keep:
            st.keep()
            return plan
        st.revert()  # a trial is not a change: the state and its cache keys are as before
        for plugin, mark in zip(self.reservers, saved, strict=True):
            plugin.restore(mark)
        return plan

    def place_each(self, pods: np.ndarray, usable: np.ndarray, need: int, reserve: bool = True) -> list | None:
        """The pods one by one on a trial the caller opened, each taken on the state (and
        reserved, with `reserve`) before the next is filtered. A pod that fits nowhere is passed
        over, and the placing stops as soon as `need` pods are out of reach (upstream's
        PlacementFeasible for a PodGroup's minCount). Returns [(pod, node, gpus)] if `need` of
        them found a node, else None; what was taken stays on the trial either way."""
        st, w = self.sim.state, self.sim.w
        plan = []
        remaining = len(pods)
        for p in pods.tolist():
            remaining -= 1
            n = self.select(p, usable)
            if n >= 0:
                gpu_idx = self.pick_devices(st, w, p, n)
                st.bind(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
                if reserve:
                    self.reserve(st, w, p, n)
                plan.append((p, n, gpu_idx))
            elif len(plan) + remaining < need:
                break
        return plan if len(plan) >= need else None

    # ---- members bind as they fit, then Permit (NoGang, Coscheduling) -------------------
    def _place_incremental(self, j: int, failed: dict[tuple, int]) -> bool:
        sim = self.sim
        st, w = sim.state, sim.w
        usable = self.usable(j)
        groups = self.groups_of(j)
        anchor = sim.job_anchor[j]
        # the rack or block the job's placed members restrict it to
        group = int(groups[anchor]) if groups is not None and anchor >= 0 else -1
        for pre_filter in self.pre_filters:  # e.g. a PodGroup backoff; reserve only where the gang fits
            where = pre_filter(j, usable, group)
            if where is None:
                return False
            group = where
        if self.futile_gang is not None and not FUTILE_RUNS_AT_ONCE and self._futile_as_before(j, failed):
            return False  # (at once: `_futile_run` took it, if it was such an attempt)
        all_placed = True
        for i, p in enumerate(sim.unbound_pods(j).tolist()):
            shape = int(w.shape[p])
            if self._failed_key(j, shape) in failed or self._failed_key(j, shape, group) in failed:
                all_placed = False
                continue
            allowed = usable if group < 0 else usable & (groups == group)
            if i == 0 and self._may_be_futile(j):  # its feasible nodes tell whether the attempt is futile
                mask = self.filter(st, w, p, allowed)
                n = self.choose(p, mask)
                if n >= 0 and self._futile_attempt(j, mask, n, groups, failed):
                    return False
            else:
                n = self.select(p, allowed)
            if n < 0:  # PostFilter: e.g. a node where evicting lower-priority pods makes room
                for post_filter in self.post_filters:
                    n = post_filter(p, allowed)
                    if n >= 0:
                        failed.clear()  # the victims' gangs freed capacity elsewhere too
                        break
            if n < 0:  # no pod of this shape will find a node there this cycle
                failed[self._failed_key(j, shape, group)] = 1
                if group < 0 and self.futile_gang is not None:
                    self.shape_failed[shape] = (st.mutations, (st.layout_version, self.bookings))
                all_placed = False
                continue
            self.bind(p, n, self.pick_devices(st, w, p, n))
            self.reserve(st, w, p, n)
            if groups is not None and group < 0:
                group = int(groups[n])
        for permit in self.permits:
            permit(j)
        if not all_placed and self._released(j):  # PostFilter released the waiting members:
            failed.clear()  # capacity grew, so what failed in this cycle may fit now
        return all_placed

    def _may_be_futile(self, j: int) -> bool:
        """Could job j's attempt be taken whole if it ends in a release (`_futile_attempt`): a gang
        of one pod shape that one bound member would not start, with nothing listening to binds.
        (A gang released with one member bound is released with fewer missing.)"""
        return bool(self.futile_gang is not None and self.job_uniform[j] and self.futile_gang.releases_after(j, 1)
                    and self.sim.binds_unheard)

    def _futile_attempt(self, j: int, mask: np.ndarray, n: int, groups: np.ndarray | None,
                        failed: dict[tuple, int]) -> bool:
        """Job j's first member (`_may_be_futile`) found node n among the feasible nodes `mask`: if
        the attempt is futile (`futile_gang.releases_after`), take it as its net effect and say True; else
        say False, nothing changed (the attempt goes on member by member).

        The members bind one by one on the nodes of `mask` (those of n's rack or block, for a
        local gang): no other node can take one, as binds only take room. So each member after
        the first is filtered on those nodes alone, then chosen as ever (`choose`: the walk
        from nextStartNodeIndex and the score, on the same mask), on a trial of the state; the
        first member that fits nowhere ends the attempt (its walk checks every node, which
        leaves the start index where it was). A gang of one shape binds exactly as many members
        as `fits_on` counts on those nodes, so that count decides first whether to try."""
        sim, gang = self.sim, self.futile_gang
        st, w = sim.state, sim.w
        pods = sim.unbound_pods(j)
        group = int(groups[n]) if groups is not None else -1
        nodes = np.flatnonzero(mask if group < 0 else mask & (groups == group))
        room = int(np.minimum(fits_on(st, w, int(pods[0]), nodes), len(pods)).sum())
        if room >= len(pods) or not gang.releases_after(j, room):
            return False
        if group >= 0 and self._failed_key(j, int(w.shape[pods[0]]), group) in failed:
            return False  # the members after the first would not be tried
        content = self._content()
        plan, frags = self._bind_in_turn(pods, n, nodes)
        assert len(plan) == room, "fits_on counts exactly the members that bind"
        touched = np.unique([n for _, n, _ in plan])
        before = st.changed_at[touched]
        gang.release_at_once(j, plan, frags)  # what failed in this cycle still fails (`_futile_as_before`)
        self._note_trips(touched, before)
        self.content_key = self._state_key()  # the release left the nodes as it found them
        self.ready_order()
        if int(mask.sum()) <= num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, len(self.node_order)):
            # every feasible node was scored: no walk moved the start index, so the attempt
            # depends on the nodes' contents alone
            self.futile_plans[self._gang_class(j)] = FutilePlan(
                content, st.mutations, (st.layout_version, self.bookings), mask.copy(), [n for _, n, _ in plan],
                [gpu_idx for _, _, gpu_idx in plan], frags, touched)
        return True

    def _gang_class(self, j: int) -> tuple[int, int]:
        """Gangs of one pod shape and locality, tried on one state, bind alike."""
        return self.job_shape(j), int(self.sim.w.job_locality[j])

    def _state_key(self) -> tuple[int, int, int]:
        """Changes whenever a node, the ready set or the taints change."""
        return self.sim.state.mutations, self.sim.state.layout_version, self.bookings

    def _content(self) -> int:
        """A number naming the nodes' contents (and which are ready and untainted): it moves when
        they changed since it was last confirmed, except by the futile attempts taken whole,
        whose releases leave them as they were (they confirm it again)."""
        key = self._state_key()
        if key != self.content_key:
            self.content += 1
            self.content_key = key
            if not self.plans_kept:
                self.futile_plans.clear()  # of contents gone
        return self.content

    def _current_plan(self, j: int, key: tuple[int, int]) -> FutilePlan | None:
        """The futile plan of job j's class (`key`) if it holds on the nodes as they are now, else
        None (and the plan is forgotten). It holds on the contents it was last confirmed on; and
        after other changes, while the ready nodes and taints are the same, none of the nodes its
        first member's Filter passed changed but by futile round trips, which leave them as they
        were (`really_changed_since`), and none of the other nodes that changed passes the Filter
        now: the same nodes pass it, holding the same contents, so the first member's Score and
        pick, every member after it and every F_n are as they were (the Filter and Score plugins
        are `stateless`, and the Score plugins score the candidates by their own contents:
        `plans_kept`)."""
        plan = self.futile_plans.get(key)
        if plan is None:
            return None
        content = self._content()
        if plan.content == content:
            return plan
        st = self.sim.state
        if self.plans_kept and plan.usable_key == (st.layout_version, self.bookings) == self.usable_key:
            changed = self.really_changed_since(plan.stamp)
            if not plan.feasible[changed].any() and not (
                    len(changed) and self.filter(st, self.sim.w, int(self.job_first_pod[j]), self.free_ready,
                                                 at=changed).any()):
                plan.content, plan.stamp = content, st.mutations
                return plan
        self.futile_plans.pop(key, None)  # (gone already if not kept)
        return None

    def _note_trips(self, nodes: np.ndarray, before: np.ndarray) -> None:
        """Futile round trips just left these nodes (distinct) as they found them, their
        `changed_at` having been `before`: a node changed otherwise since the end of the last
        trip on it if its stamp moved since then."""
        if not self.plans_kept:
            return
        moved = before != self.trip_end[nodes]
        self.changed_before_trips[nodes[moved]] = before[moved]
        self.trip_end[nodes] = self.sim.state.changed_at[nodes]

    def really_changed_since(self, stamp: int) -> np.ndarray:
        """The nodes changed after `ClusterState.mutations` was `stamp` other than by futile round
        trips (a superset): changed since, and either changed after their last trip or
        changed before it, but after `stamp` (`_note_trips`)."""
        changed_at = self.sim.state.changed_at
        changed = np.flatnonzero(changed_at > stamp)
        return changed[(changed_at[changed] != self.trip_end[changed]) | (self.changed_before_trips[changed] > stamp)]

    def _futile_as_before(self, j: int, failed: dict[tuple, int]) -> bool:
        """Gang j's attempt as the futile attempt of its class recorded on the same contents of
        the nodes (`_futile_attempt`, in this cycle or an earlier one): its first members bind on
        the same nodes, the same devices, and the next fits nowhere; taken as its net effect if
        that ends in a release (True).

        Unlike a release member by member, a futile attempt taken whole keeps what failed in the
        cycle (`failed`): each failure was found on contents that have only shrunk since or come
        back as they were, and the nodes hold what they held before the attempt, so it still
        holds; and trying again a pod that fits nowhere changes nothing (its walk checks every
        node, which leaves nextStartNodeIndex where it was), so skipping it is exact."""
        sim, gang = self.sim, self.futile_gang
        if not self.job_uniform[j] or sim.job_placed[j] != 0 or not sim.binds_unheard:
            return False
        key = self._gang_class(j)
        known = self._current_plan(j, key)
        if known is None:
            return False
        nodes = known.nodes
        pods = sim.unbound_pods(j)
        if len(nodes) >= len(pods) or not gang.releases_after(j, len(nodes)):
            return False
        groups = self.groups_of(j)
        if groups is not None and self._failed_key(j, key[0], int(groups[nodes[0]])) in failed:
            return False
        touched = np.unique(nodes)
        before = sim.state.changed_at[touched]
        gang.release_at_once(j, list(zip(pods[:len(nodes)].tolist(), nodes, known.devices, strict=True)),
                             known.frags)
        self._note_trips(touched, before)
        self.content_key = self._state_key()
        return True

    def _futile_run(self, order: list[int], i: int, failed: dict[tuple, int]) -> int:
        """How many jobs from order[i] on were taken as futile attempts of gang classes whose
        plan is current, in one step (0: none; order[i] then goes its own way through the cycle).

        Such an attempt leaves the nodes as it found them and what failed in the cycle as it
        was (`_futile_as_before`), so each of the jobs that follow sees what the first saw, but
        the counters the releases move: each is tested as its own turn would test it (its
        class's plan on the same contents, the failures of the cycle that would skip it or its
        rack or block, `futile_gang.futile_after`: PreFilter lets it through and PostFilter
        releases it), and the run ends at the first job that fails a test. A job of a class
        whose plan is current needs no `_fails_as_before` (its first pod fits the plan's node),
        nor a Filter, Score or pick: the plan says where its members bind, and the simulation
        moves every counter as their binds and releases would, job after job
        (`Simulation.round_trips`)."""
        sim, w = self.sim, self.sim.w
        j = order[i]
        if not self.job_uniform[j] or sim.job_placed[j] != 0:
            return 0
        if not sim.binds_unheard or self._current_plan(j, self._gang_class(j)) is None:
            return 0
        content = self.content
        jobs = np.array(order[i:], np.int64)
        uniform = self.job_uniform[jobs]
        jobs = jobs[:len(jobs) if uniform.all() else int(np.argmin(uniform))]
        plans: list[FutilePlan] = []
        by_class: dict[tuple[int, int], FutilePlan | None] = {}
        for j, shape, loc in zip(jobs.tolist(), w.shape[self.job_first_pod[jobs]].tolist(),
                                 w.job_locality[jobs].tolist(), strict=True):
            key = (shape, loc)
            if key not in by_class:
                by_class[key] = self._current_trip(j, key, content, failed)
            plan = by_class[key]
            if plan is None:
                break
            plans.append(plan)
        jobs = jobs[:len(plans)]
        bound = np.fromiter((len(plan.nodes) for plan in plans), np.int64, len(plans))
        pending, heads = sim.first_pending(jobs, bound)
        futile = self.futile_gang.futile_after(jobs, bound) & (bound < pending)
        run = len(jobs) if futile.all() else int(np.argmin(futile))
        if run == 0:
            return 0
        distinct = list({id(plan): plan for plan in plans[:run]}.values())  # the plans of the run's classes
        touched = distinct[0].touched if len(distinct) == 1 else np.unique(np.concatenate([p.touched
                                                                                           for p in distinct]))
        before = sim.state.changed_at[touched]
        versions = self.futile_gang.releases_alike(jobs[:run], [(plan.nodes, plan.frags) for plan in plans[:run]],
                                                   heads[:int(bound[:run].sum())])
        self._note_trips(touched, before)
        self.tried_at[jobs[:run]] = versions  # each backed off as its own release left the capacity
        self.content_key = self._state_key()
        return run

    def _current_trip(self, j: int, key: tuple[int, int], content: int, failed: dict[tuple, int]) -> FutilePlan | None:
        """The futile plan of job j's class (`key`) if it is of these contents and the cycle's
        failures would not skip job j (its shape, or its rack or block), else None."""
        if self._failed_key(j, key[0]) in failed:
            return None
        known = self._current_plan(j, key)
        if known is None or known.content != content:
            return None
        groups = self.groups_of(j)
        if groups is not None and self._failed_key(j, key[0], int(groups[known.nodes[0]])) in failed:
            return None
        return known

    def _fails_as_before(self, j: int) -> bool:
        """Would job j's attempt find no node for its first pod and so change nothing? Known
        without a Filter over every node when a pod of its shape fitted no usable node before
        (`shape_failed`), the usable nodes are the same, and none of the nodes changed since fits
        it (the Filter plugins are stateless, `futile_gang`: a node's verdict changes only with
        the node; futile round trips leave a node as it was, `really_changed_since`). For a job
        of one shape with no pod on a node, under the futile-attempt gate (no PostFilter that
        could make room): its pods all fit nowhere, no Permit wait starts, nothing is released,
        and a walk that finds nothing leaves nextStartNodeIndex as it was."""
        sim = self.sim
        if self.futile_gang is None or not self.job_uniform[j] or sim.job_placed[j] != 0:
            return False
        shape = self.job_shape(j)
        known = self.shape_failed.get(shape)
        st = sim.state
        if known is None or known[1] != (st.layout_version, self.bookings) or self.usable_key != known[1]:
            return False
        changed = self.really_changed_since(known[0])
        if len(changed) and self.filter(st, sim.w, int(self.job_first_pod[j]), self.free_ready, at=changed).any():
            return False
        self.shape_failed[shape] = (st.mutations, known[1])
        return True

    def _bind_in_turn(self, pods: np.ndarray, n: int, nodes: np.ndarray
                      ) -> tuple[list[tuple[int, int, np.ndarray]], list[float]]:
        """On a trial of the state: pods[0] on node n, then each next member where `choose`
        puts it among `nodes`, until one fits nowhere; then the members bound released again,
        in the same order. Returns the plan [(pod, node, devices)] and the F_n of each bind's
        and release's node after it (what `bind_then_release` would measure on a trial of its
        own: the same binds and releases, in the same order). Members bound on distinct nodes
        are not released on the trial: each release leaves its node's rows as they were before
        the trial (integer sums), so its F_n is measured after the trial is undone.

        The first member's Filter passed every one of `nodes`, and the members are of its shape
        and the Filter plugins stateless (`_may_be_futile`): after a bind only the node bound
        may have turned a member away, so only it is filtered again."""
        sim = self.sim
        st, w = sim.state, sim.w
        usable = self.free_ready
        mask = np.zeros(st.n_slots, bool)
        mask[nodes] = True
        plan: list[tuple[int, int, np.ndarray]] = []
        frags: list[float] = []
        st.fork()
        try:
            for p in pods.tolist():
                if plan:
                    mask[n] = self.filter(st, w, p, usable, at=n)
                    n = self.choose(p, mask)
                    if n < 0:
                        break
                gpu_idx = self.pick_devices(st, w, p, n)
                st.bind(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
                frags.append(sim.fragmentation(n))
                plan.append((p, n, gpu_idx))
            distinct = len({n for _, n, _ in plan}) == len(plan)
            if not distinct:
                for p, n, gpu_idx in plan:
                    st.release(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
                    frags.append(sim.fragmentation(n))
        finally:
            st.revert()
        if distinct:
            frags += [sim.fragmentation(n) for _, n, _ in plan]
        return plan, frags

    def _released(self, j: int) -> bool:
        """The gang PostFilters, after a member of job j fit nowhere: whether one of them
        released the members waiting at Permit."""
        released = False
        for post_filter in self.gang_post_filters:
            released |= post_filter(j)
        return released

    # ---- why a pod is still pending ---------------------------------------------------
    def _reason_key(self, pods):
        """Pods alike in shape, gang locality and gang-ness are pending for the same reason."""
        w = self.sim.w
        j = w.job[pods]
        return (w.shape[pods].astype(np.int64) * 3 + w.job_locality[j]) * 2 + (w.job_min_member[j] > 1)


def _all_of(filters: list) -> Callable[..., np.ndarray]:
    """The Filter point of several plugins: a node passes every one of them."""
    def passes(state, w, pod, usable, at=None):
        mask = filters[0](state, w, pod, usable, at=at)
        for more in filters[1:]:
            mask = mask & more(state, w, pod, usable, at=at)
        return mask
    return passes


def _weighted_sum(plugins: tuple) -> Callable[..., np.ndarray]:
    """The Score point: one plugin's scores as they are; of several, the sum of weight x score
    (upstream's framework weighs each Score plugin)."""
    if len(plugins) == 1:
        return plugins[0].score

    def total(state, w, pod, nodes, rng):
        out = np.zeros(len(nodes))
        for plugin in plugins:
            out += plugin.weight * plugin.score(state, w, pod, nodes, rng)
        return out
    return total
