"""Preemption: `Simulation.evict` (a preempted pod restarts from scratch, a gang whole), the
DefaultPreemption PostFilter in a replay, and its metrics (preemptions, jobs_preempted,
preempted_accel_hours_lost, a job's `preemptions`). Upstream's own cases are translated in
tests/conformance/test_default_preemption.py."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness.autoscalers.cluster_autoscaler import ClusterAutoscaler
from harness.autoscalers.expanders import Chain, Price
from harness.autoscalers.scale_down import ScaleDown
from harness.config import compose
from harness.errors import ConfigError
from harness.loops.separate import SeparateLoops
from harness.metrics import jobs_frame
from harness.scheduler import Scheduler
from harness.scheduler.gang import Coscheduling
from harness.scheduler.preemption import DefaultPreemption, pick_one
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.status import BOUND, DONE, PENDING, RUNNING, PendingReason
from harness.workload import compile_workload
from tests.scenarios import cluster, node_type, pool, run, trace

GANG = {"job_id": "g", "min_member": 2, "gpu_count": 8}


def nodes(k: int):
    """k ready 8-GPU nodes, no autoscaling."""
    return cluster([node_type("h8")], [pool(f"n{i}", "h8", min_size=1, max_size=1) for i in range(k)],
                   autoscaling=False)


def preempting(gang=None) -> SeparateLoops:
    return SeparateLoops(Scheduler(LeastAllocated(), gang=gang or Coscheduling(), post_filter=DefaultPreemption()),
                         ClusterAutoscaler(scale_down=ScaleDown(), expander=Chain([Price()])))


def test_a_preempted_gang_loses_its_work_and_restarts_whole():
    """Golden, by hand. Two 8-GPU nodes; gang g (2 pods x 8 GPUs, priority 0, 2 h) starts at 0
    on both. At 1800 s pod h (8 GPUs, priority 100, 1 h) fits nowhere: DefaultPreemption evicts
    the g member on one node, and the gang goes whole (its member on the other node too):
    lost = 2 pods x 8 GPUs x 0.5 h = 8 accelerator-hours, one preemption. h runs 1800-5400 s.
    g cannot gather its quorum on one free node (Coscheduling releases its member at once), so
    it restarts when h ends: 5400 s, and finishes 7200 s later, at 12600 s.
    Used: 16 GPUs x 0.5 h + 8 x 1 h + 16 x 2 h = 48 h; billed 16 GPUs x 4 h = 64 h."""
    t = trace([{**GANG, "duration_s": 7200.0}, {**GANG, "duration_s": 7200.0},
               {"job_id": "h", "gpu_count": 8, "priority": 100, "submit_s": 1800.0, "duration_s": 3600.0}])
    row, sim = run(t, nodes(2), preempting(), horizon_s=14400.0)
    assert row["preemptions"] == 1 and row["jobs_preempted"] == 1
    assert row["preempted_accel_hours_lost"] == pytest.approx(8.0)
    jobs = {r["job_id"]: r for r in jobs_frame(sim).to_dicts()}
    assert jobs["g"]["preemptions"] == 1 and jobs["h"]["preemptions"] == 0
    assert (jobs["h"]["start_s"], jobs["h"]["finish_s"]) == (1800.0, 5400.0)
    assert (jobs["g"]["start_s"], jobs["g"]["finish_s"]) == (5400.0, 12600.0)  # its last run
    assert row["used_accel_hours"] == pytest.approx(48.0) and row["billed_accel_hours"] == pytest.approx(64.0)
    assert row["pods_done"] == 3


def test_without_preemption_nothing_is_evicted():
    """The same trace with NoPreemption (every shipped loop's setting this round): h waits for
    g to end at 7200 s; nothing is lost, and the row has no preemption columns (a loop that
    cannot preempt keeps the columns it had before preemption existed)."""
    t = trace([{**GANG, "duration_s": 7200.0}, {**GANG, "duration_s": 7200.0},
               {"job_id": "h", "gpu_count": 8, "priority": 100, "submit_s": 1800.0, "duration_s": 3600.0}])
    loop = SeparateLoops(Scheduler(LeastAllocated()), ClusterAutoscaler(scale_down=ScaleDown(), expander=Chain([Price()])))
    assert not loop.scheduler.preempts and not loop.scheduler.post_filters
    row, sim = run(t, nodes(2), loop, horizon_s=14400.0)
    assert sim.acct.job_preemptions.sum() == 0 and sim.acct.preempted_lost == 0
    assert not {"preemptions", "jobs_preempted", "preempted_accel_hours_lost"} & set(row)
    assert jobs_frame(sim).filter(job_id="h")["start_s"].item() == 7200.0


def test_a_pod_of_a_job_that_is_no_gang_goes_alone():
    """A job of independent pods (min_member 1) loses only the evicted pod: its sibling keeps
    running, the job stays started, and it counts one preemption."""
    t = trace([{"job_id": "a", "gpu_count": 8, "duration_s": 7200.0}, {"job_id": "a", "gpu_count": 8, "duration_s": 7200.0},
               {"job_id": "h", "gpu_count": 8, "priority": 100, "submit_s": 1800.0, "duration_s": 3600.0}])
    row, sim = run(t, nodes(2), preempting(), horizon_s=1900.0)
    assert sorted(sim.pod_status[:2].tolist()) == [PENDING, RUNNING]
    assert sim.job_started[0] == 0.0 and row["preemptions"] == 1
    assert row["preempted_accel_hours_lost"] == pytest.approx(8 * 0.5)


def evict_scene():
    """Gang g of 3 pods (min 3, 8 GPUs each) on three nodes since 0: p0 ends at 1000 s, p1 and
    p2 run 2 h; at 1800 s the simulation stands still (no loop) for `evict`."""
    t = trace([{"job_id": "g", "min_member": 3, "gpu_count": 8, "duration_s": d} for d in (1000.0, 7200.0, 7200.0)])
    cl = nodes(3)
    sim = Simulation(compile_workload(t, cl), cl, seed=0, horizon_s=7200.0)
    Scheduler(LeastAllocated()).attach(sim)  # orders the queue
    sim.advance_to(0.0)
    for p in range(3):
        sim.bind(p, p, np.arange(8))
    sim.advance_to(1000.0)  # events run at the instant they are advanced to
    sim.advance_to(1800.0)
    return sim


def test_evict_takes_a_gang_whole_even_its_finished_members():
    """Evicting one member sends back every member, the finished one too (it restarts from
    scratch): its 1000 s count as lost with the others' 1800 s; the nodes are empty, the job is
    not started and must gather its quorum again. Its two running members were deleted: two
    failures, so it waits out of the queue for its Job controller's backoff (10 x 2 s)."""
    sim = evict_scene()
    assert sim.pod_status.tolist() == [DONE, RUNNING, RUNNING]
    sim.evict(np.array([2]))
    assert (sim.pod_status == PENDING).all() and (sim.pod_node == -1).all()
    assert sim.acct.preempted_lost / 3.6e6 == pytest.approx(8 * (1000 + 1800 + 1800) / 3600)
    assert sim.acct.job_preemptions.tolist() == [1]
    assert sim.job_placed[0] == 0 and sim.job_done[0] == 0 and sim.job_ready_bound[0] == 0
    assert math.isnan(sim.job_started[0]) and sim.job_anchor[0] == -1
    assert not sim.queue.holds[0] and sim.queue.deferred[0] and sim.job_backoff.failures[0] == 2
    assert (sim.state.free_whole[:3] == 8).all() and sim.ledger.held_ready == 0
    assert sim.acct.reason_count[PendingReason.JOB_BACKOFF] == 3  # all three pending again, backing off
    sim.advance_to(1820.0)
    assert sim.queue.holds[0] and sim.acct.reason_count[PendingReason.SHORTAGE] == 3


def test_a_restarted_gang_runs_its_whole_duration_again():
    """After the eviction the old end events are void (a pod's epoch moved): rebound at 1800 s
    the gang runs 1000 s and 7200 s again, whatever its first run did."""
    sim = evict_scene()
    sim.evict(np.array([1]))
    for p in range(3):
        sim.bind(p, p, np.arange(8))
    assert sim.job_started[0] == 1800.0
    sim.advance_to(2800.0)
    sim.advance_to(7200.0)  # the first run's end passes by
    assert sim.pod_status.tolist() == [DONE, RUNNING, RUNNING]
    assert sim.pod_end[0] == 2800.0


def test_a_waiting_gang_preempted_forgets_its_permit_timeout():
    """Upstream rejects a preempted waiting pod and its group (waitingPod.Reject stops its
    timers): the Coscheduling wait of the evicted gang ends with it. Evicted at 1810 s, the
    gang's member bound at 1800 s has its 60 s wait stopped: no event is left at 1860 s; bound
    again at 1830 s, it waits a timeout of its own and is released at 1890 s, not before."""
    gang = Coscheduling(timeout_s=60.0)
    sim = evict_scene()
    sched = Scheduler(LeastAllocated(), gang=gang)
    sched.attach(sim)
    sched.evict(np.array([1]))  # the gang leaves its nodes whole
    sim.bind(0, 0, np.arange(8))  # one member of three bound: it waits at Permit
    gang.permit(0)
    sim.advance_to(1810.0)
    sched.evict(np.array([0]))
    assert sched.cycle_state.preempted
    sim.advance_to(1830.0)
    sim.bind(0, 0, np.arange(8))
    gang.permit(0)
    assert sim.next_event_time() == 1890.0  # the stopped wait's 1860 s is gone
    sim.advance_to(1889.0)
    assert sim.pod_status[0] == BOUND
    sim.advance_to(1890.0)
    assert sim.pod_status[0] == PENDING


def test_only_pods_on_a_node_can_be_evicted():
    sim = evict_scene()
    with pytest.raises(AssertionError):
        sim.evict(np.array([0]))  # done: not on a node


def test_fewest_victims_decide_when_the_adjusted_sums_tie():
    """pickOneNodeForPreemption's 4th criterion (no upstream case reaches it: with each priority
    offset by 2^31 the sum of fewer victims is nearly always lower): highest priority 0 both,
    adjusted sums equal (2 x 2^31 = 0 - 2^30 - 2^30 + 3 x 2^31), fewer victims wins."""
    w = SimpleNamespace(job=np.arange(5), job_priority=np.array([0, 0, 0, -(1 << 30), -(1 << 30)]))
    sim = SimpleNamespace(w=w, pod_start=np.zeros(5), now=0.0)
    three, two = (0, np.array([2, 3, 4])), (1, np.array([0, 1]))
    assert pick_one(sim, [three, two]) == 1 and pick_one(sim, [two, three]) == 0


def test_potential_nodes_are_the_ones_preemption_could_help():
    """numCandidates counts the potential nodes only (upstream: the nodes whose filter status is
    Unschedulable, not UnschedulableAndUnresolvable): a T4-only pod among 4 T4 and 4 H100
    nodes, all full of lower-priority pods, 50 %, at least 1: 2 candidates (50 % of the 4 T4
    nodes), both T4 (50 % of all 8 nodes would be 4)."""
    types = [node_type("t4", gpu_model="T4"), node_type("h100")]
    cl = cluster(types, [pool(f"{m}{i}", m, min_size=1, max_size=1) for m in ("t4", "h100") for i in range(4)],
                 autoscaling=False)
    rows = [{"job_id": f"v{i}", "gpu_count": 8} for i in range(8)]
    rows.append({"job_id": "p", "gpu_count": 8, "priority": 1, "gpu_models": ["T4"]})
    sim = Simulation(compile_workload(trace(rows), cl), cl, seed=0, horizon_s=100.0)
    plugin = DefaultPreemption(min_candidate_nodes_percentage=50, min_candidate_nodes_absolute=1)
    Scheduler(LeastAllocated(), post_filter=plugin).attach(sim)
    for i in range(8):
        sim.bind(i, i, np.arange(8))
    sim.pod_status[8] = PENDING
    found = plugin.candidates(8, sim.state.ready.copy())
    assert len(found) == 2 and all(sim.state.slot_type[n] == 0 for n, _ in found)


def test_default_preemption_refuses_both_minimums_at_zero():
    with pytest.raises(ConfigError, match="loop.scheduler.post_filter: .*cannot both be 0"):
        DefaultPreemption(min_candidate_nodes_percentage=0, min_candidate_nodes_absolute=0)


def test_bound_pods_waiting_for_their_gang_are_victims_too():
    """A member bound and waiting in Permit (upstream: a WaitingPod, rejected) is a victim like
    a running pod; it did no work, so nothing is lost, but its gang counts a preemption."""
    t = trace([{"job_id": "g", "min_member": 3, "gpu_count": 8}, {"job_id": "g", "min_member": 3, "gpu_count": 8},
               {"job_id": "g", "min_member": 3, "gpu_count": 8},
               {"job_id": "h", "gpu_count": 8, "priority": 100, "submit_s": 10.0}])
    waits = Coscheduling(timeout_s=3600.0, reject_percentage=100)  # two of three members wait
    row, sim = run(t, nodes(2), preempting(waits), horizon_s=20.0)
    assert sim.pod_status[3] == RUNNING and row["preemptions"] == 1
    assert row["preempted_accel_hours_lost"] == 0.0
    assert (sim.pod_status[:3] == BOUND).sum() == 1  # back at once: one member waits on the free node


def test_victims_are_placed_again_at_once():
    """After a cycle that preempted, the scheduler runs once more at the same instant: H (8
    GPUs, priority 100) evicts L and M (4 GPUs each, priority 0) from n0 at 600 s; n1 has 4
    GPUs free beside N (priority 200), so one of them runs there from 600 s, not from the next
    event. Victims pending again at once are those of the older simplification (`job_backoff:
    false`) and a Deployment's; a Job's wait out its backoff (tests/test_job_backoff.py)."""
    t = trace([{"job_id": "L", "gpu_count": 4}, {"job_id": "M", "gpu_count": 4},
               {"job_id": "N", "gpu_count": 4, "priority": 200},
               {"job_id": "H", "gpu_count": 8, "priority": 100, "submit_s": 600.0}])
    cl = nodes(2)
    sim = Simulation(compile_workload(t, cl), cl, seed=0, horizon_s=601.0, job_backoff=False)
    loop = preempting()
    loop.attach(sim)
    sim.advance_to(0.0)
    for p, n in ((0, 0), (1, 0), (2, 1)):  # the scene: L and M on n0, N on n1
        sim.bind(p, n, np.arange(4 * (p % 2), 4 * (p % 2) + 4) if n == 0 else np.arange(4))
    sim.advance_to(600.0)
    loop.step(sim, 600.0)
    assert sim.pod_status[3] == RUNNING and sim.pod_node[3] == 0
    assert sorted(sim.pod_status[:2].tolist()) == [PENDING, RUNNING]
    assert sim.pod_node[:2].max() == 1 and np.nanmax(sim.pod_start[:2]) == 600.0


class Fifo:
    """A QueueSort in submission order only (none ships: a test of the failure cache)."""

    def key(self, w, j):
        return (float(w.job_submit[j]),)


def test_a_failure_holds_only_at_the_priority_it_was_met():
    """Within a cycle a pod shape that found no node is not scanned again; with preemption the
    failure holds only at the failing job's priority. Queue in FIFO order: A (priority 0) finds
    neither room nor a victim among pods of priority 50; B (priority 100, same shape, after it)
    must still preempt."""
    t = trace([{"job_id": "V", "gpu_count": 8, "priority": 50},
               {"job_id": "A", "gpu_count": 8, "submit_s": 10.0},
               {"job_id": "B", "gpu_count": 8, "priority": 100, "submit_s": 20.0}])
    cl = nodes(1)
    sim = Simulation(compile_workload(t, cl), cl, seed=0, horizon_s=30.0)
    sched = Scheduler(LeastAllocated(), queue_sort=Fifo(), post_filter=DefaultPreemption())
    sched.attach(sim)
    sim.advance_to(0.0)
    sched.cycle(0.0)
    sim.advance_to(20.0)  # A and B arrive; one cycle tries both, A first
    sched.cycle(20.0)
    assert sim.pod_status.tolist() == [PENDING, PENDING, RUNNING]


def test_a_preempting_loop_is_no_second_baseline():
    """Reports pick the all-off separate loops as the baseline: the preempting variant names
    its switch, so it is a variant beside it, not a second baseline."""
    assert [s.name for s in preempting().describe().switches] == ["preemption"]
    plain = SeparateLoops(Scheduler(LeastAllocated()), ClusterAutoscaler(scale_down=ScaleDown()))
    assert plain.describe().switches == ()


@pytest.mark.parametrize("loop", sorted(p.stem for p in (Path(__file__).parents[1] / "conf" / "loop").glob("*.yaml")))
def test_only_the_preemption_loop_preempts(loop):
    """Results must not move this round: every shipped loop but separate_preemption builds a
    scheduler that never evicts (DefaultPreemption is on in upstream's default profile)."""
    from hydra.utils import instantiate

    cfg = compose("config", [f"loop={loop}"])
    built = instantiate(cfg.loop, _convert_="all")
    built = getattr(built, "inner", built)  # behind an admission layer: the loop it admits to
    scheduler = getattr(built, "scheduler", None) or built.placer
    assert scheduler.preempts == (loop == "separate_preemption")


def test_reports_show_the_preemption_metrics():
    """compare and report tables list the catalogue's metrics present in a run's row."""
    from harness.summary import catalogue

    t = trace([{"gpu_count": 8}])
    row, _ = run(t, nodes(1), preempting(), horizon_s=10.0)
    shown = {m.column: m.header for m in catalogue(row)}
    assert shown["preemptions"] == "preemptions ↓"
    assert shown["preempted_accel_hours_lost"] == "work lost to preemption (h) ↓"
