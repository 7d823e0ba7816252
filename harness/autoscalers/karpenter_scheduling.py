"""Karpenter's scheduling simulation, shared by its provisioner (harness/autoscalers/karpenter.py)
and its consolidation (karpenter_consolidation.py), as upstream's provisioning/scheduling
package serves both: pods in Karpenter's queue order, each onto the first existing node with
room, else a node claim that still holds it, else a new claim.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import reduce
from itertools import pairwise

import numpy as np

from harness.filters import bind_alike, claims_of, feasible, fits_on
from harness.whatif import Snapshot, classes
from harness.workload import Workload


def queue_order(view: Workload, pods: np.ndarray) -> np.ndarray:
    """Karpenter's queue (`byCPUAndMemoryDescending`): CPU, then memory, largest first, then
    the older pod (creation time: its submit time), then the pod's UID (its index). No GPU key."""
    return np.lexsort((pods, view.submit[pods], -view.mem[pods], -view.cpu[pods]))


class WhatIf:
    """Karpenter's scheduling simulation on a what-if snapshot (of every slot). A pod goes to
    the first node of the first tier (masks of existing nodes) with room (the snapshot's
    first-fit packer), else to the first claim still holding it, else opens a claim. A claim is
    one shadow node per node type (in a spare slot of a pool of that type); a pod joining it
    drops the shadows it does not fit."""

    def __init__(self, snap: Snapshot, view: Workload, tiers: list[np.ndarray], spare: np.ndarray):
        self.snap, self.st, self.w, self.tiers = snap, snap.state, view, tiers
        self.tier_slots = [np.flatnonzero(tier) for tier in tiers]  # what a first fit walks, found once
        self.walks: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # first tier -> `tiers_from` it
        self.spare = spare.copy()
        self.claim_of = np.full(self.st.n_slots, -1, np.int64)
        self.n_claims = 0
        self.claim_pools: list[np.ndarray] = []  # per claim, the pools all its pods may use
        self.first_tier: dict[int, int] = {}  # shape -> tiers it already failed (tiers only fill up)
        self.hopeless: set[int] = set()  # shapes that fit nowhere, not even a new claim

    def place_run(self, pods: np.ndarray, max_claims: float = np.inf) -> np.ndarray:
        """Where each of these pods, identical in the view, goes when placed one after another:
        an existing node (>= 0), claim c (-2 - c), or -1 if it found no place. Each tier and
        each claim takes its share of the run in one vector step with exact per-node counts
        (`Snapshot.fit_alike`, `fits_on`), as pod-by-pod placement would; pods with claims
        take every tier left in one step, walking their slots tier after tier (one compiled
        call where a tier each cost a call, most of whose time was entering it)."""
        st, w = self.st, self.w
        p, k = int(pods[0]), len(pods)
        shape = int(w.shape[p])
        out = np.full(k, -1, np.int64)
        if shape in self.hopeless:
            return out
        done, start = 0, self.first_tier.get(shape, 0)
        if claims_of(w, p) is not None and start < len(self.tiers):
            usable, slots = self.tiers_from(start)
            went = self.snap.fit_alike(w, p, k, usable=usable, slots=slots)
            done = len(went)
            out[:done] = went
            if done == k:  # the tiers before the one that placed the last pod failed the shape
                self.first_tier[shape] = next(i for i in range(start, len(self.tiers)) if self.tiers[i][went[-1]])
                return out
            self.first_tier[shape] = len(self.tiers)
        for i in range(self.first_tier.get(shape, 0), len(self.tiers)):
            went = self.snap.fit_alike(w, p, k - done, usable=self.tiers[i], slots=self.tier_slots[i])
            out[done:done + len(went)] = went
            done += len(went)
            if done == k:
                return out
            self.first_tier[shape] = i + 1
        while done < k:
            shadows = self.claim_of >= 0
            held = np.flatnonzero(shadows)
            fit = np.zeros(st.n_slots, bool)
            if len(held):  # the filter asked of the claims' shadows alone, not walked over every slot
                fit[held] = feasible(st, w, p, shadows, at=held)
            if not fit.any():  # no claim holds it: open one, if allowed and some type fits
                if self.n_claims >= max_claims or not self._open_claim(p):
                    return out
                continue
            c = int(self.claim_of[fit].min())
            self.claim_pools[c] &= st.pool_allowed[w.placement[p]]
            mine = self.claim_of == c
            self.claim_of[mine & ~fit] = -1  # types that cannot also hold this pod
            nodes = np.flatnonzero(mine & fit)
            can = fits_on(st, w, p, nodes)
            take = int(min(k - done, can.max()))  # the claim takes pods while a shadow has room
            got = np.minimum(can, take)
            bind_alike(st, w, p, nodes, got)
            self.claim_of[nodes[can < take]] = -1  # shadows that could not take them all
            out[done:done + take] = -2 - c
            done += take
        return out

    def place_all(self, pods: np.ndarray, view_class: np.ndarray, max_claims: float = np.inf) -> np.ndarray:
        """`place_run` over the ordered pods, a run of pods identical in the view (of classes
        `view_class`, `harness.whatif.equivalence_classes`) at a time. Returns where each pod went."""
        return np.concatenate([np.zeros(0, np.int64), *(went for _, went in self.place_runs(pods, view_class,
                                                                                           max_claims))])

    def place_runs(self, pods: np.ndarray, view_class: np.ndarray,
                   max_claims: float = np.inf) -> Iterator[tuple[int, np.ndarray]]:
        """`place_all` a run at a time, as it goes: (the run's first position, where its pods
        went). A caller that has its answer stops early."""
        if len(pods) == 0:
            return
        cls = classes(view_class, self.w, pods)
        bounds = np.r_[0, np.flatnonzero(cls[1:] != cls[:-1]) + 1, len(pods)].tolist()
        for a, b in pairwise(bounds):
            yield a, self.place_run(pods[a:b], max_claims)

    def tiers_from(self, start: int) -> tuple[np.ndarray, np.ndarray]:
        """The nodes of tier `start` and those after it: their mask, and their slots in the
        order a first fit tries them (each tier's in slot order, tier after tier)."""
        if start == len(self.tiers) - 1:
            return self.tiers[start], self.tier_slots[start]
        if start not in self.walks:
            self.walks[start] = (reduce(np.logical_or, self.tiers[start:]), np.concatenate(self.tier_slots[start:]))
        return self.walks[start]

    def _open_claim(self, p: int) -> bool:
        """A new claim: one spare slot of each node type that can hold pod p, of the pools it
        may use (none: the pod's shape is hopeless)."""
        st = self.st
        placement = int(self.w.placement[p])
        idx = np.flatnonzero(self.spare & st.allowed[placement] if placement else self.spare)
        _, first = np.unique(st.slot_type[idx], return_index=True)
        new = idx[first]  # one spare slot per node type
        for n in new.tolist():
            st.add_node(n, ready=True)
        mask = np.zeros(st.n_slots, bool)
        mask[new] = True
        fit = feasible(st, self.w, p, mask, at=new)
        for n in new[~fit].tolist():
            st.remove_node(n)
        if not fit.any():
            self.hopeless.add(int(self.w.shape[p]))
            return False
        kept = new[fit]
        self.spare[kept] = False
        self.claim_of[kept] = self.n_claims
        self.claim_pools.append(st.pool_allowed[placement].copy())
        self.n_claims += 1
        return True

    def claim_types(self, c: int) -> np.ndarray:
        return np.unique(self.st.slot_type[self.claim_of == c])
