"""KEDA conformance: upstream cases of kedacore/keda's ScaledObject executor translated to our model.

Each test names the upstream file and test, its inputs and the outcome upstream asserts. Upstream's
executor tests call RequestScale once with `isActive` given; ours sync a KedaScaledObject whose
one trigger is the service's demand (active when above `activation_threshold`), its poll due at
the time of the sync; where upstream's case is a code path with no unit test of its own, the
test cites the function. docs/conformance.md lists every case considered.
"""

from __future__ import annotations

import numpy as np

from harness.services.replicas import KedaScaledObject

ACTIVE, INACTIVE = 50.0, 0.0  # demand of one service whose replica serves 100 (target 70)


def keda(lo: int = 0, hi: int = 100, **kw) -> KedaScaledObject:
    k = KedaScaledObject(**kw)
    k.attach(np.array([100.0]), np.array([lo]), np.array([hi]))
    return k


def sync(k: KedaScaledObject, now: float, current: int, demand: float) -> int:
    return int(k.sync(now, np.array([current]), np.array([demand]))[0])


def request_scale(current: int, demand: float, lo: int = 0, **kw) -> int:
    """One RequestScale, as upstream's executor tests call it: the ScaledObject's HPA synced
    (same input) 30 s before with a one-hour period, so that only the executor's poll is due."""
    k = keda(lo=lo, sync_period_s=3600.0, **kw)
    sync(k, -30.0, current, demand)
    return sync(k, 0.0, current, demand)


def test_scale_to_min_replicas_when_not_active():
    """kedacore/keda pkg/scaling/executor/scale_scaledobjects_test.go
    TestScaleToMinReplicasWhenNotActive: minReplicaCount 0, 10 replicas, triggers not active, no
    LastActiveTime -> scaled to 0 at once (the cooldown counts from a last active time there is
    none of)."""
    assert request_scale(10, INACTIVE, lo=0) == 0


def test_scale_to_min_replicas_from_lower_initial_replica_count():
    """kedacore/keda pkg/scaling/executor/scale_scaledobjects_test.go
    TestScaleToMinReplicasFromLowerInitialReplicaCount: minReplicaCount 5, 1 replica, not active
    -> 5 (the ScaledObject's minimum is restored by the executor; the HPA would agree)."""
    assert request_scale(1, INACTIVE, lo=5) == 5


def test_scale_from_min_replicas_when_active():
    """kedacore/keda pkg/scaling/executor/scale_scaledobjects_test.go
    TestScaleFromMinReplicasWhenActive: minReplicaCount 0, 0 replicas, active -> 1; an HPA
    syncing in the same instant sees 1 replica serving 50 against 70 and keeps 1."""
    assert request_scale(0, ACTIVE, lo=0) == 1
    assert sync(keda(lo=0), 0.0, 0, ACTIVE) == 1


def test_scale_from_zero_to_min_replica_count():
    """kedacore/keda pkg/scaling/executor/scale_scaledobjects.go scaleFromZero(OrIdle): active at 0
    -> minReplicaCount when it is above 0 (TestScaleFromIdleToMinReplicasWhenActive asserts 5 for
    minReplicaCount 5, from an idleReplicaCount of 0, which we do not model). Here the service's
    min_replicas is 0 and the ScaledObject's min_replica_count 3: 0 -> 3."""
    assert request_scale(0, ACTIVE, lo=0, min_replica_count=3) == 3


def test_scale_to_zero_waits_for_the_cooldown_period():
    """kedacore/keda pkg/scaling/executor/scale_scaledobjects.go scaleToZero(OrIdle): inactive with
    replicas and minReplicaCount 0 -> 0 only once LastActiveTime + cooldownPeriod is before now,
    else "ScaleTarget cooling down". Polls every 30 s, cooldown 300 s, last active at the poll at
    60: still 1 at the polls up to 360 (60 + 300 is not before 360), 0 at the poll at 390."""
    k, current, replicas = keda(lo=0), 1, {}
    for t in np.arange(0.0, 421.0, 15.0):  # the replicas follow the desired count at once
        current = replicas[t] = sync(k, t, current, ACTIVE if t <= 60 else INACTIVE)
    assert all(replicas[t] == 1 for t in replicas if t < 390)
    assert replicas[390.0] == 0 and replicas[405.0] == 0


def test_activation_threshold_is_strictly_exceeded():
    """kedacore/keda pkg/scalers/prometheus_scaler.go GetMetricsAndActivity (as every metric scaler):
    the trigger is active when the value is above activationThreshold, `val >
    activationThreshold`. Threshold 20: a demand of 20 leaves the service at 0, 20.5 wakes it."""
    k = keda(lo=0, activation_threshold=20.0)
    assert sync(k, 0.0, 0, 20.0) == 0
    assert sync(k, 30.0, 0, 20.5) == 1


def test_executor_acts_only_at_its_polling_interval():
    """kedacore/keda pkg/scaling/scale_handler.go startScaleLoop: the executor runs RequestScale
    every pollingInterval (30 s by default). Demand arriving at 1 s while at 0 wakes the service at
    the poll at 30 s, not before (the HPA's syncs in between leave a target at 0 alone)."""
    k = keda(lo=0)
    assert sync(k, 0.0, 0, INACTIVE) == 0
    assert k.next_sync(0.0) == 15.0
    assert sync(k, 15.0, 0, ACTIVE) == 0, "an HPA sync only: scaling disabled at 0 replicas"
    assert k.next_sync(15.0) == 30.0
    assert sync(k, 30.0, 0, ACTIVE) == 1


def test_hpa_min_replicas_is_at_least_one_while_active():
    """kedacore/keda controllers/keda/hpa.go getHPAMinReplicas: the HPA KEDA creates has
    minReplicas = minReplicaCount if above 0, else 1: between polls an active service at 3
    replicas with a tiny demand is scaled down by the HPA to 1, never to 0 (only the executor,
    after the cooldown, goes to 0)."""
    k = keda(lo=0, scale_down_stabilization_s=0.0)
    assert sync(k, 0.0, 3, 0.001) == 1
