"""`loopbench import workloads`: Pod, PodGroup and Workload manifests (KEP-4671,
scheduling.k8s.io/v1beta1) to a canonical trace, every column checked by hand, the trace
replayed, and bad manifests refused by file, object and field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest
import yaml

from harness.importers.cli import main
from harness.importers.workloads import parse_quantity, read_workloads
from harness.trace import SCHEMA, read_trace

ROOT = Path(__file__).resolve().parents[1]

#: kubectl get -o yaml of several objects: a List. A gang of 3 from a Workload template (minCount
#: and a rack constraint), its PodGroup's priority from a PriorityClass, and an unknown kind.
LIST = """\
apiVersion: v1
kind: List
items:
- apiVersion: scheduling.k8s.io/v1
  kind: PriorityClass
  metadata: {name: high}
  value: 1000
- apiVersion: v1
  kind: Service
  metadata: {name: trainer, namespace: ml}
- apiVersion: scheduling.k8s.io/v1beta1
  kind: Workload
  metadata: {name: train, namespace: ml}
  spec:
    podGroupTemplates:
    - name: workers
      schedulingPolicy: {gang: {minCount: 3}}
      schedulingConstraints:
        topology: [{key: topology.kubernetes.io/rack}]
- apiVersion: scheduling.k8s.io/v1beta1
  kind: PodGroup
  metadata: {name: train-0, namespace: ml, creationTimestamp: "2024-05-01T09:59:30Z"}
  spec:
    podGroupTemplateRef: {workload: {workloadName: train, podGroupTemplateName: workers}}
    priorityClassName: high
- apiVersion: v1
  kind: Pod
  metadata:
    name: train-0-0
    namespace: ml
    creationTimestamp: "2024-05-01T10:00:00Z"
    labels: {kueue.x-k8s.io/queue-name: research}
    annotations: {loopbench.io/duration-s: "600"}
  spec:
    schedulingGroup: {podGroupName: train-0}
    initContainers:
    - name: warm
      resources: {requests: {cpu: "32", memory: 1Gi}}
    containers:
    - name: main
      resources:
        requests: {cpu: "16", memory: 64Gi}
        limits: {nvidia.com/gpu: 8}
- apiVersion: v1
  kind: Pod
  metadata:
    name: train-0-1
    namespace: ml
    creationTimestamp: "2024-05-01T10:00:05Z"
    labels: {kueue.x-k8s.io/queue-name: research}
    annotations: {loopbench.io/duration-s: "600"}
  spec:
    schedulingGroup: {podGroupName: train-0}
    containers:
    - name: main
      resources:
        requests: {cpu: 15500m, memory: 64Gi, nvidia.com/gpu: "8"}
    - name: log
      resources: {requests: {cpu: 500m, memory: "0"}}
- apiVersion: v1
  kind: Pod
  metadata:
    name: train-0-2
    namespace: ml
    creationTimestamp: "2024-05-01T10:00:07Z"
    labels: {kueue.x-k8s.io/queue-name: research}
    annotations: {loopbench.io/duration-s: "600.5"}
  spec:
    schedulingGroup: {podGroupName: train-0}
    containers:
    - name: main
      resources:
        limits: {cpu: "16", memory: 64Gi, nvidia.com/gpu: 8}
"""

#: Several YAML documents: a basic group of 2, a lone pod (the earliest: the trace origin),
#: and a PodGroup no pod joins.
DOCS = """\
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: web, namespace: default}
spec:
  schedulingPolicy: {basic: {}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-a
  creationTimestamp: "2024-05-01T10:01:00Z"
  annotations: {loopbench.io/duration-s: "300"}
spec:
  schedulingGroup: {podGroupName: web}
  containers:
  - name: app
    resources:
      requests: {cpu: 500m, memory: 512Mi}
  - name: proxy
    resources:
      requests: {cpu: 0.25}
      limits: {memory: 1e8}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-b
  namespace: default
  creationTimestamp: "2024-05-01T10:02:00Z"
spec:
  schedulingGroup: {podGroupName: web}
  containers:
  - name: app
    resources:
      requests: {cpu: 1, memory: 1000000, ephemeral-storage: 1Gi}
---
apiVersion: v1
kind: Pod
metadata:
  name: solo
  namespace: default
  creationTimestamp: "2024-05-01T09:59:00Z"
  annotations: {loopbench.io/duration-s: "120"}
spec:
  priority: 5
  containers:
  - name: job
    resources:
      requests: {cpu: "1.5", memory: 1G}
      limits: {nvidia.com/gpu: 1}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: idle, namespace: default}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
