"""The merged loop: one planner that places pending work on existing, in-flight and
provisionable capacity in one decision.

Each job (a gang, or a single pod) is planned as a unit, in queue order:
  1. on ready nodes, all members at once (topology, shares, locality understood);
  2. else, on a provisioning tick, on nodes already booting plus new nodes of one pool:
     every pool (and rack, for a rack-local gang) is tried, the cheapest plan wins, committed
     slots counting as free; the pool's remaining stock is checked first (like a
     check-capacity ProvisioningRequest), so exactly the plan's nodes are requested, all or
     nothing. If no pool can hold the whole job, it waits.
The plan is bound at once onto the booting nodes, so the placement is decided once: pods run
when their nodes are ready (a gang when min_member of them are), and a node that a plan
counts on is never scaled down.
"""

from __future__ import annotations

import numpy as np

from harness.autoscaler import ScaleDown
from harness.filters import feasible
from harness.scheduler import Scheduler
from harness.scores import ScorePlugin
from harness.state import BOOTING
from harness.workload import LOCALITY_CODE


class MergedLoop:
    def __init__(self, policy: ScorePlugin, scan_interval_s: float = 10.0,
                 scale_down: ScaleDown | None = None, name: str = "merged"):
        self.placer = Scheduler(policy, gang_mode="atomic")
        self.scan_interval_s = float(scan_interval_s)
        self.scale_down = scale_down or ScaleDown()
        self.name = name

    def attach(self, sim) -> None:
        self.sim = sim
        self.placer.attach(sim)
        self.scale_down.attach(sim)
        self.next_scan = 0.0
        self.planned_at = np.full(sim.w.n_jobs, -1, np.int64)  # layout version of the last failed plan

    def next_wakeup(self, now: float) -> float:
        return self.next_scan if self.sim.cluster.autoscaling else np.inf

    def step(self, sim, now: float) -> None:
        self.placer.cycle(now)  # 1. whole jobs onto ready capacity
        if not sim.cluster.autoscaling or now < self.next_scan:
            return
        self.next_scan = now + self.scan_interval_s
        for _, _, j in list(sim.queue):  # 2. in-flight and provisionable capacity
            if self.planned_at[j] != sim.state.layout_version and not self._provision_for(j):
                self.planned_at[j] = sim.state.layout_version
        # never remove a node a plan counts on, nor a committed one (removing it saves nothing)
        self.scale_down.run(now, protect=(sim.held > 0) | sim.state.slot_committed)
        self.placer.cycle(now)

    # ---- planning over provisionable capacity ---------------------------------------
    def _provision_for(self, j: int) -> bool:
        sim = self.sim
        pods = sim.unbound_pods(j)
        if len(pods) == 0 or sim.w.never_fits[pods].any():
            return False
        best = None  # (cost, new nodes, pool, slots, plan)
        for pool, slots in self._options(j):
            found = self._pack(pods, pool, slots, j)
            if found is None:
                continue
            opened, plan = found
            cost = self._cost(pool, opened)
            if best is None or (cost, len(opened)) < best[:2]:
                best = (cost, len(opened), pool, opened, plan)
        if best is None:
            return False
        _, count, pool, opened, plan = best
        if count:
            granted = sim.provision(pool, count, atomic=True, slots=np.array(opened))
            assert len(granted) == count, "stock was checked before asking"
        for p, n, gpu_idx in plan:
            sim.bind(p, n, gpu_idx)
        return True

    def _options(self, j: int):
        """(pool, candidate new slots) pairs to try: one per pool, or per rack of a pool for
        a rack-local gang. Pool None = only nodes already booting."""
        sim, st = self.sim, self.sim.state
        yield None, np.zeros(0, np.int64)
        rack_local = sim.w.job_locality[j] == LOCALITY_CODE["rack"]
        for p in range(len(sim.cluster.pools)):
            avail = sim.cloud.available(p)
            if avail == 0:
                continue
            free = sim.cloud.free_slots(p)
            if rack_local:
                for r in np.unique(st.slot_rack[free]):
                    yield p, free[st.slot_rack[free] == r][:avail]
            else:
                yield p, free[:avail]

    def _pack(self, pods: np.ndarray, pool: int | None, slots: np.ndarray, j: int):
        """Place every pod on booting nodes (of the same rack/block if the gang asks) or on
        new nodes from `slots`; returns (opened slots, [(pod, node, gpus)]) or None."""
        sim, w = self.sim, self.sim.w
        scratch = sim.state.copy()
        usable = scratch.status == BOOTING
        groups = self.placer.groups_of(j)
        if groups is not None:
            if pool is not None and len(slots):
                usable &= groups == groups[slots[0]]
            elif w.job_min_member[j] > 1:
                return None  # a local gang on booting nodes only: left to the pool options
        opened, plan = [], []
        free = list(slots)
        for p in pods:
            p = int(p)
            cand = np.flatnonzero(feasible(scratch, w, p, usable))
            if len(cand) == 0 and free:
                n = int(free.pop(0))
                scratch.add_node(n, sim.now, ready=False)
                usable[n] = True
                opened.append(n)
                cand = np.flatnonzero(feasible(scratch, w, p, usable))
            if len(cand) == 0:
                return None
            n = int(cand[0])  # oldest in-flight node first: pack planned capacity
            gpu_idx = self.placer.policy.pick_devices(scratch, w, p, n)
            scratch.bind(n, int(w.cpu[p]), int(w.mem[p]), gpu_idx, int(w.milli[p]))
            plan.append((p, n, gpu_idx))
        return opened, plan

    def _cost(self, pool: int | None, opened: list[int]) -> float:
        """Hourly price of the new nodes; committed slots are already paid for."""
        if pool is None or not opened:
            return 0.0
        committed = int(self.sim.state.slot_committed[np.array(opened)].sum())
        return (len(opened) - committed) * self.sim.cluster.pools[pool].price
