"""A live cluster, as `kubectl get nodes,pods -A -o json` (or `-o yaml`) prints it, to a
loopbench cluster config and a trace: replay your own fleet and workload.

The input is read as harness/importers/workloads.py reads manifests (YAML or JSON, `kind: List`,
several documents or files; PodGroups, Workloads and PriorityClasses among them are honoured as
there), and each pod's row is built there: requests as kube-scheduler sums them, priority,
queue. What this importer adds:

Nodes -> node types and pools (`status.allocatable`, else `status.capacity`):
- a node type per distinct (cpu, memory, `nvidia.com/gpu` count, GPU product, instance type):
  cpu in millicores and memory in MiB rounded down; named by `node.kubernetes.io/instance-type`,
  else `<product>x<gpus>` or `cpu-<cores>c`, with `-<cpu>m-<mem>Mi` when two types share a name;
  gpu_model is the `nvidia.com/gpu.product` label as written (`gpu-unknown` without it, counted);
  one NVLink and one NUMA domain, no NIC per GPU, no partitions (kubectl does not say).
- a pool per node group (`cloud.google.com/gke-nodepool`, `eks.amazonaws.com/nodegroup`,
  `karpenter.sh/nodepool`, `kubernetes.azure.com/agentpool`; else one per node type), split by
  node type, zone and block when a group spans several (the pool name then gains them);
  zone from `topology.kubernetes.io/zone`, block from `cloud.google.com/gce-topology-block` or
  `topology.kubernetes.io/block`, rack from `cloud.google.com/gce-topology-subblock` or
  `topology.kubernetes.io/rack` (nodes_per_rack: the most nodes of the pool in one rack; without
  rack labels the pool is one rack). Without labels: zone-a, block-a (the Pool defaults).
- size: min = max = the nodes seen, autoscaling off; `autoscaled` makes min 0, max the nodes
  seen, autoscaling on. Prices and boot delays as every importer's (importers/common.py).
- the taint `nvidia.com/gpu[=value]:NoSchedule|NoExecute` becomes the pool's (GPU pods tolerate it);
  other taints, cordons, extended resources other than GPUs: counted as ignored.

Pods -> rows (the pod rows of workloads.py, then):
- job: the KEP-4671 PodGroup of the pod (as workloads.py); else the pod-group annotation or
  label (`scheduling.k8s.io/group-name` of Volcano, `scheduling.x-k8s.io/pod-group` of
  coscheduling): a gang of the pods the input holds (min_member their count, the latest
  creationTimestamp); else the label `jobset.sigs.k8s.io/jobset-name`, else the controller
  ownerReference (Job, ReplicaSet, ...): job_id `<namespace>/<owner>`, min_member 1, submitted at
  the job's earliest creationTimestamp; else a job of its own. Pods of one job must agree on
  priority and queue.
- duration: the `loopbench.io/duration-s` annotation when given; else, for a Succeeded or Failed
  pod, the latest `finishedAt` minus the earliest `startedAt` of its (init) containers'
  `state.terminated` (a finished pod without them, e.g. Evicted, is dropped, counted); a Running
  pod's is unknown: `running_duration_s` (default null: runs to the end of the replay); a
  Pending or Unknown pod's is null.
- gpu_models: a GPU pod's `nvidia.com/gpu.product` nodeSelector or required nodeAffinity `In`
  (one term). Other node selectors and affinities, tolerations (besides the defaults every pod
  gets and nvidia.com/gpu), topology spread, schedulerName, spec.nodeName: counted as ignored:
  the trace cannot restrict a pod to labelled nodes. A nodeSelector every node satisfies
  (`kubernetes.io/os: linux`) restricts nothing and is counted as such.
- DaemonSet pods and mirror (static) pods are dropped, counted: they belong to the nodes.

The cluster's other objects, among the same files (each module's docstring has its mapping):
- Kueue ResourceFlavors, ClusterQueues, LocalQueues, Cohorts -> the `kueue:` section
  (importers/kueue_manifests.py); pods' queues become `<namespace>/<queue-name label>`.
- Karpenter NodePools, with `instance_types` (--instance-types) -> a pool per offering, and the
  loop's disruption settings as Hydra overrides (importers/karpenter_manifests.py).
- the cluster-autoscaler Deployment's `--nodes=MIN:MAX:NAME` flags -> the node group's pool
  sized MIN..MAX (importers/node_groups.py); a Node annotated `loopbench.io/node-template: "true"`
  is a group's template (shape and labels), not a node of the cluster.
- DRA DeviceClasses, ResourceSlices, ResourceClaimTemplates and ResourceClaims -> the `dra:`
  section, checked as `loopbench import dra` checks them (importers/dra.py): a node type gets
  the slices of its first node that publishes any (`spec.nodeName`), and a node of that type
  publishing other devices (or none) is listed in the summary, replayed as that first node;
  a node's GPUs are at least its devices with an `index` attribute (the layer's GPUs). A pod's
  `spec.resourceClaims` (one: the trace holds one claim per pod) names its `claim`, and its
  gpu_count and gpu_milli become the claim's (its share of each GPU, its GPUs on an empty node),
  as the trace's check of a DRA cluster requires.
The overrides that replay the cluster as it ran (loop=separate_kueue, separate_karpenter, ...)
are printed and written at the top of the cluster YAML.
Every refusal names the file, the object (`Kind namespace/name`) and the field path.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import yaml

from harness.cluster import GPU_TAINT_KEY, Cluster
from harness.dra.layer import DeviceLayer, allocation
from harness.errors import ConfigError, TraceError
from harness.importers import dra
from harness.importers.common import ImportResult, boot_delay, node_price
from harness.importers.karpenter_manifests import nodepool_pools, read_instance_types
from harness.importers.kueue_manifests import KINDS as KUEUE_KINDS
from harness.importers.kueue_manifests import kueue_section, queue_rows
from harness.importers.node_groups import NodeGroup, node_groups
from harness.importers.workloads import (
    DURATION_ANNOTATION,
    GPU,
    Manifests,
    Obj,
    check_agreement,
    get_field,
    pod_rows,
    quantities,
    rows_table,
    string_map,
    time_field,
)
from harness.trace import MAX_GPUS_PER_POD, TraceMeta

POOL_LABELS = ("cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "karpenter.sh/nodepool",
               "kubernetes.azure.com/agentpool")
INSTANCE_LABEL = "node.kubernetes.io/instance-type"
PRODUCT_LABEL = "nvidia.com/gpu.product"
ZONE_LABEL = "topology.kubernetes.io/zone"
BLOCK_LABELS = ("cloud.google.com/gce-topology-block", "topology.kubernetes.io/block")
RACK_LABELS = ("cloud.google.com/gce-topology-subblock", "topology.kubernetes.io/rack")
GANG_KEYS = ("scheduling.k8s.io/group-name", "scheduling.x-k8s.io/pod-group")
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
NODE_OWNED = ("DaemonSet", "Node")  # a pod per node, or the kubelet's mirror of a static pod
#: tolerations the DefaultTolerationSeconds admission adds to every pod
DEFAULT_TOLERATIONS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
UNKNOWN_MODEL = "gpu-unknown"
#: marks a Node manifest as a node group's template (its shape and labels), not a node of the cluster
TEMPLATE_ANNOTATION = "loopbench.io/node-template"
#: the most nodes of one NodePool offering when its limits do not bound it lower
NODEPOOL_MAX_NODES = 100


@dataclass
class KubernetesImport:
    """The trace, the cluster config and what was assumed and ignored, for the summary."""

    result: ImportResult
    cluster: dict
    nodes: int
    pods_read: int
    assumed: Counter = field(default_factory=Counter)
    ignored: Counter = field(default_factory=Counter)
    #: what the NodePools, node groups and Kueue objects became, one line each
    mapped: list[str] = field(default_factory=list)
    #: the Hydra overrides that replay the cluster as its autoscaler and admission ran it
    overrides: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        c, r = self.cluster, self.result
        size = ("autoscaling on" if c["autoscaling"] else "fixed size: min = max = the nodes seen, autoscaling off")
        lines = [f"  nodes {self.nodes:>8,} -> {len(c['node_types'])} node types, {len(c['pools'])} pools ({size})"]
        for t in c["node_types"]:
            gpus = f"{t['gpus']} x {t['gpu_model']}, " if t["gpus"] else ""
            n = sum(p["max_size"] for p in c["pools"] if p["node_type"] == t["name"])
            lines.append(f"    {t['name']}: {gpus}{t['cpu_milli']}m CPU, {t['memory_mib']:,} MiB; "
                         f"{n} node{'s' * (n != 1)}")
        jobs = len(set(r.table.column("job_id").to_pylist()))
        lines.append(f"  pods  {self.pods_read:>8,} -> {r.table.num_rows:,} in the trace ({jobs:,} jobs)")
        lines += [f"    {n:>8,}  dropped: {why}" for why, n in r.dropped.most_common()]
        lines += [f"  {line}" for line in self.mapped]
        if self.overrides:
            lines.append(f"  replay with: {' '.join(self.overrides)}")
        for title, counts in (("assumed", self.assumed + r.notes), ("ignored", self.ignored)):
            if counts:
                lines.append(f"  {title}:")
                lines += [f"    {n:>8,}  {why}" for why, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        return lines


def _first(labels: dict[str, str], keys: tuple[str, ...]) -> str | None:
    return next((labels[k] for k in keys if labels.get(k)), None)


@dataclass
class _Node:
    obj: Obj
    shape: tuple[int, int, int, str, str]  # cpu_milli, memory_mib, gpus, gpu model, instance type
    group: str | None
    zone: str
    block: str
    rack: str | None
    taints: tuple[str, ...]
    labels: dict[str, str]
    template: bool  # a node group's template, not a node of the cluster


def _node(obj: Obj, assumed: Counter, ignored: Counter, slice_gpus: int) -> _Node:
    labels = string_map(obj)
    path = "status.allocatable"
    res = get_field(obj, path, dict)
    if not res:
        path, res = "status.capacity", get_field(obj, "status.capacity", dict)
        if not res:
            raise obj.refuse("status.allocatable", "missing, and no status.capacity either "
                             "(kubectl get nodes -o json prints both)")
        assumed["nodes without status.allocatable: their status.capacity taken"] += 1
    q = quantities(obj, path, res)
    cpu_milli, memory_mib = (math.floor(q.get(k, Fraction(0)) * unit) for k, unit in
                             (("cpu", 1000), ("memory", Fraction(1, 2**20))))
    for key, value in (("cpu", cpu_milli), ("memory", memory_mib)):
        if value <= 0:
            raise obj.refuse(f"{path}.{key}", f"missing or zero ({res.get(key)!r}): a node needs some")
    gpus = int(q.get(GPU, 0))
    if slice_gpus > gpus:
        assumed["nodes whose ResourceSlices publish more GPUs (devices with an index) than their allocatable "
                f"{GPU}: the slices' count"] += 1
        gpus = slice_gpus
    if gpus > MAX_GPUS_PER_POD:
        raise obj.refuse(f"{path}.{GPU}", f"{gpus} GPUs: at most {MAX_GPUS_PER_POD} per node")
    for name in sorted(set(q) - {"cpu", "memory", GPU}):
        if q[name] > 0:
            ignored[f"nodes' allocatable {name}: not modelled"] += 1
    model = ""
    if gpus:
        model = labels.get(PRODUCT_LABEL) or UNKNOWN_MODEL
        if model == UNKNOWN_MODEL:
            assumed[f"GPU nodes without the {PRODUCT_LABEL} label: GPU model {UNKNOWN_MODEL}"] += 1
    taints = []
    for i, t in enumerate(get_field(obj, "spec.taints", list, [])):
        at = f"spec.taints[{i}]"
        if not isinstance(t, dict) or not isinstance(t.get("key"), str) or not isinstance(t.get("effect"), str):
            raise obj.refuse(at, f"a taint has a key and an effect, got {t!r}")
        if t["key"] == GPU_TAINT_KEY and t["effect"] in ("NoSchedule", "NoExecute"):
            taint_value = t.get("value")
            taints.append(f"{t['key']}{f'={taint_value}' if taint_value else ''}:{t['effect']}")
        else:
            ignored[f"nodes' taints other than {GPU_TAINT_KEY} (pods tolerate only that one in loopbench)"] += 1
    if get_field(obj, "spec.unschedulable", bool, False):
        ignored["cordoned nodes (spec.unschedulable): in the cluster as schedulable"] += 1
    zone = labels.get(ZONE_LABEL)
    if not zone:
        assumed[f"nodes without the {ZONE_LABEL} label: zone-a"] += 1
    template = string_map(obj, "metadata.annotations").get(TEMPLATE_ANNOTATION) == "true"
    return _Node(obj, (cpu_milli, memory_mib, gpus, model, labels.get(INSTANCE_LABEL, "")), _first(labels, POOL_LABELS),
                 zone or "zone-a", _first(labels, BLOCK_LABELS) or "block-a", _first(labels, RACK_LABELS),
                 tuple(sorted(taints)), labels, template)


def _type_names(shapes: list[tuple[int, int, int, str, str]]) -> dict[tuple, str]:
    def base(s: tuple) -> str:
        cpu, _, gpus, model, instance = s
        return instance or (f"{model}x{gpus}" if gpus else f"cpu-{cpu // 1000}c")

    bases = Counter(base(s) for s in shapes)
    return {s: base(s) if bases[base(s)] == 1 else f"{base(s)}-{s[0]}m-{s[1]}Mi" for s in shapes}


def _cluster(nodes: list[_Node], name: str, autoscaled: bool) -> tuple[dict, dict[str, tuple[str, dict[str, str]]]]:
    """Node types and pools of the nodes, in order of first appearance, and each pool's node
    group and the labels its nodes share (what Kueue flavors match)."""
    names = _type_names(list(dict.fromkeys(n.shape for n in nodes)))
    pools: dict[tuple, list[_Node]] = defaultdict(list)
    for n in nodes:
        pools[(n.group or names[n.shape], names[n.shape], n.zone, n.block)].append(n)
    splits: dict[str, list[set]] = defaultdict(lambda: [set(), set(), set()])
    for group, tname, zone, block in pools:
        for i, part in enumerate((tname, zone, block)):
            splits[group][i].add(part)
    node_types, out, sources = [], [], {}
    for (cpu, mem, gpus, model, _), tname in names.items():
        node_types.append({"name": tname, "cpu_milli": cpu, "memory_mib": mem, "gpus": gpus, "gpu_model": model,
                           "nvlink_domains": 1, "numa_domains": 1})
    for (group, tname, zone, block), members in pools.items():
        parts = [group] + [p for p, seen in zip((tname, zone, block), splits[group], strict=True)
                           if len(seen) > 1 and p != group]
        racks = Counter(n.rack for n in members)
        per_rack = max(racks.values()) if any(r is not None for r in racks) else len(members)
        seen = sum(not n.template for n in members)
        taints = {n.taints for n in members}
        if len(taints) > 1:
            first, other = sorted(taints)[:2]
            odd = next(n for n in members if n.taints == other)
            raise odd.obj.refuse("spec.taints", f"nvidia.com/gpu taint {list(other)} differs from other nodes of pool "
                                 f"{'-'.join(parts)!r} ({list(first)}): a pool has one set of taints")
        cpu, mem, gpus, model, _ = members[0].shape
        pool = {"name": "-".join(parts), "node_type": tname, "zone": zone, "block": block,
                "nodes_per_rack": per_rack, "min_size": 0 if autoscaled else seen, "max_size": seen,
                "price_on_demand": node_price(model, gpus, cpu, mem), "boot_delay": boot_delay(gpus)}
        if members[0].taints:
            pool["taints"] = list(members[0].taints)
        out.append(pool)
        sources[pool["name"]] = (group, dict(set.intersection(*(set(n.labels.items()) for n in members))))
    cluster = {"_target_": "harness.cluster.Cluster", "name": name, "autoscaling": autoscaled,
               "node_types": node_types, "pools": out}
    return cluster, sources


def _run_time(pod: Obj) -> tuple[str, float | None]:
    """The pod's phase and, finished, the time its containers ran (None when it does not say)."""
    phase = get_field(pod, "status.phase", str, "Pending")
    if phase not in PHASES:
        raise pod.refuse("status.phase", f"must be one of {', '.join(PHASES)}, got {phase!r}")
    if phase not in ("Succeeded", "Failed"):
        return phase, None
    starts, ends = [], []
    for key in ("initContainerStatuses", "containerStatuses"):
        for i, _ in enumerate(get_field(pod, f"status.{key}", list, [])):
            at = f"status.{key}[{i}].state.terminated"
            if get_field(pod, at, dict) is None:
                continue
            start, end = time_field(pod, f"{at}.startedAt"), time_field(pod, f"{at}.finishedAt")
            if start is not None and end is not None and end < start:
                raise pod.refuse(f"{at}.finishedAt", "before its startedAt")
            starts += [start] if start is not None else []
            ends += [end] if end is not None else []
    if not starts or not ends:
        return phase, None
    return phase, max(ends) - min(starts)


