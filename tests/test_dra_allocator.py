"""The structured allocator on small nodes whose answers are worked out by hand: device order,
backtracking over a matchAttribute constraint, a NIC and a GPU on one PCIe root, All, MIG
profiles drawing on a GPU's shared counters, shares of a multi-allocatable device rounded by
its request policy, a firstAvailable fallback, taints."""

from __future__ import annotations

import numpy as np
import pytest

from harness.dra import allocator as al
from harness.dra.resources import claim, device_class, resource_slice
from harness.errors import ConfigError

GPU, NIC = "gpu.example.com", "nic.example.com"
CLASSES = {c.name: c for c in [
    device_class({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}}, "t"),
    device_class({"metadata": {"name": "nic"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{NIC}"'}}]}}, "t"),
    device_class({"metadata": {"name": "any"}}, "t"),
]}


def dev(name, **attrs):
    out = {"name": name, "attributes": {}}
    for k, v in attrs.items():
        kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "string"
        out["attributes"][k] = {kind: v}
    return out


def slice_(driver, devices, shared=None, pool="node-0"):
    spec = {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}, "nodeName": pool,
            "devices": devices}
    if shared:
        spec["sharedCounters"] = shared
    return resource_slice({"metadata": {"name": f"{pool}-{driver}"}, "spec": spec}, "t")


def req(name, cls="gpu", count=1, mode=None, selectors=(), capacity=None):
    exactly = {"deviceClassName": cls, "count": count}
    if mode:
        exactly = {"deviceClassName": cls, "allocationMode": mode}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    return {"name": name, "exactly": exactly}


def claim_(*requests, constraints=(), name="c"):
    return claim({"metadata": {"name": name}, "spec": {"devices": {
        "requests": list(requests), "constraints": [{"requests": list(r), "matchAttribute": a} for r, a in constraints]}}},
        "t")


def run(slices, claims, n_nodes=1, state=None):
    devices = al.NodeDevices.of(tuple(slices))
    cc = al.compile_claims(tuple(claims), devices, CLASSES)
    state = state or al.DeviceState.fresh(devices, n_nodes)
    ok, allocs = al.allocate(cc, devices, state, np.arange(n_nodes))
    return devices, cc, state, ok, allocs


def picked(devices, a):
    return [[devices.names[d].rsplit("/", 1)[1] for d in devs] for devs in a.devices]


def test_devices_are_taken_in_the_order_the_node_publishes_them():
    devices, _, _, ok, allocs = run([slice_(GPU, [dev("gpu-0"), dev("gpu-1"), dev("gpu-2")])],
                                    [claim_(req("a", count=2))])
    assert ok.tolist() == [True] and picked(devices, allocs[0]) == [["gpu-0", "gpu-1"]]


def test_a_constraint_backtracks_past_the_first_device():
    # gpu-0 is alone in NVLink domain a; two GPUs of one domain are gpu-1 and gpu-2 (domain b)
    gpus = [dev("gpu-0", nvlink="a"), dev("gpu-1", nvlink="b"), dev("gpu-2", nvlink="b")]
    devices, _, _, ok, allocs = run([slice_(GPU, gpus)], [claim_(req("a", count=2), constraints=[(("a",), f"{GPU}/nvlink")])])
    assert ok.tolist() == [True] and picked(devices, allocs[0]) == [["gpu-1", "gpu-2"]]


def test_a_device_without_the_constrained_attribute_is_never_taken():
    gpus = [dev("gpu-0"), dev("gpu-1", nvlink="b")]
    _, _, _, ok, _ = run([slice_(GPU, gpus)], [claim_(req("a", count=2), constraints=[((), f"{GPU}/nvlink")])])
    assert ok.tolist() == [False]


def test_a_nic_and_a_gpu_on_one_pcie_root():
    # node type A: its GPU on root pci-0, its NIC on pci-1 (no pair); node type B: gpu-1 and nic-0
    # share pci-1 (both drivers publish the standard attribute resource.kubernetes.io/pcieRoot)
    def on(root):
        return {"resource.kubernetes.io/pcieRoot": root}
    apart = [slice_(GPU, [dev("gpu-0", **on("pci-0"))]), slice_(NIC, [dev("nic-0", **on("pci-1"))])]
    paired = [slice_(GPU, [dev("gpu-0", **on("pci-0")), dev("gpu-1", **on("pci-1"))]),
              slice_(NIC, [dev("nic-0", **on("pci-1"))])]
    c = claim_(req("gpu"), req("nic", cls="nic"), constraints=[(("gpu", "nic"), "resource.kubernetes.io/pcieRoot")])
    assert run(apart, [c])[3].tolist() == [False]
    devices, _, _, ok, allocs = run(paired, [c])
    assert ok.tolist() == [True]
    assert picked(devices, allocs[0]) == [["gpu-1"], ["nic-0"]]  # gpu-0 tried first, then backtracked


def test_all_takes_every_matching_device_and_fails_if_one_is_taken():
    s = [slice_(GPU, [dev("gpu-0"), dev("gpu-1"), dev("gpu-2")])]
    devices, cc, state, ok, allocs = run(s, [claim_(req("a", mode="All"))], n_nodes=2)
    assert ok.tolist() == [True, True] and picked(devices, allocs[0]) == [["gpu-0", "gpu-1", "gpu-2"]]
    one = al.compile_claims((claim_(req("b")),), devices, CLASSES)
    _, [a, _] = al.allocate(one, devices, state, np.arange(2))
    al.commit(one, devices, state, 0, a)
    ok, _ = al.allocate(cc, devices, state, np.arange(2))
    assert ok.tolist() == [False, True]
    al.commit(one, devices, state, 0, a, sign=-1)
    assert al.allocate(cc, devices, state, np.arange(2))[0].tolist() == [True, True]


def mig_node():
    """One 40 GB GPU split by counters: 7 compute slices, 40 memory units (1 unit = 1Gi)."""
    shared = [{"name": "gpu-0-counters", "counters": {"slices": {"value": "7"}, "memory": {"value": "40Gi"}}}]

    def profile(name, slices, mem):
        return {"name": name, "attributes": {"profile": {"string": name.split("-", 2)[2]}},
                "consumesCounters": [{"counterSet": "gpu-0-counters",
                                      "counters": {"slices": {"value": str(slices)}, "memory": {"value": mem}}}]}
    devices = [profile("gpu-0-7g.40gb", 7, "40Gi"), profile("gpu-0-3g.20gb-0", 3, "20Gi"),
               profile("gpu-0-3g.20gb-1", 3, "20Gi"), profile("gpu-0-1g.5gb-0", 1, "5Gi"),
               profile("gpu-0-1g.5gb-1", 1, "5Gi")]
    for d in devices:
        d["attributes"]["profile"] = {"string": d["name"].split("-")[2]}
    return [slice_(GPU, devices, shared)]


def profile_req(name, profile, count=1):
    return req(name, count=count, selectors=[f'device.attributes["{GPU}"].profile == "{profile}"'])


def test_mig_profiles_exhaust_their_gpus_counters():
    # two 3g.20gb take 6 of 7 slices and 40 of 40 GB: a 1g.5gb no longer fits (memory), nor the 7g
    s = mig_node()
    devices, _, _, ok, allocs = run(s, [claim_(profile_req("a", "3g.20gb", 2), profile_req("b", "1g.5gb"))])
    assert ok.tolist() == [False]
    devices, cc, state, ok, allocs = run(s, [claim_(profile_req("a", "3g.20gb", 2))])
    assert ok.tolist() == [True]
    al.commit(cc, devices, state, 0, allocs[0])
    assert state.counter_left[0].tolist() == [1000, 0]  # slices left 1, memory left 0 (milli-units)
    for p in ("1g.5gb", "7g.40gb"):
        one = al.compile_claims((claim_(profile_req("x", p)),), devices, CLASSES)
        assert al.allocate(one, devices, state, np.arange(1))[0].tolist() == [False]
    # the whole GPU alone: 7 slices and 40 GB; after it nothing else
    devices, _, _, ok, allocs = run(s, [claim_(profile_req("a", "7g.40gb"), profile_req("b", "1g.5gb"))])
    assert ok.tolist() == [False]
    devices, _, _, ok, allocs = run(s, [claim_(profile_req("b", "1g.5gb", 2), profile_req("a", "3g.20gb"))])
    assert ok.tolist() == [True] and picked(devices, allocs[0]) == [["gpu-0-1g.5gb-0", "gpu-0-1g.5gb-1"],
                                                                      ["gpu-0-3g.20gb-0"]]


def shared_gpu(policy):
    return [slice_(GPU, [{"name": "gpu-0", "allowMultipleAllocations": True,
                          "capacity": {"memory": {"value": "80Gi", "requestPolicy": policy}}}])]


def test_shares_of_a_multi_allocatable_device_round_up_to_the_policys_step():
    # validRange min 10Gi step 10Gi: 15Gi takes 20Gi; four shares fill 80Gi, a fifth does not fit
    s = shared_gpu({"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}})
    share = claim_(req("a", capacity={f"{GPU}/memory": "15Gi"}))
    devices = al.NodeDevices.of(tuple(s))
    cc = al.compile_claims((share,), devices, CLASSES)
    state = al.DeviceState.fresh(devices, 1)
    for k in range(4):
        ok, [a] = al.allocate(cc, devices, state, np.arange(1))
        assert ok.tolist() == [True], k
        al.commit(cc, devices, state, 0, a)
    assert state.cap_left[0, 0, 0] == 0
    assert al.allocate(cc, devices, state, np.arange(1))[0].tolist() == [False]


def test_a_share_without_a_request_takes_the_policys_default_and_valid_values_round_up():
    s = shared_gpu({"default": "10Gi", "validValues": ["10Gi", "40Gi"]})
    devices = al.NodeDevices.of(tuple(s))
    for asked, taken in ((None, 10), ("11Gi", 40), ("40Gi", 40)):
        c = claim_(req("a", capacity={f"{GPU}/memory": asked} if asked else None))
        cc = al.compile_claims((c,), devices, CLASSES)
        assert cc.take_cap[0, 0, 0] == taken * 2**30 * 1000
    too_big = al.compile_claims((claim_(req("a", capacity={f"{GPU}/memory": "41Gi"})),), devices, CLASSES)
    assert not too_big.match.any()


def test_first_available_falls_back_to_the_next_alternative():
    gpus = [dev("gpu-0", model="A100"), dev("gpu-1", model="A100")]
    alternatives = {"name": "a", "firstAvailable": [
        {"name": "two-h100", "deviceClassName": "gpu", "count": 2,
         "selectors": [{"cel": {"expression": f'device.attributes["{GPU}"].model == "H100"'}}]},
        {"name": "one-a100", "deviceClassName": "gpu",
         "selectors": [{"cel": {"expression": f'device.attributes["{GPU}"].model == "A100"'}}]}]}
    devices, cc, _, ok, allocs = run([slice_(GPU, gpus)], [claim({"metadata": {"name": "c"}, "spec": {"devices": {
        "requests": [alternatives]}}}, "t")])
    assert ok.tolist() == [True] and cc.options[allocs[0].option[0]] == "c/a/one-a100"
    assert al.result(cc, devices, allocs[0]) == [{"request": "a/one-a100", "driver": GPU, "pool": "node-0",
                                                  "device": "gpu-0"}]


def test_a_later_request_makes_an_earlier_one_fall_back():
    # request a prefers both GPUs; request b needs one: a falls back to its single-GPU alternative
    gpus = [dev("gpu-0"), dev("gpu-1")]
    a = {"name": "a", "firstAvailable": [{"name": "two", "deviceClassName": "gpu", "count": 2},
                                         {"name": "one", "deviceClassName": "gpu"}]}
    devices, cc, _, ok, allocs = run([slice_(GPU, gpus)], [claim({"metadata": {"name": "c"}, "spec": {"devices": {
        "requests": [a, req("b")]}}}, "t")])
    assert ok.tolist() == [True] and [cc.options[o] for o in allocs[0].option] == ["c/a/one", "c/b"]
    assert picked(devices, allocs[0]) == [["gpu-0"], ["gpu-1"]]


def test_a_tainted_device_is_not_allocated_unless_tolerated():
    gpus = [dict(dev("gpu-0"), taints=[{"key": "ecc", "value": "bad", "effect": "NoSchedule"}]), dev("gpu-1")]
    devices, _, _, ok, allocs = run([slice_(GPU, gpus)], [claim_(req("a"))])
    assert picked(devices, allocs[0]) == [["gpu-1"]]
    _, _, _, ok, _ = run([slice_(GPU, gpus)], [claim_(req("a", count=2))])
    assert ok.tolist() == [False]


def test_a_selector_error_fails_the_claim_and_says_why():
    devices = al.NodeDevices.of((slice_(GPU, [dev("gpu-0")]),))
    cc = al.compile_claims((claim_(req("a", selectors=[f'device.attributes["{GPU}"].model == "A100"'])),),
                           devices, CLASSES)
    assert "no such key" in cc.error and not al.allocate(cc, devices, al.DeviceState.fresh(devices, 1),
                                                         np.arange(1))[0].any()


def test_an_unknown_device_class_is_refused():
    devices = al.NodeDevices.of((slice_(GPU, [dev("gpu-0")]),))
    with pytest.raises(ConfigError, match="no DeviceClass 'tpu'"):
        al.compile_claims((claim_(req("a", cls="tpu")),), devices, CLASSES)


def test_nodes_are_answered_each_with_its_own_state():
    s = [slice_(GPU, [dev("gpu-0"), dev("gpu-1")])]
    devices = al.NodeDevices.of(tuple(s))
    state = al.DeviceState.fresh(devices, 3)
    one = al.compile_claims((claim_(req("a")),), devices, CLASSES)
    two = al.compile_claims((claim_(req("a", count=2)),), devices, CLASSES)
    _, allocs = al.allocate(one, devices, state, np.arange(3))
    al.commit(one, devices, state, 1, allocs[1])
    ok, allocs = al.allocate(two, devices, state, np.array([0, 1, 2]))
    assert ok.tolist() == [True, False, True]
    ok, allocs = al.allocate(one, devices, state, np.array([1]))
    assert picked(devices, allocs[0]) == [["gpu-1"]]
