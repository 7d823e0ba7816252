"""The replica autoscalers (harness/services/replicas.py) beyond the upstream cases: their settings
and configs, their cadence, that one instance over many services is many instances over one, and
two properties of any demand: the desired count stays within the service's bounds, and a
constant demand converges to a count that then stays."""

from __future__ import annotations

import inspect
import numbers
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from harness.config import describe
from harness.errors import ConfigError
from harness.services.replicas import HorizontalPodAutoscaler, KedaScaledObject
from harness.settings import SettingError, check_config, rule_for, walk

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "conf" / "replicas").glob("*.yaml"))
AUTOSCALERS = [p for p in CONFIGS if p.stem != "none"]  # none.yaml: no replica autoscaler (replicas=none)
HPA = "harness.services.replicas.HorizontalPodAutoscaler"
KEDA = "harness.services.replicas.KedaScaledObject"


# ---- configs and settings ---------------------------------------------------------------------
@pytest.mark.parametrize("path", AUTOSCALERS, ids=lambda p: p.stem)
def test_a_replicas_config_is_valid_builds_and_every_leaf_has_a_rule(path):
    cfg = OmegaConf.create({"replicas": OmegaConf.load(path)})
    check_config(cfg)
    unruled = [s.key for s in walk(cfg) if s.rule is None and isinstance(s.value, numbers.Number | str)
               and s.key != "replicas._target_"]
    assert not unruled, unruled
    built = instantiate(cfg.replicas)
    assert type(built).__name__ == {"hpa": "HorizontalPodAutoscaler", "keda": "KedaScaledObject"}[path.stem]
    default = type(built)()
    assert (built.up, built.down, built.tolerance, built.sync_period_s) == \
        (default.up, default.down, default.tolerance, default.sync_period_s), "the YAML says the defaults"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_a_replicas_config_says_what_it_is_in_its_first_line(path):
    text = describe(path)
    assert text.endswith((".", ")")) and len(text) <= 100, text


@pytest.mark.parametrize("cls, target", [(HorizontalPodAutoscaler, HPA), (KedaScaledObject, KEDA)])
def test_every_constructor_parameter_has_a_rule(cls, target):
    for p in inspect.signature(cls).parameters.values():
        if p.kind is p.VAR_KEYWORD:
            continue
        leaf = (p.name, "0", "0") if p.name.endswith("_policies") else (p.name,)
        assert rule_for(target, leaf) is not None, p.name


#: constructor keyword, bad value -> the start of the one-line error
BAD = {
    ("sync_period_s", 0): "replicas.sync_period_s = 0: must be a number >= 1",
    ("tolerance", 1.0): "replicas.tolerance = 1.0: must be a number in [0, 1)",
    ("tolerance", -0.1): "replicas.tolerance = -0.1: must be a number in [0, 1)",
    ("target_utilization", 0): "replicas.target_utilization = 0: must be a number in (0, 1]",
    ("target_utilization", 1.5): "replicas.target_utilization = 1.5: must be a number in (0, 1]",
    ("scale_down_stabilization_s", 3601): "replicas.scale_down_stabilization_s = 3601: must be a number in [0, 3,600]",
    ("scale_up_stabilization_s", -1): "replicas.scale_up_stabilization_s = -1: must be a number in [0, 3,600]",
    ("scale_up_select", "max"): "replicas.scale_up_select = 'max': must be one of Max, Min, Disabled",
    ("scale_down_select", None): "replicas.scale_down_select = None: must be one of Max, Min, Disabled",
    ("scale_up_policies", (("Pods", 0, 15),)): "replicas.scale_up_policies[0][1] = 0: must be an integer >= 1",
    ("scale_up_policies", (("Pods", 2.5, 15),)): "replicas.scale_up_policies[0][1] = 2.5: must be an integer >= 1",
    ("scale_down_policies", (("Percent", 10, 0),)): "replicas.scale_down_policies[0][2] = 0: must be a number in (0, 1,800]",
    ("scale_down_policies", (("Replicas", 10, 15),)): "replicas.scale_down_policies[0][0] = 'Replicas': must be one of Pods, Percent",
    ("scale_down_policies", (("Pods", 1),)): "replicas.scale_down_policies[0] = ('Pods', 1): must be [type, value, period_s]",
    ("scale_up_policies", ()): "replicas.scale_up_policies = (): must be a non-empty list of [type, value, period_s]",
    ("scale_up_policies", 4): "replicas.scale_up_policies = 4: must be a non-empty list of [type, value, period_s]",
    ("polling_interval_s", 0.5): "replicas.polling_interval_s = 0.5: must be a number >= 1",
    ("cooldown_period_s", -1): "replicas.cooldown_period_s = -1: must be a number >= 0",
    ("activation_threshold", float("nan")): "replicas.activation_threshold = nan: must be a number >= 0",
    ("min_replica_count", -1): "replicas.min_replica_count = -1: must be an integer >= 0",
    ("min_replica_count", 1.5): "replicas.min_replica_count = 1.5: must be an integer >= 0",
}


