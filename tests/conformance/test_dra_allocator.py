"""Conformance: the structured DRA allocator (harness/dra/allocator.py) against upstream's
table-driven cases.

Each case translates one entry of kubernetes/kubernetes
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go,
TestAllocator (`testcases` map; read at 008b3652), named by its key in `CASES` below. Upstream's
fixtures are kept: node-1, DeviceClasses class-a (`device.driver == "driver-a"`) and class-b,
slices slice-N of pool-N, devices device-N, requests req-N, subrequests subReq-N, counter sets
counter-set-N, capacities capacity-0/1, unqualified names in the driver's domain. A node's
slices are what our node type publishes (upstream's slice-to-node selection is the caller's);
upstream's allocatedDevices are devices taken before the search (`DeviceState.taken`, counters
drawn), its allocatedCapacityDevices capacity already used (`cap_left`). The expected outcome is
upstream's: per claim, the (request, driver/pool/device) results in any order (upstream's
ConsistOf), or None where upstream's Allocate returns no allocation. "error" is an upstream
error; ours is a ConfigError. See docs/conformance.md, section DRA: the structured allocator.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.dra import allocator as al
from harness.dra.resources import claim, device_class, resource_slice
from harness.errors import ConfigError

A, B = "driver-a", "driver-b"


def class_(name: str, driver: str, extra: str = "") -> dict:
    return {"metadata": {"name": name}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{driver}"' + extra}}]}}


CLASSES = {"class-a": class_("class-a", A), "class-b": class_("class-b", B)}

# ---- upstream's fixture builders, as manifests ---------------------------------------------
NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
TOLERATE_NO_SCHEDULE = {"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"}
TOLERATE_NO_EXECUTE = {"operator": "Equal", "key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
RANGE = {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}  # withCapacityRequestPolicyRange


def dev(name, attrs=None, capacity=None, consumes=None, taints=(), multi=False, policy=None, from_counters=False):
    """device(name, capacity, attributes) and its with… wrappers."""
    out: dict = {"name": name, "attributes": {}}
    for k, v in (attrs or {}).items():
        kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else \
            "version" if isinstance(v, str) and v[:1].isdigit() else "string"
        out["attributes"][k] = {kind: v}
    cap = {k: {"value": v} for k, v in (capacity or {}).items()}
    if policy:
        for k in cap:
            cap[k]["requestPolicy"] = policy
    if consumes:
        out["consumesCounters"] = [{"counterSet": s, "counters": {c: {"value": v} for c, v in cs.items()}}
                                   for s, cs in consumes.items()]
        if from_counters:  # capacity copied from the counters consumed
            cap = {c: {"value": v} for cs in consumes.values() for c, v in cs.items()}
    if cap:
        out["capacity"] = cap
    if taints:
        out["taints"] = list(taints)
    if multi:
        out["allowMultipleAllocations"] = True
    return out


def slc(name, pool, driver=A, devices=(), shared=None) -> dict:
    spec = {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}, "nodeName": "node-1",
            "devices": list(devices)}
    if shared:
        spec["sharedCounters"] = [{"name": s, "counters": {c: {"value": v} for c, v in cs.items()}}
                                  for s, cs in shared.items()]
    return {"metadata": {"name": name}, "spec": spec}


def one(driver=A, pool="pool-1", name="slice-1", device="device-1") -> dict:
    """sliceWithOneDevice."""
    return slc(name, pool, driver, [dev(device)])


def many(n, driver=A, pool="pool-1") -> dict:
    """sliceWithMultipleDevices: device-0 … device-(n-1)."""
    return slc("slice-1", pool, driver, [dev(f"device-{i}") for i in range(n)])


def mem(q):
    return f'device.capacity["{A}"].memory.compareTo(quantity("{q}")) >= 0'


def attr(name, value):
    return f'device.attributes["{A}"].{name} == "{value}"'


def _spec(cls, count, selectors, capacity, tolerations, mode):
    spec: dict = {"deviceClassName": cls}
    if mode == "All":
        spec["allocationMode"] = "All"
    elif mode:
        spec["allocationMode"] = mode
        spec["count"] = count
    else:
        spec["count"] = count
    if selectors:
        spec["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if capacity is not None:
        spec["capacity"] = {"requests": {"capacity-0": capacity}}
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return spec


def req(name, cls="class-a", count=1, *selectors, capacity=None, tolerations=(), mode=None) -> dict:
    return {"name": name, "exactly": _spec(cls, count, selectors, capacity, tolerations, mode)}


def all_(name, cls="class-a", *selectors, capacity=None, tolerations=()) -> dict:
    return req(name, cls, 1, *selectors, capacity=capacity, tolerations=tolerations, mode="All")


def sub(name, cls="class-a", count=1, *selectors, capacity=None, tolerations=(), mode=None) -> dict:
    return {"name": name, **_spec(cls, count, selectors, capacity, tolerations, mode)}


def first(name, *subs) -> dict:
    return {"name": name, "firstAvailable": list(subs)}


def clm(name, *requests, constraints=()) -> dict:
    return {"metadata": {"name": name}, "spec": {"devices": {"requests": list(requests), "constraints": [
        {"requests": list(r), "matchAttribute": a} for r, a in constraints]}}}


def run(slices, claims, allocated=(), used=None, classes=None):
    """Allocate `claims` on node-1; per claim the sorted (request, driver/pool/device), or None."""
    cls = {n: device_class(c, "t") for n, c in (CLASSES if classes is None else classes).items()}
    devices = al.NodeDevices.of(tuple(resource_slice(s, "t") for s in slices))
    cc = al.compile_claims(tuple(claim(c, "t") for c in claims), devices, cls)
    state = al.DeviceState.fresh(devices, 1)
    for name in allocated:
        d = devices.names.index(name)
        state.taken[0, d] = True
        state.counter_left[0] -= devices.consumes[d]
    for name, q in (used or {}).items():
        state.cap_left[0, devices.names.index(name), 0] -= q * 1000
    ok, [a] = al.allocate(cc, devices, state, np.arange(1))
    if not ok[0]:
        return None
    assert a is not None
    out: dict[str, list] = {}
    for o, devs in zip(a.option, a.devices, strict=True):
        c, r = cc.options[o].split("/", 1)
        out.setdefault(c, []).extend((r, devices.names[d]) for d in devs)
    return {c: sorted(v) for c, v in out.items()}


def res(*pairs, claim_name="claim-0"):
    return {claim_name: sorted((r, d if d.count("/") == 2 else f"{A}/pool-1/{d}") for r, d in pairs)}


def merge(*results):
    out: dict = {}
    for r in results:
        out.update(r)
    return out


# ---- the cases -----------------------------------------------------------------------------
V = {"numa": 1, "driverVersion": "1.0.0", "stringAttribute": "stringAttributeValue", "boolAttribute": True}
GI = {"1": "1Gi", "2": "2Gi", "4": "4Gi", "6": "6Gi", "8": "8Gi"}


def memdev(name, q, **kw):
    return dev(name, capacity={"memory": q}, **kw)


def part(name, *consumes, from_counters=True, **kw):
    """A partitionable device: consumes counter-set-1 (then counter-set-2) counters."""
    sets = {f"counter-set-{i + 1}": c for i, c in enumerate(consumes)}
    return dev(name, consumes=sets, from_counters=from_counters, **kw)


def pool1(devices, shared):
    """Upstream's partitionable layout: devices in slice-1, sharedCounters in slice-2, one pool."""
    return [slc("slice-1", "pool-1", A, devices), slc("slice-2", "pool-1", A, (), shared)]


