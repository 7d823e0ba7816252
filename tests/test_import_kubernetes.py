"""`loopbench import kubernetes`: what `kubectl get nodes,pods -A -o json` prints becomes a
cluster YAML that a replay loads and a trace, row by row as the pods say; what is not modelled
is listed once, and a bad object is refused by file, object and field."""

from __future__ import annotations

import copy
import json

import pyarrow.parquet as pq
import pytest
import yaml

from harness.config import compose
from harness.errors import TraceError
from harness.importers.cli import main
from harness.importers.kubernetes import read_kubernetes
from harness.replay import Replay

H100 = "NVIDIA-H100-80GB-HBM3"


def node(name, pool, zone, *, gpus=8, product=H100, instance="a3-highgpu-8g", cpu="207", mem="1850000Mi",
         rack=None, taints=None):
    labels = {"kubernetes.io/os": "linux", "cloud.google.com/gke-nodepool": pool,
              "topology.kubernetes.io/zone": zone, "node.kubernetes.io/instance-type": instance}
    if product:
        labels["nvidia.com/gpu.product"] = product
    if rack:
        labels["cloud.google.com/gce-topology-subblock"] = rack
    alloc = {"cpu": cpu, "memory": mem, "ephemeral-storage": "100Gi", "pods": "110"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "creationTimestamp": "2025-01-01T00:00:00Z"},
            "spec": {"taints": taints or []},
            "status": {"capacity": dict(alloc), "allocatable": alloc}}


def pod(name, *, ns="ml", created="2025-03-01T10:00:00Z", cpu="4", mem="16Gi", gpus=0, phase="Succeeded",
        ran=("2025-03-01T10:01:00Z", "2025-03-01T11:01:00Z"), owner=None, labels=None, priority=None, **spec):
    res = {"requests": {"cpu": cpu, "memory": mem}}
    if gpus:
        res["limits"] = {"nvidia.com/gpu": str(gpus)}
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created, "labels": labels or {},
                         "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "main", "image": "x", "resources": res}],
                     "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                      "effect": "NoExecute", "tolerationSeconds": 300}], **spec},
            "status": {"phase": phase}}
    if priority is not None:
        body["spec"]["priority"] = priority
    if owner:
        kind, oname = owner
        body["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": kind, "name": oname,
                                                "uid": "u", "controller": True}]
    if phase in ("Succeeded", "Failed"):
        body["status"]["containerStatuses"] = [{"name": "main", "state": {"terminated": {
            "exitCode": 0 if phase == "Succeeded" else 1, "startedAt": ran[0], "finishedAt": ran[1]}}}]
    elif phase == "Running":
        body["status"]["containerStatuses"] = [{"name": "main", "state": {"running": {"startedAt": ran[0]}}}]
    return body


def nodes():
    return [node("gke-a-1", "train", "us-central1-a", rack="sb-1"),
            node("gke-a-2", "train", "us-central1-a", rack="sb-1"),
            node("gke-a-3", "train", "us-central1-b", rack="sb-2"),
            node("gke-cpu-1", "system", "us-central1-a", gpus=0, product=None, instance="n2-standard-16",
                 cpu="15890m", mem="57000Mi", taints=[{"key": "dedicated", "value": "sys", "effect": "NoSchedule"}])]


def pods():
    return [
        pod("train-0-abc", gpus=8, owner=("Job", "train"), created="2025-03-01T10:00:00Z",
            labels={"kueue.x-k8s.io/queue-name": "research"}, priority=500),
        pod("train-1-def", gpus=8, owner=("Job", "train"), created="2025-03-01T10:00:05Z",
            labels={"kueue.x-k8s.io/queue-name": "research"}, priority=500,
            ran=("2025-03-01T10:02:00Z", "2025-03-01T10:32:00Z")),
        pod("serve-7d9-x1", gpus=1, owner=("ReplicaSet", "serve-7d9"), phase="Running", created="2025-03-01T10:10:00Z",
            nodeSelector={"nvidia.com/gpu.product": H100, "kubernetes.io/os": "linux"},
            nodeName="gke-a-1"),
        pod("gang-0", gpus=4, created="2025-03-01T10:20:00Z", phase="Pending",
            labels={"scheduling.x-k8s.io/pod-group": "g1"}),
        pod("gang-1", gpus=4, created="2025-03-01T10:21:00Z", phase="Pending",
            labels={"scheduling.x-k8s.io/pod-group": "g1"},
            affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
            tolerations=[{"key": "dedicated", "operator": "Equal", "value": "sys", "effect": "NoSchedule"}]),
        pod("lone", created="2025-03-01T10:30:00Z", phase="Pending", cpu="500m", mem="1Gi"),
        pod("fluentd-x", ns="kube-system", owner=("DaemonSet", "fluentd"), phase="Running"),
        {**pod("evicted", phase="Failed"), "status": {"phase": "Failed", "reason": "Evicted"}},
    ]


