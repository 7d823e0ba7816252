"""Kubernetes manifests (Pods, PodGroups, Workloads, PriorityClasses) to the canonical trace.

The input is what `kubectl get -o yaml` / `-o json` prints, or hand-written manifests: YAML
(several documents separated by `---`) or JSON, single objects or `kind: List` (or `PodList`,
...) with `items`; several files are one input (a pod may name a PodGroup of another file).
The gang API is KEP-4671's, group `scheduling.k8s.io/v1beta1`: a Pod joins a PodGroup of its
namespace through `spec.schedulingGroup.podGroupName`; a PodGroup's `spec.schedulingPolicy`
is exactly one of `basic: {}` or `gang: {minCount: N}`, or, when it omits it, its Workload
template's (`spec.podGroupTemplateRef.workload: {workloadName, podGroupTemplateName}`).

Mapping, one trace row per Pod:
- pod_id: `<namespace>/<name>` (namespace `default` when the manifest has none).
- job_id: `<namespace>/<podGroupName>` for a pod of a PodGroup; `<namespace>/<name>` for a pod
  without `spec.schedulingGroup` (a job of its own).
- min_member: `gang.minCount` of the group's policy; 1 for `basic` and for a lone pod. A gang
  whose minCount exceeds the pods the input gives it is refused.
- submit_s: `metadata.creationTimestamp` (RFC 3339), seconds from the earliest pod's; every
  pod of a group takes the group's latest creationTimestamp (a group is schedulable only once
  its pods exist; loopbench gives a job one submit time), counted. A pod without a
  creationTimestamp goes with its group, or, alone or in a group without any, is submitted
  at the trace origin (hand-written manifests have none: all pods at 0), counted.
- duration_s: the pod annotation `loopbench.io/duration-s` (seconds, a number >= 0); without
  it null, i.e. the pod runs to the end of the replay, counted (manifests carry no run time).
- cpu_milli, memory_mib, gpu_count: the pod's effective request as kube-scheduler computes it:
  per resource, each container's `resources.requests` (its `limits` where a request is missing,
  as the API server defaults it); the sum over `containers`, and over sidecars (init
  containers with `restartPolicy: Always`); at least the largest init container (plus the
  sidecars started before it); pod-level `spec.resources` replaces cpu/memory when given; plus
  `spec.overhead`. CPU in millicores and memory in MiB are rounded up; `nvidia.com/gpu` must be
  a whole number of GPUs.
- gpu_milli: 1000 per GPU when gpu_count > 0, else 0 (whole GPUs only); gpu_partition null.
- gpu_models: empty (any model): nodeSelector and affinity are not read.
- gpus_same_nvlink, gpus_same_numa, nic_per_gpu: false (manifests do not say so).
- gang_locality: the group's `spec.schedulingConstraints.topology[0].key` (else its template's):
  a key whose last `/` part is `rack` (`topology.kubernetes.io/rack`) is `rack`, one whose last
  part is `block` is `block`; any other key (`topology.kubernetes.io/zone`, hostname, ...) is
  refused; no constraint is `none`.
- priority: the pod's `spec.priority` (set at admission, so kubectl prints it); else its
  `spec.priorityClassName`; else the PodGroup's `spec.priority`, its `spec.priorityClassName`, its
  template's `priorityClassName`; else the globalDefault PriorityClass of the input; else 0.
  A class name resolves through the PriorityClass objects of the input (`value`) or the two
  built-in system classes; an unknown one is refused. Pods of one group must agree.
- queue: the label `kueue.x-k8s.io/queue-name`; without it `default` (the trace's default queue,
  which the bundled clusters' Kueue config names). Pods of one group must agree.
Not read: status (phase, start and finish times), node names, tolerations, affinity, other
resources (ephemeral-storage, hugepages, other extended resources: counted in the notes).
Assumed: PodGroups and Workloads are `scheduling.k8s.io/v1beta1` (another apiVersion, e.g.
scheduler-plugins' `scheduling.x-k8s.io` PodGroup with `minMember`, is refused, not guessed);
an object is defined once across the files (kind, namespace, name); every PodGroup and
Workload template is checked, used by a pod or not.
Objects of other kinds are counted per kind in the notes and otherwise ignored; a PodGroup
without pods in the input adds nothing (counted). Every refusal names the file, the object
(`Kind namespace/name`) and the field path.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import yaml

from harness.errors import TraceError
from harness.importers.common import ImportResult, canonical
from harness.trace import (
    DEFAULTS,
    MAX_CPU_MILLI,
    MAX_GPUS_PER_POD,
    MAX_MEMORY_MIB,
    MAX_TIME_S,
    TraceMeta,
    validate_table,
)

GROUP_VERSION = "scheduling.k8s.io/v1beta1"
DURATION_ANNOTATION = "loopbench.io/duration-s"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
NO_QUEUE = DEFAULTS["queue"]  # the trace's default queue, which the bundled clusters' Kueue config names
GPU = "nvidia.com/gpu"
LOCALITY = {"rack": "rack", "block": "block"}  # last part of a topology key -> gang_locality
SUPPORTED_KEYS = "a key whose last part is rack (e.g. topology.kubernetes.io/rack) or block (e.g. example.com/block)"
#: kube-apiserver's built-in classes (pkg/apis/scheduling: SystemCriticalPriority and +1000).
BUILTIN_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
INT32 = (-(2**31), 2**31 - 1)
KINDS = ("Pod", "PodGroup", "Workload", "PriorityClass")
#: named without a namespace
CLUSTER_SCOPED = frozenset({"PriorityClass", "Node", "ResourceFlavor", "ClusterQueue", "Cohort", "NodePool"})


# ---- quantities -------------------------------------------------------------------------

_QUANTITY = re.compile(r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
                       r"(?:(?P<bin>[KMGTPE]i)|[eE](?P<exp>[+-]?\d+)|(?P<dec>[mkMGTPE]?))$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(value: Any) -> Fraction:
    """A Kubernetes resource quantity (`500m`, `1.5`, `4Gi`, `1e3`, `129M`) as an exact number;
    ValueError when it is not one. YAML numbers (`cpu: 2`, `cpu: 0.5`) are read as written."""
    if isinstance(value, bool):
        raise ValueError("not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("not a quantity")
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise ValueError("not a quantity")
    m = _QUANTITY.match(value)
    if m is None:
        raise ValueError("not a quantity")
    number = Fraction(m["num"])
    if m["bin"]:
        return number * 1024 ** _BINARY[m["bin"]]
    exp = int(m["exp"]) if m["exp"] is not None else _DECIMAL[m["dec"]]
    if abs(exp) > 100:  # Kubernetes caps quantities far below this; no huge powers built
        raise ValueError("exponent out of range")
    return number * Fraction(10) ** exp


# ---- objects and where they come from ---------------------------------------------------

@dataclass
class Obj:
    """One object of the input and where it is, for error messages."""

    file: str
    body: dict
    kind: str
    namespace: str
    name: str

    @property
    def where(self) -> str:
        return f"{self.kind} {self.name}" if self.kind in CLUSTER_SCOPED else \
            f"{self.kind} {self.namespace}/{self.name}"

    def refuse(self, path: str, rule: str) -> TraceError:
        return TraceError(self.file, f"{self.where}, field {path}: {rule}")


def _is_list(doc: dict) -> bool:
    kind = doc.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and "items" in doc


def _documents(file: str) -> Iterator[tuple[str, Any]]:
    """(where in the file, document) for every document of a YAML or JSON file."""
    if not os.path.exists(file):
        raise TraceError(file, "file does not exist")
    try:
        text = Path(file).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(file, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise TraceError(file, f"cannot read ({exc.strerror})") from None
    if text.lstrip()[:1] in ("{", "["):
        try:  # kubectl -o json; YAML would read most JSON too, but not tabs and not as fast
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceError(file, f"document 1, line {exc.lineno}, column {exc.colno}: not valid JSON "
                             f"({exc.msg})") from None
        yield "document 1", doc
        return
    n = 0
    try:
        for doc in yaml.safe_load_all(text):
            n += 1
            yield f"document {n}", doc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        at = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context, cmark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and cmark is not None and cmark is not mark:
            problem += f", {context} at line {cmark.line + 1}, column {cmark.column + 1}"
        raise TraceError(file, f"document {n + 1}{at}: not valid YAML ({problem})") from None


def manifest_objects(file: str) -> Iterator[Obj]:
    """The objects of a manifest file (YAML or JSON, `kind: List`, several documents), each with where it is."""
    for where, doc in _documents(file):
        if doc is None:  # an empty document (a trailing `---`)
            continue
        for i, item in enumerate(_items(file, where, doc)):
            at = where if item is doc else f"{where}, items[{i}]"
            if not isinstance(item, dict):
                raise TraceError(file, f"{at}: not a Kubernetes object (a mapping with kind and metadata)")
            kind = item.get("kind")
            if not isinstance(kind, str) or not kind:
                raise TraceError(file, f"{at}, field kind: missing (every object names its kind)")
            meta = item.get("metadata")
            if not isinstance(meta, dict):
                raise TraceError(file, f"{at} ({kind}), field metadata: missing or not a mapping")
            name = meta.get("name")
            if not isinstance(name, str) or not name:
                raise TraceError(file, f"{at} ({kind}), field metadata.name: missing or not a string")
            ns = meta.get("namespace", "default")
            if not isinstance(ns, str) or not ns:
                raise TraceError(file, f"{kind} {name}, field metadata.namespace: not a string ({ns!r})")
            yield Obj(file, item, kind, ns, name)


def _items(file: str, where: str, doc: Any) -> list:
    if isinstance(doc, list):  # a JSON array of objects
        return doc
    if isinstance(doc, dict) and _is_list(doc):
        items = doc["items"]
        if items is None:
            return []
        if not isinstance(items, list):
            raise TraceError(file, f"{where} ({doc['kind']}), field items: not a list")
        return items
    return [doc]


_PART = re.compile(r"^([^\[]*)(?:\[(\d+)\])?$")


def get_field(obj: Obj, path: str, types: type | tuple[type, ...], default: Any = None) -> Any:
    """The value at a dotted path of the object, checked against `types`; `default` if absent."""
    value: Any = obj.body
    for part in path.split("."):
        name, index = _PART.match(part).groups()  # type: ignore[union-attr]  # every part matches
        if value is None:
            return default
        if not isinstance(value, dict):
            raise obj.refuse(path, f"expected a mapping at {name!r}, got {type(value).__name__}")
        value = value.get(name)
        if index is not None and value is not None:
            value = value[int(index)]  # an index the caller took from this very list
    if value is None:
        return default
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _tuple(types):
        raise obj.refuse(path, f"expected {_type_names(types)}, got {value!r}")
    return value


def string_map(obj: Obj, path: str = "metadata.labels") -> dict[str, str]:
    """A map of strings at `path` (labels, a nodeSelector), each value checked."""
    values = get_field(obj, path, dict, {})
    for key, value in values.items():
        if not isinstance(value, str):
            raise obj.refuse(f'{path}["{key}"]', f"a label value is a string, got {value!r}")
    return values


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _type_names(types: type | tuple[type, ...]) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", int: "an integer", float: "a number"}
    return " or ".join(names.get(t, t.__name__) for t in _tuple(types))


# ---- groups -----------------------------------------------------------------------------

@dataclass
class Group:
    """A PodGroup resolved against its Workload template: what its pods share."""

    obj: Obj
    min_member: int
    min_from: str  # where minCount was read when not in the PodGroup itself, for messages
    locality: str
    priority: int | None
    pods: list[int] = field(default_factory=list)


def _policy(obj: Obj, path: str) -> tuple[int | None, str]:
    """(minCount or None for basic, the field it was read from) of a schedulingPolicy at `path`."""
    policy = get_field(obj, path, dict)
    if policy is None:
        raise obj.refuse(path, "missing (exactly one of basic: {} or gang: {minCount: N})")
    known = [k for k in ("basic", "gang") if k in policy]
    if len(known) != 1:
        got = "both" if len(known) == 2 else f"neither (keys: {', '.join(map(str, policy)) or 'none'})"
        raise obj.refuse(path, f"must hold exactly one of basic or gang, got {got}")
    other = sorted(set(map(str, policy)) - {"basic", "gang"})
    if other:
        raise obj.refuse(f"{path}.{other[0]}", "unknown policy (v1beta1 has basic and gang)")
    if known == ["basic"]:
        if not isinstance(policy["basic"], (dict, type(None))):
            raise obj.refuse(f"{path}.basic", f"expected a mapping ({{}}), got {policy['basic']!r}")
        return None, path
    gang = get_field(obj, f"{path}.gang", dict)
    count = gang.get("minCount") if gang else None
    at = f"{path}.gang.minCount"
    if count is None:
        raise obj.refuse(at, "missing (the gang's size)")
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= INT32[1]:
        raise obj.refuse(at, f"must be an integer >= 1, got {count!r}")
    return count, at


def _locality(obj: Obj, path: str) -> str:
    """gang_locality of the schedulingConstraints at `path` (absent: none)."""
    topology = get_field(obj, f"{path}.topology", list, [])
    if not topology:
        return "none"
    if len(topology) > 1:
        raise obj.refuse(f"{path}.topology", f"at most one entry (v1beta1), got {len(topology)}")
    at = f"{path}.topology[0].key"
    entry = topology[0]
    key = entry.get("key") if isinstance(entry, dict) else None
    if not isinstance(key, str) or not key:
        raise obj.refuse(at, f"missing or not a string ({entry!r})")
    loc = LOCALITY.get(key.rsplit("/", 1)[-1])
    if loc is None:
        raise obj.refuse(at, f"topology key {key!r} is not supported: loopbench places gangs by rack or "
                         f"block, so give {SUPPORTED_KEYS}")
    return loc


def _check_templates(wl: Obj) -> None:
    """A Workload's templates, each checked whether a PodGroup of the input uses it or not."""
    templates = get_field(wl, "spec.podGroupTemplates", list)
    if not templates:
        raise wl.refuse("spec.podGroupTemplates", "missing or empty (a Workload has 1 to 8 templates)")
    names: set[str] = set()
    for i, t in enumerate(templates):
        at = f"spec.podGroupTemplates[{i}]"
        if not isinstance(t, dict):
            raise wl.refuse(at, f"expected a template (a mapping), got {t!r}")
        name = t.get("name")
        if not isinstance(name, str) or not name:
            raise wl.refuse(f"{at}.name", f"missing or not a string ({name!r})")
        if name in names:
            raise wl.refuse(f"{at}.name", f"template {name!r} is named twice")
        names.add(name)
        _policy(wl, f"{at}.schedulingPolicy")
        _locality(wl, f"{at}.schedulingConstraints")


