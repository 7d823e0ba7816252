"""Golden tests of kube-scheduler's gang scheduling (harness/scheduler/pod_group.py), numbers
worked out by hand in each docstring. The scheduler alone on fixed 8-GPU nodes."""

from __future__ import annotations

import pytest

from harness.metrics import MILLI_HOUR
from harness.scheduler import Scheduler
from harness.scheduler.pod_group import GangScheduling
from harness.scheduler.preemption import DefaultPreemption
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.status import PENDING, RUNNING
from harness.workload import compile_workload
from tests.conformance.test_gang_scheduling import SchedulerOnly
from tests.scenarios import cluster, node_type, pool, trace


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
