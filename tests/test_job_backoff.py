"""The Job controller's pod-failure backoff (harness/job_backoff.py) in replays: golden runs by
hand, the bind-time NoExecute eviction it makes finite, `job_backoff: false`, and an invariant
over random failure schedules. Upstream's own cases are in tests/conformance/test_job_backoff.py.

The golden node is tests/test_dra_taints.py's: one static node of two GPUs (gpu-0, gpu-1),
every pod one whole GPU for 3,600 s unless said; NoExecute device taints (DeviceTaintRules)
evict pods at chosen times, and the scheduler steps at each event, so a pod let in again is
bound at that instant.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.job_backoff import delay_s, next_record
from harness.kueue.loop import KueueLoop
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.services.loop import ReplicaLoop
from harness.services.replicas import HorizontalPodAutoscaler
from harness.sim import Simulation
from harness.status import EVENT_NAMES, PENDING, RUNNING, Event, PendingReason
from harness.workload import compile_workload
from tests import scenarios as sc
from tests.test_dra_taints import FAILURES, taint, tolerating, two_gpus
from tests.test_kueue import HOUR, job, kueue, queue, started, static_cluster
from tests.test_kueue_preemption import preempting
from tests.test_services_golden import ONE, one_node


def on(device: str, at_s: float, until_s: float) -> dict:
    return taint("NoExecute", at_s=at_s, until_s=until_s, device=device)


def events(sim: Simulation) -> list[tuple[float, str, int, int]]:
    """Record the decision trace as (time, event, pod, job); call before the run."""
    log: list[tuple[float, str, int, int]] = []
    sim.hooks.event.append(lambda kind, pod, job, node, detail: log.append((sim.now, EVENT_NAMES[kind], pod, job)))
    return log


def replay(pods: list[dict], *rules: dict, horizon_s: float = 3 * HOUR, job_backoff: bool = True, **claims):
    cl = two_gpus(*rules, **claims)
    sim = Simulation(compile_workload(sc.trace(pods), cl), cl, seed=0, horizon_s=horizon_s, job_backoff=job_backoff)
    log = events(sim)
    sim.run(sc.separate())
    row = summary_row(sim, jobs_frame(sim), nodes_frame(sim), {}).to_dicts()[0]
    return row, sim, log


def queued_at(log, j: int = 0) -> list[float]:
    return [t for t, kind, _, job_ in log if kind == "queued" and job_ == j]


def test_a_job_evicted_three_times_waits_10_then_20_then_40_s():
    # p runs on gpu-0 from 0. gpu-0 tainted 100-200: evicted at 100 (1 failure), back at 110 on
    # gpu-1; gpu-1 tainted 300-400: evicted at 300 (2 failures: 20 s), back at 320 on gpu-0;
    # gpu-0 tainted 500-600: evicted at 500 (3: 40 s), back at 540 on gpu-1, runs its 3,600 s:
    # done at 4,140. Work lost: 100 + (300 - 110) + (500 - 320) = 470 GPU-s. Pending for the
    # backoff 10 + 20 + 40 = 70 s, nothing else.
    row, sim, log = replay([{}], on("gpu-0", 100, 200), on("gpu-1", 300, 400), on("gpu-0", 500, 600))
    assert queued_at(log) == [0.0, 110.0, 320.0, 540.0]
    assert [t for t, kind, _, _ in log if kind == "preempted"] == [100.0, 300.0, 500.0]
    assert sim.job_started[0] == 540.0 and sim.job_finished[0] == 4140.0
    assert row["taint_evictions"] == 3 and row["taint_evicted_accel_hours_lost"] == pytest.approx(470 / 3600)
    assert row["pending_s_job_backoff"] == 70.0 and row["pending_s_shortage"] == 0.0
    assert sim.job_backoff.failures[0] == 0  # its success at 4,140 forgot the three


def test_a_success_in_between_forgets_the_failures():
    # one job of two independent pods: a (1,000 s) on gpu-0, b on gpu-1, from 0. gpu-1 tainted
    # 100-150: b evicted at 100 (1 failure), back at 110, but gpu-0 is a's and gpu-1 tainted:
    # it waits (shortage) until 150 and runs on gpu-1. a succeeds at 1,000: the record is
    # forgotten. gpu-1 tainted 2,000-2,100: b evicted at 2,000 is the first failure since, so
    # back at 2,010 (not 2,020), on gpu-0: done at 5,610.
    pods = [{"job_id": "j", "duration_s": 1000.0}, {"job_id": "j"}]
    row, sim, log = replay(pods, on("gpu-1", 100, 150), on("gpu-1", 2000, 2100))
    assert queued_at(log) == [0.0, 110.0, 2010.0]
    assert sim.pod_start[1] == 2010.0 and sim.pod_end[1] == 5610.0 and sim.pod_end[0] == 1000.0
    pending = {k: v for k, v in row.items() if k.startswith("pending_s_")}
    assert pending.pop("pending_s_job_backoff") == 10.0 + 10.0 and sum(pending.values()) == 40.0  # 110-150


def test_a_success_ends_a_wait_at_once():
    # the same job; b evicted at 100 by a taint until 2,000, and a (now 105 s) succeeds at 105,
    # inside b's 10 s: the record is forgotten and b comes back at 105, then waits for a
    # device (gpu-0 is free from 105: it runs there from 105)
    pods = [{"job_id": "j", "duration_s": 105.0}, {"job_id": "j"}]
    row, sim, log = replay(pods, on("gpu-1", 100, 2000))
    assert queued_at(log) == [0.0, 105.0]
    assert sim.pod_start[1] == 105.0 and row["pending_s_job_backoff"] == 5.0


def test_the_delay_doubles_to_its_cap():
    assert [delay_s(n) for n in range(9)] == [0, 10, 20, 40, 80, 160, 320, 600, 600]


def test_a_service_replica_comes_back_at_once_a_batch_pod_after_its_backoff():
    # a batch pod and the service's one replica both run on the 8-GPU node at 100; both are
    # evicted: the replica (a Deployment's: its ReplicaSet recreates it at once) is queued
    # again at once, the batch pod's job waits 10 s out of the queue
    sim = sc.service_sim([{"duration_s": 10_000.0}], [ONE], {"svc": [(0.0, 50.0)]}, one_node(), 100.0)
    sim.run(ReplicaLoop(sc.separate(), HorizontalPodAutoscaler()))
    pods = np.flatnonzero(sim.pod_status == RUNNING)
    replica = int(pods[sim.w.job_service[sim.w.job[pods]] >= 0][0])
    batch = int(pods[sim.w.job_service[sim.w.job[pods]] < 0][0])
    sim.evict(np.array([batch, replica]))
    assert sim.queue.holds[sim.w.job[replica]] and sim.pod_reason[replica] == PendingReason.SHORTAGE
    assert sim.queue.deferred[sim.w.job[batch]] and sim.pod_reason[batch] == PendingReason.JOB_BACKOFF
    sim.advance_to(110.0)
    assert sim.queue.holds[sim.w.job[batch]] and sim.pod_reason[batch] == PendingReason.SHORTAGE


def test_kueue_suspends_a_victim_without_a_failure():
    # tests/test_kueue_preemption.py's golden with a short H: L (8 GPUs) runs from 0; H (8 GPUs,
    # higher priority, 5 s) makes Kueue preempt L at 600 (its Job suspended: its pod deleted
    # without counting as failed) and ends at 605, when L is admitted again and runs at once
    # (a failure would hold it to 610)
    cl = static_cluster(kueue(preempting(queue("q", 8), within_cluster_queue="LowerPriority")))
    trace = sc.trace([{**job("L", "q", 8, 0.0), "priority": 0}, {**job("H", "q", 8, 600.0, 5.0), "priority": 10}])
    row, sim = sc.run(trace, cl, KueueLoop(sc.separate()), horizon_s=3 * HOUR)
    assert started(sim) == {"L": 605.0, "H": 600.0}
    assert row["preemptions"] == 1 and row["pending_s_job_backoff"] == 0.0


def test_off_evicted_pods_pend_again_at_once_and_no_column():
    row, sim, log = replay([{}], on("gpu-0", 100, 200), on("gpu-1", 300, 400), on("gpu-0", 500, 600),
                           job_backoff=False)
    assert queued_at(log) == [0.0]  # never out of the queue: back at 100, 300, 500
    assert sim.job_started[0] == 500.0 and sim.job_finished[0] == 4100.0
    assert "pending_s_job_backoff" not in row and sim.job_backoff is None


# ---- a NoExecute taint the pod tolerates for a while, in force when it is bound -------------
TOLERATES_600 = {"tol": tolerating(tolerationSeconds=600)}


def test_a_pod_bound_under_a_tolerated_taint_is_evicted_when_its_toleration_runs_out_and_flaps():
    # gpu-0 tainted NoExecute 0-2,000; p tolerates it for 600 s and takes gpu-0 at 0 (first
    # fit: the allocator ignores tolerationSeconds). Evicted at 0 + 600 (1 failure), back at
    # 610: gpu-0 again, its toleration long over: evicted at once (2 failures), back at 630,
    # and so on: evicted at 600, 610, 630, 670, 750, 910, 1,230, 1,830 (the 8th wait is capped
    # at 600 s), back at 2,430, the taint gone: runs 2,430-6,030. It ran 600 s in all before;
    # every later bind lasted no time. Backoff waits 10 + 20 + ... + 320 + 600 + 600 = 1,830 s.
    row, sim, log = replay([{"claim": "tol"}], taint("NoExecute", at_s=0.0, until_s=2000.0), **TOLERATES_600)
    evicted = [t for t, kind, _, _ in log if kind == "preempted"]
    assert evicted == [600.0, 610.0, 630.0, 670.0, 750.0, 910.0, 1230.0, 1830.0]
    assert row["taint_evictions"] == 8 and row["jobs_evicted_by_taint"] == 1
    assert row["taint_evicted_accel_hours_lost"] == pytest.approx(600 / 3600)
    assert sim.job_started[0] == 2430.0 and sim.job_finished[0] == 6030.0
    assert row["pending_s_job_backoff"] == 1830.0


def test_a_pod_bound_later_under_a_tolerated_taint_before_its_time_is_evicted_at_its_time():
    # gpu-0 tainted at 1,000 (for good); p arrives at 1,100, takes gpu-0 (tolerated) and is
    # evicted at 1,000 + 600, then flaps: back at 1,610, evicted at once, ... to the horizon
    row, sim, log = replay([{"claim": "tol", "submit_s": 1100.0}], taint("NoExecute", at_s=1000.0),
                           horizon_s=1700.0, **TOLERATES_600)
    assert [t for t, kind, _, _ in log if kind == "preempted"] == [1600.0, 1610.0, 1630.0, 1670.0]
    assert sim.pod_status[0] == PENDING and row["taint_evicted_accel_hours_lost"] == pytest.approx(500 / 3600)


def test_off_a_pod_bound_under_a_tolerated_taint_keeps_its_device():
    # the older simplification: without the backoff, bind-time evictions would loop at one
    # instant, so there are none: the pod bound at 0, after the taint came (events run before
    # arrivals), is never evicted by it and runs 0-3,600
    row, sim, log = replay([{"claim": "tol"}], taint("NoExecute", at_s=0.0, until_s=2000.0), job_backoff=False,
                           **TOLERATES_600)
    assert row["taint_evictions"] == 0 and sim.job_finished[0] == 3600.0


# ---- invariant: every wait is the record's delay ---------------------------------------------
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), rate=st.sampled_from([12.0, 48.0]), n=st.integers(1, 6),
       gang=st.booleans())
def test_each_job_comes_back_exactly_when_its_record_says(seed, rate, n, gang):
    """Random device failures (NoExecute, seeded) on two 2-GPU nodes, n pods (one gang, or
    independent jobs): replaying the decision trace through upstream's record rule
    (`next_record`, `delay_s`: every running pod released from its node a failure, every
    finished pod a success), each job is queued again exactly at its last failure + the delay,
    unless a success came first (then at once). And the run ends."""
    cl = two_gpus(failures={**FAILURES, "rate_per_device_per_day": rate, "repair_s": 300.0}, slots=2)
    pods = [{"job_id": "g" if gang else f"j{i}", "min_member": n if gang else 1, "submit_s": 60.0 * i,
             "duration_s": 900.0} for i in range(n)]
    sim = Simulation(compile_workload(sc.trace(pods), cl), cl, seed=seed, horizon_s=6 * HOUR)
    log: list[tuple[float, int, int, int]] = []
    sim.hooks.event.append(lambda kind, pod, j, node, detail: log.append(
        (sim.now, kind, pod, j if j >= 0 else int(sim.w.job[pod]) if pod >= 0 else -1)))
    sim.run(sc.separate())
    running: set[int] = set()
    record: dict[int, tuple[int, float]] = {}
    due: dict[int, float] = {}  # job -> when it must be queued again
    for t, kind, pod, j in log:
        failures, last = record.get(j, (0, np.nan))
        if kind == Event.STARTED:
            running.add(pod)
        elif kind == Event.RELEASED and pod in running:  # evicted (a gang's members with it)
            running.discard(pod)
            record[j] = next_record(failures, last, (), (t,))
            due[j] = record[j][1] + delay_s(record[j][0])
        elif kind == Event.FINISHED:
            running.discard(pod)
            record[j] = next_record(failures, last, (t,), ())
            if j in due:
                due[j] = min(due[j], t)
        elif kind == Event.QUEUED and j in due:
            assert t == due.pop(j), (j, t)
    assert all(t > sim.horizon or sim.queue.deferred[j] for j, t in due.items())
