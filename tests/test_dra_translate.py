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
CLUSTERS: dict[str, Cluster] = {name: instantiate(compose("config", [f"cluster={name}"]).cluster, _convert_="all")
                                 for name in ("default", "two_tenants", "scale")}
CLASSES = tr.device_classes()


def dra_fits(cluster: Cluster, nt, shape) -> bool:
    c = tr.claim_of(cluster.models, cluster.profiles, *shape)
    devices = al.NodeDevices.of(tr.slices_of(nt, cluster.partition_profiles))
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
            assert dra_fits(cl, nt, shape) == today_fits(cl, nt, shape), (nt.name, shape)
            checked += 1
    assert checked > 20


@given(gpus=st.integers(0, 9), milli=st.sampled_from([100, 250, 500, 1000]), model=st.integers(0, 3),
       nvl=st.booleans(), numa=st.booleans(), nic=st.booleans(), profile=st.integers(-1, 3))
def test_drawn_shapes_fit_where_they_fit_today(gpus, milli, model, nvl, numa, nic, profile):
    cl = CLUSTERS["default"]
    shape = (gpus, milli if gpus == 1 or milli == 1000 else 1000, 0, model, nvl, numa, nic)
    if profile >= 0:  # a partition: one device of the profile (the trace's rule)
        name = cl.profiles[profile]
        shape = (1, cl.partition_profiles[name], 1 << profile, model, nvl, numa, nic)
    for nt in cl.node_types:
        assert dra_fits(cl, nt, shape) == today_fits(cl, nt, shape), (nt.name, shape)


def test_shares_of_one_gpu_add_up_as_milli_do():
    # on a 4-GPU node, shares of 600 milli: one per GPU (600 + 600 > 1000), so the fifth waits;
    # then a 400 share still fits beside a 600 on gpu-0
    cl = CLUSTERS["default"]
    nt = next(t for t in cl.node_types if t.gpus == 4)
    devices = al.NodeDevices.of(tr.slices_of(nt, cl.partition_profiles))
    state = al.DeviceState.fresh(devices, 1)
    share = al.compile_claims((tr.claim_of(cl.models, cl.profiles, 1, 600, 0, 0, False, False, False),), devices, CLASSES)
    got = []
    for _ in range(4):
        _, [a] = al.allocate(share, devices, state, np.arange(1))
        al.commit(share, devices, state, 0, a)
        got.append(devices.names[a.devices[0][0]].rsplit("/", 1)[1])
    assert got == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert not al.allocate(share, devices, state, np.arange(1))[0][0]
    small = al.compile_claims((tr.claim_of(cl.models, cl.profiles, 1, 400, 0, 0, False, False, False),), devices, CLASSES)
    assert al.allocate(small, devices, state, np.arange(1))[0][0]
    whole = al.compile_claims((tr.claim_of(cl.models, cl.profiles, 1, 1000, 0, 0, False, False, False),), devices, CLASSES)
    assert not al.allocate(whole, devices, state, np.arange(1))[0][0]


def test_partitions_draw_on_their_gpus_counters_as_milli_do():
    # H100 NVL: 3g.40gb is 429 milli, 1g.10gb 143. The allocator takes devices in publishing
    # order: two 3g.40gb on gpu-0 (858 of its 1000 drawn), the third on gpu-1 (142 left on
    # gpu-0); a 1g.10gb no longer fits gpu-0 (143 > 142) and goes to gpu-1 (571 left); a whole
    # GPU skips gpu-0 and gpu-1, whose counters partitions hold, and takes gpu-2
    cl = CLUSTERS["default"]
    nt = next(t for t in cl.node_types if t.partition_profiles)
    devices = al.NodeDevices.of(tr.slices_of(nt, cl.partition_profiles))
    state = al.DeviceState.fresh(devices, 1)
    bit = {p: 1 << cl.profiles.index(p) for p in cl.profiles}
    got = []
    for profile_bit, milli in ((bit["3g.40gb"], 429),) * 3 + ((bit["1g.10gb"], 143), (0, 1000)):
        cc = al.compile_claims((tr.claim_of(cl.models, cl.profiles, 1, milli, profile_bit, 0, False, False, False),), devices, CLASSES)
        _, [a] = al.allocate(cc, devices, state, np.arange(1))
        al.commit(cc, devices, state, 0, a)
        got.append(devices.names[a.devices[0][0]].rsplit("/", 1)[1])
    assert got == ["gpu-0-3g-40gb-0", "gpu-0-3g-40gb-1", "gpu-1-3g-40gb-0", "gpu-1-1g-10gb-0", "gpu-2"]
    counters = dict(zip(devices.counters, state.counter_left[0], strict=True))
    assert [counters[(f"{tr.GPU_DRIVER}/node", f"gpu-{g}", "milli")] for g in range(3)] == [142, 428, 0]


def test_a_share_and_a_partition_do_not_mix_on_one_gpu():
    # the difference from today's milli: a shared GPU draws all its counters on its first
    # allocation (KEP-4815 with KEP-5075), so a 1g.10gb partition cannot join a 300 share there
    cl = CLUSTERS["default"]
    nt = next(t for t in cl.node_types if t.partition_profiles)
    devices = al.NodeDevices.of(tr.slices_of(nt, cl.partition_profiles))
    state = al.DeviceState.fresh(devices, 1)
    share = al.compile_claims((tr.claim_of(cl.models, cl.profiles, 1, 300, 0, 0, False, False, False),), devices, CLASSES)
    _, [a] = al.allocate(share, devices, state, np.arange(1))
    al.commit(share, devices, state, 0, a)
    mig = al.compile_claims((tr.claim_of(cl.models, cl.profiles, 1, 143, 1 << cl.profiles.index("1g.10gb"), 0, False, False, False),),
                            devices, CLASSES)
    _, [b] = al.allocate(mig, devices, state, np.arange(1))
    assert devices.names[b.devices[0][0]].endswith("/gpu-1-1g-10gb-0")
    al.commit(share, devices, state, 0, a, sign=-1)  # the share leaves: gpu-0's counters are whole again
    _, [c] = al.allocate(mig, devices, state, np.arange(1))
    assert devices.names[c.devices[0][0]].endswith("/gpu-0-1g-10gb-0")
