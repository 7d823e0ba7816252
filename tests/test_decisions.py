"""The decision trace (harness/decisions.py, `trace_events=true`): what it records, worked out
by hand on a preemption, and that recording it changes no other output of a run."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from harness.config import compose
from harness.decisions import DecisionTrace
from harness.replay import Replay
from harness.scheduler import Scheduler
from harness.scheduler.pod_group import GangScheduling
from harness.scheduler.preemption import DefaultPreemption
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.workload import compile_workload
from tests.conformance.test_gang_scheduling import SchedulerOnly
from tests.scenarios import cluster, node_type, pool, trace


def test_a_preemption_reads_as_it_happened():
    """Two 8-GPU nodes, present from the start. `low` (a gang of 2 x 8 GPUs) arrives at 0: both
    pods shortage, queued, bound one per node (the first waits for its gang), both start. At
    100 `high` (2 x 4 GPUs, priority 100, 50 s) preempts it whole: each `low` pod is preempted
    and released back to pending, waiting out its job's pod-failure backoff (two running pods
    deleted: 20 s), and `high` binds and starts. At 120 `low` is queued again (shortage) and
    the scheduler turns it away (each node has 4 of its 8 GPUs left: FitError's `Insufficient
    nvidia.com/gpu` on both). At 150 `high` finishes and `low` binds and starts again on the
    same nodes."""
    cl = cluster([node_type("g8")], [pool(f"n{i}", "g8", min_size=1, max_size=1) for i in range(2)],
                 autoscaling=False)
    pods = [{"job_id": "low", "min_member": 2, "gpu_count": 8, "priority": 10, "duration_s": 1e6}] * 2 + \
           [{"job_id": "high", "min_member": 2, "gpu_count": 4, "priority": 100, "submit_s": 100.0,
             "duration_s": 50.0}] * 2
    sim = Simulation(compile_workload(trace(pods), cl), cl, seed=0, horizon_s=200.0)
    events = DecisionTrace(sim)
    sim.run(SchedulerOnly(Scheduler(LeastAllocated(), gang=GangScheduling(), post_filter=DefaultPreemption())))
    got = [(r["t"], r["event"], r["job_id"], r["pod"], r["node"], r["detail"]) for r in events.frame().iter_rows(named=True)]
    gpus8, gpus4 = "0,1,2,3,4,5,6,7", "0,1,2,3"

    def start(t, job, a, b, gpus):  # a gang of two bound on nodes 0 and 1, then started
        return [(t, "bound", job, a, 0, gpus), (t, "reason", job, a, None, "gang_wait"), (t, "bound", job, b, 1, gpus),
                (t, "started", job, a, 0, None), (t, "started", job, b, 1, None)]

    def queued(t, job, a, b):
        return [(t, "reason", job, a, None, "shortage"), (t, "reason", job, b, None, "shortage"),
                (t, "queued", job, None, None, None)]

    def arrive(t, job, a, b):
        return [(t, "arrived", job, None, None, None), *queued(t, job, a, b)]

    assert got == [
        (0.0, "node_requested", None, None, 0, "ready"), (0.0, "node_requested", None, None, 1, "ready"),
        *arrive(0.0, "low", 0, 1), *start(0.0, "low", 0, 1, gpus8),
        *arrive(100.0, "high", 2, 3),
        (100.0, "preempted", "low", 0, 0, None), (100.0, "preempted", "low", 1, 1, None),
        (100.0, "reason", "low", 0, None, "job_backoff"), (100.0, "released", "low", 0, 0, None),
        (100.0, "reason", "low", 1, None, "job_backoff"), (100.0, "released", "low", 1, 1, None),
        *start(100.0, "high", 2, 3, gpus4),
        *queued(120.0, "low", 0, 1),
        *[(120.0, "unschedulable", "low", p, None, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu "
                                                   "(NodeResourcesFit)") for p in (0, 1)],
        (150.0, "finished", "high", 2, 0, None), (150.0, "finished", "high", 3, 1, None),
        *start(150.0, "low", 0, 1, gpus8),
    ]
    assert events.frame()["pool"].to_list()[:2] == ["n0", "n1"]


@pytest.mark.parametrize("loop, reason", [("separate", "unneeded"), ("separate_karpenter", "karpenter consolidation"),
                                          ("merged", "unneeded")])
def test_recording_changes_no_other_output(loop, reason, tmp_path):
    """The bundled trace through the separate loops (autoscaling, Coscheduling's released
    gangs), Cluster Autoscaler's and Karpenter's, and the merged loop, to 20,000 s, with the
    trace off and on: every other table is the same, each scale-up follows the option (the
    merged planner's: the plan) chosen, and the scale-downs say why."""
    runs = {}
    for on in (False, True):
        cfg = compose("config", [f"loop={loop}", "horizon_s=20000", f"trace_events={str(on).lower()}"])
        Replay().run(cfg, tmp_path / str(on), progress=False)
        runs[on] = tmp_path / str(on)
    assert not (runs[False] / "events.parquet").exists()
    events = pl.read_parquet(runs[True] / "events.parquet")
    assert {"arrived", "bound", "scale_up", "option", "node_ready", "scale_down"} <= set(
        events["event"].cast(pl.String))
    assert loop == "merged" or "released" in set(events["event"].cast(pl.String))  # the planner binds once
    assert events.filter(pl.col("event") == "scale_down")["detail"].str.contains(reason).all()
    chosen = events.filter(pl.col("detail").str.ends_with(" chosen"))
    scale_ups = events.filter(pl.col("event") == "scale_up")
    if loop == "separate_karpenter":  # a launch the provider refused falls back to the next offering: not chosen
        scale_ups = scale_ups.filter(~pl.col("detail").str.ends_with("granted=0"))
    assert len(chosen) == len(scale_ups)  # each ask follows the option its expander chose
    assert (chosen["detail"].str.extract(r"pool=(\S+)") == scale_ups["detail"].str.extract(r"pool=(\S+)")).all()
    assert events["t"].is_sorted()
    for name in ("jobs", "nodes", "timeline", "metrics"):
        off, on = (pl.read_parquet(runs[k] / f"{name}.parquet") for k in (False, True))
        assert_frame_equal(off, on, check_exact=True)


def test_a_pod_turned_away_is_told_by_rule_as_fit_error_words_it():
    """Four nodes present from the start: an L4 node (not the H100 the pod asks), an H100 node
    whose CPU a first pod took (60 of 64 cores), one whose memory it took (500 of 512 GiB),
    and one whose GPUs it took (8 of 8). A pod of 4 H100s, 8 cores, 16 GiB then fits none: each
    node is counted once, by the first rule it fails."""
    l4 = node_type("l4", gpu_model="L4")
    cl = cluster([node_type("h"), l4], [pool("a", "l4", min_size=1, max_size=1)]
                 + [pool(f"h{i}", "h", min_size=1, max_size=1) for i in range(3)], autoscaling=False)
    fillers = [{"job_id": "cpu", "cpu_milli": 60000, "gpu_count": 0, "gpu_milli": 0, "gpu_models": ["H100"]},
               {"job_id": "mem", "memory_mib": 500 * 1024, "gpu_count": 0, "gpu_milli": 0, "gpu_models": ["H100"]},
               {"job_id": "gpu", "gpu_count": 8, "gpu_models": ["H100"]}]
    late = {"job_id": "late", "gpu_count": 4, "cpu_milli": 8000, "memory_mib": 16384, "gpu_models": ["H100"],
            "submit_s": 10.0}
    sim = Simulation(compile_workload(trace([*fillers, late]), cl), cl, seed=0, horizon_s=100.0)
    events = DecisionTrace(sim)
    sim.run(SchedulerOnly(Scheduler(LeastAllocated(), gang=GangScheduling())))
    said = events.frame().filter(pl.col("event") == "unschedulable")
    # the fillers land on distinct H100 nodes only if LeastAllocated spreads them: check it did
    bound = events.frame().filter(pl.col("event") == "bound").filter(pl.col("job_id") != "late")
    assert bound["node"].n_unique() == 3 and "a" not in bound["pool"].to_list()
    assert said.select("t", "job_id", "detail").rows() == [(
        10.0, "late", "0/4 nodes are available: 1 didn't match the pod's GPU model, partition profile, NIC or "
        "placement (NodeAffinity), 1 Insufficient cpu (NodeResourcesFit), 1 Insufficient memory "
        "(NodeResourcesFit), 1 Insufficient nvidia.com/gpu (NodeResourcesFit)")]