def _owner(pod: Obj) -> tuple[str, str, bool] | None:
    """(job_id, what names it, is a gang) of a pod outside a PodGroup; None: a job of its own."""
    labels = string_map(pod)
    annotations = get_field(pod, "metadata.annotations", dict, {})
    for key in GANG_KEYS:
        for source, values in (("annotation", annotations), ("label", labels)):
            value = values.get(key)
            if value is not None:
                if not isinstance(value, str) or not value:
                    raise pod.refuse(f'metadata.{source}s["{key}"]', f"expected a pod group name, got {value!r}")
                return f"{pod.namespace}/{value}", f"pod group {pod.namespace}/{value}", True
    if labels.get(JOBSET_LABEL):
        return f"{pod.namespace}/{labels[JOBSET_LABEL]}", f"JobSet {pod.namespace}/{labels[JOBSET_LABEL]}", False
    refs = _owner_refs(pod)
    if not refs:
        return None
    kind, name = next(((k, n) for k, n, c in refs if c), refs[0][:2])
    return f"{pod.namespace}/{name}", f"{kind} {pod.namespace}/{name}", False


def _owner_refs(pod: Obj) -> list[tuple[str, str, bool]]:
    out = []
    for i, ref in enumerate(get_field(pod, "metadata.ownerReferences", list, [])):
        for key in ("kind", "name"):
            value = ref.get(key) if isinstance(ref, dict) else None
            if not isinstance(value, str) or not value:
                raise pod.refuse(f"metadata.ownerReferences[{i}].{key}", f"missing or not a string ({ref!r})")
        out.append((ref["kind"], ref["name"], ref.get("controller") is True))
    return out


