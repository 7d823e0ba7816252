"""PostFilter preemption: kube-scheduler's DefaultPreemption, or none.

When a pod fits on no node, DefaultPreemption looks for a node where evicting pods of strictly
lower priority makes room (kubernetes/kubernetes pkg/scheduler/framework/plugins/defaultpreemption
and pkg/scheduler/framework/preemption):

  potential nodes  the usable nodes whose failure preemption could resolve: taints the pod
                   tolerates, its GPU model, profile and NIC (what no eviction changes);
  candidates       from a random offset in the node order, the first `num_candidates` nodes
                   where the pod fits once every lower-priority pod is gone
                   (minCandidateNodesPercentage 10 %, minCandidateNodesAbsolute 100);
  victims          on a candidate, the lower-priority pods are all removed, then given back
                   (reprieved) one by one from the most important (higher priority, then longer
                   running) while the pod still fits; those that cannot come back are victims;
  the node         pickOneNodeForPreemption's criteria in order: the lowest highest-priority
                   victim, the lowest sum of victim priorities, the fewest victims, the latest
                   start of the highest-priority victims, then the first in the walk.

Where we model otherwise: a gang is a victim whole (its members on the node are reprieved or
evicted together, and `Simulation.evict` takes its members elsewhere too; the criteria count
the pods on the node, as upstream); victims go at once (upstream: a termination grace period,
30 s by default, while the preemptor waits nominated to the node), so the preemptor binds to
the chosen node in the same cycle; no PodDisruptionBudgets (criterion 1 ties); no
preemptionPolicy in traces (every pod may preempt). A gang placed all at once (Atomic) does
not preempt.

The candidate search is vectorized: the potential nodes and the nodes where the pod could fit
without every lower-priority pod are masks; only candidates in the walk get the exact check.
"""

from __future__ import annotations

import numpy as np

from harness.errors import ConfigError
from harness.scheduler.plugin import Plugin, Profile
from harness.settings import check, integer
from harness.state import WHOLE
from harness.status import BOUND, RUNNING

#: priorities are offset by 2^31 before they are summed, so that negative ones count less (upstream)
PRIORITY_OFFSET = 1 << 31


class NoPreemption(Plugin):
    """No preemption, the plugin of no extension point: a pod that fits nowhere stays pending
    (loop/scheduler/post_filter=none)."""


