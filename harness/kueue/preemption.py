"""Kueue's classical preemption: within a ClusterQueue and reclaim within a cohort, on the
quota books of `Admission` (no simulation inside: jobs in, victims out).

As kubernetes-sigs/kueue pkg/scheduler/preemption/preemption.go (flat cohorts, no fair
sharing), read with its flavor assigner (pkg/scheduler/flavorassigner):

  mode       a head that fits no flavor may preempt on a flavor where each resource it lacks
             is at most the queue's nominal quota (all its own workloads gone, or its lent
             quota reclaimed), or, with borrow_within_cohort, at most what it may borrow;
             flavors are tried in order, the first with victims wins;
  candidates admitted workloads holding quota of that flavor in a resource the head lacks:
             in its own ClusterQueue per within_cluster_queue (LowerPriority: strictly lower;
             LowerOrNewerEqualPriority: also equal priority queued after the head), and in
             the other members of its cohort that borrow such a resource, per
             reclaim_within_cohort (LowerPriority, or Any);
  order      other ClusterQueues' first, then lower priority, then admitted more recently;
  the set    candidates are removed in that order (a cohort member's only while it still
             borrows) until the head fits, then given back from the last removed but one
             while it still fits; the ones that cannot come back are the victims. Upstream's
             three attempts: only own candidates -> with borrowing; borrow_within_cohort ->
             with borrowing, other queues' candidates below its threshold (all of them while
             the head's queue is under nominal); else, under nominal, without borrowing, and
             last, own candidates with borrowing.

A victim gives its quota back at once and waits again in its queue, ordered by its creation
(upstream's queue timestamp with PrioritySortingWithinCohort on, its default), and the
preemptor is admitted on that quota in the same cycle. Upstream waits for the victims' pods
to terminate (the Job is suspended, a grace period) and admits the preemptor in a later
cycle, where other workloads may take the freed quota first (a victim again, as soon as its
eviction ends: the two may flap); here the victims go at once, as for DefaultPreemption,
and the quota they free is the preemptor's. A workload admitted at this instant is not
preempted at this instant (the caller sets `Admission.preemptible_before`): each round of
upstream's flapping (reclaim_within_cohort Any lets a lower-priority workload reclaim from a
borrowing higher-priority one, which then preempts it back within its own queue) costs an
eviction; here rounds at one instant would never end. It may be preempted at the next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from harness.kueue.admission import Admission


class KueuePreemption:
    """The preemption of one set of ClusterQueues; `created[j]` is job j's creation time
    (its queue timestamp once preempted)."""

    def __init__(self, created: np.ndarray):
        self.created = created

    def nominate(self, adm: Admission, j: int) -> tuple[int, bool, list[int]] | None:
        """Job j fits no flavor now: (flavor, whether it borrows once the victims are gone,
        victims) for the first flavor of its queue where preemption makes room, or None."""
        c = int(adm.queue_of[j])
        policy = adm.k.cluster_queues[c].preemption
        if not policy.enabled:
            return None
        q = adm.request[j]
        for f in adm.k.cluster_queues[c].flavors:
            if not adm.fits[j, f]:
                continue
            lacking = self._lacking(adm, c, f, q)
            if lacking is None:
                continue
            victims = self.targets(adm, j, f, lacking)
            if victims:
                with _trial(adm):
                    for x in victims:
                        adm.usage[int(adm.queue_of[x]), f] -= adm.request[x]
                    borrows = _borrows(adm, c, f, q)
                return f, borrows, victims
        return None

    def _lacking(self, adm: Admission, c: int, f: int, q: np.ndarray) -> np.ndarray | None:
        """The resources job request q lacks in flavor f of queue c (fitsResourceQuota's
        Preempt mode on each), or None when preemption cannot make room for one of them."""
        k = adm.k
        needed = q > 0
        if not k.covered[c, f, needed].all():
            return None
        lacking = np.array([needed[r] and not adm.fit(c, f, np.where(np.arange(len(q)) == r, q, 0))[0]
                            for r in range(len(q))])
        if k.cluster_queues[c].preemption.borrow_within_cohort != "Never" and k.cluster_queues[c].cohort is not None:
            m = adm.members[c]
            requestable = adm.kept[c, f] + adm.lendable[m, f].sum(axis=0)
            room = np.minimum(adm.ceiling[c, f], requestable)
        else:
            room = k.nominal[c, f]
        return lacking if (q[lacking] <= room[lacking]).all() else None

    def targets(self, adm: Admission, j: int, f: int, lacking: np.ndarray) -> list[int]:
        """GetTargets: the workloads to evict so that job j fits flavor f (empty: none)."""
        k, c = adm.k, int(adm.queue_of[j])
        policy = k.cluster_queues[c].preemption
        prio = adm.priority
        p = int(prio[j])
        held = np.flatnonzero(adm.flavor >= 0)
        if adm.preemptible_before is not None:
            held = held[adm.admitted_seq[held] < adm.preemptible_before]
        held = held[(adm.flavor[held] == f) & (adm.request[held][:, lacking] > 0).any(axis=1)]
        cq = adm.queue_of[held]
        own = np.zeros(len(held), bool)
        if policy.within_cluster_queue != "Never":
            lower = prio[held] < p
            if policy.within_cluster_queue == "LowerOrNewerEqualPriority":
                lower |= (prio[held] == p) & (adm.queued_ts[j] < adm.queued_ts[held])
            own = (cq == c) & lower
        other = np.zeros(len(held), bool)
        if k.cluster_queues[c].cohort is not None and policy.reclaim_within_cohort != "Never":
            borrowing = np.array([_borrowing(adm, m, f, lacking) for m in range(len(k.cluster_queues))])
            other = (cq != c) & np.isin(cq, adm.members[c]) & borrowing[cq]
            if policy.reclaim_within_cohort == "LowerPriority":
                other &= prio[held] < p
        cands = held[own | other]
        if not len(cands):
            return []
        in_cq = adm.queue_of[cands] == c
        cands = cands[np.lexsort((cands, -adm.admitted_seq[cands], prio[cands], in_cq))]
        same = [int(x) for x in cands if adm.queue_of[x] == c]
        everyone = [int(x) for x in cands]
        if len(same) == len(everyone):
            return self._minimal(adm, j, f, lacking, everyone, True, None)
        if policy.borrow_within_cohort != "Never":
            threshold = p
            if policy.max_priority_threshold is not None and policy.max_priority_threshold < threshold:
                threshold = policy.max_priority_threshold + 1
            if not _under_nominal(adm, c, f, lacking):
                everyone = [x for x in everyone if adm.queue_of[x] == c or prio[x] < threshold]
            return self._minimal(adm, j, f, lacking, everyone, True, threshold)
        if _under_nominal(adm, c, f, lacking):
            victims = self._minimal(adm, j, f, lacking, everyone, False, None)
            if victims:
                return victims
        return self._minimal(adm, j, f, lacking, same, True, None)

    def _minimal(self, adm: Admission, j: int, f: int, lacking: np.ndarray, cands: list[int],
                 allow_borrowing: bool, threshold: int | None) -> list[int]:
        """minimalPreemptions: remove candidates in order until job j fits, then give them back
        from the last removed but one while it still fits. The books are as before on return."""
        c, q = int(adm.queue_of[j]), adm.request[j]
        with _trial(adm):
            removed: list[int] = []
            for x in cands:
                cx = int(adm.queue_of[x])
                if cx != c and not _borrowing(adm, cx, f, lacking):
                    continue
                if cx != c and threshold is not None and adm.priority[x] >= threshold:
                    allow_borrowing = False  # a victim at or above the threshold: the head may not borrow
                adm.usage[cx, f] -= adm.request[x]
                removed.append(x)
                if _fits(adm, c, f, q, allow_borrowing):
                    break
            else:
                return []
            victims = list(removed)
            for x in reversed(removed[:-1]):
                cx = int(adm.queue_of[x])
                adm.usage[cx, f] += adm.request[x]
                if _fits(adm, c, f, q, allow_borrowing):
                    victims.remove(x)
                else:
                    adm.usage[cx, f] -= adm.request[x]
            return victims

    def issue(self, adm: Admission, victims: list[int]) -> None:
        """The victims give their quota back and wait in their queues again, by creation time."""
        for v in victims:
            adm.release(v)
            adm.push(v, self.created[v])
            adm.evicted.append(v)


class _trial:
    """The books as they were before the `with` block, whatever it changed."""

    def __init__(self, adm: Admission):
        self.adm = adm

    def __enter__(self) -> None:
        self.saved = self.adm.usage.copy()

    def __exit__(self, *_) -> None:
        self.adm.usage[...] = self.saved


def _borrows(adm: Admission, c: int, f: int, q: np.ndarray) -> bool:
    """Would request q take queue c above its nominal quota of flavor f in a resource it asks?"""
    return bool(((adm.usage[c, f] + q > adm.k.nominal[c, f]) & (q > 0)).any())


def _fits(adm: Admission, c: int, f: int, q: np.ndarray, allow_borrowing: bool) -> bool:
    """workloadFits: q fits the books, and takes its queue above nominal only if allowed."""
    return adm.fit(c, f, q)[0] and (allow_borrowing or not _borrows(adm, c, f, q))


def _borrowing(adm: Admission, m: int, f: int, lacking: np.ndarray) -> bool:
    """cqIsBorrowing: queue m (in a cohort) uses more than its nominal quota of a lacking resource."""
    return adm.k.cluster_queues[m].cohort is not None and bool(
        (adm.usage[m, f, lacking] > adm.k.nominal[m, f, lacking]).any())


def _under_nominal(adm: Admission, c: int, f: int, lacking: np.ndarray) -> bool:
    """queueUnderNominalInResourcesNeedingPreemption."""
    return bool((adm.usage[c, f, lacking] < adm.k.nominal[c, f, lacking]).all())