def _gpu_models(pod: Obj, gpus: int, every: dict[str, set[str]], ignored: Counter, assumed: Counter) -> list[str]:
    """The GPU models a pod's node selection allows (empty: any), counting what is not read."""
    models: set[str] | None = None
    for key, value in string_map(pod, "spec.nodeSelector").items():
        if key == PRODUCT_LABEL and gpus:
            models = {value} if models is None else models & {value}
        elif every.get(key) == {value}:
            assumed["pods' nodeSelector terms every node satisfies: no restriction"] += 1
        else:
            ignored[f"pods' nodeSelector on {key} (the trace cannot restrict a pod to labelled nodes)"] += 1
    affinity = get_field(pod, "spec.affinity", dict, {})
    for kind in sorted(set(affinity) - {"nodeAffinity"}):
        ignored[f"pods' affinity.{kind}"] += 1
    node = get_field(pod, "spec.affinity.nodeAffinity", dict, {})
    if node.get("preferredDuringSchedulingIgnoredDuringExecution"):
        ignored["pods' preferred nodeAffinity"] += 1
    at = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    terms = get_field(pod, at, list, [])
    if len(terms) > 1:
        ignored["pods' required nodeAffinity with several terms"] += 1
    elif terms:
        for j, e in enumerate(get_field(pod, f"{at}[0].matchExpressions", list, [])):
            if not isinstance(e, dict) or not isinstance(e.get("key"), str):
                raise pod.refuse(f"{at}[0].matchExpressions[{j}]", f"expected {{key, operator, values}}, got {e!r}")
            values = e.get("values") or []
            if e["key"] == PRODUCT_LABEL and e.get("operator") == "In" and gpus and isinstance(values, list):
                models = set(map(str, values)) if models is None else models & set(map(str, values))
            else:
                ignored[f"pods' required nodeAffinity on {e['key']} {e.get('operator')}"] += 1
        if get_field(pod, f"{at}[0].matchFields", list):
            ignored["pods' required nodeAffinity matchFields"] += 1
    if models is not None and not models:
        raise pod.refuse("spec.affinity", f"its {PRODUCT_LABEL} selector and affinity allow no GPU model together")
    return sorted(models or ())


