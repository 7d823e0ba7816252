"""Scale-down: removes nodes whose accelerator utilisation stayed under a threshold long
enough (Cluster Autoscaler's rule), one pass per scan; shared by every loop that autoscales.
"""

from __future__ import annotations

import numpy as np

from harness.filters import feasible
from harness.loops.base import SimulationView
from harness.quiet import Clock
from harness.settings import check
from harness.state import ABSENT, READY
from harness.whatif import Snapshot


class ScaleDown:
    """Removes nodes that stayed under-utilised; shared by every loop."""

    def __init__(self, utilization_threshold: float = 0.5, unneeded_time_s: float = 600.0,
                 delay_after_add_s: float = 600.0):
        check("harness.loops.scale_down.ScaleDown", "scale_down", utilization_threshold=utilization_threshold,
              unneeded_time_s=unneeded_time_s, delay_after_add_s=delay_after_add_s)
        self.threshold = float(utilization_threshold)
        self.unneeded_time_s = float(unneeded_time_s)
        self.delay_after_add_s = float(delay_after_add_s)

    def attach(self, sim: SimulationView) -> None:
        self.sim = sim
        self.unneeded_since = np.full(sim.state.n_slots, np.nan)
        self.is_low = np.zeros(sim.state.n_slots, bool)
        self.protected = np.zeros(sim.state.n_slots, bool)
        self.seen_mutations = -1
        self.low = np.zeros(0, np.int64)
        self.ran_at = -np.inf

    def utilization(self, nodes: np.ndarray) -> np.ndarray:
        """Accelerator utilisation of `nodes` for GPU nodes, max(CPU, memory) for the others."""
        st = self.sim.state
        gcap = st.gpu_milli_cap[nodes]
        if gcap.all():  # GPU nodes only, the usual case
            return st.gpu_used[nodes] / gcap
        ccap, mcap = st.cpu_cap[nodes], st.mem_cap[nodes]
        gpu = np.divide(st.gpu_used[nodes], gcap, out=np.zeros(len(nodes)), where=gcap > 0)
        cpu = 1.0 - np.divide(st.cpu_free[nodes], ccap, out=np.ones(len(nodes)), where=ccap > 0)
        mem = 1.0 - np.divide(st.mem_free[nodes], mcap, out=np.ones(len(nodes)), where=mcap > 0)
        return np.where(gcap > 0, gpu, np.maximum(cpu, mem))

    def run(self, now: float, protect: np.ndarray, booked_for: np.ndarray | None = None) -> None:
        """One scale-down pass; `protect`ed nodes are never removed; `booked_for` (node -> job
        it is booked for, -1 free) limits where a drained node's pods may go."""
        sim, st = self.sim, self.sim.state
        if not sim.cluster.autoscaling:
            return
        self.ran_at = now
        changed = protect != self.protected
        if st.mutations != self.seen_mutations or changed.any():
            # a node's utilisation changes only with the node: re-judge the nodes changed since
            idx = np.flatnonzero(changed | (st.changed_at > self.seen_mutations))
            self.seen_mutations, self.protected = st.mutations, protect
            low = (st.status[idx] == READY) & (self.utilization(idx) < self.threshold) & ~protect[idx]
            self.unneeded_since[idx[low & ~self.is_low[idx]]] = now
            self.unneeded_since[idx[~low]] = np.nan
            self.is_low[idx] = low
            self.low = np.flatnonzero(self.is_low)
        if now - sim.last_scale_up < self.delay_after_add_s or len(self.low) == 0:
            return
        ripe = self.low[now - self.unneeded_since[self.low] >= self.unneeded_time_s]
        if len(ripe) == 0:
            return
        present = np.bincount(st.slot_pool[st.status != ABSENT], minlength=len(sim.cluster.pools))
        spare = present - np.array([p.min_size for p in sim.cluster.pools])  # nodes each pool may lose
        # empty nodes go, in order, as far as each pool's min_size allows
        empty = ripe[st.pods_on[ripe] == 0]
        pool = st.slot_pool[empty]
        by_pool = np.argsort(pool, kind="stable")
        rank = np.empty(len(empty), np.int64)
        rank[by_pool] = np.arange(len(empty)) - np.searchsorted(pool[by_pool], pool[by_pool])
        gone = empty[rank < spare[pool]]
        for n in gone.tolist():
            self._remove(n)
        spare -= np.bincount(st.slot_pool[gone], minlength=len(spare))
        # then at most one non-empty node per scan, as Cluster Autoscaler: the first one (fewest
        # pods first) holding no gang member whose pods all fit elsewhere
        busy = ripe[np.argsort(st.pods_on[ripe], kind="stable")]
        busy = busy[(st.pods_on[busy] > 0) & (sim.gang_pods_on[busy] == 0) & (spare[st.slot_pool[busy]] > 0)]
        for n in busy.tolist():
            if self._can_drain(n, booked_for):
                for pod in sim.pods_on(n):
                    sim.unbind(pod)  # evicted: it restarts wherever the scheduler puts it
                self._remove(n)
                return

    def clocks(self) -> list[Clock]:
        """What could make a run see other nodes than the last one did, if no node changes
        meanwhile (see `harness.quiet`): the delay after a scale-up running out, a low node
        ripening (the one low the longest, first). No clock while no node is low."""
        if len(self.low) == 0:
            return []
        t0, last_up = self.ran_at, self.sim.last_scale_up
        clocks = [(last_up, self.delay_after_add_s)] if t0 - last_up < self.delay_after_add_s else []
        since = self.unneeded_since[self.low]
        waiting = since[~(t0 - since >= self.unneeded_time_s)]
        if len(waiting):
            clocks.append((waiting.min(), self.unneeded_time_s))
        return clocks

    def _remove(self, n: int) -> None:
        self.sim.remove_node(n)
        self.unneeded_since[n] = np.nan

    def _can_drain(self, n: int, booked_for: np.ndarray | None = None) -> bool:
        """Each of its pods fits on another ready node it may use (first fit, in slot order):
        not one booked for another job, where the scheduler would not put it either."""
        sim = self.sim
        pods = sim.pods_on(n)
        others = np.flatnonzero(sim.state.ready)
        others = others[others != n]
        if len(pods) == 1:  # where it would go does not matter: only whether it fits somewhere
            usable = None if booked_for is None else (booked_for == -1) | (booked_for == sim.w.job[pods[0]])
            return bool(feasible(sim.state, sim.w, pods[0], usable, at=others).any())
        snap = Snapshot(sim.state, others, usable=np.ones(len(others), bool),  # local order is slot order
                        booked=None if booked_for is None else booked_for[others])
        return snap.fit(sim.w, pods, undo=False) is not None
