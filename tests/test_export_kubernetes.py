"""`loopbench export kubernetes`: a cluster and trace written as the Nodes, PodGroups and Pods
kubectl prints come back through `loopbench import kubernetes` as the same cluster and trace, and
replay to the same result; what the importer cannot read back is listed once, never dropped
silently; a bad input is one line naming file, column and row."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import yaml

from harness.cluster import Cluster
from harness.config import compose
from harness.exporters.cli import load_cluster, main
from harness.exporters.kubernetes import export_kubernetes, manifest_text
from harness.importers.common import boot_delay, node_price
from harness.importers.kubernetes import cluster_yaml, read_kubernetes
from harness.replay import Replay
from harness.trace import TraceMeta, read_trace, table_from_columns, write_trace

ROOT = Path(__file__).resolve().parents[1]
BUNDLED_CLUSTER, BUNDLED_TRACE = ROOT / "conf" / "cluster" / "default.yaml", ROOT / "traces" / "default.parquet"
META = TraceMeta("test", "CC0-1.0", "trace start")


def small_cluster() -> dict:
    """Two H100 nodes in racks of one, priced and booted as the importer prices and boots them."""
    return {"_target_": "harness.cluster.Cluster", "name": "small", "autoscaling": False,
            "node_types": [{"name": "a3-highgpu-8g", "cpu_milli": 207000, "memory_mib": 1850000, "gpus": 8,
                            "gpu_model": "H100", "nvlink_domains": 1, "numa_domains": 1}],
            "pools": [{"name": "train", "node_type": "a3-highgpu-8g", "zone": "us-central1-a", "block": "b1",
                       "nodes_per_rack": 1, "min_size": 2, "max_size": 2,
                       "price_on_demand": node_price("H100", 8, 207000, 1850000), "boot_delay": boot_delay(8)}]}


def small_trace() -> pa.Table:
    """A rack-local gang of two 8-GPU pods and a CPU pod that runs to the end."""
    return table_from_columns({
        "pod_id": ["ml/g-0", "ml/g-1", "ml/etl"], "job_id": ["ml/g", "ml/g", "ml/etl"], "min_member": [2, 2, 1],
        "submit_s": [0.0, 0.0, 12.5], "duration_s": [3600.25, 3600.25, None], "cpu_milli": [96000, 96000, 1500],
        "memory_mib": [800000, 800000, 2048], "gpu_count": [8, 8, 0], "gpu_milli": [1000, 1000, 0],
        "gpu_models": [["H100"], ["H100"], []], "gang_locality": ["rack", "rack", "none"],
        "priority": [500, 500, 0], "queue": ["research", "research", "default"]})


def build_cluster(cfg: dict) -> Cluster:
    return Cluster(**{k: v for k, v in cfg.items() if k != "_target_"})


def rows(table: pa.Table) -> list[dict]:
    return table.to_pylist()


def test_the_manifests_of_two_nodes_and_three_pods(tmp_path):
    out = export_kubernetes(build_cluster(small_cluster()), small_trace(), "small.parquet")
    assert not out.lost and not out.changed and out.jobs == {"PodGroup": 1, "Job": 1}
    by_kind: dict[str, list[dict]] = {}
    for obj in out.objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    nodes, (group,), pods = by_kind["Node"], by_kind["PodGroup"], by_kind["Pod"]
    assert [n["metadata"]["name"] for n in nodes] == ["train-0", "train-1"]
    assert nodes[1]["metadata"]["labels"] == {
        "node.kubernetes.io/instance-type": "a3-highgpu-8g", "cloud.google.com/gke-nodepool": "train",
        "topology.kubernetes.io/zone": "us-central1-a", "topology.kubernetes.io/block": "b1",
        "nvidia.com/gpu.product": "H100", "topology.kubernetes.io/rack": "train-rack-1"}
    assert nodes[0]["status"]["allocatable"] == {"cpu": "207", "memory": "1850000Mi", "nvidia.com/gpu": "8"}
    assert group["metadata"] == {"name": "g", "namespace": "ml", "creationTimestamp": "1970-01-01T00:00:00Z"}
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": 2}},
                             "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]}}
    g0, etl = pods[0], pods[2]
    assert g0["metadata"] == {"name": "g-0", "namespace": "ml", "creationTimestamp": "1970-01-01T00:00:00Z",
                              "labels": {"kueue.x-k8s.io/queue-name": "research"},
                              "annotations": {"loopbench.io/duration-s": "3600.25"}}
    assert g0["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "96", "memory": "800000Mi", "nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}
    assert g0["spec"]["priority"] == 500 and g0["spec"]["schedulingGroup"] == {"podGroupName": "g"}
    assert g0["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "H100"}
    assert g0["status"] == {"phase": "Succeeded", "containerStatuses": [{"name": "main", "state": {"terminated": {
        "exitCode": 0, "startedAt": "1970-01-01T00:00:00Z", "finishedAt": "1970-01-01T01:00:00.250000Z"}}}]}
    assert etl["metadata"]["creationTimestamp"] == "1970-01-01T00:00:12.500000Z" and "labels" not in etl["metadata"]
    assert etl["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "etl",
                                                   "controller": True}]
    assert etl["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1500m", "memory": "2048Mi"}}
    assert etl["status"]["phase"] == "Running" and "nodeSelector" not in etl["spec"]
    # read back (as YAML): the same cluster and the same trace
    path = tmp_path / "small.yaml"
    path.write_text(manifest_text(out.objects, as_json=False))
    back = read_kubernetes([str(path)], name="small")
    assert back.cluster == small_cluster()
    assert rows(back.result.table) == rows(small_trace())
    assert not back.ignored


def carried(cluster: dict, table: pa.Table, end_s: float) -> tuple[dict, pa.Table]:
    """The bundled scenario as far as Kubernetes manifests carry it: no DRA, no device topology or
    partitions, GPU shares as whole GPUs, prices and boot delays as the importer sets them, no commitments, stock or queues;
    the jobs submitted before end_s, from 0."""
    cluster = {k: v for k, v in cluster.items() if k not in ("kueue", "partition_profiles", "shortage", "dra")}
    cluster["name"] = "carried"
    types = {}
    for t in cluster["node_types"]:
        types[t["name"]] = {"name": t["name"], "cpu_milli": t["cpu_milli"], "memory_mib": t["memory_mib"],
                            "gpus": t["gpus"], "gpu_model": t["gpu_model"], "nvlink_domains": 1, "numa_domains": 1}
    cluster["node_types"] = list(types.values())
    cluster["pools"] = [{"name": p["name"], "node_type": (t := types[p["node_type"]])["name"], "zone": p["zone"],
                         "block": p["block"], "nodes_per_rack": p["nodes_per_rack"], "min_size": 0,
                         "max_size": p["max_size"], "boot_delay": boot_delay(t["gpus"]),
                         "price_on_demand": node_price(t["gpu_model"], t["gpus"], t["cpu_milli"], t["memory_mib"])}
                        for p in cluster["pools"]]
    keep = pc.and_(pc.less(table["submit_s"], end_s), pc.is_null(table["gpu_partition"]))
    table = table.filter(keep)
    first = pc.min(table["submit_s"]).as_py()
    cols = {c: table[c] for c in table.column_names}
    cols["submit_s"] = pa.array([round(s - first, 3) for s in table["submit_s"].to_pylist()])  # nearest doubles
    cols["gpu_milli"] = pc.multiply(pc.min_element_wise(table["gpu_count"], 1), 1000)
    for c in ("gpus_same_nvlink", "gpus_same_numa", "nic_per_gpu"):
        cols[c] = pa.array([False] * table.num_rows)
    return cluster, pa.table(cols, schema=table.schema)


def replay(tmp_path: Path, name: str, cluster: dict, trace: Path) -> dict[str, pl.DataFrame]:
    conf = tmp_path / "conf"
    (conf / "cluster").mkdir(parents=True, exist_ok=True)
    (conf / "cluster" / f"{name}.yaml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    cfg = compose("config", [f"hydra.searchpath=[file://{conf}]", f"cluster={name}", f"trace.path={trace}",
                             "loop=separate"])
    run = tmp_path / f"run-{name}"
    Replay().run(cfg, run, progress=False)
    out = {f: pl.read_parquet(run / f"{f}.parquet") for f in ("metrics", "jobs", "nodes", "timeline")}
    out["metrics"] = out["metrics"].drop("trace")
    out["jobs"] = out["jobs"].with_columns(pl.col("job_id").str.strip_prefix("default/"))
    return out


def test_the_bundled_scenario_as_manifests_replays_the_same(tmp_path):
    cluster, table = carried(yaml.safe_load(BUNDLED_CLUSTER.read_text()), read_trace(BUNDLED_TRACE)[0], 16000.0)
    assert table["job_id"].to_pylist().count("gang-000118") == 2 and table.num_rows > 100
    out = export_kubernetes(build_cluster(cluster), table, "carried.parquet")
    assert not out.lost and set(out.changed) == {
        "pods whose pod_id or job_id has no namespace: read back as <namespace>/<id> (default or the job's)"}
    manifests = tmp_path / "carried.json"
    manifests.write_text(manifest_text(out.objects, as_json=True))
    back = read_kubernetes([str(manifests)], autoscaled=out.autoscaled, name=out.cluster)
    assert back.cluster == {"_target_": "harness.cluster.Cluster", **cluster}
    names = pl.from_arrow(back.result.table).with_columns(pl.col("pod_id", "job_id").str.strip_prefix("default/"))
    assert names.equals(pl.from_arrow(table))
    original, imported = tmp_path / "carried.parquet", tmp_path / "imported.parquet"
    write_trace(table, original, META)
    write_trace(back.result.table, imported, back.result.meta)
    (tmp_path / "back.yaml").write_text(cluster_yaml(back.cluster, ""))
    a = replay(tmp_path, "carried", cluster, original)
    b = replay(tmp_path, "back", yaml.safe_load((tmp_path / "back.yaml").read_text()), imported)
    assert a["metrics"]["pods_done"].item() == table.num_rows and a["metrics"]["gangs"].item() >= 2
    for name in a:
        assert a[name].equals(b[name]), name


def test_what_the_bundled_scenario_loses_is_listed_once(tmp_path, capsys):
    out_file = tmp_path / "default.json"  # JSON: the YAML of 3,405 pods takes 3 s to write
    assert main(["kubernetes", "--cluster", str(BUNDLED_CLUSTER), "--trace", str(BUNDLED_TRACE),
                 "--out", str(out_file)]) == 0
    printed = capsys.readouterr().out
    table = read_trace(BUNDLED_TRACE)[0]
    counts = {c: pc.sum(table[c]).as_py() for c in ("gpus_same_nvlink", "gpus_same_numa", "nic_per_gpu")}
    shares = pc.sum(pc.and_(pc.less(table["gpu_milli"], 1000), pc.greater(table["gpu_milli"], 0))).as_py()
    partitions = table.num_rows - table["gpu_partition"].null_count
    for n, what in [(shares, "pods on a GPU share (gpu_milli < 1000): written as one whole nvidia.com/gpu"),
                    (partitions, "pods on a GPU partition: written as nvidia.com/mig-<profile>, read back without "
                                 "GPUs"),
                    *((k, f"pods' {c} claims (no Kubernetes field says it)") for c, k in counts.items()),
                    (1, "pool nvl-reserved: 4 committed slots and their price (read back 0)"),
                    (1, "pool nvl-ondemand: stock 6 (read back unlimited)"),
                    (1, "pool nvl-reserved: atomic (all-or-nothing requests; read back off)"),
                    (1, "pool l4-ondemand: min_size 1 (read back with --autoscaled: 0)"),
                    (1, "node type h100-pcie8: nvlink_domains 4 (kubectl does not say; read back 1)"),
                    (1, "node type h100-nvl8: nic_per_gpu (kubectl does not say)"),
                    (1, "Kueue's queues and quotas (cluster.kueue): no Kueue objects are written")]:
        assert printed.count(what) == 1 and f"{n:>8,}  {what}" in printed, what
    assert f"read it back: loopbench import kubernetes {out_file} --autoscaled --name default" in printed
    assert len(json.loads(out_file.read_text())["items"]) == 128 + 20 + table.num_rows  # Nodes, PodGroups, Pods


def test_json_is_what_kubectl_get_o_json_prints(tmp_path, capsys):
    write_trace(small_trace(), tmp_path / "t.parquet", META)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(small_cluster()))
    assert main(["kubernetes", "--cluster", str(tmp_path / "c.yaml"), "--trace", str(tmp_path / "t.parquet"),
                 "-o", str(tmp_path / "out.json")]) == 0
    assert "nothing lost" in capsys.readouterr().out
    doc = json.loads((tmp_path / "out.json").read_text())
    assert [i["kind"] for i in doc["items"]] == ["Node", "Node", "PodGroup", "Pod", "Pod", "Pod"]


def bad_trace(tmp_path, **change) -> str:
    cols = small_trace().to_pydict()
    cols.update(change)
    write_trace(table_from_columns(cols), tmp_path / "bad.parquet", META)
    return str(tmp_path / "bad.parquet")


REFUSALS = {
    "pod name": (lambda p: ["--cluster", "c.yaml", "--trace", bad_trace(p, pod_id=["ml/g-0", "ml/G_1", "ml/etl"])],
                 "bad.parquet, column 'pod_id', row 1: 'ml/G_1' is not a Kubernetes object name"),
    "namespace apart": (lambda p: ["--cluster", "c.yaml", "--trace", bad_trace(p, pod_id=["ml/g-0", "x/g-1",
                                                                                     "ml/etl"])],
                        "bad.parquet, column 'pod_id', row 1: pod 'x/g-1' is in namespace 'x', its job 'ml/g' in 'ml'"),
    "no cluster file": (lambda p: ["--cluster", "nowhere.yaml", "--trace", bad_trace(p)],
                        "--cluster nowhere.yaml: no such file"),
    "bad cluster key": (lambda p: ["--cluster", "odd.yaml", "--trace", bad_trace(p)],
                        "--cluster odd.yaml: pool 'train' at cluster.pools[0].max_size: expected int"),
    "pool name": (lambda p: ["--cluster", "upper.yaml", "--trace", bad_trace(p)],
                  "cluster.pools[0].name: 'Train' is not a Kubernetes name"),
    "no trace": (lambda p: ["--cluster", "c.yaml", "--trace", "none.parquet"], "none.parquet: file does not exist"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_bad_input_is_one_line_naming_where(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("c.yaml").write_text(yaml.safe_dump(small_cluster()))
    odd = small_cluster()
    odd["pools"][0]["max_size"] = "two"
    Path("odd.yaml").write_text(yaml.safe_dump(odd))
    upper = small_cluster()
    upper["pools"][0]["name"] = "Train"
    Path("upper.yaml").write_text(yaml.safe_dump(upper))
    args, expected = REFUSALS[case]
    assert main(["kubernetes", *args(tmp_path), "--out", "out.yaml"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and expected in err, err
    assert not Path("out.yaml").exists()


def test_an_output_that_is_an_input_is_refused(tmp_path, capsys):
    write_trace(small_trace(), tmp_path / "t.parquet", META)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(small_cluster()))
    assert main(["kubernetes", "--cluster", str(tmp_path / "c.yaml"), "--trace", str(tmp_path / "t.parquet"),
                 "--out", str(tmp_path / "c.yaml")]) == 1
    assert "c.yaml: is an input of this export" in capsys.readouterr().err
    assert load_cluster(str(tmp_path / "c.yaml")).name == "small"  # untouched
