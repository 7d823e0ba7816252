"""Cluster Autoscaler's DRA utilisation for scale-down, translated from kubernetes/autoscaler
cluster-autoscaler/simulator/dynamicresources/utils/utilization_test.go (TestDynamicResourceUtilization,
TestCalculateAtomicDevicesPoolUtilization, TestCalculatePartitionableDevicesPoolUtilization),
with the fixtures' slices built as upstream's testResourceSlices and
testResourceSlicesWithPartionableDevices build them (counters in their own slice of the pool)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.dra.allocator import DeviceState, NodeDevices
from harness.dra.resources import resource_slice
from harness.dra.utilization import highest, pool_utilization

FOO, BAR = "driver.foo.com", "driver.bar.com"


def _slice(name, driver, pool, devices=(), shared=None):
    spec = {"driver": driver, "nodeName": "node", "pool": {"name": pool, "generation": 0, "resourceSliceCount": 1},
            "devices": list(devices)}
    if shared:
        spec["sharedCounters"] = shared
    return resource_slice({"metadata": {"name": name}, "spec": spec}, "test")


def atomic_slices(driver, pool, count, per_slice):
    """testResourceSlices: `count` devices named <driver>-<pool>-dev-<i>, `per_slice` a slice."""
    return [_slice(f"{driver}-{pool}-slice-{s}", driver, pool,
                   [{"name": f"{driver}-{pool}-dev-{s * per_slice + i}"} for i in range(per_slice)])
            for s in range(count // per_slice)]


def partitionable_slices(driver, pool, gpu, partitions):
    """testResourceSlicesWithPartionableDevices: `partitions` devices of 10Gi and the whole GPU,
    all drawing on the GPU's counter set (10Gi x partitions), which a second slice publishes."""
    cset = f"{gpu}-counter-set"

    def device(name, gi):
        return {"name": name, "capacity": {"memory": {"value": f"{gi}Gi"}},
                "consumesCounters": [{"counterSet": cset, "counters": {"memory": {"value": f"{gi}Gi"}}}]}
    devices = [device(f"{gpu}-partition-{i}", 10) for i in range(partitions)] + [device(gpu, 10 * partitions)]
    return [_slice(f"{driver}-{pool}-{gpu}-slice", driver, pool, devices),
            _slice(f"{driver}-{pool}-{gpu}-slice-counters", driver, pool,
                   shared=[{"name": cset, "counters": {"memory": {"value": f"{10 * partitions}Gi"}}}])]


def node(slices, allocated):
    """One node publishing `slices`, with the devices named in `allocated` ("driver/pool/device") in use."""
    devices = NodeDevices.of(tuple(slices))
    state = DeviceState.fresh(devices, 1)
    for name in allocated:
        d = devices.names.index(name)
        state.taken[0, d] = True
        state.counter_left[0] -= devices.consumes[d]
    return devices, state


def first(driver, pool, k):
    return [f"{driver}/{pool}/{driver}-{pool}-dev-{i}" for i in range(k)]


def test_no_dra_resources():
    devices, state = node([], [])
    assert pool_utilization(devices, state) == {}
    names, util = highest(devices, state)
    assert names == [""] and util.tolist() == [0.0]


def test_single_slice_single_pool_6_of_10_devices_used():
    devices, state = node(atomic_slices(FOO, "pool1", 10, 1), first(FOO, "pool1", 6))
    assert pool_utilization(devices, state)["driver.foo.com/pool1"].tolist() == [pytest.approx(0.6)]


def test_multiple_slices_multiple_pools_multiple_drivers():
    slices = atomic_slices(FOO, "pool1", 10, 2) + atomic_slices(FOO, "pool2", 20, 5) + atomic_slices(BAR, "pool1", 8, 2)
    devices, state = node(slices, first(FOO, "pool1", 6) + first(FOO, "pool2", 18) + first(BAR, "pool1", 2))
    util = {k: float(v[0]) for k, v in pool_utilization(devices, state).items()}
    assert util == {"driver.foo.com/pool1": pytest.approx(0.6), "driver.foo.com/pool2": pytest.approx(0.9),
                    "driver.bar.com/pool1": pytest.approx(0.25)}
    names, top = highest(devices, state)
    assert names == ["driver.foo.com/pool2"] and top.tolist() == [pytest.approx(0.9)]


def test_partitionable_devices_2_of_4_partitions_used():
    devices, state = node(partitionable_slices(FOO, "pool1", "gpu-0", 4),
                          [f"{FOO}/pool1/gpu-0-partition-0", f"{FOO}/pool1/gpu-0-partition-1"])
    assert pool_utilization(devices, state)["driver.foo.com/pool1"].tolist() == [0.5]


def test_multi_gpu_partitionable_devices_2_of_8_partitions_used():
    slices = partitionable_slices(FOO, "pool1", "gpu-0", 4) + partitionable_slices(FOO, "pool1", "gpu-1", 4)
    devices, state = node(slices, [f"{FOO}/pool1/gpu-0-partition-0", f"{FOO}/pool1/gpu-0-partition-1"])
    assert pool_utilization(devices, state)["driver.foo.com/pool1"].tolist() == [0.25]


def test_multi_gpu_mixed_partitionable_and_atomic_devices():
    # 1/4 * 1/4 + 1 * 1/4 + 1 * 1/4 + 0 * 1/4 = 0.5625 (upstream's comment)
    slices = (partitionable_slices(FOO, "pool1", "gpu-0", 4) + partitionable_slices(FOO, "pool1", "gpu-1", 4)
              + atomic_slices(FOO, "pool1", 2, 1))
    used = [f"{FOO}/pool1/gpu-0-partition-0"] + [f"{FOO}/pool1/gpu-1-partition-{i}" for i in range(4)]
    devices, state = node(slices, used + first(FOO, "pool1", 1))
    assert pool_utilization(devices, state)["driver.foo.com/pool1"].tolist() == [0.5625]


@pytest.mark.parametrize("allocated,total,want", [
    (0, 0, 0.0),  # "no devices"
    (0, 2, 0.0),  # "no allocated devices"
    (2, 2, 1.0),  # "all devices allocated"
    (1, 3, 1.0 / 3.0),  # "partial allocation"
])
def test_atomic_devices_pool_utilization(allocated, total, want):
    devices, state = node(atomic_slices(FOO, "p", total, 1) if total else [], first(FOO, "p", allocated))
    util = pool_utilization(devices, state)
    assert (util["driver.foo.com/p"].tolist() if total else [0.0]) == [want]


@pytest.mark.parametrize("used,want", [
    ([], 0.0),  # "no allocated devices"
    (["dev-0-partition-0"], 0.5),  # "partial allocation"
    (["dev-0-partition-0", "dev-0-partition-1"], 1.0),  # "full allocation of one device, all partitions used"
    (["dev-0"], 1.0),  # "full allocation of one device, 1 device used"
])
def test_partitionable_devices_pool_utilization(used, want):
    slices = partitionable_slices(FOO, "p", "dev-0", 2)
    devices, state = node(slices, [f"{FOO}/p/{d}" for d in used])
    assert pool_utilization(devices, state)["driver.foo.com/p"].tolist() == [want]
    assert np.all(state.counter_left >= 0)