def _ignored_fields(pod: Obj, ignored: Counter) -> None:
    for i, t in enumerate(get_field(pod, "spec.tolerations", list, [])):
        if not isinstance(t, dict):
            raise pod.refuse(f"spec.tolerations[{i}]", f"expected a toleration (a mapping), got {t!r}")
        if t.get("key") not in DEFAULT_TOLERATIONS | {GPU_TAINT_KEY}:
            ignored[f"pods' tolerations other than {GPU_TAINT_KEY} and the defaults"] += 1
            break
    if get_field(pod, "spec.topologySpreadConstraints", list):
        ignored["pods' topologySpreadConstraints"] += 1
    if get_field(pod, "spec.schedulerName", str, "default-scheduler") != "default-scheduler":
        ignored["pods' schedulerName other than default-scheduler"] += 1
    if get_field(pod, "spec.nodeName", str):
        ignored["pods' spec.nodeName (the replay places every pod itself)"] += 1


def read_kubernetes(paths: list[str], *, running_duration_s: float | None = None, autoscaled: bool = False,
                    name: str | None = None, instance_types: str | None = None,
                    nodepool_max_nodes: int = NODEPOOL_MAX_NODES) -> KubernetesImport:
    """Nodes and pods of `paths` (one input) to a cluster config and a canonical trace; with
    them, Kueue objects, Karpenter NodePools (priced by the `instance_types` list) and
    Cluster Autoscaler's node groups."""
    paths = [str(p) for p in paths]
    inp = Manifests(paths)
    assumed: Counter = Counter()
    ignored: Counter = Counter()
    nodes: dict[str, _Node] = {}
    nodepools: list[Obj] = []
    groups: list[NodeGroup] = []
    devices = dra.read_objects(paths)
    for obj in inp.others:
        if dra.is_dra(obj):
            continue
        if obj.kind == "Node":
            if obj.name in nodes:
                raise obj.refuse("metadata.name", f"defined twice (first in {nodes[obj.name].obj.file})")
            nodes[obj.name] = _node(obj, assumed, ignored, _slice_gpus(devices.nodes.get(obj.name, [])))
        elif obj.kind == "NodePool":
            nodepools.append(obj)
        elif obj.kind == "Deployment" and (found := node_groups(obj, ignored)):
            groups += found
        elif obj.kind not in KUEUE_KINDS:
            ignored[f"{obj.kind} objects (not a kind this importer reads)"] += 1
    if not nodes:
        raise TraceError(", ".join(paths), "no Node objects in the input (kubectl get nodes,pods -A -o json)")
    cluster, sources = _cluster(list(nodes.values()), name or Path(paths[0]).stem, autoscaled)
    pool_labels = {p: labels for p, (_, labels) in sources.items()}
    mapped: list[str] = []
    if devices.classes or devices.nodes or devices.claims:
        cluster["dra"] = _dra_section(devices, nodes, mapped)
    overrides: list[str] = []
    for g in groups:
        _apply_group(g, cluster, sources, assumed)
        mapped.append(f"node group {g.name} (Cluster Autoscaler --nodes): pool {g.name}, {g.min_size} to "
                      f"{g.max_size} nodes")
    if instance_types is not None and not nodepools:
        raise ConfigError("--instance-types", "given, but the input holds no NodePool to price")
    if nodepools:
        if instance_types is None:
            raise nodepools[0].refuse("spec.template.spec.requirements", "a NodePool's offerings need the "
                                      "instance-type list (--instance-types FILE)")
        shapes = {t["name"]: (t["cpu_milli"], t["memory_mib"], t["gpus"], t["gpu_model"])
                  for t in cluster["node_types"]}
        kp = nodepool_pools(nodepools, read_instance_types(instance_types), shapes, nodepool_max_nodes,
                            ignored, assumed)
        clash = sorted({p["name"] for p in kp.pools} & {p["name"] for p in cluster["pools"]})
        if clash:
            raise nodepools[0].refuse("metadata.name", f"its offering pool {clash[0]!r} is also a pool of the nodes")
        cluster["node_types"] += kp.node_types
        cluster["pools"] += kp.pools
        cluster["autoscaling"] = True
        pool_labels.update(kp.labels)
        overrides = kp.overrides
        mapped.append(f"NodePools {len(nodepools):>5,} -> {len(kp.pools)} offering pools "
                      f"({', '.join(np_.name for np_ in nodepools)})")
    if groups:
        cluster["autoscaling"] = True
        overrides = overrides or ["loop=separate"]
    section = kueue_section(inp.others, pool_labels, ignored)
    every: dict[str, set[str]] = defaultdict(set)
    for key in {k for n in nodes.values() for k in string_map(n.obj)}:
        every[key] = {string_map(n.obj).get(key, "") for n in nodes.values()}
    dropped: Counter = Counter()
    pods, runs = [], {}
    for pod in inp.pods:
        kinds = {k for k, _, _ in _owner_refs(pod)}
        if kinds & set(NODE_OWNED):
            dropped["DaemonSet and mirror (static) pods: they belong to the nodes"] += 1
            continue
        phase, ran = _run_time(pod)
        if phase in ("Succeeded", "Failed") and ran is None and \
                DURATION_ANNOTATION not in get_field(pod, "metadata.annotations", dict, {}):
            dropped[f"{phase} pods without their containers' startedAt and finishedAt (e.g. Evicted)"] += 1
            continue
        pods.append(pod)
        runs[f"{pod.namespace}/{pod.name}"] = (phase, ran)
    notes: Counter = Counter()
    rows = pod_rows(inp, pods, notes)
    jobs: dict[str, list[dict]] = defaultdict(list)
    what: dict[str, tuple[str, bool]] = {}
    for row in rows:
        pod = row["obj"]
        phase, ran = runs[row["pod_id"]]
        if row["duration_s"] is None:
            if phase == "Running":
                row["duration_s"] = running_duration_s
                assumed["Running pods: run time unknown, " + (
                    f"{running_duration_s:g} s (--running-duration-s)" if running_duration_s is not None
                    else "run to the end of the replay (--running-duration-s S to give one)")] += 1
            elif ran is not None:
                row["duration_s"] = ran
                if phase == "Failed":
                    assumed["Failed pods: replayed as running their time, then done"] += 1
            else:
                assumed[f"{phase} pods without {DURATION_ANNOTATION}: run to the end of the replay"] += 1
        row["gpu_models"] = _gpu_models(pod, row["gpu_count"], every, ignored, assumed)
        row["claim"], row["claim_at"] = _claim_of(pod, devices)
        _ignored_fields(pod, ignored)
        owner = None if row["grouped"] else _owner(pod)
        if owner is not None:
            jobs[owner[0]].append(row)
            what[owner[0]] = owner[1:]
    for job_id, members in jobs.items():
        label, gang = what[job_id]
        check_agreement(members, label)
        created = [m["created"] for m in members if m["created"] is not None]
        when = (max if gang else min)(created) if created else None
        moved = sum(m["created"] != when for m in members)
        if moved:
            notes["pods of a gang (pod-group label) submitted at its latest creationTimestamp" if gang else
                  "pods of a Job, JobSet or other owner submitted at its earliest creationTimestamp"] += moved
        if gang:
            notes["pod-group gangs: min_member = the pods the input holds"] += len(members)
        for m in members:
            m.update(job_id=job_id, created=when, min_member=len(members) if gang else 1,
                     priority=members[0]["priority"])
    if section is not None:
        queue_rows(rows, section, [p["name"] for p in cluster["pools"]], assumed)
        cluster["kueue"] = section
        mapped.append(f"kueue: {len(section['resource_flavors'])} ResourceFlavors, "
                      f"{len(section['cluster_queues'])} ClusterQueues, {len(section['local_queues'])} LocalQueues")
        if overrides[:1] == ["loop=separate_karpenter"]:
            ignored["Kueue with Karpenter: no bundled loop runs both (separate_kueue wraps Cluster Autoscaler); "
                    "the overrides replay Karpenter without admission"] += 1
        else:
            overrides = ["loop=separate_kueue"]
    built = Cluster(**{k: v for k, v in cluster.items() if k != "_target_"})  # refuse what a replay could not load
    if built.devices is not None:
        _claim_columns(rows, built.devices, notes)
    models = {t["gpu_model"] for t in cluster["node_types"]}
    absent = sum(bool(r["gpu_models"]) and not set(r["gpu_models"]) & models for r in rows)
    if absent:
        notes["GPU pods asking for a model no node has: they never start"] += absent
    table, origin = rows_table(rows, paths, notes)
    names = ", ".join(Path(p).name for p in paths)
    meta = TraceMeta(source=f"Kubernetes cluster {names}", licence="the cluster owner's", time_origin=origin,
                     description="one pod per Pod object; jobs by PodGroup, pod group, JobSet or owner; "
                     "see harness/importers/kubernetes.py")
    result = ImportResult(table, meta, "pods", len(inp.pods), dropped, notes)
    live = sum(not n.template for n in nodes.values())
    return KubernetesImport(result, cluster, live, len(inp.pods), assumed, ignored, mapped, overrides)


