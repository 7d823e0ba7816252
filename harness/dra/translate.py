"""Today's columns in DRA's terms: what a node type publishes as ResourceSlices and the claim a
pod's device columns make, so that every trace replays with the same meaning either way.

docs/model.md ("Devices in DRA's terms") has the table, one row per column.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.dra.resources import (
    Claim,
    Constraint,
    DeviceClass,
    DeviceRequest,
    ResourceSlice,
    device_class,
    resource_slice,
)
from harness.node_type import NodeType

GPU_DRIVER, NIC_DRIVER = "gpu.nvidia.com", "nic.loopbench.io"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
SHARE = f"{GPU_DRIVER}/share"
WHOLE = 1000  # milli of one GPU
GPU, MIG = "gpu", "mig"  # a device's `type`, as NVIDIA's DRA driver publishes it


def device_classes() -> dict[str, DeviceClass]:
    return {c.name: c for c in (
        *(device_class({"metadata": {"name": kind}, "spec": {"selectors": [{"cel": {"expression": (
            f'device.driver == "{GPU_DRIVER}" && device.attributes["{GPU_DRIVER}"].type == "{kind}"')}}]}},
            "harness.dra.translate") for kind in (GPU, MIG)),
        device_class({"metadata": {"name": "nic"}, "spec": {"selectors": [
            {"cel": {"expression": f'device.driver == "{NIC_DRIVER}"'}}]}}, "harness.dra.translate"))}


def slices_of(nt: NodeType, profiles: dict[str, int], node: str = "node") -> tuple[ResourceSlice, ...]:
    """What a node of type `nt` publishes: its GPUs (and NICs), one slice per driver. A type
    with partition profiles (`profiles`: the cluster's, name -> milli) publishes each GPU's
    milli as a counter set that the GPU and its partitions draw on (KEP-4815), with as many
    devices of each profile as its milli fits in one GPU."""
    if nt.gpus == 0:
        return ()
    nvl, numa = nt.gpu_domains(nt.nvlink_domains), nt.gpu_domains(nt.numa_domains)

    def attributes(g: int, kind: str) -> dict:
        return {"type": {"string": kind}, "productName": {"string": nt.gpu_model}, "index": {"int": g},
                "cliqueId": {"string": f"nvl-{int(nvl[g])}"}, "numaNode": {"int": int(numa[g])},
                PCIE_ROOT: {"string": f"pci-{g}"}}

    def draws(g: int, milli: int) -> dict:
        return {"consumesCounters": [{"counterSet": f"gpu-{g}", "counters": {"milli": {"value": f"{milli}m"}}}]}

    partitioned = bool(nt.partition_profiles)
    gpus = [{"name": f"gpu-{g}", "allowMultipleAllocations": True, "attributes": attributes(g, GPU),
             "capacity": {"share": {"value": str(WHOLE) + "m"}}, **(draws(g, WHOLE) if partitioned else {})}
            for g in range(nt.gpus)]
    for g in range(nt.gpus):
        for prof in nt.partition_profiles:
            milli = profiles[prof]
            gpus += [{"name": f"gpu-{g}-{prof.replace('.', '-')}-{k}",
                      "attributes": {**attributes(g, MIG), "profile": {"string": prof}}, **draws(g, milli)}
                     for k in range(WHOLE // milli)]
    counters = [{"name": f"gpu-{g}", "counters": {"milli": {"value": f"{WHOLE}m"}}} for g in range(nt.gpus)]
    out = [_slice(GPU_DRIVER, node, gpus, counters if partitioned else None)]
    if nt.nic_per_gpu:
        out.append(_slice(NIC_DRIVER, node, [{"name": f"nic-{g}", "attributes": {PCIE_ROOT: {"string": f"pci-{g}"}}}
                                             for g in range(nt.gpus)]))
    return tuple(out)


def _slice(driver: str, node: str, devices: list[dict], counters: list[dict] | None = None) -> ResourceSlice:
    spec = {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices, **({"sharedCounters": counters} if counters else {})}
    return resource_slice({"metadata": {"name": f"{node}-{driver}"}, "spec": spec}, f"node type slices of {node}")


def claim_of(models: Sequence[str], profiles: Sequence[str], gpus: int, milli: int, profile_bit: int,
             model_mask: int, nvlink: bool, numa: bool, nic: bool) -> Claim | None:
    """The claim a pod's device columns make: GPUs (whole, a share, or partitions of one
    profile), NICs, and the constraints between them. Bit i of `model_mask` is the cluster's
    `models[i]`, bit i of `profile_bit` its `profiles[i]`."""
    if gpus == 0:
        return Claim("devices", ())
    chosen = [m for i, m in enumerate(models) if model_mask >> i & 1]
    selectors: tuple[str, ...] = (
        f'device.attributes["{GPU_DRIVER}"].productName in [{", ".join(repr(m) for m in chosen)}]',
    ) if model_mask else ()
    if profile_bit:
        profile = profiles[profile_bit.bit_length() - 1]
        requests = [DeviceRequest("gpus", MIG, (*selectors, f'device.attributes["{GPU_DRIVER}"].profile == '
                                                            f'"{profile}"'), count=gpus)]
    else:
        requests = [DeviceRequest("gpus", GPU, selectors, count=gpus, capacity={SHARE: milli} if milli < WHOLE else {})]
    if nic:
        requests.append(DeviceRequest("nics", "nic", count=gpus))
    constraints = [Constraint(("gpus",), f"{GPU_DRIVER}/{a}") for a, on in (("cliqueId", nvlink), ("numaNode", numa))
                   if on]
    return Claim("devices", tuple(requests), tuple(constraints))

