"""Today's device columns read as DRA claims mean what they meant: on an empty node of every
node type of every bundled cluster, the structured allocator allocates a pod's claim exactly
where today's filter says its GPUs fit (harness.workload.type_fits), for every pod shape of the
bundled traces and for drawn ones; and shares of one GPU add up as today's milli do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from hypothesis import given
from hypothesis import strategies as st

from harness.cluster import Cluster
from harness.config import compose
from harness.dra import allocator as al
from harness.dra import translate as tr
from harness.trace import read_trace
from harness.workload import compile_workload, type_fits

ROOT = Path(__file__).resolve().parents[1]
CLUSTERS: dict[str, Cluster] = {name: instantiate(compose("config", [f"cluster={name}"]).cluster)
                                 for name in ("default", "two_tenants", "scale")}
CLASSES = tr.device_classes()


def dra_fits(cluster: Cluster, nt, shape) -> bool | None:
    c = tr.claim_of(cluster, *shape)
    if c is None:
        return None
    devices = al.NodeDevices.of(tr.slices_of(nt))
    cc = al.compile_claims((c,), devices, CLASSES)
    return bool(al.allocate(cc, devices, al.DeviceState.fresh(devices, 1), np.arange(1))[0][0])


def today_fits(cluster: Cluster, nt, shape) -> bool:
    gpus, milli, profile_bit, model_mask, nvl, numa, nic = shape
    return bool(type_fits(nt, cluster, np.array([0]), np.array([0]), np.array([gpus]), np.array([milli]),
                          np.array([profile_bit]), np.array([model_mask]), np.array([nvl], bool), np.array([numa], bool),
                          np.array([nic], bool))[0])


def shapes_of(trace: str, cluster: Cluster) -> set[tuple]:
    table, _ = read_trace(ROOT / "traces" / trace)
    w = compile_workload(table, cluster)
    rows = np.stack([w.gpus, w.milli, w.profile_bit, w.model_mask, w.nvlink, w.numa, w.nic], axis=1)
    return {tuple(int(x) for x in r) for r in np.unique(rows, axis=0)}


@pytest.mark.parametrize("trace,cluster", [("default.parquet", "default"), ("two_tenants.parquet", "two_tenants")])
def test_every_bundled_pod_shape_fits_where_it_fits_today(trace, cluster):
    cl = CLUSTERS[cluster]
    checked = 0
    for shape in sorted(shapes_of(trace, cl)):
        for nt in cl.node_types:
            got = dra_fits(cl, nt, shape)
            if got is None:
                continue  # a partition profile: not yet mapped
            assert got == today_fits(cl, nt, shape), (nt.name, shape)
            checked += 1
    assert checked > 20


@given(gpus=st.integers(0, 9), milli=st.sampled_from([100, 250, 500, 1000]), model=st.integers(0, 3),
       nvl=st.booleans(), numa=st.booleans(), nic=st.booleans())
def test_drawn_shapes_fit_where_they_fit_today(gpus, milli, model, nvl, numa, nic):
    cl = CLUSTERS["default"]
    shape = (gpus, milli if gpus == 1 or milli == 1000 else 1000, 0, model, nvl, numa, nic)
    for nt in cl.node_types:
        assert dra_fits(cl, nt, shape) == today_fits(cl, nt, shape), (nt.name, shape)


def test_shares_of_one_gpu_add_up_as_milli_do():
    # on a 4-GPU node, shares of 600 milli: one per GPU (600 + 600 > 1000), so the fifth waits;
    # then a 400 share still fits beside a 600 on gpu-0
    cl = CLUSTERS["default"]
    nt = next(t for t in cl.node_types if t.gpus == 4)
    devices = al.NodeDevices.of(tr.slices_of(nt))
    state = al.DeviceState.fresh(devices, 1)
    share = al.compile_claims((tr.claim_of(cl, 1, 600, 0, 0, False, False, False),), devices, CLASSES)
    got = []
    for _ in range(4):
        _, [a] = al.allocate(share, devices, state, np.arange(1))
        al.commit(share, devices, state, 0, a)
        got.append(devices.names[a.devices[0][0]].rsplit("/", 1)[1])
    assert got == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert not al.allocate(share, devices, state, np.arange(1))[0][0]
    small = al.compile_claims((tr.claim_of(cl, 1, 400, 0, 0, False, False, False),), devices, CLASSES)
    assert al.allocate(small, devices, state, np.arange(1))[0][0]
    whole = al.compile_claims((tr.claim_of(cl, 1, 1000, 0, 0, False, False, False),), devices, CLASSES)
    assert not al.allocate(whole, devices, state, np.arange(1))[0][0]
