"""Kueue's ProvisioningRequest admission check (harness/kueue/provisioning.py): golden replays
with hand-computed times, the bad settings, and quiet time staying exact.

The golden cluster autoscales one pool of 8-GPU nodes; J0 is a gang of two 8-GPU pods
(t=0, 1 h) and J1 one 8-GPU pod (t=10, 1 h), both in ClusterQueue q (32 GPUs: quota never
binds). The autoscaler scans every 10 s and processes one request per scan.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.autoscalers.provisioning_request import CHECK_CAPACITY
from harness.cluster import Cluster
from harness.config import compose
from harness.errors import ConfigError
from harness.kueue.loop import KueueLoop
from harness.kueue.provisioning import ProvisioningCheck
from harness.kueue.queues import parse_kueue
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.quiet import NO_TICKS
from harness.replay import build
from harness.settings import SettingError
from harness.sim import Simulation
from harness.status import PendingReason
from harness.workload import compile_workload
from tests import scenarios as sc
from tests.test_invariants import workloads
from tests.test_kueue import HOUR, admissible, job, kueue, queue, started, static_cluster
from tests.test_quiet import bits, quiet_cluster

J0 = [{**job("J0", "q", 8, 0.0), "min_member": 2}] * 2
J1 = job("J1", "q", 8, 10.0)


def full_pool():
    """Two 8-GPU nodes up from the start, no room to grow (min = max = 2)."""
    return Cluster(node_types=[sc.node_type("h8")], autoscaling=True, name="golden",
                   pools=[sc.pool("a", "h8", max_size=2, min_size=2)], kueue=kueue(queue("q", 32)))


def empty_pool(boot_s: float = 300.0):
    """No node at the start; room for two, each booting `boot_s`."""
    return static_cluster(kueue(queue("q", 32)), autoscaling=True, boot_s=boot_s)


def behind_check(**check) -> KueueLoop:
    return KueueLoop(sc.separate(provisioning_request=True), name="separate_kueue_provreq",
                     admission_check=ProvisioningCheck(**check))


# ---- golden ----------------------------------------------------------------------------------
def test_golden_check_capacity_admits_once_the_capacity_exists():
    """check-capacity on the full pool. J0: quota reserved at 0, its request Provisioned by the
    scan at 0 (both nodes free), admitted at 0, bound and started at 0. J1: quota reserved at
    10; its request does not fit (J0 holds both nodes) and the autoscaler retries it after 60 s
    doubling to 600 s (strictly after: failed at 10 -> 80 -> 210 -> 460 -> 950 -> 1560 -> 2170
    -> 2780 -> 3390 -> 4000); J0 ends at 3600, so the try at 4000 Provisions it: admitted,
    bound and started at 4000. J1 waited 3990 s between quota reservation and admission, its
    pod not admitted all along (without the check it would start at 3600)."""
    loop = behind_check(provisioning_class=CHECK_CAPACITY)
    row, sim = sc.run(sc.trace([*J0, J1]), full_pool(), loop, horizon_s=3 * HOUR)
    assert loop.admission_check.reserved_at.tolist() == [0.0, 10.0]
    assert sim.job_admitted.tolist() == [0.0, 4000.0]
    assert started(sim) == {"J0": 0.0, "J1": 4000.0}
    assert loop.admission_check.attempts.tolist() == [1, 1]  # not provisioned is retried by the autoscaler
    assert row["admission_wait_mean_s_q"] == 3990.0 / 2 and row["pending_s_not_admitted"] == 3990.0
    assert row["check_wait_mean_s_q"] == 3990.0 / 2  # reservation to admission: 0 and 3990
    plain_row, plain = sc.run(sc.trace([*J0, J1]), full_pool(), KueueLoop(sc.separate()), horizon_s=3 * HOUR)
    assert started(plain) == {"J0": 0.0, "J1": 3600.0}
    assert not [k for k in plain_row if k.startswith("check_wait")]  # no check, no column


def test_golden_block_admission_counts_a_workload_waiting_on_its_check_as_not_ready():
    """waitForPodsReady with blockAdmission behind check-capacity, on the full pool (2 nodes).
    Upstream (kueue pkg/cache/clusterqueue.go addWorkload) puts every workload with quota
    reserved in WorkloadsNotReady until PodsReady, so one whose check has not passed blocks
    the next reservation too. A (t=0, 8 GPUs): reserved, Provisioned, admitted and started at
    0. B (t=10, a gang of two): reserved at 10; one node is free, so its request fails at 10
    and is retried at 80, 210, 460, 950, 1560, 2170, 2780, 3390, 4000 (60 s doubling to 600,
    strictly after, on the 10 s grid); A ends at 3600, so B is Provisioned, admitted and
    started at 4000. C (t=20, 8 GPUs) cannot even reserve quota while B waits: reserved at
    4000, once B is ready; B holds both nodes, so C's request fails at 4010, 4080, 4210, 4460,
    4950, 5560, 6170, 6780, 7390 and is Provisioned at 8000 (B ended at 7600): started 8000.
    (Counting only admitted workloads as not ready, C was reserved and started at 20.)"""
    a, b, c = job("A", "q", 8, 0.0), [{**job("B", "q", 8, 10.0), "min_member": 2}] * 2, job("C", "q", 8, 20.0)
    loop = KueueLoop(sc.separate(provisioning_request=True), name="separate_kueue_provreq",
                     wait_for_pods_ready=True, block_admission=True,
                     admission_check=ProvisioningCheck(provisioning_class=CHECK_CAPACITY))
    _, sim = sc.run(sc.trace([a, *b, c]), full_pool(), loop, horizon_s=3 * HOUR)
    assert loop.admission_check.reserved_at.tolist() == [0.0, 10.0, 4000.0]
    assert started(sim) == {"A": 0.0, "B": 4000.0, "C": 8000.0}


def test_golden_best_effort_atomic_admits_when_the_scale_up_is_asked():
    """best-effort-atomic on the empty pool (boot 300 s). J0: reserved at 0, the scan at 0 asks
    two nodes at once for it: Provisioned and admitted at 0, the nodes ready at 300, both pods
    bound at 300, started 300. J1: reserved at 10, the scan at 10 asks one more node... none is
    left (max 2, both J0's): not provisioned, retried as above (80, 210, ..., 3390); at 3900
    J0's nodes are free, the try at 4000 Provisions J1 on them: admitted, bound, started at 4000."""
    loop = behind_check()
    _, sim = sc.run(sc.trace([*J0, J1]), empty_pool(), loop, horizon_s=3 * HOUR)
    assert loop.admission_check.reserved_at.tolist() == [0.0, 10.0]
    assert sim.job_admitted.tolist() == [0.0, 4000.0]
    assert [n.ready_at for n in sim.nodes] == [300.0, 300.0]
    assert started(sim) == {"J0": 300.0, "J1": 4000.0}


def test_golden_failed_requests_retry_with_backoff_then_deactivate():
    """check-capacity with noRetry on the full pool: J1's request (attempt 1, reserved at 10)
    is Failed at the scan at 10: Retry, its quota given back, requeued after 60 s (count 1):
    reserved again at 70 (attempt 2), Failed, requeued after 120 s: 190 (attempt 3), after
    240 s: 430 (attempt 4), Failed past backoffLimitCount 3: Rejected, deactivated. It never
    runs; its pod waits not admitted from 10 to the horizon, 7200 - 10 s."""
    loop = behind_check(provisioning_class=CHECK_CAPACITY, no_retry=True)
    row, sim = sc.run(sc.trace([*J0, J1]), full_pool(), loop, horizon_s=2 * HOUR)
    check = loop.admission_check
    assert check.attempts.tolist() == [1, 4] and loop.evictions.tolist() == [0, 3]
    assert check.reserved_at[1] == 430.0 and check.rejected.tolist() == [False, True]
    assert math.isnan(sim.job_started[1]) and loop.adm.flavor[1] == -1  # no quota held
    assert sim.pod_reason[2] == PendingReason.NOT_ADMITTED
    assert row["jobs_not_admitted_q"] == 1 and row["pending_s_not_admitted"] == 2 * HOUR - 10.0
    assert row["check_wait_mean_s_q"] == 0.0  # J0's only: J1 was never admitted


def test_golden_booking_expired_after_admission_is_ignored():
    """best-effort-atomic, one 8-GPU job at 0 on the empty pool whose node boots 800 s: admitted
    at 0; its booking expires (10 min) at the scan at 610 before the pod is bound: the job
    stays admitted, no second request, and it starts at 800 when the node is ready."""
    loop = behind_check()
    _, sim = sc.run(sc.trace([job("J", "q", 8, 0.0)]), empty_pool(boot_s=800.0), loop, horizon_s=2 * HOUR)
    assert sim.job_admitted.tolist() == [0.0] and started(sim) == {"J": 800.0}
    assert loop.admission_check.attempts.tolist() == [1] and loop.evictions.tolist() == [0]


# ---- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize("settings_, key", [
    ({"provisioning_class": "atomic"}, "loop.admission_check.provisioning_class"),
    ({"backoff_limit_count": -1}, "loop.admission_check.backoff_limit_count"),
    ({"backoff_base_s": -60}, "loop.admission_check.backoff_base_s"),
])
def test_a_bad_check_setting_is_refused_by_key(settings_, key):
    with pytest.raises(SettingError) as err:
        ProvisioningCheck(**settings_)
    assert err.value.where == key


