"""`ReplicaSets`: the services' replicas in a simulation, an extension of it.

Each service has dormant replica slots (harness/services/workload.py); `create` makes some
arrive now as any job, `delete` withdraws some in ReplicaSet's order (`deletion_order`). A
replica running on a ready node serves once its cold start is over (image pulled, model
loaded) and stops serving when it leaves its node. Each service's demand changes at its
windows' starts, events of the simulation, so metrics integrate exactly across them. It
attaches through the simulation's `hooks` (endless, unbound) and its accounts
(harness/services/metrics.py) through the accounting's `extensions`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from harness.sealed import Sealed
from harness.services.metrics import ServiceAccounting
from harness.services.replicaset import deletion_order
from harness.status import RUNNING

if TYPE_CHECKING:
    from harness.workload import Services


class ReplicaSets:
    def __init__(self, sim, svc: Services):
        #: the services' truth, demand included (loops see `sim.w.services`, sealed)
        self.sim, self.svc = sim, svc
        # a replica's creation instant becomes its slot's submit time (`create`)
        w = sim.w
        sim.w = replace(w, job_submit=w.job_submit.copy(), submit=w.submit.copy(),
                        services=svc.sealed(Sealed("a service's demand (demand_now: now's)")))
        self.replicas = np.zeros(svc.n, np.int64)  # created replicas per service (spec.replicas)
        self.ready = np.zeros(svc.n, np.int64)  # ... ready ones
        self.recommended = np.zeros(svc.n, np.int64)  # the replica autoscaler's (`ReplicaLoop`)
        self.created = np.zeros(w.n_jobs, bool)  # per job: a replica slot in use
        self.ready_at = np.full(w.n_jobs, np.nan)  # when a replica became ready (nan: it is not)
        self.demand = np.zeros(svc.n)  # each service's demand now (0 before its first window)
        for s, first in enumerate(svc.demand_bounds[:-1].tolist()):
            sim.at(float(svc.demand_start[first]), self._demand_window, s, first)  # then one after another
        self.acct = ServiceAccounting(self)
        sim.acct.extensions.append(self.acct)
        sim.hooks.endless.append(self._serving)
        sim.hooks.unbound.append(self._off_node)

    def demand_now(self) -> np.ndarray:
        """Each service's demand now (units per second): the window holding `now`, never a
        later one (a copy: loops may keep it)."""
        return self.demand.copy()

    def _demand_window(self, s: int, i: int) -> None:
        """Service s's demand window i starts."""
        svc = self.svc
        self.demand[s] = svc.demand_value[i]
        if i + 1 < svc.demand_bounds[s + 1]:
            self.sim.at(svc.demand_start[i + 1], self._demand_window, s, i + 1)

    def create(self, s: int, k: int) -> None:
        """k dormant replica slots of service s (the lowest first) arrive now, as any
        arrival: refused if no node type could hold them, else to the scheduler's queue."""
        sim, svc = self.sim, self.svc
        slots = svc.slots(s)
        new = slots[~self.created[slots]][:k]
        assert len(new) == k, f"service {svc.name[s]}: {k} replicas asked for, {len(new)} slots dormant"
        self.created[new] = True
        self.replicas[s] += k
        self.acct.created[s] += k
        sim.w.job_submit[new] = sim.now
        sim.w.submit[sim.w.pods_of(new)] = sim.now
        sim.job_admitted[new] = np.nan  # a new pod: its admission is to come
        for j in new.tolist():
            sim.arrive(j)

    def delete(self, s: int, k: int) -> None:
        """k replicas of service s leave now, in ReplicaSet's order (`deletion_order`). A deleted
        replica releases its node as a finished pod would (no preemption, no work lost) and its
        slot becomes dormant again (`Simulation.withdraw`)."""
        sim, svc = self.sim, self.svc
        slots = svc.slots(s)
        live = slots[self.created[slots]]
        assert len(live) >= k, f"service {svc.name[s]}: {k} replicas to delete, {len(live)} created"
        pods = sim.w.pods_by_job[sim.w.job_bounds[live]]  # a slot is one pod
        victims = live[deletion_order(sim, pods, self.ready_at)[:k]]
        for j in victims.tolist():
            sim.withdraw(j)
        self.created[victims] = False
        self.replicas[s] -= k
        self.acct.deleted[s] += k

    def _serving(self, p: int) -> None:
        """Pod p runs with no end: a replica's cold start begins."""
        sim = self.sim
        s = int(sim.w.job_service[sim.w.job[p]])
        if s >= 0:
            sim.at(sim.now + self.svc.cold_start[s], self._replica_ready, p, int(sim.pod_epoch[p]))

    def _replica_ready(self, p: int, epoch: int) -> None:
        """A replica's cold start is over: it serves."""
        sim = self.sim
        if epoch != sim.pod_epoch[p] or sim.pod_status[p] != RUNNING:
            return
        j = int(sim.w.job[p])
        self.ready_at[j] = sim.now
        self.ready[sim.w.job_service[j]] += 1
        self.acct.cold_starts[sim.w.job_service[j]] += 1

    def _off_node(self, j: int) -> None:
        """Job j's pod left its node: a ready replica serves no more."""
        if not math.isnan(self.ready_at[j]):
            self.ready_at[j] = np.nan
            self.ready[self.sim.w.job_service[j]] -= 1
