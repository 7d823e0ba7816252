"""Gang scheduling as kube-scheduler itself does it: the Workload / PodGroup API (KEP-4671, the
`GenericWorkload` feature gate, beta and off by default in 1.37), topology-aware placement
(KEP-5732) and the pod-group cycle (kubernetes/kubernetes pkg/scheduler/schedule_one_podgroup.go,
plugins/gangscheduling).

A job of the trace is a PodGroup: `min_member > 1` is the policy `gang{minCount: min_member}`,
a job of several pods with `min_member = 1` the policy `basic` (its pods are scheduled one by one,
as any pod), and `gang_locality` (rack, block) its `TopologyConstraint{key}`.

  PreEnqueue   a gang's pods wait outside the queue (seen by no autoscaler) until minCount
               of them exist;
  the cycle    the group's pending pods, sorted into sub-groups of one pod signature (shape) in
               the order each first appears, are placed one by one on one snapshot, each
               assumed before the next (a trial of the state: no pod is bound and then
               released); it stops once scheduled + remaining < minCount (PlacementFeasible,
               counting members bound earlier), and succeeds if at least minCount are
               scheduled and at least one pod in this cycle: those bind, the others stay
               pending. Otherwise the whole group is rejected and backs off;
  placement    a group with a topology constraint is tried in each domain (rack or block) as a
               placement of its own, in a seeded random order, until
               `numFeasiblePlacementsToFind` have succeeded (PercentageOfPlacementsToScore:
               max(5, 100 - N * 9 / 500) % of the placements, N their nodes, at least one);
               the feasible ones are scored by PodGroupPodsCount (pods placed, normalised to
               100) plus NodeResourcesFit's MostAllocated over the placement's nodes (CPU and
               memory, weight 1 each), ties at random;
  backoff      a rejected group's back-off is min(1 s * 2^(n-1), 10 s * sqrt(pods)) after its
               n-th rejection, aligned down to whole seconds. The group goes back to the
               backoff queue, not to the unschedulable pool: it is retried without a cluster
               event. With SchedulerPopFromBackoffQ (on by default) it is popped once the
               active queue is empty, before its back-off ends: in one instant, after the
               jobs not backing off; without it, when the back-off ends.

Exact shortcuts: a retry over an unchanged cluster fails as the attempt before it did, so a
group popped from the backoff queue is retried only once capacity changed (the framework's
rule for every job); without SchedulerPopFromBackoffQ it is retried when its back-off ends,
changed or not, each failure counted, as upstream. Within a cycle, where a group of one shape
found no place for `need` pods, as many or more of that shape and locality are not tried (those
that follow one another in the queue rejected in one step, MEMO_RUNS_AT_ONCE).
A topology-constrained group of one shape places in each domain exactly as many pods as
`fits_on` counts there (binds of pods alike only take room), so its placements are scored from
those counts and only the chosen one's trial runs, where no trial would move nextStartNodeIndex
(no domain holds more usable nodes than a walk looks for) and no plugin remembers a trial or
draws a random number (TRIALS_FORETOLD).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.filters import feasible, fits_on, groups_that_fit
from harness.scheduler.gang import quorum_exists
from harness.scheduler.plugin import Plugin, Profile
from harness.settings import check, duration, flag, integer
from harness.status import BOUND, PENDING, RUNNING

#: the backoff queue's ordering window: expirations are aligned down to it (upstream 1 s)
BACKOFF_WINDOW_S = 1.0
#: NodeResourcesFit's default scoring resources and weights, for a placement's MostAllocated score
PLACEMENT_RESOURCE_WEIGHTS = {"cpu": 1, "memory": 1}
MAX_SCORE = 100
#: A topology-constrained group of one pod shape is scored from what its trials would place,
#: counted (`GangScheduling._trials_foretold`), and only the chosen placement's trial runs. Not
#: a behaviour switch: the outputs are the same either way, bit for bit; off, every placement's
#: trial runs (the reference the tests compare with).
TRIALS_FORETOLD = True
#: A group of one pod shape with no member bound is rejected by the cycle's failure memo before
#: its pending pods are listed: the memo's key and bound need only the job's shape, locality,
#: priority and minCount (`GangScheduling._failed_before`). Not a behaviour switch: the outputs
#: are the same either way, bit for bit; off, the memo is read after the pods are listed (the
#: reference the tests compare with).
MEMO_BEFORE_PODS = True
#: Gangs the cycle's failure memo rejects one after another in the queue are rejected in one
#: step (`GangScheduling.rejected_run`). Not a behaviour switch: the outputs are the same either
#: way, bit for bit; off, each is rejected on its own turn through the cycle (the reference the
#: tests compare with).
MEMO_RUNS_AT_ONCE = True
#: a run of at least this many groups is rejected in vector steps (`GangScheduling._reject_all`),
#: a shorter one group by group (a vector step's fixed cost is a few groups' rejections)
REJECTED_AT_ONCE = 8
#: the jobs left in a cycle's order from which `GangScheduling.rejected_run` finds the memo's
#: rejections for all of them in vector steps (a few dozen tests' cost), before that job by job
MEMO_SCANNED_AT_ONCE = 32
#: pod shapes whose room per node a plugin remembers (`GangScheduling.room`), the one counted
#: longest ago forgotten first: a bound on memory (a node slot each), not a behaviour switch
ROOM_SHAPES_KEPT = 64


@dataclass(slots=True)
class KnownRoom:
    """How many pods of one shape each node slot can take one after another (`fits_on`; 0 where
    the Filter or `usable` says no), counted when `ClusterState.mutations` was `stamp` over the
    usable nodes `usable` (the scheduler's array), and their sums by domain, for each topology
    key asked (`sums`: the key's array of domain ids, the sums)."""

    usable: np.ndarray
    stamp: int
    fits: np.ndarray
    sums: list[tuple[np.ndarray, np.ndarray]]


def percentage_of_placements(percentage: int, n_nodes: int) -> int:
    """PercentageOfPlacementsToScore: the configured percentage, or (0) adaptive: from 100 %
    down to 10 % at 5,000 nodes over all placements, never below 5 %."""
    return percentage if percentage > 0 else max(5, 100 - n_nodes * 9 // 500)


def feasible_placements_to_find(percentage: int, n_placements: int, n_nodes: int) -> int:
    """How many feasible placements a group's cycle looks for before it scores them."""
    return max(1, n_placements * percentage_of_placements(percentage, n_nodes) // 100)


def group_backoff_s(attempts: int, pods: int, initial_s: float, max_s: float) -> float:
    """The back-off after a group's `attempts`-th rejection: initial_s doubling per attempt,
    up to max_s times the square root of its size (upstream's calculateBackoffDuration)."""
    if max_s <= 0 or attempts <= 0:
        return 0.0
    cap = max_s * math.sqrt(pods) if pods > 1 else max_s
    shift = attempts - 1
    if shift >= 63 or initial_s * 2.0 ** shift > cap:  # upstream: initial > max >> shift
        return cap
    return initial_s * 2.0 ** shift


def group_backoffs_s(attempts: np.ndarray, pods: np.ndarray, initial_s: float, max_s: float) -> np.ndarray:
    """`group_backoff_s` of many groups at once (each after at least one rejection): the same
    floats, as each step is the same IEEE operation (a power of two is exact, a square root
    correctly rounded)."""
    if max_s <= 0:
        return np.zeros(len(attempts))
    cap = np.where(pods > 1, max_s * np.sqrt(pods), max_s)
    shift = attempts - 1
    grown = initial_s * 2.0 ** np.minimum(shift, 62)
    return np.where((shift >= 63) | (grown > cap), cap, grown)


class GangScheduling(Plugin):
    """kube-scheduler's GangScheduling plugin and pod-group cycle (module docstring)."""

    SETTINGS = {
        "initial_backoff_s": duration("the pod back-off after a group's first rejection (podInitialBackoffSeconds)"),
        "max_backoff_s": duration("the most a pod backs off (podMaxBackoffSeconds; a group's cap is this times "
                                  "the square root of its size; 0: no back-off)"),
        "pop_from_backoff_queue": flag("SchedulerPopFromBackoffQ: a backing-off group is tried once nothing else "
                                       "waits (false: only when its back-off ends)"),
        "percentage_of_placements_to_score": integer("percentage of a topology-constrained group's placements "
                                                     "evaluated before scoring (0: adaptive)", ge=0, le=100),
    }

    def __init__(self, initial_backoff_s: float = 1.0, max_backoff_s: float = 10.0,
                 pop_from_backoff_queue: bool = True, percentage_of_placements_to_score: int = 0):
        check(self, "loop.scheduler.gang", initial_backoff_s=initial_backoff_s, max_backoff_s=max_backoff_s,
              pop_from_backoff_queue=pop_from_backoff_queue,
              percentage_of_placements_to_score=percentage_of_placements_to_score)
        self.initial_backoff_s = float(initial_backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.pop_from_backoff_queue = bool(pop_from_backoff_queue)
        self.percentage_of_placements_to_score = int(percentage_of_placements_to_score)

    def attach(self, scheduler: Profile) -> None:
        super().attach(scheduler)
        n_jobs = self.sim.w.n_jobs
        self.rejections = np.zeros(n_jobs, np.int64)  # the group's UnschedulableCount
        self.backoff_until = np.full(n_jobs, -np.inf)
        self.rng = np.random.default_rng([self.sim.seed, 4])  # placements' order and score ties
        at = scheduler.points()
        #: a trial placement leaves nothing behind but its plan and where the next walk starts: no
        #: Filter, Score or Reserve plugin remembers it or draws a random number
        self.trials_leave_no_trace = all(p.stateless for p in at["Filter"] + at["Score"] + at["Reserve"])
        #: the usable nodes and topology key the domain table was counted for (`_domains`)
        self.domains_of: tuple[np.ndarray, np.ndarray, tuple[int, int] | None] | None = None
        self.domain_nodes = np.zeros(0, np.int64)
        self.known_room: dict[int, KnownRoom] = {}  # by pod shape, the one counted longest ago first
        #: the cycle's order and memo that `run_ends` was found for (`rejected_run`)
        self.run_ends_of: tuple[list[int], tuple] | None = None
        self.run_ends = np.zeros(0, np.int64)

    # ---- PreEnqueue and the queue ----------------------------------------------------------
    def is_gang(self, j: int) -> bool:
        """Job j is a PodGroup with the gang policy (minCount > 1)."""
        return bool(self.sim.w.job_min_member[j] > 1)

    def pre_enqueue(self, j: int) -> bool:
        """GangScheduling's PreEnqueue: a gang's pods wait outside the queue until minCount of
        them exist (gangscheduling.go: `AllPodsCount() < MinCount` rejects, bound ones counted;
        a Pod/Add event tries again). Other jobs pass (the basic policy, a pod alone)."""
        return quorum_exists(self.sim, j)

    def backing_off(self, jobs: np.ndarray) -> np.ndarray:
        """Which of these jobs wait in the backoff queue (their back-off has not ended)."""
        return self.backoff_until[jobs] > self.sim.now

    # ---- the pod-group cycle --------------------------------------------------------------
    def schedule_group(self, j: int) -> bool:
        """One pod-group cycle for gang j: bind what the best feasible placement scheduled, or
        reject the whole group (nothing bound) and back it off. Whether it was scheduled."""
        sim, sched = self.sim, self.scheduler
        w = sim.w
        if MEMO_BEFORE_PODS and self._failed_before(j):
            return False
        pods = sim.unbound_pods(j)
        shapes = w.shape[pods]
        alike = bool((shapes == shapes[0]).all())
        if not alike:  # sub-groups by signature, first seen first
            _, first, inverse = np.unique(shapes, return_index=True, return_inverse=True)
            pods = pods[np.argsort(first[inverse], kind="stable")]
        scheduled = int(sim.job_placed[j])
        need = max(int(w.job_min_member[j]) - scheduled, 1)  # and at least one pod of this cycle
        # within a cycle capacity only shrinks: where `need` pods of one shape found no place,
        # as many or more of that shape (and locality) will not either
        failed = sched.cycle_state.failed
        memo = ("pod_group", int(shapes[0]), int(w.job_locality[j]), int(w.job_priority[j]) if sched.preempts else 0)
        uniform = scheduled == 0 and alike  # no bound members to keep to
        if uniform and failed.get(memo, len(pods) + 1) <= need:
            self.reject(j, len(pods))
            return False
        plan = None
        usable = sched.usable(j)
        groups = sched.groups_of(j)
        for pre_filter in sched.pre_filters:  # e.g. WaitsForCapacity: wait for in-flight room
            if pre_filter(j, usable, -1 if groups is None or sim.job_anchor[j] < 0
                          else int(groups[sim.job_anchor[j]])) is None:
                return False
        if len(pods) >= need:
            if groups is None:
                plan = sched.try_place(pods, usable, keep=True, need=need)
                if plan is not None:
                    for p, n, gpu_idx in plan:
                        sched.bind(p, n, gpu_idx, on_state=True)
                    return True
                if sched.preempts:
                    return self._preempt_for(j, pods, usable, need)
            else:
                plan = self._best_placement(j, pods, usable, groups, need, scheduled, alike)
        if plan is None:
            if uniform and not sched.cycle_state.preempted:
                failed[memo] = min(failed.get(memo, need), need)
            self.reject(j, len(pods))
            return False
        st = sim.state
        for p, n, gpu_idx in plan:
            sched.bind(p, n, gpu_idx)
            sched.reserve(st, w, p, n)
        return True

    def _failed_before(self, j: int) -> bool:
        """`schedule_group`'s memo test for a gang of one shape (`job_shape`: its pending pods
        are alike, of the job's shape) with no member bound, without listing its pods: rejected
        (True) if as many or fewer of its shape and locality found no place in this cycle.
        False: not known, the cycle goes on as ever (nothing was changed)."""
        if self._known_failure(j) is None:
            return False
        sim = self.sim
        self.reject(j, int(np.count_nonzero(sim.pod_status[sim.w.job_pods[j]] == PENDING)))
        return True

    def _known_failure(self, j: int) -> int | None:
        """The fewest pods of gang j's class (shape, locality and, with preemption, priority)
        that found no place in this cycle, if j (of one shape, no member bound) needs as many
        or more, else None."""
        sim, sched = self.sim, self.scheduler
        w = sim.w
        shape = sched.job_shape(j)
        if shape < 0 or sim.job_placed[j] != 0:
            return None
        memo = ("pod_group", shape, int(w.job_locality[j]), int(w.job_priority[j]) if sched.preempts else 0)
        known = sched.cycle_state.failed.get(memo)
        if known is None or known > max(int(w.job_min_member[j]), 1):
            return None
        return known

    def rejected_run(self, order: list[int], i: int) -> int:
        """How many jobs from order[i] on the cycle's failure memo rejects one after another
        (`_failed_before`), each rejected here as its own turn would reject it (0: order[i] goes
        its own way through the cycle; the caller marks the others tried). A rejection moves
        only the job's own count and back-off, which no other job's test reads, and the memo
        changes only on the turn of a job that goes its own way, so every job up to the next
        such one is tested against the memo as it is now, whatever its class: its shape,
        locality and minCount, and no member bound (a job's members are bound only on its own
        turn). Not with preemption (a PostFilter that evicts; the memo then holds per priority)."""
        sched = self.scheduler
        failed = sched.cycle_state.failed
        if not MEMO_RUNS_AT_ONCE or not failed or sched.preempts or self._known_failure(order[i]) is None:
            return 0
        if len(order) - i < MEMO_SCANNED_AT_ONCE:
            end = i + 1
            while end < len(order) and self._known_failure(order[end]) is not None:
                end += 1
        else:
            memo = tuple((key, known) for key, known in failed.items() if key[0] == "pod_group")
            if self.run_ends_of is None or self.run_ends_of[0] is not order or self.run_ends_of[1] != memo:
                self.run_ends = self._memo_run_ends(order, memo)
                self.run_ends_of = (order, memo)
            end = int(self.run_ends[i])
        if end - i >= REJECTED_AT_ONCE:
            self._reject_all(np.array(order[i:end], np.int64))
        else:
            status, pods_of = self.sim.pod_status, self.sim.w.job_pods
            for k in order[i:end]:
                self.reject(k, int(np.count_nonzero(status[pods_of[k]] == PENDING)))
        return end - i

    def _memo_run_ends(self, order: list[int], memo: tuple) -> np.ndarray:
        """For each position of `order`, where the run of jobs the memo (the cycle's pod-group
        failures: ((key, fewest pods that found no place), ...)) rejects from there ends: the
        position itself where its job is not rejected. A job is rejected (`_known_failure`) when
        it is of one shape with no member bound and a memo entry of its shape and locality found
        no place for as many of its pods or fewer (every entry's bound is a gang's minCount, > 1)."""
        sim, sched, w = self.sim, self.scheduler, self.sim.w
        jobs = np.array(order, np.int64)
        shape, locality, min_member = w.shape[sched.job_first_pod[jobs]], w.job_locality[jobs], w.job_min_member[jobs]
        rejected = np.zeros(len(jobs), bool)
        for (_, memo_shape, memo_locality, _), known in memo:
            rejected |= (shape == memo_shape) & (locality == memo_locality) & (min_member >= known)
        rejected &= sched.job_uniform[jobs] & (min_member > 1) & (sim.job_placed[jobs] == 0)
        stop = np.where(rejected, len(jobs), np.arange(len(jobs)))
        return np.minimum.accumulate(stop[::-1])[::-1]

    def _reject_all(self, jobs: np.ndarray) -> None:
        """`reject` of each of these distinct jobs (no member bound), in turn, in vector steps."""
        sim = self.sim
        pending = sim.first_pending(jobs, np.zeros_like(jobs))[0]  # the counts only
        self.rejections[jobs] += 1
        rejections = self.rejections[jobs]
        wait = group_backoffs_s(rejections, pending, self.initial_backoff_s, self.max_backoff_s)
        now = sim.now
        until = np.where(wait > 0, np.floor((now + wait) / BACKOFF_WINDOW_S) * BACKOFF_WINDOW_S, now)
        self.backoff_until[jobs] = until
        if not self.pop_from_backoff_queue:
            for j, at, count in zip(jobs.tolist(), until.tolist(), rejections.tolist(), strict=True):
                if at > now:
                    sim.at(at, self._backoff_ended, j, count)

    def _preempt_for(self, j: int, pods: np.ndarray, usable: np.ndarray, need: int) -> bool:
        """KEP-5710's PodGroupPostFilter, the cluster as one domain: remove every unit of lower
        priority (a gang whole, any other pod alone) on the usable nodes, place the group; if
        it fits, give the units back from the most important (higher priority, then longer
        running) while every placed member still fits on its node; evict the rest and bind.
        Victims are chosen only if the whole group (minCount) then fits."""
        sim, sched = self.sim, self.scheduler
        st, w = sim.state, sim.w
        priority = w.job_priority[j]
        active = np.flatnonzero((sim.pod_status == BOUND) | (sim.pod_status == RUNNING))
        lower = active[(w.job_priority[w.job[active]] < priority) & usable[sim.pod_node[active]]]
        if len(lower) == 0:
            self.reject(j, len(pods))
            return False
        jobs = w.job[lower]
        start = np.where(np.isnan(sim.pod_start[lower]), sim.now, sim.pod_start[lower])
        units, first, inverse = np.unique(jobs, return_index=True, return_inverse=True)
        unit_start = np.full(len(units), np.inf)
        np.minimum.at(unit_start, inverse, start)
        ranked = np.lexsort((units, unit_start, -w.job_priority[units].astype(np.int64)))  # most important first
        st.fork()
        self._move(lower, bind=False)
        plan = sched.place_each(pods, usable, need, reserve=False)
        if plan is None:
            st.revert()
            self.reject(j, len(pods))
            return False
        for p, n, gpu_idx in reversed(plan):  # off again: each unit given back is tried with the group
            st.release(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
        nodes = [n for _, n, _ in plan]
        victims = []
        for u in ranked.tolist():
            members = lower[inverse == u]
            self._move(members, bind=True)
            if not self._fits_on(pods=[p for p, _, _ in plan], nodes=nodes, usable=usable):
                self._move(members, bind=False)
                victims.append(members)
        st.revert()
        if victims:
            sched.evict(np.concatenate(victims))
            sched.cycle_state.failed.clear()  # the victims' room: what failed may fit now
        for p, n, _ in plan:
            sched.bind(p, n, sched.pick_devices(st, w, p, n))
            sched.reserve(st, w, p, n)
        return True

    def _fits_on(self, pods: list[int], nodes: list[int], usable: np.ndarray) -> bool:
        """Whether each pod, in turn, still passes the Filter on its node (each taken as it
        passes), on the open trial; the state is as before on return."""
        sched, st, w = self.scheduler, self.sim.state, self.sim.w
        taken = []
        ok = True
        for p, n in zip(pods, nodes, strict=True):
            if not sched.filter(st, w, p, usable, at=n):
                ok = False
                break
            gpu_idx = sched.pick_devices(st, w, p, n)
            st.bind(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
            taken.append((p, n, gpu_idx))
        for p, n, gpu_idx in reversed(taken):
            st.release(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
        return ok

    def _move(self, pods: np.ndarray, bind: bool) -> None:
        """Give these pods' resources on their nodes back to the trial state, or take them again."""
        sim, st, w = self.sim, self.sim.state, self.sim.w
        op = st.bind if bind else st.release
        for q in pods.tolist():
            gpus = sim.pod_gpus[q]
            assert gpus is not None, "a pod on a node holds its devices"
            op(int(sim.pod_node[q]), int(w.cpu[q]), int(w.mem[q]), gpus, int(w.milli[q]))

    def _best_placement(self, j: int, pods: np.ndarray, usable: np.ndarray, groups: np.ndarray, need: int,
                        scheduled: int, alike: bool) -> list | None:
        """KEP-5732: evaluate the group in each domain of its topology key, in a random order,
        until enough placements succeeded; the best of them by score. (`alike`: the pods are of
        one shape.)"""
        sim, sched = self.sim, self.scheduler
        st, w = sim.state, sim.w
        anchor = sim.job_anchor[j]
        domain_nodes = self._domains(usable, groups)
        domains = np.flatnonzero(domain_nodes)
        if anchor >= 0:  # members already placed: only the placement holding them
            domains = domains[domains == groups[anchor]]
        if len(domains) == 0:
            return None
        to_find = feasible_placements_to_find(self.percentage_of_placements_to_score, len(domains),
                                              int(domain_nodes[domains].sum()))
        order = domains[self.rng.permutation(len(domains))] if len(domains) > 1 else domains
        if alike:  # an exact test first: where too few fit, the trial fails anyway
            room = self.room(int(pods[0]), usable, groups)
            order = order[room[order] >= need]
            if len(order[:to_find]) > 1 and self._trials_foretold(order[:to_find], domain_nodes):
                return self._foretold_placement(order[:to_find], room, pods, usable, groups, need, scheduled)
        elif need == len(pods):
            fits = np.zeros(len(domain_nodes), bool)
            fits[groups_that_fit(st, w, pods, usable, groups)] = True
            order = order[fits[order]]
        found: list[tuple[int, list]] = []
        for d in order.tolist():
            plan = sched.try_place(pods, usable & (groups == d), need=need)
            if plan is not None:
                found.append((d, plan))
                if len(found) >= to_find:
                    break
        if not found:
            return None
        if len(found) == 1:
            return found[0][1]
        placed = [np.fromiter((p for p, _, _ in plan), np.int64, len(plan)) for _, plan in found]
        return found[self._pick(self._score_placements([d for d, _ in found], placed, groups, usable, scheduled))][1]

    def room(self, pod: int, usable: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """How many pods shaped like `pod` each domain of `groups` can take one after another: the
        sum of `fits_on` over its `usable` nodes the Filter passes, indexed by domain id. Exact
        for a group of that shape: binds of pods alike only take room, so a trial placing P of
        them pod by pod places min(P, this). Each node's count is remembered per shape and
        counted again only where the node changed since (`ClusterState.changed_at`, which every
        change of a node's contents or layout moves: the Filter and `fits_on` read the node and
        the pod alone) or became usable or unusable, their sums by domain moved by the
        difference. (The caller reads the array, never writes it.)"""
        st, w = self.sim.state, self.sim.w
        shape = int(w.shape[pod])
        known = self.known_room.pop(shape, None)
        if known is None or st.in_trial:
            fits = np.zeros(st.n_slots, np.int64)
            nodes = np.flatnonzero(feasible(st, w, pod, usable))
            if len(nodes):
                fits[nodes] = fits_on(st, w, pod, nodes)
            known = KnownRoom(usable, st.mutations, fits, [])
        elif known.stamp != st.mutations or known.usable is not usable:
            moved = st.changed_at > known.stamp
            if known.usable is not usable:
                moved |= known.usable != usable
            changed = np.flatnonzero(moved)
            if len(changed):
                was = known.fits[changed]
                nodes = changed[feasible(st, w, pod, usable, at=changed)]
                known.fits[changed] = 0
                if len(nodes):
                    known.fits[nodes] = fits_on(st, w, pod, nodes)
                delta = known.fits[changed] - was
                for ids, sums in known.sums:  # whole numbers: the sums are exact in any order
                    np.add.at(sums, ids[changed], delta)
            known.stamp, known.usable = st.mutations, usable
        if not st.in_trial:  # what a trial reads may be undone, its stamps reused
            self.known_room[shape] = known
            if len(self.known_room) > ROOM_SHAPES_KEPT:
                del self.known_room[next(iter(self.known_room))]
        for ids, sums in known.sums:
            if ids is groups:
                return sums
        sums = np.bincount(groups, weights=known.fits).astype(np.int64)  # whole numbers far below 2**53: exact
        known.sums.append((groups, sums))
        return sums

    def _domains(self, usable: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """How many `usable` nodes each domain of `groups` (a rack or block id) holds: counted
        again only when the scheduler's usable nodes (a new array, when the ready nodes or taints
        change) or the topology key change."""
        key = self.domains_of
        if key is None or key[0] is not usable or key[1] is not groups or key[2] != self.scheduler.usable_key:
            self.domain_nodes = np.bincount(groups[usable])
            self.domains_of = (usable, groups, self.scheduler.usable_key)
        return self.domain_nodes

    def _trials_foretold(self, found: np.ndarray, domain_nodes: np.ndarray) -> bool:
        """Whether the trials of a group of one shape in these domains (each one where it fits)
        need not run to be known: each would place the pods `room` counts, and leave
        nothing behind (`trials_leave_no_trace`) but its plan, as every walk of it checks all the
        nodes it could find (no domain holds more usable nodes than a walk looks for) and so
        leaves nextStartNodeIndex where it was. Only the chosen one's plan is needed."""
        return (TRIALS_FORETOLD and self.trials_leave_no_trace
                and bool((domain_nodes[found] <= self.scheduler.nodes_to_find()).all()))

    def _foretold_placement(self, found: np.ndarray, room: np.ndarray, pods: np.ndarray, usable: np.ndarray,
                            groups: np.ndarray, need: int, scheduled: int) -> list:
        """The best of these placements (`_trials_foretold`), scored by the pods each would place
        (the first `room` of them, as a trial places pods alike in turn until one fits nowhere),
        and the chosen one's plan, from its trial."""
        placed = [pods[:int(n)] for n in np.minimum(room[found], len(pods)).tolist()]
        pick = self._pick(self._score_placements(found.tolist(), placed, groups, usable, scheduled))
        plan = self.scheduler.try_place(pods, usable & (groups == found[pick]), need=need)
        assert plan is not None and len(plan) == len(placed[pick]), "fits_on counts exactly the pods a trial places"
        return plan

    def _pick(self, score: np.ndarray) -> int:
        """The placement with the best score, ties at random."""
        best = np.flatnonzero(score == score.max())
        return int(best[0]) if len(best) == 1 else int(best[self.rng.integers(len(best))])

    def _score_placements(self, domains: list[int], placed: list[np.ndarray], groups: np.ndarray,
                          usable: np.ndarray, scheduled: int) -> np.ndarray:
        """PodGroupPodsCount (normalised to MAX_SCORE) plus NodeResourcesFit MostAllocated of
        each placement (the pods `placed` in domain `domains[i]`): (allocated + requested) /
        allocatable over its nodes, CPU and memory."""
        st, w = self.sim.state, self.sim.w
        counts = np.array([scheduled + len(pods) for pods in placed], float)
        score = counts * MAX_SCORE / counts.max()
        weights = PLACEMENT_RESOURCE_WEIGHTS
        for i, (d, pods) in enumerate(zip(domains, placed, strict=True)):
            nodes = np.flatnonzero(usable & (groups == d))
            cpu = (st.cpu_cap[nodes] - st.cpu_free[nodes]).sum() + w.cpu[pods].sum()
            mem = (st.mem_cap[nodes] - st.mem_free[nodes]).sum() + w.mem[pods].sum()
            fractions = {"cpu": cpu / st.cpu_cap[nodes].sum(), "memory": mem / st.mem_cap[nodes].sum()}
            score[i] += sum(weights[r] * fractions[r] * MAX_SCORE for r in weights) / sum(weights.values())
        return score

    def reject(self, j: int, pods: int) -> None:
        """The group is rejected whole (`pods` of it pending) and goes back to the backoff queue."""
        self.rejections[j] += 1
        wait = group_backoff_s(int(self.rejections[j]), pods, self.initial_backoff_s, self.max_backoff_s)
        now = self.sim.now
        until = math.floor((now + wait) / BACKOFF_WINDOW_S) * BACKOFF_WINDOW_S if wait > 0 else now
        self.backoff_until[j] = until
        if until > now and not self.pop_from_backoff_queue:
            self.sim.at(until, self._backoff_ended, j, int(self.rejections[j]))

    def _backoff_ended(self, j: int, rejections: int) -> None:
        """The back-off ran out: the group is tried again (if it was not tried meanwhile)."""
        if rejections == self.rejections[j]:
            self.scheduler.requeue(j)

