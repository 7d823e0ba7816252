"""Golden tests of kube-scheduler's gang scheduling (harness/scheduler/pod_group.py), and of
every gang plugin when a gang's pods arrive apart, numbers worked out by hand in each
docstring. The scheduler alone on fixed 8-GPU nodes."""

from __future__ import annotations

import pytest

from harness.metrics import MILLI_HOUR, jobs_frame, nodes_frame, summary_row
from harness.scheduler import Scheduler
from harness.scheduler.pod_group import GangScheduling
from harness.scheduler.preemption import DefaultPreemption
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.status import PENDING, RUNNING
from harness.workload import compile_workload
from tests.conformance.test_gang_scheduling import SchedulerOnly
from tests.scenarios import GANG, cluster, node_type, pool, trace


def replay(pods: list[dict], nodes: int, horizon_s: float, preemption: bool = False, **settings):
    cl = cluster([node_type("g8")], [pool(f"n{i}", "g8", min_size=1, max_size=1) for i in range(nodes)],
                 autoscaling=False)
    sim = Simulation(compile_workload(trace(pods), cl), cl, seed=0, horizon_s=horizon_s)
    post_filter = DefaultPreemption() if preemption else None
    plugin = GangScheduling(**settings)
    sim.run(SchedulerOnly(Scheduler(LeastAllocated(), gang=plugin, post_filter=post_filter)))
    return sim, plugin


def job(sim, name: str) -> int:
    return list(sim.w.job_id).index(name)


def test_a_low_gang_is_preempted_whole_and_its_work_counted():
    """Two 8-GPU nodes. `low`: a gang of 2 x 8 GPUs, priority 10, runs from t=0, one pod per
    node. At t=100 `high`, a gang of 2 x 4 GPUs, priority 100, finds no room: the group preempts
    as one unit. With `low` removed it fits (one pod per node, LeastAllocated); given back,
    `low` leaves no room, so it is a victim, whole (its member on the other node too).
    Lost work: 2 pods x 8 GPUs x 100 s = 1,600 GPU-s = 0.444 GPU-h; one preemption, one job."""
    pods = [{"job_id": "low", "min_member": 2, "gpu_count": 8, "priority": 10, "duration_s": 1e6}] * 2 + \
           [{"job_id": "high", "min_member": 2, "gpu_count": 4, "priority": 100, "submit_s": 100.0}] * 2
    sim, _ = replay(pods, nodes=2, horizon_s=200.0, preemption=True)
    high, low = job(sim, "high"), job(sim, "low")
    assert sim.job_started[high] == 100.0 and sim.pod_status[sim.w.job_pods[high]].tolist() == [RUNNING] * 2
    assert sim.pod_status[sim.w.job_pods[low]].tolist() == [PENDING] * 2
    assert sim.acct.job_preemptions[low] == 1 and sim.acct.job_preemptions.sum() == 1
    assert sim.acct.preempted_lost / MILLI_HOUR == pytest.approx(1600 / 3600)


def test_a_gang_rejected_whole_backs_off_and_binds_when_a_node_frees():
    """One 8-GPU node held by `a` (8 GPUs) until t=30. `g`, a gang of 2 x 4 GPUs, is rejected
    at t=0 and binds nothing.
    With SchedulerPopFromBackoffQ (upstream's default) the group is popped as soon as nothing
    else waits; a retry over the unchanged node would fail, so the next try is when the node
    frees: both bind at t=30, one rejection in all.
    Without it the group waits out each back-off in the backoff queue, retried at its end even
    with nothing changed (min(1 s * 2^(n-1), 10 s * sqrt(2)), aligned down to whole seconds):
    rejected at 0 (-> 1), 1 (-> 3), 3 (-> 7), 7 (-> 15), 15 (-> 29.14: 29), 29 (-> 43.14: 43);
    the node frees at 30 while it backs off, so it binds at t=43 after six rejections."""
    pods = [{"job_id": "a", "gpu_count": 8, "duration_s": 30.0, "priority": 1000},
            {"job_id": "g", "min_member": 2, "gpu_count": 4}, {"job_id": "g", "min_member": 2, "gpu_count": 4}]
    for pop, start, rejections in ((True, 30.0, 1), (False, 43.0, 6)):
        sim, plugin = replay(pods, nodes=1, horizon_s=100.0, pop_from_backoff_queue=pop)
        g = job(sim, "g")
        assert (sim.job_started[g], plugin.rejections[g]) == (start, rejections)
        assert (sim.pod_epoch == 0).all()  # no member bound and then released


