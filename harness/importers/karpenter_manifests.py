"""Karpenter NodePools (`karpenter.sh/v1`) and a list of the instance types the cloud offers, to
the pools the Karpenter-like loop buys from (loop=separate_karpenter) and its settings.

A NodePool names no shapes or prices (its cloud provider knows them), so the user gives them
in an instance-type list, YAML or JSON (`--instance-types FILE`):

    instance_types:
      - name: p5.48xlarge            # node.kubernetes.io/instance-type
        cpu: 191450m                 # what a node offers pods (allocatable), a Kubernetes quantity
        memory: 1900Gi               # a Kubernetes quantity
        gpus: 8                      # nvidia.com/gpu (absent: 0)
        gpu_model: H100              # its nvidia.com/gpu.product label (needed with gpus)
        zones: [us-east-1a]          # topology.kubernetes.io/zone (absent: [zone-a])
        prices: {on-demand: 98.32, spot: 39.5}   # USD per node-hour, per capacity type offered
        labels: {karpenter.k8s.aws/instance-family: p5}   # more labels requirements may name

Each (instance type, capacity type, zone) a NodePool's requirements allow is an offering, and
an offering is a pool `<nodepool>-<type>-<capacity type>-<zone>`: min 0; max the most nodes of
it the NodePool's `limits` (cpu, memory, nvidia.com/gpu) allow, at most `max_nodes` (the
limit is per offering here, not summed over the NodePool: counted); spot offerings are spot
pools. Requirements (In, NotIn, Exists, DoesNotExist, Gt, Lt) are matched against an
offering's labels: instance-type, `karpenter.sh/capacity-type` (on-demand when no requirement
names it, as Karpenter defaults), zone, `karpenter.sh/nodepool`, the GPU product, the type's
`labels` and the template's `metadata.labels`; a requirement on a key none of them has does not
restrict (Karpenter labels its nodes with it: an `In` of one value becomes a pool label, which
Kueue flavors may match); `minValues` is listed. The template's `nvidia.com/gpu` taints are the
pools'; other taints, startupTaints, expireAfter, nodeClassRef, kubelet: listed. `weight` is
each pool's `priority` (Cluster Autoscaler's priority expander reads it; the Karpenter-like
loop buys the cheapest offering of all NodePools as one). `disruption` (of the heaviest
NodePool; others differing are listed) becomes loop overrides: consolidationPolicy ->
`consolidate_underutilized`, consolidateAfter -> `consolidate_after_s`, the budgets' least
`nodes` percentage without a schedule -> `budget_nodes` (counts, schedules, reasons: listed).
Every refusal names the file, the object (or the list entry) and the field.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import yaml

from harness.cluster import FILTER_EFFECTS, GPU_TAINT_KEY, MAX_POOL_NODES, MAX_PRICE
from harness.errors import TraceError
from harness.importers.common import boot_delay
from harness.importers.workloads import GPU, Obj, get_field, parse_quantity, string_map
from harness.trace import MAX_CPU_MILLI, MAX_GPUS_PER_POD, MAX_MEMORY_MIB

VERSION = "karpenter.sh/v1"
INSTANCE_LABEL = "node.kubernetes.io/instance-type"
CAPACITY_LABEL = "karpenter.sh/capacity-type"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
ZONE_LABEL = "topology.kubernetes.io/zone"
PRODUCT_LABEL = "nvidia.com/gpu.product"
CAPACITY_TYPES = ("on-demand", "spot")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
POLICIES = {"WhenEmptyOrUnderutilized": "true", "WhenEmpty": "false"}
#: Karpenter's default disruption (v1): what the loop config already has
DEFAULT_DISRUPTION = ("WhenEmptyOrUnderutilized", 0.0, 0.1)
TYPE_KEYS = ("name", "cpu", "memory", "gpus", "gpu_model", "zones", "prices", "labels")
_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


@dataclass(frozen=True)
class InstanceType:
    """One entry of the instance-type list."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    gpu_model: str
    zones: tuple[str, ...]
    prices: dict[str, float]
    labels: dict[str, str]


