"""`loopbench import kubernetes` with the cluster's other objects: Kueue's ResourceFlavors,
ClusterQueues, LocalQueues and Cohorts become the `kueue:` section, Karpenter NodePools (priced by
an instance-type list) and Cluster Autoscaler's `--nodes` node groups become pools; each field
is mapped or listed once, a bad object is refused by file, object and field, and the imported
clusters replay behind Kueue and under Karpenter."""

from __future__ import annotations

import copy
from pathlib import Path

import polars as pl
import pytest
import yaml

from harness.config import compose
from harness.errors import LoopbenchError
from harness.importers.cli import main
from harness.importers.karpenter_manifests import go_duration
from harness.importers.kubernetes import read_kubernetes
from harness.importers.kueue_manifests import UNMANAGED
from harness.importers.workloads import Obj
from harness.replay import Replay

FIXTURES = Path(__file__).parent / "fixtures" / "kubernetes"
CLUSTER, KUEUE, KARPENTER = FIXTURES / "cluster.yaml", FIXTURES / "kueue.yaml", FIXTURES / "karpenter.yaml"
TYPES, CA = FIXTURES / "instance_types.yaml", FIXTURES / "cluster_autoscaler.yaml"
H100 = "NVIDIA-H100-80GB-HBM3"


def read(*files, **kw):
    return read_kubernetes([str(f) for f in files], **kw)


def test_resource_flavors_cover_the_pools_whose_nodes_carry_their_labels():
    k = read(CLUSTER, KUEUE).cluster["kueue"]
    assert k["resource_flavors"] == [{"name": "h100", "pools": ["h100"]}, {"name": "l4", "pools": ["l4"]},
                                     {"name": UNMANAGED, "pools": ["h100", "l4", "system"]}]


def test_cluster_queues_map_field_by_field_in_both_versions():
    queues = {q["name"]: q for q in read(CLUSTER, KUEUE).cluster["kueue"]["cluster_queues"]}
    research, serving = queues["research"], queues["serving"]  # v1beta2 cohortName, v1beta1 cohort
    assert (research["cohort"], research["queueing_strategy"]) == ("ml", "StrictFIFO")
    assert research["flavors"] == [
        {"name": "h100", "nominal": {"cpu": 64.0, "memory": 512.0, "gpu": 16.0}, "borrowing_limit": {"gpu": 8.0}},
        {"name": "l4", "nominal": {"cpu": 8.0, "memory": 64.0, "gpu": 4.0}}]
    assert research["preemption"] == {"within_cluster_queue": "LowerPriority", "reclaim_within_cohort": "Any",
                                      "borrow_within_cohort": {"policy": "LowerPriority",
                                                               "max_priority_threshold": 100}}
    assert serving == {"name": "serving", "cohort": "ml", "flavors": [
        {"name": "l4", "nominal": {"cpu": 32.0, "memory": 128.0, "gpu": 4.0}, "lending_limit": {"gpu": 2.0}}]}
    assert queues[UNMANAGED]["cohort"] is None


def test_local_queues_are_namespaced_and_pods_labels_name_them():
    k = read(CLUSTER, KUEUE)
    assert k.cluster["kueue"]["local_queues"] == [
        {"name": "team-a/research", "cluster_queue": "research"},
        {"name": "team-b/serving", "cluster_queue": "serving"}, {"name": "default", "cluster_queue": UNMANAGED}]
    queues = {r["pod_id"]: r["queue"] for r in k.result.table.to_pylist()}
    assert queues == {"team-a/train-0": "team-a/research", "team-a/train-1": "team-a/research",
                      "team-a/tune-0": "team-a/research", "team-b/serve-0": "team-b/serving",
                      "team-b/serve-1": "team-b/serving", "tools/report": "default"}
    assert k.overrides == ["loop=separate_kueue"]


def test_without_kueue_objects_queues_stay_the_labels():
    k = read(CLUSTER)
    assert "kueue" not in k.cluster and k.overrides == []
    assert {r["queue"] for r in k.result.table.to_pylist()} == {"research", "serving", "default"}


def test_unmodelled_kueue_fields_are_listed_once():
    k = read(CLUSTER, KUEUE)
    text = "\n".join(k.summary())
    for line in ("ClusterQueues' quota on pods: not modelled", "ClusterQueues' spec.namespaceSelector: not modelled",
                 "Cohorts' spec.fairSharing: not modelled", "ResourceFlavors' spec.tolerations: not modelled",
                 "kueue: 3 ResourceFlavors, 3 ClusterQueues, 3 LocalQueues", "replay with: loop=separate_kueue"):
        assert text.count(line) == 1, line


