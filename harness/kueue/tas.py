"""Kueue's Topology Aware Scheduling (TAS): a workload that asks for one domain of a topology
level (a rack, a block) is admitted only with an assignment of its pods to that topology, from
the free capacity Kueue sees of the flavor's ready nodes; the scheduler then keeps its pods to
the assigned domains (`Gate.admit`'s nodes).

`Topology.assign` is upstream's algorithm (kueue pkg/cache/tas_flavor_snapshot.go,
findTopologyAssignment, with the default BestFit profile), on arrays:
  phase 1  how many of the podset's pods each node can take, summed up the levels;
  phase 2a at the requested level, the domain that fits them all with the least room (best
           fit; ties go to the first domain in label order, after the roomiest); none fits:
           `required` fails, `preferred` tries the level above, and at the top level takes
           domains greedily, roomiest first;
  phase 2b down each level below, the chosen domains' children, roomiest first, as few as
           hold the pods (best fit for the last one), until the lowest level.

`TopologyAssigner` is what KueueLoop asks (`tas: true`): the trace's gang locality claim (one
rack, one block) is the job's `required` topology request; a job without one, or a flavor
without a topology, is not assigned (admitted as before). A podset is one pod shape: a job of
mixed shapes is counted in pods of its first one. Within one step, jobs admitted earlier take
their assigned pods off a scratch copy of the capacity (upstream's TAS usage of admitted
workloads), since the scheduler places them only after the admission cycles. As upstream,
only ready nodes count: a job whose domain does not exist yet is not admitted (no autoscaler
sees it), and its set-aside queue entries return when the cluster's capacity changes (the TAS
node controller requeues inadmissible workloads on node events).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.filters import bind_alike, fits_count
from harness.kueue.queues import LEVELS, Kueue
from harness.state import ClusterState
from harness.workload import LOCALITY_CODE, Workload


def _best_fit(states: np.ndarray, want: int) -> int:
    """findBestFitDomainIdx over states sorted roomiest first: the first domain of the least
    room that still holds `want` (0 when the first does not)."""
    ok = states >= want
    if not ok[0]:
        return 0
    return int(np.flatnonzero(states == states[ok].min())[0])


def _sorted(domains: np.ndarray, state: np.ndarray) -> np.ndarray:
    """Roomiest first; ties in label order (domain numbers follow it)."""
    return domains[np.lexsort((domains, -state[domains]))]


def _to_minimum(domains: np.ndarray, state: np.ndarray, want: int) -> list[tuple[int, int]]:
    """updateCountsToMinimum: as few of these (sorted) domains as hold `want` pods, the last
    by best fit: [(domain, pods it gets)]."""
    out, left = [], want
    for i in range(len(domains)):  # ends at the first domain that holds the rest: few turns
        d = int(domains[i])
        if state[d] >= left:
            d = int(domains[i + _best_fit(state[domains[i:]], left)])
            out.append((d, left))
            return out
        left -= int(state[d])
        out.append((d, int(state[d])))
    raise AssertionError("the chosen domains hold the pods")


class Topology:
    """A topology's domains, numbered once from each leaf's path (a node's block and rack never
    change): `paths[n, l]` is leaf n's domain at level l (levels top first; the numbers in each
    column ordered as the domains' labels)."""

    def __init__(self, paths: np.ndarray):
        # each domain is its path prefix; np.unique orders them as their labels
        self.dom = [np.unique(paths[:, :lv + 1], axis=0, return_inverse=True)[1].ravel()
                    for lv in range(paths.shape[1])]
        self.size = [int(d.max(initial=-1)) + 1 for d in self.dom]
        self.parent = [np.zeros(0, np.int64)] + [np.zeros(n, np.int64) for n in self.size[1:]]
        for lv in range(1, len(self.dom)):
            self.parent[lv][self.dom[lv]] = self.dom[lv - 1]
        self.leaf = np.full(self.size[-1], -1, np.int64)
        self.leaf[self.dom[-1]] = np.arange(len(paths))

    def assign(self, counts: np.ndarray, level: int, want: int, required: bool) -> list[tuple[int, int]] | None:
        """Place `want` pods, `counts[n]` of which fit leaf n (0 on a leaf that takes none);
        `level`: the requested level's column. Returns [(leaf, pods)] or None (no fit)."""
        dom = self.dom
        state = [np.bincount(d, weights=counts, minlength=n).astype(np.int64)
                 for d, n in zip(dom, self.size, strict=True)]
        lv = level
        while True:  # phase 2a
            order = _sorted(np.arange(len(state[lv])), state[lv])
            s = state[lv][order]
            if len(s) == 0:
                return None
            top = _best_fit(s, want) if s[0] >= want else 0
            if s[top] >= want:
                chosen = [(int(order[top]), want)]
                break
            if required:
                return None
            if lv > 0:
                lv -= 1
                continue
            picked, left, i = [], want, 0
            while left > 0 and i < len(s) and s[i] > 0:
                off = _best_fit(s[i:], left) if s[i] >= left else 0
                picked.append(order[i + off])
                left -= int(s[i])
                i += 1
            if left > 0:
                return None
            chosen = _to_minimum(np.array(picked, np.int64), state[lv], want)
            break
        for below in range(lv + 1, len(dom)):  # phase 2b
            children = np.flatnonzero(np.isin(self.parent[below], [d for d, _ in chosen]))
            chosen = _to_minimum(_sorted(children, state[below]), state[below], want)
        return [(int(self.leaf[d]), k) for d, k in chosen]


