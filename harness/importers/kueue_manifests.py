"""Kueue's own objects (ResourceFlavor, ClusterQueue, LocalQueue, Cohort; `kueue.x-k8s.io/v1beta1`
or `v1beta2`, as `kubectl get resourceflavors,clusterqueues,localqueues,cohorts -A -o yaml`
prints them) to the cluster config's `kueue:` section (harness/kueue/queues.py), so an imported
cluster replays behind the same queues and quotas (loop=separate_kueue).

- ResourceFlavor: `spec.nodeLabels` -> the pools whose nodes carry every one of those labels
  (a pool of live nodes: the labels all its nodes share; a NodePool's or node group's: the
  labels its nodes would get); no nodeLabels: every pool. A flavor that matches no pool is
  refused. nodeTaints, tolerations, topologyName, resourceWeights: listed, not read.
- ClusterQueue: one `resourceGroups` entry (a job takes one flavor for all its resources here,
  so several groups are refused); `coveredResources` cpu, memory and nvidia.com/gpu, each
  flavor's `nominalQuota`, `borrowingLimit`, `lendingLimit` (cores, GiB, GPUs), other resources
  listed; the cohort (`spec.cohort` in v1beta1, `spec.cohortName` in v1beta2);
  `queueingStrategy`; `preemption` (withinClusterQueue, reclaimWithinCohort,
  borrowWithinCohort.policy and maxPriorityThreshold). namespaceSelector, flavorFungibility,
  admissionChecks(Strategy), stopPolicy, fairSharing and others: listed, not read.
- LocalQueue: `<namespace>/<name>` -> `spec.clusterQueue`; a pod's `kueue.x-k8s.io/queue-name`
  label names the LocalQueue of its namespace, so the trace's queue becomes `<namespace>/<label>`.
  A pod naming a LocalQueue the input lacks is refused. Pods without the label, which Kueue
  does not manage, go to LocalQueue `default` of a ClusterQueue `UNMANAGED` whose one flavor
  covers every pool with unbounded quota: admitted at once, anywhere (counted).
- Cohort: a name ClusterQueues share (flat cohorts only): its parentName (hierarchical
  cohorts), resourceGroups (cohort quota) and fairSharing are listed, not read.
Every refusal names the file, the object and the field.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from harness.importers.workloads import GPU, NO_QUEUE, QUEUE_LABEL, Obj, get_field, parse_quantity, string_map
from harness.kueue.queues import (
    BORROW_WITHIN_COHORT,
    MAX_QUOTA,
    PRIORITIES,
    RECLAIM_WITHIN_COHORT,
    STRATEGIES,
    WITHIN_CLUSTER_QUEUE,
)

VERSIONS = ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2")
KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort")
#: Kubernetes resource -> (the section's key, the factor from the quantity to its unit)
RESOURCES = {"nvidia.com/gpu": ("gpu", Fraction(1)), "cpu": ("cpu", Fraction(1)),
             "memory": ("memory", Fraction(1, 2**30))}
#: the ClusterQueue and flavor that stand for "not managed by Kueue"
UNMANAGED = "loopbench-unmanaged"
#: spec fields read nowhere, with what the summary says of them
NOT_READ = {
    "ResourceFlavor": ("nodeTaints", "tolerations", "topologyName", "resourceWeights"),
    "ClusterQueue": ("namespaceSelector", "flavorFungibility", "admissionChecks", "admissionChecksStrategy",
                     "stopPolicy", "fairSharing", "admissionScope", "concurrentAdmissionPolicy"),
    "LocalQueue": ("stopPolicy", "fairSharing"),
    "Cohort": ("parentName", "parent", "resourceGroups", "fairSharing"),
}
READ = {"ResourceFlavor": ("nodeLabels",), "ClusterQueue": ("resourceGroups", "cohort", "cohortName",
                                                            "queueingStrategy", "preemption"),
        "LocalQueue": ("clusterQueue",), "Cohort": ()}


def _spec(obj: Obj, ignored: Counter) -> dict:
    """The object's spec, its apiVersion checked; fields not read are counted once per kind."""
    version = get_field(obj, "apiVersion", str)
    if version not in VERSIONS:
        raise obj.refuse("apiVersion", f"{version!r} is not supported (this importer reads {', '.join(VERSIONS)})")
    spec = get_field(obj, "spec", dict, {})
    for key in sorted(set(map(str, spec)) - set(READ[obj.kind])):
        why = "not modelled" if key in NOT_READ[obj.kind] else "unknown field"
        ignored[f"{obj.kind}s' spec.{key}: {why}, not read"] += 1
    return spec


