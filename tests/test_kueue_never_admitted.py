"""Work Kueue can never admit is refused before the replay, by ClusterQueue, job, pod shape, why
and what would fix it: a job no flavor of its queue can hold (no pool of its flavors fits its
pods), or one asking more than the queue could ever get (its nominal quota and all it may
borrow). Silently, it waited not admitted until the horizon, and its loop read as if it did less
work than the loops it is compared with. A job that may get in by borrowing is not refused.

The clusters are built here: a node type `h8` (8 H100, a NIC per GPU) in pool `big`, `l4x4` (4
L4) in pool `small`; each golden message is written out whole.
"""

from __future__ import annotations

import pytest

from harness.cluster import Cluster
from harness.config import compose
from harness.errors import ConfigError
from harness.kueue.loop import KueueLoop
from harness.replay import build
from harness.services.loop import ReplicaLoop
from harness.services.replicas import KedaScaledObject
from harness.trace import TraceMeta, write_trace
from tests import scenarios as sc
from tests.test_cli import loopbench, one_line_error

HOUR = 3600.0
L4X4 = {"name": "l4x4", "cpu_milli": 48000, "memory_mib": 192000, "gpus": 4, "gpu_model": "L4"}
QUOTA = {"cpu": 1000, "memory": 10000}


def cq(name: str, *flavors: tuple[str, dict], cohort: str | None = None) -> dict:
    return {"name": name, "cohort": cohort, "flavors": [{"name": f, **quota} for f, quota in flavors]}


def two_types(*queues: dict, flavors=(("small-f", "small"), ("big-f", "big")), local=None) -> Cluster:
    """Pools big (h8) and small (l4x4), static with two nodes each; the flavors given; a
    LocalQueue per ClusterQueue, named alike unless `local` maps LocalQueue to ClusterQueue."""
    section = {"resource_flavors": [{"name": f, "pools": [p]} for f, p in flavors], "cluster_queues": list(queues),
               "local_queues": [{"name": lq, "cluster_queue": c} for lq, c in
                                (local or {q["name"]: q["name"] for q in queues}).items()]}
    return Cluster(node_types=[sc.node_type("h8", nic_per_gpu=True), L4X4], autoscaling=False, name="golden",
                   pools=[sc.pool("big", "h8", max_size=2, min_size=2), sc.pool("small", "l4x4", max_size=2, min_size=2)],
                   kueue=section)


def gpus(n: float, **more) -> dict:
    return {"nominal": {"gpu": n, **QUOTA}, **more}


def job(name: str, q: str, gpu_count: int = 1, submit_s: float = 0.0, **kw) -> dict:
    return {"job_id": name, "queue": q, "gpu_count": gpu_count, "submit_s": submit_s, "duration_s": HOUR, **kw}


def refused(pods: list[dict], cl: Cluster) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        sc.run(sc.trace(pods), cl, KueueLoop(sc.separate()), horizon_s=HOUR)
    return err.value


# ---- no flavor's pools fit the pods ------------------------------------------------------------
def test_golden_a_job_whose_pods_no_pool_of_its_flavors_fits_is_refused_naming_the_flavor_that_would():
    """Two jobs of LocalQueue team-a (ClusterQueue infer, flavor small-f: the L4 nodes) need an
    H100 each; another flavor of the cluster, big-f, is over the H100 pool: list it."""
    cl = two_types(cq("infer", ("small-f", gpus(8))), cq("train", ("big-f", gpus(16))),
                   local={"team-a": "infer", "train": "train"})
    pods = [job("a1", "team-a", gpu_models=["H100"]), job("ok", "team-a"), job("t", "train"),
            job("a2", "team-a", submit_s=10.0, gpu_models=["H100"])]
    err = refused(pods, cl)
    assert err.where == "cluster.kueue.cluster_queues[0]"
    assert err.rule == ("ClusterQueue 'infer' can never admit 2 jobs of LocalQueue 'team-a' (first 'a1'): no pool "
                        "of its flavors (small-f) fits their pod of 1 GPU (H100), 1 cpu, 1 GiB; list flavor 'big-f' "
                        "(node type h8) in ClusterQueue 'infer'")