def kubectl_list(items):
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


@pytest.fixture
def dump(tmp_path):
    def write(items, name="cluster.json", as_yaml=False):
        path = tmp_path / name
        items = [copy.deepcopy(i) for i in items]
        if as_yaml:
            path.write_text(yaml.safe_dump_all(items))
        else:
            path.write_text(json.dumps(kubectl_list(items)))
        return str(path)
    return write


def rows(result):
    t = result.table.to_pylist()
    return {r["pod_id"]: r for r in t}


def test_nodes_become_node_types_and_pools(dump):
    k = read_kubernetes([dump(nodes() + pods())])
    c = k.cluster
    assert c["autoscaling"] is False and c["_target_"] == "harness.cluster.Cluster"
    assert [t["name"] for t in c["node_types"]] == ["a3-highgpu-8g", "n2-standard-16"]
    gpu, cpu = c["node_types"]
    assert (gpu["cpu_milli"], gpu["memory_mib"], gpu["gpus"], gpu["gpu_model"]) == (207000, 1850000, 8, H100)
    assert (cpu["cpu_milli"], cpu["memory_mib"], cpu["gpus"], cpu["gpu_model"]) == (15890, 57000, 0, "")
    pools = {p["name"]: p for p in c["pools"]}
    assert sorted(pools) == ["system", "train-us-central1-a", "train-us-central1-b"]  # a regional pool splits
    a = pools["train-us-central1-a"]
    assert (a["node_type"], a["zone"], a["min_size"], a["max_size"], a["nodes_per_rack"]) == \
        ("a3-highgpu-8g", "us-central1-a", 2, 2, 2)
    assert pools["system"]["max_size"] == 1 and "taints" not in pools["system"]  # a non-GPU taint: listed
    assert k.ignored["nodes' taints other than nvidia.com/gpu (pods tolerate only that one in loopbench)"] == 1
    assert k.ignored["nodes' allocatable ephemeral-storage: not modelled"] == 4


def test_autoscaled_pools_start_empty_and_grow_to_the_nodes_seen(dump):
    c = read_kubernetes([dump(nodes() + pods())], autoscaled=True).cluster
    assert c["autoscaling"] is True
    assert all(p["min_size"] == 0 and p["max_size"] >= 1 for p in c["pools"])


def test_a_gpu_taint_is_the_pools_and_types_without_instance_type_are_named_by_product(dump):
    ns = [node(f"n{i}", "gpu", "z", instance="", taints=[{"key": "nvidia.com/gpu", "value": "present",
                                                         "effect": "NoSchedule"}]) for i in range(2)]
    ns.append(node("n9", "gpu", "z", instance="", gpus=4, cpu="96"))
    c = read_kubernetes([dump(ns + [pod("p", gpus=1)])]).cluster
    assert [t["name"] for t in c["node_types"]] == [f"{H100}x8", f"{H100}x4"]
    assert [p["name"] for p in c["pools"]] == [f"gpu-{H100}x8", f"gpu-{H100}x4"]
    assert c["pools"][0]["taints"] == ["nvidia.com/gpu=present:NoSchedule"]