def test_nodepool_offerings_become_pools_field_by_field():
    k = read(CLUSTER, KARPENTER, instance_types=str(TYPES))
    c = k.cluster
    assert c["autoscaling"] is True
    types = {t["name"]: t for t in c["node_types"]}
    assert types["p5.48xlarge"] == {"name": "p5.48xlarge", "cpu_milli": 191450, "memory_mib": 1900 * 1024, "gpus": 8,
                                    "gpu_model": H100, "nvlink_domains": 1, "numa_domains": 1}
    assert "m7i.4xlarge" not in types  # the instance-type requirement leaves it out
    pools = {p["name"]: p for p in c["pools"]}
    od, spot = pools["gpu-p5.48xlarge-on-demand-us-east-1a"], pools["gpu-p5.48xlarge-spot-us-east-1a"]
    assert (od["node_type"], od["zone"], od["min_size"], od["max_size"], od["price_on_demand"], od["priority"]) == \
        ("p5.48xlarge", "us-east-1a", 0, 4, 98.32, 10)  # 32 GPUs / 8 (1000 cores allow 5)
    assert od["taints"] == ["nvidia.com/gpu=true:NoSchedule"] and "spot" not in od
    assert (spot["spot"], spot["price_spot"]) == (True, 39.5)
    assert pools["gpu-g6.12xlarge-on-demand-us-east-1a"]["max_size"] == 8  # 32 GPUs / 4
    assert "gpu-p5.48xlarge-on-demand-us-east-1b" not in pools  # the zone requirement
    assert pools["h100"]["max_size"] == 2  # the live nodes stay a pool of their own
    assert k.overrides == ["loop=separate_karpenter", "loop.autoscaler.consolidate_underutilized=false",
                           "loop.autoscaler.consolidate_after_s=300", "loop.autoscaler.budget_nodes=0.2"]
    text = "\n".join(k.summary())
    for line in ("NodePools' template spec.nodeClassRef: not modelled", "NodePools' template spec.expireAfter",
                 "NodePools' limits on pods", "NodePools' budgets with a schedule",
                 "NodePools' requirements on example.com/reserved-for: no instance type carries it",
                 "NodePool limits: per offering", "NodePools     1 -> 3 offering pools (gpu)"):
        assert text.count(line) == 1, line


def test_a_flavor_matches_nodepool_offerings_by_their_labels():
    k = read(CLUSTER, KARPENTER, KUEUE, instance_types=str(TYPES))
    flavors = {f["name"]: f["pools"] for f in k.cluster["kueue"]["resource_flavors"]}
    assert flavors["h100"] == ["h100", "gpu-p5.48xlarge-on-demand-us-east-1a", "gpu-p5.48xlarge-spot-us-east-1a"]
    assert flavors["l4"] == ["l4", "gpu-g6.12xlarge-on-demand-us-east-1a"]
    assert k.overrides[0] == "loop=separate_karpenter"  # no bundled loop runs Kueue with Karpenter: said so
    assert any("Kueue with Karpenter" in why for why in k.ignored)


def test_node_groups_size_their_pools_and_a_template_stands_for_a_group_at_zero():
    k = read(CLUSTER, CA)
    pools = {p["name"]: p for p in k.cluster["pools"]}
    assert (pools["l4"]["min_size"], pools["l4"]["max_size"]) == (1, 6)
    a100 = pools["a100"]
    assert (a100["node_type"], a100["min_size"], a100["max_size"]) == ("a2-highgpu-8g", 0, 4)
    assert (pools["h100"]["min_size"], pools["h100"]["max_size"]) == (2, 2)  # no flag: as seen
    assert k.cluster["autoscaling"] is True and k.nodes == 5  # the template is no node of the cluster
    text = "\n".join(k.summary())
    assert "node group a100 (Cluster Autoscaler --nodes): pool a100, 0 to 4 nodes" in text
    assert text.count("Cluster Autoscaler's --expander: not read") == 1
    assert k.assumed["node groups: the replay starts each at its --nodes MIN, not at the nodes seen"] == 1  # l4: 2 seen


def _docs(path: Path) -> list[dict]:
    docs = list(yaml.safe_load_all(path.read_text()))
    return docs[0]["items"] if docs[0].get("kind") == "List" else docs


def _write(tmp_path: Path, name: str, docs: list[dict]) -> str:
    out = tmp_path / name
    out.write_text(yaml.safe_dump_all(docs))
    return str(out)


def _change(source: Path, index: int, edit):
    def make(tmp_path: Path) -> tuple[list[str], str]:
        docs = _docs(source)
        edit(docs[index])
        return [str(CLUSTER), _write(tmp_path, source.name, docs)], source.name
    return make


def _cq(edit):
    return _change(KUEUE, 2, edit)


def _rg(doc):
    return doc["spec"]["resourceGroups"][0]