def test_no_retry_is_refused_for_best_effort_atomic():
    with pytest.raises(ConfigError, match="loop.admission_check.no_retry: Cluster Autoscaler reads noRetry"):
        ProvisioningCheck(no_retry=True)


def test_the_check_without_an_autoscaler_serving_requests_is_refused():
    loop = KueueLoop(sc.separate(), admission_check=ProvisioningCheck())
    with pytest.raises(ConfigError, match="loop.admission_check: the ProvisioningRequest check needs an autoscaler"):
        sc.run(sc.trace([J1]), full_pool(), loop, horizon_s=HOUR)


def test_the_check_on_a_static_cluster_is_refused():
    with pytest.raises(ConfigError, match="needs an autoscaling cluster"):
        sc.run(sc.trace([J1]), static_cluster(kueue(queue("q", 32))), behind_check(), horizon_s=HOUR)


def test_the_loop_config_builds_the_check_and_refuses_a_bad_value():
    _, loop = build(compose("config", ["loop=separate_kueue_provreq"]))
    assert isinstance(loop.admission_check, ProvisioningCheck) and loop.inner.autoscaler.provisioning_request
    with pytest.raises(SettingError, match="loop.admission_check.backoff_max_s = -1"):
        build(compose("config", ["loop=separate_kueue_provreq", "loop.admission_check.backoff_max_s=-1"]))


