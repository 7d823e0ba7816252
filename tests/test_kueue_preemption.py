"""Kueue preemption in a replay (harness/kueue/preemption.py behind KueueLoop): golden runs
with hand-computed numbers, the books staying exact, and runs without preemption unchanged.

The golden clusters are static (two 8-GPU nodes, no autoscaling), as tests/test_kueue.py's, so
every wait is the admission layer's.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.autoscalers.provisioning_request import CHECK_CAPACITY
from harness.cluster import Cluster
from harness.kueue.admission import Admission
from harness.kueue.loop import KueueLoop
from harness.kueue.preemption import KueuePreemption
from harness.kueue.provisioning import ProvisioningCheck
from harness.kueue.queues import parse_kueue
from harness.sim import Simulation
from harness.status import PendingReason
from harness.workload import compile_workload
from tests import scenarios as sc
from tests.test_invariants import workloads
from tests.test_kueue import (
    HOUR,
    admissible,
    assert_books_add_up,
    job,
    kueue,
    queue,
    run_admitted_only,
    started,
    static_cluster,
)
from tests.test_quiet import quiet_cluster


def preempting(q: dict, **policy) -> dict:
    q["preemption"] = policy
    return q


def test_golden_preemption_within_a_cluster_queue():
    """q owns 8 GPUs, withinClusterQueue LowerPriority. L (priority 0, 8 GPUs) is admitted at
    0 and runs; H (priority 10, 8 GPUs) arrives at 600: it does not fit the quota, L is the
    only lower-priority workload, so L is preempted at 600 and H admitted at 600 (the nodes
    have room: H starts at once). L waits in q, not admitted, until H ends at 4200, then runs
    again from scratch: 4200 to 7800. By hand: L lost 600 s x 8 GPUs = 4800 GPU-s = 4/3
    GPU-hours; one preemption; L's one pod waited 4200 - 600 = 3600 s not admitted; both were
    first admitted on arrival (admission waits 0). Fails without the preemption (H waits to
    3600) and with a victim's pods left running (nothing lost)."""
    cl = static_cluster(kueue(preempting(queue("q", 8), within_cluster_queue="LowerPriority")))
    trace = sc.trace([{**job("L", "q", 8, 0.0), "priority": 0}, {**job("H", "q", 8, 600.0), "priority": 10}])
    row, sim = sc.run(trace, cl, KueueLoop(sc.separate()), horizon_s=3 * HOUR)
    assert started(sim) == {"L": 4200.0, "H": 600.0}
    assert dict(zip(sim.w.job_id.tolist(), sim.job_finished.tolist(), strict=True)) == {"L": 7800.0, "H": 4200.0}
    assert row["preemptions"] == 1 and row["jobs_preempted"] == 1
    assert row["preempted_accel_hours_lost"] == pytest.approx(4 / 3, rel=1e-12)
    assert row["pending_s_not_admitted"] == 3600.0
    assert row["admission_wait_mean_s_q"] == 0.0
    assert sim.job_admissions.tolist() == [1, 2]  # jobs in id order: H, L


def test_golden_reclaim_within_a_cohort_takes_a_borrowing_gang_whole():
    """a and b own 4 GPUs each in cohort c; b reclaims (reclaimWithinCohort Any). A1, a gang of
    two 3-GPU pods in a, is admitted at 0 borrowing 2 of b's GPUs. B1 (b, 4 GPUs) arrives at
    900: within b's nominal quota, but the cohort's 8 are drawn 6 + 4 = 10, so b reclaims: A1
    (a borrows) is the only candidate, and it goes whole. B1 runs 900-4500. A1 does not fit
    again (it would draw 10) and a never preempts: set aside until B1's quota comes back at
    4500, then both pods run again 4500-8100. By hand: A1 lost 900 s x 2 pods x 3 GPUs = 5400
    GPU-s = 1.5 GPU-hours; one preemption; its two pods waited 3600 s each not admitted =
    7200 pod-seconds. Fails without the reclaim (B1 waits until 3600, as in test_kueue's
    borrowing case) and with a victim not queued again (A1 never runs again)."""
    section = kueue(queue("a", 4, cohort="c"), preempting(queue("b", 4, cohort="c"), reclaim_within_cohort="Any"))
    gang = [{**job("A1", "a", 3, 0.0), "min_member": 2}] * 2
    row, sim = sc.run(sc.trace([*gang, job("B1", "b", 4, 900.0)]), static_cluster(section),
                      KueueLoop(sc.separate()), horizon_s=3 * HOUR)
    assert started(sim) == {"A1": 4500.0, "B1": 900.0}
    assert dict(zip(sim.w.job_id.tolist(), sim.job_finished.tolist(), strict=True)) == {"A1": 8100.0, "B1": 4500.0}
    assert row["preemptions"] == 1 and row["jobs_preempted"] == 1
    assert row["preempted_accel_hours_lost"] == pytest.approx(1.5, rel=1e-12)
    assert row["pending_s_not_admitted"] == 7200.0
    assert row["admission_wait_mean_s_a"] == 0.0 and row["admission_wait_mean_s_b"] == 0.0


