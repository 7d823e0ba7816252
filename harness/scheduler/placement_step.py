"""One compiled placement step: Filter, the nextStartNodeIndex walk, Score and the pick, for a
profile whose Filter is the built-in NodeResourcesFit and whose Score plugins are built-in
resource-allocation scorers (LeastAllocated, MostAllocated, BalancedAllocation, alone or
weighted).

The framework's Python path (framework.py: `filter`, then `choose`) builds a mask over every
slot, walks it, scores the candidates plugin by plugin and takes the best, a dozen numpy calls
and dispatches per pod; here one compiled call checks each node as the walk reaches it, with
the same rules (`packer.fits_rule` for a pod's device columns, `dra.allocator.passes` and
`fits_rows` for a pod with claims), scores the candidates with `scores.allocation_scores` and
keeps the best, ties by the seeded node order (then the lower slot). It returns what the Python
path does: the node (-1: none) and where the next walk starts. The Scheduler takes it only when
every Filter and Score plugin of its profile is one it covers (`PlacementStep.covering`); any
other plugin keeps the Python path, which stays the reference (tests/test_placement_step.py
compares both over random states; tests/test_jit.py runs it as plain Python too).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness import packer
from harness.dra import allocator
from harness.dra.allocator import MAX_RESULTS
from harness.filters import claims_of, claims_rule, pod_rule
from harness.scheduler.filter import NodeResourcesFit
from harness.scores import (
    BALANCED,
    LEAST,
    MOST,
    BalancedAllocation,
    LeastAllocated,
    MostAllocated,
    ResourceAllocation,
    WeightedSum,
    allocation_scores,
)

#: the Score plugins the step computes, by their strategy in `scores.allocation_scores`
STRATEGY = {LeastAllocated: LEAST, MostAllocated: MOST, BalancedAllocation: BALANCED}


class PlacementStep:
    """The compiled step for one profile's Score plugins (`terms`: each a resource-allocation
    scorer and its weight; `weighted`: the scores are summed by weight, as a WeightedSum or a
    Score point of several plugins does, else the one plugin's scores are taken as they are)."""

    def __init__(self, terms: list[ResourceAllocation], weighted: bool):
        self.weighted = weighted
        self.terms = terms
        width = max(len(t.resource_ids) for t in terms)
        self.strategies = np.array([STRATEGY[type(t)] for t in terms], np.int64)
        self.term_weights = np.array([t.weight for t in terms], np.float64)
        self.resources = np.zeros((len(terms), width), np.int64)
        self.resource_weights = np.zeros((len(terms), width), np.int64)
        self.n_resources = np.array([len(t.resource_ids) for t in terms], np.int64)
        for i, t in enumerate(terms):
            self.resources[i, :len(t.resource_ids)] = t.resource_ids
            self.resource_weights[i, :len(t.resource_weights)] = t.resource_weights
        self.all_slots = np.zeros(0, np.int64)
        #: (state, workload, placements registered) the arguments by pod shape were made for
        self.made_for: tuple = (None, None, 0)
        self.by_shape: dict[int, tuple] = {}  # pod shape -> `pod_arguments`
        #: `silent_terms` by whether a pod asks CPU, memory, GPUs
        self.silent: dict[tuple[bool, bool, bool], np.ndarray] = {}

    @classmethod
    def covering(cls, filters: tuple, scores: tuple) -> PlacementStep | None:
        """The step for a profile with these Filter and Score plugins, or None when one of them is
        not a built-in it computes (exactly NodeResourcesFit; exactly LeastAllocated,
        MostAllocated or BalancedAllocation, at the Score point or in one WeightedSum there):
        a subclass or any other plugin may score or filter otherwise."""
        if len(filters) != 1 or type(filters[0]) is not NodeResourcesFit or not scores:
            return None
        if len(scores) == 1 and type(scores[0]) is WeightedSum:
            terms, weighted = scores[0].plugins, True
        else:
            terms, weighted = list(scores), len(scores) > 1
        covered = [t for t in terms if type(t) in STRATEGY and isinstance(t, ResourceAllocation)]
        return cls(covered, weighted) if len(covered) == len(terms) else None

    def silent_terms(self, w, pod: int) -> np.ndarray:
        """Per term, whether it scores 0 for the pod (a BalancedAllocation the pod requests none
        of whose resources of): by whether the pod asks CPU, memory and GPUs, all
        `requests_any` reads."""
        asks = (int(w.cpu[pod]) != 0, int(w.mem[pod]) != 0, int(w.gpus[pod]) != 0)
        silent = self.silent.get(asks)
        if silent is None:
            silent = self.silent[asks] = np.array([isinstance(t, BalancedAllocation) and not t.requests_any(w, pod)
                                                   for t in self.terms])
        return silent

    def place(self, state, w, pod: int, usable: np.ndarray, order: np.ndarray, start: int, k: int,
              node_rank: np.ndarray) -> tuple[int, int]:
        """The node `Scheduler.choose(pod, Scheduler.filter(..., usable))` takes (-1: none fits)
        and the next walk's start: walking `order` (the ready nodes in the seeded order) from
        `start` for k feasible nodes, or, when k covers them all, every `usable` slot with the
        start kept (as `feasible_to_score`)."""
        walk = k < len(order)
        if walk:
            first = start
        else:
            if len(self.all_slots) != state.n_slots:
                self.all_slots = np.arange(state.n_slots, dtype=np.int64)
            order, first, k = self.all_slots, 0, state.n_slots
        step, arguments = self.pod_arguments(state, w, pod)
        node, checked = step(order, first, k, node_rank, usable, *arguments)
        return node, (start + checked) % len(order) if walk else start

    def pod_arguments(self, state, w, pod: int) -> tuple:
        """The compiled step for pod and what it takes beyond the walk: its rule or claims, the
        state's arrays and the scoring. Made once per pod shape (a shape fixes the requests, the
        claims and the placement) while the state, the workload and the placements registered
        are the same (the arrays are the state's own, changed in place): a placement then costs
        the compiled call, not a dozen lookups before it."""
        if state is not self.made_for[0] or w is not self.made_for[1] or len(state.allowed) != self.made_for[2]:
            self.made_for, self.by_shape = (state, w, len(state.allowed)), {}
        shape = int(w.shape[pod])
        made = self.by_shape.get(shape)
        if made is None:
            made = self.by_shape[shape] = self._arguments(state, w, pod)
        return made

    def _arguments(self, state, w, pod: int) -> tuple:
        """`pod_arguments`, made."""
        gpus = int(w.gpus[pod])
        cpu, mem, gpu, gpu_milli = int(w.cpu[pod]), int(w.mem[pod]), gpus > 0, gpus * int(w.milli[pod])
        scoring = (self.strategies, self.term_weights, self.resources, self.resource_weights, self.n_resources,
                   self.weighted, self.silent_terms(w, pod), state.cpu_cap, state.mem_cap, state.gpu_cap,
                   state.gpu_used, gpu, gpu_milli)
        claims = claims_of(w, pod)
        if claims is None:
            _, _, static, column, need = pod_rule(state, w, pod)
            return step_by_rule, (state.cpu_free, state.mem_free, cpu, mem, static, column, need, *scoring)
        tc, cache, static, marks = claims_rule(state, w, pod, claims)
        taken, cap_left, counter_left = state.device_arrays
        return step_by_claims, (
            static, state.cpu_free, state.mem_free, cpu, mem, state.dra_type, state.dra_stamp, taken, cap_left,
            counter_left, cache.fit_key, cache.fit, tc.never, tc.opt_start, tc.opt_end, tc.match, tc.members,
            tc.before, tc.need, tc.take_cap, tc.capacity, tc.consumes, tc.multi, tc.con_value, tc.con_req,
            tc.req_claim, tc.rest_min, marks, tc.tolerated, MAX_RESULTS, *scoring)