@pytest.mark.parametrize("key, value", list(BAD), ids=[f"{k}={v!r}" for k, v in BAD])
def test_a_bad_setting_is_refused_in_one_line(key, value):
    keda_only = key in ("polling_interval_s", "cooldown_period_s", "activation_threshold", "min_replica_count")
    for cls in (KedaScaledObject,) if keda_only else (HorizontalPodAutoscaler, KedaScaledObject):
        with pytest.raises(SettingError) as e:
            cls(**{key: value})
        assert str(e.value).startswith(BAD[key, value]) and "\n" not in str(e.value), str(e.value)


def test_a_bad_setting_in_a_config_is_refused_by_its_key():
    cfg = OmegaConf.create({"replicas": OmegaConf.load(ROOT / "conf" / "replicas" / "keda.yaml")})
    cfg.replicas.scale_up_policies[1][2] = 3600
    with pytest.raises(SettingError, match=r"^replicas\.scale_up_policies\[1\]\[2\] = 3600: must be a number in "
                                           r"\(0, 1,800\] \(seconds of a scale-up policy's sliding period"):
        check_config(cfg)


def test_a_min_replica_count_above_a_service_s_max_is_refused():
    k = KedaScaledObject(min_replica_count=3)
    with pytest.raises(SettingError, match=r"^replicas\.min_replica_count = 3: exceeds the max_replicas of 1 "
                                           r"service\(s\) \(KEDA refuses minReplicaCount > maxReplicaCount\)$"):
        k.attach(np.array([1.0, 1.0]), np.array([0, 0]), np.array([2, 5]))


def test_mismatched_arrays_are_refused():
    h = HorizontalPodAutoscaler()
    with pytest.raises(ConfigError, match="one capacity, min and max per service"):
        h.attach(np.ones(2), np.ones(3, int), np.ones(2, int))
    h.attach(np.ones(2), np.ones(2, int), np.full(2, 9))
    with pytest.raises(ConfigError, match=r"sync got \(3,\) replica counts for \(2,\) services"):
        h.sync(0.0, np.ones(3, int), np.ones(3))


# ---- cadence ----------------------------------------------------------------------------------
def test_between_two_syncs_the_counts_are_returned_unchanged():
    """The HPA acts at its sync period only: a call in between (the engine waking for another
    loop) changes nothing and records nothing."""
    h = HorizontalPodAutoscaler(scale_down_stabilization_s=0.0)
    h.attach(np.array([10.0]), np.array([1]), np.array([100]))
    assert h.next_sync(0.0) == 0.0
    assert h.sync(0.0, np.array([1]), np.array([70.0])).tolist() == [5], "1 + 4 pods (> 100%)"
    assert h.next_sync(3.0) == 15.0
    assert h.sync(3.0, np.array([5]), np.array([1.0])).tolist() == [5]
    assert len(h._events.t) == 1, "the scale-up at 0 only"
    assert h.sync(15.0, np.array([5]), np.array([1.0])).tolist() == [1]


def test_the_recommendation_is_the_count_before_the_rate_limits():
    """What a planner integrated with the HPA reads (`recommended`): demand 70 on a target of
    7 asks ceil(70 / 7) = 10 replicas; the scale-up policies let 1 -> 5 now. The recommendation
    stays 10 until a sync changes it, never below the desired count; a service KEDA put to
    zero recommends 0."""
    h = HorizontalPodAutoscaler(scale_down_stabilization_s=0.0)
    h.attach(np.array([10.0, 10.0]), np.array([1, 1]), np.array([8, 100]))
    desired = h.sync(0.0, np.array([1, 1]), np.array([70.0, 70.0]))
    assert desired.tolist() == [5, 5]
    assert h.recommended(desired).tolist() == [8, 10], "within [min, max]"
    assert h.recommended(np.array([9, 0])).tolist() == [9, 0]


def test_keda_wakes_at_the_earlier_of_its_two_clocks():
    k = KedaScaledObject(polling_interval_s=20.0, sync_period_s=15.0)
    k.attach(np.array([10.0]), np.array([0]), np.array([10]))
    k.sync(0.0, np.array([0]), np.array([0.0]))
    assert [k.next_sync(0.0), k.next_sync(15.0)] == [15.0, 15.0]
    k.sync(15.0, np.array([0]), np.array([0.0]))
    assert k.next_sync(15.0) == 20.0


