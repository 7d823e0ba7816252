"""The seeded synthetic workload generator (harness/generate.py, conf/workload/)."""

from __future__ import annotations

import functools
import io
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hydra.utils import instantiate
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.config import compose
from harness.errors import ConfigError
from harness.generate import LOCALITIES, SyntheticWorkload, gang_room, generate_task, summary
from harness.trace import SCHEMA, read_trace, validate_table
from harness.workload import compile_workload

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cfg():
    return compose("generate", [])


@pytest.fixture(scope="module")
def workload(cfg) -> SyntheticWorkload:
    return instantiate(cfg.workload, _convert_="all")


@pytest.fixture(scope="module")
def cluster(cfg):
    return instantiate(cfg.cluster, _convert_="all")


@pytest.fixture(scope="module")
def table(workload) -> pa.Table:
    return workload.table(0)


def _np(table, name):
    return table.column(name).to_numpy(zero_copy_only=False)


def _cls(table) -> np.ndarray:
    return np.array([j.split("-")[0] for j in table.column("job_id").to_pylist()])


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


# ---- determinism -----------------------------------------------------------------------


def test_same_seed_byte_identical(workload, table):
    again = workload.table(0)
    assert again.equals(table)
    assert _ipc_bytes(again) == _ipc_bytes(table)
    # a fresh instance from the same config too
    assert _ipc_bytes(SyntheticWorkload(**workload.params()).table(0)) == _ipc_bytes(table)


def test_different_seed_differs(workload, table):
    other = workload.table(1)
    assert not other.equals(table)


def test_class_streams_independent(workload, table):
    """Changing one class's knobs leaves the other classes' pods untouched."""
    params = workload.params()
    params["gangs"] = {**params["gangs"], "rate_per_h": 2.0, "duration_median_s": 20000}
    changed = SyntheticWorkload(**params).table(0)
    keep = ["submit_s", "duration_s", "cpu_milli", "memory_mib", "gpu_count", "gpu_milli", "queue"]
    for cls in ("inf", "trn", "cpu"):
        a = table.filter(pa.array(_cls(table) == cls)).select(keep)
        b = changed.filter(pa.array(_cls(changed) == cls)).select(keep)
        assert a.equals(b), cls


# ---- schema and fit --------------------------------------------------------------------


def test_schema_valid(table):
    assert table.schema.equals(SCHEMA, check_metadata=False)
    validate_table(table, "<generated>")
    assert table.num_rows == len(set(table.column("pod_id").to_pylist()))
    submit = _np(table, "submit_s")
    assert (np.diff(submit) >= 0).all(), "rows are in submission order"


def test_default_trace_size(table):
    s = summary(table)
    assert 2000 <= s["pods"] <= 6000
    assert 20 <= s["span_h"] <= 26
    assert s["gangs"] >= 8


def test_every_pod_and_gang_fits_default_cluster(table, cluster):
    wl = compile_workload(table, cluster)
    assert not wl.never_fits.any()
    sizes, locality = _gangs(table)
    assert (sizes <= np.array([DEFAULT_ROOM[loc] for loc in locality])).all()


# ---- the mix ---------------------------------------------------------------------------