@njit(cache=True, inline="always")
def _best(found, count, node_rank, strategies, term_weights, resources, resource_weights, n_resources, weighted,
          silent, cpu_cap, mem_cap, gpu_cap, gpu_used, gpu, gpu_milli, cpu_free, mem_free, cpu, mem):
    """The best of the `count` nodes found: highest score, then lowest node_rank, then lowest
    slot (`Scheduler.choose` over them in slot order); -1 if none. One node is not scored. A
    node's score is the one plugin's, or Σ weight x score in the plugins' order (the float sum
    the Python path makes, term by term from 0); a `silent` term scores 0 (a BalancedAllocation
    the pod requests none of whose resources of)."""
    if count == 0:
        return -1
    if count == 1:
        return found[0]
    nodes = found[:count]
    scores = np.zeros(count)
    for t in range(len(strategies)):
        r = n_resources[t]
        s = np.zeros(count) if silent[t] else allocation_scores(
            strategies[t], resources[t, :r], resource_weights[t, :r], nodes, cpu_cap, cpu_free, mem_cap, mem_free,
            gpu_cap, gpu_used, cpu, mem, gpu, gpu_milli)
        for i in range(count):
            if weighted:
                scores[i] += term_weights[t] * s[i]
            else:
                scores[i] = s[i]
    best = nodes[0]
    best_score, best_rank = scores[0], node_rank[best]
    for i in range(1, count):
        n, s_i = nodes[i], scores[i]
        rank = node_rank[n]
        if s_i > best_score or (s_i == best_score and (rank < best_rank or (rank == best_rank and n < best))):
            best, best_score, best_rank = n, s_i, rank
    return best


