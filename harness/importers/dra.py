"""DRA manifests (resource.k8s.io/v1: DeviceClass, ResourceSlice, ResourceClaimTemplate,
ResourceClaim) to one YAML file a replay can give its node types and pods: what a real
cluster's drivers publish and what its workloads ask for, taken from `kubectl get -o yaml`
rather than written by hand, and checked once, here, so a replay never meets a bad one.

Every object is read by harness.dra.resources and every CEL selector (of a class, of a
request, of a firstAvailable alternative) compiled by harness.dra.cel, so what the model does
not hold (an unknown field, `.matches(`, adminAccess, ...) is refused at import, naming the
file, the object and the field. The output keeps the manifests' own field names, without their
metadata (uid, resourceVersion, managedFields, ...) and status:

    dra:
      device_classes: [{name: NAME, spec: SPEC}, ...]
      node_types: {TYPE: [SLICE SPEC, ...]}   # the slices of one node of that type
      claims: {NAME: CLAIM SPEC}              # a template's spec.spec, a claim's spec

ResourceSlices are grouped by `spec.nodeName`; a node's type is given by `--node-type
NODE=TYPE`, else is its name without a trailing `-<digits>` (gpu-node-3 -> gpu-node). Nodes of
one type must publish the same devices: slice and pool names aside, and the values of the
attributes that name one physical device (uuid, serialNumber, pciBusID, macAddress, of any
domain), which differ from node to node by nature and are compared by type only. A slice of devices
reachable from several nodes (`allNodes`, `nodeSelector`, `perDeviceNodeSelection`) is
refused: network-attached devices are not modelled. Objects of other API groups are counted
and ignored; other resource.k8s.io kinds (DeviceTaintRule, ...) and versions are refused.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace

import yaml

from harness.dra import resources as r
from harness.dra.cel import compile_selector
from harness.errors import ConfigError, LoopbenchError, TraceError
from harness.importers.workloads import Obj, manifest_objects

KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim")
GROUP = r.API_VERSION.split("/")[0]
_SUFFIX = re.compile(r"-\d+$")
NETWORK = ("allNodes", "nodeSelector", "perDeviceNodeSelection")
IDENTITY = frozenset({"uuid", "serialNumber", "pciBusID", "macAddress"})  # one device's, not its type's


def default_node_type(node: str) -> str:
    """A node's type when no `--node-type` names it: its name without a trailing `-<digits>`."""
    return _SUFFIX.sub("", node) or node


def _located(file: str, exc: ConfigError) -> ConfigError:
    return ConfigError(f"{file}: {exc.where}", exc.rule)


def is_dra(obj: Obj) -> bool:
    """An object this importer reads (or refuses: another resource.k8s.io kind or version)."""
    version = obj.body.get("apiVersion")
    return obj.kind in KINDS or (isinstance(version, str) and version.split("/")[0] == GROUP and "/" in version)


def refuse(obj: Obj, path: str, rule: str) -> ConfigError:
    return ConfigError(f"{obj.file}: {obj.kind} {obj.name!r}.{path}", rule)


@dataclass
class NodeType:
    name: str
    nodes: list[str] = field(default_factory=list)
    first: str = ""  # the node whose slices are written
    specs: list[dict] = field(default_factory=list)
    slices: list[r.ResourceSlice] = field(default_factory=list)

    @property
    def devices(self) -> Counter:
        return Counter(s.driver for s in self.slices for _ in s.devices)


@dataclass
class DraInput:
    """What `read_dra` found: parsed objects and the specs to write, each checked."""

    classes: dict[str, r.DeviceClass] = field(default_factory=dict)
    class_specs: dict[str, dict] = field(default_factory=dict)
    node_types: dict[str, NodeType] = field(default_factory=dict)
    claims: dict[str, r.Claim] = field(default_factory=dict)
    claim_specs: dict[str, dict] = field(default_factory=dict)
    #: per node (by name, sorted) its slices, in a fixed order
    nodes: dict[str, list[tuple[Obj, r.ResourceSlice]]] = field(default_factory=dict)
    templates: int = 0
    ignored: Counter = field(default_factory=Counter)

    def document(self) -> dict:
        return {"dra": {
            "device_classes": [{"name": n, "spec": s} for n, s in self.class_specs.items()],
            "node_types": {t.name: t.specs for t in self.node_types.values()},
            "claims": dict(self.claim_specs)}}

    def summary(self) -> list[str]:
        lines = [f"  device classes {len(self.classes):>6}",
                 f"  node types     {len(self.node_types):>6}"]
        for t in self.node_types.values():
            per = ", ".join(f"{n} {d}" for d, n in sorted(t.devices.items()))
            lines.append(f"    {t.name}: {len(t.nodes)} node{'s' * (len(t.nodes) != 1)}, "
                         f"{sum(t.devices.values())} devices per node ({per or 'none'})")
        lines.append(f"  claims         {len(self.claims):>6} ({self.templates} from ResourceClaimTemplates)")
        for kind, n in sorted(self.ignored.items()):
            lines.append(f"  ignored        {n:>6} {kind} (not resource.k8s.io)")
        return lines