---
"""

MIB = 2**20
#: Every column of every pod, computed by hand (rows sorted by submit, job, pod).
EXPECTED = {
    "pod_id": ["default/solo", "ml/train-0-0", "ml/train-0-1", "ml/train-0-2", "default/web-a", "default/web-b"],
    "job_id": ["default/solo", "ml/train-0", "ml/train-0", "ml/train-0", "default/web", "default/web"],
    "min_member": [1, 3, 3, 3, 1, 1],
    # origin 09:59:00 (solo, the earliest pod); the gang waits for its last pod (10:00:07),
    # the basic group for web-b (10:02:00)
    "submit_s": [0.0, 67.0, 67.0, 67.0, 180.0, 180.0],
    "duration_s": [120.0, 600.0, 600.0, 600.5, 300.0, None],
    # train-0-0: its init container (32 cores) exceeds its app container (16);
    # web-a: 500m + 0.25; web-b: 1 core
    "cpu_milli": [1500, 32000, 16000, 16000, 750, 1000],
    # 1G = 10^9 bytes = 953.67 MiB -> 954; 512Mi + 10^8 bytes (95.37 MiB, from the limit) -> 608;
    # 10^6 bytes -> 1 MiB
    "memory_mib": [954, 65536, 65536, 65536, 512 + -(-10**8 // MIB), 1],
    "gpu_count": [1, 8, 8, 8, 0, 0],
    "gpu_milli": [1000, 1000, 1000, 1000, 0, 0],
    "gpu_partition": [None] * 6,
    "gpu_models": [[]] * 6,
    "gpus_same_nvlink": [False] * 6,
    "gpus_same_numa": [False] * 6,
    "nic_per_gpu": [False] * 6,
    "gang_locality": ["none", "rack", "rack", "rack", "none", "none"],
    "priority": [5, 1000, 1000, 1000, 0, 0],
    "queue": ["default", "research", "research", "research", "default", "default"],
}


@pytest.fixture()
def manifests(tmp_path) -> tuple[Path, Path]:
    (tmp_path / "list.yaml").write_text(LIST)
    (tmp_path / "docs.yaml").write_text(DOCS)
    return tmp_path / "list.yaml", tmp_path / "docs.yaml"


def test_round_trip_every_column_and_a_replay(manifests, tmp_path, capsys):
    f1, f2 = manifests
    out = tmp_path / "trace.parquet"
    assert main(["workloads", str(f1), str(f2), "-o", str(out)]) == 0
    summary = capsys.readouterr().out
    table, meta = read_trace(out)
    assert table.column_names == SCHEMA.names
    assert table.to_pydict() == {**EXPECTED, "claim": [None] * len(EXPECTED["pod_id"])}
    assert meta.time_origin == "2024-05-01T09:59:00Z"
    for line in ("6 pods -> 6 pods, 3 jobs",
                 "3  pods of a group submitted at its latest creationTimestamp",  # train-0-0, -1, web-a
                 "1  no loopbench.io/duration-s annotation: runs to the end of the replay",
                 "1  Service objects ignored",
                 "1  PodGroup objects without pods in the input",
                 "1  pods requesting ephemeral-storage: not modelled, ignored"):
        assert line in summary, summary
    r = read_workloads([str(f1), str(f2)])
    assert (r.unit, r.rows_read, r.rows_kept, sum(r.dropped.values())) == ("pods", 6, 6, 0)

    gang = ROOT / "conf" / "loop" / "scheduler" / "gang" / "workload.yaml"
    run_dir = tmp_path / "run"
    args = [sys.executable, "-m", "harness.cli", "replay", f"trace.path={out}", "horizon_s=3600",
            f"hydra.run.dir={run_dir}", *(["loop/scheduler/gang=workload"] if gang.exists() else [])]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    metrics = pl.read_parquet(run_dir / "metrics.parquet")
    assert metrics["pods_done"][0] == 5  # all but web-b, which runs to the end of the replay
    jobs = pl.read_parquet(run_dir / "jobs.parquet")
    assert jobs.height == 3


def test_json_list_reads_as_the_yaml_does(tmp_path):
    docs = [d for d in yaml.safe_load_all(DOCS) if d]
    (tmp_path / "a.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent="\t"))
    (tmp_path / "list.yaml").write_text(LIST)
    (tmp_path / "docs.yaml").write_text(DOCS)
    a = read_workloads([str(tmp_path / "list.yaml"), str(tmp_path / "a.json")]).table
    b = read_workloads([str(tmp_path / "list.yaml"), str(tmp_path / "docs.yaml")]).table
    assert a.equals(b)


@pytest.mark.parametrize(("text", "value"), [
    ("500m", Fraction(1, 2)), ("2", 2), ("1.5", Fraction(3, 2)), ("512Mi", 512 * MIB), ("4Gi", 4 << 30),
    ("1G", 10**9), ("1000000", 10**6), ("1e3", 1000), ("1E3", 1000), ("2E", 2 * 10**18), ("1k", 1000),
    ("1Ki", 1024), (".5", Fraction(1, 2)), ("5.", 5), ("+1", 1), ("1.5e-3", Fraction(3, 2000)), (2, 2),
    (0.5, Fraction(1, 2)), ("1Ei", 2**60), ("3P", 3 * 10**15), ("7T", 7 * 10**12), ("1M", 10**6)])
def test_quantities_parse_exactly(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1.2.3", "5x", "1KiB", "Gi", "1 Gi", "1e", "1ki", "m", "1e3.5", True, None,
                                  "--1", "0x10"])
def test_malformed_quantities_are_refused(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


def refused(tmp_path: Path, capsys, files: dict[str, str], *needles: str) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "bad.parquet"
    assert main(["workloads", *(str(tmp_path / n) for n in files), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("loopbench import: error: ") and err.count("\n") == 1, err  # one line, no traceback
    for needle in needles:
        assert needle in err, err
    assert not out.exists()
    return err


def test_a_malformed_quantity_names_file_pod_and_field(tmp_path, capsys):
    refused(tmp_path, capsys, {"m.yaml": DOCS.replace("cpu: 500m", "cpu: 500mm")},
            "m.yaml", "Pod default/web-a", "spec.containers[0].resources.requests.cpu", "'500mm'")


def test_a_gang_larger_than_its_pods_is_refused(tmp_path, capsys):
    refused(tmp_path, capsys, {"l.yaml": LIST.replace("minCount: 3", "minCount: 4")},
            "l.yaml", "PodGroup ml/train-0", "spec.schedulingPolicy.gang.minCount", "minCount 4",
            "Workload ml/train", "3 pods")


def test_an_unknown_topology_key_is_refused_with_the_supported_ones(tmp_path, capsys):
    refused(tmp_path, capsys, {"l.yaml": LIST.replace("topology.kubernetes.io/rack", "topology.kubernetes.io/zone")},
            "l.yaml", "Workload ml/train", "spec.podGroupTemplates[0].schedulingConstraints.topology[0].key",
            "'topology.kubernetes.io/zone'", "rack", "block")


def test_a_pod_naming_a_missing_podgroup_is_refused(tmp_path, capsys):
    refused(tmp_path, capsys, {"d.yaml": DOCS.replace("podGroupName: web}", "podGroupName: wbe}", 1)},
            "d.yaml", "Pod default/web-a", "spec.schedulingGroup.podGroupName", "PodGroup default/wbe")


def test_basic_and_gang_in_one_policy_is_refused(tmp_path, capsys):
    refused(tmp_path, capsys, {"d.yaml": DOCS.replace("{basic: {}}", "{basic: {}, gang: {minCount: 1}}")},
            "d.yaml", "PodGroup default/web", "spec.schedulingPolicy", "exactly one of basic or gang, got both")


def test_a_malformed_yaml_file_is_refused_by_document_and_line(tmp_path, capsys):
    bad = DOCS.replace("  name: web-b\n", "  name: [web-b\n")
    refused(tmp_path, capsys, {"list.yaml": LIST, "d.yaml": bad},
            "d.yaml", "document 3, line 28, column 12: not valid YAML",
            "while parsing a flow sequence at line 27, column 9")  # lines of the file, from 1


def test_malformed_json_is_refused_by_line(tmp_path, capsys):
    refused(tmp_path, capsys, {"a.json": '{"kind": "List",\n "items": [}\n'}, "a.json", "line 2", "not valid JSON")


@pytest.mark.parametrize(("old", "new", "needles"), [
    ('creationTimestamp: "2024-05-01T10:01:00Z"', "creationTimestamp: yesterday",
     ("Pod default/web-a", "metadata.creationTimestamp", "'yesterday'")),
    ('loopbench.io/duration-s: "300"', "loopbench.io/duration-s: soon",
     ("Pod default/web-a", 'metadata.annotations["loopbench.io/duration-s"]', "'soon'")),
    ("limits: {nvidia.com/gpu: 1}", "limits: {nvidia.com/gpu: 500m}",
     ("Pod default/solo", "spec.containers[0].resources.limits.nvidia.com/gpu", "whole number")),
    ("{gang: {minCount: 2}}", "{gang: {minCount: 0}}",
     ("PodGroup default/idle", "spec.schedulingPolicy.gang.minCount", "integer >= 1")),
    ("{basic: {}}", "{}", ("PodGroup default/web", "spec.schedulingPolicy", "neither")),
    ("  priority: 5\n", "  priorityClassName: urgent\n",
     ("Pod default/solo", "spec.priorityClassName", "'urgent'", "not in the input")),
    ("apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: web",
     "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: web",
     ("PodGroup default/web", "apiVersion", "scheduling.k8s.io/v1beta1")),
    ("  name: solo\n", "  name: web-b\n", ("Pod default/web-b", "metadata.name", "defined twice")),
    ("  containers:\n  - name: job\n", "  containers: []\n  unused:\n  - name: job\n",
     ("Pod default/solo", "spec.containers", "missing or empty")),
])
def test_other_bad_fields_are_refused_by_file_object_and_field(tmp_path, capsys, old, new, needles):
    assert old in DOCS
    refused(tmp_path, capsys, {"d.yaml": DOCS.replace(old, new, 1)}, "d.yaml", *needles)


def test_a_template_missing_from_its_workload_is_refused(tmp_path, capsys):
    refused(tmp_path, capsys, {"l.yaml": LIST.replace("podGroupTemplateName: workers", "podGroupTemplateName: ps")},
            "l.yaml", "PodGroup ml/train-0", "spec.podGroupTemplateRef.workload.podGroupTemplateName", "'ps'",
            "workers")


def test_pods_of_one_group_disagreeing_on_the_queue_are_refused(tmp_path, capsys):
    text = LIST.replace("labels: {kueue.x-k8s.io/queue-name: research}", "labels: {kueue.x-k8s.io/queue-name: x}", 1)
    refused(tmp_path, capsys, {"l.yaml": text}, "l.yaml", "Pod ml/train-0-1",
            'metadata.labels["kueue.x-k8s.io/queue-name"]', "PodGroup ml/train-0")


def pod(name: str, spec: str, meta: str = "") -> str:
    return f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n{meta}spec:\n{spec}---\n"


def test_requests_as_the_scheduler_sums_them(tmp_path):
    """Sidecars (restartPolicy Always) run beside the app containers and before later init
    containers; pod-level resources replace cpu/memory; the overhead is added."""
    sidecar = """\
  initContainers:
  - {name: mesh, restartPolicy: Always, resources: {requests: {cpu: 100m, memory: 64Mi}}}
  - {name: fetch, resources: {requests: {cpu: "2", memory: 128Mi}}}
  containers:
  - {name: app, resources: {requests: {cpu: "1", memory: 1Gi}}}