def read_instance_types(path: str) -> list[InstanceType]:
    """The instance-type list at `path`, each entry checked."""
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise TraceError(path, f"cannot read ({exc.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise TraceError(path, f"not valid YAML or JSON ({str(exc).splitlines()[0]})") from None
    entries = doc.get("instance_types") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise TraceError(path, "expected a mapping with a non-empty list `instance_types:` (see "
                         "harness/importers/karpenter_manifests.py)")
    out: list[InstanceType] = []
    for i, e in enumerate(entries):
        out.append(_instance_type(path, i, e))
        if out[-1].name in {t.name for t in out[:-1]}:
            raise TraceError(path, f"instance_types[{i}] ({out[-1].name}), field name: listed twice")
    return out


def _instance_type(path: str, i: int, e) -> InstanceType:
    name = e.get("name") if isinstance(e, dict) else None

    def refuse(key: str, rule: str) -> TraceError:
        return TraceError(path, f"instance_types[{i}]{f' ({name})' if isinstance(name, str) else ''}, "
                          f"field {key}: {rule}")

    if not isinstance(e, dict):
        raise TraceError(path, f"instance_types[{i}]: expected a mapping, got {e!r}")
    unknown = sorted(set(map(str, e)) - set(TYPE_KEYS))
    if unknown:
        raise refuse(unknown[0], f"unknown key (known: {', '.join(TYPE_KEYS)})")
    if not isinstance(name, str) or not name:
        raise refuse("name", "missing or not a string")
    shape = []
    for key, unit, most in (("cpu", 1000, MAX_CPU_MILLI), ("memory", Fraction(1, 2**20), MAX_MEMORY_MIB)):
        try:
            value = math.floor(parse_quantity(e.get(key)) * unit)
        except ValueError:
            raise refuse(key, f"not a Kubernetes quantity: {e.get(key)!r}") from None
        if not 0 < value <= most:
            raise refuse(key, f"must be more than 0 and a node's at most, got {e.get(key)!r}")
        shape.append(value)
    gpus = e.get("gpus", 0)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or not 0 <= gpus <= MAX_GPUS_PER_POD:
        raise refuse("gpus", f"must be an integer in [0, {MAX_GPUS_PER_POD}], got {gpus!r}")
    model = e.get("gpu_model", "")
    if gpus and (not isinstance(model, str) or not model):
        raise refuse("gpu_model", "a type with GPUs needs its GPU model (the nvidia.com/gpu.product label)")
    zones = e.get("zones", ["zone-a"])
    if not isinstance(zones, list) or not zones or not all(isinstance(z, str) and z for z in zones):
        raise refuse("zones", f"expected a non-empty list of zone names, got {zones!r}")
    prices = e.get("prices")
    if not isinstance(prices, dict) or not prices:
        raise refuse("prices", f"expected {{capacity type: USD per node-hour}}, got {prices!r}")
    for ct, price in prices.items():
        if ct not in CAPACITY_TYPES:
            raise refuse(f"prices.{ct}", f"unknown capacity type (known: {', '.join(CAPACITY_TYPES)})")
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 <= price <= MAX_PRICE:
            raise refuse(f"prices.{ct}", f"must be USD per node-hour in [0, {MAX_PRICE:,}], got {price!r}")
    labels = e.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise refuse("labels", f"expected a mapping of label keys to strings, got {labels!r}")
    return InstanceType(name, shape[0], shape[1], gpus, model if gpus else "", tuple(zones),
                        {k: float(v) for k, v in prices.items()}, dict(labels))


def go_duration(obj: Obj, path: str, text) -> float:
    """Seconds of a Go duration (`30s`, `1h30m`)."""
    if not isinstance(text, str) or not text or _DURATION.sub("", text):
        raise obj.refuse(path, f"expected a duration such as 30s or 1h30m, got {text!r}")
    return sum(float(n) * _UNIT_S[u] for n, u in _DURATION.findall(text))


def _requirements(np_: Obj, ignored: Counter) -> list[tuple[str, str, list[str]]]:
    at = "spec.template.spec.requirements"
    out = []
    for i, r in enumerate(get_field(np_, at, list, [])):
        rat = f"{at}[{i}]"
        if not isinstance(r, dict) or not isinstance(r.get("key"), str) or not r["key"]:
            raise np_.refuse(f"{rat}.key", f"a requirement has a key, got {r!r}")
        op = r.get("operator")
        if op not in OPERATORS:
            raise np_.refuse(f"{rat}.operator", f"must be one of {', '.join(OPERATORS)}, got {op!r}")
        values = r.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise np_.refuse(f"{rat}.values", f"expected a list of strings, got {values!r}")
        if op == "In" and not values:
            raise np_.refuse(f"{rat}.values", "In needs at least one value")
        if op in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
            raise np_.refuse(f"{rat}.values", f"{op} needs one integer value, got {values!r}")
        if "minValues" in r:
            ignored["NodePools' requirements minValues: not modelled"] += 1
        out.append((r["key"], op, values))
    return out


def _allows(labels: dict[str, str], key: str, op: str, values: list[str]) -> bool:
    value = labels.get(key)
    if op in ("Exists", "DoesNotExist"):
        return (value is not None) == (op == "Exists")
    if op in ("In", "NotIn"):
        return (value in values) == (op == "In")
    if value is None or not value.lstrip("-").isdigit():
        return False
    return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])