# ---- pods of one job arriving apart: each gang plugin holds the gang for its quorum ----------
def replay_gang(gang: str, pods: list[dict], horizon_s: float) -> tuple[Simulation, dict, object]:
    """The pods on one fixed 8-GPU node under the gang plugin `gang` (scenarios.GANG):
    the simulation, its metrics row and the plugin."""
    cl = cluster([node_type("g8")], [pool("n0", "g8", min_size=1, max_size=1)], autoscaling=False)
    sim = Simulation(compile_workload(trace(pods), cl), cl, seed=0, horizon_s=horizon_s)
    plugin = GANG[gang]()
    sim.run(SchedulerOnly(Scheduler(LeastAllocated(), gang=plugin)))
    return sim, summary_row(sim, jobs_frame(sim), nodes_frame(sim), {}).to_dicts()[0], plugin


HOLDING = ["workload", "coscheduling", "atomic"]


def apart(min_member: int, submits: list[float]) -> list[dict]:
    """Gang g of one 2-GPU pod per submit time, running 1,000 s."""
    return [{"job_id": "g", "min_member": min_member, "gpu_count": 2, "submit_s": t, "duration_s": 1000.0}
            for t in submits]


@pytest.mark.parametrize("gang", HOLDING)
def test_a_gang_waits_for_its_last_pod_then_binds_whole(gang):
    """Gang g, minCount 3: two 2-GPU pods at t=0, the third at t=100; the 8-GPU node has room
    for all three from t=0. GangScheduling and Atomic keep the gang out of the queue
    (PreEnqueue), Coscheduling refuses it at PreFilter: no member binds before t=100, so no
    GPU is held for it (gang_wait idle 0). At t=100 all three bind and start: start latency
    100 - 0 = 100 s (from the job's arrival, its first pod). The two early pods wait 100 s each
    with room free: 200 s pending for gang_wait. GangScheduling never rejects the group: it
    had no pod-group cycle before its quorum existed."""
    sim, row, plugin = replay_gang(gang, apart(3, [0.0, 0.0, 100.0]), horizon_s=200.0)
    g = sim.w.job_pods[0]
    assert sim.pod_start[g].tolist() == [100.0] * 3 and (sim.pod_epoch == 0).all()  # none bound, then released
    assert row["idle_accel_hours_gang_wait"] == 0.0
    assert row["gang_latency_max_s"] == 100.0 and row["pending_s_gang_wait"] == 200.0
    if isinstance(plugin, GangScheduling):
        assert plugin.rejections[0] == 0


def test_without_a_gang_plugin_the_early_pods_hold_their_gpus():
    """The same gang under gang=none: the two early pods bind at t=0 and hold 2 x 2 GPUs for
    100 s while waiting for the third: 400 GPU-s = 0.111 GPU-h of gang_wait idle; the gang
    still starts at t=100 (latency 100 s)."""
    sim, row, _ = replay_gang("none", apart(3, [0.0, 0.0, 100.0]), horizon_s=200.0)
    assert row["idle_accel_hours_gang_wait"] == pytest.approx(400 / 3600)
    assert row["gang_latency_max_s"] == 100.0


@pytest.mark.parametrize("gang", HOLDING)
def test_a_gang_binds_at_its_quorum_and_its_late_member_alone(gang):
    """Gang g of 3, minCount 2: pods at t=0, 50 and 100, room for all from t=0. The first
    waits alone (50 s pending, gang_wait); at t=50 the second arrives, quorum exists, both
    bind and start (latency 50 - 0 = 50 s); at t=100 the third binds alone and runs at once
    (the gang started). Nothing is held without running: gang_wait idle 0."""
    sim, row, _ = replay_gang(gang, apart(2, [0.0, 50.0, 100.0]), horizon_s=200.0)
    assert sim.pod_start[sim.w.job_pods[0]].tolist() == [50.0, 50.0, 100.0]
    assert sim.job_started[0] == 50.0 and row["gang_latency_max_s"] == 50.0
    assert row["pending_s_gang_wait"] == 50.0 and row["idle_accel_hours_gang_wait"] == 0.0


@pytest.mark.parametrize("gang", ["coscheduling", "workload"])
def test_pods_of_a_job_that_is_no_gang_run_from_their_own_arrival(gang):
    """Job j of three pods, min_member 1 (no gang), submitted at t=0, 50 and 100: each binds
    and starts when it arrives; the job's submission is its first pod's (t=0)."""
    pods = [{"job_id": "j", "gpu_count": 2, "submit_s": t, "duration_s": 1000.0} for t in (0.0, 50.0, 100.0)]
    sim, _, _ = replay_gang(gang, pods, horizon_s=200.0)
    assert sim.pod_start[sim.w.job_pods[0]].tolist() == [0.0, 50.0, 100.0]
    assert sim.w.job_submit[0] == 0.0 and sim.job_started[0] == 0.0