class DefaultPreemption(Plugin):
    """kube-scheduler's DefaultPreemption (module docstring), a PostFilter plugin."""

    SETTINGS = {
        "min_candidate_nodes_percentage": integer("percentage of the potential nodes preemption dry-runs for "
                                                  "candidates (upstream minCandidateNodesPercentage)", ge=0, le=100),
        "min_candidate_nodes_absolute": integer("fewest candidate nodes preemption looks for (upstream "
                                                "minCandidateNodesAbsolute)", ge=0),
    }

    #: `post_filter` may evict pods (a failure then depends on the pod's priority)
    preempts = True

    def __init__(self, min_candidate_nodes_percentage: int = 10, min_candidate_nodes_absolute: int = 100):
        check(self, "loop.scheduler.post_filter",
              min_candidate_nodes_percentage=min_candidate_nodes_percentage,
              min_candidate_nodes_absolute=min_candidate_nodes_absolute)
        if min_candidate_nodes_percentage == 0 and min_candidate_nodes_absolute == 0:
            raise ConfigError("loop.scheduler.post_filter", "min_candidate_nodes_percentage and "
                              "min_candidate_nodes_absolute = 0: they cannot both be 0 (no candidate would "
                              "ever be looked for)")
        self.percentage = int(min_candidate_nodes_percentage)
        self.absolute = int(min_candidate_nodes_absolute)

    def attach(self, scheduler: Profile) -> None:
        super().attach(scheduler)
        self.rng = np.random.default_rng([self.sim.seed, 3])  # the offset's own stream
        self.sim.allow_preemption()

    def post_filter(self, p: int, usable: np.ndarray) -> int:
        """PostFilter: pod p fits nowhere; preempt for it."""
        return self.preempt(p, usable)

    def num_candidates(self, n_potential: int) -> int:
        """calculateNumCandidates: `percentage` % of the potential nodes, at least `absolute`,
        at most all of them."""
        return min(max(n_potential * self.percentage // 100, self.absolute), n_potential)

    def preempt(self, p: int, usable: np.ndarray) -> int:
        """Find the candidates, pick one node, evict its victims; the node, or -1."""
        found = self.candidates(p, usable)
        if not found:
            return -1
        n, victims = found[pick_one(self.sim, found)]
        self.scheduler.evict(victims)
        return n

    def candidates(self, p: int, usable: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """DryRunPreemption: (node, victims on it) for the first `num_candidates` nodes of the
        walk where evicting lower-priority pods lets pod p fit."""
        sim, st, w = self.sim, self.sim.state, self.sim.w
        priority = w.job_priority[w.job[p]]
        potential = usable & (_static(st, w, p) if w.gpus[p] else st.allowed[int(w.placement[p])])
        untolerated = st.cluster.untolerated
        if untolerated is not None:
            potential = potential & ~untolerated[int(w.gpus[p] > 0)][st.slot_pool]
        order = self.scheduler.ready_order()
        order = order[potential[order]]
        if len(order) == 0:
            return []
        # what all lower-priority pods of each node would give back: a necessary condition
        active = np.flatnonzero((sim.pod_status == BOUND) | (sim.pod_status == RUNNING))
        lower = active[w.job_priority[w.job[active]] < priority]
        at = sim.pod_node[lower]
        n_slots = st.n_slots
        count = np.bincount(at, minlength=n_slots)
        cpu = np.bincount(at, weights=w.cpu[lower], minlength=n_slots)
        mem = np.bincount(at, weights=w.mem[lower], minlength=n_slots)
        milli = np.bincount(at, weights=w.gpus[lower] * w.milli[lower].astype(np.float64), minlength=n_slots)
        free_milli = st.gpu_cap.astype(np.int64) * WHOLE - st.gpu_used
        could = ((count > 0) & (st.cpu_free + cpu >= w.cpu[p]) & (st.mem_free + mem >= w.mem[p])
                 & (free_milli + milli >= int(w.gpus[p]) * int(w.milli[p])))
        offset = int(self.rng.integers(len(order)))
        walk = np.roll(order, -offset)
        walk = walk[could[walk]]
        want = self.num_candidates(len(order))
        found: list[tuple[int, np.ndarray]] = []
        for n in walk.tolist():  # the exact check, on the few nodes the masks left
            victims = self.select_victims(p, n, usable)
            if victims is not None:
                found.append((n, victims))
                if len(found) >= want:
                    break
        return found

    def select_victims(self, p: int, n: int, usable: np.ndarray) -> np.ndarray | None:
        """SelectVictimsOnNode: remove every lower-priority pod of node n; if pod p then fits,
        give them back from the most important while it still fits. The victims (ordered
        from the most important), or None if p does not fit even on the emptied node. The
        state is as before on return."""
        sim, st, w = self.sim, self.sim.state, self.sim.w
        priority = w.job_priority[w.job[p]]
        pods = np.array(sorted(sim.node_pods[n]), np.int64)
        pods = pods[w.job_priority[w.job[pods]] < priority]
        if len(pods) == 0:
            return None
        # a gang's members on the node form one unit; every other pod is a unit of its own
        unit = np.where(w.job_min_member[w.job[pods]] > 1, -1 - w.job[pods].astype(np.int64), pods)
        start = np.where(np.isnan(sim.pod_start[pods]), sim.now, sim.pod_start[pods])  # not started: now
        keys, first, inverse = np.unique(unit, return_index=True, return_inverse=True)
        unit_start = np.full(len(keys), np.inf)
        np.minimum.at(unit_start, inverse, start)
        unit_priority = w.job_priority[w.job[pods[first]]]
        ranked = np.lexsort((keys, unit_start, -unit_priority.astype(np.int64)))  # most important first
        st.fork()
        for q in pods.tolist():
            self._move(q, n, bind=False)
        fits = self.scheduler.filter
        if not fits(st, w, p, usable, at=n):
            st.revert()
            return None
        victims = []
        for u in ranked.tolist():
            members = pods[inverse == u].tolist()
            for q in members:
                self._move(q, n, bind=True)
            if not fits(st, w, p, usable, at=n):  # it cannot come back
                for q in members:
                    self._move(q, n, bind=False)
                victims.extend(members)
        st.revert()
        return np.array(victims, np.int64)

    def _move(self, q: int, n: int, bind: bool) -> None:
        """Give pod q's resources on node n back to the trial state, or take them again."""
        w, st = self.sim.w, self.sim.state
        gpus = self.sim.pod_gpus[q]
        assert gpus is not None, "a pod on a node holds its devices"
        op = st.bind if bind else st.release
        op(n, int(w.cpu[q]), int(w.mem[q]), gpus, int(w.milli[q]))


def _static(st, w, p: int) -> np.ndarray:
    """The slots whose node type could ever hold GPU pod p (model, profile, NIC per GPU),
    within its placement."""
    mask = st.static_fit(int(w.model_mask[p]), int(w.profile_bit[p]), bool(w.nic[p]), int(w.placement[p]))
    return np.ones(st.n_slots, bool) if mask is None else mask


def pick_one(sim, candidates: list[tuple[int, np.ndarray]]) -> int:
    """pickOneNodeForPreemption without PDBs: the index of the candidate with the lowest
    highest-priority victim, then the lowest sum of (priority + 2^31) over its victims, then
    the fewest victims, then the latest earliest start among its highest-priority victims
    (pods not started count as starting now), then the first."""
    w = sim.w
    highest = np.empty(len(candidates), np.int64)
    total = np.empty(len(candidates), np.int64)
    size = np.empty(len(candidates), np.int64)
    earliest = np.empty(len(candidates))
    for i, (_, victims) in enumerate(candidates):
        prio = w.job_priority[w.job[victims]].astype(np.int64)
        start = np.where(np.isnan(sim.pod_start[victims]), sim.now, sim.pod_start[victims])
        highest[i], total[i], size[i] = prio.max(), (prio + PRIORITY_OFFSET).sum(), len(victims)
        earliest[i] = start[prio == prio.max()].min()
    return int(np.lexsort((np.arange(len(candidates)), -earliest, size, total, highest))[0])
