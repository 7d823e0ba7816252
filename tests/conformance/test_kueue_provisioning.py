"""Kueue's ProvisioningRequest admission check, conformance: upstream's own cases, translated.

Upstream: kubernetes-sigs/kueue, pkg/controller/admissionchecks/provisioning/controller_test.go
`TestReconcile` (commit 68f9d2ae) against controller.go (commit 26b4f0dd) and the
ProvisioningRequestConfig's retryStrategy (apis/kueue/v1beta1/provisioningrequestconfig_types.go,
`ProvisioningRequestRetryStrategy`: backoffLimitCount 3, backoffBaseSeconds 60,
backoffMaxSeconds 1800). Upstream drives one reconcile of a workload with quota reserved and a
request already in a given state; here the request's state comes from our Cluster Autoscaler
on a cluster that makes it so: "full" = two 8-GPU nodes, no room to grow, held 1 h by J0 (a
gang of two 8-GPU pods, t=0); J1 (one 8-GPU pod, t=10) is the workload under test, in
ClusterQueue q (32 GPUs: quota never binds). The check's states map as: Pending = its request
open (`waiting`), Ready = admitted, Retry = quota given back and a requeue counted
(`evictions`, upstream's requeueState.count), Rejected = `rejected` (deactivated).
"""

from __future__ import annotations

import math

from harness.autoscalers.provisioning_request import CHECK_CAPACITY
from harness.cluster import Cluster
from harness.kueue.loop import KueueLoop
from harness.kueue.provisioning import ProvisioningCheck
from tests import scenarios as sc
from tests.test_kueue import job, kueue, queue

J0 = [{**job("J0", "q", 8, 0.0), "min_member": 2}] * 2
J1 = job("J1", "q", 8, 10.0)


def full_pool() -> Cluster:
    return Cluster(node_types=[sc.node_type("h8")], autoscaling=True, name="full",
                   pools=[sc.pool("a", "h8", max_size=2, min_size=2)], kueue=kueue(queue("q", 32)))


def run(pods: list[dict], horizon_s: float, cl: Cluster | None = None, **check):
    loop = KueueLoop(sc.separate(provisioning_request=True), admission_check=ProvisioningCheck(**check))
    _, sim = sc.run(sc.trace(pods), cl or full_pool(), loop, horizon_s=horizon_s)
    return sim, loop, loop.admission_check


def test_with_config_a_request_is_created_per_workload():
    """TestReconcile "with config": a workload with quota reserved gets its request (attempt 1,
    `wl-check1-1`) for all its pods. Every workload, not only gangs: a single pod J1 and the
    gang J0 on a pool with no node (check-capacity never provisions) both have theirs open."""
    cl = Cluster(node_types=[sc.node_type("h8")], autoscaling=True, name="empty",
                 pools=[sc.pool("a", "h8", max_size=2, min_size=0)], kueue=kueue(queue("q", 32)))
    sim, _, check = run([*J0, J1], 60.0, cl, provisioning_class=CHECK_CAPACITY)
    assert check.attempts.tolist() == [1, 1]
    assert [(j, pods.tolist()) for j, pods in check.requests()] == [(0, [0, 1]), (1, [2])]
    assert all(math.isnan(t) for t in sim.job_admitted)  # neither admitted


def test_when_request_is_provisioned():
    """TestReconcile "when request is provisioned": the check becomes Ready: J0, whose request
    fits the free nodes at the scan at 0, is admitted at 0 and its request closed."""
    sim, _, check = run(J0, 60.0, provisioning_class=CHECK_CAPACITY)
    assert sim.job_admitted.tolist() == [0.0] and check.requests() == []


def test_workloads_status_gets_updated_based_on_the_provisioning_request():
    """TestReconcile "workloads status gets updated based on the provisioning request":
    Accepted, Provisioned=False (not provisioned, the autoscaler retries it): the check stays
    Pending. J1 keeps its quota and its open request (no second attempt), not admitted."""
    sim, loop, check = run([*J0, J1], 60.0, provisioning_class=CHECK_CAPACITY)
    assert [j for j, _ in check.requests()] == [1] and check.attempts[1] == 1
    assert loop.adm.flavor[1] >= 0 and loop.evictions[1] == 0


def test_when_request_fails_and_is_retried():
    """TestReconcile "when request fails and is retried" (RetryLimit 2): Failed -> the check
    is Retry and the requeue count is 1. J1's check-capacity request with noRetry is Failed at
    the scan at 10: its quota is given back, one requeue counted, not deactivated."""
    _, loop, check = run([*J0, J1], 30.0, provisioning_class=CHECK_CAPACITY, no_retry=True, backoff_limit_count=2)
    assert loop.evictions[1] == 1 and loop.adm.flavor[1] == -1 and not check.rejected[1]
    assert check.requests() == []


def test_when_request_fails_and_there_is_no_retry():
    """TestReconcile "when request fails, and there is no retry" (RetryLimit 0): Failed -> the
    check is Rejected at once: J1 is deactivated, no requeue counted."""
    _, loop, check = run([*J0, J1], 30.0, provisioning_class=CHECK_CAPACITY, no_retry=True, backoff_limit_count=0)
    assert check.rejected[1] and loop.evictions[1] == 0 and loop.adm.flavor[1] == -1
