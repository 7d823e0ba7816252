"""DRA's objects as resource.k8s.io/v1 writes them: DeviceClass, ResourceSlice, and the device
part of a ResourceClaim (or of a ResourceClaimTemplate's claim), read from the manifests' own
fields (as `kubectl get -o yaml` prints them) and refused, naming the object and the field,
where a field is missing, mistyped or unknown to this model.

Quantities (capacities, counters, capacity requests) are held as integer milli-units: "80Gi",
"500m" and "2" compare exactly. An attribute's name is qualified by its domain as upstream does
(an unqualified name in a slice takes the driver's name as its domain).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import cast

from harness.errors import ConfigError

API_VERSION = "resource.k8s.io/v1"
ALL, EXACT_COUNT = "All", "ExactCount"
NO_SCHEDULE, NO_EXECUTE, NO_EFFECT = "NoSchedule", "NoExecute", "None"
EQUAL, EXISTS = "Equal", "Exists"

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIX = {None: Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
           "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
           "P": Fraction(10**15), "E": Fraction(10**18), "Ki": Fraction(2**10), "Mi": Fraction(2**20),
           "Gi": Fraction(2**30), "Ti": Fraction(2**40), "Pi": Fraction(2**50), "Ei": Fraction(2**60)}


def quantity(text: object, where: str) -> int:
    """A Kubernetes quantity ("80Gi", "500m", 4) in milli-units, rounded up as the API server
    rounds a quantity to its smallest unit."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise ConfigError(where, f"a quantity is a string or an integer, got {text!r}")
    m = _QUANTITY.match(str(text).strip())
    if not m:
        raise ConfigError(where, f"{text!r} is not a quantity (such as '80Gi', '500m' or '2')")
    milli = Fraction(m.group(1)) * _SUFFIX[m.group(2)] * 1000
    return -((-milli.numerator) // milli.denominator)


def qualified(name: str, driver: str) -> str:
    """An attribute or capacity name with its domain: upstream's QualifiedName."""
    return name if "/" in name else f"{driver}/{name}"


# ---- what a node publishes ----------------------------------------------------------------
@dataclass(frozen=True)
class Version:
    """A semantic-version attribute: equal only to a version (CEL's semver type)."""

    text: str


@dataclass(frozen=True)
class DeviceTaint:
    key: str
    value: str
    effect: str  # NoSchedule or NoExecute (both block allocation), or None (informational)


@dataclass(frozen=True)
class DeviceToleration:
    """A request's toleration of device taints (KEP-5055), as upstream's ToleratesTaint reads
    it: an empty key matches every key (operator Exists), an empty effect every effect; Equal
    compares the value, Exists does not. `seconds` (tolerationSeconds, NoExecute only): how long
    a pod may keep a device after the taint came (None: for ever, negative: not at all)."""

    key: str = ""
    operator: str = EQUAL
    value: str = ""
    effect: str = ""
    seconds: int | None = None

    def tolerates(self, taint: DeviceTaint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        return self.operator == EXISTS or self.value == taint.value


@dataclass(frozen=True)
class RequestPolicy:
    """How a capacity request to a multi-allocatable device is rounded (KEP-5075): its default
    when a request names none, and either valid values or a range with a step."""

    default: int | None = None
    valid_values: tuple[int, ...] = ()
    valid_min: int | None = None
    valid_max: int | None = None
    step: int | None = None


@dataclass(frozen=True)
class Device:
    name: str
    attributes: dict[str, str | int | bool | Version] = field(default_factory=dict)  # qualified name -> value
    capacity: dict[str, int] = field(default_factory=dict)  # qualified name -> milli-units
    policies: dict[str, RequestPolicy] = field(default_factory=dict)  # qualified capacity name -> policy
    #: counter set -> counter -> milli-units this device draws when allocated (KEP-4815)
    consumes: dict[str, dict[str, int]] = field(default_factory=dict)
    multi: bool = False  # allowMultipleAllocations: capacity shared out by request (KEP-5075)
    taints: tuple[DeviceTaint, ...] = ()


@dataclass(frozen=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    devices: tuple[Device, ...]
    shared_counters: dict[str, dict[str, int]] = field(default_factory=dict)  # set -> counter -> milli


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions, all must hold


# ---- what a pod asks for ------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceRequest:
    """One request of a claim, or one alternative of a `firstAvailable` list."""

    name: str
    device_class: str = ""
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    capacity: dict[str, int] = field(default_factory=dict)  # qualified name -> milli-units asked
    tolerations: tuple[DeviceToleration, ...] = ()
    first_available: tuple[DeviceRequest, ...] = ()  # KEP-4816: the first that can be met is used


@dataclass(frozen=True)
class Constraint:
    requests: tuple[str, ...]  # empty: every request of the claim
    match_attribute: str


@dataclass(frozen=True)
class Claim:
    name: str
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[Constraint, ...] = ()


# ---- reading manifests --------------------------------------------------------------------
def _get(obj: dict, key: str, kind: type | tuple[type, ...], where: str, default=None, required=False):
    if key not in obj or obj[key] is None:
        if required:
            raise ConfigError(where, f"missing required field '{key}'")
        return default
    value = obj[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ConfigError(f"{where}.{key}", f"expected {_kind(kind)}, got {value!r}")
    if not isinstance(value, kind):
        raise ConfigError(f"{where}.{key}", f"expected {_kind(kind)}, got {value!r}")
    return value


def _kind(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({dict: "a mapping", list: "a list", str: "a string", int: "an integer",
                        bool: "true or false"}[k] for k in kinds)


def _known(obj: dict, fields: set[str], where: str) -> None:
    unknown = sorted(set(obj) - fields)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", f"not a field of this object in {API_VERSION} "
                                                  f"(or not modelled): known are {', '.join(sorted(fields))}")


def _selectors(spec: dict, where: str) -> tuple[str, ...]:
    out = []
    for i, sel in enumerate(_get(spec, "selectors", list, where, [])):
        w = f"{where}.selectors[{i}]"
        if not isinstance(sel, dict):
            raise ConfigError(w, f"expected a mapping with 'cel', got {sel!r}")
        _known(sel, {"cel"}, w)
        cel = _get(sel, "cel", dict, w, required=True)
        out.append(_get(cel, "expression", str, f"{w}.cel", required=True))
    return tuple(out)


def _counters(obj: dict, where: str) -> dict[str, int]:
    out = {}
    for name, c in obj.items():
        w = f"{where}.{name}"
        if not isinstance(c, dict) or "value" not in c:
            raise ConfigError(w, f"a counter is a mapping with 'value', got {c!r}")
        out[str(name)] = quantity(c["value"], f"{w}.value")
    return out


def device_class(manifest: dict, where: str) -> DeviceClass:
    meta = _get(manifest, "metadata", dict, where, required=True)
    name = _get(meta, "name", str, f"{where}.metadata", required=True)
    where = f"DeviceClass {name!r}"
    spec = _get(manifest, "spec", dict, where, {})
    _known(spec, {"selectors", "config", "extendedResourceName"}, f"{where}.spec")
    return DeviceClass(name, _selectors(spec, f"{where}.spec"))


def _attribute(value, where: str) -> str | int | bool | Version:
    if not isinstance(value, dict) or len(value) != 1:
        raise ConfigError(where, f"an attribute is one of string, int, bool or version, got {value!r}")
    (kind, v), = value.items()
    types = {"string": str, "int": int, "bool": bool, "version": str}
    if kind not in types:
        raise ConfigError(f"{where}.{kind}", "an attribute is one of string, int, bool or version")
    if not isinstance(v, types[kind]) or (kind == "int" and isinstance(v, bool)):
        raise ConfigError(f"{where}.{kind}", f"expected {_kind(types[kind])}, got {v!r}")
    if kind == "version":
        return Version(str(v))
    return cast(str | int | bool, v)


def _policy(raw: dict, where: str) -> RequestPolicy:
    _known(raw, {"default", "validValues", "validRange"}, where)
    default = quantity(raw["default"], f"{where}.default") if "default" in raw else None
    values = tuple(sorted(quantity(v, f"{where}.validValues[{i}]")
                          for i, v in enumerate(_get(raw, "validValues", list, where, []))))
    rng = _get(raw, "validRange", dict, where, {})
    _known(rng, {"min", "max", "step"}, f"{where}.validRange")

    def q(k):
        return quantity(rng[k], f"{where}.validRange.{k}") if k in rng else None
    return RequestPolicy(default, values, q("min"), q("max"), q("step"))


def _device(raw: dict, driver: str, where: str) -> Device:
    name = _get(raw, "name", str, where, required=True)
    where = f"{where} (device {name!r})"
    _known(raw, {"name", "attributes", "capacity", "consumesCounters", "allowMultipleAllocations", "taints",
                 "nodeName", "nodeSelector", "allNodes", "bindsToNode", "bindingConditions",
                 "bindingFailureConditions"}, where)
    attrs = {qualified(str(k), driver): _attribute(v, f"{where}.attributes.{k}")
             for k, v in _get(raw, "attributes", dict, where, {}).items()}
    capacity, policies = {}, {}
    for k, v in _get(raw, "capacity", dict, where, {}).items():
        w = f"{where}.capacity.{k}"
        if not isinstance(v, dict) or "value" not in v:
            raise ConfigError(w, f"a capacity is a mapping with 'value', got {v!r}")
        _known(v, {"value", "requestPolicy"}, w)
        capacity[qualified(str(k), driver)] = quantity(v["value"], f"{w}.value")
        if "requestPolicy" in v:
            policies[qualified(str(k), driver)] = _policy(_get(v, "requestPolicy", dict, w), f"{w}.requestPolicy")
    consumes = {}
    for i, c in enumerate(_get(raw, "consumesCounters", list, where, [])):
        w = f"{where}.consumesCounters[{i}]"
        cset = _get(c, "counterSet", str, w, required=True)
        consumes[cset] = _counters(_get(c, "counters", dict, w, required=True), f"{w}.counters")
    taints = []
    for i, t in enumerate(_get(raw, "taints", list, where, [])):
        w = f"{where}.taints[{i}]"
        effect = _get(t, "effect", str, w, required=True)
        if effect not in (NO_SCHEDULE, NO_EXECUTE, NO_EFFECT):
            raise ConfigError(f"{w}.effect", f"effect is {NO_SCHEDULE}, {NO_EXECUTE} or {NO_EFFECT}, got {effect!r}")
        taints.append(DeviceTaint(_get(t, "key", str, w, required=True), _get(t, "value", str, w, ""), effect))
    return Device(name, attrs, capacity, policies, consumes,
                  bool(_get(raw, "allowMultipleAllocations", bool, where, False)), tuple(taints))


def resource_slice(manifest: dict, where: str) -> ResourceSlice:
    meta = _get(manifest, "metadata", dict, where, required=True)
    name = _get(meta, "name", str, f"{where}.metadata", required=True)
    where = f"ResourceSlice {name!r}"
    spec = _get(manifest, "spec", dict, where, required=True)
    _known(spec, {"driver", "pool", "nodeName", "nodeSelector", "allNodes", "devices", "sharedCounters",
                  "perDeviceNodeSelection"}, f"{where}.spec")
    driver = _get(spec, "driver", str, f"{where}.spec", required=True)
    pool = _get(_get(spec, "pool", dict, f"{where}.spec", required=True), "name", str, f"{where}.spec.pool",
                required=True)
    devices = tuple(_device(d if isinstance(d, dict) else {}, driver, f"{where}.spec.devices[{i}]")
                    for i, d in enumerate(_get(spec, "devices", list, f"{where}.spec", [])))
    names = [d.name for d in devices]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}.spec.devices", f"device {next(n for n in names if names.count(n) > 1)!r} twice")
    shared = {}
    for i, s in enumerate(_get(spec, "sharedCounters", list, f"{where}.spec", [])):
        w = f"{where}.spec.sharedCounters[{i}]"
        shared[_get(s, "name", str, w, required=True)] = _counters(_get(s, "counters", dict, w, required=True),
                                                                    f"{w}.counters")
    return ResourceSlice(name, driver, pool, devices, shared)


def check_pools(slices: tuple[ResourceSlice, ...], where: Callable[[ResourceSlice], str]) -> None:
    """The slices one node publishes agree per pool: a counter set is published once, and every
    counter a device consumes is in a counter set of its pool (upstream keeps the counter sets
    in a slice of their own). `where` names a slice in an error."""
    published: dict[tuple[str, str, str], ResourceSlice] = {}
    for s in slices:
        for cset in s.shared_counters:
            first = published.setdefault((s.driver, s.pool, cset), s)
            if first is not s:
                raise ConfigError(f"{where(s)}.spec.sharedCounters", f"counter set {cset!r} of pool {s.pool!r} "
                                  f"is also in ResourceSlice {first.name!r}")
    for s in slices:
        for d in s.devices:
            for cset, cs in d.consumes.items():
                own = published.get((s.driver, s.pool, cset))
                missing = sorted(set(cs) - set(own.shared_counters[cset] if own else ()))
                if missing:
                    raise ConfigError(f"{where(s)}.spec.devices (device {d.name!r}).consumesCounters",
                                      f"counter set {cset!r} with counters {missing} is not among the "
                                      f"sharedCounters of pool {s.pool!r}")


def _toleration(raw: object, where: str) -> DeviceToleration:
    if not isinstance(raw, dict):
        raise ConfigError(where, f"a toleration is a mapping, got {raw!r}")
    _known(raw, {"key", "operator", "value", "effect", "tolerationSeconds"}, where)
    operator = _get(raw, "operator", str, where, EQUAL)
    if operator not in (EQUAL, EXISTS):
        raise ConfigError(f"{where}.operator", f"is {EQUAL} or {EXISTS}, got {operator!r}")
    key, value = _get(raw, "key", str, where, ""), _get(raw, "value", str, where, "")
    if operator == EXISTS and value:
        raise ConfigError(f"{where}.value", f"must be empty with operator {EXISTS}")
    if operator == EQUAL and not key:
        raise ConfigError(f"{where}.key", f"an empty key needs operator {EXISTS}")
    effect = _get(raw, "effect", str, where, "")
    if effect not in ("", NO_SCHEDULE, NO_EXECUTE):
        raise ConfigError(f"{where}.effect", f"is empty, {NO_SCHEDULE} or {NO_EXECUTE}, got {effect!r}")
    return DeviceToleration(key, operator, value, effect, _get(raw, "tolerationSeconds", int, where))


def _request(raw: dict, where: str, alternative: bool) -> DeviceRequest:
    name = _get(raw, "name", str, where, required=True)
    where = f"{where} (request {name!r})"
    if alternative:
        spec = raw
        _known(spec, {"name", "deviceClassName", "selectors", "allocationMode", "count", "tolerations",
                      "capacity"}, where)
    else:
        _known(raw, {"name", "exactly", "firstAvailable"}, where)
        if ("exactly" in raw) == ("firstAvailable" in raw):
            raise ConfigError(where, "a request has exactly one of 'exactly' and 'firstAvailable'")
        if "firstAvailable" in raw:
            subs = _get(raw, "firstAvailable", list, where)
            if not subs:
                raise ConfigError(f"{where}.firstAvailable", "needs at least one alternative")
            return DeviceRequest(name, first_available=tuple(
                _request(s if isinstance(s, dict) else {}, f"{where}.firstAvailable[{i}]", True)
                for i, s in enumerate(subs)))
        spec = _get(raw, "exactly", dict, where)
        where = f"{where}.exactly"
        _known(spec, {"deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations",
                      "capacity"}, where)
        if spec.get("adminAccess"):
            raise ConfigError(f"{where}.adminAccess", "admin access (a device not counted as allocated) "
                                                      "is not modelled")
    mode = _get(spec, "allocationMode", str, where, EXACT_COUNT)
    if mode not in (ALL, EXACT_COUNT):
        raise ConfigError(f"{where}.allocationMode", f"is {EXACT_COUNT} or {ALL}, got {mode!r}")
    count = _get(spec, "count", int, where, 1)
    if mode == EXACT_COUNT and count < 1:
        raise ConfigError(f"{where}.count", f"at least 1, got {count}")
    cap = _get(_get(spec, "capacity", dict, where, {}), "requests", dict, f"{where}.capacity", {})
    tolerations = tuple(_toleration(t, f"{where}.tolerations[{i}]")
                        for i, t in enumerate(_get(spec, "tolerations", list, where, [])))
    return DeviceRequest(name, _get(spec, "deviceClassName", str, where, required=True), _selectors(spec, where),
                         mode, count if mode == EXACT_COUNT else 0,
                         {k: quantity(v, f"{where}.capacity.requests.{k}") for k, v in cap.items()}, tolerations)


def claim(manifest: dict, where: str) -> Claim:
    """A ResourceClaim's or a ResourceClaimTemplate's claim (its spec.spec)."""
    meta = _get(manifest, "metadata", dict, where, required=True)
    name = _get(meta, "name", str, f"{where}.metadata", required=True)
    kind = manifest.get("kind", "ResourceClaim")
    where = f"{kind} {name!r}"
    spec = _get(manifest, "spec", dict, where, required=True)
    if kind == "ResourceClaimTemplate":
        spec, where = _get(spec, "spec", dict, f"{where}.spec", required=True), f"{where}.spec"
    devices = _get(spec, "devices", dict, f"{where}.spec", {})
    where = f"{where}.spec.devices"
    _known(devices, {"requests", "constraints", "config"}, where)
    requests = tuple(_request(r if isinstance(r, dict) else {}, f"{where}.requests[{i}]", False)
                     for i, r in enumerate(_get(devices, "requests", list, where, [])))
    names = [r.name for r in requests]
    constraints = []
    for i, c in enumerate(_get(devices, "constraints", list, where, [])):
        w = f"{where}.constraints[{i}]"
        _known(c, {"requests", "matchAttribute"}, w)
        reqs = tuple(_get(c, "requests", list, w, []))
        known = names + [f"{r.name}/{s.name}" for r in requests for s in r.first_available]
        for r in reqs:
            if r not in known:
                raise ConfigError(f"{w}.requests", f"no request {r!r} in this claim (it has {known})")
        attr = _get(c, "matchAttribute", str, w, required=True)
        if "/" not in attr:
            raise ConfigError(f"{w}.matchAttribute", f"a fully qualified name (domain/name), got {attr!r}")
        constraints.append(Constraint(reqs, attr))
    return Claim(name, requests, tuple(constraints))
