"""Scale-down's utilisation of a DRA node, as Cluster Autoscaler reads it with DRA enabled
(simulator/utilization/info.go `Calculate`): a node publishing ResourceSlices is as used as its
most used device pool, CPU and memory ignored; `dra_utilization: false` reads its GPUs as
before. Numbers by hand; every loop that scales down shares this rule (one ScaleDown)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.autoscalers.scale_down import ScaleDown
from harness.cluster import Cluster
from harness.config import compose
from harness.dra.allocator import DeviceState, NodeDevices
from harness.dra.resources import resource_slice
from harness.dra.utilization import highest, pool_utilization
from harness.replay import build
from harness.status import ABSENT
from tests import scenarios as sc

ROOT = "resource.kubernetes.io/pcieRoot"


def gpus_and_one_nic(gpus: int) -> list[dict]:
    """A node's slices: `gpus` GPUs (driver gpu.nvidia.com) and one NIC (nic.loopbench.io)."""
    def pool(driver, devices):
        return {"driver": driver, "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                "devices": devices}
    return [pool("gpu.nvidia.com", [{"name": f"gpu-{g}", "attributes": {
                "type": {"string": "gpu"}, "index": {"int": g}, "productName": {"string": "H100"}}}
                for g in range(gpus)]),
            pool("nic.loopbench.io", [{"name": "nic-0", "attributes": {ROOT: {"string": "pci-0"}}}])]


GPU_NIC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}},
                                    {"name": "nic", "exactly": {"deviceClassName": "nic"}}]}}


def loops(dra_utilization: bool):
    """The separate loops and the merged loop, each with its own ScaleDown."""
    return {"separate": lambda: sc.separate(scale_down=ScaleDown(dra_utilization=dra_utilization)),
            "merged": lambda: sc.merged(scale_down=ScaleDown(dra_utilization=dra_utilization))}


def scale_down_of(loop) -> ScaleDown:
    return loop.scale_down if hasattr(loop, "scale_down") else loop.autoscaler.scale_down


def one_node(cl: Cluster, pods: list[dict], loop):
    """Replay the pods for a minute on the pool's one ready node: (its slot, the scale-down)."""
    _, sim = sc.run(sc.trace(pods), cl, loop, horizon_s=60.0)
    assert (sim.pod_node[: len(pods)] == 0).all(), "every pod runs on the one node"
    return 0, scale_down_of(loop)


@pytest.mark.parametrize("name", ["separate", "merged"])
@pytest.mark.parametrize("dra_utilization, util, low", [(True, 1.0, False), (False, 0.25, True)])
def test_a_node_with_its_nic_pool_full_is_not_under_the_threshold(name, dra_utilization, util, low):
    # 4 GPUs and 1 NIC; one pod takes a GPU and the NIC: its GPU pool is 1/4 used, its NIC pool
    # 1/1, so the node is at 1.0 (the most used pool) and not a candidate; read by its GPUs
    # (the switch off) it is at 0.25 < 0.5, a candidate
    cl = Cluster(node_types=[sc.node_type("g4", gpus=4, nic_per_gpu=True)],
                 pools=[sc.pool("a", "g4", min_size=1)], name="dra-util",
                 dra={"node_types": {"g4": gpus_and_one_nic(4)}, "claims": {"gpu-nic": GPU_NIC}})
    n, sd = one_node(cl, [{"claim": "gpu-nic", "nic_per_gpu": True}], loops(dra_utilization)[name]())
    assert sd.utilization(np.array([n])).tolist() == [util]
    assert sd.is_low[n] == low


def test_half_used_gpus_with_a_full_nic_pool_are_fully_used():
    # 4 GPUs, 2 of them and the NIC taken: GPU pool 0.5, NIC pool 1.0 -> 1.0; by GPUs 0.5
    cl = Cluster(node_types=[sc.node_type("g4", gpus=4, nic_per_gpu=True)],
                 pools=[sc.pool("a", "g4", min_size=1)], name="dra-util",
                 dra={"node_types": {"g4": gpus_and_one_nic(4)}, "claims": {"gpu-nic": GPU_NIC}})
    n, sd = one_node(cl, [{"claim": "gpu-nic", "nic_per_gpu": True}, {}], sc.separate())
    assert sd.utilization(np.array([n])).tolist() == [1.0]
    assert not sd.is_low[n]
    n, sd = one_node(cl, [{"claim": "gpu-nic", "nic_per_gpu": True}, {}],
                     sc.separate(scale_down=ScaleDown(dra_utilization=False)))
    assert sd.utilization(np.array([n])).tolist() == [0.5]