@dataclass
class KarpenterPools:
    """What the NodePools add: node types, pools with the labels their nodes would carry, the
    loop's settings as Hydra overrides."""

    node_types: list[dict] = field(default_factory=list)
    pools: list[dict] = field(default_factory=list)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)


def _limit_nodes(np_: Obj, t: InstanceType, max_nodes: int, ignored: Counter, assumed: Counter) -> int:
    """The most nodes of type `t` the NodePool's limits allow, at most `max_nodes`."""
    limits = get_field(np_, "spec.limits", dict, {})
    per_node = {"cpu": Fraction(t.cpu_milli, 1000), "memory": Fraction(t.memory_mib * 2**20), GPU: Fraction(t.gpus)}
    most = max_nodes
    for key, value in limits.items():
        if key not in per_node:
            ignored[f"NodePools' limits on {key}: not modelled"] += 1
            continue
        try:
            limit = parse_quantity(value)
        except ValueError:
            raise np_.refuse(f"spec.limits.{key}", f"not a Kubernetes quantity: {value!r}") from None
        if limit < 0:
            raise np_.refuse(f"spec.limits.{key}", f"must be >= 0, got {value!r}")
        if per_node[key]:
            most = min(most, math.floor(limit / per_node[key]))
    if most == max_nodes:
        assumed[f"NodePool offerings the limits do not bound below {max_nodes} nodes: at most {max_nodes} "
                "(--nodepool-max-nodes)"] += 1
    return most


def _disruption(np_: Obj, ignored: Counter) -> tuple[str, float, float]:
    at = "spec.disruption"
    d = get_field(np_, at, dict, {})
    policy = d.get("consolidationPolicy", DEFAULT_DISRUPTION[0])
    if policy not in POLICIES:
        raise np_.refuse(f"{at}.consolidationPolicy", f"must be one of {', '.join(POLICIES)}, got {policy!r}")
    after = DEFAULT_DISRUPTION[1]
    if d.get("consolidateAfter") == "Never":
        ignored["NodePools' consolidateAfter: Never (not expressible: the loop consolidates; 0 s taken)"] += 1
    elif "consolidateAfter" in d:
        after = go_duration(np_, f"{at}.consolidateAfter", d["consolidateAfter"])
    share = DEFAULT_DISRUPTION[2]
    budgets = get_field(np_, f"{at}.budgets", list)
    if budgets is not None:
        shares = []
        for i, b in enumerate(budgets):
            nodes = b.get("nodes") if isinstance(b, dict) else None
            if not isinstance(nodes, str) or not re.fullmatch(r"\d+%?", nodes):
                raise np_.refuse(f"{at}.budgets[{i}].nodes", f"expected a count or a percentage, got {nodes!r}")
            if set(b) - {"nodes"}:
                ignored["NodePools' budgets with a schedule, duration or reasons: not modelled, not read"] += 1
            elif not nodes.endswith("%"):
                ignored["NodePools' budgets as a node count: not modelled (a share of nodes is), not read"] += 1
            else:
                shares.append(min(int(nodes[:-1]), 100) / 100)
        share = min(shares) if shares else share
    for key in sorted(set(map(str, d)) - {"consolidationPolicy", "consolidateAfter", "budgets"}):
        ignored[f"NodePools' disruption.{key}: unknown field, not read"] += 1
    return policy, after, share


