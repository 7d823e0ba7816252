"""`KueueLoop`: Kueue's admission in front of any loop (conf/loop/*_kueue.yaml).

Arriving jobs are gated (`SimulationView.gate_arrivals`): a job waits, its pods pending and
`not_admitted`, in the ClusterQueue its LocalQueue (the trace's `queue`) points at, until
Kueue admits it whole against the quotas of the cluster's `kueue:` section
(harness/kueue/admission.py); only then do its pods reach the wrapped loop's scheduler
queue (`admit`). Quota comes back when every pod of the job has finished.

waitForPodsReady (off by default, as upstream): a job admitted `pods_ready_timeout_s` ago
that has not started (its gang's min_member pods running) is evicted: its bound pods are
released, its quota returned, and it is queued again after Kueue's backoff, base * 2^(n-1)
seconds capped at max for its n-th eviction (upstream adds a tiny jitter, not modelled),
ordered by its eviction time (requeuingStrategy.timestamp: Eviction); past
`backoff_limit_count` evictions it is deactivated and never admitted again. With
`block_admission` (upstream's default once waitForPodsReady is on) jobs are admitted one at
a time, none while an admitted job has not started. Both clocks are events of the simulation
(`SimulationView.at`), so quiet stretches end at them.

A flavor is a set of pools: it can take a job when one of its pools fits every pod, and
once admitted the job's pods may use only its pools' nodes (Kueue writes the flavor's node
labels into the pods' nodeSelector): the wrapped loop's scheduler places them there and its
autoscaler buys only from those pools (`Gate.admit`'s nodes, `Workload.placement`).

Services (harness/services/) come through Kueue's pod integration, as a Deployment's pods
do upstream (kubernetes-sigs/kueue site/content/en/docs/tasks/run/deployment.md; the
deployment webhook, pkg/controller/jobs/deployment/deployment_webhook.go, copies the
Deployment's queue-name label into its pod template): each replica is a single-pod
workload in its service's LocalQueue (the services table's `queue`). A created replica
arrives through the gate like any job and waits for quota; a deleted one is withdrawn
(`_deleted`): "on scale-in, the excess Pods are deleted, and the quota is freed", and a
replica still queued leaves its queue. Nothing is preempted or lost.

Topology Aware Scheduling (`tas`, off by default): a gang's locality claim is a required
topology request; it is admitted only with a domain of its flavor's topology, and its pods
keep to that domain (harness/kueue/tas.py).

With `admission_check` (harness/kueue/provisioning.py, Kueue's ProvisioningRequest check),
a job whose quota is reserved waits for its ProvisioningRequest to be Provisioned before it is
admitted; a Failed request gives the quota back and requeues the job, or deactivates it.

Preemption (a ClusterQueue's `preemption:`, harness/kueue/preemption.py): the victims'
pods leave their nodes through `Simulation.evict` (the work they did is lost and counted,
a gang goes whole), their quota comes back (a pending ProvisioningRequest is dropped) and
they wait, not admitted, in their queues. The waitForPodsReady eviction is not a
preemption: it takes only jobs that have not started, which have no work to lose, so it
unbinds their pods and counts nothing. Not modelled: preemption for a TAS workload (victims
are chosen by quota alone; the preemptor may then find no domain and wait).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from harness.cluster import Cluster
from harness.description import KUEUE, Description
from harness.errors import ConfigError, LoopbenchError
from harness.kueue.admission import Admission
from harness.kueue.inadmissible import refuse_inadmissible
from harness.kueue.preemption import KueuePreemption
from harness.kueue.provisioning import ProvisioningCheck
from harness.kueue.queues import Kueue
from harness.kueue.tas import TopologyAssigner
from harness.loops.base import conform
from harness.scores import ScorePlugin
from harness.settings import check, component, duration, flag, integer, number
from harness.status import BOUND, RUNNING, PendingReason
from harness.view import Loop, SimulationView
from harness.workload import Workload, pools_fit


def unknown_queues(kueue: Kueue, w: Workload) -> list[str]:
    """The trace's queues that no LocalQueue names."""
    return sorted(set(np.unique(w.job_queue).tolist()) - set(kueue.local_queues))