def test_golden_a_pod_shape_no_flavor_holds_is_refused_naming_the_node_type_to_add_a_flavor_over():
    """No flavor is over the h8 pool: a gang of two 8-GPU pods with a NIC per GPU fits only h8, so
    a flavor over it must be added. The first job no flavor holds is named, and the others too."""
    cl = two_types(cq("q", ("small-f", gpus(64))), flavors=(("small-f", "small"),))
    pods = [*[job("g", "q", 8, nic_per_gpu=True, min_member=2, cpu_milli=32000, memory_mib=262144)] * 2,
            job("h", "q", 1, gpu_models=["H100"])]
    err = refused(pods, cl)
    assert err.where == "cluster.kueue.cluster_queues[0]"
    assert err.rule == ("ClusterQueue 'q' can never admit job 'g': no pool of its flavors (small-f) fits its pod of "
                        "8 GPUs (a NIC per GPU), 32 cpu, 256 GiB; add a flavor over pools of node type h8 (big) to "
                        "ClusterQueue 'q' (1 more job cannot be admitted either: 'h' of ClusterQueue 'q')")


# ---- demand beyond the queue's reachable quota -------------------------------------------------
@pytest.mark.parametrize("queues, why, fix", [
    # alone, a queue gets its nominal quota at most
    ([cq("q", ("big-f", gpus(8)))], "12 GPUs in all, more than flavor big-f can ever give it (8 GPUs: its nominal "
     "quota, no cohort)", "raise its nominal gpu of flavor big-f to at least 12"),
    # in a cohort, its nominal quota and what it may borrow: bounded by its borrowing limit ...
    ([cq("q", ("big-f", gpus(4, borrowing_limit={"gpu": 2})), cohort="c"), cq("r", ("big-f", gpus(8)), cohort="c")],
     "12 GPUs in all, more than flavor big-f can ever give it (6 GPUs: its nominal quota 4 and 2 borrowed in cohort "
     "c)", "raise its nominal gpu of flavor big-f, its borrowing limit or what cohort c lends to at least 12"),
    # ... or by what the cohort lends
    ([cq("q", ("big-f", gpus(4)), cohort="c"), cq("r", ("big-f", gpus(8, lending_limit={"gpu": 2})), cohort="c")],
     "12 GPUs in all, more than flavor big-f can ever give it (6 GPUs: its nominal quota 4 and 2 borrowed in cohort "
     "c)", "raise its nominal gpu of flavor big-f, its borrowing limit or what cohort c lends to at least 12"),
    # a resource a flavor does not list is none of it
    ([cq("q", ("big-f", {"nominal": QUOTA}))], "12 GPUs in all, more than flavor big-f can ever give it (no gpu: "
     "the queue does not list it)", "list gpu in its nominal quota of flavor big-f"),
], ids=["alone", "borrowing_limit", "lending_limit", "not_listed"])
def test_golden_a_job_asking_more_than_its_queue_can_ever_get_is_refused(queues, why, fix):
    """A gang of three 4-GPU pods (12 GPUs) of ClusterQueue q, whose one flavor big-f fits its
    pods; its quota can never reach 12."""
    pods = [job("g", "q", 4, min_member=3)] * 3
    err = refused(pods, two_types(*queues, flavors=(("big-f", "big"),)))
    assert err.where == "cluster.kueue.cluster_queues[0]"
    assert err.rule == f"ClusterQueue 'q' can never admit job 'g' (3 pods of 4 GPUs, 1 cpu, 1 GiB): it asks {why}; {fix}"


def test_every_flavor_that_fits_the_pods_is_named_with_what_it_can_give():
    """Flavors small-f (pool small) and big-f (pool big) both fit a 1-GPU pod of no model; a job of
    twenty of them asks more than either can give."""
    cl = two_types(cq("q", ("small-f", gpus(4)), ("big-f", gpus(16))))
    err = refused([job("w", "q", min_member=20)] * 20, cl)
    assert err.rule == ("ClusterQueue 'q' can never admit job 'w' (20 pods of 1 GPU, 1 cpu, 1 GiB): it asks 20 GPUs "
                        "in all, more than flavor small-f can ever give it (4 GPUs: its nominal quota, no cohort) "
                        "or big-f (16 GPUs: its nominal quota, no cohort); raise its nominal gpu of flavor small-f "
                        "to at least 20")