# ---- quiet time ------------------------------------------------------------------------------
def replay_behind_check(table, quiet: bool, **check):
    cl = quiet_cluster(True)
    names = [p.name for p in cl.pools]
    cl.kueue = parse_kueue(kueue(queue("default", 4), pools=names), names)
    sim = Simulation(compile_workload(admissible(table, cl), cl), cl, seed=1, horizon_s=6 * HOUR,
                     timeline_interval_s=45.0)
    loop = behind_check(**check)
    if not quiet:
        loop.idle_ticks = lambda start, before: NO_TICKS  # type: ignore[method-assign]
    sim.run(loop)
    jobs, nodes = jobs_frame(sim), nodes_frame(sim)
    return summary_row(sim, jobs, nodes, {}), jobs, nodes, sim.acct.timeline.frame()


CHECKS = [{}, {"provisioning_class": CHECK_CAPACITY}, {"provisioning_class": CHECK_CAPACITY, "no_retry": True}]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=workloads(), check=st.sampled_from(CHECKS))
def test_quiet_ticks_in_bulk_stay_exact_behind_the_check(table, check):
    """The autoscaler's retries and Kueue's requeue backoff are clocks: bulk = stepped."""
    bulk, stepped = (replay_behind_check(table, quiet, **check) for quiet in (True, False))
    for a, b in zip(bulk, stepped, strict=True):
        assert a.columns == b.columns and bits(a) == bits(b)