"""
    level = """\
  resources: {requests: {cpu: "4"}, limits: {memory: 2Gi}}
  overhead: {cpu: 250m, memory: 120Mi}
  containers:
  - {name: a, resources: {requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: 2}}}
  - {name: b, resources: {requests: {cpu: "1", memory: 1Gi}}}
"""
    (tmp_path / "p.yaml").write_text(pod("sidecar", sidecar) + pod("level", level))
    t = read_workloads([str(tmp_path / "p.yaml")]).table.to_pydict()
    got = {p: (c, m, g) for p, c, m, g in zip(t["pod_id"], t["cpu_milli"], t["memory_mib"], t["gpu_count"],
                                              strict=True)}
    # cpu: max(1 + 0.1 (app + sidecar), 2 + 0.1 (fetch beside the sidecar)); memory: max(1024 + 64, 128 + 64)
    assert got["default/sidecar"] == (2100, 1088, 0)
    assert got["default/level"] == (4250, 2048 + 120, 2)


def test_without_timestamps_pods_go_with_their_group_or_start_at_zero(tmp_path):
    text = DOCS.replace('  creationTimestamp: "2024-05-01T10:01:00Z"\n', "")  # web-a: none
    (tmp_path / "d.yaml").write_text(text)
    r = read_workloads([str(tmp_path / "d.yaml")])
    t = r.table.to_pydict()
    assert dict(zip(t["pod_id"], t["submit_s"], strict=True)) == {
        "default/solo": 0.0, "default/web-a": 180.0, "default/web-b": 180.0}
    assert r.notes["pods of a group submitted at its latest creationTimestamp"] == 1
    bare = "\n".join(line for line in DOCS.splitlines() if "creationTimestamp" not in line) + "\n"
    (tmp_path / "bare.yaml").write_text(bare)
    r = read_workloads([str(tmp_path / "bare.yaml")])
    assert set(r.table.column("submit_s").to_pylist()) == {0.0}
    assert r.notes["no creationTimestamp: submitted at the trace origin"] == 3
    assert r.meta.time_origin.startswith("no creationTimestamp")


def test_priority_from_a_global_default_or_a_builtin_class(tmp_path):
    classes = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: base}\nvalue: 7\n" \
              "globalDefault: true\n---\n"
    text = classes + DOCS.replace("  priority: 5\n", "  priorityClassName: system-node-critical\n")
    (tmp_path / "d.yaml").write_text(text)
    t = read_workloads([str(tmp_path / "d.yaml")]).table.to_pydict()
    assert dict(zip(t["pod_id"], t["priority"], strict=True)) == {
        "default/solo": 2_000_001_000, "default/web-a": 7, "default/web-b": 7}