@njit(cache=True)
def step_by_rule(order, start, k, node_rank, usable, cpu_free, mem_free, cpu, mem, static, column, need,
                 strategies, term_weights, resources, resource_weights, n_resources, weighted, silent, cpu_cap,
                 mem_cap, gpu_cap, gpu_used, gpu, gpu_milli):
    """The step for a pod checked by its device columns (`filters.pod_rule`): the node chosen
    and how many nodes of `order` the walk checked (`sampling.walk_feasible`'s count)."""
    n_all = len(order)
    found = np.empty(min(k, n_all), np.int64)
    count = 0
    checked = n_all
    at = start % n_all if n_all else 0
    for i in range(n_all):
        node = order[at]
        at = at + 1 if at + 1 < n_all else 0
        if packer.fits_rule(node, usable, cpu_free, mem_free, cpu, mem, static, column, need):
            if count == k:  # a (k+1)-th feasible node exists: the walk stopped at the k-th
                break
            found[count] = node
            count += 1
            checked = i + 1
    else:
        checked = n_all
    best = _best(found, count, node_rank, strategies, term_weights, resources, resource_weights, n_resources,
                 weighted, silent, cpu_cap, mem_cap, gpu_cap, gpu_used, gpu, gpu_milli, cpu_free, mem_free, cpu, mem)
    return best, checked


@njit(cache=True)
def step_by_claims(order, start, k, node_rank, usable, static, cpu_free, mem_free, cpu, mem, slot_type, stamp, taken,
                   cap_left, counter_left, fit_key, fit, never, opt_start, opt_end, match, members, before, need,
                   take_cap, capacity, consumes, multi, con_value, con_req, req_claim, rest_min, marks, tolerated,
                   limit, strategies, term_weights, resources, resource_weights, n_resources, weighted, silent, cpu_cap,
                   mem_cap, gpu_cap, gpu_used, gpu, gpu_milli):
    """The step for a pod with claims (`filters.claims_rule`): as `step_by_rule`, each node
    reached that passes `dra.allocator.passes` checked by its claims' stamp cache
    (`dra.allocator.cached_fit`), or searched and remembered as `feasible` would
    (`search_node`). Where few nodes can take the claims the walk reaches every node, so what
    each node costs is what a call costs."""
    n_all = len(order)
    found = np.empty(min(k, n_all), np.int64)
    scratch = allocator.search_scratch(taken, cap_left, counter_left, opt_start, con_req, req_claim)
    count = 0
    checked = n_all
    at = start % n_all if n_all else 0
    for i in range(n_all):
        node = order[at]
        at = at + 1 if at + 1 < n_all else 0
        if not allocator.passes(node, usable, static, cpu_free, mem_free, cpu, mem):
            continue
        known = allocator.cached_fit(node, slot_type, stamp, fit_key, fit, never)
        if known == 0 or (known < 0 and not allocator.search_node(
                node, slot_type, stamp, fit_key, fit, taken, cap_left, counter_left, opt_start, opt_end, match,
                members, before, need, take_cap, capacity, consumes, multi, con_value, con_req, req_claim, rest_min,
                marks, tolerated, limit, scratch)):
            continue
        if count == k:  # a (k+1)-th feasible node exists: the walk stopped at the k-th
            break
        found[count] = node
        count += 1
        checked = i + 1
    else:
        checked = n_all
    best = _best(found, count, node_rank, strategies, term_weights, resources, resource_weights, n_resources,
                 weighted, silent, cpu_cap, mem_cap, gpu_cap, gpu_used, gpu, gpu_milli, cpu_free, mem_free, cpu, mem)
    return best, checked