def test_pods_become_rows_as_their_status_says(dump):
    k = read_kubernetes([dump(nodes() + pods())])
    r = rows(k.result)
    assert set(r) == {"ml/train-0-abc", "ml/train-1-def", "ml/serve-7d9-x1", "ml/gang-0", "ml/gang-1", "ml/lone"}
    t0, t1 = r["ml/train-0-abc"], r["ml/train-1-def"]
    assert (t0["job_id"], t0["min_member"], t0["submit_s"], t0["duration_s"]) == ("ml/train", 1, 0.0, 3600.0)
    assert (t1["job_id"], t1["submit_s"], t1["duration_s"]) == ("ml/train", 0.0, 1800.0)  # the Job's first pod
    assert (t0["gpu_count"], t0["gpu_milli"], t0["cpu_milli"], t0["memory_mib"]) == (8, 1000, 4000, 16384)
    assert (t0["queue"], t0["priority"]) == ("research", 500)
    s = r["ml/serve-7d9-x1"]
    assert (s["job_id"], s["submit_s"], s["duration_s"], s["gpu_models"]) == ("ml/serve-7d9", 600.0, None, [H100])
    g0, g1 = r["ml/gang-0"], r["ml/gang-1"]
    assert g0["job_id"] == g1["job_id"] == "ml/g1"
    assert (g0["min_member"], g0["submit_s"], g1["submit_s"], g0["duration_s"]) == (2, 1260.0, 1260.0, None)
    lone = r["ml/lone"]
    assert (lone["job_id"], lone["min_member"], lone["cpu_milli"], lone["memory_mib"], lone["queue"]) == \
        ("ml/lone", 1, 500, 1024, "default")
    assert k.result.dropped == {"DaemonSet and mirror (static) pods: they belong to the nodes": 1,
                                "Failed pods without their containers' startedAt and finishedAt (e.g. Evicted)": 1}


def test_the_summary_lists_what_was_assumed_and_ignored_once(dump):
    k = read_kubernetes([dump(nodes() + pods())])
    text = "\n".join(k.summary())
    assert k.ignored["pods' affinity.podAntiAffinity"] == 1
    assert k.ignored["pods' tolerations other than nvidia.com/gpu and the defaults"] == 1
    assert k.ignored["pods' spec.nodeName (the replay places every pod itself)"] == 1
    assert k.assumed["pods' nodeSelector terms every node satisfies: no restriction"] == 1
    assert "Running pods: run time unknown, run to the end of the replay (--running-duration-s S to give one)" in text
    assert "fixed size: min = max = the nodes seen, autoscaling off" in text
    assert text.count("pods' affinity.podAntiAffinity") == 1
    assert "8 -> 6 in the trace (4 jobs)" in text


def test_running_duration_and_the_annotation(dump):
    ps = pods()
    ps[5]["metadata"]["annotations"] = {"loopbench.io/duration-s": "90"}
    r = rows(read_kubernetes([dump(nodes() + ps)], running_duration_s=1200).result)
    assert r["ml/serve-7d9-x1"]["duration_s"] == 1200.0
    assert r["ml/lone"]["duration_s"] == 90.0


def test_several_yaml_files_are_one_input(dump):
    a = dump(nodes(), "nodes.yaml", as_yaml=True)
    b = dump(pods(), "pods.yaml", as_yaml=True)
    assert read_kubernetes([a, b]).result.table.num_rows == 6


def test_cli_writes_a_cluster_and_trace_that_replay(dump, tmp_path, capsys):
    src = dump(nodes() + pods())
    conf = tmp_path / "myconf" / "cluster"
    out, trace = conf / "mine.yaml", tmp_path / "mine.parquet"
    assert main(["kubernetes", src, "--out-cluster", str(out), "--out", str(trace),
                 "--running-duration-s", "600"]) == 0
    printed = capsys.readouterr().out
    assert "loopbench import kubernetes" in printed and f"wrote {out} and {trace}" in printed
    assert pq.read_table(trace).num_rows == 6
    assert yaml.safe_load(out.read_text())["pools"][0]["max_size"] == 2
    cfg = compose("config", [f"hydra.searchpath=[file://{tmp_path / 'myconf'}]", "cluster=mine",
                             f"trace.path={trace}", "horizon_s=7200", "loop=merged"])
    metrics = Replay().run(cfg, tmp_path / "run", progress=False)
    assert metrics is not None and (tmp_path / "run" / "metrics.parquet").exists()


def test_cli_refuses_a_bad_flag_in_one_line(dump, tmp_path, capsys):
    src = dump(nodes() + pods())
    assert main(["kubernetes", src, "--out-cluster", str(tmp_path / "c.yaml"), "--out", src]) == 1
    assert "is an input of this import" in capsys.readouterr().err
    assert main(["kubernetes", src, "--out-cluster", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "t.parquet"),
                 "--running-duration-s", "-1"]) == 1
    assert capsys.readouterr().err.startswith("loopbench import: error: --running-duration-s: must be seconds")


def _bad_node(change):
    ns = nodes()
    change(ns[0])
    return ns + pods()


def _bad_pod(change, i=0):
    ps = pods()
    change(ps[i])
    return nodes() + ps


