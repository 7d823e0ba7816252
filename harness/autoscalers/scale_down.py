"""Scale-down as Cluster Autoscaler does it, one pass per scan; shared by every loop that
autoscales (Karpenter has its own consolidation).

Each pass plans (upstream `planner.categorizeNodes`): the ready nodes under the utilisation
threshold are candidates; a candidate is unneeded only if it is also removable, i.e. all its
pods fit on the other nodes, the candidates already found removable in this pass no longer
counting as room (their pods stay where the simulation moved them). Only an unneeded node's
timer runs. Then, out of cooldown, the nodes unneeded long enough are deleted: empty ones in
bulk, non-empty ones drained, within the parallelism budgets and the pools' min_size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from harness.dra.utilization import PoolTable
from harness.quiet import Clock, leading
from harness.settings import check, duration, flag, fraction, integer
from harness.status import ABSENT, READY, Event
from harness.view import SimulationView
from harness.whatif import first_fit_nodes


class ScaleDown:
    """Removes nodes that stayed unneeded (under-utilised and removable); shared by every loop.

    Defaults are upstream's flags: `scale-down-utilization-threshold` 0.5,
    `scale-down-unneeded-time` and `scale-down-delay-after-add` 10 min,
    `max-scale-down-parallelism` 10, `max-drain-parallelism` 1, `unremovable-node-recheck-timeout`
    5 min. `count_gpu_shares`: a GPU node's utilisation also counts GPU shares and partitions
    (upstream counts only requests of the GPU resource itself, whole devices).
    `simulate_every_scan`: upstream's planner exactly, every candidate's removal simulated at
    every pass. Off by default, for cost alone (12x the replay time of the bundled trace in
    Python): a low node without a gang member is then presumed removable, and the removal is
    simulated, the same way, only for the nodes about to be drained; one found unremovable
    loses its timer and waits `unremovable_recheck_s`, as upstream's would.
    `drain_underutilized`: false, only empty nodes are candidates (no node is drained; upstream's
    closest is `--max-drain-parallelism=0`); the loops set it from the global `consolidation`.
    `dra_utilization`: in a DRA cluster a node publishing ResourceSlices is as used as its most
    used device pool (upstream with DRA enabled; its GPUs are DRA devices, not the GPU extended
    resource, and it carries no provider GPU label); false reads its GPU utilisation as before."""

    SETTINGS = {
        "utilization_threshold": fraction("a node below this accelerator utilisation is unneeded"),
        "unneeded_time_s": duration("seconds a node stays unneeded before it is removed"),
        "delay_after_add_s": duration("seconds after a scale-up before scale-down resumes"),
        "max_scale_down_parallelism": integer("nodes deleted at most per pass, empty and drained", ge=1),
        "max_drain_parallelism": integer("non-empty nodes drained at most per pass", ge=0),
        "unremovable_recheck_s": duration("seconds before a node found unremovable is simulated again"),
        "count_gpu_shares": flag("a GPU node's utilisation counts GPU shares and partitions, not only whole GPUs"),
        "simulate_every_scan": flag("simulate every candidate's removal at every pass (upstream's planner, "
                                    "slow), not only before a drain"),
        "dra_utilization": flag("in a DRA cluster a node publishing devices is as used as its most used device "
                                "pool (upstream); false: its GPU utilisation, as without DRA"),
        "drain_underutilized": flag("under-used nodes are drained and removed too (false: only empty nodes); "
                                    "conf/loop/*.yaml set it from the global `consolidation`"),
    }

    def __init__(self, utilization_threshold: float = 0.5, unneeded_time_s: float = 600.0,
                 delay_after_add_s: float = 600.0, max_scale_down_parallelism: int = 10,
                 max_drain_parallelism: int = 1, unremovable_recheck_s: float = 300.0,
                 count_gpu_shares: bool = False, simulate_every_scan: bool = False, drain_underutilized: bool = True,
                 dra_utilization: bool = True):
        check(self, "scale_down", utilization_threshold=utilization_threshold,
              unneeded_time_s=unneeded_time_s, delay_after_add_s=delay_after_add_s,
              max_scale_down_parallelism=max_scale_down_parallelism, max_drain_parallelism=max_drain_parallelism,
              unremovable_recheck_s=unremovable_recheck_s, count_gpu_shares=count_gpu_shares,
              simulate_every_scan=simulate_every_scan, drain_underutilized=drain_underutilized,
              dra_utilization=dra_utilization)
        self.threshold = float(utilization_threshold)
        self.unneeded_time_s = float(unneeded_time_s)
        self.delay_after_add_s = float(delay_after_add_s)
        self.max_parallelism = int(max_scale_down_parallelism)
        self.max_drain = int(max_drain_parallelism)
        self.recheck_s = float(unremovable_recheck_s)
        self.count_gpu_shares = bool(count_gpu_shares)
        self.simulate_every_scan = bool(simulate_every_scan)
        self.drain_underutilized = bool(drain_underutilized)
        self.dra_utilization = bool(dra_utilization)

    def attach(self, sim: SimulationView) -> None:
        self.sim = sim
        n, w = sim.state.n_slots, sim.w
        self.unneeded_since = np.full(n, np.nan)
        self.recheck_at = np.full(n, -np.inf)  # found unremovable: not a candidate before then
        self.is_low = np.zeros(n, bool)
        self.protected = np.zeros(n, bool)
        self.booked: np.ndarray | None = None
        self.seen_mutations = -1
        self.low = np.zeros(0, np.int64)  # candidates: ready, unprotected, under the threshold
        self.unneeded = np.zeros(0, np.int64)  # in the order the last plan found them
        self.planned_at = self.ran_at = -np.inf
        self.cut_short = False  # the last plan stopped at its limit with candidates left
        self.memo: _Memo | None = None  # the last simulated plan, to skip re-simulating it unchanged
        self.touched: list[np.ndarray] = []  # nodes the last simulation packed pods onto, trials included
        # GPU milli each pod requests as the GPU resource: whole devices only (a share or a
        # partition is another extended resource upstream); None: every request is whole
        whole = (w.milli == 1000) & (w.profile_bit == 0)
        shares = bool(((w.gpus > 0) & ~whole).any()) and not self.count_gpu_shares
        self.gpu_request = np.where(whole, w.gpus.astype(np.int64) * 1000, 0) if shares else None
        layer = sim.state.dra
        self.pools = PoolTable.of(layer.devices) if layer is not None and self.dra_utilization else None
        self.min_size = np.array([p.min_size for p in sim.cluster.pools], np.int64)

    def utilization(self, nodes: np.ndarray) -> np.ndarray:
        """As upstream `utilization.Calculate`: with DRA, a node publishing ResourceSlices is as
        used as its most used device pool; else a GPU node's GPU requests over its GPUs (CPU and
        memory ignored), max(CPU, memory) requests over allocatable for the others."""
        if self.pools is None:
            return self._resource_utilization(nodes)
        st = self.sim.state
        types = st.dra_type[nodes]  # the devices each node publishes (a ready node: its type's own)
        dra = self.pools.published[types]
        if dra.all():  # DRA nodes only, the usual case
            return self.pools.most_used(nodes, types, *st.device_arrays)
        if not dra.any():
            return self._resource_utilization(nodes)
        util = np.empty(len(nodes))
        if not dra.all():
            util[~dra] = self._resource_utilization(nodes[~dra])
        util[dra] = self.pools.most_used(nodes[dra], types[dra], *st.device_arrays)
        return util

    def _resource_utilization(self, nodes: np.ndarray) -> np.ndarray:
        """Upstream's reading without DRA: GPU requests over GPUs for a GPU node, max(CPU,
        memory) requests over allocatable for the others."""
        st = self.sim.state
        gcap = st.gpu_milli_cap[nodes]
        used = st.gpu_used[nodes] if self.gpu_request is None else self._gpu_requested(nodes)
        if gcap.all():  # GPU nodes only, the usual case
            return used / gcap
        ccap, mcap = st.cpu_cap[nodes], st.mem_cap[nodes]
        gpu = np.divide(used, gcap, out=np.zeros(len(nodes)), where=gcap > 0)
        cpu = 1.0 - np.divide(st.cpu_free[nodes], ccap, out=np.ones(len(nodes)), where=ccap > 0)
        mem = 1.0 - np.divide(st.mem_free[nodes], mcap, out=np.ones(len(nodes)), where=mcap > 0)
        return np.where(gcap > 0, gpu, np.maximum(cpu, mem))

    def _gpu_requested(self, nodes: np.ndarray) -> np.ndarray:
        """Per node of `nodes`, GPU milli requested as whole devices by the pods bound there:
        read from the pods on those nodes alone (those whose utilisation is re-judged: a few
        per pass), not from every pod of the trace."""
        assert self.gpu_request is not None
        node_pods, request = self.sim.node_pods, self.gpu_request
        counts = np.fromiter((len(node_pods[n]) for n in nodes.tolist()), np.int64, len(nodes))
        pods = np.fromiter((p for n in nodes.tolist() for p in node_pods[n]), np.int64, int(counts.sum()))
        return np.bincount(np.repeat(np.arange(len(nodes)), counts), weights=request[pods], minlength=len(nodes))

    def run(self, now: float, protect: np.ndarray, booked_for: np.ndarray | None = None) -> None:
        """One scale-down pass; `protect`ed nodes are never removed; `booked_for` (node -> job
        it is booked for, -1 free) limits where a drained node's pods may go."""
        sim, st = self.sim, self.sim.state
        if not sim.cluster.autoscaling:
            return
        self.ran_at = now
        # a node's utilisation changes only with the node: re-judge the nodes changed since
        idx = changed_nodes(protect, self.protected, st.changed_at, self.seen_mutations)
        moved = len(idx) > 0 or st.mutations != self.seen_mutations
        if moved:
            self.seen_mutations = st.mutations
            ready = idx[st.status[idx] == READY]  # only a ready node is a candidate: the others are not read
            self.is_low[idx] = False
            self.is_low[ready] = (self.utilization(ready) < self.threshold) & ~protect[ready]
            if not self.drain_underutilized:
                self.is_low[idx] &= st.pods_on[idx] == 0
            self.low = np.flatnonzero(self.is_low)
        rebooked = (booked_for is None or self.booked is None or not np.array_equal(booked_for, self.booked)) \
            and booked_for is not self.booked
        if moved or rebooked or self.cut_short or self._rechecked(now):
            self.booked = None if booked_for is None else booked_for.copy()
            self._plan(now, booked_for)
        if now - sim.last_scale_up < self.delay_after_add_s or len(self.unneeded) == 0:
            return
        self._delete(now, booked_for)

    def _rechecked(self, now: float) -> bool:
        """An unremovable low node's wait ran out since the last plan (asked only when nothing
        else calls for a plan)."""
        recheck = self.recheck_at[self.low]
        return bool(((recheck > self.planned_at) & (recheck <= now)).any())

    def _plan(self, now: float, booked_for: np.ndarray | None) -> None:
        """Find the unneeded nodes: candidates empty first, then those unneeded before, then by
        slot (upstream's candidate sorting); at most as many as upstream's `unneededNodesLimit`
        (those unneeded so far + twice the parallelism) are found per pass."""
        st = self.sim.state
        self.planned_at = now
        cand = candidates(self.low, self.recheck_at, now, st.pods_on, self.unneeded_since)
        limit = len(self.unneeded) + 2 * self.max_parallelism
        if self.simulate_every_scan:
            found, tried = self._simulate(cand, booked_for, limit)
        else:  # presumed removable but for a gang member; simulated before a drain (`_delete`)
            found, tried = presumed_removable(cand, self.sim.gang_pods_on, limit)
        self.cut_short = tried < len(cand)
        self.unneeded, kept = settle(cand[:tried], found, now, self.recheck_s, self.recheck_at, self.unneeded_since,
                                     self.unneeded)
        self._kept(kept, "its pods fit nowhere else" if self.simulate_every_scan else "it runs a gang's pod")

    def _simulate(self, cand: np.ndarray, booked_for: np.ndarray | None, limit: int) -> tuple[np.ndarray, int]:
        """`removable`, or the last plan's outcome when it provably comes out the same: the same
        candidates in order, bookings and ready nodes, a limit that did not stop either, and
        every node changed since neither a candidate nor a node the simulation packed onto and
        with no more room than then in any column a filter reads. Such a node was not a first
        fit then (infeasible, or after nodes that took every pod) and, with no more room, is
        not one now: each first fit, so the whole plan, replays as it was."""
        st, m = self.sim.state, self.memo
        ready = np.flatnonzero(st.ready)
        if (m is not None and m.tried == len(m.cand) and np.array_equal(cand, m.cand)
                and (limit == m.limit or int(m.found.sum()) < limit) and np.array_equal(ready, m.ready)
                and ((booked_for is None and m.booked is None) or (booked_for is not None and m.booked is not None
                                                                   and np.array_equal(booked_for, m.booked)))):
            changed = np.flatnonzero(st.changed_at > m.mutations)
            if not m.touched[changed].any() and all((getattr(st, name)[changed] <= rows[changed]).all()
                                                    for name, rows in m.rows.items()):
                return m.found, m.tried
        found, tried = self.removable(cand, booked_for, limit)
        touched = np.zeros(st.n_slots, bool)
        touched[cand] = True
        touched[np.concatenate(self.touched) if self.touched else []] = True
        self.memo = _Memo(cand, limit, found, tried, ready, None if booked_for is None else booked_for.copy(),
                          st.mutations, touched, {name: getattr(st, name).copy() for name in _ROOM})
        return found, tried

    def removable(self, cand: np.ndarray, booked_for: np.ndarray | None = None,
                  limit: int | None = None) -> tuple[np.ndarray, int]:
        """Upstream `SimulateNodeRemoval` over the candidates in order, on the ready nodes as a
        what-if: a candidate is removable when none of its pods is a gang member (a gang is not
        evicted piecemeal) and all of them first-fit on the other nodes they may use (not one
        booked for another job), nodes found removable before it no longer counting and their
        pods staying where they were moved. Stops after `limit` removable nodes. Returns which
        of the first `tried` candidates are removable, and `tried`.
        The what-if is a trial on the state itself, undone at the end: a copy of every ready
        node's rows (their device capacities most of all) cost more than the whole check."""
        sim, st = self.sim, self.sim.state
        self.touched = []  # this simulation's, read by `_simulate` (a drain's check does not keep them)
        limit = len(cand) if limit is None else limit
        empty = st.pods_on[cand] == 0
        found = np.zeros(len(cand), bool)
        lead = min(leading(empty), limit)  # leading empty nodes are removable by themselves, in bulk
        found[:lead] = True
        if lead == len(cand) or lead == limit:
            return found[:lead], lead
        usable = st.ready  # the nodes pods may move to: ready ones, not found removable
        usable[cand[:lead]] = False
        n_removable = lead
        moved: dict[int, list[int]] = {}  # node -> pods the simulation moved there
        st.fork()
        try:
            for i in range(lead, len(cand)):  # bounded by `limit` removable; unremovable wait a recheck
                n = int(cand[i])
                if n_removable >= limit:
                    return found[:i], i
                pods = sim.pods_on(n) + moved.pop(n, [])  # its own, and those moved onto it
                if not pods:
                    ok = True
                elif sim.gang_pods_on[n] > 0:
                    ok = False
                else:
                    usable[n] = False
                    moves = self._move(usable, pods, booked_for)
                    ok = moves is not None
                    for p, dest in moves or ():
                        moved.setdefault(dest, []).append(p)
                usable[n] = not ok
                found[i] = ok
                n_removable += ok
            return found, len(cand)
        finally:
            st.revert()

    def _move(self, usable: np.ndarray, pods: list[int], booked: np.ndarray | None) -> list[tuple[int, int]] | None:
        """First-fit the pods onto the `usable` nodes of the state (in a trial), all or nothing:
        [(pod, node)], or None and the state as before. Identical pods of one job go in one
        vector step (`whatif.first_fit_nodes`), groups in the order they first appear (upstream
        tries a node's pods in its own arbitrary order)."""
        w, st = self.sim.w, self.sim.state
        groups: dict[tuple[int, int], list[int]] = {}
        for p in pods:
            groups.setdefault((int(w.job[p]), int(w.shape[p])), []).append(p)
        point = st.savepoint()
        moves: list[tuple[int, int]] = []
        for (job, _), group in groups.items():
            mask = usable if booked is None else usable & ((booked == -1) | (booked == job))
            nodes, counts = first_fit_nodes(st, w, group[0], mask, len(group))
            got = np.repeat(nodes, counts)
            self.touched.append(got)
            if len(got) < len(group):
                st.rollback(point)
                return None
            moves.extend(zip(group, got.tolist(), strict=True))
        return moves

    def _delete(self, now: float, booked_for: np.ndarray | None = None) -> None:
        """Delete the nodes unneeded for `unneeded_time_s`: upstream's budgets crop the empty
        ones to `max_scale_down_parallelism` and the drained ones to `max_drain_parallelism` and
        what is left of the former, taking node groups in the order they first appear; no pool
        goes under its min_size (empty nodes use its room first)."""
        sim, st = self.sim, self.sim.state
        ripe = self.unneeded[now - self.unneeded_since[self.unneeded] >= self.unneeded_time_s]
        if len(ripe) == 0:
            return
        spare = spare_per_pool(st.status, st.slot_pool, self.min_size)  # nodes each pool may lose
        empty = ripe[st.pods_on[ripe] == 0]
        gone = within_by_group(empty, st.slot_pool, spare, self.max_parallelism)  # off their pools' spare
        busy = ripe[st.pods_on[ripe] > 0]
        drained = within_by_group(busy, st.slot_pool, spare, len(busy))
        n_drain = max(0, min(self.max_drain, self.max_parallelism - len(gone)))
        if not self.simulate_every_scan and n_drain and len(drained):
            drained = self._still_removable(now, gone, drained, n_drain, booked_for)
        drained = drained[:n_drain]
        for n in drained.tolist():
            sim.unbind_many(sim.pods_on(n), deleted=True)  # evicted: each restarts wherever the scheduler puts it
        removed = np.concatenate((gone, drained))
        if len(removed) == 0:  # every ripe node is within its pool's min_size, or not removable now
            return
        for i, n in enumerate(removed.tolist()):
            if sim.noting:
                how = "empty" if i < len(gone) else "drained"  # removed lists the empty ones first
                sim.note(Event.SCALE_DOWN, f"{how}, unneeded {now - self.unneeded_since[n]:.0f} s", node=n)
            sim.remove_node(n)
            self.unneeded_since[n] = np.nan
        self.unneeded = _without(self.unneeded, removed)

    def _still_removable(self, now: float, gone: np.ndarray, busy: np.ndarray, n_drain: int,
                         booked_for: np.ndarray | None) -> np.ndarray:
        """The first `n_drain` of the busy nodes (in order) whose pods fit elsewhere, the empty
        ones going now not counting as room; those found unremovable before them stop being
        unneeded and wait a recheck."""
        found, tried = self.removable(np.r_[gone, busy], booked_for, len(gone) + n_drain)
        found, tried = found[len(gone):tried], tried - len(gone)
        bad = busy[:tried][~found]
        self._kept(bad, "its pods fit nowhere else")
        self.recheck_at[bad] = now + self.recheck_s
        self.unneeded_since[bad] = np.nan
        self.unneeded = _without(self.unneeded, bad)
        return busy[:tried][found]

    def _kept(self, nodes: np.ndarray, why: str) -> None:
        """Under-used nodes found unremovable, for the decision trace."""
        for n in nodes.tolist() if self.sim.noting else ():
            self.sim.note(Event.UNREMOVABLE, f"{why}: rechecked in {self.recheck_s:.0f} s", node=n)

    def clocks(self) -> list[Clock]:
        """What could make a run see other nodes than the last one did, if no node changes
        meanwhile (see `harness.quiet`): the delay after a scale-up running out, an unneeded
        node ripening (the one unneeded the longest, first), an unremovable node's recheck, a
        plan cut short by its limit (the next pass finds more). No clock while no node is low."""
        if len(self.low) == 0:
            return []
        t0, last_up = self.ran_at, self.sim.last_scale_up
        clocks: list[Clock] = [(t0, 0.0)] if self.cut_short else []
        recheck = self.recheck_at[self.low]
        recheck = recheck[recheck > self.planned_at]
        if len(recheck):
            clocks.append((recheck.min(), 0.0))
        if len(self.unneeded) == 0:
            return clocks
        if t0 - last_up < self.delay_after_add_s:
            clocks.append((last_up, self.delay_after_add_s))
        since = self.unneeded_since[self.unneeded]
        waiting = since[~(t0 - since >= self.unneeded_time_s)]
        if len(waiting):
            clocks.append((waiting.min(), self.unneeded_time_s))
        return clocks