def _kind_of(d: r.Device) -> r.Device:
    """A device as its node type publishes it: identity attributes by type, not value."""
    attrs = {k: type(v).__name__ if k.rsplit("/", 1)[-1] in IDENTITY else v for k, v in d.attributes.items()}
    return replace(d, attributes=attrs)  # a type's name stands for the value


def published_by(items: list[tuple[Obj, r.ResourceSlice]]) -> list[tuple]:
    """What one node's slices publish, compared between nodes of a type (identities by type)."""
    return [(s.driver, s.shared_counters, [_kind_of(d) for d in s.devices]) for _, s in items]


def first_difference(a: list[r.ResourceSlice], b: list[r.ResourceSlice]) -> str:
    for sa, sb in zip(a, b, strict=False):
        if sa.driver != sb.driver:
            return f"driver {sa.driver!r} against {sb.driver!r}"
        if sa.shared_counters != sb.shared_counters:
            return f"the sharedCounters of driver {sa.driver!r}"
        for da, db in zip(sa.devices, sb.devices, strict=False):
            if _kind_of(da) != _kind_of(db):
                return f"device {da.name!r} of driver {sa.driver!r}"
        if len(sa.devices) != len(sb.devices):
            return f"{len(sa.devices)} devices of driver {sa.driver!r} against {len(sb.devices)}"
    return f"{len(a)} slices against {len(b)}"


def _slice_key(s: r.ResourceSlice) -> tuple:
    """What a slice publishes, its name and pool aside (they name the node)."""
    return (s.driver, tuple(d.name for d in s.devices))


def _check_selectors(file: str, where: str, selectors: tuple[str, ...]) -> None:
    for j, text in enumerate(selectors):
        compile_selector(text, f"{file}: {where}.selectors[{j}].cel.expression")


def _check_claim(obj: Obj, c: r.Claim, classes: dict[str, r.DeviceClass]) -> None:
    """Each request's selectors compiled and its class given in the input."""
    base = f"{obj.kind} {obj.name!r}.{'spec.spec' if obj.kind == 'ResourceClaimTemplate' else 'spec'}.devices"
    for i, req in enumerate(c.requests):
        at = f"{base}.requests[{i}] (request {req.name!r})"
        alternatives = [(f"{at}.firstAvailable[{k}] (request {a.name!r})", a)
                        for k, a in enumerate(req.first_available)] or [(f"{at}.exactly", req)]
        for where, a in alternatives:
            _check_selectors(obj.file, where, a.selectors)
            if a.device_class not in classes:
                known = ", ".join(sorted(classes)) or "none"
                raise ConfigError(f"{obj.file}: {where}.deviceClassName",
                                  f"DeviceClass {a.device_class!r} is not in the input (given: {known})")


def read_dra(paths: list[str], node_types: dict[str, str] | None = None) -> DraInput:
    """The DRA objects of `paths` (one input), checked; `node_types` maps node name -> type."""
    out = read_objects(paths)
    _group(out, dict(node_types or {}))
    return out