REFUSALS = {
    "no allocatable": (lambda: _bad_node(lambda n: n.pop("status")), "Node gke-a-1, field status.allocatable"),
    "cpu not a quantity": (lambda: _bad_node(lambda n: n["status"]["allocatable"].update(cpu="lots")),
                           "Node gke-a-1, field status.allocatable.cpu: not a Kubernetes quantity"),
    "fractional gpus": (lambda: _bad_node(lambda n: n["status"]["allocatable"].update({"nvidia.com/gpu": "0.5"})),
                        "Node gke-a-1, field status.allocatable.nvidia.com/gpu: nvidia.com/gpu must be a whole"),
    "zero memory": (lambda: _bad_node(lambda n: n["status"]["allocatable"].update(memory="0")),
                    "Node gke-a-1, field status.allocatable.memory: missing or zero"),
    "label not a string": (lambda: _bad_node(lambda n: n["metadata"]["labels"].update(
        {"topology.kubernetes.io/zone": 3})), 'Node gke-a-1, field metadata.labels["topology.kubernetes.io/zone"]'),
    "node twice": (lambda: nodes() + [nodes()[0]] + pods(), "Node gke-a-1, field metadata.name: defined twice"),
    "bad taint": (lambda: _bad_node(lambda n: n["spec"].update(taints=["gpu:NoSchedule"])),
                  "Node gke-a-1, field spec.taints[0]: a taint has a key and an effect"),
    "finished before started": (lambda: _bad_pod(lambda p: p["status"]["containerStatuses"][0]["state"][
        "terminated"].update(finishedAt="2025-03-01T09:00:00Z")),
        "Pod ml/train-0-abc, field status.containerStatuses[0].state.terminated.finishedAt: before its startedAt"),
    "bad startedAt": (lambda: _bad_pod(lambda p: p["status"]["containerStatuses"][0]["state"]["terminated"].update(
        startedAt="yesterday")), "Pod ml/train-0-abc, field status.containerStatuses[0].state.terminated.startedAt: "
        "not an RFC 3339 time"),
    "bad phase": (lambda: _bad_pod(lambda p: p["status"].update(phase="Done")),
                  "Pod ml/train-0-abc, field status.phase: must be one of"),
    "owner without a name": (lambda: _bad_pod(lambda p: p["metadata"]["ownerReferences"][0].pop("name")),
                             "Pod ml/train-0-abc, field metadata.ownerReferences[0].name: missing"),
    "bad gpu request": (lambda: _bad_pod(lambda p: p["spec"]["containers"][0]["resources"]["limits"].update(
        {"nvidia.com/gpu": "1.5"})), "Pod ml/train-0-abc, field spec.containers[0].resources.limits.nvidia.com/gpu"),
    "bad creationTimestamp": (lambda: _bad_pod(lambda p: p["metadata"].update(creationTimestamp="soon")),
                              "Pod ml/train-0-abc, field metadata.creationTimestamp: not an RFC 3339 time"),
    "queue disagrees in a job": (lambda: _bad_pod(lambda p: p["metadata"]["labels"].update(
        {"kueue.x-k8s.io/queue-name": "prod"}), 1), 'Pod ml/train-1-def, field metadata.labels["kueue.x-k8s.io/'
        "queue-name\"]: queue 'prod' differs from Pod ml/train-0-abc's 'research': pods of Job ml/train share"),
    "bad toleration": (lambda: _bad_pod(lambda p: p["spec"].update(tolerations=["x"])),
                       "Pod ml/train-0-abc, field spec.tolerations[0]: expected a toleration"),
    "bad duration annotation": (lambda: _bad_pod(lambda p: p["metadata"].update(
        annotations={"loopbench.io/duration-s": "long"})), 'Pod ml/train-0-abc, field metadata.annotations["'
        'loopbench.io/duration-s"]: must be a number of seconds'),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_bad_object_is_refused_naming_file_object_and_field(case, dump, tmp_path, capsys):
    items, expected = REFUSALS[case]
    src = dump(items())
    with pytest.raises(TraceError) as exc:
        read_kubernetes([src])
    assert str(exc.value).startswith(f"{src}: {expected}"), str(exc.value)
    assert main(["kubernetes", src, "--out-cluster", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "t.parquet")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and expected in err
    assert not (tmp_path / "c.yaml").exists() and not (tmp_path / "t.parquet").exists()


def test_no_nodes_is_refused(dump):
    src = dump(pods())
    with pytest.raises(TraceError, match="no Node objects in the input"):
        read_kubernetes([src])