def test_a_workload_admitted_but_not_bound_is_preempted_with_nothing_lost():
    """q owns 16 GPUs of quota, but the cluster's two nodes are full with X (queue r) until
    3600; L (q, priority 0, 16 GPUs as two 8-GPU
    pods) is admitted at 1 but cannot bind; H (q, priority 5, 16 GPUs) arrives at 100 and
    preempts L: a preemption counted, no work lost, L's pods back to not admitted."""
    section = kueue(preempting(queue("q", 16), within_cluster_queue="LowerPriority"), queue("r", 16))
    x = [{**job("X", "r", 8, 0.0)}] * 2
    low = [{**job("L", "q", 8, 1.0), "priority": 0}] * 2
    high = [{**job("H", "q", 8, 100.0), "priority": 5}] * 2
    row, sim = sc.run(sc.trace([*x, *low, *high]), static_cluster(section), KueueLoop(sc.separate()),
                      horizon_s=HOUR / 2)
    assert row["preemptions"] == 1 and row["preempted_accel_hours_lost"] == 0.0
    assert (sim.pod_reason[sim.w.job_pods[1]] == PendingReason.NOT_ADMITTED).all()  # jobs: H, L, X
    assert sim.job_admissions.tolist() == [1, 1, 1]


def test_without_a_preemption_policy_no_preemption_columns_appear():
    """The golden borrowing case of test_kueue with preemption spelled out as all Never
    (upstream's default): nothing is preempted, and the row has no preemption columns (the
    published columns of separate_kueue do not move)."""
    section = kueue(preempting(queue("a", 4, cohort="c"), within_cluster_queue="Never"),
                    preempting(queue("b", 4, cohort="c"), reclaim_within_cohort="Never"))
    row, sim = sc.run(sc.trace([job("A1", "a", 6, 0.0), job("B1", "b", 4, 10.0)]), static_cluster(section),
                      KueueLoop(sc.separate()), horizon_s=4 * HOUR)
    assert started(sim) == {"A1": 0.0, "B1": 3600.0}
    assert not [k for k in row if "preempt" in k]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=workloads(), autoscaling=st.booleans(), ready=st.booleans())
