"""`loopbench import dra`: DRA manifests (resource.k8s.io/v1) as kubectl prints them, read
through harness.dra.resources and harness.dra.cel, written as one `dra:` YAML that reloads to
the same objects, and bad manifests refused by file, object and field. Also the CEL subset's
evaluation and the quantities, as harness/dra defines them."""

from __future__ import annotations

import json

import pytest
import yaml

from harness.dra import resources as r
from harness.dra.cel import SelectorError, compile_selector
from harness.errors import ConfigError
from harness.importers.cli import main
from harness.importers.dra import default_node_type, read_dra

GIB = 2**30 * 1000  # one Gi in milli-units

#: what `kubectl get deviceclass -o yaml` prints: a List, with the server's metadata
CLASSES = """\
apiVersion: v1
kind: List
metadata:
  resourceVersion: ""
items:
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata:
    creationTimestamp: "2025-09-01T10:00:00Z"
    generation: 1
    managedFields:
    - apiVersion: resource.k8s.io/v1
      fieldsType: FieldsV1
      fieldsV1:
        f:spec:
          f:selectors: {}
      manager: helm
      operation: Update
      time: "2025-09-01T10:00:00Z"
    name: gpu.nvidia.com
    resourceVersion: "1021"
    uid: 1c7c4b0e-8e4a-4c39-9d0e-3f1c2a0b9d11
  spec:
    selectors:
    - cel:
        expression: device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata:
    name: mig.nvidia.com
    resourceVersion: "1022"
    uid: 5b0d2f8e-3a1c-4f0e-9a6b-77e1c2d3e4f5
  spec:
    selectors:
    - cel:
        expression: device.driver == "gpu.nvidia.com"
    - cel:
        expression: device.attributes["gpu.nvidia.com"].type == "mig"
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata:
    name: large-gpu.nvidia.com
    uid: 9a8b7c6d-0000-4000-8000-000000000003
  spec:
    selectors:
    - cel:
        expression: |-
          device.driver == "gpu.nvidia.com" &&
          device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata:
    name: nic.example.com
    uid: 9a8b7c6d-0000-4000-8000-000000000004
  spec:
    selectors:
    - cel:
        expression: device.driver == "nic.example.com"
"""


def gpu_slice(node: str, product: str = "NVIDIA H100 80GB HBM3") -> str:
    """The NVIDIA-like driver's slice of a node of 8 GPUs: two per PCIe root, one NVLink domain."""
    devices = "".join(f"""\
  - name: gpu-{i}
    attributes:
      type:
        string: gpu
      productName:
        string: {product}
      index:
        int: {i}
      uuid:
        string: GPU-{node}-{i:04d}
      driverVersion:
        version: 550.54.15
      resource.kubernetes.io/pcieRoot:
        string: pci0000:{i // 2:02x}
      nvlinkDomain:
        int: 0
    capacity:
      memory:
        value: 80Gi
""" for i in range(8))
    return f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  creationTimestamp: "2025-09-01T10:02:11Z"
  generateName: {node}-gpu.nvidia.com-
  generation: 1
  name: {node}-gpu.nvidia.com-x7k2p
  ownerReferences:
  - apiVersion: v1
    controller: true
    kind: Node
    name: {node}
    uid: 0f5a9c3e-2b7d-4e8a-9c1f-6d3b2a1e0f9c
  resourceVersion: "48213"
  uid: 3e2d1c0b-9a8f-4e7d-8c6b-5a4f3e2d1c0b
spec:
  driver: gpu.nvidia.com
  nodeName: {node}
  pool:
    generation: 1
    name: {node}
    resourceSliceCount: 1
  devices:
{devices}"""


def nic_slice(node: str) -> str:
    devices = "".join(f"""\
  - name: nic-{j}
    attributes:
      model:
        string: ConnectX-7
      resource.kubernetes.io/pcieRoot:
        string: pci0000:{j:02x}
    capacity:
      bandwidth:
        value: 400G
