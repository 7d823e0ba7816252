"""ProvisioningRequest conformance: upstream's own cases, translated.

Upstream: kubernetes/autoscaler, cluster-autoscaler/provisioningrequest/orchestrator/
orchestrator_test.go `TestScaleUp` (commit 0fc5c402), processors/provreq/processor.go and
processor_test.go, processors/provreq/injector.go. Their cluster, kept as is: 100 nodes
`test-cpu` of 100m CPU / 10 memory in an autoscaled group (size 100, max 150) and 100 nodes
`test-mem` of 1m / 1000 not autoscaled; a request is N pods of one shape. Ours: a request is a
gang (a job of N pods, min_member N); memory units are MiB instead of bytes, which changes no
fit. "ScaleUpNotNeeded" / "ScaleUpSuccessful" of check-capacity = Provisioned with no node
added, "ScaleUpSuccessful" of atomic = Provisioned with nodes added, "ScaleUpNoOptionsAvailable"
= not provisioned, nothing added. Each case drives one autoscaler scan at t=0 on the pending
gang, before any scheduler cycle (upstream's orchestrator sees the request's pods only).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.autoscalers.provisioning_request import CHECK_CAPACITY
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc

CPU_NODE = {"name": "test-cpu", "cpu_milli": 100, "memory_mib": 10, "gpus": 0}
MEM_NODE = {"name": "test-mem", "cpu_milli": 1, "memory_mib": 1000, "gpus": 0}


def upstream_cluster():
    return sc.cluster([CPU_NODE, MEM_NODE], [
        sc.pool("test-cpu", "test-cpu", min_size=100, max_size=150, price_on_demand=1.0),
        sc.pool("test-mem", "test-mem", min_size=100, max_size=100, price_on_demand=1.0)])


def request(name: str, cpu: int, mem: int, count: int, submit_s: float = 0.0) -> list[dict]:
    return [{"job_id": name, "min_member": count, "cpu_milli": cpu, "memory_mib": mem, "gpu_count": 0,
             "gpu_milli": 0, "submit_s": submit_s} for _ in range(count)]


def attach(pods: list[dict], cl=None, **switches):
    """The separate loops on the upstream cluster with these requests arrived at t=0."""
    cl = cl or upstream_cluster()
    sim = Simulation(compile_workload(sc.trace(pods), cl), cl, seed=0, horizon_s=7200.0)
    loop = sc.separate(provisioning_request=True, **switches)
    loop.attach(sim)
    sim.advance_to(0.0)
    return sim, loop.autoscaler


def test_possible_atomic_scale_up_request_triggers_scale_up():
    """orchestrator_test.go TestScaleUp "possible atomic scale-up request triggers scale-up":
    120 pods of 100m/1: 100 fit the test-cpu nodes, the group grows by 20 (max 150):
    ScaleUpSuccessful."""
    sim, ca = attach(request("possibleAtomicScaleUpReq", 100, 1, 120))
    ca.scan(0.0)
    assert 0 in ca.provreq.booked and len(sim.nodes) - 200 == 20
    assert (ca.provreq.booked_for >= 0).sum() == 120  # the 100 existing nodes and the 20 new ones


def test_impossible_atomic_scale_up_request_does_not_trigger_scale_up():
    """TestScaleUp "impossible atomic scale-up request doesn't trigger scale-up": 5001 pods of
    1m/1 (1,100 fit; the rest would need 391 nodes, the group has room for 50):
    ScaleUpNoOptionsAvailable, no partial scale-up."""
    sim, ca = attach(request("impossibleAtomicScaleUpRequest", 1, 1, 5001))
    ca.scan(0.0)
    assert 0 not in ca.provreq.booked and len(sim.nodes) == 200
    assert ca.provreq.failed == {0: 0.0}


def test_capacity_is_there_check_capacity_class():
    """TestScaleUp "capacity is there, check-capacity class": 100 pods of 1m/100 fit the
    test-mem nodes: ScaleUpSuccessful (Provisioned, capacity booked, no node added)."""
    sim, ca = attach(request("newCheckCapacityMemProvReq", 1, 100, 100), provisioning_class=CHECK_CAPACITY)
    ca.scan(0.0)
    assert 0 in ca.provreq.booked and len(sim.nodes) == 200
    assert (ca.provreq.booked_for >= 0).sum() == 100


def test_one_provisioning_request_of_check_capacity_class():
    """TestScaleUp "one ProvisioningRequest of check capacity class": 100 pods of 5m/5 fit
    the test-cpu nodes (two each): ScaleUpSuccessful, no node added."""
    sim, ca = attach(request("newCheckCapacityCpuProvReq", 5, 5, 100), provisioning_class=CHECK_CAPACITY)
    ca.scan(0.0)
    assert 0 in ca.provreq.booked and len(sim.nodes) == 200
    assert (ca.provreq.booked_for >= 0).sum() == 50


def test_one_provisioning_request_of_atomic_scale_up_class():
    """TestScaleUp "one ProvisioningRequest of atomic scale up class": 5 pods of 5m/5 fit
    existing nodes: ScaleUpNotNeeded (Provisioned, CapacityIsFound, no node added)."""
    sim, ca = attach(request("atomicScaleUpProvReq", 5, 5, 5))
    ca.scan(0.0)
    assert 0 in ca.provreq.booked and len(sim.nodes) == 200


def test_capacity_is_there_large_atomic_scale_up_request_does_not_require_scale_up():
    """TestScaleUp "capacity is there, large atomic scale-up request doesn't require scale-up":
    100 pods of 1m/100 fit the test-mem nodes: ScaleUpNotNeeded."""
    sim, ca = attach(request("largeAtomicScaleUpProvReq", 1, 100, 100))
    ca.scan(0.0)
    assert 0 in ca.provreq.booked and len(sim.nodes) == 200


def test_impossible_check_capacity_is_not_provisioned():
    """TestScaleUp "impossible check-capacity, with noRetry parameter": 5001 pods of 1m/1:
    ScaleUpNoOptionsAvailable, nothing added. Upstream marks it Failed (noRetry); ours has no
    noRetry parameter: it is not provisioned and retried after the backoff (different)."""
    sim, ca = attach(request("impossibleCheckCapacityRequest", 1, 1, 5001), provisioning_class=CHECK_CAPACITY)
    ca.scan(0.0)
    assert 0 not in ca.provreq.booked and len(sim.nodes) == 200 and 0 in ca.provreq.failed


def test_check_capacity_never_scales_up():
    """checkcapacity/provisioningclass.go: the class checks the existing cluster only: the
    request "possibleAtomicScaleUpReq" (120 pods of 100m/1, 100 fit) as check-capacity is not
    provisioned and adds no node."""
    sim, ca = attach(request("possibleAtomicScaleUpReq", 100, 1, 120), provisioning_class=CHECK_CAPACITY)
    ca.scan(0.0)
    assert 0 not in ca.provreq.booked and len(sim.nodes) == 200


@pytest.mark.parametrize("provisioning_class", ["best-effort-atomic-scale-up", CHECK_CAPACITY])
def test_some_capacity_is_pre_booked(provisioning_class):
    """TestScaleUp "some capacity is pre-booked, successful capacity check" (newCheckCapacityCpuProvReq,
    check-capacity: ScaleUpSuccessful) and "some capacity is pre-booked, atomic scale-up not
    needed" (atomicScaleUpProvReq: ScaleUpNotNeeded): bookedCapacityProvReq (100 pods of 1m/200,
    Provisioned) holds all 100 test-mem nodes (one pod each, 1m of CPU); the new request's pods
    fit the test-cpu nodes all the same. One request per scan: the booked one at t=0, the new
    one at t=10."""
    pods = request("bookedCapacityProvReq", 1, 200, 100) + request("new", 5, 5, 100)
    sim, ca = attach(pods, provisioning_class=provisioning_class)
    ca.scan(0.0)
    assert set(ca.provreq.booked) == {0}  # one request per loop (GetPodsFromNextRequest)
    assert (ca.provreq.booked_for == 0).sum() == 100
    sim.advance_to(10.0)
    ca.scan(10.0)
    assert set(ca.provreq.booked) == {0, 1} and len(sim.nodes) == 200
    assert not np.isin(ca.provreq.booked_for[ca.provreq.booked[1][1]], [0]).any()  # apart from the booked nodes


def test_booked_capacity_is_not_room_for_other_requests():
    """bookCapacity (processors/provreq/processor.go): a Provisioned request's capacity counts
    as taken in the autoscaler's snapshot. With the 100 test-mem nodes booked (as above), a
    second request of 100 pods of 1m/100 (newCheckCapacityMemProvReq, which alone fits them:
    "capacity is there, check-capacity class") no longer fits: not provisioned."""
    pods = request("bookedCapacityProvReq", 1, 200, 100) + request("newCheckCapacityMemProvReq", 1, 100, 100)
    sim, ca = attach(pods, provisioning_class=CHECK_CAPACITY)
    ca.scan(0.0)
    sim.advance_to(10.0)
    ca.scan(10.0)
    assert set(ca.provreq.booked) == {0} and 1 in ca.provreq.failed


def test_booking_capacity_time_is_expired():
    """processor_test.go TestRefresh "BookingCapacity time is expired " and TestBookCapacity
    ("ProvReq has BookingExpired, capacity should not be booked"): a Provisioned request's
    booking ends once Provisioned + 10 min (defaultReservationTime) is before now: still booked
    at 600 s, expired at the scan at 610; its nodes are free in the autoscaler's snapshot.
    Nothing is pending meanwhile (the gang set aside): the autoscaler still scans while the
    booking lasts (it once stopped, and the booked nodes were never scaled down)."""
    cl = sc.cluster([CPU_NODE], [sc.pool("test-cpu", "test-cpu", min_size=1, max_size=1)])  # the booked node alone
    sim, ca = attach(request("atomicScaleUpProvReq", 5, 5, 2), cl)
    ca.scan(0.0)
    sim.queue.remove(0)
    assert 0 in ca.provreq.booked
    for t in (600.0, 610.0):
        assert ca.next_scan < np.inf  # a scan is due
        sim.advance_to(t)
        ca.scan(t)
        assert (0 in ca.provreq.booked) is (t == 600.0)
        assert ca.scale_down.is_low[0] is np.bool_(t == 610.0)  # kept from scale-down while booked
    assert (ca.provreq.booked_for == -1).all()


def test_booking_is_consumed_when_the_pods_are_scheduled():
    """processor.go bookCapacity: a request all of whose pods are scheduled gets BookingExpired
    (CapacityBookingConsumedReason) and books nothing more, well before the 10 min."""
    sim, ca = attach(request("atomicScaleUpProvReq", 5, 5, 5))
    ca.scan(0.0)
    ca.scheduler.cycle(0.0)  # the scheduler places the gang (it knows nothing of the booking)
    sim.advance_to(10.0)
    ca.scan(10.0)
    assert 0 not in ca.provreq.booked and (ca.provreq.booked_for == -1).all()


def test_not_provisioned_request_retries_after_a_doubling_backoff():
    """injector.go IsAvailableForProvisioning / GetPodsFromNextRequest: a request not
    provisioned is retried once its backoff (defaultRetryTime 1 min) has passed, the backoff
    doubling on every retry up to maxBackoffTime 10 min. The impossible atomic request fails
    at 0, is retried at 70 (first scan more than 60 s later), 200 (+120), 450 (+240), 940
    (+480), then every 610 s (+600, capped)."""
    sim, ca = attach(request("impossibleAtomicScaleUpRequest", 1, 1, 5001))
    tried = []
    for t in np.arange(0.0, 2200.0, 10.0).tolist():
        sim.advance_to(t)
        before = ca.provreq.failed.get(0)
        ca.scan(t)
        if ca.provreq.failed.get(0) != before:
            tried.append(t)
    assert tried == [0.0, 70.0, 200.0, 450.0, 940.0, 1550.0, 2160.0]


def test_one_request_per_loop():
    """injector.go GetPodsFromNextRequest: the pods of ONE request per loop: two requests that
    both need a scale-up are processed at t=0 and t=10, in queue order."""
    pods = request("possibleAtomicScaleUpReq", 100, 1, 120) + request("second", 100, 1, 10)
    sim, ca = attach(pods)
    ca.scan(0.0)
    assert set(ca.provreq.booked) == {0} and len(sim.nodes) == 220
    sim.advance_to(10.0)
    ca.scan(10.0)
    assert set(ca.provreq.booked) == {0, 1} and len(sim.nodes) == 230


def test_the_scheduler_may_place_any_pod_on_booked_nodes():
    """bookCapacity books capacity in the autoscaler's snapshot only, not in the scheduler: a
    pod of another job (arrived at 5 s, the gang set aside) is placed on a booked node."""
    other = {"job_id": "other", "cpu_milli": 100, "memory_mib": 1, "gpu_count": 0, "gpu_milli": 0, "submit_s": 5.0}
    cl = sc.cluster([CPU_NODE], [sc.pool("test-cpu", "test-cpu", min_size=2, max_size=2)])
    sim, ca = attach(request("atomicScaleUpProvReq", 100, 1, 2) + [other], cl)
    ca.scan(0.0)
    assert (ca.provreq.booked_for[:2] == 0).all()
    sim.queue.remove(0)
    sim.advance_to(5.0)
    ca.scheduler.cycle(5.0)
    assert ca.provreq.booked_for[sim.pod_node[2]] == 0
