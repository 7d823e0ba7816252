"""`loopbench import kubernetes` with DRA objects among its files: the DeviceClasses,
ResourceSlices and claim templates become the cluster's `dra:` section (each node type the
slices of its first node), a pod's resourceClaims its trace row's `claim` with the claim's GPU
columns, and the imported pair replays as a DRA cluster with the pod bound by its claim."""

from __future__ import annotations

import copy
from pathlib import Path

import polars as pl
import pytest
import yaml
from hydra.utils import instantiate

from harness.config import compose
from harness.importers.cli import main
from harness.importers.kubernetes import read_kubernetes
from harness.replay import Replay
from harness.trace import read_trace
from harness.workload import compile_workload

DRA = Path(__file__).parent / "fixtures" / "kubernetes" / "dra.yaml"


def _docs() -> list[dict]:
    return yaml.safe_load(DRA.read_text())["items"]


def _named(docs: list[dict], kind: str, name: str) -> dict:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def _write(tmp_path: Path, docs: list[dict]) -> str:
    out = tmp_path / "dra.yaml"
    out.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    return str(out)


def test_slices_become_the_node_types_devices_and_the_pod_runs_by_its_claim():
    k = read_kubernetes([str(DRA)])
    section = k.cluster["dra"]
    assert [c["name"] for c in section["device_classes"]] == ["gpu.example.com", "nic.example.com"]
    assert list(section["node_types"]) == ["accel-2g"]  # the CPU node publishes nothing
    slices = section["node_types"]["accel-2g"]
    assert [(s["driver"], s["nodeName"], len(s["devices"])) for s in slices] == \
        [("gpu.example.com", "gpu-a", 2), ("nic.example.com", "gpu-a", 1)]
    assert list(section["claims"]) == ["gpu-nic"]
    types = {t["name"]: t["gpus"] for t in k.cluster["node_types"]}
    assert types == {"accel-2g": 2, "plain-8c": 0}  # the GPUs the slices publish, not the allocatable's none
    rows = k.result.table.select(["pod_id", "claim", "gpu_count", "gpu_milli"]).to_pylist()
    assert rows == [{"pod_id": "ml/train-0", "claim": "gpu-nic", "gpu_count": 1, "gpu_milli": 1000}]
    assert "publishes other devices" not in "\n".join(k.summary())


def test_a_node_of_the_type_publishing_other_devices_is_listed_once(tmp_path):
    docs = [d for d in _docs() if d["metadata"]["name"] != "gpu-b-nics"]
    k = read_kubernetes([_write(tmp_path, docs)])
    lines = [line for line in k.summary() if "publishes other devices" in line]
    assert lines == ["  dra: node gpu-b of type accel-2g publishes other devices than node gpu-a (1 slices "
                     "against 2): replayed with gpu-a's"]
    assert [s["nodeName"] for s in k.cluster["dra"]["node_types"]["accel-2g"]] == ["gpu-a", "gpu-a"]


def test_the_imported_pair_replays_with_the_pod_bound_by_its_claim(tmp_path):
    conf = tmp_path / "conf" / "cluster"
    trace = tmp_path / "t.parquet"
    assert main(["kubernetes", str(DRA), "--out-cluster", str(conf / "mine.yaml"), "--out", str(trace)]) == 0
    cfg = compose("config", [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "cluster=mine",
                             f"trace.path={trace}", "horizon_s=3600"])
    cluster = instantiate(cfg.cluster, _convert_="all")
    w = compile_workload(read_trace(trace)[0], cluster)
    assert w.claim is not None and w.claim_sets[w.claim[0]] == (cluster.devices.claims["gpu-nic"],)
    Replay().run(cfg, tmp_path / "run", progress=False)
    jobs = pl.read_parquet(tmp_path / "run" / "jobs.parquet")
    assert jobs["job_id"].to_list() == ["ml/train-0"] and jobs["completion_s"].to_list() == [600.0], jobs


def _bad_slice(docs: list[dict]) -> None:
    _named(docs, "ResourceSlice", "gpu-b-gpus")["spec"]["devices"][0]["attributes"]["index"] = {"int": "zero"}


def _missing_node(docs: list[dict]) -> None:
    _named(docs, "ResourceSlice", "gpu-b-nics")["spec"]["nodeName"] = "gpu-z"


def _missing_template(docs: list[dict]) -> None:
    _named(docs, "Pod", "train-0")["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "gpu-pair"


def _two_claims(docs: list[dict]) -> None:
    claims = _named(docs, "Pod", "train-0")["spec"]["resourceClaims"]
    claims.append(copy.deepcopy(claims[0]) | {"name": "more"})


REFUSALS = {
    "a malformed slice": (_bad_slice, "ResourceSlice 'gpu-b-gpus'.spec.devices[0] (device 'gpu-0').attributes.index.int: expected "
                      "an integer, got 'zero'"),
    "a slice of a node not in the input": (_missing_node, "ResourceSlice 'gpu-b-nics'.spec.nodeName: node "
                                           "'gpu-z' is not a Node of the input"),
    "a pod naming a missing template": (_missing_template, "Pod ml/train-0, field spec.resourceClaims[0]."
                                        "resourceClaimTemplateName: no ResourceClaimTemplate or ResourceClaim "
                                        "'gpu-pair' in the input (given: gpu-nic)"),
    "a pod with two claims": (_two_claims, "Pod ml/train-0, field spec.resourceClaims: 2 claims"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_bad_dra_object_is_refused_naming_file_object_and_field(case, tmp_path, capsys):
    edit, expected = REFUSALS[case]
    docs = _docs()
    edit(docs)
    src = _write(tmp_path, docs)
    out = tmp_path / "out"
    assert main(["kubernetes", src, "--out-cluster", str(out / "c.yaml"), "--out", str(out / "t.parquet")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{src}: {expected}" in err, err
    assert not out.exists()
