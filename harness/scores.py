"""Score plugins: each maps candidate nodes to scores in [0, 100], higher is better
(GpuPacking's idle nodes of more than 33 GPUs go below 0, as its definition says).

A plugin is selected in config with Hydra `_target_`; several are combined by `WeightedSum`
(each plugin's `weight` scales its scores). The scheduler takes the best node, ties broken by
a seeded node order. A plugin may also choose which GPUs of the chosen node a pod takes
(`pick_devices`); by default the node's first whole free GPUs, or the best-fitting GPU for a
share.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.cluster import Cluster
from harness.errors import ConfigError
from harness.filters import claims_of, pick_devices
from harness.fragmentation import COVERAGE, TargetWorkload, node_fragmentation
from harness.settings import check, integer, number
from harness.state import WHOLE, ClusterState
from harness.workload import Workload


class ScorePlugin:
    """Base class: `score` returns one float per candidate node index in `nodes`; `weight`
    is what `WeightedSum` multiplies them by (alone, a plugin's weight changes nothing)."""

    SETTINGS = {
        "weight": number("multiplies the plugin's scores in a weighted sum", gt=0),
    }

    #: its scores and device choices are a function of the state, the pod and the candidates
    #: alone: it records no placement (`on_bind`) and draws no random number. The scheduler
    #: may then take a gang attempt that ends in a release as its net effect
    #: (`Scheduler.futile_gang`); a subclass that remembers or draws must say False.
    stateless = False
    #: its scores are a function of the pod and the candidate nodes' contents alone, not of
    #: other nodes': a gang class's futile plan may then outlive changes of other nodes
    #: (`Scheduler.plans_kept`)
    scores_candidates_alone = False

    def __init__(self, weight: float = 1.0):
        check(self, "policy", weight=weight)
        self.weight = float(weight)

    @property
    def name(self) -> str:
        """The policy's name in results tables."""
        return type(self).__name__

    def score(self, state: ClusterState, w: Workload, pod: int, nodes: np.ndarray,
              rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def pick_devices(self, state: ClusterState, w: Workload, pod: int, node: int) -> np.ndarray:
        return pick_devices(state, w, pod, node)

    def on_bind(self, state: ClusterState, w: Workload, pod: int, node: int) -> None:
        """The state now holds `pod` on `node`: a plugin that remembers placements records it
        here. Trial placements count too, between `checkpoint` and `restore`, so that the
        next member of a gang is scored as it would be once the first is bound."""

    def checkpoint(self):
        """What `restore` needs to forget the placements recorded after this call (None here)."""

    def restore(self, saved) -> None:
        """Forget the placements recorded since `checkpoint` returned `saved` (a failed or
        what-if trial, rolled back on the state)."""


class WeightedSum(ScorePlugin):
    """Several plugins at once, as kube-scheduler sums its score plugins: a node scores
    sum of weight_i x score_i. Devices on the chosen node are picked by the first plugin: a
    pod takes one set of GPUs and the plugins' choices may differ, so the one listed first
    (the primary policy) decides. Binds, trials and rollbacks reach every plugin."""

    def __init__(self, plugins: list[ScorePlugin], weight: float = 1.0):
        super().__init__(weight)
        self.plugins = list(plugins)
        if not self.plugins:
            raise ConfigError("policy.plugins", "must list at least one score plugin")

    @property
    def name(self) -> str:
        """Its weighted parts, e.g. `4*FGD+0.03*MostAllocated`: sums of other parts or
        weights are other policies in a results table."""
        return "+".join(f"{plugin.weight:g}*{plugin.name}" for plugin in self.plugins)

    def score(self, state, w, pod, nodes, rng):
        total = np.zeros(len(nodes))
        for plugin in self.plugins:
            total += plugin.weight * plugin.score(state, w, pod, nodes, rng)
        return total

    @property
    def stateless(self) -> bool:  # type: ignore[override]
        return all(plugin.stateless for plugin in self.plugins)

    @property
    def scores_candidates_alone(self) -> bool:  # type: ignore[override]
        return all(plugin.scores_candidates_alone for plugin in self.plugins)

    def pick_devices(self, state, w, pod, node):
        return self.plugins[0].pick_devices(state, w, pod, node)

    def on_bind(self, state, w, pod, node):
        for plugin in self.plugins:
            plugin.on_bind(state, w, pod, node)

    def checkpoint(self):
        return [plugin.checkpoint() for plugin in self.plugins]

    def restore(self, saved):
        for plugin, mark in zip(self.plugins, saved, strict=True):
            plugin.restore(mark)


#: Resources NodeResourcesFit and BalancedAllocation can score, named as kube-scheduler names them.
RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
#: kube-scheduler's default scoring resources (NodeResourcesFitArgs, BalancedAllocationArgs).
DEFAULT_RESOURCES = {"cpu": 1, "memory": 1}
MAX_NODE_SCORE = 100


class ResourceAllocation(ScorePlugin):
    """What NodeResourcesFit's strategies and BalancedAllocation share (kube-scheduler's
    resource_allocation.go): per node and configured resource, what would be requested with
    the pod and what is allocatable. `resources` maps a resource name to its integer weight
    (1-100). An extended resource (`nvidia.com/gpu`) counts only when listed and when the pod
    requests it ("bypass" otherwise), and, as every resource, only on nodes that have it."""

    stateless = True
    scores_candidates_alone = True

    SETTINGS = {
        "resources.*": integer("weight of a resource (cpu, memory, nvidia.com/gpu) in the node's resource score, "
                               "as kube-scheduler's scoringStrategy.resources", ge=1, le=100),
    }

    def __init__(self, weight: float = 1.0, resources: dict[str, int] | None = None):
        super().__init__(weight)
        resources = dict(DEFAULT_RESOURCES if resources is None else resources)
        check(self, "policy", resources=resources)
        unknown = sorted(set(resources) - set(RESOURCES))
        if unknown or not resources:
            raise ConfigError("policy.resources", f"{unknown or '{}'}: must name one or more of {', '.join(RESOURCES)}")
        self.resources = resources
        self.resource_ids = np.array([RESOURCES.index(name) for name in resources], np.int64)
        self.resource_weights = np.array(list(resources.values()), np.int64)

    @property
    def name(self) -> str:
        """The strategy, with its resources' weights when they are not kube-scheduler's default
        (`MostAllocated(cpu 1, memory 1, nvidia.com/gpu 3)`): other weights are another policy
        in a results table, not the same one pooled."""
        if self.resources == DEFAULT_RESOURCES:
            return type(self).__name__
        return f"{type(self).__name__}({', '.join(f'{k} {v}' for k, v in self.resources.items())})"

    def allocation_scores(self, state: ClusterState, w: Workload, pod: int, nodes: np.ndarray,
                          strategy: int) -> np.ndarray:
        """The strategy's score of each node (`allocation_scores`, compiled) with the pod on it."""
        gpus = int(w.gpus[pod])
        return allocation_scores(strategy, self.resource_ids, self.resource_weights, nodes, state.cpu_cap,
                                 state.cpu_free, state.mem_cap, state.mem_free, state.gpu_cap, state.gpu_used,
                                 int(w.cpu[pod]), int(w.mem[pod]), gpus > 0, gpus * int(w.milli[pod]))


LEAST, MOST, BALANCED = range(3)


@njit(cache=True)
def allocation_scores(strategy: int, resources: np.ndarray, weights: np.ndarray, nodes: np.ndarray,
                      cpu_cap: np.ndarray, cpu_free: np.ndarray, mem_cap: np.ndarray, mem_free: np.ndarray,
                      gpu_cap: np.ndarray, gpu_used: np.ndarray, cpu: int, mem: int, gpu: bool,
                      gpu_milli: int) -> np.ndarray:
    """kube-scheduler's resource_allocation.go scores, one node at a time (numpy built a row per
    resource and node, then a dozen arrays per score). Per configured resource (`resources`: 0
    cpu, 1 memory, 2 nvidia.com/gpu, in the configured order) what would be requested with the
    pod and what is allocatable, GPUs as milli and only for a pod with GPUs (bypassed
    otherwise); a resource counts only on nodes that have it (allocatable > 0).
      LEAST     Σ ((alloc - req) x 100 // alloc, 0 if over) x weight // Σ weight
      MOST      Σ (min(req, alloc) x 100 // alloc) x weight // Σ weight
      BALANCED  trunc((1 - std of the requested fractions, each capped at 1) x 100); of two
                fractions the std is |a - b| / 2, computed so (its rounding decides truncations)."""
    out = np.zeros(len(nodes))
    frac = np.zeros(len(resources))
    for i in range(len(nodes)):
        n = nodes[i]
        total = wsum = count = 0
        for r in range(len(resources)):
            if resources[r] == 0:
                alloc = np.int64(cpu_cap[n])
                req = alloc - cpu_free[n] + cpu
            elif resources[r] == 1:
                alloc = np.int64(mem_cap[n])
                req = alloc - mem_free[n] + mem
            elif gpu:
                alloc = np.int64(gpu_cap[n]) * WHOLE
                req = gpu_used[n] + gpu_milli
            else:
                alloc = req = np.int64(0)
            if alloc <= 0:
                frac[r] = -1.0  # the node lacks it: not counted
                continue
            count += 1
            wsum += weights[r]
            if strategy == LEAST:
                total += ((alloc - req) * 100 // alloc if req <= alloc else 0) * weights[r]
            elif strategy == MOST:
                total += min(req, alloc) * 100 // alloc * weights[r]
            else:
                frac[r] = min(req / alloc, 1.0)
        if strategy != BALANCED:
            out[i] = total // wsum if wsum > 0 else 0
            continue
        std = 0.0
        if count == 2:
            hi, lo = -np.inf, np.inf
            for r in range(len(resources)):
                if frac[r] >= 0.0:
                    hi, lo = max(hi, frac[r]), min(lo, frac[r])
            std = (hi - lo) / 2
        elif count > 2:
            mean = 0.0
            for r in range(len(resources)):
                mean += max(frac[r], 0.0)
            mean /= count
            var = 0.0
            for r in range(len(resources)):
                var += (frac[r] - mean) ** 2 if frac[r] >= 0.0 else 0.0
            std = np.sqrt(var / count)
        out[i] = np.trunc((1.0 - std) * MAX_NODE_SCORE)
    return out


class LeastAllocated(ResourceAllocation):
    """NodeResourcesFit LeastAllocated (kube-scheduler's default strategy): spread, prefer the
    emptiest node. Per resource (capacity - requested) x 100 // capacity, 0 if over capacity."""

    def score(self, state, w, pod, nodes, rng):
        return self.allocation_scores(state, w, pod, nodes, LEAST)


class MostAllocated(ResourceAllocation):
    """NodeResourcesFit MostAllocated: bin-pack, prefer the fullest node.
    Per resource min(requested, capacity) x 100 // capacity."""

    def score(self, state, w, pod, nodes, rng):
        return self.allocation_scores(state, w, pod, nodes, MOST)


class BalancedAllocation(ResourceAllocation):
    """NodeResourcesBalancedAllocation: prefer the node whose requested fractions (each capped
    at 1) stay closest to each other, trunc((1 - std) x 100) over the resources the node has
    (weights are not used, as upstream). A pod that requests none of them scores 0 everywhere
    (upstream skips the plugin for it, which adds nothing to any node)."""

    def score(self, state, w, pod, nodes, rng):
        if not self.requests_any(w, pod):
            return np.zeros(len(nodes))
        return self.allocation_scores(state, w, pod, nodes, BALANCED)

    def requests_any(self, w: Workload, pod: int) -> bool:
        """Whether the pod requests one of the plugin's resources (else it scores 0 everywhere)."""
        pod_req = {"cpu": w.cpu[pod], "memory": w.mem[pod], "nvidia.com/gpu": w.gpus[pod]}
        return any(pod_req[name] for name in self.resources)


# ---- the FGD paper's policies (ATC'23; semantics in shared/FGD.md) ----------------------
# Scores are truncated to integers as the paper's scheduler does, because the truncation
# creates the ties that its seeded node order then breaks.

#: Largest openb node (CPU milli, GPU milli): the paper's normalisation constants.
MAX_SPEC_CPU = 128_000
MAX_SPEC_GPU = 8_000


def _gpu_left(state: ClusterState, nodes: np.ndarray) -> np.ndarray:
    """Idle GPU milli of each node, from per-node summaries (no device matrix)."""
    return state.gpu_cap[nodes].astype(np.int64) * 1000 - state.gpu_used[nodes]


def _is_share(w: Workload, pod: int) -> bool:
    """A share a policy places on a GPU of its choice (a pod with claims gets the allocator's)."""
    return bool(w.gpus[pod] == 1 and w.milli[pod] < 1000) and claims_of(w, pod) is None


class RandomScore(ScorePlugin):
    """A uniformly random feasible node scores 100, all others 0; a share goes on a
    uniformly random fitting GPU. The baseline every packing policy must beat."""

    def __init__(self, weight: float = 1.0):
        super().__init__(weight)
        self._rng = np.random.default_rng(0)

    def score(self, state, w, pod, nodes, rng):
        self._rng = rng  # device choice draws from the scheduler's seeded stream too
        out = np.zeros(len(nodes))
        out[rng.integers(len(nodes))] = 100.0
        return out

    def pick_devices(self, state, w, pod, node):
        if not _is_share(w, pod):
            return super().pick_devices(state, w, pod, node)
        fit = np.flatnonzero(state.gpu_free[node, :state.gpu_cap[node]] >= w.milli[pod])
        return fit[self._rng.integers(len(fit))][None]


class DotProd(ScorePlugin):
    """Tetris-style alignment: the node with the least left in the pod's direction wins,
    100 x (1 - <node left, pod request> / 2) over normalised [CPU, GPU milli]."""

    stateless = True
    scores_candidates_alone = True

    SETTINGS = {
        "cpu_scale": number("CPU milli that normalises a node's free CPU", gt=0),
        "gpu_scale": number("GPU milli that normalises a node's free GPUs", gt=0),
    }

    def __init__(self, weight: float = 1.0, cpu_scale: float = MAX_SPEC_CPU, gpu_scale: float = MAX_SPEC_GPU):
        super().__init__(weight)
        check(self, "policy", cpu_scale=cpu_scale, gpu_scale=gpu_scale)
        self.cpu_scale, self.gpu_scale = float(cpu_scale), float(gpu_scale)

    def score(self, state, w, pod, nodes, rng):
        dot = (state.cpu_free[nodes] / self.cpu_scale * (w.cpu[pod] / self.cpu_scale)
               + _gpu_left(state, nodes) / self.gpu_scale * (w.gpu_milli_total[pod] / self.gpu_scale))
        return np.clip(np.floor(100.0 * (1.0 - dot / 2.0)), 0, 100)


class GpuClustering(ScorePlugin):
    """Keep GPU pods of one kind together: nodes are tagged by the kinds of GPU pods they hold
    ("share-gpu" or "k-gpu"); only the pod's own kind scores 75 + b, its kind among others
    50 + b, no GPU pods 25 + b, only other kinds b, with b = 25 x (8000 - GPU milli left) / 8000.
    CPU-only pods score 0 everywhere.

    Tags are recorded in `on_bind`, also for a trial's placements, which `restore` forgets
    if the trial is rolled back. A node's tags are dropped when a pod lands on it empty and
    ignored while it holds no pods (a partial release keeps its tags).
    """

    SETTINGS = {
        "gpu_scale": integer("GPU milli that normalises a node's free GPUs", ge=1),
    }

    def __init__(self, weight: float = 1.0, gpu_scale: int = MAX_SPEC_GPU):
        super().__init__(weight)
        check(self, "policy", gpu_scale=gpu_scale)
        self.gpu_scale = int(gpu_scale)
        self._cluster: Cluster | None = None
        self._bits: dict[tuple[int, int], int] = {}
        self._node_tags = np.zeros(0, np.int64)

    def _tags(self, state: ClusterState) -> np.ndarray:
        if state.cluster is not self._cluster:
            self._cluster, self._bits = state.cluster, {}
            self._node_tags = np.zeros(state.n_slots, np.int64)
        return self._node_tags

    def _bit(self, w: Workload, pod: int) -> int:
        kind = (0, 1) if _is_share(w, pod) else (int(w.gpus[pod]), 0)
        if kind not in self._bits:
            if len(self._bits) == 62:
                raise ValueError("GpuClustering tracks at most 62 kinds of GPU pods")
            self._bits[kind] = 1 << len(self._bits)
        return self._bits[kind]

    def score(self, state, w, pod, nodes, rng):
        tags = self._tags(state)
        if w.gpus[pod] == 0:
            return np.zeros(len(nodes))
        t, own = np.where(state.pods_on[nodes] == 0, 0, tags[nodes]), self._bit(w, pod)
        b = np.clip(25 * (self.gpu_scale - _gpu_left(state, nodes)) // self.gpu_scale, 0, 25)
        base = np.where(t == own, 75, np.where((t & own) != 0, 50, np.where(t == 0, 25, 0)))
        return (base + b).astype(np.float64)

    def on_bind(self, state, w, pod, node):
        tags = self._tags(state)
        if state.pods_on[node] == 1:  # the node was empty: its old tags are stale
            tags[node] = 0
        if w.gpus[pod]:
            tags[node] |= self._bit(w, pod)

    def checkpoint(self):
        return self._cluster, self._node_tags.copy()

    def restore(self, saved):
        self._cluster, self._node_tags = saved


class GpuPacking(ScorePlugin):
    """Pack GPU pods onto GPUs already in use, then onto nodes already in use, idle nodes last.

    Three tiers, packing onto GPUs in ascending order of milli left: only partly used GPUs
    needed -> max(100 - sum(left x 100 // 1000) // 10, 50); fully free GPUs needed on a used
    node -> max(50 - fully free GPUs taken, 33); an idle node -> 33 - its GPUs (smaller idle
    nodes first, as FGD.md; below 0 for nodes of more than 33 GPUs, still after every used
    node). CPU-only pods score 0 everywhere.
    """

    stateless = True
    scores_candidates_alone = True

    def score(self, state, w, pod, nodes, rng):
        k, milli = int(w.gpus[pod]), int(w.milli[pod])
        if k == 0:
            return np.zeros(len(nodes))
        whole = state.free_whole[nodes]
        if milli >= 1000:  # only fully free GPUs fit
            used = np.full(len(nodes), max(50 - k, 33))
        else:
            rows = state.gpu_free[nodes]
            left = np.where(rows >= milli, rows, 1 << 30).min(axis=1)  # best-fitting GPU
            used = np.where(left >= 1000, max(50 - 1, 33), np.maximum(100 - (left * 100 // 1000) // 10, 50))
        return np.where(whole == state.gpu_cap[nodes], 33 - whole, used).astype(np.float64)


class BestFit(ScorePlugin):
    """The node left with the least CPU and GPU after placing the pod:
    100 x (1 - [0.5 x CPU left / 128000 + 0.5 x GPU milli left / 8000]) after placement,
    truncated, then min-max rescaled over the candidates (memory ignored)."""

    stateless = True
    scores_candidates_alone = True

    SETTINGS = {
        "cpu_scale": number("CPU milli that normalises a node's free CPU", gt=0),
        "gpu_scale": number("GPU milli that normalises a node's free GPUs", gt=0),
    }

    def __init__(self, weight: float = 1.0, cpu_scale: float = MAX_SPEC_CPU, gpu_scale: float = MAX_SPEC_GPU):
        super().__init__(weight)
        check(self, "policy", cpu_scale=cpu_scale, gpu_scale=gpu_scale)
        self.cpu_scale, self.gpu_scale = float(cpu_scale), float(gpu_scale)

    def score(self, state, w, pod, nodes, rng):
        left = (0.5 * (state.cpu_free[nodes] - w.cpu[pod]) / self.cpu_scale
                + 0.5 * (_gpu_left(state, nodes) - w.gpu_milli_total[pod]) / self.gpu_scale)
        raw = np.trunc(100.0 * (1.0 - left)).astype(np.int64)
        if len(raw) == 0 or raw.min() == raw.max():
            return np.zeros(len(nodes))
        lo, hi = raw.min(), raw.max()
        return ((raw - lo) * 100 // (hi - lo)).astype(np.float64)


class FGD(ScorePlugin):
    """Fragmentation Gradient Descent: the placement that grows the node's expected
    fragmentation F_n (see `harness.fragmentation`) the least wins,
    score = trunc(100 x sigmoid((F_before - F_after) / 1000)).

    A share tries every fitting GPU and takes the best one (the first index on ties); other
    pods take whole free GPUs and CPU. F_n depends only on a node's state (type, free CPU,
    multiset of free GPU milli), so states are interned as nodes change and each
    (pod shape, state) score is computed once: a pod then costs a few array lookups over the
    candidates plus the rare new states, not a fragmentation pass over every node.

    The target workload is `target` when set (the packing runner sets it from the original
    pod list), else the most frequent shapes of the replayed workload covering `coverage`.
    """

    SETTINGS = {
        "coverage": number("share of pods the typical pod shapes cover", gt=0, le=1),
    }

    #: about how many (pod shape, node state) scores the cache holds before it starts afresh
    CACHE_SCORES = 1 << 21

    def __init__(self, weight: float = 1.0, coverage: float = COVERAGE):
        super().__init__(weight)
        check(self, "policy", coverage=coverage)
        self.coverage = float(coverage)
        self.target: TargetWorkload | None = None
        self._state: ClusterState | None = None  # the state synced last
        self._cluster: Cluster | None = None
        self._w: Workload | None = None
        self._given: TargetWorkload | None = None  # `target` as of the last reset
        self._target: TargetWorkload  # set by the first sync, before any use

    # ---- interned node states ---------------------------------------------------------
    def _sync(self, state: ClusterState, w: Workload) -> None:
        """Re-intern the nodes changed since the last call: on the same state object, those
        whose mutation stamp (`changed_at`) is newer than the last call; on another one (a
        scratch copy of the same cluster), those whose free CPU or GPUs differ from the last
        synced contents. Interned states and cached scores depend only on node contents, so
        they stay valid across such copies."""
        if self._w is not w or self._cluster is not state.cluster or self._given is not self.target:
            self._reset(state, w)
        elif self._n_states > self._max_states:
            self._forget(state)
        if state is self._state:
            changed = np.flatnonzero(state.changed_at > self._seen)
        else:
            self._state = state
            changed = np.flatnonzero((self._shadow_gpu != state.gpu_free).any(axis=1)
                                     | (self._shadow_cpu != state.cpu_free))
        self._seen: int = state.mutations
        if len(changed) == 0:
            return
        self._shadow_gpu[changed] = state.gpu_free[changed]
        self._shadow_cpu[changed] = state.cpu_free[changed]
        keys = np.column_stack([state.slot_type[changed], state.cpu_free[changed],
                                np.sort(state.gpu_free[changed], axis=1)]).astype(np.int64)
        # one dict probe per changed node (one per bind), not per node of the cluster
        ids = np.array([self._ids.setdefault(k.tobytes(), len(self._ids)) for k in keys])
        new, first = np.unique(ids[ids >= self._n_states], return_index=True)
        if len(new):
            self._add_states(state, keys[ids >= self._n_states][first], new)
        self._node_state[changed] = ids

    def restore(self, saved) -> None:
        """A trial was reverted on the state, its mutation stamps too (`ClusterState.revert`):
        if a sync saw the trial's changes, the next one re-interns the nodes by content."""
        if self._state is not None and self._seen > self._state.mutations:
            self._state = None

    def _reset(self, state: ClusterState, w: Workload) -> None:
        self._cluster, self._w, self._given = state.cluster, w, self.target
        self._target = self.target if self.target is not None else TargetWorkload.from_pods(
            w.cpu, w.gpus, w.milli, w.model_mask, self.coverage)
        shapes, cls = np.unique(np.stack([w.cpu, w.gpus, w.milli], axis=1), axis=0, return_inverse=True)
        self._cls, self._cls_shape = cls.ravel(), shapes
        # states seen pile up over a replay (about one per bind): past this many the interning
        # starts afresh, which keeps the score cache near CACHE_SCORES entries
        self._max_states = max(2 * state.n_slots, self.CACHE_SCORES // len(shapes))
        self._forget(state)

    def _forget(self, state: ClusterState) -> None:
        """Drop every interned state and cached score; the next sync re-interns all nodes."""
        self._state = None
        self._shadow_gpu = np.full_like(state.gpu_free, -1)
        self._shadow_cpu = np.full_like(state.cpu_free, -1)
        self._node_state = np.full(state.n_slots, -1, np.int64)
        self._ids: dict[bytes, int] = {}
        self._n_states = 0
        cap = 2 * state.n_slots
        self._st_type = np.zeros(cap, np.int64)
        self._st_cpu = np.zeros(cap, np.int64)
        self._st_rows = np.zeros((cap, state.gpu_free.shape[1]), np.int64)
        self._st_frag = np.zeros(cap)
        self._cache = np.full((len(self._cls_shape), cap), np.nan)

    def _add_states(self, state: ClusterState, keys: np.ndarray, ids: np.ndarray) -> None:
        n = int(ids.max()) + 1
        if n > len(self._st_type):
            grow = max(n, 2 * len(self._st_type)) - len(self._st_type)
            self._st_type = np.r_[self._st_type, np.zeros(grow, np.int64)]
            self._st_cpu = np.r_[self._st_cpu, np.zeros(grow, np.int64)]
            self._st_rows = np.vstack([self._st_rows, np.zeros((grow, self._st_rows.shape[1]), np.int64)])
            self._st_frag = np.r_[self._st_frag, np.zeros(grow)]
            self._cache = np.hstack([self._cache, np.full((len(self._cache), grow), np.nan)])
        self._st_type[ids], self._st_cpu[ids], self._st_rows[ids] = keys[:, 0], keys[:, 1], keys[:, 2:]
        self._st_frag[ids] = self._frag(state, ids, self._st_rows[ids], self._st_cpu[ids])
        self._n_states = n

    def _frag(self, state: ClusterState, sids: np.ndarray, rows: np.ndarray, cpu: np.ndarray) -> np.ndarray:
        t = self._st_type[sids]
        return node_fragmentation(rows, state.type_gpus[t], cpu, state.type_model_bit[t], self._target)

    @staticmethod
    def _to_score(f_before: np.ndarray, f_after: np.ndarray) -> np.ndarray:
        # rounding the gradient keeps float noise from moving an exact 0 across a truncation step
        d = np.round(f_before - f_after, 6)
        return np.floor(100.0 / (1.0 + np.exp(-d / 1000.0)))

    # ---- scoring ----------------------------------------------------------------------
    def _compute(self, state: ClusterState, c: int, sids: np.ndarray) -> np.ndarray:
        """Score of pod shape c on each interned state (all assumed feasible)."""
        cpu_req, k, milli = (int(v) for v in self._cls_shape[c])
        rows, cpu = self._st_rows[sids], self._st_cpu[sids] - cpu_req
        before = self._st_frag[sids]
        if k == 0 or milli >= 1000:
            after = rows.copy()
            if k:
                after[:, -k:] = 0  # rows are sorted ascending: the fully free GPUs come last
            return self._to_score(before, self._frag(state, sids, after, cpu))
        # a share: try each distinct fitting free value (equal values give equal scores)
        distinct = np.ones_like(rows, bool)
        distinct[:, 1:] = rows[:, 1:] != rows[:, :-1]
        si, gj = np.nonzero((rows >= milli) & distinct)
        after = rows[si]
        after[np.arange(len(si)), gj] -= milli
        per_gpu = self._to_score(before[si], self._frag(state, sids[si], after, cpu[si]))
        best = np.zeros(len(sids))
        np.maximum.at(best, si, per_gpu)
        return best

    def score(self, state, w, pod, nodes, rng):
        self._sync(state, w)
        c = self._cls[pod]
        sids = self._node_state[nodes]
        vals = self._cache[c, sids]
        miss = np.isnan(vals)
        if miss.any():
            todo = np.unique(sids[miss])
            self._cache[c, todo] = self._compute(state, c, todo)
            vals = self._cache[c, sids]
        return vals

    def pick_devices(self, state, w, pod, node):
        """For a share, the fitting GPU whose use grows F_n the least (first index on ties)."""
        if not _is_share(w, pod):
            return super().pick_devices(state, w, pod, node)
        self._sync(state, w)
        milli = int(w.milli[pod])
        row = state.gpu_free[node].astype(np.int64)
        fit = np.flatnonzero(row[:state.gpu_cap[node]] >= milli)
        after = np.repeat(row[None], len(fit), axis=0)
        after[np.arange(len(fit)), fit] -= milli
        n = np.full(len(fit), node)
        f_after = node_fragmentation(after, state.gpu_cap[n], state.cpu_free[n] - w.cpu[pod],
                                     state.model_bit[n], self._target)
        scores = self._to_score(self._st_frag[self._node_state[node]], f_after)
        return fit[np.argmax(scores)][None]