_ROOM = ("cpu_free", "mem_free", "gpu_free", "free_whole", "max_share", "nvl_whole", "numa_whole", "both_whole")
"""The state columns the filters and first-fit counts read: a node's room."""


@dataclass(frozen=True)
class _Memo:
    """A simulated plan's inputs and outcome (`ScaleDown._simulate`)."""
    cand: np.ndarray
    limit: int
    found: np.ndarray
    tried: int
    ready: np.ndarray
    booked: np.ndarray | None
    mutations: int
    touched: np.ndarray  # slots: the candidates and every node a trial packed onto
    rows: dict[str, np.ndarray]  # the _ROOM columns then


def _without(nodes: np.ndarray, gone: np.ndarray) -> np.ndarray:
    """The nodes, in order, but those in `gone`: a few of each, so one table of comparisons
    (np.isin sorts, at ~5x the cost on arrays this small)."""
    return nodes[(nodes[:, None] != gone[None, :]).all(axis=1)]


# ---- compiled steps: a pass plans and deletes among a few nodes of thousands, where a numpy
# call per step cost more than the step (NUMBA_DISABLE_JIT=1 runs them as plain Python)

@njit(cache=True)
def changed_nodes(protect, protected, changed_at, seen):
    """The nodes whose protection changed or that changed since `seen` (a `mutations` count),
    ascending; `protected` becomes `protect`, in place."""
    out = np.empty(len(protect), np.int64)
    k = 0
    for n in range(len(protect)):
        if protect[n] != protected[n] or changed_at[n] > seen:
            out[k] = n
            k += 1
            protected[n] = protect[n]
    return out[:k]