def _apply_group(g: NodeGroup, cluster: dict, sources: dict[str, tuple[str, dict[str, str]]],
                 assumed: Counter) -> None:
    """Size the pool of node group `g` as its `--nodes` flag says (a replay starts it at MIN)."""
    pools = [p for p in cluster["pools"] if sources[p["name"]][0] == g.name]
    if not pools:
        raise g.obj.refuse(g.path, f"node group {g.name!r} has no Node in the input (a node labelled "
                           f"{' or '.join(POOL_LABELS)} = {g.name}, or a template Node annotated "
                           f'{TEMPLATE_ANNOTATION}: "true")')
    if len(pools) > 1:
        raise g.obj.refuse(g.path, f"node group {g.name!r}'s nodes make {len(pools)} pools "
                           f"({', '.join(p['name'] for p in pools)}): a node group's nodes share one node type, "
                           "zone and block")
    if pools[0]["max_size"] != g.min_size:
        assumed["node groups: the replay starts each at its --nodes MIN, not at the nodes seen"] += 1
    pools[0].update(min_size=g.min_size, max_size=g.max_size)  # named by the group: it spans one pool


def _slice_gpus(items: list) -> int:
    """The GPUs a node's slices publish as the DRA layer counts them: its devices with an
    integer `index` attribute, numbered from 0."""
    index = [d.attributes.get(f"{s.driver}/index") for _, s in items for d in s.devices]
    return max([i + 1 for i in index if isinstance(i, int) and not isinstance(i, bool)], default=0)