def test_class_mix(table, cluster):
    cls = _cls(table)
    n = len(cls)
    share = {c: (cls == c).sum() / n for c in ("inf", "trn", "gang", "cpu")}
    assert 0.75 < share["inf"] < 0.97
    assert 0.01 < share["trn"] < 0.10
    assert 0.005 < share["gang"] < 0.10
    assert 0.005 < share["cpu"] < 0.10

    gpus, milli = _np(table, "gpu_count"), _np(table, "gpu_milli")
    part = table.column("gpu_partition").is_valid().to_numpy(zero_copy_only=False)
    models = table.column("gpu_models").to_pylist()
    nvl, numa, nic = _np(table, "gpus_same_nvlink"), _np(table, "gpus_same_numa"), _np(table, "nic_per_gpu")
    minm, loc = _np(table, "min_member"), _np(table, "gang_locality")

    inf = cls == "inf"
    assert (gpus[inf] == 1).all()
    assert set(milli[inf & ~part]) == {250, 500}
    assert (milli[inf & part] == 0).all() and part[inf].mean() > 0.1
    assert set(table.column("gpu_partition").drop_null().to_pylist()) <= set(cluster.partition_profiles)
    inf_models = {tuple(m) for m, i in zip(models, inf, strict=True) if i}
    assert inf_models == {("L4",), ("H100",), ()}
    assert not (nvl | numa | nic)[inf].any() and (minm[inf] == 1).all()

    trn = cls == "trn"
    assert set(gpus[trn]) == {2, 4, 8} and (milli[trn] == 1000).all()
    assert all(models[i] == ["H100"] for i in np.flatnonzero(trn))
    assert nvl[trn].any() and (~nvl[trn]).any(), "some training claims topology, some none"
    assert (nic[trn] <= (gpus[trn] == 8)).all() and (nic[trn] & (gpus[trn] == 8)).any()
    assert (minm[trn] == 1).all()

    gang = cls == "gang"
    assert (gpus[gang] == 8).all() and nvl[gang].all() and nic[gang].all()
    assert set(loc[gang]) == {"rack", "block"} and (minm[gang] > 1).all()
    assert (loc[~gang] == "none").all() and (minm[~gang] == 1).all()

    cpu = cls == "cpu"
    assert (gpus[cpu] == 0).all() and (milli[cpu] == 0).all() and not part[cpu].any()

    # priorities and queues per class
    prio, queue = _np(table, "priority"), _np(table, "queue")
    assert set(queue[inf]) == {"serving-prod", "serving-batch"}
    assert prio[inf].min() > prio[cpu].max()


