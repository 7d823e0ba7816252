"""A loopbench cluster and trace to the Nodes, Pods and PodGroups `kubectl get -o yaml` prints,
shaped so that `loopbench import kubernetes` (harness/importers/kubernetes.py) reads them back
to the same cluster and trace: a round trip, and a way to hand a scenario to Kubernetes tools.

Every field is written where that importer reads it, with the labels and keys it knows (so
the mapping is its mapping, reversed):
- a Node per slot of every pool (max_size of them), named `<pool>-<i>`; allocatable (and capacity)
  cpu, memory in Mi, `nvidia.com/gpu`; labels: `node.kubernetes.io/instance-type` = the node type
  (the importer names types by it), `nvidia.com/gpu.product` = its GPU model,
  `cloud.google.com/gke-nodepool` = the pool, `topology.kubernetes.io/zone`, `.../block`, and
  `.../rack` = `<pool>-rack-<i // nodes_per_rack>`; the pool's `nvidia.com/gpu` taints.
- a cluster with `autoscaling` is read back with `--autoscaled` (every pool from 0 to max_size),
  one without it as is (min = max = max_size); the summary prints the command.
- a Pod per row: namespace/name from a `<namespace>/<name>` pod_id (else its job's namespace, else
  `default`: the importer's ids then gain it); requests `cpu`, `memory`, whole GPUs as `nvidia.com/gpu` (requests and
  limits); `spec.priority`; the queue as `kueue.x-k8s.io/queue-name` (none for `default`);
  gpu_models as a `nvidia.com/gpu.product` nodeSelector (one) or required nodeAffinity `In`.
- times from the Unix epoch, to the microsecond: creationTimestamp = submit_s, so seconds come
  back bit for bit (an epoch of today would round them to ~0.2 us). A pod with a duration is
  Succeeded, its container terminated from its creation to creation + duration, and carries
  `loopbench.io/duration-s` (the exact seconds, which the importer reads first); one without
  is Running.
- a gang (min_member > 1) or a job with gang_locality is a KEP-4671 PodGroup (`gang.minCount`,
  else `basic`; rack/block as `topology.kubernetes.io/rack|block`); any other job is a batch/v1
  Job named by job_id, the controller ownerReference of its pods.
What the importer cannot read back is not written, or written as Kubernetes says it and counted
once in `lost`: GPU shares (as one whole GPU), partitions (as `nvidia.com/mig-<profile>`, which
the importer leaves out), NVLink/NUMA/NIC claims and domains, committed slots, prices and boot
delays other than the importer's, stock, shortage, minimum billed time, compact placement,
atomic pools, expander priorities, spot, min_size, other taints, Kueue's queues, node types
without a pool.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import yaml

from harness.cluster import FILTER_EFFECTS, GPU_TAINT_KEY, Cluster, Pool
from harness.errors import ConfigError, TraceError
from harness.importers.common import boot_delay, node_price
from harness.importers.kubernetes import INSTANCE_LABEL, POOL_LABELS, PRODUCT_LABEL, ZONE_LABEL
from harness.importers.workloads import DURATION_ANNOTATION, GPU, GROUP_VERSION, NO_QUEUE, QUEUE_LABEL
from harness.node_type import NodeType

POOL_LABEL = POOL_LABELS[0]  # GKE's: one of those the importer reads
BLOCK_LABEL = "topology.kubernetes.io/block"
RACK_LABEL = "topology.kubernetes.io/rack"
LOCALITY_KEYS = {"rack": RACK_LABEL, "block": BLOCK_LABEL}  # the importer reads the key's last part
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NAMESPACE = "default"
#: a DNS-1123 subdomain (Pod, Node, Job and PodGroup names) and label (namespaces)
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


@dataclass
class KubernetesExport:
    """The objects to write and what `import kubernetes` will not give back, for the summary."""

    objects: list[dict]
    cluster: str
    autoscaled: bool
    nodes: int
    pods: int
    jobs: Counter  # "PodGroup" / "Job" -> how many
    lost: Counter = field(default_factory=Counter)  # what the importer cannot read back -> how many
    changed: Counter = field(default_factory=Counter)  # read back, but not as it was -> how many

    def import_command(self, file: str) -> str:
        return (f"loopbench import kubernetes {file}{' --autoscaled' * self.autoscaled} --name {self.cluster} "
                "--out-cluster CLUSTER.yaml --out TRACE.parquet")

    def summary(self, file: str) -> list[str]:
        lines = [f"  nodes {self.nodes:>8,} (autoscaling {'on' if self.autoscaled else 'off'})",
                 f"  pods  {self.pods:>8,} ({self.jobs['PodGroup']:,} PodGroups, {self.jobs['Job']:,} Jobs)"]
        for title, counts in (("not carried (import kubernetes cannot read it back)", self.lost),
                              ("read back changed", self.changed)):
            if counts:
                lines.append(f"  {title}:")
                lines += [f"    {n:>8,}  {why}" for why, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        if not self.lost:
            lines.append("  nothing lost: import kubernetes reads back this cluster and trace")
        lines.append(f"  read it back: {self.import_command(file)}")
        return lines


def timestamp(seconds: float) -> str:
    """RFC 3339 of `seconds` after the Unix epoch, to the microsecond."""
    t = EPOCH + timedelta(microseconds=round(seconds * 1e6))
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond:06d}" if t.microsecond else "") + "Z"


def quantity_cpu(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _label(value: str, where: str) -> str:
    if not LABEL_VALUE.fullmatch(value):
        raise ConfigError(where, f"{value!r} is not a Kubernetes label value (at most 63 letters, digits, "
                          "'-', '_', '.', starting and ending with a letter or digit), which the export writes it as")
    return value


def _nodes(cluster: Cluster, lost: Counter, changed: Counter) -> list[dict]:
    types = {t.name: t for t in cluster.node_types}
    used = [p.node_type for p in cluster.pools if p.max_size]
    for t in cluster.node_types:
        where = f"cluster.node_types[{cluster.type_index(t.name)}]"
        _label(t.name, f"{where}.name")
        if t.gpus:
            _label(t.gpu_model, f"{where}.gpu_model")
        if t.name not in used:
            lost[f"node type {t.name}: no pool has a slot of it, so no Node shows it"] += 1
            continue
        if t.gpus and t.nvlink_domains != 1:
            lost[f"node type {t.name}: nvlink_domains {t.nvlink_domains} (kubectl does not say; read back 1)"] += 1
        if t.gpus and t.numa_domains != 1:
            lost[f"node type {t.name}: numa_domains {t.numa_domains} (kubectl does not say; read back 1)"] += 1
        if t.nic_per_gpu:
            lost[f"node type {t.name}: nic_per_gpu (kubectl does not say)"] += 1
        if t.partition_profiles:
            lost[f"node type {t.name}: partition profiles {', '.join(t.partition_profiles)} (MIG: not read)"] += 1
        if not t.gpus and t.gpu_model:
            lost[f"node type {t.name}: gpu_model {t.gpu_model!r} without GPUs (no product label)"] += 1
    order = list(dict.fromkeys(used))
    if order != [t.name for t in cluster.node_types if t.name in used]:
        changed[f"node types in the order pools first use them: {', '.join(order)}"] += 1
    if cluster.kueue is not None:
        lost["Kueue's queues and quotas (cluster.kueue): no Kueue objects are written"] += 1
    if cluster.devices is not None:
        lost["the DRA section (cluster.dra): no DeviceClasses, ResourceSlices or ResourceClaimTemplates are written, "
             "so the cluster reads back pre-DRA (GPUs as extended resources)"] += 1
    if cluster.shortage != "error" or any(p.shortage != "error" for p in cluster.pools):
        lost["shortage other than error (read back: error)"] += 1
    for key in ("min_billed_s", "compact_rack"):  # the provider's, not Kubernetes'
        if any(getattr(p, key) != getattr(Pool, key) for p in cluster.pools):
            lost[f"{key} other than {getattr(Pool, key)} (read back: {getattr(Pool, key)})"] += 1
    nodes = []
    for i, pool in enumerate(cluster.pools):
        where = f"cluster.pools[{i}]"
        if not DNS_LABEL.fullmatch(pool.name):
            raise ConfigError(f"{where}.name", f"{pool.name!r} is not a Kubernetes name (lowercase letters, digits "
                              "and '-', at most 63), which the export names its nodes after")
        for key in ("zone", "block"):
            _label(getattr(pool, key), f"{where}.{key}")
        t = types[pool.node_type]
        _pool_losses(cluster, pool, t, lost)
        taints = _taints(pool, lost)
        labels = {INSTANCE_LABEL: t.name, POOL_LABEL: pool.name, ZONE_LABEL: pool.zone, BLOCK_LABEL: pool.block}
        if t.gpus:
            labels[PRODUCT_LABEL] = t.gpu_model
        res = {"cpu": quantity_cpu(t.cpu_milli), "memory": f"{t.memory_mib}Mi"}
        if t.gpus:
            res[GPU] = str(t.gpus)
        for k in range(pool.max_size):
            node: dict[str, Any] = {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": f"{pool.name}-{k}",
                             "labels": {**labels, RACK_LABEL: f"{pool.name}-rack-{k // pool.nodes_per_rack}"}},
                "spec": {"taints": taints} if taints else {},
                "status": {"capacity": dict(res), "allocatable": dict(res)}}
            nodes.append(node)
    return nodes


def _pool_losses(cluster: Cluster, pool: Pool, t: NodeType, lost: Counter) -> None:
    """Count what of `pool` the importer sets its own way."""
    name = f"pool {pool.name}"
    if not pool.max_size:
        lost[f"{name}: max_size 0, so no Node shows it"] += 1
        return
    if cluster.autoscaling and pool.min_size:
        lost[f"{name}: min_size {pool.min_size} (read back with --autoscaled: 0)"] += 1
    if not cluster.autoscaling and pool.min_size != pool.max_size:
        lost[f"{name}: min_size {pool.min_size} (autoscaling off: read back min = max = {pool.max_size})"] += 1
    if pool.committed:
        lost[f"{name}: {pool.committed} committed slots and their price (read back 0)"] += 1
    price = node_price(t.gpu_model, t.gpus, t.cpu_milli, t.memory_mib)
    if pool.price_on_demand != price:
        lost[f"{name}: price_on_demand {pool.price_on_demand:g} (read back {price:g}, importers/common.py)"] += 1
    if pool.spot or pool.price_spot is not None:
        lost[f"{name}: spot pricing"] += 1
    delay = boot_delay(t.gpus)
    if (pool.boot_delay.min_s, pool.boot_delay.max_s) != (delay["min_s"], delay["max_s"]):
        lost[f"{name}: boot_delay {pool.boot_delay.min_s:g}-{pool.boot_delay.max_s:g} s (read back "
             f"{delay['min_s']:g}-{delay['max_s']:g} s)"] += 1
    if pool.stock is not None:
        lost[f"{name}: stock {'that varies' if pool.stock_varies else pool.stock} (read back unlimited)"] += 1
    if pool.atomic:
        lost[f"{name}: atomic (all-or-nothing requests; read back off)"] += 1
    if pool.priority:
        lost[f"{name}: expander priority {pool.priority} (read back 0)"] += 1


def _taints(pool: Pool, lost: Counter) -> list[dict]:
    """The pool's taints as a Node's; only GPU NoSchedule/NoExecute ones are read back."""
    out = []
    for taint in pool.taints:
        head, effect = taint.rsplit(":", 1)
        key, _, value = head.partition("=")
        out.append({"key": key, **({"value": value} if value else {}), "effect": effect})
        if key != GPU_TAINT_KEY or effect not in FILTER_EFFECTS:
            lost[f"pool {pool.name}: taint {taint} (only {GPU_TAINT_KEY} NoSchedule/NoExecute are read)"] += 1
    return out


def _name(text: str, file: str, column: str, row: int, namespace: str = NAMESPACE) -> tuple[str, str]:
    """(namespace, name) of an id: `<namespace>/<name>`, else `namespace`."""
    ns, _, name = text.rpartition("/")
    ns = ns or namespace
    if not DNS_LABEL.fullmatch(ns) or not SUBDOMAIN.fullmatch(name):
        raise TraceError(file, f"{text!r} is not a Kubernetes object name ([<namespace>/]<name>, lowercase letters, "
                         "digits, '-' and '.'), which the export names the object by", column=column, row=row)
    return ns, name


def _pods(table: pa.Table, file: str, lost: Counter, changed: Counter) -> tuple[list[dict], Counter]:
    """PodGroups (one per gang or job with a locality), then the Pods in trace order."""
    col = {c: table.column(c).to_pylist() for c in table.column_names}
    rows = range(table.num_rows)
    firsts: dict[str, int] = {}
    for r in rows:
        firsts.setdefault(col["job_id"][r], r)
    groups: list[dict] = []
    kinds: Counter = Counter()
    job_of: dict[str, tuple[str, str, str]] = {}  # job_id -> (namespace, name, kind)
    for job, first in firsts.items():
        ns, name = _name(job, file, "job_id", first)
        min_member, locality = col["min_member"][first], col["gang_locality"][first]  # a job's pods agree (trace.py)
        kind = "PodGroup" if min_member > 1 or locality != "none" else "Job"
        kinds[kind] += 1
        job_of[job] = (ns, name, kind)
        if kind == "PodGroup":
            spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_member}} if min_member > 1
                                    else {"basic": {}}}
            if locality != "none":
                spec["schedulingConstraints"] = {"topology": [{"key": LOCALITY_KEYS[locality]}]}
            groups.append({"apiVersion": GROUP_VERSION, "kind": "PodGroup",
                           "metadata": {"name": name, "namespace": ns,
                                        "creationTimestamp": timestamp(col["submit_s"][first])},
                           "spec": spec})
    pods, seen = [], set()
    for r in rows:
        job_ns, job_name, kind = job_of[col["job_id"][r]]
        ns, name = _name(col["pod_id"][r], file, "pod_id", r, job_ns)
        if ns != job_ns:
            raise TraceError(file, f"pod {col['pod_id'][r]!r} is in namespace {ns!r}, its job "
                             f"{col['job_id'][r]!r} in {job_ns!r}: a job's pods share its namespace", "pod_id", r)
        if (ns, name) in seen:  # ids a/x and x in namespace a
            raise TraceError(file, f"pod {ns}/{name} is named twice", column="pod_id", row=r)
        seen.add((ns, name))
        pods.append(_pod(col, r, ns, name, job_name, kind, lost))
    bare = sum("/" not in col["pod_id"][r] or "/" not in col["job_id"][r] for r in rows)
    if bare:
        changed[f"pods whose pod_id or job_id has no namespace: read back as <namespace>/<id> ({NAMESPACE} "
                "or the job's)"] += bare
    submit = col["submit_s"]
    off = sum(round(s * 1e6) / 1e6 != s for s in submit)
    if off:
        changed["submit times rounded to the microsecond (creationTimestamp)"] += off
    if min(submit) > 0:
        changed[f"submit times shifted by -{min(submit):g} s (the importer starts at the earliest pod)"] += len(submit)
    return groups + pods, kinds


def _pod(col: dict[str, list], r: int, ns: str, name: str, job: str, kind: str, lost: Counter) -> dict:
    """Row r as a Pod of its job (`kind` PodGroup or Job)."""
    gpus, milli, partition = col["gpu_count"][r], col["gpu_milli"][r], col["gpu_partition"][r]
    requests = {"cpu": quantity_cpu(col["cpu_milli"][r]), "memory": f"{col['memory_mib'][r]}Mi"}
    limits = {}
    if partition is not None:
        limits[f"nvidia.com/mig-{partition}"] = "1"
        lost["pods on a GPU partition: written as nvidia.com/mig-<profile>, read back without GPUs"] += 1
    elif gpus:
        limits[GPU] = str(gpus)
        if milli < 1000:
            lost["pods on a GPU share (gpu_milli < 1000): written as one whole nvidia.com/gpu"] += 1
    for c in ("gpus_same_nvlink", "gpus_same_numa", "nic_per_gpu"):
        if col[c][r]:
            lost[f"pods' {c} claims (no Kubernetes field says it)"] += 1
    submit, duration = col["submit_s"][r], col["duration_s"][r]
    meta: dict[str, Any] = {"name": name, "namespace": ns, "creationTimestamp": timestamp(submit)}
    if col["queue"][r] != NO_QUEUE:
        meta["labels"] = {QUEUE_LABEL: col["queue"][r]}
    if kind == "Job":
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "controller": True}]
    if duration is not None:
        meta["annotations"] = {DURATION_ANNOTATION: repr(duration)}
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {
        "requests": {**requests, **limits}, **({"limits": limits} if limits else {})}}], "priority": col["priority"][r]}
    if kind == "PodGroup":
        spec["schedulingGroup"] = {"podGroupName": job}
    models = sorted(col["gpu_models"][r])
    if models and not (gpus or partition is not None):
        lost["pods without GPUs that name gpu_models (the importer reads a GPU pod's only)"] += 1
    elif len(models) == 1:
        spec["nodeSelector"] = {PRODUCT_LABEL: models[0]}
    elif models:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": PRODUCT_LABEL, "operator": "In", "values": models}]}]}}}
    if gpus or partition is not None:  # what ExtendedResourceToleration adds
        spec["tolerations"] = [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    start = timestamp(submit)
    if duration is None:
        status = {"phase": "Running",
                  "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": start}}}]}
    else:
        status = {"phase": "Succeeded", "containerStatuses": [{"name": "main", "state": {"terminated": {
            "exitCode": 0, "startedAt": start, "finishedAt": timestamp(submit + duration)}}}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def export_kubernetes(cluster: Cluster, table: pa.Table, trace_file: str) -> KubernetesExport:
    """The cluster's Nodes and the trace's PodGroups and Pods, with what the importer loses."""
    lost: Counter = Counter()
    changed: Counter = Counter()
    nodes = _nodes(cluster, lost, changed)
    if not nodes:
        raise ConfigError("cluster.pools", "no pool has a slot (max_size 0 everywhere): no Node to export")
    objects, kinds = _pods(table, trace_file, lost, changed)
    return KubernetesExport(nodes + objects, cluster.name, cluster.autoscaling, len(nodes), table.num_rows, kinds,
                            lost, changed)


def manifest_text(objects: list[dict], as_json: bool, head: str = "") -> str:
    """The objects as one `kind: List`, as `kubectl get -o json` or `-o yaml` prints it (YAML
    with `head`, comment lines, first)."""
    doc = {"apiVersion": "v1", "kind": "List", "items": objects, "metadata": {"resourceVersion": ""}}
    if as_json:
        return json.dumps(doc, indent=2) + "\n"
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's, when built with it: 10x faster
    return head + yaml.dump(doc, Dumper=dumper, sort_keys=False, width=110)