def _dra_section(devices: dra.DraInput, nodes: dict[str, _Node], mapped: list[str]) -> dict:
    """The cluster's `dra:` section: each node type the slices of its first node that publishes
    any; a node of the type publishing other devices is listed, not refused (a replay gives
    every node of a type the same devices)."""
    for name, items in devices.nodes.items():
        if name not in nodes:
            obj = items[0][0]
            raise dra.refuse(obj, "spec.nodeName", f"node {name!r} is not a Node of the input")
    live = [n for n in nodes.values() if not n.template]
    names = _type_names(list(dict.fromkeys(n.shape for n in nodes.values())))
    first: dict[str, str] = {}
    for n in live:
        if devices.nodes.get(n.obj.name):
            first.setdefault(names[n.shape], n.obj.name)
    for n in live:
        tname = names[n.shape]
        if tname not in first or n.obj.name == first[tname]:
            continue
        here, there = devices.nodes.get(n.obj.name, []), devices.nodes[first[tname]]
        if dra.published_by(here) != dra.published_by(there):
            why = dra.first_difference([s for _, s in here], [s for _, s in there]) if here else "no ResourceSlice"
            mapped.append(f"dra: node {n.obj.name} of type {tname} publishes other devices than node "
                          f"{first[tname]} ({why}): replayed with {first[tname]}'s")
    section = devices.document()["dra"]
    section["node_types"] = {t: [o.body["spec"] for o, _ in devices.nodes[node]] for t, node in first.items()}
    mapped.append(f"dra: {len(devices.classes)} DeviceClasses, the ResourceSlices of node types "
                  f"{', '.join(first) or 'none'}, {len(devices.claims)} claims ({devices.templates} from "
                  "ResourceClaimTemplates)")
    return section