def test_the_history_is_bounded_by_the_longest_window():
    """Recommendations older than both windows and events older than every policy period are
    forgotten: two hours of syncs keep at most 300 s / 15 s + 1 rows (+1 for the initial one)."""
    h = HorizontalPodAutoscaler()
    h.attach(np.array([1.0]), np.array([1]), np.array([50]))
    current = np.array([1])
    for i, t in enumerate(np.arange(0.0, 7200.0, 15.0)):
        current = h.sync(t, current, np.array([10.0 + 9 * (i % 3)]))
    assert len(h._recs.t) <= 21 and len(h._events.t) <= 1


# ---- many services at once are many services one by one ----------------------------------------
def _replay(model, capacity, lo, hi, start, demand, period_s=5.0):
    """Desired counts over time with the replicas following them at once; demand[k] is the
    demand (one per service) observed at the k-th step."""
    model.attach(capacity, lo, hi)
    current, out = start.copy(), []
    for k, d in enumerate(demand):
        current = model.sync(k * period_s, current, d)
        out.append(current)
    return np.array(out)


@pytest.mark.parametrize("cls", [HorizontalPodAutoscaler, KedaScaledObject])
def test_one_instance_over_many_services_is_many_instances_over_one(cls):
    rng = np.random.default_rng(7)
    n, steps = 8, 240
    capacity = rng.uniform(10, 1000, n)
    lo = rng.integers(0, 3, n)
    hi = lo + rng.integers(1, 40, n)
    start = np.clip(rng.integers(0, 20, n), np.maximum(lo, 1), hi)
    bursts = rng.random((steps, n)) < 0.05
    demand = np.where(bursts, rng.uniform(0, 30, (steps, n)), rng.uniform(0, 3, (steps, n))) * capacity
    demand[rng.random((steps, n)) < 0.2] = 0.0  # idle spells, for KEDA's scale to zero
    kw = {"scale_up_policies": (("Pods", 2, 30.0), ("Percent", 50, 60.0)), "scale_down_stabilization_s": 120.0}
    together = _replay(cls(**kw), capacity, lo, hi, start, demand)
    for i in range(n):
        alone = _replay(cls(**kw), capacity[i:i + 1], lo[i:i + 1], hi[i:i + 1], start[i:i + 1], demand[:, i:i + 1])
        assert np.array_equal(together[:, i], alone[:, 0]), i
    assert len(np.unique(together)) > 10, "the services did scale"


# ---- properties ------------------------------------------------------------------------------
service = st.tuples(st.floats(1.0, 1e4), st.integers(0, 5), st.integers(1, 200))  # capacity, min, extra to max
demands = st.lists(st.floats(0.0, 1e6, allow_subnormal=False), min_size=1, max_size=40)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(service, demands, st.integers(1, 300), st.booleans())
def test_the_desired_count_stays_within_the_bounds(svc, series, start, keda):
    """Whatever the demand: the HPA keeps a service within [max(1, min), max]; KEDA within that
    or at 0 (a service at 0 that nobody wakes stays there)."""
    capacity, lo, extra = svc
    hi = max(1, lo) + extra
    model = KedaScaledObject() if keda else HorizontalPodAutoscaler()
    counts = _replay(model, np.array([capacity]), np.array([lo]), np.array([hi]),
                     np.array([min(start, hi)]), np.array(series)[:, None], period_s=15.0)[:, 0]
    inside = (counts >= max(1, lo)) & (counts <= hi)
    assert (inside | ((counts == 0) & keda & (lo == 0))).all(), counts


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(service, st.floats(0.0, 1e6, allow_subnormal=False), st.integers(1, 300), st.booleans())
def test_a_constant_demand_converges_and_then_stays(svc, demand, start, keda):
    """A constant demand, the replicas following the desired count at once: after the
    scale-down window, the cooldown and the policies' steps (30 min is ample: up doubles or adds 4
    per 15 s) the count reaches one that then stays, the one the demand asks for (ceil(demand /
    target) within the bounds) unless the count it came to is within the tolerance."""
    capacity, lo, extra = svc
    hi = max(1, lo) + extra
    model = KedaScaledObject() if keda else HorizontalPodAutoscaler()
    counts = _replay(model, np.array([capacity]), np.array([lo]), np.array([hi]),
                     np.array([min(start, hi)]), np.full((160, 1), demand), period_s=15.0)[:, 0]
    settled = counts[120:]
    assert (settled == settled[0]).all(), counts
    target = int(0.7 * capacity * 1000)
    asked = min(max(-(-int(demand * 1000) // max(target, 1)), max(1, lo)), hi)
    if keda and lo == 0 and demand <= 0.0:
        asked = 0
    ratio = demand * 1000 / (target * settled[0]) if settled[0] else float("inf")
    assert settled[0] == asked or abs(ratio - 1) <= 0.1, (settled[0], asked, ratio)
