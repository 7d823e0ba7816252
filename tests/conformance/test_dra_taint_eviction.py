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
