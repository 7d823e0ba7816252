"""Work Kueue can never admit, refused before the replay rather than left waiting, not admitted,
to the horizon (its loop would read as if it did less work than those it is compared with).

On Kueue's empty books (`admission_books`) a job no flavor of its ClusterQueue can take is never
admitted: no pool of its queue's flavors fits its pods, or it asks more than the queue can ever
get of each flavor that fits them (its nominal quota, and in a cohort all it may borrow). Usage
only lowers what a queue can get and preemption at best empties the books again, so that is
certain. A job that fits only by borrowing is not refused: whether it gets in depends on the run.
Only jobs that certainly ask are refused: the trace's and a buffer's placeholders, and a service's
first min_replicas replicas (created at the start); a pod no node type holds is every loop's
refusal on arrival, and one whose pools all repel it no flavor could fix: neither is Kueue's.
"""

from __future__ import annotations

import numpy as np

from harness.cluster import Cluster
from harness.errors import ConfigError
from harness.kueue.admission import Admission
from harness.kueue.queues import RESOURCES, SCALE
from harness.workload import Workload, pools_fit


def refuse_inadmissible(adm: Admission, cluster: Cluster, w: Workload) -> None:
    """A ConfigError naming the ClusterQueue, job, pod shape, why and the fix of the first job
    that can never be admitted (and how many others), if any."""
    never = never_admitted(adm, cluster, w)
    if not never:
        return
    c_of, pod_fits, top = adm.queue_of, pools_fit(cluster, w), reachable(adm)
    texts = {j: _why(adm, cluster, w, pod_fits, top, j) for j in never}
    first = next(iter(texts))
    c, lq = int(c_of[first]), str(w.job_queue[first])
    alike = [j for j, t in texts.items() if t == texts[first] and int(c_of[j]) == c and w.job_queue[j] == lq]
    name = adm.k.cluster_queues[c].name
    jobs = f"job '{w.job_id[first]}'" if len(alike) == 1 else f"{len(alike)} jobs"
    if lq != name:
        jobs += f" of LocalQueue '{lq}'"
    why = texts[first] if len(alike) == 1 else _why(adm, cluster, w, pod_fits, top, first, str(w.job_id[first]))
    rule = f"ClusterQueue '{name}' can never admit {jobs}{why}"
    others = [j for j in texts if j not in alike]
    if others:
        o = others[0]
        which = f"'{w.job_id[o]}' of ClusterQueue '{adm.k.cluster_queues[int(c_of[o])].name}'"
        rule += (f" (1 more job cannot be admitted either: {which})" if len(others) == 1 else
                 f" ({len(others)} more jobs cannot be admitted either, first {which})")
    raise ConfigError(f"cluster.kueue.cluster_queues[{c}]", rule)


def never_admitted(adm: Admission, cluster: Cluster, w: Workload) -> list[int]:
    """The jobs that certainly ask and can never be admitted, Kueue's to fix, in order of arrival."""
    top = reachable(adm)
    listed = np.zeros((len(adm.k.cluster_queues), len(adm.k.flavor_names)), bool)  # the queue lists the flavor
    for c, q in enumerate(adm.k.cluster_queues):
        listed[c, list(q.flavors)] = True
    c_of = adm.queue_of
    ok = (adm.fits & listed[c_of] & (adm.request[:, None, :] <= top[c_of]).all(axis=2)).any(axis=1)
    candidates = np.flatnonzero(~ok & asking(w))
    candidates = candidates[np.argsort(w.job_submit[candidates], kind="stable")].tolist()
    never = [j for j in candidates if adm.assign(j)[0] < 0]  # the books' own verdict
    if not never:
        return never
    pod_fits = pools_fit(cluster, w)  # a pod no pool takes (their taints) no flavor could fix
    return [j for j in never if pod_fits[:, w.job_pods[j]].any(axis=0).all()]


