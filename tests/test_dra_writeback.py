"""A DRA run's allocations written back (`write_claims=true`, harness/dra/writeback.py): the
devices each bound pod's claim got, as ResourceClaims and as a table, worked out by hand on
tiny traces; read back by `loopbench import dra`; and no other output changes."""

from __future__ import annotations

import polars as pl
import pytest
import yaml
from polars.testing import assert_frame_equal

from harness.cluster import Cluster
from harness.config import compose
from harness.dra.writeback import ClaimWriter
from harness.errors import ConfigError
from harness.importers.dra import read_dra
from harness.replay import Replay
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc
from tests.test_dra_scale_down import GPU_NIC, gpus_and_one_nic

FIRST = {"devices": {"requests": [{"name": "any", "firstAvailable": [
    {"name": "two", "deviceClassName": "gpu", "count": 2,
     "selectors": [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "A100"'}}]},
    {"name": "one", "deviceClassName": "gpu"}]}]}}


def replay(cl: Cluster, pods: list[dict], horizon_s: float = 1000.0) -> ClaimWriter:
    sim = Simulation(compile_workload(sc.trace(pods), cl), cl, seed=0, horizon_s=horizon_s)
    writer = ClaimWriter(sim)
    sim.run(sc.separate())
    return writer


def declared() -> Cluster:
    """One ready node `a-0` of 4 GPUs and a NIC, published as declared slices of pool `n`."""
    return Cluster(node_types=[sc.node_type("g4", gpus=4, nic_per_gpu=True)], pools=[sc.pool("a", "g4", min_size=1)],
                   name="dra-writeback", dra={"node_types": {"g4": gpus_and_one_nic(4)},
                                              "claims": {"gpu-nic": GPU_NIC, "first": FIRST}})


def test_each_claim_names_the_devices_it_got_on_its_node():
    # p0's template takes a GPU and the NIC, then p1's columns (one whole GPU, the claim
    # `devices` translated from them) the next GPU, p2's firstAvailable falls to its second
    # alternative (no A100) and the GPU after: first fit in publishing order, all at 0 on the
    # ready node; they finish at 100, 200, 300
    w = replay(declared(), [{"claim": "gpu-nic", "nic_per_gpu": True, "duration_s": 100.0},
                            {"duration_s": 200.0}, {"claim": "first", "duration_s": 300.0}])
    got = w.frame().drop("claim").rows()
    assert got == [
        ("p0", "a-0", "gpu", "gpu.nvidia.com", "n", "gpu-0", 0.0, 100.0),
        ("p0", "a-0", "nic", "nic.loopbench.io", "n", "nic-0", 0.0, 100.0),
        ("p1", "a-0", "gpus", "gpu.nvidia.com", "n", "gpu-1", 0.0, 200.0),
        ("p2", "a-0", "any/one", "gpu.nvidia.com", "n", "gpu-2", 0.0, 300.0),
    ]
    docs = w.documents()
    assert [d["kind"] for d in docs] == ["DeviceClass", "DeviceClass"] + ["ResourceClaim"] * 3
    assert [d["metadata"]["name"] for d in docs[:2]] == ["gpu", "nic"]
    p0 = docs[2]
    assert p0["metadata"]["name"].startswith("p0-gpu-nic-") and len(p0["metadata"]["name"]) == len("p0-gpu-nic-") + 5
    assert p0["spec"] == GPU_NIC
    assert p0["status"]["allocation"] == {
        "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-0"},
                                {"request": "nic", "driver": "nic.loopbench.io", "pool": "n", "device": "nic-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["a-0"]}]}]}}
    assert p0["metadata"]["annotations"] == {"loopbench.io/pod": "p0", "loopbench.io/bound-at": "0.0",
                                             "loopbench.io/released-at": "100.0"}
    assert docs[4]["spec"] == FIRST


def test_shares_of_a_translated_gpu_name_the_node_pool_and_the_capacity_they_consume():
    # `dra: {}`: the node's GPUs are multi-allocatable (share 1000m), in a pool named after the
    # node; two half shares both go to gpu-0; p1 is still bound at the horizon (500 s)
    cl = Cluster(node_types=[sc.node_type("g2", gpus=2)], pools=[sc.pool("a", "g2", min_size=1)],
                 name="dra-writeback", dra={})
    w = replay(cl, [{"gpu_milli": 500, "duration_s": 100.0}, {"gpu_milli": 500, "duration_s": 1000.0}],
               horizon_s=500.0)
    assert w.frame().drop("claim").rows() == [
        ("p0", "a-0", "gpus", "gpu.nvidia.com", "a-0", "gpu-0", 0.0, 100.0),
        ("p1", "a-0", "gpus", "gpu.nvidia.com", "a-0", "gpu-0", 0.0, None),
    ]
    claims = [d for d in w.documents() if d["kind"] == "ResourceClaim"]
    assert [d["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] for d in claims] == [
        {"share": "500m"}, {"share": "500m"}]
    assert claims[0]["spec"]["devices"]["requests"][0]["exactly"]["capacity"] == {
        "requests": {"gpu.nvidia.com/share": "500m"}}
    assert "loopbench.io/released-at" not in claims[1]["metadata"]["annotations"]


def test_a_pod_bound_twice_has_a_claim_per_binding():
    w = replay(declared(), [{"duration_s": 100.0}])
    b = w.bindings[0]
    again = b.__class__(b.pod, b.node, 5.0, 1, b.claims, b.results)
    assert w.claim_name(b, "devices") != w.claim_name(again, "devices")
    assert w.claim_name(b, "devices") == replay(declared(), [{"duration_s": 100.0}]).claim_name(b, "devices")


def test_loopbench_import_dra_reads_the_written_claims_back(tmp_path):
    w = replay(declared(), [{"claim": "gpu-nic", "nic_per_gpu": True}, {}, {"claim": "first"}])
    path = tmp_path / "claims.yaml"
    path.write_text(w.yaml())
    inp = read_dra([str(path)])
    asked = [c for b in w.bindings for c in b.claims]
    assert [(c.requests, c.constraints) for c in inp.claims.values()] == [(c.requests, c.constraints) for c in asked]
    assert set(inp.classes) == {"gpu", "nic"}
    assert list(yaml.safe_load_all(path.read_text())) == w.documents()


def test_writing_claims_changes_no_other_output(tmp_path):
    runs = {}
    for on in (False, True):
        cfg = compose("config", ["loop=separate", "+cluster.dra={}", "horizon_s=8000",
                                 f"write_claims={str(on).lower()}"])
        Replay().run(cfg, tmp_path / str(on), progress=False)
        runs[on] = tmp_path / str(on)
    assert not (runs[False] / "claims.yaml").exists() and not (runs[False] / "claims.parquet").exists()
    table = pl.read_parquet(runs[True] / "claims.parquet")
    assert len(table) > 0 and table["released_at"].is_null().sum() < len(table)
    for name in ("jobs", "nodes", "timeline", "metrics"):
        off, on = (pl.read_parquet(runs[k] / f"{name}.parquet") for k in (False, True))
        assert_frame_equal(off, on, check_exact=True)


def test_writing_claims_needs_a_dra_cluster(tmp_path):
    cfg = compose("config", ["loop=separate", "horizon_s=100", "write_claims=true", "cluster.dra=null"])
    with pytest.raises(ConfigError, match="write_claims.*DRA cluster"):
        Replay().run(cfg, tmp_path / "run", progress=False)