def cap_dev(name, value=None, policy=None, multi=True, cap="capacity-0", **kw):
    return dev(name, capacity={cap: value} if value is not None else None, policy=policy, multi=multi, **kw)


def two_claims(*request_kw):
    return [clm(f"claim-{i}", req("req-0", **kw)) for i, kw in enumerate(request_kw)]


P = "pool-1"
CASES: dict[str, tuple] = {
    # name: (slices, claims, expected[, allocated[, used capacity[, classes]]])
    # -- 1.1 basics
    "simple": ([one()], [clm("claim-0", req("req-0"))], res(("req-0", "device-1"))),
    "small-and-large": ([slc("slice-1", P, A, [memdev("device-1", "1Gi"), memdev("device-2", "2Gi")])],
                        [clm("claim-0", req("req-0", "class-a", 1, mem("1Gi")), req("req-1", "class-a", 1, mem("2Gi")))],
                        res(("req-0", "device-1"), ("req-1", "device-2"))),
    "small-and-large-backtrack-requests": (
        [slc("slice-1", P, A, [memdev("device-2", "2Gi"), memdev("device-1", "1Gi")])],
        [clm("claim-0", req("req-0", "class-a", 1, mem("1Gi")), req("req-1", "class-a", 1, mem("2Gi")))],
        res(("req-0", "device-1"), ("req-1", "device-2"))),
    "small-and-large-backtrack-claims": (
        [slc("slice-1", P, A, [memdev("device-2", "2Gi"), memdev("device-1", "1Gi")])],
        [clm("claim-0", req("req-0", "class-a", 1, mem("1Gi"))), clm("claim-1", req("req-1", "class-a", 1, mem("2Gi")))],
        merge(res(("req-0", "device-1")), res(("req-1", "device-2"), claim_name="claim-1"))),
    "devices-split-across-different-slices": (
        [one(), one(pool="pool-2", name="slice-2")], [clm("claim-0", req("req-0", count=2))],
        res(("req-0", "device-1"), ("req-0", f"{A}/pool-2/device-1"))),
    "not-enough-suitable-devices": ([one()], [clm("claim-0", req("req-0")), clm("claim-0", req("req-0"))], None),
    "already-allocated-devices": ([one()], [clm("claim-0", req("req-0"))], None, [f"{A}/{P}/device-1"]),
    "several-different-drivers": (
        [slc("slice-1", P, A, [dev("device-1"), dev("device-2")]), one(B)],
        [clm("claim-0", req("req-0")), clm("claim-1", req("req-0", "class-b"))],
        merge(res(("req-0", "device-1")), res(("req-0", f"{B}/{P}/device-1"), claim_name="claim-1"))),
    "max-number-devices": ([many(32)], [clm("claim-0", req("req-0", count=32))],
                           res(*(("req-0", f"device-{i}") for i in range(32)))),
    "no-slices": ([], [clm("claim-0", req("req-0"))], None),
    "no-classes": ([one()], [clm("claim-0", req("req-0"))], "error", (), None, {}),
    "unknown-class": ([one()], [clm("claim-0", req("req-0", "unknown-class"))], "error"),
    "empty-class": ([one()], [clm("claim-0", req("req-0", ""))], "error"),
    "unknown-allocation-mode": ([one()], [clm("claim-0", req("req-0", mode="future-mode"))], "error"),
    "unknown-selector": ([one()], [{"metadata": {"name": "claim-0"}, "spec": {"devices": {"requests": [
        {"name": "req-0", "exactly": {"deviceClassName": "class-a", "selectors": [{}]}}]}}}], "error"),
    "unknown-constraint": ([one()], [{"metadata": {"name": "claim-0"}, "spec": {"devices": {
        "requests": [req("req-0")], "constraints": [{}]}}}], "error"),
    "invalid-CEL-one-device": ([one()], [clm("claim-0", req("req-0", "class-a", 1, "noSuchVar"))], "error"),
    "invalid-CEL-one-device-class": ([one()], [clm("claim-0", req("req-0"))], "error", (), None,
                                     {"class-a": class_("class-a", A, " && noSuchVar")}),
    "invalid-CEL-all-devices": ([one()], [clm("claim-0", all_("req-0", "class-a", "noSuchVar"))], "error"),
    # -- 1.2 All
    "all-devices-single": ([one()], [clm("claim-0", all_("req-0"))], res(("req-0", "device-1"))),
    "all-devices-many": ([one(), one(pool="pool-2", name="slice-2")], [clm("claim-0", all_("req-0"))],
                         res(("req-0", "device-1"), ("req-0", f"{A}/pool-2/device-1"))),
    "all-devices-plus-another": ([one(), one(B, name="slice-2")],
                                 [clm("claim-0", all_("req-0")), clm("claim-1", req("req-0", "class-b"))],
                                 merge(res(("req-0", "device-1")), res(("req-0", f"{B}/{P}/device-1"), claim_name="claim-1"))),
    "all-devices-plus-another-reversed": (
        [one(), one(B, name="slice-2")], [clm("claim-1", req("req-0", "class-b")), clm("claim-0", all_("req-0"))],
        merge(res(("req-0", "device-1")), res(("req-0", f"{B}/{P}/device-1"), claim_name="claim-1"))),
    "all-devices-many-plus-another": (
        [slc("slice-1", P, A, [dev("device-1"), dev("device-2")]), one(B, name="slice-2")],
        [clm("claim-0", all_("req-0")), clm("claim-1", req("req-0", "class-b"))],
        merge(res(("req-0", "device-1"), ("req-0", "device-2")), res(("req-0", f"{B}/{P}/device-1"), claim_name="claim-1"))),
    "all-devices-many-plus-another-reversed": (
        [slc("slice-1", P, A, [dev("device-1"), dev("device-2")]), one(B, name="slice-2")],
        [clm("claim-1", req("req-0", "class-b")), clm("claim-0", all_("req-0"))],
        merge(res(("req-0", "device-1"), ("req-0", "device-2")), res(("req-0", f"{B}/{P}/device-1"), claim_name="claim-1"))),
    "all-devices-no-solution": ([one()], [clm("claim-1", req("req-0")), clm("claim-0", all_("req-0"))], None),
    "all-devices-no-solution-reversed": ([one()], [clm("claim-0", all_("req-0")), clm("claim-1", req("req-0"))], None),
    "all-devices-slice-without-devices": ([slc("slice-1", P)], [clm("claim-0", all_("req-0"))], None),
    "all-devices-no-slices": ([], [clm("claim-0", all_("req-0"))], None),
    "all-devices-some-allocated": ([slc("slice-1", P, A, [dev("device-1"), dev("device-2")])],
                                   [clm("claim-0", all_("req-0"))], None, [f"{A}/{P}/device-1"]),
    # -- 1.4 matchAttribute
    "with-constraint": ([slc("slice-1", P, A, [dev("device-1", V), dev("device-2", V)])],
                        [clm("claim-0", req("req-0"), req("req-1"), constraints=[
                            ((), f"{A}/numa"), ((), f"{A}/driverVersion"), ((), f"{A}/stringAttribute"),
                            ((), f"{A}/boolAttribute")])],
                        res(("req-0", "device-1"), ("req-1", "device-2"))),
    "with-constraint-non-existent-attribute": (
        [one()], [clm("claim-0", req("req-0"), constraints=[((), f"{A}/NonExistentAttribute")])], None),
    **{f"with-constraint-not-matching-{k}-attribute": (
        [slc("slice-1", P, A, [dev("device-1", {name: v1}), dev("device-2", {name: v2})])],
        [clm("claim-0", req("req-0", count=2), constraints=[((), f"{A}/{name}")])], None)
       for k, name, v1, v2 in [("int", "numa", 1, 2), ("string", "stringAttribute", "a", "b"),
                               ("bool", "boolAttribute", True, False), ("version", "driverVersion", "1.0.0", "2.0.0")]},
    "with-constraint-not-matching-int-attribute-all-devices": (
        [slc("slice-1", P, A, [dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2})])],
        [clm("claim-0", all_("req-0"), constraints=[((), f"{A}/numa")])], None),  # different: upstream errors
    "with-constraint-for-request": (
        [slc("slice-1", P, A, [dev("device-1", {"driverVersion": "1.0.0"}), dev("device-2", {"driverVersion": "2.0.0"})])],
        [clm("claim-0", req("req-0"), req("req-1"), constraints=[(("req-0",), f"{A}/driverVersion")])],
        res(("req-0", "device-1"), ("req-1", "device-2"))),
    "with-constraint-for-request-retry": (
        [slc("slice-1", P, A, [dev("device-1", {"driverVersion": "1.0.0", "stringAttribute": "a"}),
                               dev("device-2", {"driverVersion": "2.0.0", "stringAttribute": "b"}),
                               dev("device-3", {"driverVersion": "3.0.0", "stringAttribute": "b"})])],
        [clm("claim-0", req("req-0"), req("req-1"), constraints=[(("req-0",), f"{A}/driverVersion"),
                                                                  ((), f"{A}/stringAttribute")])],
        res(("req-0", "device-2"), ("req-1", "device-3"))),
    # -- 1.6 firstAvailable
    "prioritized-list-first-unavailable": (
        [one()], [clm("claim-0", first("req-0", sub("subReq-0", "class-b"), sub("subReq-1")))],
        res(("req-0/subReq-1", "device-1"))),
    "prioritized-list-non-available": (
        [one(), one(B, name="slice-2")],
        [clm("claim-0", first("req-0", sub("subReq-0", "class-b", 2), sub("subReq-1", "class-a", 2)))], None),
    "prioritized-list-subrequests-with-expressions": (
        [slc("slice-1", P, A, [memdev("device-1", "2Gi"), memdev("device-2", "2Gi"), memdev("device-3", "1Gi")])],
        [clm("claim-0", req("req-0", "class-a", 1, mem("1Gi")),
             first("req-1", sub("subReq-0", "class-a", 1, mem("4Gi")), sub("subReq-1", "class-a", 2, mem("2Gi"))))],
        res(("req-0", "device-3"), ("req-1/subReq-1", "device-1"), ("req-1/subReq-1", "device-2"))),
    "prioritized-list-subrequests-with-constraints-ref-parent-request": (
        [slc("slice-1", P, A, [memdev("device-1", "8Gi", attrs={"driverVersion": "1.0.0"})]),
         slc("slice-2", "pool-2", A, [memdev("device-2", "2Gi", attrs={"driverVersion": "2.0.0"}),
                                      memdev("device-3", "1Gi", attrs={"driverVersion": "1.0.0"})])],
        [clm("claim-0", req("req-0", "class-a", 1, mem("8Gi")),
             first("req-1", sub("subReq-0", "class-a", 1, mem("2Gi")), sub("subReq-1", "class-a", 1, mem("1Gi"))),
             constraints=[(("req-0", "req-1"), f"{A}/driverVersion")])],
        res(("req-0", "device-1"), ("req-1/subReq-1", f"{A}/pool-2/device-3"))),
    "prioritized-list-subrequests-with-constraints-ref-sub-request": (
        [slc("slice-1", P, A, [memdev("device-1", "8Gi", attrs={"driverVersion": "1.0.0"})]),
         slc("slice-2", "pool-2", A, [memdev("device-2", "2Gi", attrs={"driverVersion": "2.0.0"}),
                                      memdev("device-3", "1Gi", attrs={"driverVersion": "1.0.0"})])],
        [clm("claim-0", req("req-0", "class-a", 1, mem("8Gi")),
             first("req-1", sub("subReq-0", "class-a", 1, mem("2Gi")), sub("subReq-1", "class-a", 1, mem("1Gi"))),
             constraints=[(("req-0", "req-1/subReq-0"), f"{A}/driverVersion")])],
        res(("req-0", "device-1"), ("req-1/subReq-1", f"{A}/pool-2/device-2"))),
    "prioritized-list-with-backtracking": (
        [slc("slice-1", P, A, [memdev("device-1", "8Gi")]), slc("slice-2", "pool-2", A, [memdev("device-2", "4Gi")])],
        [clm("claim-0", first("req-0", sub("subReq-0", "class-a", 1, mem("8Gi")), sub("subReq-1", "class-a", 1, mem("4Gi"))),
             req("req-1", "class-a", 1, mem("8Gi")))],
        res(("req-0/subReq-1", f"{A}/pool-2/device-2"), ("req-1", "device-1"))),
    "prioritized-list-multi-request": (
        [slc("slice-1", P, A, [memdev("device-1", "8Gi")]), slc("slice-2", "pool-2", A, [memdev("device-2", "4Gi")])],
        [clm("claim-0", req("req-1", "class-a", 1, mem("8Gi")),
             first("req-0", sub("subReq-0", "class-a", 1, mem("8Gi")), sub("subReq-1", "class-a", 1, mem("4Gi"))))],
        res(("req-0/subReq-1", f"{A}/pool-2/device-2"), ("req-1", "device-1"))),
    "prioritized-list-too-many-in-first-subrequest": (
        [one()], [clm("claim-0", first("req-0", sub("subReq-0", "class-b", 500), sub("subReq-1")))],
        res(("req-0/subReq-1", "device-1"))),
    "prioritized-list-subrequests-with-allocation-mode-all": (
        [slc("slice-1", P, A, [dev("device-1"), dev("device-2")])],
        [clm("claim-0", first("req-0", sub("subReq-0", mode="All"), sub("subReq-1")))],
        res(("req-0/subReq-1", "device-2")), [f"{A}/{P}/device-1"]),
    "prioritized-list-allocation-mode-all": (
        [slc("slice-1", P, A, [dev("device-1"), dev("device-2")])],
        [clm("claim-0", first("req-0", sub("subReq-0", mode="All"), sub("subReq-1")))],
        res(("req-0/subReq-1", "device-1")), [f"{A}/{P}/device-2"]),
    "prioritized-list-allocation-mode-all-multiple-requests": (
        [slc("slice-1", P, A, [dev("device-1"), dev("device-2")])],
        [clm("claim-0", req("req-0"), first("req-1", sub("subReq-0", mode="All"), sub("subReq-1")))],
        res(("req-0", "device-1"), ("req-1/subReq-1", "device-2"))),
    "prioritized-list-max-allocation-limit-request": (
        [many(64)], [clm("claim-0", first("req-0", sub("subReq-0", "class-a", 32), sub("subReq-1", "class-a", 16)),
                         first("req-1", sub("subReq-0", "class-a", 32), sub("subReq-1", "class-a", 16)))],
        res(*[("req-0/subReq-1", f"device-{i}") for i in range(16)],
            *[("req-1/subReq-1", f"device-{i}") for i in range(16, 32)])),
    "check-combinations-with-prioritized-list": (
        [slc("slice-1", P, A, [dev("device-1", {"type": "X"}), dev("device-2", {"type": "Y"}),
                               dev("device-3", {"type": "Y"})])],
        [clm("claim-0", first("req-1", sub("subReq-0", "class-a", 3, attr("type", "Y")), sub("subReq-1", "class-a", 2)),
             first("req-2", sub("subReq-0", "class-a", 2), sub("subReq-1", "class-a", 1, attr("type", "X"))))],
        res(("req-1/subReq-1", "device-2"), ("req-1/subReq-1", "device-3"), ("req-2/subReq-1", "device-1"))),
    **{f"all-devices-{k}-prioritized-list": (
        s + [one(B, "pool-2", "slice-2")], [clm("claim-0", first("req-0", sub("subReq-0", mode="All"),
                                                                  sub("subReq-1", "class-b")))],
        res(("req-0/subReq-1", f"{B}/pool-2/device-1")), alloc)
       for k, s, alloc in [("slice-without-devices", [slc("slice-1", P)], ()), ("no-slices", [], ()),
                           ("some-allocated", [slc("slice-1", P, A, [dev("device-1"), dev("device-2")])],
                            [f"{A}/{P}/device-1"])]},
    # -- 1.12 search (results only; upstream also counts allocateOne calls)
    "check-combinations-within-single-request-single-pool-single-slice": (
        [many(4)], [clm("claim-0", req("req-0", count=5))], None),
    "check-combinations-with-backtracking": (
        [slc("slice-1", P, A, [dev("device-1", {"type": "X"}), dev("device-2", {"type": "Y"}),
                               dev("device-3", {"type": "Y"})])],
        [clm("claim-0", req("req-1", count=2), req("req-2", "class-a", 1, attr("type", "X")))],
        res(("req-1", "device-2"), ("req-1", "device-3"), ("req-2", "device-1"))),
    # -- 1.7 partitionable devices
    "partitionable-devices-single-device": (
        pool1([part("device-1", {"memory": "4Gi"})], {"counter-set-1": {"memory": "8Gi"}}),
        [clm("claim-0", req("req-0"))], res(("req-0", "device-1"))),
    "partitionable-devices-multiple-devices": (
        pool1([part("device-1", {"memory": "4Gi"}), part("device-2", {"memory": "6Gi"}), part("device-3", {"memory": "4Gi"})],
              {"counter-set-1": {"memory": "8Gi"}}),
        [clm("claim-0", req("req-0"), req("req-1"))], res(("req-0", "device-1"), ("req-1", "device-3"))),
    "partitionable-devices-prioritized-list": (
        pool1([part("device-1", {"memory": "4Gi"}), part("device-2", {"memory": "6Gi"}), part("device-3", {"memory": "4Gi"})],
              {"counter-set-1": {"memory": "8Gi"}}),
        [clm("claim-0", req("req-0"), first("req-1", sub("subReq-0", "class-a", 1, mem("6Gi")),
                                            sub("subReq-1", "class-a", 1, mem("4Gi"))))],
        res(("req-0", "device-1"), ("req-1/subReq-1", "device-3"))),
    "partitionable-devices-multiple-capacity-pools": (
        pool1([part("device-1", {"memory": "4Gi"}, {"cpus": "4"}), part("device-2", {"memory": "6Gi"}, {"cpus": "6"}),
               part("device-3", {"memory": "4Gi"}, {"cpus": "4"})],
              {"counter-set-1": {"memory": "18Gi"}, "counter-set-2": {"cpus": "8"}}),
        [clm("claim-0", req("req-0"), first("req-1", sub("subReq-0", "class-a", 1, mem("6Gi")),
                                            sub("subReq-1", "class-a", 1, mem("4Gi"))))],
        res(("req-0", "device-1"), ("req-1/subReq-1", "device-3"))),
    "partitionable-devices-multiple-counters": (
        pool1([part("device-1", {"memory": "4Gi", "cpus": "6"}, {"cpus": "4", "memory": "2Gi"}, from_counters=False),
               part("device-2", {"memory": "6Gi", "cpus": "4"}, {"cpus": "6", "memory": "6Gi"}, from_counters=False),
               part("device-3", {"memory": "4Gi", "cpus": "4"}, {"cpus": "4", "memory": "4Gi"}, from_counters=False)],
              {"counter-set-1": {"cpus": "8", "memory": "18Gi"}, "counter-set-2": {"cpus": "12", "memory": "18Gi"}}),
        [clm("claim-0", req("req-0", count=2))], res(("req-0", "device-2"), ("req-0", "device-3"))),
    "partitionable-devices-unused-counters-in-counter-set": (
        pool1([part("device-1", {"memory": "5Gi"}), part("device-2", {"memory": "4Gi"}), part("device-3", {"memory": "4Gi"})],
              {"counter-set-1": {"memory": "8Gi", "unused": "1Gi"}}),
        [clm("claim-0", req("req-0", count=2))], res(("req-0", "device-2"), ("req-0", "device-3"))),
    "partitionable-devices-no-capacity-available": (
        pool1([part("device-1", {"memory": "4Gi"}), part("device-2", {"memory": "16Gi"})],
              {"counter-set-1": {"memory": "18Gi"}}),
        [clm("claim-0", req("req-0"))], None, [f"{A}/{P}/device-2"]),
    "partitionable-devices-overallocated-capacity-pool": (
        pool1([part("device-1", {"memory": "4Gi"}), part("device-2", {"memory": "20Gi"})],
              {"counter-set-1": {"memory": "18Gi"}}),
        [clm("claim-0", req("req-0"))], None, [f"{A}/{P}/device-2"]),
    "partitionable-devices-with-attribute-selector": (
        pool1([part(f"device-{i}", {f"cpu{i}": "1"}, {"mem": "10Gi"}, attrs={"special": i == 1}) for i in (1, 2, 3)],
              {"counter-set-1": {"cpu1": "1", "cpu2": "1", "cpu3": "1"}, "counter-set-2": {"mem": "30Gi"}}),
        [clm("claim-0", req("req-0", count=2), req("req-1", "class-a", 1, f'device.attributes["{A}"].special'))],
        res(("req-0", "device-2"), ("req-0", "device-3"), ("req-1", "device-1"))),
    "partitionable-devices-same-counter-set-name-in-different-resource-slices": (
        pool1([part("device-1", {"memory": "4Gi"})], {"counter-set-1": {"memory": "8Gi"}})
        + [slc("slice-3", P, A, (), {"counter-set-1": {"memory": "8Gi"}})],
        [clm("claim-0", req("req-0"))], "error"),
    "partitionable-devices-device-counter-consumption-references-unknown-counter-set": (
        pool1([part("device-1", {"memory": "4Gi"}), dev("device-2", consumes={"unknown": {"memory": "4Gi"}})],
              {"counter-set-1": {"memory": "8Gi"}}), [clm("claim-0", req("req-0"))], "error"),
    "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set": (
        pool1([part("device-1", {"unknown": "4Gi"})], {"counter-set-1": {"memory": "8Gi"}}),
        [clm("claim-0", req("req-0"))], "error"),
    "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool": (
        [slc("slice-1", P, A, [part("device-1", {"memory": "4Gi"})]),
         slc("slice-2", "pool-2", A, (), {"counter-set-1": {"memory": "8Gi"}})], [clm("claim-0", req("req-0"))], "error"),
    # -- 1.8 consumable capacity (class-a; one claim per request unless said)
    "consumable-capacity-multi-allocatable-device-with-missing-capacity-request": (
        [slc("slice-1", P, A, [cap_dev("device-1", "1", cap="capacity-1")])],
        [clm("claim-0", req("req-0", capacity="1"))], None),
    "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request": (
        [slc("slice-1", P, A, [cap_dev("device-1")])], two_claims({}, {}),
        merge(res(("req-0", "device-1")), res(("req-0", "device-1"), claim_name="claim-1"))),
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request": (
        [slc("slice-1", P, A, [cap_dev("device-1", "1"), cap_dev("device-2", "1")])], two_claims({}, {}),
        merge(res(("req-0", "device-1")), res(("req-0", "device-2"), claim_name="claim-1"))),
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block": (
        [slc("slice-1", P, A, [cap_dev("device-1", "2")])], two_claims({}, {}), None),
    "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request": (
        [slc("slice-1", P, A, [cap_dev("device-1", "2")])], two_claims({"capacity": "1"}, {"capacity": "1"}),
        merge(res(("req-0", "device-1")), res(("req-0", "device-1"), claim_name="claim-1"))),
    "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request": (
        [slc("slice-1", P, A, [cap_dev("device-1", "4", RANGE)])], two_claims({}, {}),
        merge(res(("req-0", "device-1")), res(("req-0", "device-1"), claim_name="claim-1"))),
    "consumable-capacity-multi-allocatable-device-with-zero-request-policy": (
        [slc("slice-1", P, A, [cap_dev("device-1", "1", {"default": "0", "validValues": ["0"]})])], two_claims({}, {}),
        merge(res(("req-0", "device-1")), res(("req-0", "device-1"), claim_name="claim-1"))),
    "consumable-capacity-multi-allocatable-device-violates-zero-request-policy": (
        [slc("slice-1", P, A, [cap_dev("device-1", "1", {"default": "0", "validValues": ["0"]})])],
        two_claims({"capacity": "1"}), None),
    "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request": (
        [slc("slice-1", P, A, [cap_dev("device-1", "4", RANGE)])], two_claims({"capacity": "1"}, {"capacity": "1"}),
        merge(res(("req-0", "device-1")), res(("req-0", "device-1"), claim_name="claim-1"))),
    "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request": (
        [slc("slice-1", P, A, [cap_dev("device-1", "2", RANGE)])], two_claims({"capacity": "1"}, {"capacity": "2"}), None),
    "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy": (
        [slc("slice-1", P, A, [cap_dev("device-1", "10", RANGE)])], two_claims({"capacity": "6"}), None),
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining": (
        [slc("slice-1", P, A, [cap_dev("device-1", "4", RANGE), cap_dev("device-2", "4", RANGE)])],
        two_claims({"capacity": "2"}), res(("req-0", "device-1")), (), {f"{A}/{P}/device-1": 2}),
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device": (
        [slc("slice-1", P, A, [cap_dev("device-1", "4", RANGE), cap_dev("device-2", "4", RANGE)])],
        two_claims({"capacity": "2"}), res(("req-0", "device-2")), (), {f"{A}/{P}/device-1": 4}),
    "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity": (
        [slc("slice-1", P, A, [cap_dev("device-1", "4", RANGE)])], two_claims({"capacity": "2"}), None, (),
        {f"{A}/{P}/device-1": 4}),
    "consumable-capacity-with-multi-allocatable-device-backtrack": (
        [slc("slice-1", P, A, [cap_dev("device-2", "2", attrs={"stringAttribute": "value1"}),
                               cap_dev("device-1", "4", attrs={"stringAttribute": "value2"})])],
        [clm("claim-0", req("req-0", capacity="2"), req("req-1", capacity="2"), constraints=[((), f"{A}/stringAttribute")]),
         clm("claim-1", req("req-0", capacity="2"))],
        merge(res(("req-0", "device-1"), ("req-1", "device-1")), res(("req-0", "device-2"), claim_name="claim-1"))),
    "consumable-capacity-multi-allocatable-device-with-subrequest": (
        [slc("slice-1", P, A, [cap_dev("device-1", "2")])],
        [clm("claim-0", first("req-0", sub("subReq-0", capacity="4"), sub("subReq-1", capacity="2"), sub("subReq-2")))],
        res(("req-0/subReq-1", "device-1"))),
    "consumable-capacity-allocation-mode-all-filter-out-no-capacity": (
        [slc("slice-1", P, A, [cap_dev("device-1", "2"), cap_dev("device-2")])],
        [clm("claim-0", all_("req-0", capacity="1"))], res(("req-0", "device-1"))),
    "consumable-capacity-allocation-mode-all-filter-out-insufficient-capacity": (
        [slc("slice-1", P, A, [cap_dev("device-1", "2"), cap_dev("device-2", "1")])],
        [clm("claim-0", all_("req-0", capacity="2"))], res(("req-0", "device-1"))),
    "consumable-capacity-allocation-mode-all-allocating-sufficient": (
        [slc("slice-1", P, A, [cap_dev("device-1", "2"), cap_dev("device-2", "1")])],
        [clm("claim-0", req("req-0", capacity="1"), all_("req-1", capacity="1"))],
        res(("req-0", "device-1"), ("req-1", "device-1"), ("req-1", "device-2"))),
    "consumable-capacity-allocation-mode-all-allocating-insufficient": (
        [slc("slice-1", P, A, [cap_dev("device-1", "1"), cap_dev("device-2", "1")])],
        [clm("claim-0", req("req-0", capacity="1"), all_("req-1", capacity="1"))], None),
    "consumable-capacity-allocation-mode-all-in-use-insufficient": (  # different: upstream takes device-2 alone
        [slc("slice-1", P, A, [cap_dev("device-1", "1"), cap_dev("device-2", "1")])],
        [clm("claim-0", all_("req-0", capacity="1"))], None, (), {f"{A}/{P}/device-1": 1}),
    "consumable-capacity-dedicated-device-with-consumable-capacity-request": (
        [slc("slice-1", P, A, [cap_dev("device-1", "1", multi=False)])], two_claims({"capacity": "1"}),
        res(("req-0", "device-1"))),
    "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request": (
        [slc("slice-1", P, A, [cap_dev("device-1", "1", multi=False)])], two_claims({"capacity": "1"}, {"capacity": "1"}),
        None),
    "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector": (
        [slc("slice-1", P, A, [cap_dev("device-1", "1")])], two_claims({}), None, (), None,
        {"class-a": class_("class-a", A, " && device.allowMultipleAllocations == false")}),
    # -- 1.9 admin access (refused when the claim is read)
    "admin-access-enabled": ([one()], [{"metadata": {"name": "claim-0"}, "spec": {"devices": {"requests": [
        {"name": "req-0", "exactly": {"deviceClassName": "class-a", "adminAccess": True}}]}}}], "error"),
    # -- 1.10 taints
    "tainted-two-devices": ([slc("slice-1", P, A, [dev("device-1", taints=[NO_SCHEDULE]), dev("device-2", taints=[NO_EXECUTE])])],
                            [clm("claim-0", req("req-0"))], None),
    "tainted-one-device-two-taints": ([slc("slice-1", P, A, [dev("device-1", taints=[NO_SCHEDULE, NO_EXECUTE])])],
                                      [clm("claim-0", req("req-0"))], None),
    "tainted-two-devices-tolerated": (
        [slc("slice-1", P, A, [dev("device-1", taints=[NO_SCHEDULE]), dev("device-2", taints=[NO_EXECUTE])])],
        [clm("claim-0", req("req-0", tolerations=[TOLERATE_NO_EXECUTE]))], res(("req-0", "device-2"))),
    "tainted-two-devices-prioritized-list-tolerated": (
        [slc("slice-1", P, A, [dev("device-1", taints=[NO_SCHEDULE]), dev("device-2", taints=[NO_EXECUTE])])],
        [clm("claim-0", first("req-0", sub("subReq-0", "class-b"), sub("subReq-1", tolerations=[TOLERATE_NO_EXECUTE])))],
        res(("req-0/subReq-1", "device-2"))),
    "tainted-one-device-two-taints-both-tolerated": (
        [slc("slice-1", P, A, [dev("device-1", taints=[NO_SCHEDULE, NO_EXECUTE])])],
        [clm("claim-0", req("req-0", tolerations=[TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE]))], res(("req-0", "device-1"))),
    "tainted-no-effect": ([slc("slice-1", P, A, [dev("device-1", taints=[{"key": "taint-key", "effect": "None"}])])],
                          [clm("claim-0", req("req-0"))], res(("req-0", "device-1"))),
    "tainted-all-devices-single": ([slc("slice-1", P, A, [dev("device-1", taints=[NO_SCHEDULE])])],
                                   [clm("claim-0", all_("req-0"))], None),
    "tainted-prioritized-list": (
        [slc("slice-1", P, A, [dev("device-1", taints=[NO_SCHEDULE]), dev("device-2", taints=[NO_EXECUTE])])],
        [clm("claim-0", first("req-0", sub("subReq-0", "class-b"), sub("subReq-1")))], None),
}