def read_objects(paths: list[str]) -> DraInput:
    """The DRA objects of `paths`, checked, with each node's slices but no node types: for an
    importer that types nodes by their own shape (importers/kubernetes.py)."""
    out = DraInput()
    seen: dict[tuple[str, str], Obj] = {}
    slices: list[tuple[Obj, r.ResourceSlice]] = []
    claims: list[Obj] = []
    for path in paths:
        for obj in manifest_objects(str(path)):
            version = obj.body.get("apiVersion")
            group = version.split("/")[0] if isinstance(version, str) and "/" in version else ""
            if obj.kind not in KINDS and group != GROUP:
                out.ignored[obj.kind] += 1
                continue
            if obj.kind not in KINDS:
                raise refuse(obj, "kind", f"{obj.kind} is not modelled (read: {', '.join(KINDS)})")
            if version != r.API_VERSION:
                raise refuse(obj, "apiVersion", f"{version!r} is not supported (this importer reads "
                             f"{r.API_VERSION})")
            family = "claim" if obj.kind.startswith("ResourceClaim") else obj.kind
            first = seen.get((family, obj.name))
            if first is not None:
                raise refuse(obj, "metadata.name", f"defined twice (first as {first.kind} in {first.file})")
            seen[(family, obj.name)] = obj
            try:
                if obj.kind == "DeviceClass":
                    dc = r.device_class(obj.body, obj.kind)
                    _check_selectors(obj.file, f"DeviceClass {dc.name!r}.spec", dc.selectors)
                    out.classes[dc.name] = dc
                    out.class_specs[dc.name] = obj.body.get("spec") or {}
                elif obj.kind == "ResourceSlice":
                    slices.append((obj, r.resource_slice(obj.body, obj.kind)))
                else:
                    claims.append(obj)
            except ConfigError as exc:
                if exc.where.startswith(f"{obj.file}: "):
                    raise
                raise _located(obj.file, exc) from None
    for obj in claims:  # after every class is known, whatever the files' order
        try:
            c = r.claim(obj.body, obj.kind)
        except ConfigError as exc:
            raise _located(obj.file, exc) from None
        _check_claim(obj, c, out.classes)
        out.claims[c.name] = c
        spec = obj.body["spec"]
        out.claim_specs[c.name] = spec["spec"] if obj.kind == "ResourceClaimTemplate" else spec
        out.templates += obj.kind == "ResourceClaimTemplate"
    _by_node(slices, out)
    return out


def _by_node(slices: list[tuple[Obj, r.ResourceSlice]], out: DraInput) -> None:
    """Each node's slices, in a fixed order, their pools checked; a slice of no one node refused."""
    by_node: dict[str, list[tuple[Obj, r.ResourceSlice]]] = {}
    for obj, s in slices:
        spec = obj.body["spec"]
        for key in NETWORK:
            if spec.get(key) not in (None, False):
                raise refuse(obj, f"spec.{key}", "network-attached devices are not modelled: give the slices "
                             "of devices on one node (spec.nodeName)")
        node = spec.get("nodeName")
        if not isinstance(node, str) or not node:
            raise refuse(obj, "spec.nodeName", f"missing or not a string ({node!r}): a slice of one node's "
                         "devices names its node")
        by_node.setdefault(node, []).append((obj, s))
    file_of = {id(s): o.file for o, s in slices}
    for node in sorted(by_node):
        items = sorted(by_node[node], key=lambda item: _slice_key(item[1]))
        r.check_pools(tuple(s for _, s in items), lambda s: f"{file_of[id(s)]}: ResourceSlice {s.name!r}")
        out.nodes[node] = items


def _group(out: DraInput, mapping: dict[str, str]) -> None:
    unknown = sorted(set(mapping) - set(out.nodes))
    if unknown:
        raise ConfigError("--node-type", f"node {unknown[0]!r} publishes no ResourceSlice in the input "
                          f"(nodes: {', '.join(sorted(out.nodes)) or 'none'})")
    published: dict[str, list] = {}
    for node, items in out.nodes.items():
        tname = mapping.get(node) or default_node_type(node)
        here = published_by(items)
        t = out.node_types.get(tname)
        if t is None:
            t = out.node_types[tname] = NodeType(tname, first=node, specs=[o.body["spec"] for o, _ in items],
                                                 slices=[s for _, s in items])
            published[tname] = here
        elif here != published[tname]:
            where = ", ".join(f"{o.file}: ResourceSlice {o.name!r}" for o, _ in items)
            raise ConfigError(f"{where}.spec.devices",
                              f"node {node!r} and node {t.first!r} are both of node type {tname!r} but publish "
                              f"different devices ({first_difference([s for _, s in items], t.slices)}); "
                              "give them different types (--node-type NODE=TYPE)")
        t.nodes.append(node)


def parse_node_types(pairs: list[str]) -> dict[str, str]:
    """`--node-type NODE=TYPE` flags as a mapping; a malformed or repeated one refused."""
    out: dict[str, str] = {}
    for pair in pairs:
        node, sep, tname = pair.partition("=")
        if not sep or not node or not tname:
            raise ConfigError("--node-type", f"expected NODE=TYPE, got {pair!r}")
        if node in out and out[node] != tname:
            raise ConfigError("--node-type", f"node {node!r} given two types ({out[node]!r}, {tname!r})")
        out[node] = tname
    return out


def no_input(paths: list[str]) -> LoopbenchError:
    return TraceError(", ".join(paths), "no DeviceClass, ResourceSlice, ResourceClaimTemplate or ResourceClaim "
                      "objects in the input")


def is_empty(inp: DraInput) -> bool:
    return not (inp.classes or inp.node_types or inp.claims)


def dump(inp: DraInput, header: str) -> str:
    return header + yaml.safe_dump(inp.document(), sort_keys=False, default_flow_style=False, width=110)