class Manifests:
    """Every object of the input files, by kind and namespace/name, each defined once; objects
    of other kinds in `others`, for an importer that reads more kinds."""

    def __init__(self, paths: list[str]):
        self.pods: list[Obj] = []
        self.by_kind: dict[str, dict[tuple[str, str], Obj]] = {k: {} for k in KINDS}
        self.ignored: Counter = Counter()
        self.others: list[Obj] = []
        self.paths = paths
        for path in paths:
            for obj in manifest_objects(str(path)):
                if obj.kind not in KINDS:
                    self.ignored[obj.kind] += 1
                    self.others.append(obj)
                    continue
                if obj.kind in ("PodGroup", "Workload"):
                    version = get_field(obj, "apiVersion", str)
                    if version is not None and version != GROUP_VERSION:
                        raise obj.refuse("apiVersion", f"{version!r} is not supported (this importer reads "
                                         f"{GROUP_VERSION}, KEP-4671)")
                key = (obj.namespace if obj.kind != "PriorityClass" else "", obj.name)
                seen = self.by_kind[obj.kind].get(key)
                if seen is not None:
                    raise obj.refuse("metadata.name", f"defined twice (first in {seen.file})")
                self.by_kind[obj.kind][key] = obj
                if obj.kind == "Pod":
                    self.pods.append(obj)
        self.classes = dict(BUILTIN_CLASSES)
        self.global_default: int | None = None
        for pc in self.by_kind["PriorityClass"].values():
            value = get_field(pc, "value", int)
            if value is None or not INT32[0] <= value <= INT32[1]:
                raise pc.refuse("value", f"must be a 32-bit integer, got {pc.body.get('value')!r}")
            self.classes[pc.name] = value
            if get_field(pc, "globalDefault", bool, False):
                self.global_default = value

    def priority_of_class(self, obj: Obj, path: str) -> int | None:
        name = get_field(obj, path, str)
        if name is None:
            return None
        if name not in self.classes:
            known = ", ".join(sorted(self.classes))
            raise obj.refuse(path, f"PriorityClass {name!r} is not in the input (known: {known}); "
                             "add its manifest (kubectl get priorityclass NAME -o yaml)")
        return self.classes[name]

    def group(self, pg: Obj) -> Group:
        template, tobj, tpath = None, None, ""
        ref = get_field(pg, "spec.podGroupTemplateRef.workload", dict)
        if ref is not None:
            wname = get_field(pg, "spec.podGroupTemplateRef.workload.workloadName", str)
            tname = get_field(pg, "spec.podGroupTemplateRef.workload.podGroupTemplateName", str)
            if wname is None:
                raise pg.refuse("spec.podGroupTemplateRef.workload.workloadName", "missing")
            if tname is None:
                raise pg.refuse("spec.podGroupTemplateRef.workload.podGroupTemplateName", "missing")
            tobj = self.by_kind["Workload"].get((pg.namespace, wname))
            if tobj is None:
                raise pg.refuse("spec.podGroupTemplateRef.workload.workloadName",
                                f"Workload {pg.namespace}/{wname} is not in the input")
            templates = get_field(tobj, "spec.podGroupTemplates", list, [])
            for i, t in enumerate(templates):
                if isinstance(t, dict) and t.get("name") == tname:
                    template, tpath = t, f"spec.podGroupTemplates[{i}]"
                    break
            else:
                names = ", ".join(str(t.get("name")) for t in templates if isinstance(t, dict)) or "none"
                raise pg.refuse("spec.podGroupTemplateRef.workload.podGroupTemplateName",
                                f"Workload {pg.namespace}/{wname} has no template {tname!r} (it has: {names})")
        spec = get_field(pg, "spec", dict, {})
        if "schedulingPolicy" in spec or tobj is None:
            count, _ = _policy(pg, "spec.schedulingPolicy")
            min_from = ""
        else:
            assert tobj is not None
            count, at = _policy(tobj, f"{tpath}.schedulingPolicy")
            min_from = f"{at} of {tobj.where}"
        if tobj is not None and template is not None and "schedulingConstraints" not in spec \
                and "schedulingConstraints" in template:
            locality = _locality(tobj, f"{tpath}.schedulingConstraints")
        else:
            locality = _locality(pg, "spec.schedulingConstraints")
        priority = int32_field(pg, "spec.priority")
        if priority is None:
            priority = self.priority_of_class(pg, "spec.priorityClassName")
        if priority is None and tobj is not None:
            priority = self.priority_of_class(tobj, f"{tpath}.priorityClassName")
        return Group(pg, count or 1, min_from, locality, priority)