def test_with_preemption_only_admitted_jobs_run_and_the_books_add_up(table, autoscaling, ready):
    """Whatever the workload, with every preemption policy on (two queues in a cohort, each
    owning half a GPU, the jobs split between them, later ones of higher priority): a pod is bound only while its job holds
    quota, no two jobs preempt each other forever at one instant (the run ends), and at the
    end each queue's usage is exactly what its admitted, unfinished jobs ask. The loop
    guard: reclaim Any between two queues of equal standing flaps (each takes the other's
    quota back in turn); it ran forever at one instant before a workload admitted at an
    instant was kept from being preempted at that instant."""
    cl = quiet_cluster(autoscaling)
    names = [p.name for p in cl.pools]
    policy = {"within_cluster_queue": "LowerOrNewerEqualPriority", "reclaim_within_cohort": "Any",
              "borrow_within_cohort": {"policy": "LowerPriority"}}
    section = kueue(preempting(queue("default", 0.5, cohort="c"), **policy),
                    preempting(queue("other", 0.5, cohort="c"), **policy), pools=names)
    cl.kueue = parse_kueue(section, names)
    number = [int(j[1:]) for j in table.column("job_id").to_pylist()]
    table = table.set_column(table.schema.get_field_index("queue"), "queue",
                             pa.array(["other" if k % 2 else "default" for k in number]))
    table = table.set_column(table.schema.get_field_index("priority"), "priority",
                             pa.array([k // 2 % 3 for k in number], pa.int32()))  # later jobs rank higher
    sim = Simulation(compile_workload(admissible(table, cl), cl), cl, seed=1, horizon_s=6 * HOUR)
    loop = KueueLoop(sc.separate(), wait_for_pods_ready=ready)
    run_admitted_only(sim, loop)
    assert_books_add_up(loop)
    assert loop.adm.usage[..., 0].sum() <= 1000 + 1e-6  # never above the cohort's 1 GPU


def test_reclaim_any_between_two_queues_ends_at_one_instant():
    """The flapping the loop guard stops, on the books alone: d and o own half a GPU each in
    one cohort, every policy on. d2 (1 GPU, priority 1) holds the whole cohort since an
    earlier instant; now d0 (0.1 GPU, priority 0) arrives in d, o1 (0.143, priority 0) and o3
    (1 GPU, priority 1) in o. o1 reclaims its share from d2 (Any) and is admitted; then, with
    no guard, o3 would preempt o1 within o while borrowing, d0 reclaim from o3, d2 preempt
    d0, o1 reclaim from d2... each round costs upstream an eviction; here, at one instant, a
    workload admitted at this instant is not preempted, so the cycles settle: o1 and d0 hold
    quota, d2 and o3 wait. Without the guard they never settle."""
    policy = {"within_cluster_queue": "LowerOrNewerEqualPriority", "reclaim_within_cohort": "Any",
              "borrow_within_cohort": {"policy": "LowerPriority"}}
    k = parse_kueue(kueue(preempting(queue("d", 0.5, cohort="c"), **policy),
                          preempting(queue("o", 0.5, cohort="c"), **policy)), ["a"])
    request = np.array([[100.0, 1000, 1024], [143, 1000, 1024], [1000, 1000, 1024], [1000, 1000, 1024]])
    adm = Admission(k, request, np.ones((4, 1), bool), np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1]))
    adm.preemption = KueuePreemption(np.zeros(4))
    adm.push(2, 0.0)
    assert adm.run() == [(2, 0)]
    adm.preemptible_before = adm.n_admitted  # the next instant: KueueLoop.step's line
    for j in (0, 1, 3):
        adm.push(j, 1.0)
    for _ in range(50):
        if not adm.cycle()[1]:
            break
    else:
        raise AssertionError("the admission cycles never settle at one instant")
    assert adm.flavor.tolist() == [0, 0, -1, -1] and adm.evicted == [2]


def test_a_pods_ready_timeout_is_not_a_preemption():
    """test_kueue's waitForPodsReady golden case (one 8-GPU job, its node boots in 800 s,
    evicted at 300 and 660) on a queue that may preempt: the two evictions take a job that
    has not started (nothing ran, nothing is lost), so no preemption is counted."""
    cl = static_cluster(kueue(preempting(queue("q", 8), within_cluster_queue="LowerPriority")), autoscaling=True,
                        boot_s=800.0)
    loop = KueueLoop(sc.separate(), wait_for_pods_ready=True)
    row, sim = sc.run(sc.trace([job("J", "q", 8, 0.0)]), cl, loop, horizon_s=2 * HOUR)
    assert started(sim) == {"J": 800.0} and loop.evictions.tolist() == [2]
    assert row["preemptions"] == 0 and row["preempted_accel_hours_lost"] == 0.0


def test_a_workload_preempted_while_its_provisioning_request_is_open_drops_the_request():
    """Behind the ProvisioningRequest check (check-capacity), on two full 8-GPU nodes: q owns
    24 GPUs and preempts lower priorities. J0 (two 8-GPU pods, priority 0) is admitted and
    runs from 0; J1 (8 GPUs, priority 0) has quota reserved at 10, but its request cannot be
    provisioned while J0 holds the nodes; J2 (8 GPUs, priority 5) arrives at 20 and preempts
    the newer of the two, J1, whose open request is dropped with its quota (nothing ran:
    nothing lost). Without the drop the autoscaler goes on serving a request of a workload
    that holds no quota, and the run fails."""
    cl = Cluster(node_types=[sc.node_type("h8")], autoscaling=True, name="golden",
                 pools=[sc.pool("a", "h8", max_size=2, min_size=2)],
                 kueue=kueue(preempting(queue("q", 24), within_cluster_queue="LowerPriority")))
    j0 = [{**job("J0", "q", 8, 0.0), "min_member": 2, "priority": 0}] * 2
    trace = sc.trace([*j0, {**job("J1", "q", 8, 10.0), "priority": 0}, {**job("J2", "q", 8, 20.0), "priority": 5}])
    sim = Simulation(compile_workload(trace, cl), cl, seed=0, horizon_s=3 * HOUR)
    loop = KueueLoop(sc.separate(provisioning_request=True), name="separate_kueue_provreq",
                     admission_check=ProvisioningCheck(provisioning_class=CHECK_CAPACITY))
    run_admitted_only(sim, loop)
    assert sim.acct.job_preemptions.tolist() == [0, 1, 0] and sim.acct.preempted_lost == 0.0
    assert loop.admission_check.reserved_at[2] == 20.0