class TopologyAssigner:
    """The TAS half of KueueLoop's admission: `fits` is Admission's `topology_fits`;
    `admitted` gives the nodes an admitted job's pods are kept to."""

    def __init__(self, kueue: Kueue, state: ClusterState, w: Workload):
        self.kueue, self.state = kueue, state
        # Kueue counts a podset's pods before it writes their nodeSelector: a job evicted and
        # queued again is not kept to the nodes of its last admission here
        self.w = replace(w, placement=np.zeros_like(w.placement))
        self.flavor_slots = kueue.flavor_pools[:, state.slot_pool]  # flavor x node slot
        column: dict[str, np.ndarray] = {"block": state.slot_block, "rack": state.slot_rack,
                                         "node": np.arange(state.n_slots)}
        # the leaves are nodes: a topology whose lowest level is above them counts each node's
        # room apart (upstream sums their capacity into one leaf first)
        self.paths = [np.stack([column[lv] for lv in (levels if "node" in levels else (*levels, "node"))], axis=1)
                      for levels in kueue.flavor_levels]  # a flavor without a topology: a node column, unused
        self.topology = [Topology(paths) for paths in self.paths]
        self.level_of = {LOCALITY_CODE[lv]: lv for lv in LEVELS if lv in LOCALITY_CODE}
        self.scratch: ClusterState | None = None  # this step's capacity less the assigned pods
        self.found: dict[int, tuple[int, list[tuple[int, int]], np.ndarray]] = {}
        self.shape = w.shape.copy()  # the pods' shapes as compiled, whatever nodes they are kept to later
        #: the answers on the scratch capacity by (shape, pods, flavor, level): a queue often holds many
        #: jobs alike, and the capacity changes only when one is assigned (or the step ends)
        self.answers: dict[tuple[int, int, int, str], tuple[list[tuple[int, int]], np.ndarray] | None] = {}

    def new_step(self) -> None:
        """The scheduler placed what was admitted: capacity is the cluster's again."""
        self.scratch = None
        self.found.clear()
        self.answers.clear()

    def request(self, j: int, f: int) -> str | None:
        """The level job j requires of flavor f's topology (None: no TAS request)."""
        level = self.level_of.get(int(self.w.job_locality[j]))
        return level if level is not None and self.kueue.flavor_levels[f] else None

    def fits(self, j: int, f: int) -> bool:
        """Whether flavor f's topology can take job j now (remembering the assignment)."""
        level = self.request(j, f)
        if level is None:
            return True
        levels = self.kueue.flavor_levels[f]
        if level not in levels:
            return False  # upstream: "no requested topology level"
        pods = self.w.job_pods[j]
        key = (int(self.shape[pods[0]]), len(pods), f, level)
        if key not in self.answers:
            self.answers[key] = self._assign(int(pods[0]), len(pods), f, levels.index(level))
        answer = self.answers[key]
        if answer is None:
            return False
        self.found[j] = (f, *answer)
        return True

    def _assign(self, pod: int, want: int, f: int, level: int) -> tuple[list[tuple[int, int]], np.ndarray] | None:
        """`want` pods like `pod` on flavor f's topology, in one domain of `level`: the pods
        per node, and the nodes they are kept to (the domain, within the flavor); None: no fit."""
        if self.scratch is None:
            self.scratch = self.state.copy()
        ready = self.scratch.ready & self.flavor_slots[f]
        counts = fits_count(self.scratch, self.w, pod, ready)  # per node slot, 0 off `ready`
        got = self.topology[f].assign(counts, level, want, required=True)
        if got is None:
            return None
        at = self.paths[f][:, level]
        return got, self.flavor_slots[f] & (at == at[got[0][0]])

    def admitted(self, j: int, f: int) -> np.ndarray:
        """The nodes job j's pods may use, admitted to flavor f: its assigned domain (taken
        off this step's capacity) or, without a topology request, the flavor's pools."""
        found = self.found.pop(j, None)
        if found is None or found[0] != f:
            return self.flavor_slots[f]
        _, got, mask = found
        if self.scratch is not None:
            self.answers.clear()  # the capacity they were found on is taken
            nodes = np.array([n for n, _ in got], np.int64)
            k = np.array([c for _, c in got], np.int64)
            p = int(self.w.job_pods[j][0])
            bind_alike(self.scratch, self.w, p, nodes, k)
        return mask