def test_failure_modes_present(table, cluster):
    """Topology claims a PCIe node cannot meet although it has enough GPUs; shares."""
    pcie = next(t for t in cluster.node_types if t.name == "h100-pcie8")
    gpus = _np(table, "gpu_count")
    nvl, nic = _np(table, "gpus_same_nvlink"), _np(table, "nic_per_gpu")
    topo_only = (gpus <= pcie.gpus) & ((nvl & (gpus > pcie.gpus // pcie.nvlink_domains)) | nic)
    assert topo_only.sum() > 20
    milli = _np(table, "gpu_milli")
    assert ((milli > 0) & (milli < 1000)).sum() > 1000


def test_gangs_consistent(table):
    job = _np(table, "job_id")
    minm = _np(table, "min_member")
    gang_rows = np.flatnonzero(minm > 1)
    _, inv, counts = np.unique(job[gang_rows], return_inverse=True, return_counts=True)
    assert (counts[inv] == minm[gang_rows]).all(), "min_member = pod count"
    assert counts.min() >= 2 and counts.max() <= 8
    for name in ("submit_s", "duration_s", "priority", "queue", "gang_locality", "cpu_milli"):
        v = _np(table, name)[gang_rows]
        first = {}
        for k, x in zip(inv, v, strict=True):
            assert first.setdefault(k, x) == x, name
    loc = _np(table, "gang_locality")[gang_rows]
    assert counts[inv][loc == "rack"].max() <= 4, "rack gangs fit a 4-node rack"
    # pod ids are job id + member number
    pods = table.column("pod_id").to_pylist()
    assert all(pods[i].startswith(job[i] + "-") for i in gang_rows)


# ---- knobs -----------------------------------------------------------------------------


def test_n_jobs_is_exact(workload):
    params = {**workload.params(), "n_jobs": 1234}
    t = SyntheticWorkload(**params).table(5)
    assert len(pc.unique(t.column("job_id"))) == 1234
    validate_table(t, "<n_jobs>")


def test_disabled_classes(workload):
    params = workload.params()
    for c in ("inference", "training", "gangs"):
        params[c] = {**params[c], "rate_per_h": 0}
    t = SyntheticWorkload(**params).table(0)
    assert set(_cls(t)) == {"cpu"}


def test_unknown_knob_is_refused():
    with pytest.raises(ConfigError, match="unknown key 'bogus'"):
        SyntheticWorkload(gangs={"bogus": 1})
    with pytest.raises(ConfigError, match="duration"):
        SyntheticWorkload(training={"duration_min_s": 10, "duration_median_s": 5})


# ---- gang sizes the cluster can hold ---------------------------------------------------

#: What one domain of each locality holds of the gang pods (one 8-GPU pod a node), by hand from
#: conf/cluster/default.yaml: only h100-nvl8 has a NIC per GPU; its racks are 4 nodes; block-a
#: is nvl-reserved's 16 nodes, block-b nvl-ondemand's 16 capped by its stock of 6; the whole
#: cluster 16 + 6 = 22 nodes.
DEFAULT_ROOM = {"rack": 4, "block": 16, "none": 22}
#: The same from conf/cluster/philly.yaml (one node type, p40x8): racks of 16 nodes; block-a
#: reserved 32 + ondemand-a 64 = 96; block-b ondemand-b, 64 at most (its stock is drawn in
#: [16, 64]); every pool 32 + 64 + 64 = 160.
PHILLY_ROOM = {"rack": 16, "block": 96, "none": 160}
#: conf/workload/philly.yaml's gang pod
PHILLY_POD = {"nvlink": False, "nic_per_gpu": False, "models": ["P40"], "cpu_milli_per_pod": 48000,
              "memory_mib_per_pod": 448000}


def _gangs(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each gang's size (min_member) and locality, one entry a gang."""
    minm, loc, job = _np(table, "min_member"), _np(table, "gang_locality"), _np(table, "job_id")
    first = (minm > 1) & np.r_[True, job[1:] != job[:-1]]
    return minm[first], loc[first]


@functools.cache
def _cluster(name: str):
    return instantiate(compose("config", [f"cluster={name}"]).cluster, _convert_="all")


def _gang_pod(**gangs) -> pa.Table:
    """One gang pod of the default gang class with `gangs` changed."""
    t = SyntheticWorkload(inference={"rate_per_h": 0}, training={"rate_per_h": 0}, cpu={"rate_per_h": 0},
                          gangs={"n": 1, "members": [2, 2], **gangs}).table(0)
    return t.slice(0, 1)


def test_the_room_of_each_locality_by_hand():
    """gang_room against DEFAULT_ROOM and PHILLY_ROOM, then pods smaller than a node: 4-GPU pods
    of 24 cores and 200,000 MiB fit twice on a p40x8 (64 cores, 512,000 MiB, 8 GPUs), so a rack
    of 16 holds 32; claiming one NVLink domain they fit none (its domains hold 2 GPUs each); the
    default cluster's PCIe and L4 nodes hold no NIC gang pod."""
    default, philly = _cluster("default"), _cluster("philly")
    assert {k: v[0] for k, v in gang_room(default, _gang_pod()).items()} == DEFAULT_ROOM
    assert {k: v[0] for k, v in gang_room(philly, _gang_pod(**PHILLY_POD)).items()} == PHILLY_ROOM
    half = {**PHILLY_POD, "gpus_per_pod": 4, "cpu_milli_per_pod": 24000, "memory_mib_per_pod": 200000}
    assert {k: v[0] for k, v in gang_room(philly, _gang_pod(**half)).items()} == {"rack": 32, "block": 192,
                                                                                   "none": 320}
    assert {k: v[0] for k, v in gang_room(philly, _gang_pod(**{**half, "nvlink": True})).items()} == {
        "rack": 0, "block": 0, "none": 0}


@pytest.mark.parametrize("scenario, overrides, key, size, loc, room", [
    ("synthetic_redrawn", ["workload.gangs.members=[2,64]"], "workload.gangs.members", 64, "rack", 4),
    ("synthetic_redrawn", ["workload.gangs.max_members.rack=8"], "workload.gangs.max_members.rack", 8, "rack", 4),
    ("synthetic_redrawn", ["workload.gangs.max_members.block=17"], "workload.gangs.max_members.block", 17, "block",
     16),
    ("philly_redrawn", ["+workload.gangs.member_weights.32=0.01"], "workload.gangs.member_weights.32", 32, "rack",
     16),
    ("philly_redrawn", ["workload.gangs.member_weights=null", "workload.gangs.members=[161,161]",
                        "workload.gangs.locality.rack=0"], "workload.gangs.members", 161, "none", 160),
])
def test_a_gang_no_domain_of_its_locality_holds_is_refused_before_anything_is_drawn(
        scenario, overrides, key, size, loc, room, tmp_path):
    """At run time (the drawn trace) and by `loopbench generate`: one line naming the key that
    sets the size, the size, the locality, the cluster and what the domain holds."""
    from harness.generated import trace_file

    cfg = compose("config", [f"+scenario={scenario}", f"trace.path={tmp_path / 'drawn.parquet'}", *overrides])
    with pytest.raises(ConfigError) as err:
        trace_file(cfg, instantiate(cfg.cluster, _convert_="all"))
    message = str(err.value)
    assert message.startswith(f"{key}: gangs of {size} pods with locality '{loc}' cannot start in cluster ")
    assert f"holds at most {room} of their pods" in message and "\n" not in message
    generate = compose("generate", [f"out={tmp_path / 'g.parquet'}", f"cluster={cfg.cluster.name}",
                                    f"workload={'default' if scenario.startswith('synthetic') else 'philly'}",
                                    *overrides])
    with pytest.raises(ConfigError, match=f"^{key}: gangs of {size} pods"):
        generate_task(generate)
    assert list(tmp_path.iterdir()) == [], "nothing drawn"


@settings(max_examples=60, deadline=None)
@given(
    philly=st.booleans(),
    weights=st.fixed_dictionaries({loc: st.sampled_from([0.0, 0.5, 1.0]) for loc in LOCALITIES}).filter(
        lambda w: sum(w.values()) > 0),
    how=st.sampled_from(["members", "member_weights", "max_members"]),
    sizes=st.lists(st.integers(2, 200), min_size=1, max_size=3),
    seed=st.integers(0, 2**32),
)
def test_a_gang_config_is_refused_exactly_when_it_could_draw_a_gang_its_domain_cannot_hold(
        philly, weights, how, sizes, seed):
    """Over gang configs (which localities, how sizes are set, sizes up to 200) on both shipped
    clusters: refused iff the largest size some drawn locality can get exceeds that locality's
    room (the hand-computed tables above); accepted, every drawn gang fits its domain."""
    room = PHILLY_ROOM if philly else DEFAULT_ROOM
    cluster = _cluster("philly" if philly else "default")
    gangs: dict = {"n": 40, "locality": weights}
    if philly:
        gangs |= PHILLY_POD
    if how == "members":
        gangs["members"] = [min(sizes), max(sizes)]
        largest = {loc: max(sizes) for loc in LOCALITIES}
    elif how == "member_weights":
        gangs["member_weights"] = {str(k): 1.0 for k in sizes}
        largest = {loc: max(sizes) for loc in LOCALITIES}
    else:
        gangs |= {"min_members": 2, "max_members": dict(zip(LOCALITIES, (sizes * 3)[:3], strict=True))}
        largest = dict(zip(LOCALITIES, (sizes * 3)[:3], strict=True))
    w = SyntheticWorkload(inference={"rate_per_h": 0}, training={"rate_per_h": 0}, cpu={"rate_per_h": 0},
                          gangs=gangs)
    impossible = [loc for loc in LOCALITIES if weights[loc] > 0 and largest[loc] > room[loc]]
    if impossible:
        with pytest.raises(ConfigError, match=r"^workload\.gangs\.(members|member_weights\.\d+|max_members\.\w+): "):
            w.check_gangs_fit(cluster)
        return
    w.check_gangs_fit(cluster)
    drawn, locality = _gangs(w.table(seed))
    assert len(drawn) == 40
    assert (drawn <= np.array([room[loc] for loc in locality])).all()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**40),
    n_jobs=st.one_of(st.none(), st.integers(1, 400)),
    span_s=st.floats(60, 7 * 86400),
)
def test_any_seed_valid(seed, n_jobs, span_s):
    w = SyntheticWorkload(span_s=span_s, n_jobs=n_jobs, inference={"rate_per_h": 20}, gangs={"rate_per_h": 2},
                          training={"rate_per_h": 3}, cpu={"rate_per_h": 1})
    if n_jobs is None and span_s < 3600:
        return  # may legitimately draw zero jobs
    t = w.table(seed)
    validate_table(t, "<hypothesis>")
    assert _np(t, "submit_s").max() < span_s
    if n_jobs is not None:
        assert len(pc.unique(t.column("job_id"))) == n_jobs


def test_speed_200k_pods(workload):
    params = {**workload.params(), "n_jobs": 200_000, "span_s": 30 * 86400}
    w = SyntheticWorkload(**params)
    t0 = time.perf_counter()
    t = w.table(0)
    elapsed = time.perf_counter() - t0
    assert t.num_rows >= 200_000
    assert elapsed < 3.0, f"{elapsed:.2f} s for {t.num_rows} pods"


# ---- the command and the bundled trace ------------------------------------------------


def test_generate_task_writes_trace(tmp_path, capsys):
    out = tmp_path / "g.parquet"
    cfg = compose("generate", [f"out={out}", "seed=3"])
    generate_task(cfg)
    table, meta = read_trace(out)
    assert meta.source.startswith("loopbench synthetic generator seed=3 ")
    assert meta.licence == "CC0-1.0" and meta.time_origin == "trace start"
    line = capsys.readouterr().out.strip()
    assert "pods" in line and "gangs" in line and "GPU-hours" in line and "\n" not in line
    assert table.equals(instantiate(cfg.workload, _convert_="all").table(3))


def test_generate_task_refuses_misfits(tmp_path):
    cfg = compose("generate", [f"out={tmp_path / 'x.parquet'}", "workload.training.cpu_milli_per_gpu=40000"])
    with pytest.raises(ConfigError, match="fit no node type"):
        generate_task(cfg)
    assert not (tmp_path / "x.parquet").exists()


def test_bundled_default_trace_is_current(table):
    """traces/default.parquet is exactly what `loopbench generate` makes with the defaults."""
    path = ROOT / "traces" / "default.parquet"
    bundled, meta = read_trace(path)
    assert bundled.equals(table), "regenerate it: loopbench generate (from the project root)"
    assert meta.source.startswith("loopbench synthetic generator seed=0 ")
    assert pq.ParquetFile(path).metadata.num_rows == table.num_rows


def test_bundled_two_tenant_trace_is_current_and_folds_the_queues_into_two_tenants(table):
    """traces/two_tenants.parquet is what `loopbench generate workload=two_tenants` makes: the
    default trace's jobs (same draws: one tenant per class only relabels them), every
    inference job in `prod` at priority 1000, every other in `research` at 100."""
    two = instantiate(compose("generate", ["workload=two_tenants"]).workload, _convert_="all").table(0)
    bundled, meta = read_trace(ROOT / "traces" / "two_tenants.parquet")
    assert bundled.equals(two), "regenerate it: loopbench generate workload=two_tenants out=traces/two_tenants.parquet"
    assert meta.source.startswith("loopbench synthetic generator seed=0 ")
    same = [c for c in table.column_names if c not in ("queue", "priority")]
    assert two.select(same).equals(table.select(same))
    serving = _cls(two) == "inf"
    assert set(_np(two, "queue")[serving]) == {"prod"} and set(_np(two, "priority")[serving]) == {1000}
    assert set(_np(two, "queue")[~serving]) == {"research"} and set(_np(two, "priority")[~serving]) == {100}


# ---- inference services ----------------------------------------------------------------


def _service(**over) -> dict:
    return {"gpu_models": ["L4"], "capacity_per_replica": 100.0, "mean_demand": 100.0, "window_s": 3600, **over}


def _demand(workload: SyntheticWorkload, name: str, seed: int = 0) -> list[float]:
    _, d = workload.service_tables(seed)
    keep = pa.array(np.array(d.column("service").to_pylist()) == name)
    return d.filter(keep).column("demand").to_pylist()


def test_service_diurnal_demand_by_hand():
    """mean 100 x (1 + 0.5 cos(2 pi ((k + 0.5) / 24 - 0 / 24))) at the middle of hour k:
    hour 0: 100 x (1 + 0.5 cos(pi / 24)) = 100 x (1 + 0.5 x 0.99144486) = 149.572;
    hour 6: 100 x (1 + 0.5 cos(13 pi / 24)) = 100 x (1 - 0.5 x 0.13052619) = 93.474;
    hour 12: 100 x (1 - 0.5 x 0.99144486) = 50.428; then the idle row (0) at the span's end."""
    w = SyntheticWorkload(span_s=86400, services={"chat": _service(diurnal_amplitude=0.5, peak_hour=0)})
    d = _demand(w, "chat")
    assert len(d) == 25 and d[-1] == 0.0
    assert (d[0], d[6], d[12]) == pytest.approx((149.572, 93.474, 50.428), abs=1e-3)
    _, table = w.service_tables(0)
    assert table.column("start_s").to_pylist() == [3600.0 * k for k in range(24)] + [86400.0]


def test_service_bursts_multiply_demand_in_whole_windows_and_are_seeded():
    """Without a cycle, demand is 100 outside bursts and 100 x (1 + 2 x overlapping bursts)
    inside them (burst_factor 3); none without bursts."""
    flat = SyntheticWorkload(span_s=86400, services={"chat": _service()})
    assert _demand(flat, "chat")[:-1] == [100.0] * 24
    w = SyntheticWorkload(span_s=86400, services={"chat": _service(bursts_per_day=6, burst_len_s=3600,
                                                                   burst_factor=3)})
    d = np.array(_demand(w, "chat")[:-1])
    assert set(((d - 100.0) / 200.0).round(9)) <= set(range(10)) and (d >= 300.0).any()
    assert _demand(w, "chat", seed=0) == _demand(w, "chat", seed=0)
    assert _demand(w, "chat", seed=1) != _demand(w, "chat", seed=0)


def test_services_leave_the_pods_and_each_other_unchanged(workload, table):
    params = workload.params()
    both = SyntheticWorkload(**params, services={"a": _service(bursts_per_day=9, burst_factor=2),
                                                 "b": _service(bursts_per_day=9, burst_factor=2)})
    assert _ipc_bytes(both.table(0)) == _ipc_bytes(table)
    alone = SyntheticWorkload(**params, services={"b": _service(bursts_per_day=9, burst_factor=2)})
    assert _demand(alone, "b") == _demand(both, "b")
    assert workload.service_tables(0) is None and "services" not in params


@pytest.mark.parametrize("services, key, rule", [
    ({"chat": _service(capacity_per_replica=0)}, "workload.services.chat.capacity_per_replica", "> 0"),
    ({"chat": _service(min_replicas=4, max_replicas=3)}, "workload.services.chat.max_replicas", ">= max(1"),
    ({"chat": _service(burst_factor=0.5)}, "workload.services.chat.burst_factor", ">= 1"),
    ({"chat": _service(colour="red")}, "workload.services.chat", "unknown key 'colour'"),
    ({"chat": _service(gpu_partition="3g.40gb")}, "workload.services.chat.gpu_partition", "partition profile"),
    ({"chat": 3}, "workload.services.chat", "must be a mapping"),
    (["chat"], "workload.services", "must be a mapping"),
])
def test_bad_service_settings_are_refused_by_key(services, key, rule):
    with pytest.raises(ConfigError) as err:
        SyntheticWorkload(services=services)
    assert key in str(err.value) and rule in str(err.value) and "\n" not in str(err.value)


def test_generate_refuses_a_replica_no_node_can_hold(tmp_path):
    cfg = compose("generate", ["workload=services", f"out={tmp_path / 's.parquet'}",
                               "workload.services.large.gpu_count=16"])
    with pytest.raises(ConfigError, match="workload.services.large: its replica fits no node type"):
        generate_task(cfg)
    assert list(tmp_path.iterdir()) == []


def test_bundled_services_trace_is_current(tmp_path):
    """traces/services{,.services,.demand}.parquet are what `loopbench generate workload=services
    out=traces/services.parquet` makes (conf/trace/services.yaml names them)."""
    from harness.services.trace import read_services

    cfg = compose("generate", ["workload=services", f"out={tmp_path / 'services.parquet'}"])
    generate_task(cfg)
    for name in ("services.parquet", "services.services.parquet", "services.demand.parquet"):
        assert (tmp_path / name).read_bytes() == (ROOT / "traces" / name).read_bytes(), \
            f"regenerate it: loopbench generate workload=services out=traces/services.parquet ({name})"
    trace = compose("config", ["trace=services"]).trace
    pods, _ = read_trace(ROOT / trace.path, allow_empty=True)
    services, demand, meta = read_services(ROOT / trace.services, ROOT / trace.demand)
    assert pods.num_rows == 0 and services.column("service").to_pylist() == ["chat", "large", "embed"]
    assert meta.demand_unit == "tokens/s" and meta.source.startswith("loopbench synthetic generator seed=0 ")