def _bad_types(edit):
    def make(tmp_path: Path) -> tuple[list[str], str]:
        doc = yaml.safe_load(TYPES.read_text())
        edit(doc["instance_types"])
        path = _write(tmp_path, "instance_types.yaml", [doc])
        return [str(CLUSTER), str(KARPENTER), "--instance-types", path], "instance_types.yaml"
    return make


def _pod_queue(tmp_path: Path) -> tuple[list[str], str]:
    docs = copy.deepcopy(_docs(CLUSTER))
    docs[7]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "nope"  # tune-0, a job of its own
    return [_write(tmp_path, "cluster.yaml", docs), str(KUEUE)], "cluster.yaml"


REFUSALS = {
    "kueue apiVersion": (_change(KUEUE, 0, lambda d: d.update(apiVersion="kueue.x-k8s.io/v1alpha1")),
                         "ResourceFlavor h100, field apiVersion: 'kueue.x-k8s.io/v1alpha1' is not supported"),
    "flavor matches no pool": (_change(KUEUE, 1, lambda d: d["spec"].update(nodeLabels={"gpu": "tpu"})),
                               "ResourceFlavor l4, field spec.nodeLabels: {'gpu': 'tpu'} match no pool"),
    "cohort in v1beta2": (_cq(lambda d: d["spec"].update(cohort="ml")),
                          "ClusterQueue research, field spec.cohort: not a field of kueue.x-k8s.io/v1beta2"),
    "two resource groups": (_cq(lambda d: d["spec"]["resourceGroups"].append(_rg(d))),
                            "ClusterQueue research, field spec.resourceGroups: 2 resource groups"),
    "unknown flavor": (_cq(lambda d: _rg(d)["flavors"][1].update(name="a100")),
                       "ClusterQueue research, field spec.resourceGroups[0].flavors[1].name: ResourceFlavor 'a100' "
                       "is not in the input"),
    "quota not a quantity": (_cq(lambda d: _rg(d)["flavors"][0]["resources"][0].update(nominalQuota="lots")),
                             "ClusterQueue research, field spec.resourceGroups[0].flavors[0].resources[0].nominalQuota:"
                             " not a Kubernetes quantity"),
    "resources differ from covered": (_cq(lambda d: _rg(d)["flavors"][1]["resources"].pop()),
                                      "ClusterQueue research, field spec.resourceGroups[0].flavors[1].resources: names"),
    "borrowing without a cohort": (_change(KUEUE, 3, lambda d: (d["spec"].pop("cohort"), _rg(d)["flavors"][0][
        "resources"][2].update(borrowingLimit=2))), "ClusterQueue serving, field spec.resourceGroups[0].flavors[0]."
        "resources[2].borrowingLimit: must be unset when spec.cohort is empty"),
    "lending above nominal": (_change(KUEUE, 3, lambda d: _rg(d)["flavors"][0]["resources"][2].update(
        lendingLimit=8)), "ClusterQueue serving, field spec.resourceGroups[0].flavors[0].resources[2].lendingLimit:"
        " 8 exceeds the nominalQuota 4"),
    "bad preemption": (_cq(lambda d: d["spec"]["preemption"].update(withinClusterQueue="Always")),
                       "ClusterQueue research, field spec.preemption.withinClusterQueue: must be one of Never,"),
    "local queue to nowhere": (_change(KUEUE, 4, lambda d: d["spec"].update(clusterQueue="batch")),
                               "LocalQueue team-a/research, field spec.clusterQueue: ClusterQueue 'batch' is not in"),
    "pod names a missing local queue": (_pod_queue, 'Pod team-a/tune-0, field metadata.labels["kueue.x-k8s.io/'
                                        'queue-name"]: LocalQueue team-a/nope is not in the input'),
    "nodepool operator": (_change(KARPENTER, 0, lambda d: d["spec"]["template"]["spec"]["requirements"][0].update(
        operator="Like")), "NodePool gpu, field spec.template.spec.requirements[0].operator: must be one of In,"),
    "nodepool consolidateAfter": (_change(KARPENTER, 0, lambda d: d["spec"]["disruption"].update(
        consolidateAfter="soon")), "NodePool gpu, field spec.disruption.consolidateAfter: expected a duration"),
    "nodepool limit": (_change(KARPENTER, 0, lambda d: d["spec"]["limits"].update(cpu="many")),
                       "NodePool gpu, field spec.limits.cpu: not a Kubernetes quantity"),
    "nodepool apiVersion": (_change(KARPENTER, 0, lambda d: d.update(apiVersion="karpenter.sh/v1beta1")),
                            "NodePool gpu, field apiVersion: 'karpenter.sh/v1beta1' is not supported"),
    "nodepool allows nothing": (_change(KARPENTER, 0, lambda d: d["spec"]["template"]["spec"]["requirements"][2][
        "values"].__setitem__(0, "eu-west-1a")), "NodePool gpu, field spec.template.spec.requirements: allow no"),
    "instance type cpu": (_bad_types(lambda ts: ts[0].update(cpu="fast")),
                          "instance_types[0] (p5.48xlarge), field cpu: not a Kubernetes quantity"),
    "instance type capacity type": (_bad_types(lambda ts: ts[1]["prices"].update(reserved=3.0)),
                                    "instance_types[1] (g6.12xlarge), field prices.reserved: unknown capacity type"),
    "ca --nodes": (_change(CA, 0, lambda d: d["spec"]["template"]["spec"]["containers"][0]["args"].__setitem__(
        1, "--nodes=6:1:l4")), "Deployment kube-system/cluster-autoscaler, field spec.template.spec.containers[0]."
        "args[1]: need MIN <= MAX"),
    "ca group without nodes": (_change(CA, 0, lambda d: d["spec"]["template"]["spec"]["containers"][0][
        "args"].__setitem__(1, "--nodes=1:6:v100")), "Deployment kube-system/cluster-autoscaler, field spec.template."
        "spec.containers[0].args[1]: node group 'v100' has no Node in the input"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_bad_object_is_refused_naming_file_object_and_field(case, tmp_path, capsys):
    make, expected = REFUSALS[case]
    args, file = make(tmp_path)
    if "--instance-types" not in args and any("karpenter" in a for a in args):
        args += ["--instance-types", str(TYPES)]
    out = tmp_path / "out"
    assert main(["kubernetes", *args, "--out-cluster", str(out / "c.yaml"), "--out", str(out / "t.parquet")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{file}: {expected}" in err, err
    assert not out.exists()


def test_consolidate_after_reads_go_durations():
    np_ = Obj("karpenter.yaml", {}, "NodePool", "default", "gpu")
    assert [go_duration(np_, "spec.disruption.consolidateAfter", t) for t in ("500ms", "1h30m", "5m", "0s")] == \
        [0.5, 5400.0, 300.0, 0.0]


def test_a_nodepool_needs_the_instance_type_list_and_the_list_a_nodepool():
    with pytest.raises(LoopbenchError, match="NodePool gpu, field spec.template.spec.requirements: a NodePool's "
                       "offerings need the instance-type list"):
        read(CLUSTER, KARPENTER)
    with pytest.raises(LoopbenchError, match="--instance-types: given, but the input holds no NodePool"):
        read(CLUSTER, instance_types=str(TYPES))


def _replay(tmp_path: Path, files: list[Path], extra: list[str], overrides_from_import: bool = True):
    conf = tmp_path / "conf" / "cluster"
    trace = tmp_path / "t.parquet"
    assert main(["kubernetes", *map(str, files), "--out-cluster", str(conf / "mine.yaml"), "--out", str(trace),
                 *extra]) == 0
    head = (conf / "mine.yaml").read_text().splitlines()[1]
    overrides = head.removeprefix("# Replay with: ").split() if overrides_from_import else []
    cfg = compose("config", [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "cluster=mine",
                             f"trace.path={trace}", "horizon_s=14400", *overrides])
    run = tmp_path / "run"
    metrics = Replay().run(cfg, run, progress=False)
    return metrics, pl.read_parquet(run / "jobs.parquet"), cfg


def test_an_imported_kueue_cluster_replays_behind_its_queues(tmp_path):
    metrics, jobs, cfg = _replay(tmp_path, [CLUSTER, KUEUE], [])
    assert cfg.loop.name == "separate_kueue"
    row = metrics.row(0, named=True)
    for queue in ("team-a/research", "team-b/serving", "default"):
        assert row[f"jobs_not_admitted_{queue}"] == 0, queue
    assert jobs["admitted_s"].null_count() == 0 and len(jobs) == 5


def test_an_imported_karpenter_cluster_replays_and_buys_from_its_offerings(tmp_path):
    docs = _docs(CLUSTER)  # three more 8-GPU pods than the two live H100 nodes hold: Karpenter must buy
    extra = [dict(copy.deepcopy(docs[5]), metadata={**docs[5]["metadata"], "name": f"more-{i}",
                                                    "ownerReferences": []}) for i in range(3)]
    src = _write(tmp_path, "cluster.yaml", docs + extra)
    metrics, jobs, cfg = _replay(tmp_path, [Path(src), KARPENTER], ["--instance-types", str(TYPES)])
    assert (cfg.loop.name, cfg.loop.autoscaler.consolidate_after_s, cfg.loop.autoscaler.budget_nodes) == \
        ("separate_karpenter", 300, 0.2)
    assert jobs["start_s"].null_count() == 0, jobs
    nodes = pl.read_parquet(tmp_path / "run" / "nodes.parquet")
    assert nodes.filter(pl.col("pool").str.starts_with("gpu-")).height >= 1