""" for j in range(4))
    return f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: {node}-nic.example.com-q8v4d
  resourceVersion: "48220"
  uid: 7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d
spec:
  driver: nic.example.com
  nodeName: {node}
  pool:
    generation: 3
    name: {node}
    resourceSliceCount: 1
  devices:
{devices}"""


#: a partitionable GPU (KEP-4815): the whole GPU and its MIG slices draw on shared counters;
#: and a multi-allocatable NIC (KEP-5075) whose bandwidth is shared out by request
MIG_NODE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: mig-node-0-gpu.nvidia.com-b9c3m
  uid: 11111111-2222-4333-8444-555555555555
spec:
  driver: gpu.nvidia.com
  nodeName: mig-node-0
  pool:
    generation: 1
    name: mig-node-0
    resourceSliceCount: 1
  sharedCounters:
  - name: gpu-0-counter-set
    counters:
      multiprocessors:
        value: "98"
      memory:
        value: 80Gi
  devices:
  - name: gpu-0
    attributes:
      type: {string: gpu}
      productName: {string: NVIDIA A100-SXM4-80GB}
      resource.kubernetes.io/pcieRoot: {string: pci0000:00}
    capacity:
      memory: {value: 80Gi}
    consumesCounters:
    - counterSet: gpu-0-counter-set
      counters:
        multiprocessors: {value: "98"}
        memory: {value: 80Gi}
  - name: gpu-0-mig-1g.10gb-0
    attributes:
      type: {string: mig}
      profile: {string: 1g.10gb}
      resource.kubernetes.io/pcieRoot: {string: pci0000:00}
    capacity:
      memory: {value: 10Gi}
    consumesCounters:
    - counterSet: gpu-0-counter-set
      counters:
        multiprocessors: {value: "14"}
        memory: {value: 10Gi}
  - name: gpu-0-mig-3g.40gb-0
    attributes:
      type: {string: mig}
      profile: {string: 3g.40gb}
      resource.kubernetes.io/pcieRoot: {string: pci0000:00}
    capacity:
      memory: {value: 40Gi}
    consumesCounters:
    - counterSet: gpu-0-counter-set
      counters:
        multiprocessors: {value: "42"}
        memory: {value: 40Gi}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: mig-node-0-nic.example.com-s1
spec:
  driver: nic.example.com
  nodeName: mig-node-0
  pool: {name: mig-node-0, generation: 1, resourceSliceCount: 1}
  devices:
  - name: nic-shared
    allowMultipleAllocations: true
    attributes:
      model: {string: ConnectX-7}
      resource.kubernetes.io/pcieRoot: {string: pci0000:00}
    capacity:
      bandwidth:
        value: 400G
        requestPolicy:
          default: 10G
          validRange: {min: 1G, max: 400G, step: 1G}
"""

#: claims as the API server returns them: defaulted fields, a template's own metadata, status
CLAIMS = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: gpu-nic-pair
  namespace: ml
  resourceVersion: "50001"
  uid: aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee
spec:
  metadata:
    labels: {app: trainer}
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          allocationMode: ExactCount
          count: 1
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].productName in ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
      - name: nic
        exactly:
          deviceClassName: nic.example.com
          allocationMode: ExactCount
          count: 1
      constraints:
      - requests: [gpu, nic]
        matchAttribute: resource.kubernetes.io/pcieRoot
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: mig-or-gpu
  namespace: ml
spec:
  spec:
    devices:
      requests:
      - name: accel
        firstAvailable:
        - name: mig
          deviceClassName: mig.nvidia.com
          selectors:
          - cel:
              expression: device.attributes["gpu.nvidia.com"].profile == "3g.40gb"
        - name: full
          deviceClassName: large-gpu.nvidia.com
          allocationMode: ExactCount
          count: 1
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: shared-nic
  namespace: default
  finalizers: [resource.kubernetes.io/delete-protection]
  resourceVersion: "50100"
  uid: 12345678-1234-4234-8234-123456789abc
spec:
  devices:
    requests:
    - name: net
      exactly:
        deviceClassName: nic.example.com
        allocationMode: ExactCount
        count: 1
        capacity:
          requests:
            bandwidth: 25G
status:
  allocation:
    devices:
      results:
      - device: nic-shared
        driver: nic.example.com
        pool: mig-node-0
        request: net
  reservedFor:
  - {name: web-0, resource: pods, uid: 0b0b0b0b-0000-4000-8000-000000000000}
"""

