"""Kueue's quota books and admission cycle, on plain arrays (no simulation inside).

Quota (Kueue's ClusterQueue and cohort accounting, pkg/cache): a ClusterQueue `c` uses
`usage[c, f, r]` of flavor f and resource r. Alone, it admits within its nominal quota. In a
cohort, each member keeps `nominal - lendable` to itself (lendable = its lending limit, else
all its nominal quota) and puts `lendable` in the cohort's pool; what a member uses beyond
what it keeps draws on that pool, which must not run dry, and a member uses at most
`nominal + borrowing_limit`. A workload borrows when it takes its queue above nominal.

Flavors (Kueue's flavor assigner, one resource group): a queue's flavors are tried in order;
the first that can hold the job (some pool of it fits every pod) and fits its quota, with or
without borrowing, is the job's (FlavorFungibility's defaults: whenCanBorrow Borrow). With
Kueue TAS (`topology_fits`, harness/kueue/tas.py), the flavor's topology must also place it.

Queues (pkg/queue): each ClusterQueue orders its pending workloads by priority, then by their
queue timestamp (creation, or eviction after a waitForPodsReady timeout). A cycle takes the
head of every queue, assigns it a flavor against the books as they stand, and admits the
heads in the order: not borrowing first, then higher priority, then older; each is checked
again against what the cycle admitted before it (no cohort over-admission); one that no
longer fits stays at its queue's head for the next cycle. A head no flavor can take blocks
its queue under StrictFIFO; under BestEffortFIFO it is set aside as inadmissible, and the
next one becomes the head, until quota is released in its cohort (a workload finishes or is
evicted) and the set-aside ones return. Cycles repeat, at one instant, while one makes
progress (Kueue runs its next cycle at once). With a ClusterQueue's preemption policies
(`preemption`, harness/kueue/preemption.py), a head that fits nowhere may instead evict
admitted workloads and take their quota.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable
from typing import Protocol

import numpy as np

from harness.kueue.queues import Kueue


class Preemption(Protocol):
    """What the books ask of Kueue's preemption (harness/kueue/preemption.py: KueuePreemption),
    which reads the books it is handed."""

    def nominate(self, adm: Admission, j: int) -> tuple[int, bool, list[int]] | None:
        """A flavor for job j and the admitted jobs to evict for it, or None."""
        ...

    def issue(self, adm: Admission, victims: list[int]) -> None:
        """The victims give their quota back and wait in their queues again."""
        ...


class Admission:
    """The pending queues and quota books of one set of ClusterQueues. Jobs are numbers;
    `request[j]` is what job j takes of each resource (simulation units), `fits[j, f]`
    whether flavor f's pools can hold it, `queue_of[j]` its ClusterQueue."""

    def __init__(self, kueue: Kueue, request: np.ndarray, fits: np.ndarray, queue_of: np.ndarray,
                 priority: np.ndarray):
        self.k = kueue
        self.request, self.fits, self.queue_of, self.priority = request, fits, queue_of, priority
        n = len(kueue.cluster_queues)
        self.usage = np.zeros_like(kueue.nominal)
        self.lendable = np.minimum(kueue.nominal, kueue.lending_limit)
        self.kept = kueue.nominal - self.lendable  # what a member keeps to itself in its cohort
        self.ceiling = kueue.nominal + kueue.borrowing_limit
        cohort = kueue.cohort
        #: the members of each queue's cohort (itself alone when it has none)
        self.members = [np.flatnonzero(cohort == cohort[c]) if cohort[c] >= 0 else np.array([c])
                        for c in range(n)]
        self.group = np.where(cohort >= 0, cohort, -1 - np.arange(n))  # cohort, or -1 - c alone
        self.pending: list[list[tuple[int, float, int]]] = [[] for _ in range(n)]  # (-priority, ts, job), sorted
        self.inadmissible: list[list[tuple[int, float, int]]] = [[] for _ in range(n)]
        self.flavor = np.full(len(request), -1, np.int64)  # the flavor of an admitted job
        #: Kueue TAS (harness/kueue/tas.py): can flavor f's topology place job j now? (None: yes)
        self.topology_fits: Callable[[int, int], bool] | None = None
        self.queued_ts = np.full(len(request), np.nan)  # the timestamp a job last queued with
        self.admitted_seq = np.full(len(request), -1, np.int64)  # admissions' order (newer: higher)
        self.n_admitted = 0
        #: only admissions numbered below this may be preempted (None: any); see preemption.py
        self.preemptible_before: int | None = None
        #: Kueue's preemption (harness/kueue/preemption.py), when a ClusterQueue preempts
        self.preemption: Preemption | None = None
        self.evicted: list[int] = []  # jobs preempted, in order, until the caller takes them
        #: jobs of equal request share a class: `fit_job` remembers verdicts per class
        self.request_class = np.unique(request, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
        self._fit_memo: dict[tuple[int, int, int], tuple[bool, bool]] = {}
        self._memo_usage = b""  # the usage the memo's verdicts were found on

    # ---- quota ---------------------------------------------------------------------------
    def fit(self, c: int, f: int, q: np.ndarray) -> tuple[bool, bool]:
        """(does q fit queue c's quota of flavor f now, does it borrow to)."""
        k, needed = self.k, q > 0
        if not k.covered[c, f, needed].all():
            return False, False
        use = self.usage[c, f]
        new = use + q
        if k.cluster_queues[c].cohort is None:
            return bool((new <= k.nominal[c, f]).all()), False
        if (new > self.ceiling[c, f]).any():
            return False, False
        m = self.members[c]
        pool = self.lendable[m, f].sum(axis=0)
        drawn = np.maximum(self.usage[m, f] - self.kept[m, f], 0).sum(axis=0)
        more = np.maximum(new - self.kept[c, f], 0) - np.maximum(use - self.kept[c, f], 0)
        return bool((drawn + more <= pool).all()), bool((new > k.nominal[c, f]).any())

    def fit_job(self, j: int, c: int, f: int) -> tuple[bool, bool]:
        """`fit` of job j's request, remembered while the usage stays the same: cycles check
        queued workloads one after another against unchanged books (every set-aside one again
        after each release), many of the same size. The memo is keyed on the usage itself, not
        on who changed it (preemption's trials write it directly), so it cannot go stale."""
        usage = self.usage.tobytes()
        if usage != self._memo_usage:
            self._fit_memo.clear()
            self._memo_usage = usage
        key = (c, f, int(self.request_class[j]))
        verdict = self._fit_memo.get(key)
        if verdict is None:
            verdict = self._fit_memo[key] = self.fit(c, f, self.request[j])
        return verdict

    def assign(self, j: int) -> tuple[int, bool]:
        """The flavor job j would get now (-1: none) and whether it borrows."""
        c = int(self.queue_of[j])
        for f in self.k.cluster_queues[c].flavors:
            if self.fits[j, f]:
                ok, borrows = self.fit_job(j, c, f)
                if ok and self._placeable(j, f):
                    return f, borrows
        return -1, False

    def _placeable(self, j: int, f: int) -> bool:
        return self.topology_fits is None or self.topology_fits(j, f)

    def release(self, j: int) -> None:
        """Job j's quota comes back (it finished or was evicted); its cohort's set-aside
        workloads return to their queues."""
        c, f = int(self.queue_of[j]), int(self.flavor[j])
        self.usage[c, f] -= self.request[j]
        self.flavor[j] = -1
        self.retry_inadmissible(self.members[c])

    def retry_inadmissible(self, queues: np.ndarray) -> None:
        """The set-aside workloads of these ClusterQueues return to their queues."""
        for m in queues.tolist():
            for key in self.inadmissible[m]:
                insort(self.pending[m], key)
            self.inadmissible[m].clear()

    # ---- queues --------------------------------------------------------------------------
    def push(self, j: int, ts: float) -> None:
        """Job j waits in its ClusterQueue, ordered by priority then `ts`."""
        self.queued_ts[j] = ts
        insort(self.pending[int(self.queue_of[j])], (-int(self.priority[j]), float(ts), j))

    def withdraw(self, j: int) -> None:
        """Job j, queued and holding no quota, is gone (a replica scaled in): it leaves its
        ClusterQueue, waiting or set aside."""
        c = int(self.queue_of[j])
        self.pending[c] = [key for key in self.pending[c] if key[2] != j]
        self.inadmissible[c] = [key for key in self.inadmissible[c] if key[2] != j]

    def cycle(self, most: int | None = None) -> tuple[list[tuple[int, int]], bool]:
        """One admission cycle, admitting `most` workloads at most (None: no bound): the
        (job, flavor) admitted, and whether it changed anything. With preemption, a head that
        fits nowhere but can make room evicts its victims (`evicted`) in its turn and is
        admitted on the quota they free, unless its cohort already admitted or preempted in
        this cycle (its victims were found on books that changed since: next cycle)."""
        entries: list[tuple[bool, tuple[int, float, int], int, int, list[int] | None]] = []
        changed = False
        for c, queue in enumerate(self.pending):
            if not queue:
                continue
            j = queue[0][2]
            f, borrows = self.assign(j)
            if f >= 0:
                entries.append((borrows, queue[0], c, f, None))
            elif self.preemption is not None and (found := self.preemption.nominate(self, j)) is not None:
                f, borrows, victims = found
                entries.append((borrows, queue[0], c, f, victims))
            elif not self.k.cluster_queues[c].strict_fifo:
                self.inadmissible[c].append(queue.pop(0))
                changed = True
        admitted: list[tuple[int, int]] = []
        touched: set[int] = set()  # the groups (`group`) that admitted or preempted this cycle
        for _, key, c, f, targets in sorted(entries):
            j = key[2]
            group = int(self.group[c])
            if len(admitted) == most:
                break
            if targets is not None:
                if group in touched:
                    continue
                assert self.preemption is not None
                self.preemption.issue(self, targets)
                changed = True
            if self.fit_job(j, c, f)[0] and self._placeable(j, f):
                self.pending[c].remove(key)  # the head, unless a release this cycle put one before it
                self.usage[c, f] += self.request[j]
                self.flavor[j] = f
                self.admitted_seq[j] = self.n_admitted
                self.n_admitted += 1
                admitted.append((j, f))
                touched.add(group)
        return admitted, changed or bool(admitted)

    def run(self, most: int | None = None) -> list[tuple[int, int]]:
        """Cycles until one changes nothing, or `most` workloads are admitted: every (job,
        flavor) admitted."""
        admitted: list[tuple[int, int]] = []
        while most is None or len(admitted) < most:
            more, changed = self.cycle(None if most is None else most - len(admitted))
            admitted += more
            if not changed:
                break
        return admitted