@njit(cache=True)
def candidates(low, recheck_at, now, pods_on, unneeded_since):
    """The low nodes not waiting a recheck, empty ones first, then those unneeded before, then
    by slot (upstream's candidate sorting; `low` ascending)."""
    out = np.empty(len(low), np.int64)
    k = 0
    for empty in (True, False):
        for before in (True, False):
            for n in low:
                if recheck_at[n] <= now and (pods_on[n] == 0) == empty and (not np.isnan(unneeded_since[n])) == before:
                    out[k] = n
                    k += 1
    return out[:k]


@njit(cache=True)
def presumed_removable(cand, gang_pods_on, limit):
    """Which candidates are presumed removable (none of their pods a gang member), up to the
    one that makes `limit` of them when more would be: (found, tried), found over the tried."""
    found = np.empty(len(cand), np.bool_)
    total = 0
    for i in range(len(cand)):
        found[i] = gang_pods_on[cand[i]] == 0
        total += found[i]
    tried = len(cand)
    if total > limit:
        seen = 0
        for i in range(len(cand)):
            seen += found[i]
            if seen >= limit:
                tried = i + 1
                break
    return found[:tried], tried


@njit(cache=True)
def settle(tried, found, now, recheck_s, recheck_at, unneeded_since, unneeded):
    """The plan's outcome over the candidates `tried`: those not `found` removable wait a
    recheck; the found ones are the unneeded nodes now, each keeping the time it was first
    found unneeded (the previous `unneeded` lose theirs: only unneeded nodes have a time).
    Returns (the unneeded nodes, those kept)."""
    new, kept = tried[found], tried[~found]
    for n in kept:
        recheck_at[n] = now + recheck_s
    since = unneeded_since[new]
    for n in unneeded:
        unneeded_since[n] = np.nan
    for i in range(len(new)):
        unneeded_since[new[i]] = now if np.isnan(since[i]) else since[i]
    return new, kept