#: two nodes of one type (gpu-node), one of another (mig-node)
SLICES = "---\n".join([gpu_slice("gpu-node-0"), nic_slice("gpu-node-0"), gpu_slice("gpu-node-1"),
                       nic_slice("gpu-node-1"), MIG_NODE])


@pytest.fixture()
def files(tmp_path) -> list[str]:
    for name, text in (("classes.yaml", CLASSES), ("slices.yaml", SLICES), ("claims.yaml", CLAIMS)):
        (tmp_path / name).write_text(text)
    return [str(tmp_path / n) for n in ("classes.yaml", "slices.yaml", "claims.yaml")]


def manifests(text: str) -> list[dict]:
    out = []
    for doc in yaml.safe_load_all(text):
        if doc:
            out += doc["items"] if doc.get("kind") == "List" else [doc]
    return out


def test_round_trip_every_object_reloads_equal(files, tmp_path, capsys):
    out = tmp_path / "dra.yaml"
    assert main(["dra", *files, "--out", str(out)]) == 0
    summary = capsys.readouterr().out
    for line in ("device classes      4", "node types          2",
                 "gpu-node: 2 nodes, 12 devices per node (8 gpu.nvidia.com, 4 nic.example.com)",
                 "mig-node: 1 node, 4 devices per node (3 gpu.nvidia.com, 1 nic.example.com)",
                 "claims              3 (2 from ResourceClaimTemplates)", f"wrote {out}"):
        assert line in summary, summary
    text = out.read_text()
    assert text.startswith("# Generated by `loopbench import dra")
    for noise in (" uid:", "resourceVersion", "managedFields", "status", "reservedFor", "ownerReferences",
                  "generateName", "creationTimestamp", "finalizers", "app: trainer"):
        assert noise not in text, noise
    doc = yaml.safe_load(text)["dra"]
    assert set(doc) == {"device_classes", "node_types", "claims"}

    classes = {m["metadata"]["name"]: m for m in manifests(CLASSES)}
    assert [c["name"] for c in doc["device_classes"]] == list(classes)
    for c in doc["device_classes"]:
        again = r.device_class({"metadata": {"name": c["name"]}, "spec": c["spec"]}, "reloaded")
        assert again == r.device_class(classes[c["name"]], "input")

    slices = manifests(SLICES)
    assert sorted(doc["node_types"]) == ["gpu-node", "mig-node"]
    assert [s["driver"] for s in doc["node_types"]["gpu-node"]] == ["gpu.nvidia.com", "nic.example.com"]
    assert {s["nodeName"] for s in doc["node_types"]["gpu-node"]} == {"gpu-node-0"}  # one node of the type
    for specs in doc["node_types"].values():
        for spec in specs:
            (orig,) = [m for m in slices if m["spec"] == spec]  # the spec as the manifest gave it
            assert r.resource_slice({"metadata": orig["metadata"], "spec": spec}, "reloaded") == \
                r.resource_slice(orig, "input")
    mig = r.resource_slice({"metadata": {"name": "x"}, "spec": doc["node_types"]["mig-node"][0]}, "x")
    assert mig.shared_counters == {"gpu-0-counter-set": {"multiprocessors": 98_000, "memory": 80 * GIB}}
    assert mig.devices[1].consumes == {"gpu-0-counter-set": {"multiprocessors": 14_000, "memory": 10 * GIB}}
    nic = r.resource_slice({"metadata": {"name": "x"}, "spec": doc["node_types"]["mig-node"][1]}, "x").devices[0]
    assert nic.multi and nic.policies["nic.example.com/bandwidth"] == r.RequestPolicy(
        10 * 10**12, (), 10**12, 400 * 10**12, 10**12)  # 10G default, 1G..400G by 1G

    claims = {m["metadata"]["name"]: m for m in manifests(CLAIMS)}
    assert list(doc["claims"]) == list(claims)
    for name, spec in doc["claims"].items():
        again = r.claim({"kind": "ResourceClaim", "metadata": {"name": name}, "spec": spec}, "reloaded")
        assert again == r.claim(claims[name], "input")
    pair = r.claim(claims["gpu-nic-pair"], "input")
    assert pair.constraints == (r.Constraint(("gpu", "nic"), "resource.kubernetes.io/pcieRoot"),)
    accel = r.claim(claims["mig-or-gpu"], "input").requests[0]
    assert [a.device_class for a in accel.first_available] == ["mig.nvidia.com", "large-gpu.nvidia.com"]