def asking(w: Workload) -> np.ndarray:
    """bool per job: it certainly asks Kueue for admission (see the module's docstring)."""
    sure = w.job_service < 0
    if w.services is not None:
        for s in range(w.services.n):
            sure[w.services.slots(s)[:int(w.services.min_replicas[s])]] = True
    return sure & ~(np.bincount(w.job, weights=w.never_fits, minlength=w.n_jobs) > 0)


def reachable(adm: Admission) -> np.ndarray:
    """[cluster queue, flavor, resource]: the most of each a queue can ever hold of a flavor, as
    `Admission.fit` counts it on empty books (none of what it does not list)."""
    k = adm.k
    lent = np.stack([adm.lendable[m].sum(axis=0) for m in adm.members])  # its cohort's pool
    top = np.where((k.cohort >= 0)[:, None, None], np.minimum(adm.ceiling, adm.kept + lent), k.nominal)
    return np.where(k.covered, top, 0.0)


# ---- the message -------------------------------------------------------------------------------
def _why(adm: Admission, cluster: Cluster, w: Workload, pod_fits: np.ndarray, top: np.ndarray, j: int,
         first: str | None = None) -> str:
    """Why job j is never admitted and what would fix it, to follow "can never admit job 'j'";
    with `first`, to follow "can never admit N jobs" like it."""
    pods = w.job_pods[j]
    c = int(adm.queue_of[j])
    queue = adm.k.cluster_queues[c]
    flavors = [f for f in queue.flavors if adm.fits[j, f]]
    if not flavors:
        return _no_pool(adm, cluster, w, pod_fits, queue.name, list(queue.flavors), pods, j, first)
    return _beyond_quota(adm, cluster, w, top, c, flavors, pods, j, first)


def _no_pool(adm: Admission, cluster: Cluster, w: Workload, pod_fits: np.ndarray, queue: str, flavors: list[int],
             pods: np.ndarray, j: int, first: str | None) -> str:
    k = adm.k
    held = (k.flavor_pools[flavors].astype(np.int64) @ pod_fits[:, pods]) > 0
    p = int(pods[~held.any(axis=0)][0])
    names = ", ".join(k.flavor_names[f] for f in flavors)
    lead, whose = ("", "its") if first is None else (f" (first '{first}')", "their")
    why = f"{lead}: no pool of its flavors ({names}) fits {whose} pod of {pod_text(cluster, w, p)}"
    other = [f for f in range(len(k.flavor_names)) if adm.fits[j, f] and f not in flavors]
    if other:
        fix = " or ".join(f"'{k.flavor_names[f]}' (node type {_types(cluster, k.flavor_pools[f] & pod_fits[:, p])})"
                          for f in other)
        return f"{why}; list flavor {fix} in ClusterQueue '{queue}'"
    every = pod_fits[:, pods].all(axis=1)
    pools = every if every.any() else pod_fits[:, pods].any(axis=1)
    by_type: dict[str, list[str]] = {}
    for i in np.flatnonzero(pools).tolist():
        by_type.setdefault(cluster.pools[i].node_type, []).append(cluster.pools[i].name)
    over = (" or " if every.any() else " and ").join(f"{t} ({', '.join(p)})" for t, p in by_type.items())
    kind = "node type" if len(by_type) == 1 else "node types"
    return f"{why}; add a flavor over pools of {kind} {over} to ClusterQueue '{queue}'"


def _types(cluster: Cluster, pools: np.ndarray) -> str:
    return ", ".join(dict.fromkeys(cluster.pools[i].node_type for i in np.flatnonzero(pools).tolist()))