@njit(cache=True)
def spare_per_pool(status, slot_pool, min_size):
    """Per pool, the nodes present beyond its min_size: how many it may lose."""
    spare = -min_size.copy()
    for n in range(len(status)):
        if status[n] != ABSENT:
            spare[slot_pool[n]] += 1
    return spare


@njit(cache=True)
def within_by_group(nodes, slot_pool, spare, most):
    """The nodes, in order, that their pools may lose (the first spare[pool] of each pool),
    grouped by pool, pools in the order they first appear (upstream budgets crop bucket by
    bucket), the order kept within a pool; the first `most` of them, taken off `spare`."""
    taken = np.zeros(len(spare), np.int64)
    kept = np.empty(len(nodes), np.int64)
    k = 0
    for n in nodes:
        p = slot_pool[n]
        if taken[p] < spare[p]:
            taken[p] += 1
            kept[k] = n
            k += 1
    out = np.empty(min(k, most), np.int64)
    m = 0
    for i in range(k):
        p = slot_pool[kept[i]]
        if taken[p] < 0:  # its pool's group is out already
            continue
        for j in range(i, k):
            if slot_pool[kept[j]] == p and m < len(out):
                out[m] = kept[j]
                m += 1
                spare[p] -= 1
        taken[p] = -1
    return out