def test_the_selectors_of_the_input_select_the_devices_meant(files):
    """Every class and request selector compiles (the import checked it) and picks, on the
    imported devices, what its author meant."""
    inp = read_dra(files)
    gpu_node = {s.driver: s for s in inp.node_types["gpu-node"].slices}
    mig_node = {s.driver: s for s in inp.node_types["mig-node"].slices}

    def picked(class_name: str, s: r.ResourceSlice) -> list[str]:
        sels = [compile_selector(t, class_name) for t in inp.classes[class_name].selectors]
        return [d.name for d in s.devices if all(sel.matches(d, s.driver) for sel in sels)]

    assert picked("gpu.nvidia.com", gpu_node["gpu.nvidia.com"]) == [f"gpu-{i}" for i in range(8)]
    assert picked("gpu.nvidia.com", mig_node["gpu.nvidia.com"]) == ["gpu-0"]
    assert picked("mig.nvidia.com", mig_node["gpu.nvidia.com"]) == ["gpu-0-mig-1g.10gb-0", "gpu-0-mig-3g.40gb-0"]
    assert picked("large-gpu.nvidia.com", mig_node["gpu.nvidia.com"]) == ["gpu-0", "gpu-0-mig-3g.40gb-0"]
    assert picked("nic.example.com", gpu_node["gpu.nvidia.com"]) == []
    h100 = compile_selector(inp.claims["gpu-nic-pair"].requests[0].selectors[0], "x")
    assert h100.matches(gpu_node["gpu.nvidia.com"].devices[0], "gpu.nvidia.com")


def test_a_json_list_and_one_multi_document_file_read_as_the_yaml_files_do(files, tmp_path):
    everything = manifests(CLASSES) + manifests(SLICES) + manifests(CLAIMS)
    (tmp_path / "all.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": everything},
                                                  indent=4))
    (tmp_path / "all.yaml").write_text("---\n".join([CLASSES, SLICES, CLAIMS]) + "---\n")
    a = read_dra(files)
    for path in ("all.json", "all.yaml"):
        b = read_dra([str(tmp_path / path)])
        assert b.document() == a.document()
        assert (b.classes, b.claims) == (a.classes, a.claims)
    assert read_dra([str(tmp_path / "all.yaml")]).node_types.keys() == {"gpu-node", "mig-node"}