def _amount(obj: Obj, path: str, value, resource: str) -> float:
    """A quota in the section's unit (GPUs, cores, GiB), at most MAX_QUOTA."""
    try:
        q = parse_quantity(value)
    except ValueError:
        raise obj.refuse(path, f"not a Kubernetes quantity: {value!r}") from None
    amount = q * RESOURCES[resource][1]
    if not 0 <= amount <= MAX_QUOTA:
        raise obj.refuse(path, f"must be >= 0 and at most {MAX_QUOTA:,} ({RESOURCES[resource][0]}), got {value!r}")
    return float(amount)


def _choice(obj: Obj, path: str, value, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise obj.refuse(path, f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _flavor_pools(rf: Obj, pool_labels: dict[str, dict[str, str]], ignored: Counter) -> list[str]:
    _spec(rf, ignored)
    wanted = string_map(rf, "spec.nodeLabels")
    pools = [p for p, labels in pool_labels.items() if all(labels.get(k) == v for k, v in wanted.items())]
    if not pools:
        raise rf.refuse("spec.nodeLabels", f"{wanted} match no pool of the imported cluster (no Node, NodePool "
                        "offering or node group template carries them all)")
    return pools


def _preemption(cq: Obj) -> dict:
    at = "spec.preemption"
    p = get_field(cq, at, dict, {})
    out: dict = {}
    for key, name, allowed in (("withinClusterQueue", "within_cluster_queue", WITHIN_CLUSTER_QUEUE),
                               ("reclaimWithinCohort", "reclaim_within_cohort", RECLAIM_WITHIN_COHORT)):
        if key in p:
            out[name] = _choice(cq, f"{at}.{key}", p[key], allowed)
    borrow = get_field(cq, f"{at}.borrowWithinCohort", dict)
    if borrow:
        b: dict = {"policy": _choice(cq, f"{at}.borrowWithinCohort.policy", borrow.get("policy", "Never"),
                               BORROW_WITHIN_COHORT)}
        threshold = borrow.get("maxPriorityThreshold")
        if threshold is not None:
            lo, hi = PRIORITIES
            if not isinstance(threshold, int) or isinstance(threshold, bool) or not lo <= threshold <= hi:
                raise cq.refuse(f"{at}.borrowWithinCohort.maxPriorityThreshold",
                                f"must be a 32-bit integer priority, got {threshold!r}")
            b["max_priority_threshold"] = threshold
        if b["policy"] != "Never" and out.get("reclaim_within_cohort", "Never") == "Never":
            raise cq.refuse(f"{at}.borrowWithinCohort.policy",
                            "needs reclaimWithinCohort other than Never (Kueue's validation)")
        out["borrow_within_cohort"] = b
    return out


def _cluster_queue(cq: Obj, flavors: set[str], ignored: Counter) -> dict:
    spec = _spec(cq, ignored)
    v1beta2 = get_field(cq, "apiVersion", str) == VERSIONS[1]
    key, other = ("cohortName", "cohort") if v1beta2 else ("cohort", "cohortName")
    if other in spec:
        raise cq.refuse(f"spec.{other}", f"not a field of {get_field(cq, 'apiVersion', str)} (its cohort is "
                        f"spec.{key})")
    cohort = get_field(cq, f"spec.{key}", str) or None
    out: dict = {"name": cq.name, "cohort": cohort}
    if "queueingStrategy" in spec:
        out["queueing_strategy"] = _choice(cq, "spec.queueingStrategy", spec["queueingStrategy"], STRATEGIES)
    groups = get_field(cq, "spec.resourceGroups", list, [])
    if len(groups) != 1:
        raise cq.refuse("spec.resourceGroups", f"{len(groups)} resource groups: loopbench reads exactly one "
                        "(a job takes one flavor for all its resources)")
    at = "spec.resourceGroups[0]"
    covered = get_field(cq, f"{at}.coveredResources", list, [])
    if not covered or not all(isinstance(r, str) for r in covered):
        raise cq.refuse(f"{at}.coveredResources", f"a non-empty list of resource names, got {covered!r}")
    for r in covered:
        if r not in RESOURCES:
            ignored[f"ClusterQueues' quota on {r}: not modelled (cpu, memory, {GPU} are)"] += 1
    entries = get_field(cq, f"{at}.flavors", list, [])
    if not entries:
        raise cq.refuse(f"{at}.flavors", "a resource group needs at least one flavor")
    out["flavors"] = []
    for i in range(len(entries)):
        fat = f"{at}.flavors[{i}]"
        name = get_field(cq, f"{fat}.name", str)
        if not name:
            raise cq.refuse(f"{fat}.name", "missing (the ResourceFlavor this quota is of)")
        if name not in flavors:
            raise cq.refuse(f"{fat}.name", f"ResourceFlavor {name!r} is not in the input")
        if any(f["name"] == name for f in out["flavors"]):
            raise cq.refuse(f"{fat}.name", f"flavor {name!r} is listed twice")
        resources = get_field(cq, f"{fat}.resources", list, [])
        names = [r.get("name") if isinstance(r, dict) else None for r in resources]
        if sorted(map(str, names)) != sorted(covered):
            raise cq.refuse(f"{fat}.resources", f"names {names} must be the coveredResources {covered}")
        flavor: dict = {"name": name, "nominal": {}}
        for j, r in enumerate(resources):
            if r["name"] not in RESOURCES:
                continue
            rat, key_ = f"{fat}.resources[{j}]", RESOURCES[r["name"]][0]
            if "nominalQuota" not in r:
                raise cq.refuse(f"{rat}.nominalQuota", "missing")
            flavor["nominal"][key_] = _amount(cq, f"{rat}.nominalQuota", r["nominalQuota"], r["name"])
            for limit, section_key in (("borrowingLimit", "borrowing_limit"), ("lendingLimit", "lending_limit")):
                if r.get(limit) is None:
                    continue
                if cohort is None:
                    raise cq.refuse(f"{rat}.{limit}", f"must be unset when spec.{key} is empty (Kueue's validation)")
                value = _amount(cq, f"{rat}.{limit}", r[limit], r["name"])
                if limit == "lendingLimit" and value > flavor["nominal"][key_]:
                    raise cq.refuse(f"{rat}.{limit}", f"{r[limit]!r} exceeds the nominalQuota {r['nominalQuota']!r}")
                flavor.setdefault(section_key, {})[key_] = value
        out["flavors"].append(flavor)
    preemption = _preemption(cq)
    if preemption:
        out["preemption"] = preemption
    return out


def kueue_section(objs: list[Obj], pool_labels: dict[str, dict[str, str]], ignored: Counter) -> dict | None:
    """The `kueue:` section of the Kueue objects among `objs` (None when there are none); its
    LocalQueues are named `<namespace>/<name>`."""
    by_kind: dict[str, dict[str, Obj]] = {k: {} for k in KINDS}
    for obj in objs:
        if obj.kind in KINDS:
            key = obj.name if obj.kind != "LocalQueue" else f"{obj.namespace}/{obj.name}"
            if key in by_kind[obj.kind]:
                raise obj.refuse("metadata.name", f"defined twice (first in {by_kind[obj.kind][key].file})")
            by_kind[obj.kind][key] = obj
    if not any(by_kind.values()):
        return None
    flavors = [{"name": rf.name, "pools": _flavor_pools(rf, pool_labels, ignored)}
               for rf in by_kind["ResourceFlavor"].values()]
    queues = [_cluster_queue(cq, set(by_kind["ResourceFlavor"]), ignored)
              for cq in by_kind["ClusterQueue"].values()]
    local = []
    for key, lq in by_kind["LocalQueue"].items():
        _spec(lq, ignored)
        target = get_field(lq, "spec.clusterQueue", str)
        if not target:
            raise lq.refuse("spec.clusterQueue", "missing (the ClusterQueue this LocalQueue feeds)")
        if target not in by_kind["ClusterQueue"]:
            raise lq.refuse("spec.clusterQueue", f"ClusterQueue {target!r} is not in the input")
        local.append({"name": key, "cluster_queue": target})
    for cohort in by_kind["Cohort"].values():
        _spec(cohort, ignored)
    return {"resource_flavors": flavors, "cluster_queues": queues, "local_queues": local}


def queue_rows(rows: list[dict], section: dict, pools: list[str], assumed: Counter) -> None:
    """Point each pod row at its LocalQueue (`<namespace>/<label>`), refusing a pod whose label
    names none; pods without the label go to the unmanaged queue, added when one needs it."""
    local = {lq["name"] for lq in section["local_queues"]}
    unmanaged = 0
    for row in rows:
        pod = row["obj"]
        if QUEUE_LABEL not in string_map(pod):
            unmanaged += 1
            continue
        name = f"{pod.namespace}/{row['queue']}"
        if name not in local:
            raise pod.refuse(f'metadata.labels["{QUEUE_LABEL}"]', f"LocalQueue {name} is not in the input")
        row["queue"] = name
    if not unmanaged:
        return
    assumed[f"pods without {QUEUE_LABEL} (Kueue does not manage them): queue {NO_QUEUE}, ClusterQueue {UNMANAGED} "
            "with a flavor of every pool and unbounded quota"] += unmanaged
    section["resource_flavors"].append({"name": UNMANAGED, "pools": list(pools)})
    section["cluster_queues"].append({"name": UNMANAGED, "cohort": None, "flavors": [
        {"name": UNMANAGED, "nominal": {k: MAX_QUOTA for k, _ in RESOURCES.values()}}]})
    section["local_queues"].append({"name": NO_QUEUE, "cluster_queue": UNMANAGED})