# ---- pods -------------------------------------------------------------------------------

def _container_requests(pod: Obj, path: str, container: Any) -> dict[str, Fraction]:
    """A container's requests by resource name (limits where a request is missing)."""
    if not isinstance(container, dict):
        raise pod.refuse(path, f"expected a container (a mapping), got {container!r}")
    res = container.get("resources")
    if res is None:
        return {}
    if not isinstance(res, dict):
        raise pod.refuse(f"{path}.resources", f"expected a mapping, got {res!r}")
    return _requests(pod, f"{path}.resources", res)


def quantities(pod: Obj, path: str, values: Any) -> dict[str, Fraction]:
    """A mapping of resource name to quantity (requests, a node's allocatable), each parsed;
    refused by its field path."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise pod.refuse(path, f"expected a mapping of resource to quantity, got {values!r}")
    out = {}
    for name, value in values.items():
        at = f"{path}.{name}"
        try:
            q = parse_quantity(value)
        except ValueError:
            raise pod.refuse(at, f"not a Kubernetes quantity: {value!r} (e.g. 500m, 2, 1.5, 512Mi, 4Gi, 1e3)"
                             ) from None
        if q < 0:
            raise pod.refuse(at, f"must not be negative, got {value!r}")
        if name == GPU and q.denominator != 1:
            raise pod.refuse(at, f"{GPU} must be a whole number of GPUs, got {value!r}")
        out[str(name)] = q
    return out


def _requests(pod: Obj, path: str, res: dict) -> dict[str, Fraction]:
    """`requests`, each resource missing there taken from `limits` (the API server's default)."""
    limits = quantities(pod, f"{path}.limits", res.get("limits"))
    return {**limits, **quantities(pod, f"{path}.requests", res.get("requests"))}


def _add(a: dict[str, Fraction], b: dict[str, Fraction]) -> dict[str, Fraction]:
    return {k: a.get(k, Fraction(0)) + b.get(k, Fraction(0)) for k in a.keys() | b.keys()}


def _max(a: dict[str, Fraction], b: dict[str, Fraction]) -> dict[str, Fraction]:
    return {k: max(a.get(k, Fraction(0)), b.get(k, Fraction(0))) for k in a.keys() | b.keys()}


def pod_requests(pod: Obj) -> dict[str, Fraction]:
    """The pod's effective requests as kube-scheduler computes them (component-helpers
    resource.PodRequests): app containers and sidecars summed, at least each init container
    with the sidecars started before it, pod-level cpu/memory if given, plus the overhead."""
    containers = get_field(pod, "spec.containers", list)
    if not containers:
        raise pod.refuse("spec.containers", "missing or empty (a pod runs at least one container)")
    reqs: dict[str, Fraction] = {}
    for i, c in enumerate(containers):
        reqs = _add(reqs, _container_requests(pod, f"spec.containers[{i}]", c))
    sidecars: dict[str, Fraction] = {}
    init_max: dict[str, Fraction] = {}
    for i, c in enumerate(get_field(pod, "spec.initContainers", list, [])):
        r = _container_requests(pod, f"spec.initContainers[{i}]", c)
        if c.get("restartPolicy") == "Always":  # a sidecar runs beside the app containers
            reqs = _add(reqs, r)
            sidecars = _add(sidecars, r)
            r = sidecars
        else:
            r = _add(r, sidecars)
        init_max = _max(init_max, r)
    reqs = _max(reqs, init_max)
    level = get_field(pod, "spec.resources", dict)
    if level is not None:  # PodLevelResources: the pod's cpu/memory replace the containers' sum
        own = _requests(pod, "spec.resources", level)
        reqs.update({k: v for k, v in own.items() if k in ("cpu", "memory")})
    return _add(reqs, quantities(pod, "spec.overhead", get_field(pod, "spec.overhead", dict)))


def time_field(obj: Obj, path: str) -> float | None:
    """An RFC 3339 time of the object (`metadata.creationTimestamp`, a container's `startedAt`)
    as epoch seconds; None when absent."""
    given = get_field(obj, path, (str, datetime))
    value = given
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            value = None
    if value is None and given is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise obj.refuse(path, f"not an RFC 3339 time with a zone (e.g. 2024-05-01T10:00:00Z): {given!r}")
    return value.timestamp()


def annotated_duration(pod: Obj) -> float | None:
    """The pod's run time from the `loopbench.io/duration-s` annotation; None without it."""
    annotations = get_field(pod, "metadata.annotations", dict, {})
    if DURATION_ANNOTATION not in annotations:
        return None
    value = annotations[DURATION_ANNOTATION]
    at = f'metadata.annotations["{DURATION_ANNOTATION}"]'
    try:
        seconds = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_TIME_S:
        raise pod.refuse(at, f"must be a number of seconds in [0, {MAX_TIME_S:.0f}], got {value!r}")
    return seconds


def int32_field(obj: Obj, path: str) -> int | None:
    """An int32 field (a priority); None when absent."""
    value = get_field(obj, path, int)
    if value is not None and not INT32[0] <= value <= INT32[1]:
        raise obj.refuse(path, f"must be a 32-bit integer, got {value!r}")
    return value


def ceil_int(q: Fraction) -> int:
    """A quantity rounded up, as a pod's request is (millicores, MiB)."""
    return -(-q.numerator // q.denominator)


def read_workloads(paths: list[str]) -> ImportResult:
    """The manifests of `paths` (one input) to a canonical trace, one row per Pod."""
    inp = Manifests([str(p) for p in paths])
    notes: Counter = Counter()
    for kind, n in sorted(inp.ignored.items()):
        notes[f"{kind} objects ignored (not a Pod, PodGroup, Workload or PriorityClass)"] += n
    rows = pod_rows(inp, inp.pods, notes)
    no_duration = sum(r["duration_s"] is None for r in rows)
    if no_duration:
        notes[f"no {DURATION_ANNOTATION} annotation: runs to the end of the replay"] += no_duration
    names = ", ".join(Path(p).name for p in paths)
    table, when = rows_table(rows, paths, notes)
    meta = TraceMeta(source=f"Kubernetes manifests {names}", licence="the manifests' owner's",
                     time_origin=when, description="one pod per Pod object; PodGroups (KEP-4671) are jobs; "
                     "see harness/importers/workloads.py")
    return ImportResult(table, meta, "pods", len(rows), Counter(), notes)


def pod_row(inp: Manifests, pod: Obj, notes: Counter) -> dict:
    """A pod's trace row before its job is settled: id, creation time, the annotated duration,
    effective requests, queue and own priority (None when neither the pod nor its class gives one);
    `obj` is the pod, for refusals."""
    req = pod_requests(pod)
    gpus = req.get(GPU, Fraction(0))
    if gpus > MAX_GPUS_PER_POD:
        raise pod.refuse(f"spec.containers[*].resources.requests.{GPU}",
                         f"{gpus} GPUs in all: at most {MAX_GPUS_PER_POD} per pod")
    for name, unit, most in (("cpu", 1000, MAX_CPU_MILLI), ("memory", Fraction(1, 2**20), MAX_MEMORY_MIB)):
        if ceil_int(req.get(name, Fraction(0)) * unit) > most:
            raise pod.refuse(f"spec.containers[*].resources.requests.{name}",
                             f"{float(req[name]):.6g} in all: more than any node holds (a unit mistake?)")
    for name in sorted(set(req) - {"cpu", "memory", GPU}):
        if req[name] > 0:
            notes[f"pods requesting {name}: not modelled, ignored"] += 1
    labels = get_field(pod, "metadata.labels", dict, {})
    queue = labels.get(QUEUE_LABEL, NO_QUEUE)
    if not isinstance(queue, str) or not queue:
        raise pod.refuse(f'metadata.labels["{QUEUE_LABEL}"]', f"expected a queue name, got {queue!r}")
    priority = int32_field(pod, "spec.priority")
    if priority is None:
        priority = inp.priority_of_class(pod, "spec.priorityClassName")
    return {"obj": pod, "pod_id": f"{pod.namespace}/{pod.name}",
            "created": time_field(pod, "metadata.creationTimestamp"),
            "duration_s": annotated_duration(pod), "cpu_milli": ceil_int(req.get("cpu", Fraction(0)) * 1000),
            "memory_mib": ceil_int(req.get("memory", Fraction(0)) / 2**20), "gpu_count": int(gpus),
            "gpu_milli": 1000 if gpus else 0, "queue": queue, "priority": priority}


def pod_rows(inp: Manifests, pods: list[Obj], notes: Counter) -> list[dict]:
    """The rows of `pods`, those of a PodGroup settled as its job; a pod without
    `spec.schedulingGroup` is a job of its own (`grouped` false: an importer may regroup it)."""
    for wl in inp.by_kind["Workload"].values():
        _check_templates(wl)
    groups = {key: inp.group(pg) for key, pg in inp.by_kind["PodGroup"].items()}  # each checked, used or not
    rows: list[dict] = []
    for i, pod in enumerate(pods):
        pg_name = get_field(pod, "spec.schedulingGroup.podGroupName", str)
        if get_field(pod, "spec.schedulingGroup", dict) is not None and not pg_name:
            raise pod.refuse("spec.schedulingGroup.podGroupName", "missing (the PodGroup the pod joins)")
        row = pod_row(inp, pod, notes)
        row["grouped"] = bool(pg_name)
        if pg_name:
            key = (pod.namespace, pg_name)
            if key not in groups:
                raise pod.refuse("spec.schedulingGroup.podGroupName",
                                 f"PodGroup {pod.namespace}/{pg_name} is not in the input")
            groups[key].pods.append(i)
            row["job_id"] = f"{pod.namespace}/{pg_name}"
        else:
            row.update(job_id=row["pod_id"], min_member=1, locality="none")
            if row["priority"] is None:
                row["priority"] = inp.global_default or 0
        rows.append(row)
    for g in groups.values():
        if g.pods:
            _settle(g, [rows[i] for i in g.pods], inp, notes)
        else:
            notes["PodGroup objects without pods in the input: not in the trace"] += 1
    if not rows:
        raise TraceError(", ".join(map(str, inp.paths)), "no Pod objects in the input")
    return rows


def check_agreement(members: list[dict], job: str) -> None:
    """Refuse pods of one job that disagree on priority or queue, naming the second pod."""
    for name in ("priority", "queue"):
        given = [m for m in members if m[name] is not None]
        first = given[0] if given else None
        for m in given[1:]:
            assert first is not None
            if m[name] != first[name]:
                field_ = "spec.priority (or spec.priorityClassName)" if name == "priority" else \
                    f'metadata.labels["{QUEUE_LABEL}"]'
                raise m["obj"].refuse(field_, f"{name} {m[name]!r} differs from {first['obj'].where}'s "
                                      f"{first[name]!r}: pods of {job} share one {name} in loopbench")


def _settle(g: Group, members: list[dict], inp: Manifests, notes: Counter) -> None:
    """Give a group's pods what they share: min_member, locality, one submit time, one priority
    and queue (refused when they disagree)."""
    if g.min_member > len(members):
        raise g.obj.refuse("spec.schedulingPolicy.gang.minCount",
                           f"minCount {g.min_member}{f' (from {g.min_from})' if g.min_from else ''} exceeds "
                           f"the {len(members)} pods the "
                           "input gives this PodGroup (spec.schedulingGroup.podGroupName of its pods)")
    check_agreement(members, f"PodGroup {g.obj.namespace}/{g.obj.name}")
    own = [m["priority"] for m in members if m["priority"] is not None]
    fallback = g.priority if g.priority is not None else inp.global_default or 0
    priority = own[0] if own else fallback
    created = [m["created"] for m in members if m["created"] is not None]
    latest = max(created) if created else None
    moved = sum(m["created"] != latest for m in members)  # a pod without a timestamp goes with its group
    if moved:
        notes["pods of a group submitted at its latest creationTimestamp"] += moved
    for m in members:
        m.update(min_member=g.min_member, locality=g.locality, priority=priority, created=latest)


def rows_table(rows: list[dict], paths: list[str], notes: Counter) -> tuple[pa.Table, str]:
    """The canonical table of settled rows (a row's `gpu_models`, if any, restricts its GPU
    models), submit times from the earliest creationTimestamp, and that origin as time_origin."""
    created = [r["created"] for r in rows if r["created"] is not None]
    origin = min(created) if created else None
    missing = sum(r["created"] is None for r in rows)
    if missing:
        notes["no creationTimestamp: submitted at the trace origin"] += missing
    for r in rows:
        r["submit_s"] = 0.0 if r["created"] is None else r["created"] - (origin or 0.0)
        if r["submit_s"] > MAX_TIME_S:
            raise r["obj"].refuse("metadata.creationTimestamp", f"{r['submit_s'] / 86400 / 365:.1f} years after "
                                  "the earliest pod: a trace spans at most 10 years")
    rows.sort(key=lambda r: (r["submit_s"], r["job_id"], r["pod_id"]))
    n = len(rows)
    cols: dict[str, Any] = {
        "pod_id": [r["pod_id"] for r in rows],
        "job_id": [r["job_id"] for r in rows],
        "min_member": np.array([r["min_member"] for r in rows], np.int32),
        "submit_s": np.array([r["submit_s"] for r in rows], np.float64),
        "duration_s": pa.array([r["duration_s"] for r in rows], pa.float64()),
        "cpu_milli": np.array([r["cpu_milli"] for r in rows], np.int64),
        "memory_mib": np.array([r["memory_mib"] for r in rows], np.int64),
        "gpu_count": np.array([r["gpu_count"] for r in rows], np.int32),
        "gpu_milli": np.array([r["gpu_milli"] for r in rows], np.int32),
        "gang_locality": [r["locality"] for r in rows],
        "priority": np.array([r["priority"] for r in rows], np.int32),
        "queue": [r["queue"] for r in rows],
        "gpu_models": pa.array([r.get("gpu_models", []) for r in rows], pa.list_(pa.string())),
        "claim": pa.array([r.get("claim") for r in rows], pa.string()),
    }
    names = ", ".join(Path(p).name for p in paths)
    table = validate_table(canonical(cols, n), names)
    when = (datetime.fromtimestamp(math.floor(origin), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if origin is not None else "no creationTimestamp in the input: every pod at 0")
    return table, when