def test_node_types_by_flag_or_by_name_and_other_kinds_ignored(files, tmp_path, capsys):
    assert default_node_type("gpu-node-12") == "gpu-node"
    assert default_node_type("gke-pool-a-1b2c3d") == "gke-pool-a-1b2c3d"  # a hash is kept: name it by flag
    assert default_node_type("node") == "node"
    (tmp_path / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n")
    out = tmp_path / "dra.yaml"
    assert main(["dra", *files, str(tmp_path / "pod.yaml"), "-o", str(out), "--node-type", "gpu-node-1=h100",
                 "--node-type", "gpu-node-0=h100", "--node-type", "mig-node-0=a100-mig"]) == 0
    assert "ignored             1 Pod" in capsys.readouterr().out
    doc = yaml.safe_load(out.read_text())["dra"]
    assert sorted(doc["node_types"]) == ["a100-mig", "h100"]


def refused(tmp_path, capsys, files: dict[str, str], *needles: str, flags: tuple[str, ...] = ()) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "bad.yaml"
    assert main(["dra", *(str(tmp_path / n) for n in files), "--out", str(out), *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith("loopbench import: error: ") and err.count("\n") == 1, err  # one line, no traceback
    for needle in needles:
        assert needle in err, err
    assert not out.exists()
    return err


GPU0 = gpu_slice("gpu-node-0")
GPU0_NAME = "ResourceSlice 'gpu-node-0-gpu.nvidia.com-x7k2p'"
GPU0_DEV = f"{GPU0_NAME}.spec.devices[0] (device 'gpu-0')"
PAIR = "ResourceClaimTemplate 'gpu-nic-pair'.spec.spec.devices"
SHARED = "ResourceClaim 'shared-nic'.spec.devices.requests[0] (request 'net').exactly"
MIG_GPU = "ResourceSlice 'mig-node-0-gpu.nvidia.com-b9c3m'"


#: (file the change is in, old text, new text, what the message must name besides that file)
REFUSALS = {
    "wrong apiVersion": ("classes.yaml", "- apiVersion: resource.k8s.io/v1\n  kind: DeviceClass",
                         "- apiVersion: resource.k8s.io/v1beta1\n  kind: DeviceClass",
                         ("DeviceClass 'gpu.nvidia.com'.apiVersion", "'resource.k8s.io/v1beta1'")),
    "missing spec.driver": ("gpu.yaml", "  driver: gpu.nvidia.com\n", "",
                            (f"{GPU0_NAME}.spec", "missing required field 'driver'")),
    "bad quantity": ("gpu.yaml", "value: 80Gi", "value: 80GB",
                     (f"{GPU0_DEV}.capacity.memory.value", "'80GB' is not a quantity")),
    "unknown field": ("gpu.yaml", "  - name: gpu-0\n", "  - name: gpu-0\n    partitions: 7\n",
                      (f"{GPU0_DEV}.partitions", "not a field")),
    "attribute with two types": ("gpu.yaml", "      index:\n        int: 0\n",
                                 "      index:\n        int: 0\n        string: '0'\n",
                                 (f"{GPU0_DEV}.attributes.index", "one of string, int, bool or version")),
    "counter set not in sharedCounters": ("mig.yaml", "    - counterSet: gpu-0-counter-set\n      counters:\n"
                                          "        multiprocessors: {value: \"14\"}",
                                          "    - counterSet: gpu-1-counter-set\n      counters:\n"
                                          "        multiprocessors: {value: \"14\"}",
                                          (f"{MIG_GPU}.spec.devices (device 'gpu-0-mig-1g.10gb-0').consumesCounters",
                                           "'gpu-1-counter-set'", "sharedCounters")),
    "constraint naming a missing request": ("claims.yaml", "requests: [gpu, nic]", "requests: [gpu, nics]",
                                            (f"{PAIR}.constraints[0].requests", "no request 'nics'")),
    "matchAttribute unqualified": ("claims.yaml", "matchAttribute: resource.kubernetes.io/pcieRoot",
                                   "matchAttribute: pcieRoot",
                                   (f"{PAIR}.constraints[0].matchAttribute", "fully qualified")),
    "unsupported CEL": ("classes.yaml", 'device.driver == "nic.example.com"',
                        'device.attributes["nic.example.com"].model.matches("^ConnectX")',
                        ("DeviceClass 'nic.example.com'.spec.selectors[0].cel.expression", "matches()",
                         "not in the modelled subset")),
    "CEL syntax error": ("claims.yaml", 'expression: device.attributes["gpu.nvidia.com"].profile == "3g.40gb"',
                         'expression: device.attributes["gpu.nvidia.com"].profile == ',
                         ("ResourceClaimTemplate 'mig-or-gpu'.spec.spec.devices.requests[0] (request 'accel')"
                          ".firstAvailable[0] (request 'mig').selectors[0].cel.expression", "CEL")),
    "CEL of an unknown token": ("classes.yaml", 'device.driver == "nic.example.com"', 'device.driver = "nic"',
                                ("DeviceClass 'nic.example.com'.spec.selectors[0].cel.expression", "cannot read")),
    "unknown deviceClassName": ("claims.yaml", "deviceClassName: nic.example.com\n        allocationMode",
                                "deviceClassName: nic.exmaple.com\n        allocationMode",
                                (f"{SHARED}.deviceClassName", "'nic.exmaple.com' is not in the input",
                                 "gpu.nvidia.com")),
    "allNodes slice": ("nic.yaml", "  nodeName: gpu-node-0\n", "  allNodes: true\n",
                       ("ResourceSlice 'gpu-node-0-nic.example.com-q8v4d'.spec.allNodes",
                        "network-attached devices are not modelled")),
    "nodeSelector slice": ("nic.yaml", "  nodeName: gpu-node-0\n",
                           "  nodeSelector:\n    nodeSelectorTerms:\n    - matchExpressions:\n"
                           "      - {key: rack, operator: In, values: [r1]}\n",
                           ("ResourceSlice 'gpu-node-0-nic.example.com-q8v4d'.spec.nodeSelector",
                            "network-attached devices are not modelled")),
    "both exactly and firstAvailable": ("claims.yaml", "      - name: accel\n        firstAvailable:\n",
                                        "      - name: accel\n        exactly: {deviceClassName: gpu.nvidia.com}\n"
                                        "        firstAvailable:\n",
                                        ("ResourceClaimTemplate 'mig-or-gpu'.spec.spec.devices.requests[0] "
                                         "(request 'accel')", "exactly one of 'exactly' and 'firstAvailable'")),
    "count 0": ("claims.yaml", "        allocationMode: ExactCount\n        count: 1\n        capacity",
                "        allocationMode: ExactCount\n        count: 0\n        capacity",
                (f"{SHARED}.count", "at least 1, got 0")),
    "adminAccess": ("claims.yaml", "        count: 1\n        capacity:", "        count: 1\n        adminAccess: true\n"
                    "        capacity:", (f"{SHARED}.adminAccess", "not modelled")),
    "a capacity request that is not a quantity": ("claims.yaml", "bandwidth: 25G", "bandwidth: lots",
                                                  (f"{SHARED}.capacity.requests.bandwidth", "'lots'")),
    "an unmodelled resource.k8s.io kind": ("classes.yaml", "  kind: DeviceClass\n  metadata:\n    name: nic.example.com",
                                           "  kind: DeviceTaintRule\n  metadata:\n    name: nic.example.com",
                                           ("DeviceTaintRule 'nic.example.com'.kind", "not modelled")),
    "a slice without its node": ("nic.yaml", "  nodeName: gpu-node-0\n", "",
                                 ("ResourceSlice 'gpu-node-0-nic.example.com-q8v4d'.spec.nodeName", "missing")),
    "a claim defined twice": ("claims.yaml", "  name: shared-nic\n", "  name: mig-or-gpu\n",
                              ("ResourceClaim 'mig-or-gpu'.metadata.name", "defined twice",
                               "ResourceClaimTemplate")),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_bad_manifest_is_refused_naming_file_object_and_field(tmp_path, capsys, case):
    file, old, new, needles = REFUSALS[case]
    texts = {"classes.yaml": CLASSES, "gpu.yaml": GPU0, "nic.yaml": nic_slice("gpu-node-0"), "mig.yaml": MIG_NODE,
             "claims.yaml": CLAIMS}
    assert texts[file].count(old) >= 1, old
    texts[file] = texts[file].replace(old, new, 1)
    err = refused(tmp_path, capsys, texts, *needles)
    assert f"{tmp_path / file}: " in err, err  # the file first, then the object and the field


def test_two_nodes_of_one_type_publishing_different_devices_are_refused_naming_both(tmp_path, capsys):
    err = refused(tmp_path, capsys, {"a.yaml": CLASSES, "b.yaml": gpu_slice("gpu-node-0"),
                                     "c.yaml": gpu_slice("gpu-node-1", "NVIDIA H200")},
                  "c.yaml", "ResourceSlice 'gpu-node-1-gpu.nvidia.com-x7k2p'.spec.devices", "'gpu-node-1'",
                  "'gpu-node-0'", "node type 'gpu-node'", "--node-type")
    assert "different devices" in err
    ok = tmp_path / "ok.yaml"
    assert main(["dra", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), str(tmp_path / "c.yaml"),
                 "--out", str(ok), "--node-type", "gpu-node-1=h200"]) == 0
    assert sorted(yaml.safe_load(ok.read_text())["dra"]["node_types"]) == ["gpu-node", "h200"]


@pytest.mark.parametrize(("flags", "needles"), [
    (("--node-type", "gpu-node-0"), ("--node-type", "NODE=TYPE", "'gpu-node-0'")),
    (("--node-type", "gpu-node-9=x"), ("--node-type", "'gpu-node-9'", "no ResourceSlice")),
    (("--node-type", "gpu-node-0=a", "--node-type", "gpu-node-0=b"), ("--node-type", "two types")),
])
def test_bad_node_type_flags_are_refused(tmp_path, capsys, flags, needles):
    refused(tmp_path, capsys, {"s.yaml": gpu_slice("gpu-node-0")}, *needles, flags=flags)


def test_an_input_without_dra_objects_and_an_output_onto_an_input_are_refused(tmp_path, capsys):
    refused(tmp_path, capsys, {"p.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"}, "p.yaml",
            "no DeviceClass, ResourceSlice")
    (tmp_path / "c.yaml").write_text(CLASSES)
    assert main(["dra", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "c.yaml")]) == 1
    assert "is an input of this import" in capsys.readouterr().err
    assert (tmp_path / "c.yaml").read_text() == CLASSES


def test_the_import_help_lists_dra(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "loopbench import dra --help" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["dra", "--help"])
    assert "--node-type NODE=TYPE" in capsys.readouterr().out


# ---- harness.dra.cel: the subset's evaluation, as CEL evaluates ---------------------------
DEV = r.Device("gpu-0", attributes={"gpu.nvidia.com/productName": "NVIDIA H100", "gpu.nvidia.com/index": 3,
                                    "gpu.nvidia.com/mig": False, "gpu.nvidia.com/driverVersion": r.Version("550.54.15")},
               capacity={"gpu.nvidia.com/memory": 80 * GIB})
A = 'device.attributes["gpu.nvidia.com"]'
C = 'device.capacity["gpu.nvidia.com"]'


@pytest.mark.parametrize(("expression", "value"), [
    ('device.driver == "gpu.nvidia.com"', True),
    ('device.driver != "gpu.nvidia.com"', False),
    (f'{A}.productName == "NVIDIA H100"', True),
    (f"{A}.productName == 'NVIDIA A100'", False),
    (f"{A}.index == 3", True),
    (f"{A}.index < 4 && {A}.index >= 3", True),
    (f"{A}.index > 3 || {A}.index <= 2", False),
    (f"{A}.mig == false", True),
    (f"!{A}.mig", True),
    (f'{A}.productName in ["NVIDIA A100", "NVIDIA H100"]', True),
    (f"{A}.index in [1, 2]", False),
    (f'{A}.index in ["3"]', False),  # in compares by type too
    (f'"productName" in {A}', True),
    (f'"uuid" in {A}', False),
    (f'"memory" in {C}', True),
    (f'{C}.memory.compareTo(quantity("80Gi")) == 0', True),
    (f'{C}.memory.compareTo(quantity("40Gi")) > 0', True),
    (f'{C}.memory.compareTo(quantity("100Gi")) < 0', True),
    (f'{C}.memory.isGreaterThan(quantity("79Gi"))', True),
    (f'{C}.memory.isLessThan(quantity("85899345920"))', False),  # 80Gi in bytes: equal, not less
    # && and || absorb an error where the other side decides, either side
    (f'"uuid" in {A} && {A}.uuid == "x"', False),
    (f'{A}.uuid == "x" && false', False),
    (f'true || {A}.uuid == "x"', True),
    (f'{A}.uuid == "x" || {A}.index == 3', True),
    (f'({A}.index == 3 || {A}.uuid == "x") && !({A}.mig)', True),
])
def test_cel_evaluates_as_cel_does(expression, value):
    assert compile_selector(expression, "test").matches(DEV, "gpu.nvidia.com") is value


@pytest.mark.parametrize("expression", [
    f'{A}.uuid == "x"',  # a missing attribute
    f'{C}.cores.isGreaterThan(quantity("1"))',
    f'{A}.uuid == "x" && true',  # && cannot absorb: true does not decide
    f'{A}.uuid == "x" || false',
    f'{A}.index == "3"',  # no such overload: int == string
    f"{A}.mig < true",
    f'{C}.memory == quantity("80Gi")',  # a quantity compares only through compareTo
    f'{A}.driverVersion == "550.54.15"',  # a version is not a string
    f"{A}.index",  # not a condition
])
def test_cel_errors_raise_selector_error(expression):
    with pytest.raises(SelectorError):
        compile_selector(expression, "test").matches(DEV, "gpu.nvidia.com")


@pytest.mark.parametrize(("expression", "why"), [
    (f'{A}.productName.matches("H100")', "matches()"),
    (f"{A}.index == 1.5", "double"),
    (f"size({A}) > 0", "'size'"),
    (f'{A}.productName.startsWith("N")', "startsWith()"),
    ("device.name == 'gpu-0'", "device.name"),
    (f"{A}.index == ", "ends where an operand was expected"),
    (f"{A}.index == 1 &&", "ends where an operand was expected"),
    ('device.driver = "x"', "cannot read"),
    ("device.attributes[domain].x == 1", "non-string key"),
    (f"{A}.index == 1 )", "after a complete expression"),
])
def test_cel_outside_the_subset_is_refused_at_compile_naming_it(expression, why):
    with pytest.raises(ConfigError) as exc:
        compile_selector(expression, "DeviceClass 'x'.spec.selectors[0].cel.expression")
    assert exc.value.where == "DeviceClass 'x'.spec.selectors[0].cel.expression"
    assert why in exc.value.rule, exc.value.rule


# ---- harness.dra.resources.quantity --------------------------------------------------------
@pytest.mark.parametrize(("text", "milli"), [
    ("80Gi", 80 * GIB), ("500m", 500), ("1.5", 1500), ("2k", 2_000_000), (4, 4000), ("4", 4000),
    ("400G", 400 * 10**12), ("10Mi", 10 * 2**20 * 1000), ("1n", 1), ("0", 0), ("1e3", 10**6), (".5", 500),
])
def test_quantities_in_milli_units(text, milli):
    assert r.quantity(text, "q") == milli


@pytest.mark.parametrize("text", ["80GB", "", "1.2.3", "Gi", "1 Gi", "1ki", True, 1.5, None, "--1", "0x10"])
def test_malformed_quantities_are_refused_at_the_field(text):
    with pytest.raises(ConfigError) as exc:
        r.quantity(text, "ResourceSlice 'x'.spec.devices[0].capacity.memory.value")
    assert exc.value.where == "ResourceSlice 'x'.spec.devices[0].capacity.memory.value"