def admission_books(kueue: Kueue, cluster: Cluster, w: Workload) -> Admission:
    """Kueue's empty books for a workload: what each job requests, which flavors can take it
    (one of a flavor's pools fits each of its pods) and its ClusterQueue. On them, a job no
    flavor of its queue can take alone (`Admission.assign`) is never admitted: `attach` refuses
    it (harness/kueue/inadmissible.py)."""
    request = np.stack([np.bincount(w.job, weights=x, minlength=w.n_jobs) for x in
                        (w.gpu_milli_total, w.cpu, w.mem)], axis=1)
    flavor_fits_pod = (kueue.flavor_pools.astype(np.int64) @ pools_fit(cluster, w)) > 0
    by_job = flavor_fits_pod[:, w.pods_by_job]
    fits = np.logical_and.reduceat(by_job, w.job_bounds[:-1], axis=1).T
    queue_of = np.array([kueue.local_queues[q] for q in w.job_queue.tolist()], np.int64)
    return Admission(kueue, request, fits, queue_of, w.job_priority)


class KueueLoop:
    SETTINGS = {
        "wait_for_pods_ready": flag("Kueue's waitForPodsReady: a job admitted but not started within "
                                    "pods_ready_timeout_s is evicted and queued again (upstream: off)"),
        "pods_ready_timeout_s": number("seconds an admitted job may take to start before waitForPodsReady "
                                       "evicts it (upstream: 300)", gt=0),
        "block_admission": flag("with waitForPodsReady, nothing is admitted while an admitted job has not "
                                "started (upstream: true)"),
        "backoff_base_s": duration("seconds before an evicted job is queued again, doubled at each eviction "
                                   "(upstream: 60)"),
        "backoff_max_s": duration("the longest requeue backoff (upstream: 3600)"),
        "backoff_limit_count": integer("evictions after which a job is deactivated; null = never (upstream)",
                                       ge=0, null=True),
        "tas": flag("Kueue's Topology Aware Scheduling: a job's gang locality claim (rack, block) is a required "
                    "topology request, admitted only with a domain of its flavor's topology (default false)"),
        "admission_check": component(ProvisioningCheck, "the ClusterQueues' ProvisioningRequest admission "
                                     "check: a job with quota reserved is admitted once its request is "
                                     "Provisioned; null = none", null=True),
    }

    def __init__(self, inner: Loop, name: str = "separate_kueue", wait_for_pods_ready: bool = False,
                 pods_ready_timeout_s: float = 300.0, block_admission: bool = True,
                 backoff_base_s: float = 60.0, backoff_max_s: float = 3600.0,
                 backoff_limit_count: int | None = None, tas: bool = False,
                 admission_check: ProvisioningCheck | None = None):
        check(self, "loop", wait_for_pods_ready=wait_for_pods_ready,
              pods_ready_timeout_s=pods_ready_timeout_s, block_admission=block_admission,
              backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s, backoff_limit_count=backoff_limit_count,
              tas=tas, admission_check=admission_check)
        conform(inner, Loop, "loop.inner")
        self.inner = inner
        self.name = name
        self.wait_for_pods_ready = bool(wait_for_pods_ready)
        self.timeout_s = float(pods_ready_timeout_s)
        self.block_admission = bool(block_admission) and self.wait_for_pods_ready
        self.backoff_base_s, self.backoff_max_s = float(backoff_base_s), float(backoff_max_s)
        self.backoff_limit_count = backoff_limit_count
        self.use_tas = bool(tas)
        self.admission_check = admission_check

    @property
    def policy(self) -> ScorePlugin:
        return self.inner.policy

    def describe(self) -> Description:
        d = self.inner.describe()
        return replace(d, switches=tuple(sorted((*d.switches, KUEUE), key=lambda s: s.rank)))

    def attach(self, sim: SimulationView) -> None:
        kueue = sim.cluster.kueue
        if kueue is None:
            raise ConfigError("cluster.kueue", f"loop '{self.name}' admits through Kueue: the cluster "
                                               f"'{sim.cluster.name}' declares no kueue: section")
        unknown = unknown_queues(kueue, sim.w)
        if unknown:
            raise LoopbenchError(f"queue '{unknown[0]}' of the trace has no LocalQueue in cluster "
                                 f"'{sim.cluster.name}' (cluster.kueue.local_queues)")
        w = sim.w
        self.adm = admission_books(kueue, sim.cluster, w)
        refuse_inadmissible(self.adm, sim.cluster, w)  # before the replay, not silently at its horizon
        self.sim = sim
        self.inner.attach(sim)
        self.size = np.diff(w.job_bounds)
        self.flavor_slots = kueue.flavor_pools[:, sim.state.slot_pool]  # flavor x node slot
        self.tas = TopologyAssigner(kueue, sim.state, w) if self.use_tas else None
        if self.tas is not None:
            self.adm.topology_fits = self.tas.fits
        self.capacity_seen = -1  # the cluster's capacity version TAS last saw
        if any(cq.preemption.enabled for cq in kueue.cluster_queues):
            self.adm.preemption = KueuePreemption(w.job_submit)
            sim.allow_preemption()
        self.active = np.zeros(0, np.int64)  # admitted jobs not finished
        self.unready = np.zeros(0, np.int64)  # admitted jobs not started
        self.epoch = np.zeros(w.n_jobs, np.int64)  # admissions so far (a timeout names one)
        self.evictions = np.zeros(w.n_jobs, np.int64)
        self.expired: list[int] = []  # admitted jobs whose PodsReady timeout fired
        self.dirty = False
        if self.admission_check is not None:
            self.admission_check.attach(self, self.inner, sim)
        self.gate = sim.gate_arrivals(self._arrived, self._deleted)

    def _arrived(self, j: int) -> None:
        self.adm.push(j, self.sim.w.job_submit[j])
        self.dirty = True

    def _deleted(self, j: int) -> None:
        """Replica j was scaled in: its pod is deleted, so its workload is done with. Quota it
        held comes back (its ProvisioningRequest, if open, is dropped); queued, it leaves its
        queue; its timers (PodsReady timeout, requeue backoff) are void."""
        if self.adm.flavor[j] >= 0:
            if self.admission_check is not None:
                self.admission_check.withdraw(j)
            self.release(j)
        else:
            self.adm.withdraw(j)
        self.expired = [e for e in self.expired if e != j]
        self.epoch[j] += 1

    def next_wakeup(self, now: float) -> float:
        return self.inner.next_wakeup(now)  # admission acts on events only (arrivals, ends, its timers)

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        return self.inner.idle_ticks(start, before)

    def step(self, sim: SimulationView, now: float) -> None:
        """Settle what happened, admit, then the wrapped loop's step. With block_admission,
        one job at a time: the wrapped loop steps after each, and the next is admitted at
        the same instant only if that one started at once (Kueue reserves quota for the next
        entry only once every workload holding quota is PodsReady, one still waiting on its
        admission check included). Behind a check, a job the wrapped loop's step admitted may
        start in that step: admission then goes on at the same instant."""
        while True:
            self._admit_and_step(sim, now)
            if not (self.block_admission and self.admission_check is not None):
                return
            self._refresh_ready()
            if not (self.dirty and not len(self.unready)):
                return

    def _admit_and_step(self, sim: SimulationView, now: float) -> None:
        """Settle what happened, admit what may be, and step the wrapped loop once."""
        self._release_finished()
        self._refresh_ready()
        self._evict_expired(now)
        self._new_capacity()
        self.adm.preemptible_before = self.adm.n_admitted  # none admitted from now on is preempted now
        stepped = False
        while self.dirty and not (self.block_admission and len(self.unready)):
            self.dirty = False
            ran = self.adm.run(1 if self.block_admission else None)
            self._evict_victims()
            # a job preempted after its quota reservation in the same run holds none any more
            admitted = [j for j in dict.fromkeys(j for j, _ in ran) if self.adm.flavor[j] >= 0]
            for j in admitted:  # quota reserved: admitted now, or once its admission check is Ready
                (self.admit if self.admission_check is None else self.admission_check.reserve)(j, now)
            if admitted:
                self.active = np.concatenate([self.active, admitted]).astype(np.int64)
                if self.wait_for_pods_ready:  # not PodsReady from its quota reservation on
                    self.unready = np.concatenate([self.unready, admitted]).astype(np.int64)
            if not (self.block_admission and admitted):
                break
            self.dirty = True  # more may wait behind it
            self.inner.step(sim, now)
            stepped = True
            self._refresh_ready()
            self._new_capacity()
        if not stepped:
            self.inner.step(sim, now)

    def _new_capacity(self) -> None:
        """With TAS, capacity that changed may fit a workload set aside for its topology:
        every set-aside workload is queued again (upstream's TAS node controller)."""
        if self.tas is None:
            return
        self.tas.new_step()
        version = self.sim.state.version + self.sim.state.layout_version
        if version != self.capacity_seen:
            self.capacity_seen = version
            self.adm.retry_inadmissible(np.arange(len(self.adm.pending)))
            self.dirty = True

    def _release_finished(self) -> None:
        """Jobs whose pods all finished give their quota back."""
        sim = self.sim
        if len(self.active):
            done = sim.job_done[self.active] == self.size[self.active]
            if done.any():
                for j in self.active[done].tolist():
                    self.adm.release(j)
                self.active = self.active[~done]
                self.dirty = True

    def _refresh_ready(self) -> None:
        """Admitted jobs that started are PodsReady (block_admission may lift)."""
        if len(self.unready):
            self.unready = self.unready[np.isnan(self.sim.job_started[self.unready])]
            if not len(self.unready):
                self.dirty = True

    def _evict_expired(self, now: float) -> None:
        """Jobs whose PodsReady timeout fired before they started are evicted."""
        expired, self.expired = self.expired, []
        for j in expired:
            if math.isnan(self.sim.job_started[j]):
                self._evict(j, now)

    def admit(self, j: int, now: float) -> None:
        """Job j, its quota reserved in flavor f (and its checks passed), reaches the scheduler,
        kept to f's pools (or to its TAS domain)."""
        f = int(self.adm.flavor[j])
        self.gate.admit(j, self.flavor_slots[f] if self.tas is None else self.tas.admitted(j, f))
        self.epoch[j] += 1
        if self.wait_for_pods_ready:  # the timeout runs from the admission
            self.sim.at(now + self.timeout_s, self._timed_out, j, int(self.epoch[j]))

    def _evict_victims(self) -> None:
        """Kueue preempted these jobs: their pods on nodes are evicted (`Simulation.evict`:
        the lost work is counted), and every pod of theirs waits again, not admitted. Kueue
        evicts by suspending the Job, whose controller deletes its pods without counting them
        failed: no pod-failure backoff."""
        sim = self.sim
        victims, self.adm.evicted = self.adm.evicted, []
        for v in dict.fromkeys(victims):
            pods = sim.w.job_pods[v]
            on_nodes = pods[np.isin(sim.pod_status[pods], (BOUND, RUNNING))]
            if len(on_nodes):
                sim.evict(on_nodes, suspended=True)
            else:  # quota reserved, no pod bound yet: preempted all the same, nothing lost
                sim.acct.preempted(np.array([v]), 0.0)
            sim.queue.remove(v)
            sim.acct.set_reasons(sim.unbound_pods(v), PendingReason.NOT_ADMITTED)
            if self.admission_check is not None:
                self.admission_check.withdraw(v)
            self.active = self.active[self.active != v]
            self.unready = self.unready[self.unready != v]
            self.epoch[v] += 1  # its PodsReady timeout, if any, is void

    def _timed_out(self, j: int, epoch: int) -> None:
        if epoch == self.epoch[j] and self.adm.flavor[j] >= 0:
            self.expired.append(j)

    def _evict(self, j: int, now: float) -> None:
        """waitForPodsReady's timeout: the job gives its pods and quota back and is queued
        again after its backoff, or deactivated past the retry limit."""
        sim = self.sim
        pods = sim.w.job_pods[j]
        for p in pods[sim.pod_status[pods] == BOUND].tolist():
            sim.unbind(p)
        sim.queue.remove(j)
        sim.acct.set_reasons(sim.unbound_pods(j), PendingReason.NOT_ADMITTED)
        self.release(j)
        self.unready = self.unready[self.unready != j]
        self.epoch[j] += 1
        self.evictions[j] += 1
        n = int(self.evictions[j])
        if self.backoff_limit_count is not None and n > self.backoff_limit_count:
            return  # deactivated: exceeded the maximum number of re-queuing retries
        delay = min(self.backoff_base_s * 2.0 ** (n - 1), self.backoff_max_s)
        sim.at(now + delay, self.requeue, j, now, int(self.epoch[j]))

    def release(self, j: int) -> None:
        """Job j gives its quota back (evicted, or its admission check failed)."""
        self.adm.release(j)
        self.active = self.active[self.active != j]
        self.unready = self.unready[self.unready != j]
        self.dirty = True

    def requeue(self, j: int, evicted_at: float, epoch: int) -> None:
        """Job j's backoff is over: it queues again, unless it was deleted meanwhile (epoch)."""
        if epoch == self.epoch[j]:
            self.adm.push(j, evicted_at)
            self.dirty = True
