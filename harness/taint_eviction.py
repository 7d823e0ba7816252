"""Device taints coming and going during a run, and the pods their NoExecute effect evicts, as
upstream's device taint eviction controller (pkg/controller/devicetainteviction) does.

The schedule (harness/dra/taints.py: DeviceTaintRules, seeded failures) is known to the
simulation alone; each change is an event, and what is in force is written to the cluster
state's `device_taints` as it happens, so a loop (its scheduler, its autoscaler's what-if)
sees a taint only once it came. When a NoExecute taint comes on a device, each pod whose
allocation holds that device is evicted at the taint's time plus the least tolerationSeconds
of the NoExecute tolerations of its request that tolerate it: at once without such a
toleration, never with one that has no tolerationSeconds (upstream's claimEvictionTime).

A pod bound later onto a device whose NoExecute taint it tolerates for a while is evicted at
that same time, or at once if it has passed, as upstream's controller does for a pod
scheduled with a claim allocated after the taint came (the allocator ignores
tolerationSeconds, so the scheduler may well pick that device again). Bound means bound as
upstream's API sees it: when the pod starts here (its gang's wait in Permit over, its node
ready). A batch job's pod then comes back only after its Job controller's backoff
(harness/job_backoff.py) and, bound to the same device again, is evicted again: it flaps with
delays doubling to 10 min until the taint goes. A Deployment's pod, which its ReplicaSet
recreates at once, would flap at one instant forever: it is not evicted at bind time, nor is
any pod with the backoff off (`job_backoff: false`, the older simplification).
"""

from __future__ import annotations

import math

import numpy as np

from harness.dra.layer import ClaimedGpus
from harness.dra.resources import NO_EXECUTE
from harness.dra.taints import DeviceTaints, eviction_delay
from harness.status import BOUND, RUNNING


class DeviceTaintEviction:
    def __init__(self, sim, taints: DeviceTaints):
        self.sim, self.taints = sim, taints
        self.changes = c = taints.changes(sim.state.slot_type, sim.seed, sim.horizon)
        #: per (slot, device), the taints in force on it: (its number, when it came)
        self.active: dict[tuple[int, int], list[tuple[int, float]]] = {}
        self.applied = 0  # taints that came on a device
        self.no_execute = np.zeros(sim.state.n_slots, np.int32)  # per slot: NoExecute taints in force
        self._delays: dict[int, np.ndarray] = {}  # per claim set: `eviction_delay`
        times, starts = np.unique(c.time, return_index=True)
        bounds = np.r_[starts, len(c.time)].tolist()
        for i, t in enumerate(times.tolist()):
            sim.at(t, self._change, bounds[i], bounds[i + 1])
        if sim.job_backoff is not None:
            sim.hooks.started.append(self._bound)

    def _change(self, lo: int, hi: int) -> None:
        """Changes lo..hi (one instant) take effect: the state's marks, then evictions."""
        c, st = self.changes, self.sim.state
        assert st.device_taints is not None, "a cluster with taints during the run keeps their marks"
        slots, evicting = set(), set()
        for i in range(lo, hi):
            key, taint = (int(c.slot[i]), int(c.device[i])), (int(c.taint[i]), float(c.added[i]))
            no_execute = self.taints.catalogue[taint[0]].effect == NO_EXECUTE
            if c.on[i]:
                self.active.setdefault(key, []).append(taint)
                self.applied += 1
                if no_execute:
                    evicting.add(key[0])
            else:
                self.active[key].remove(taint)
                if not self.active[key]:
                    del self.active[key]
            self.no_execute[key[0]] += (1 if c.on[i] else -1) * no_execute
            slots.add(key[0])
        for n in sorted(slots):
            marks = np.zeros(st.device_taints.shape[1], np.int64)
            for d in range(len(marks)):
                for k, _ in self.active.get((n, d), ()):
                    marks[d] |= np.int64(1) << k
            st.taint_devices(n, marks)
        for n in sorted(evicting):
            self._sweep(n)

    def _sweep(self, n: int) -> None:
        """Evict the pods on slot n whose time is up; check the others again when theirs is."""
        sim = self.sim
        due, why = [], ""
        for p in sorted(sim.node_pods[n]):
            when, cause = self._eviction_time(p)
            if when <= sim.now:
                due.append(p)
                why = why or cause
            elif math.isfinite(when):
                sim.at(when, self._expire, p, int(sim.pod_epoch[p]))
        if due:
            sim.evict(np.array(due, np.int64), why)

    def _bound(self, p: int, n: int) -> None:
        """Pod p started on slot n: under a NoExecute taint it tolerates for a while, it is
        evicted when that runs out (at once if it has: after this instant's scheduling). Only a
        batch job's pod, which backs off before it is bound again."""
        sim = self.sim
        if not self.no_execute[n]:
            return
        assert sim.job_backoff is not None, "bind-time evictions need the Job controller's backoff"
        if not sim.job_backoff.counted[sim.w.job[p]]:
            return
        when, _ = self._eviction_time(p)
        if math.isfinite(when):
            sim.at(max(when, sim.now), self._expire, p, int(sim.pod_epoch[p]))

    def _expire(self, p: int, epoch: int) -> None:
        sim = self.sim
        if sim.pod_epoch[p] != epoch or sim.pod_status[p] not in (BOUND, RUNNING):
            return
        when, cause = self._eviction_time(p)
        if when <= sim.now:
            sim.evict(np.array([p], np.int64), cause)

    def _eviction_time(self, p: int) -> tuple[float, str]:
        """When pod p must leave its node for the NoExecute taints in force on its devices
        (inf: never), and the taint that says so."""
        sim = self.sim
        gpus, w = sim.pod_gpus[p], sim.w
        if not isinstance(gpus, ClaimedGpus) or w.claim is None or w.claim[p] < 0:
            return math.inf, ""  # holds no allocated device
        claims = w.claim_sets[w.claim[p]]
        delay = self._delays.get(id(claims))
        if delay is None:
            delay = self._delays[id(claims)] = eviction_delay(claims, self.taints.catalogue)
        n, when, cause = int(sim.pod_node[p]), math.inf, ""
        for o, d in gpus.pairs.tolist():
            for k, added in self.active.get((n, d), ()):
                if added + delay[o, k] < when:
                    when, taint = added + delay[o, k], self.taints.catalogue[k]
                    cause = f"device taint {taint.key}={taint.value}:{taint.effect}"
        return when, cause
