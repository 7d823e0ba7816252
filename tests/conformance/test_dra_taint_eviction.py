"""Upstream's device taint eviction controller, translated: kubernetes/kubernetes
pkg/controller/devicetainteviction/device_taint_eviction_test.go, TestController. Upstream's
claim is allocated device `instance` of driver `test.example.com` on the node; here a pod with
the translated claim of one GPU holds gpu-0 of a two-GPU node from 0, a DeviceTaintRule
(NoExecute) comes at 100 s on the devices it selects, and the pod is deleted (evicted) at the
eviction time upstream's state records, or never."""

from __future__ import annotations

import pytest

from harness.cluster import Cluster
from tests import scenarios as sc

TAINT = {"key": "example.com/taint", "value": "taint-value", "effect": "NoExecute"}


def run(selector: dict) -> tuple[dict, object]:
    cl = Cluster(node_types=[sc.node_type("two", gpus=2, nvlink_domains=1, numa_domains=1)],
                 pools=[sc.pool("a", "two", min_size=1, max_size=1)], autoscaling=False, name="conformance",
                 dra={"taint_rules": [{"at_s": 100.0, "taint": TAINT, **selector}]})
    return sc.run(sc.trace([{"duration_s": 1000.0}]), cl, sc.separate(), horizon_s=3000.0)


@pytest.mark.parametrize(("case", "selector", "evicted_at"), [
    # the rule selects another device than the claim's (ruleEvictOther): no eviction time
    ("untainted-claim", {"device": "gpu-1"}, None),
    # ruleEvict selects by driver: the claim's eviction time is the taint's timeAdded
    ("tainted-claim-through-rule", {"driver": "gpu.nvidia.com"}, 100.0),
    # the pod using the claim is deleted at that time
    ("evict-pod-rule", {"driver": "gpu.nvidia.com", "device": "gpu-0"}, 100.0),
])
def test_controller(case, selector, evicted_at):
    row, sim = run(selector)
    if evicted_at is None:
        assert row["taint_evictions"] == 0 and sim.job_finished[0] == 1000.0
        return
    assert row["taint_evictions"] == 1
    assert row["taint_evicted_accel_hours_lost"] == pytest.approx(evicted_at / 3600.0)


def claim(*tolerations: dict) -> dict:
    """A claim template of one GPU whose request has these tolerations."""
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
                                                                 "tolerations": list(tolerations)}}]}}


OTHER_20 = {"key": "example.com/taint-other", "operator": "Equal", "value": "taint-value", "effect": "NoExecute",
            "tolerationSeconds": 20}
EXISTS = {"operator": "Exists", "effect": "NoExecute"}


@pytest.mark.parametrize(("case", "tolerations", "evicted_at"), [
    # the claim is allocated after the taint came (upstream: the slice is tainted before the
    # claim and the pod are added): evicted at the taint's time + the least tolerationSeconds
    # of the tolerations that match (20 s is for another key)
    ("evict-pod-later-many", [OTHER_20, {**EXISTS, "tolerationSeconds": 60}, {**EXISTS, "tolerationSeconds": 30}],
     130.0),
    # a toleration without tolerationSeconds holds the device for good, even beside one with
    ("no-evict-pod-toleration-forever", [EXISTS], None),
    ("no-evict-pod-toleration-forever-many", [{**EXISTS, "tolerationSeconds": 60}, EXISTS], None),
])
def test_controller_pod_scheduled_after_the_taint(case, tolerations, evicted_at):
    # the rule comes at 100 s on gpu-0; the pod arrives at 110 and takes gpu-0 (first fit: its
    # request tolerates the taint, the allocator ignores tolerationSeconds); the run stops at
    # 135, before its job's pod-failure backoff (10 s) would bring it back
    cl = Cluster(node_types=[sc.node_type("two", gpus=2, nvlink_domains=1, numa_domains=1)],
                 pools=[sc.pool("a", "two", min_size=1, max_size=1)], autoscaling=False, name="conformance",
                 dra={"taint_rules": [{"at_s": 100.0, "taint": TAINT, "device": "gpu-0"}],
                      "claims": {"tol": claim(*tolerations)}})
    row, sim = sc.run(sc.trace([{"duration_s": 1000.0, "submit_s": 110.0, "claim": "tol"}]), cl, sc.separate(),
                      horizon_s=135.0)
    if evicted_at is None:  # it keeps gpu-0
        assert row["taint_evictions"] == 0 and sim.pod_start[0] == 110.0 and list(sim.pod_gpus[0]) == [0]
        return
    assert row["taint_evictions"] == 1
    assert row["taint_evicted_accel_hours_lost"] == pytest.approx((evicted_at - 110.0) / 3600.0)