#: translated, our outcome pinned, upstream's differs (docs/conformance.md says why)
DIFFERENT = {
    "with-constraint-not-matching-int-attribute-all-devices": "upstream: error (All's device fails a constraint)",
    "consumable-capacity-allocation-mode-all-in-use-insufficient": "upstream: device-2 (All sized after in-use capacity)",
}


@pytest.mark.parametrize("name", list(CASES))
def test_upstream_case(name):
    slices, claims, expected, *rest = CASES[name]
    allocated = rest[0] if rest else ()
    used = rest[1] if len(rest) > 1 else None
    classes = rest[2] if len(rest) > 2 else None
    if expected == "error":
        with pytest.raises(ConfigError):
            run(slices, claims, allocated, used, classes)
        return
    assert run(slices, claims, allocated, used, classes) == expected


# -- policy rounding, asserted on what each share takes (upstream asserts consumedCapacity)
@pytest.mark.parametrize("name, value, policy, asked, taken", [
    ("consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request", "4", RANGE, None, 2),
    ("consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request", "4", RANGE, "1", 2),
    ("consumable-capacity-multi-allocatable-device-with-range-policy-step", "4", RANGE, "3", 4),
    ("consumable-capacity-multi-allocatable-device-with-valid-values-policy", "4",
     {"default": "1", "validValues": ["1", "2"]}, "2", 2),
    ("consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up", "3",
     {"default": "1", "validValues": ["1", "3"]}, "2", 3),
    ("consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request", "1", None, None, 1),
    ("consumable-capacity-multi-allocatable-device-with-zero-request-policy", "1",
     {"default": "0", "validValues": ["0"]}, None, 0),
])
def test_consumed_capacity(name, value, policy, asked, taken):
    s = resource_slice(slc("slice-1", P, A, [cap_dev("device-1", value, policy)]), "t")
    devices = al.NodeDevices.of((s,))
    c = claim(clm("claim-0", req("req-0", capacity=asked)), "t")
    cc = al.compile_claims((c,), devices, {n: device_class(k, "t") for n, k in CLASSES.items()})
    ok, [a] = al.allocate(cc, devices, al.DeviceState.fresh(devices, 1), np.arange(1))
    assert ok[0] and cc.take_cap[0, 0, 0] == taken * 1000


# -- tolerations as upstream's DeviceToleration.ToleratesTaint reads them (KEP-5055 API)
@pytest.mark.parametrize("toleration, tolerated", [
    (TOLERATE_NO_EXECUTE, True),
    ({"operator": "Equal", "key": "taint-key", "value": "taint-value", "effect": "NoExecute"}, False),  # value differs
    ({"operator": "Exists", "key": "taint-key"}, True),  # any effect
    ({"operator": "Exists"}, True),  # empty key: every taint
    ({"operator": "Exists", "key": "other-key"}, False),
    ({"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"}, False),
])
def test_toleration_of_a_no_execute_taint(toleration, tolerated):
    got = run([slc("slice-1", P, A, [dev("device-1", taints=[NO_EXECUTE])])],
              [clm("claim-0", req("req-0", tolerations=[toleration]))])
    assert (got is not None) == tolerated
