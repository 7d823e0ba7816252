"""DRA claims through the loops: the scheduler allocates a pod's ResourceClaim, a DRA-aware
Cluster Autoscaler (or Karpenter) simulates the same claim on template nodes, and a pre-DRA one
(`dra_aware: false`) sees only the device columns. Numbers by hand, with the conventions of
tests/test_golden.py (scans every 10 s, nodes removed after 600 s under 0.5 utilisation)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.autoscalers.karpenter import KarpenterAutoscaler
from harness.cluster import Cluster
from harness.errors import ConfigError, TraceError
from harness.loops.separate import SeparateLoops
from harness.scheduler.framework import Scheduler
from harness.scores import LeastAllocated
from harness.workload import compile_workload
from tests import scenarios as sc

H = 3600.0
approx = pytest.approx
ROOT = "resource.kubernetes.io/pcieRoot"


def one_gpu_node(name: str, nic_root: str) -> list[dict]:
    """The slices of a node with one GPU on PCIe root pci-0 and one NIC on `nic_root`."""
    gpu = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "index": {"int": 0},
                                           "productName": {"string": "H100"}, ROOT: {"string": "pci-0"}}}
    nic = {"name": "nic-0", "attributes": {ROOT: {"string": nic_root}}}
    return [{"driver": "gpu.nvidia.com", "nodeName": name, "pool": {"name": name, "generation": 1,
                                                                     "resourceSliceCount": 1}, "devices": [gpu]},
            {"driver": "nic.loopbench.io", "nodeName": name, "pool": {"name": name, "generation": 1,
                                                                      "resourceSliceCount": 1}, "devices": [nic]}]


GPU_NIC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}},
                                    {"name": "nic", "exactly": {"deviceClassName": "nic"}}],
                       "constraints": [{"matchAttribute": ROOT}]}}


def nic_cluster(**claims) -> Cluster:
    """Two one-GPU types: `near` (its NIC on the GPU's PCIe root) and the cheaper `far` (its NIC
    on the other root)."""
    types = [sc.node_type(t, gpus=1, nvlink_domains=1, numa_domains=1, nic_per_gpu=True) for t in ("near", "far")]
    pools = [sc.pool("near", "near", price_on_demand=10.0), sc.pool("far", "far", price_on_demand=6.0)]
    dra = {"node_types": {"near": one_gpu_node("near", "pci-0"), "far": one_gpu_node("far", "pci-1")},
           "claims": {"gpu-nic": GPU_NIC, **claims}}
    return Cluster(node_types=types, pools=pools, name="dra-golden", dra=dra)


def test_a_nic_on_the_other_root_is_unschedulable_and_the_dra_aware_autoscaler_buys_the_right_type():
    cl = nic_cluster()
    table = sc.trace([{"claim": "gpu-nic", "nic_per_gpu": True}])
    row, sim = sc.run(table, cl, sc.separate(), horizon_s=2 * H)
    # The far pool's template cannot allocate the claim (its NIC is on pci-1), so the price
    # expander has only `near` to choose: requested at 0, ready at 300, the pod runs 300-3900,
    # the node is removed 600 s after it empties: 4500.
    assert row["pods_done"] == 1 and row["nodes_provisioned"] == 1
    assert row["cost_usd"] == approx(10.0 * 4500 / H)
    assert row["used_accel_hours"] == approx(1.0)
    assert sim.cluster.pools[int(sim.state.slot_pool[sim.pod_node[0]])].name == "near"


def test_the_pre_dra_autoscaler_buys_the_cheaper_wrong_type_again_and_again():
    cl = nic_cluster()
    table = sc.trace([{"claim": "gpu-nic", "nic_per_gpu": True}])
    row, sim = sc.run(table, cl, sc.separate(dra_aware=False), horizon_s=2 * H)
    # Blind to the claim, it sees one GPU and a NIC per GPU, which both types have: the cheaper
    # `far` node is bought, the scheduler's allocator refuses it, the autoscaler sees the pod
    # "fit" and adds nothing; the idle node goes at ready + 600 s and the purchase repeats 10 s
    # later: requests at 0, 910, ..., 6370 (as tests/test_golden.py's topology case), 8 nodes.
    assert row["pods_done"] == 0 and row["pods_pending"] == 1
    assert row["nodes_provisioned"] == 8 and row["nodes_never_used"] == 8
    assert row["cost_usd"] == approx(6.0 * (8 * 300 + 7 * 600 + 530) / H)


def test_karpenter_simulates_the_claim_too():
    cl = nic_cluster()
    table = sc.trace([{"claim": "gpu-nic", "nic_per_gpu": True}])
    loop = SeparateLoops(Scheduler(LeastAllocated(), gang=sc.GANG["coscheduling"]()), KarpenterAutoscaler())
    row, sim = sc.run(table, cl, loop, horizon_s=2 * H)
    assert row["pods_done"] == 1
    assert sim.cluster.pools[int(sim.state.slot_pool[sim.pod_node[0]])].name == "near"


def translated_cluster() -> Cluster:
    """The default cluster's H100 NVLink type, its devices the columns' translation (`dra: {}`)."""
    types = [sc.node_type("nvl8", nvlink_domains=1, nic_per_gpu=True, partition_profiles=["1g.10gb", "3g.40gb"])]
    return Cluster(node_types=types, pools=[sc.pool("nvl", "nvl8", max_size=1, min_size=1)], autoscaling=False,
                   partition_profiles={"1g.10gb": 143, "3g.40gb": 429}, name="dra-golden", dra={})


def test_mig_partitions_exhaust_a_gpus_counters():
    # 8 GPUs of 1000 milli counters each; a 1g.10gb partition draws 143: 6 fit one GPU (858),
    # the 7th needs a 1g device the GPU no longer has counters for. 49 pods: 48 run, one waits.
    cl = translated_cluster()
    table = sc.trace([{"gpu_partition": "1g.10gb", "gpu_milli": 0} for _ in range(49)])
    row, sim = sc.run(table, cl, sc.separate(), horizon_s=H / 2)
    assert row["pods_pending"] == 1
    held = sim.state.gpu_free[0, :8]
    assert (held == 1000 - 6 * 143).all()
    # a 3g.40gb partition (429) fits no GPU now: 142 milli left on each
    taken = sim.state.dra_counters[0]
    assert (taken[:8] == 1000 - 6 * 143).all()


def test_a_share_of_consumable_capacity_and_the_whole_gpu_it_blocks():
    # Two 500-milli shares take GPU 0's capacity (first fit in publishing order, as upstream);
    # 7 whole-GPU pods take GPUs 1-7; an 8th whole-GPU pod waits.
    cl = translated_cluster()
    table = sc.trace([{"gpu_milli": 500}] * 2 + [{"submit_s": 1.0}] * 8)
    row, sim = sc.run(table, cl, sc.separate(), horizon_s=H / 2)
    assert row["pods_pending"] == 1
    assert [int(g) for g in sim.pod_gpus[0]] == [0] and [int(g) for g in sim.pod_gpus[1]] == [0]
    assert (sim.state.gpu_free[0, :8] == 0).all()


def test_first_available_falls_back_to_the_second_alternative():
    alt = {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "b200", "deviceClassName": "gpu", "selectors": [
            {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "B200"'}}]},
        {"name": "any", "deviceClassName": "gpu"}]}]}}
    cl = nic_cluster(fallback=alt)
    table = sc.trace([{"claim": "fallback"}])
    row, sim = sc.run(table, cl, sc.separate(), horizon_s=2 * H)
    # no B200 anywhere: the H100 alternative; the cheaper `far` type holds it
    assert row["pods_done"] == 1
    assert sim.cluster.pools[int(sim.state.slot_pool[sim.pod_node[0]])].name == "far"


def test_the_translated_columns_replay_as_without_dra():
    """The columns mean the same as claims (docs/model.md, "Devices in DRA's terms"): the
    topology, NIC and whole-GPU cases of the golden scenarios give the same numbers."""
    def both(types, pools, rows, **autoscaler):
        out = []
        for dra in (None, {}):
            cl = Cluster(node_types=types, pools=pools, name="golden", dra=dra)
            row = sc.run(sc.trace(rows), cl, sc.separate(**autoscaler), horizon_s=2 * H)[0]
            out.append({k: "nan" if isinstance(v, float) and np.isnan(v) else v for k, v in row.items()})
        return out
    types = [sc.node_type("nvl8", nvlink_domains=1, nic_per_gpu=True), sc.node_type("pcie8", nvlink_domains=4)]
    pools = [sc.pool("nvl", "nvl8", price_on_demand=10.0), sc.pool("pcie", "pcie8", price_on_demand=6.0)]
    rows = [{"gpu_count": 8, "gpus_same_nvlink": True}, {"gpu_count": 2, "nic_per_gpu": True, "submit_s": 50.0},
            {"gpu_count": 4, "submit_s": 100.0}, {"gpu_count": 0, "gpu_milli": 0, "submit_s": 120.0}]
    plain, claimed = both(types, pools, rows, topology_aware=True)
    assert claimed == plain
    # and the blind autoscaler, blind in both (dra_aware off sees the columns as before)
    plain, claimed = both(types, pools, rows, dra_aware=False)
    assert claimed == plain


def test_a_claim_the_cluster_does_not_have_is_refused_by_row():
    cl = nic_cluster()
    table = sc.trace([{}, {"claim": "nope"}])
    with pytest.raises(TraceError, match=r"column 'claim', row 1: no claim template 'nope'"):
        compile_workload(table, cl)


def test_a_claim_whose_share_differs_from_the_row_is_refused():
    cl = nic_cluster()
    table = sc.trace([{"claim": "gpu-nic", "gpu_milli": 500}])
    with pytest.raises(TraceError, match=r"row 0: claim 'gpu-nic' takes 1000 milli"):
        compile_workload(table, cl)


@pytest.mark.parametrize("dra, where", [
    ({"slices": {}}, "cluster.dra.slices"),
    ({"node_types": {"nope": []}}, "cluster.dra.node_types.nope"),
    ({"node_types": {"near": "x"}}, "cluster.dra.node_types.near"),
])
def test_a_bad_dra_section_is_refused_by_key(dra, where):
    types = [sc.node_type("near", gpus=1, nvlink_domains=1, numa_domains=1)]
    with pytest.raises(ConfigError) as err:
        Cluster(node_types=types, pools=[sc.pool("near", "near")], dra=dra)
    assert err.value.where.startswith(where)


def test_a_gpu_index_beyond_the_type_is_refused():
    types = [sc.node_type("near", gpus=1, nvlink_domains=1, numa_domains=1)]
    slices = one_gpu_node("near", "pci-0")
    slices[0]["devices"][0]["attributes"]["index"] = {"int": 3}
    with pytest.raises(ConfigError, match="index 3"):
        Cluster(node_types=types, pools=[sc.pool("near", "near")], dra={"node_types": {"near": slices}})


def test_every_slot_of_a_dra_cluster_starts_with_its_types_devices():
    cl = nic_cluster()
    from harness.state import ClusterState
    st = ClusterState(cl)
    st.add_node(0, ready=True)
    assert not st.dra_taken[0].any()
    assert np.array_equal(st.dra_counters[0], np.zeros(st.dra_counters.shape[1], np.int64))