def _beyond_quota(adm: Admission, cluster: Cluster, w: Workload, top: np.ndarray, c: int, flavors: list[int],
                  pods: np.ndarray, j: int, first: str | None) -> str:
    k, ask = adm.k, adm.request[j]
    short = {f: [r for r in range(len(RESOURCES)) if ask[r] > top[c, f, r]] or [int(np.argmax(ask - top[c, f]))]
             for f in flavors}  # (the tightest, should rounding have hidden it)
    cohort = k.cluster_queues[c].cohort
    gives: list[str] = []
    for f, (r, *_) in short.items():
        if not k.covered[c, f, r]:
            can = f"no {RESOURCES[r]}: the queue does not list it"
        elif cohort is None:
            can = f"{_amount(top[c, f, r], r)}: its nominal quota, no cohort"
        else:
            can = (f"{_amount(top[c, f, r], r)}: its nominal quota {_number(k.nominal[c, f, r], r)} and "
                   f"{_number(top[c, f, r] - k.nominal[c, f, r], r)} borrowed in cohort {cohort}")
        gives.append(f"{k.flavor_names[f]}{' can ever give it' if not gives else ''} ({can})")
    f, r = flavors[0], short[flavors[0]][0]
    res, flavor, need = RESOURCES[r], k.flavor_names[f], _number(ask[r], r)
    if not k.covered[c, f, r]:
        fix = f"list {res} in its nominal quota of flavor {flavor}"
    elif cohort is None:
        fix = f"raise its nominal {res} of flavor {flavor} to at least {need}"
    else:
        fix = (f"raise its nominal {res} of flavor {flavor}, its borrowing limit or what cohort {cohort} lends "
               f"to at least {need}")
    what = ", ".join(_amount(ask[r], r) for r in sorted({rs[0] for rs in short.values()}))
    shape = _pods_text(cluster, w, pods)
    head = f" ({shape}): it asks" if first is None else f" (first '{first}'; {shape} each): each asks"
    return f"{head} {what} in all, more than flavor {' or '.join(gives)}; {fix}"


def _number(x: float, r: int) -> str:
    return f"{x / SCALE[r]:g}"


def _amount(x: float, r: int) -> str:
    n = _number(x, r)
    return {"gpu": f"{n} GPU{'' if n == '1' else 's'}", "cpu": f"{n} cpu", "memory": f"{n} GiB"}[RESOURCES[r]]


def _pods_text(cluster: Cluster, w: Workload, pods: np.ndarray) -> str:
    """'3 pods of 4 GPUs, 1 cpu, 1 GiB', a part per distinct pod shape."""
    counts: dict[str, int] = {}
    for p in pods.tolist():
        t = pod_text(cluster, w, p)
        counts[t] = counts.get(t, 0) + 1
    return " and ".join(f"{n} pod{'' if n == 1 else 's'} of {t}" for t, n in counts.items())


def pod_text(cluster: Cluster, w: Workload, p: int) -> str:
    """A pod's shape as a user reads it: its GPUs (how many, a share or partition, the models it
    accepts, what it needs of them), then its cpu and memory."""
    parts = []
    g = int(w.gpus[p])
    if g:
        if w.profile_bit[p]:
            gpu = f"{g} GPU partition{'' if g == 1 else 's'} {cluster.profiles[int(w.profile_bit[p]).bit_length() - 1]}"
        elif w.milli[p] < 1000:
            gpu = f"{g} GPU share{'' if g == 1 else 's'} of {int(w.milli[p])} milli"
        else:
            gpu = f"{g} GPU{'' if g == 1 else 's'}"
        mask = int(w.model_mask[p])
        needs = [" or ".join(m for i, m in enumerate(cluster.models) if mask >> i & 1)] if mask else []
        needs += [t for flag, t in ((w.nvlink[p], "one NVLink domain"), (w.numa[p], "one NUMA node"),
                                     (w.nic[p], "a NIC per GPU")) if flag]
        parts.append(f"{gpu} ({', '.join(needs)})" if needs else gpu)
    if w.claim is not None and w.claim[p] >= 0 and cluster.devices is not None:
        name = w.claim_sets[int(w.claim[p])][0].name
        if name in cluster.devices.claims:
            parts.append(f"claim {name}")
    parts += [f"{int(w.cpu[p]) / 1000:g} cpu", f"{int(w.mem[p]) / 1024:g} GiB"]
    return ", ".join(parts)
