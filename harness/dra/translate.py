"""Today's columns in DRA's terms: what a node type publishes as ResourceSlices and the claim a
pod's device columns make, so that every trace replays with the same meaning either way.

docs/model.md ("Devices in DRA's terms") has the table, one row per column.
"""

from __future__ import annotations

from harness.cluster import Cluster, NodeType
from harness.dra.resources import (
    Claim,
    Constraint,
    DeviceClass,
    DeviceRequest,
    ResourceSlice,
    device_class,
    resource_slice,
)

GPU_DRIVER, NIC_DRIVER = "gpu.nvidia.com", "nic.loopbench.io"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
SHARE = f"{GPU_DRIVER}/share"
WHOLE = 1000  # milli of one GPU


def device_classes() -> dict[str, DeviceClass]:
    return {c.name: c for c in (
        device_class({"metadata": {"name": "gpu"}, "spec": {"selectors": [
            {"cel": {"expression": f'device.driver == "{GPU_DRIVER}"'}}]}}, "harness.dra.translate"),
        device_class({"metadata": {"name": "nic"}, "spec": {"selectors": [
            {"cel": {"expression": f'device.driver == "{NIC_DRIVER}"'}}]}}, "harness.dra.translate"))}


def slices_of(nt: NodeType, node: str = "node") -> tuple[ResourceSlice, ...]:
    """What a node of type `nt` publishes: its GPUs (and NICs), one slice per driver."""
    if nt.gpus == 0:
        return ()
    nvl, numa = nt.gpu_domains(nt.nvlink_domains), nt.gpu_domains(nt.numa_domains)
    gpus = [{"name": f"gpu-{g}", "allowMultipleAllocations": True,
             "attributes": {"productName": {"string": nt.gpu_model}, "index": {"int": g},
                            "cliqueId": {"string": f"nvl-{int(nvl[g])}"}, "numaNode": {"int": int(numa[g])},
                            PCIE_ROOT: {"string": f"pci-{g}"}},
             "capacity": {"share": {"value": str(WHOLE) + "m"}}} for g in range(nt.gpus)]
    out = [_slice(GPU_DRIVER, node, gpus)]
    if nt.nic_per_gpu:
        out.append(_slice(NIC_DRIVER, node, [{"name": f"nic-{g}", "attributes": {PCIE_ROOT: {"string": f"pci-{g}"}}}
                                             for g in range(nt.gpus)]))
    return tuple(out)


def _slice(driver: str, node: str, devices: list[dict]) -> ResourceSlice:
    return resource_slice({"metadata": {"name": f"{node}-{driver}"}, "spec": {
        "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": devices}}, f"node type slices of {node}")


def claim_of(cluster: Cluster, gpus: int, milli: int, profile_bit: int, model_mask: int, nvlink: bool, numa: bool,
             nic: bool) -> Claim | None:
    """The claim a pod's device columns make (None: a partition profile, not yet mapped)."""
    if profile_bit:
        return None
    if gpus == 0:
        return Claim("devices", ())
    models = [m for m in cluster.models if model_mask & cluster.model_bit(m)]
    selectors = (f'device.attributes["{GPU_DRIVER}"].productName in [{", ".join(repr(m) for m in models)}]',
                 ) if model_mask else ()
    requests = [DeviceRequest("gpus", "gpu", selectors, count=gpus,
                              capacity={SHARE: milli} if milli < WHOLE else {})]
    if nic:
        requests.append(DeviceRequest("nics", "nic", count=gpus))
    constraints = [Constraint(("gpus",), f"{GPU_DRIVER}/{a}") for a, on in (("cliqueId", nvlink), ("numaNode", numa))
                   if on]
    return Claim("devices", tuple(requests), tuple(constraints))