def _claim_of(pod: Obj, devices: dra.DraInput) -> tuple[str | None, str | None]:
    """The claim a pod names (the trace holds one per pod) and the field that names it."""
    entries = get_field(pod, "spec.resourceClaims", list, [])
    if not entries:
        return None, None
    if len(entries) > 1:
        raise pod.refuse("spec.resourceClaims", f"{len(entries)} claims: the trace holds one claim per pod")
    for key in ("resourceClaimTemplateName", "resourceClaimName"):
        at = f"spec.resourceClaims[0].{key}"
        value = get_field(pod, at, str)
        if value is None:
            continue
        if value not in devices.claims:
            known = ", ".join(sorted(devices.claims)) or "none"
            raise pod.refuse(at, f"no ResourceClaimTemplate or ResourceClaim {value!r} in the input (given: {known})")
        return value, at
    raise pod.refuse("spec.resourceClaims[0]", "names neither a resourceClaimTemplateName nor a resourceClaimName")


def _claim_columns(rows: list[dict], layer: DeviceLayer, notes: Counter) -> None:
    """Each claimed row's gpu_count and gpu_milli as its claim takes them: the share of each
    GPU it allocates and, of whole GPUs, how many an empty node allocates; what the columns
    cannot say (GPUs of different shares, whole GPUs no node type holds) refused by pod."""
    cache: dict[str, tuple[int, int] | str] = {}
    for row in rows:
        name, at = row["claim"], row.pop("claim_at")
        if name is None:
            continue
        if name not in cache:
            cache[name] = _columns_of(layer, name)
        got = cache[name]
        if isinstance(got, str):
            raise row["obj"].refuse(at, got)
        if row["gpu_count"] and (row["gpu_count"], row["gpu_milli"]) != got:
            notes[f"pods asking for {GPU} beside a claim: the claim's GPUs in the trace"] += 1
        row["gpu_count"], row["gpu_milli"] = got


def _columns_of(layer: DeviceLayer, name: str) -> tuple[int, int] | str:
    """(gpu_count, gpu_milli) of claim `name`, else why the columns cannot hold it."""
    claims = (layer.claims[name],)
    try:
        milli = layer.gpu_milli(claims, name)
    except ConfigError as exc:
        return f"claim {name!r}: {exc.rule}"
    if milli < 1000:
        return (1 if milli else 0), milli
    fits = np.flatnonzero(layer.fits_empty(claims))
    if not len(fits):
        return f"claim {name!r} takes whole GPUs, but no node type of the input can allocate it: how many is unknown"
    arrays = layer.arrays(1)
    layer.reset(*arrays, np.zeros(1, np.int64), 0, int(fits[0]))
    return len(allocation(layer, arrays, int(fits[0]), claims, 0)), milli


def cluster_yaml(cluster: dict, head: str) -> str:
    """The cluster config as YAML, `head` (comment lines) first."""
    return head + yaml.safe_dump(cluster, sort_keys=False, default_flow_style=None, width=110)