def nodepool_pools(nodepools: list[Obj], types: list[InstanceType], type_names: dict[str, tuple], max_nodes: int,
                   ignored: Counter, assumed: Counter) -> KarpenterPools:
    """The offerings of `nodepools` as pools; `type_names` maps the node types already in the
    cluster to their shapes (an instance type of a known name and the same shape is reused)."""
    out = KarpenterPools()
    names: dict[str, str] = {}  # instance type -> its node type's name
    disruptions = []
    for np_ in nodepools:
        version = get_field(np_, "apiVersion", str)
        if version != VERSION:
            raise np_.refuse("apiVersion", f"{version!r} is not supported (this importer reads {VERSION})")
        spec = get_field(np_, "spec", dict, {})
        for key in sorted(set(map(str, spec)) - {"template", "limits", "weight", "disruption"}):
            ignored[f"NodePools' spec.{key}: unknown field, not read"] += 1
        tspec = get_field(np_, "spec.template.spec", dict, {})
        for key in sorted(set(map(str, tspec)) - {"requirements", "taints"}):
            ignored[f"NodePools' template spec.{key}: not modelled, not read"] += 1
        weight = get_field(np_, "spec.weight", int, 0)
        if "weight" in spec and not 1 <= weight <= 100:
            raise np_.refuse("spec.weight", f"must be in [1, 100], got {weight}")
        taints = []
        for i, t in enumerate(get_field(np_, "spec.template.spec.taints", list, [])):
            if not isinstance(t, dict) or not isinstance(t.get("key"), str) or t.get("effect") not in \
                    ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise np_.refuse(f"spec.template.spec.taints[{i}]", f"a taint has a key and an effect, got {t!r}")
            if t["key"] == GPU_TAINT_KEY and t["effect"] in FILTER_EFFECTS:
                taints.append(f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}")
            else:
                ignored[f"NodePools' taints other than {GPU_TAINT_KEY} (pods tolerate only that one in loopbench)"] += 1
        template = string_map(np_, "spec.template.metadata.labels")
        reqs = _requirements(np_, ignored)
        if not any(k == CAPACITY_LABEL for k, _, _ in reqs):
            reqs.append((CAPACITY_LABEL, "In", ["on-demand"]))
            assumed["NodePools without a karpenter.sh/capacity-type requirement: on-demand (Karpenter's default)"] += 1
        known = {INSTANCE_LABEL, CAPACITY_LABEL, ZONE_LABEL, NODEPOOL_LABEL, PRODUCT_LABEL, *template,
                 *(k for t in types for k in t.labels)}
        for key in sorted({k for k, _, _ in reqs} - known):
            ignored[f"NodePools' requirements on {key}: no instance type carries it, not applied"] += 1
        offered = 0
        for t in types:
            for ct in t.prices:
                for zone in t.zones:
                    labels = {INSTANCE_LABEL: t.name, CAPACITY_LABEL: ct, ZONE_LABEL: zone, NODEPOOL_LABEL: np_.name,
                              **({PRODUCT_LABEL: t.gpu_model} if t.gpus else {}), **t.labels, **template}
                    if not all(_allows(labels, *r) for r in reqs if r[0] in known):
                        continue
                    for key, op, values in reqs:
                        if key not in known and op == "In" and len(values) == 1:
                            labels[key] = values[0]
                    offered += 1
                    out.pools.append(_offering(np_, t, ct, zone, _type_name(t, type_names, names, out), weight,
                                               taints, _limit_nodes(np_, t, max_nodes, ignored, assumed)))
                    out.labels[out.pools[-1]["name"]] = labels
        if not offered:
            raise np_.refuse("spec.template.spec.requirements", "allow no offering of the instance-type list")
        disruptions.append((weight, np_, _disruption(np_, ignored)))
    if len({w for w, _, _ in disruptions}) > 1:
        ignored["NodePools' weight: pools' priority (the Karpenter-like loop buys the cheapest of all)"] += 1
    weight, first, (policy, after, share) = max(disruptions, key=lambda d: d[0])
    if any(d[2] != (policy, after, share) for d in disruptions):
        ignored[f"NodePools' disruption other than NodePool {first.name}'s (the loop has one)"] += 1
    out.overrides = ["loop=separate_karpenter", f"loop.autoscaler.consolidate_underutilized={POLICIES[policy]}",
                     f"loop.autoscaler.consolidate_after_s={after:g}", f"loop.autoscaler.budget_nodes={share:g}"]
    if len(out.pools) > len({p["name"] for p in out.pools}):
        raise first.refuse("metadata.name", "two offerings share a pool name (instance types or zones repeat)")
    if sum(p["max_size"] for p in out.pools) > MAX_POOL_NODES:
        raise first.refuse("spec.limits", f"the offerings' pools hold more than {MAX_POOL_NODES:,} nodes")
    assumed["NodePool limits: per offering, not summed over the NodePool"] += len(out.pools)
    return out


def _type_name(t: InstanceType, type_names: dict[str, tuple], names: dict[str, str], out: KarpenterPools) -> str:
    """The node type of instance type `t`, added to `out` the first time."""
    if t.name in names:
        return names[t.name]
    shape = (t.cpu_milli, t.memory_mib, t.gpus, t.gpu_model)
    name = t.name if type_names.get(t.name, shape) == shape else f"{t.name}-{t.cpu_milli}m-{t.memory_mib}Mi"
    names[t.name] = name
    if name not in type_names:
        out.node_types.append({"name": name, "cpu_milli": t.cpu_milli, "memory_mib": t.memory_mib, "gpus": t.gpus,
                               "gpu_model": t.gpu_model, "nvlink_domains": 1, "numa_domains": 1})
    return name


def _offering(np_: Obj, t: InstanceType, ct: str, zone: str, node_type: str, weight: int, taints: list[str],
              max_size: int) -> dict:
    spot = ct == "spot"
    pool = {"name": f"{np_.name}-{t.name}-{ct}-{zone}", "node_type": node_type, "zone": zone,
            "min_size": 0, "max_size": max_size, "price_on_demand": t.prices.get("on-demand", t.prices[ct]),
            "boot_delay": boot_delay(t.gpus), "priority": weight}
    if spot:
        pool.update(spot=True, price_spot=t.prices[ct])
    if taints:
        pool["taints"] = sorted(taints)
    return pool