@pytest.mark.parametrize("name", ["separate", "merged"])
@pytest.mark.parametrize("dra_utilization, util, low", [(True, 0.5, False), (False, 0.0, True)])
def test_a_partition_drawing_half_its_gpus_counters_counts_half(name, dra_utilization, util, low):
    # one partitionable GPU (`dra: {}` translates it: a counter set of 1000 milli the GPU and its
    # partitions draw on); a 500-milli partition draws half: the pool is at 0.5, not under the
    # threshold; read by its GPUs, a partition is not a GPU request: 0
    cl = Cluster(node_types=[sc.node_type("g1", gpus=1, partition_profiles=["half"])],
                 pools=[sc.pool("a", "g1", min_size=1)], partition_profiles={"half": 500}, name="dra-util", dra={})
    n, sd = one_node(cl, [{"gpu_partition": "half", "gpu_milli": 0}], loops(dra_utilization)[name]())
    assert sd.utilization(np.array([n])).tolist() == [util]
    assert sd.is_low[n] == low


def test_a_gpu_less_node_reads_cpu_and_memory_in_a_dra_cluster():
    # a type without GPUs publishes no slice: upstream's max(CPU, memory) for it
    cl = Cluster(node_types=[{"name": "cpu", "cpu_milli": 4000, "memory_mib": 4096, "gpus": 0}],
                 pools=[sc.pool("a", "cpu", min_size=1)], name="dra-util", dra={})
    n, sd = one_node(cl, [{"gpu_count": 0, "gpu_milli": 0, "cpu_milli": 1000, "memory_mib": 3072}], sc.separate())
    assert sd.utilization(np.array([n])).tolist() == [0.75]


def _slice(name: str, devices: list[dict], shared: list[dict] | None = None):
    spec = {"driver": "d", "nodeName": "n", "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1},
            "devices": devices, **({"sharedCounters": shared} if shared else {})}
    return resource_slice({"metadata": {"name": name}, "spec": spec}, "test")


@pytest.mark.parametrize("used, want", [
    (["a-0"], 1 / 2),  # only atomic devices allocated: their share alone, not weighed with the GPU's 0
    (["gpu-p"], 1 / 2),  # only partitionable: the counter sets' average alone
    (["a-0", "gpu-p"], (1 + 1 / 2) / 3),  # both: weighed by 2 atomic devices and 1 counter set
])
def test_a_mixed_pool_weighs_its_kinds_only_when_both_are_allocated(used, want):
    # upstream's calculatePoolUtil returns early when every allocated device is of one kind
    counters = [{"name": "gpu", "counters": {"mem": {"value": "10Gi"}}}]
    draws = [{"counterSet": "gpu", "counters": {"mem": {"value": "5Gi"}}}]
    devices = NodeDevices.of((_slice("s", [{"name": "a-0"}, {"name": "a-1"}, {"name": "gpu-p", "consumesCounters": draws}],
                                     counters),))
    state = DeviceState.fresh(devices, 1)
    for name in used:
        d = devices.names.index(f"d/p/{name}")
        state.taken[0, d] = True
        state.counter_left[0] -= devices.consumes[d]
    assert pool_utilization(devices, state)["d/p"].tolist() == [pytest.approx(want)]
    assert highest(devices, state)[0] == ["d/p"]


def test_the_most_used_pool_read_in_place_is_that_of_the_rows_copied():
    """`PoolTable.most_used` reads the nodes' rows where they are: for any nodes, in any order
    and with repeats, it gives `highest`'s figure on copies of their rows. A replay of gangs
    with shares and partitions (the pinned trace, 2.5 h) leaves nodes in many allocation states."""
    trace = Path(__file__).resolve().parent / "fixtures" / "pinned" / "scale700.parquet"
    sim, loop = build(compose("config", ["loop=merged", f"trace.path={trace}", "horizon_s=9000"]))
    sim.run(loop)
    st, table = sim.state, loop.scale_down.pools
    present = np.flatnonzero(st.status != ABSENT)
    rng = np.random.default_rng(0)
    used = 0
    for nodes in [present, present[::-1], rng.choice(present, 50), rng.permutation(present)[:7]]:
        types = st.dra_type[nodes]
        nodes, types = nodes[table.published[types]], types[table.published[types]]
        want = table.highest(types, *(a[nodes] for a in st.device_arrays))[1]
        assert table.most_used(nodes, types, *st.device_arrays).tolist() == want.tolist()
        used += int((want > 0).sum())
    assert used > 50  # nodes in use, not only idle ones