# ---- not certain: not refused ------------------------------------------------------------------
def test_a_job_that_fits_only_by_borrowing_is_not_refused_and_runs_once_the_lender_is_done():
    """q owns 4 GPUs, r 8, in cohort c. G (q, 8 GPUs, t=10) fits only by borrowing, and R (r, 8
    GPUs, t=0) takes all r lends until 3600: G waits, then borrows and starts at 3600."""
    cl = two_types(cq("q", ("big-f", gpus(4)), cohort="c"), cq("r", ("big-f", gpus(8)), cohort="c"),
                   flavors=(("big-f", "big"),))
    _, sim = sc.run(sc.trace([job("R", "r", 8), job("G", "q", 8, submit_s=10.0)]), cl, KueueLoop(sc.separate()),
                    horizon_s=2 * HOUR)
    assert dict(zip(sim.w.job_id.tolist(), sim.job_started.tolist(), strict=True)) == {"G": 3600.0, "R": 0.0}


def test_a_job_no_node_type_holds_is_left_to_the_refusal_on_arrival():
    """A 16-GPU pod fits no node type: every loop refuses it on arrival, Kueue's or not."""
    cl = two_types(cq("q", ("big-f", gpus(8))), flavors=(("big-f", "big"),))
    row, _ = sc.run(sc.trace([job("huge", "q", 16), job("J", "q")]), cl, KueueLoop(sc.separate()), horizon_s=HOUR)
    assert row["pods_pending"] == 0


@pytest.mark.parametrize("min_replicas", [1, 0])
def test_a_service_replica_is_refused_only_if_one_is_surely_created(min_replicas):
    """Replicas of 2 GPUs in a queue owning 1: with min_replicas 1, svc/0 is created at the start
    and never admitted, refused; with 0 (KEDA scales to zero, no demand here) none may ever be."""
    cl = two_types(cq("q", ("big-f", gpus(1))), flavors=(("big-f", "big"),))
    svc = {"service": "svc", "capacity_per_replica": 100.0, "min_replicas": min_replicas, "max_replicas": 2,
           "gpu_count": 2, "queue": "q"}
    sim = sc.service_sim([], [svc], {"svc": [(0.0, 0.0)]}, cl, HOUR)
    loop = ReplicaLoop(KueueLoop(sc.separate()), KedaScaledObject())
    if not min_replicas:
        sim.run(loop)
        return
    with pytest.raises(ConfigError) as err:
        sim.run(loop)
    assert err.value.rule == ("ClusterQueue 'q' can never admit job 'svc/0' (1 pod of 2 GPUs, 1 cpu, 1 GiB): it asks "
                              "2 GPUs in all, more than flavor big-f can ever give it (1 GPU: its nominal quota, no "
                              "cohort); raise its nominal gpu of flavor big-f to at least 2")


def test_a_shipped_scenario_still_replays_behind_kueue():
    sim, loop = build(compose("config", ["+scenario=synthetic", "loop=separate_kueue", "horizon_s=900"]))
    sim.run(loop)
    assert (sim.job_admissions > 0).any()


# ---- the command line --------------------------------------------------------------------------
def test_the_command_line_says_it_in_one_line_naming_queue_and_shape(tmp_path):
    """The default cluster's ClusterQueue data lists only the L4 flavor: a job of it asking two
    H100s is refused before the replay, in one line naming the cluster file, queue and shape."""
    path = tmp_path / "h100.parquet"
    write_trace(sc.trace([job("etl", "data", 2, gpu_models=["H100"], cpu_milli=8000, memory_mib=65536)]), path,
                TraceMeta("kueue", "CC0-1.0", "trace start"))
    r = loopbench("replay", f"trace.path={path}", "loop=separate_kueue", f"hydra.run.dir={tmp_path}/run",
                  cwd=tmp_path)
    line = one_line_error(r)
    assert line.startswith("loopbench replay: error: ") and line.endswith(
        "conf/cluster/default.yaml: cluster.kueue.cluster_queues[2]: ClusterQueue 'data' can never admit job 'etl': "
        "no pool of its flavors (l4) fits its pod of 2 GPUs (H100), 8 cpu, 64 GiB; list flavor 'h100-pcie' (node "
        "type h100-pcie8) or 'h100-nvl' (node type h100-nvl8) in ClusterQueue 'data'"), line
    assert not (tmp_path / "run" / "metrics.parquet").exists()
