"""Replica autoscaling: kube-controller-manager's HPA and KEDA's ScaledObject on top of it.

A service's replica count follows its demand through the external metric KEDA feeds the HPA:
one metric per service, the demand (units per second), with an AverageValue target of
`target_utilization x capacity_per_replica`. Everything is one array entry per service, so a
sync costs the same few numpy passes whatever the number of services.

What is modelled, after kubernetes/kubernetes pkg/controller/podautoscaler (horizontal.go,
replica_calculator.go) and kedacore/keda pkg/scaling/executor/scale_scaledobjects.go:

- the replica calculator's external per-pod path (GetExternalPerPodMetricReplicas): usage
  ratio = demand / (target x current); within 1 +- tolerance the count stays, else
  ceil(demand / target). Values are milli-quantities truncated as KEDA's GenerateMetricInMili
  and GetMetricTargetMili do, so the ceiling is taken on integers as upstream;
- reconcileAutoscaler's branches: a target at 0 replicas is left alone ("scaling is disabled"),
  one above maxReplicas or below minReplicas is set to the bound at once, otherwise the metric's
  proposal is stabilized and rate-limited (normalizeDesiredReplicasWithBehaviors);
- recordInitialRecommendation: the first sync records the current count as a recommendation,
  so a fresh HPA does not scale down within its first scale-down window;
- stabilizeRecommendationWithBehaviors: the proposal is brought within [min of the proposals
  in the scale-up window, max of those in the scale-down window], both windows counting
  proposals strictly newer than now - window;
- the behaviour policies (calculateScaleUpLimitWithScalingRules, calculateScaleDownLimitWith-
  Behaviors): each policy's period starts at current - added + deleted replicas by this HPA's
  scale events strictly inside the period; Pods adds/removes `value`, Percent multiplies
  (ceil up, truncate down); selectPolicy Max takes the largest change, Min the smallest,
  Disabled none; the limit never reverses the direction;
- KEDA's executor at each polling interval: a service is active when its demand is above the
  activation threshold; active at 0 replicas -> max(1, minReplicaCount); inactive with
  minReplicaCount 0 -> 0 once the last active poll is more than cooldownPeriod ago (at once if
  it never was active); inactive below minReplicaCount -> minReplicaCount. In between, the
  HPA (minReplicas max(1, minReplicaCount)) scales 1..max.

Not modelled: pods not yet ready (the per-pod external path reads no pod), other metric types,
per-direction tolerances (one `tolerance` for both), KEDA's idleReplicaCount, fallback and
paused annotations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.errors import ConfigError
from harness.settings import SettingError, check, duration, integer, number, one_of, period

#: where conf/replicas/*.yaml put the settings (`replicas=hpa|keda`)
WHERE = "replicas"
#: a usage above this many milli-units is capped, as upstream caps its int64 sum
_MAX_MILLI = 2.0 ** 62
_BIG = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Rules:
    """One direction of the HPA's `behavior` (HPAScalingRules): its stabilization window,
    its policies as (type, value, period_s) and its selectPolicy."""

    window_s: float
    policies: tuple[tuple[str, int, float], ...]
    select: str

    @classmethod
    def of(cls, window_s, policies, select, key: str) -> Rules:
        """Rules from settings already checked leaf by leaf; the shape of the policy list is
        checked here (a leaf rule cannot see a policy's length)."""
        shape = "must be a non-empty list of [type, value, period_s] policies"
        if isinstance(policies, str | bytes) or not isinstance(policies, Sequence) or not policies:
            raise SettingError(key, policies, shape)
        for i, p in enumerate(policies):
            if isinstance(p, str | bytes) or not isinstance(p, Sequence) or len(p) != 3:
                raise SettingError(f"{key}[{i}]", p, "must be [type, value, period_s], e.g. [Pods, 4, 15]")
        return cls(float(window_s), tuple((str(t), int(v), float(s)) for t, v, s in policies), str(select))

    def limit(self, current: np.ndarray, events: _Log, now: float, up: bool) -> np.ndarray:
        """The most (up) or fewest (down) replicas the policies allow now, per service."""
        if self.select == "Disabled":
            return current
        proposals = []
        for kind, value, period_s in self.policies:
            changed = events.since(now - period_s)
            added = np.where(changed, np.maximum(events.v, 0), 0).sum(axis=0)
            deleted = np.where(changed, np.maximum(-events.v, 0), 0).sum(axis=0)
            start = current - added + deleted
            if kind == "Pods":
                proposals.append(start + value if up else start - value)
            elif up:  # Percent: rounded up so that a small count can still grow
                proposals.append(np.ceil(start * (1 + value / 100)).astype(np.int64))
            else:  # Percent down: Go's int32() of the product truncates
                proposals.append(np.trunc(start * (1 - value / 100)).astype(np.int64))
        largest_change = (self.select == "Max") == up  # up: more replicas; down: fewer
        return (np.max if largest_change else np.min)(np.stack(proposals), axis=0)

    def longest_period_s(self) -> float:
        return max(p[2] for p in self.policies)


class _Log:
    """Per-service integers stamped with the sync that wrote them (one row per write), read
    through windows `t > now - w` and forgotten once no window can reach them: upstream's
    per-HPA slices of recommendations and of scale events, as arrays."""

    def __init__(self, n: int):
        self.t = np.empty(0)
        self.v = np.empty((0, n), np.int64)
        self.ok = np.empty((0, n), bool)

    def add(self, t: float, v: np.ndarray, ok: np.ndarray) -> None:
        self.t = np.append(self.t, t)
        self.v = np.vstack([self.v, v[None, :]])
        self.ok = np.vstack([self.ok, ok[None, :]])

    def since(self, cutoff: float) -> np.ndarray:
        """Which entries are strictly newer than `cutoff` (upstream's timestamp.After)."""
        return self.ok & (self.t > cutoff)[:, None]

    def forget(self, cutoff: float) -> None:
        keep = self.t > cutoff
        if not keep.all():
            self.t, self.v, self.ok = self.t[keep], self.v[keep], self.ok[keep]


class HorizontalPodAutoscaler:
    """kube-controller-manager's HPA (pkg/controller/podautoscaler), behaviour field included."""

    SETTINGS = {
        "sync_period_s": period("seconds between two HPA syncs (--horizontal-pod-autoscaler-sync-period, 15)"),
        "tolerance": number("a usage ratio within 1 +- this leaves the replicas as they are "
                            "(--horizontal-pod-autoscaler-tolerance, 0.1)", ge=0, lt=1),
        "scale_up_stabilization_s": number("seconds of past proposals whose lowest caps a scale-up "
                                           "(behavior.scaleUp.stabilizationWindowSeconds, 0)", ge=0, le=3600),
        "scale_down_stabilization_s": number("seconds of past proposals whose highest holds a scale-down "
                                             "(behavior.scaleDown.stabilizationWindowSeconds, 300)", ge=0, le=3600),
        "scale_up_select": one_of(("Max", "Min", "Disabled"), "which scale-up policy applies: the largest change, "
                                  "the smallest, or none (behavior.scaleUp.selectPolicy, Max)"),
        "scale_down_select": one_of(("Max", "Min", "Disabled"), "which scale-down policy applies: the largest "
                                    "change, the smallest, or none (behavior.scaleDown.selectPolicy, Max)"),
        **{f"scale_{d}_policies.*.{i}": rule for d in ("up", "down") for i, rule in enumerate((
            one_of(("Pods", "Percent"), f"a scale-{d} policy's type (behavior.scale{d.title()}.policies[].type)"),
            integer(f"replicas, or percent of those at the period's start, a scale-{d} policy allows per "
                    "period (policies[].value)", ge=1),
            number(f"seconds of a scale-{d} policy's sliding period (policies[].periodSeconds)", gt=0, le=1800)))},
        "target_utilization": number("share of capacity_per_replica each replica is sized to serve: the "
                                     "external metric's AverageValue target", gt=0, le=1),
    }

    def __init__(self, *, sync_period_s=15.0, tolerance=0.1,
                 scale_up_stabilization_s=0.0, scale_down_stabilization_s=300.0,
                 scale_up_policies=(("Pods", 4, 15.0), ("Percent", 100, 15.0)), scale_up_select="Max",
                 scale_down_policies=(("Percent", 100, 15.0),), scale_down_select="Max",
                 target_utilization=0.7):
        check(self, WHERE, sync_period_s=sync_period_s, tolerance=tolerance,
              scale_up_stabilization_s=scale_up_stabilization_s,
              scale_down_stabilization_s=scale_down_stabilization_s, scale_up_policies=scale_up_policies,
              scale_up_select=scale_up_select, scale_down_policies=scale_down_policies,
              scale_down_select=scale_down_select, target_utilization=target_utilization)
        self.sync_period_s = float(sync_period_s)
        self.tolerance = float(tolerance)
        self.target_utilization = float(target_utilization)
        self.up = Rules.of(scale_up_stabilization_s, scale_up_policies, scale_up_select,
                           f"{WHERE}.scale_up_policies")
        self.down = Rules.of(scale_down_stabilization_s, scale_down_policies, scale_down_select,
                             f"{WHERE}.scale_down_policies")
        self.attach(np.ones(0), np.zeros(0, np.int64), np.ones(0, np.int64))

    def attach(self, capacity_per_replica: np.ndarray, min_replicas: np.ndarray, max_replicas: np.ndarray) -> None:
        """Start watching these services (one entry each), forgetting any history."""
        capacity = np.asarray(capacity_per_replica, np.float64)
        lo, hi = np.asarray(min_replicas, np.int64), np.asarray(max_replicas, np.int64)
        if not (capacity.ndim == 1 and capacity.shape == lo.shape == hi.shape):
            raise ConfigError(WHERE, f"attach needs one capacity, min and max per service, got shapes "
                                     f"{capacity.shape}, {lo.shape}, {hi.shape}")
        n = len(capacity)
        # the AverageValue target as a milli-quantity (KEDA's GetMetricTargetMili truncates)
        self._target_m = np.maximum(np.trunc(self.target_utilization * capacity * 1000.0), 1).astype(np.int64)
        self._min = np.maximum(lo, 1)  # HPA minReplicas >= 1: scaling to zero is KEDA's
        self._max = hi
        self._recs, self._events = _Log(n), _Log(n)
        self._seen = np.zeros(n, bool)
        self._recommended = np.zeros(n, np.int64)
        self._next_hpa = -np.inf

    def sync(self, now: float, current: np.ndarray, demand: np.ndarray) -> np.ndarray:
        """Desired replicas per service at `now`, from the current replica counts (the
        Deployment's spec.replicas) and the demand observed now; updates its own history
        (recommendations for stabilization, scale events for the policies). Between two of
        its syncs the counts are returned unchanged."""
        current = self._counts(current)
        if now < self._next_hpa:
            return current
        self._next_hpa = now + self.sync_period_s
        return self._reconcile(now, current, np.asarray(demand, np.float64))

    def next_sync(self, now: float) -> float:
        """When the next sync is due (now, before the first)."""
        return max(now, self._next_hpa)

    @property
    def name(self) -> str:
        """What a report calls this setting: `hpa (down 300 s)`, its scale-down window."""
        return f"hpa (down {self.down.window_s:g} s)"

    def recommended(self, desired: np.ndarray) -> np.ndarray:
        """Per service, the last reconcile's stabilized recommendation within [min, max] before
        the scaling policies' rate limits (normalizeDesiredReplicasWithBehaviors: stabilize,
        then convertDesiredReplicasWithBehaviorRate), never below the `desired` count the last
        sync returned; 0 for a service at zero (KEDA's)."""
        return np.where(desired == 0, 0, np.maximum(self._recommended, desired))

    def _counts(self, current) -> np.ndarray:
        current = np.array(current, np.int64)
        if current.shape != self._min.shape:
            raise ConfigError(WHERE, f"sync got {current.shape} replica counts for {self._min.shape} services")
        return current

    def _reconcile(self, now: float, current: np.ndarray, demand: np.ndarray) -> np.ndarray:
        """One reconcileAutoscaler pass over every service."""
        first = ~self._seen
        if first.any():  # recordInitialRecommendation
            self._recs.add(now, current, first)
            self._seen[:] = True
        disabled = current == 0
        above = ~disabled & (current > self._max)
        below = ~disabled & (current < self._min)
        normal = ~(disabled | above | below)
        desired = np.where(above, self._max, np.where(below, self._min, current))
        stabilized = self._stabilize(now, current, self._proposal(current, demand), normal)
        self._recommended = np.where(normal, np.clip(stabilized, self._min, self._max), desired)
        desired = np.where(normal, self._rate_limit(now, current, stabilized), desired)
        change = desired - current
        if change.any():  # storeScaleEvent
            self._events.add(now, change, change != 0)
        self._recs.forget(now - max(self.up.window_s, self.down.window_s))
        self._events.forget(now - max(self.up.longest_period_s(), self.down.longest_period_s()))
        return desired

    def _proposal(self, current: np.ndarray, demand: np.ndarray) -> np.ndarray:
        """GetExternalPerPodMetricReplicas: the count the demand asks for, or the current one
        when the usage ratio is within the tolerance."""
        usage_m = np.trunc(np.minimum(demand * 1000.0, _MAX_MILLI)).astype(np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):  # a disabled service (0 replicas)
            ratio = usage_m / (self._target_m.astype(np.float64) * current)
        within = (1.0 - self.tolerance <= ratio) & (ratio <= 1.0 + self.tolerance)
        return np.where(within, current, -(-usage_m // self._target_m))

    def _stabilize(self, now: float, current: np.ndarray, proposal: np.ndarray, record: np.ndarray) -> np.ndarray:
        """stabilizeRecommendationWithBehaviors; records the proposals of `record` afterwards."""
        recs = self._recs
        up_floor = np.where(recs.since(now - self.up.window_s), recs.v, _BIG).min(axis=0, initial=_BIG)
        down_ceiling = np.where(recs.since(now - self.down.window_s), recs.v, -_BIG).max(axis=0, initial=-_BIG)
        recs.add(now, proposal, record)
        return np.minimum(np.maximum(current, np.minimum(proposal, up_floor)), np.maximum(proposal, down_ceiling))

    def _rate_limit(self, now: float, current: np.ndarray, desired: np.ndarray) -> np.ndarray:
        """convertDesiredReplicasWithBehaviorRate: the policies' limits, then min/max."""
        up, down = desired > current, desired < current
        if up.any():
            ceiling = np.minimum(self._max, np.maximum(self.up.limit(current, self._events, now, True), current))
            desired = np.where(up, np.minimum(desired, ceiling), desired)
        if down.any():
            floor = np.maximum(self._min, np.minimum(self.down.limit(current, self._events, now, False), current))
            desired = np.where(down, np.maximum(desired, floor), desired)
        return desired


class KedaScaledObject(HorizontalPodAutoscaler):
    """KEDA's ScaledObject on top: activation threshold, scale to and from zero, cooldownPeriod."""

    SETTINGS = {
        "polling_interval_s": period("seconds between two KEDA polls of the triggers (pollingInterval, 30)"),
        "cooldown_period_s": duration("seconds after the last active poll before a service goes to zero "
                                      "(cooldownPeriod, 300)"),
        "activation_threshold": number("a service is active, and leaves zero, when its demand is above this "
                                       "(activationThreshold, 0)", ge=0),
        "min_replica_count": integer("minReplicaCount of every service, raised to the service's own "
                                     "min_replicas (0: scale to zero allowed)", ge=0),
    }

    def __init__(self, *, polling_interval_s=30.0, cooldown_period_s=300.0,
                 activation_threshold=0.0, min_replica_count=0, **hpa):
        check(self, WHERE, polling_interval_s=polling_interval_s, cooldown_period_s=cooldown_period_s,
              activation_threshold=activation_threshold, min_replica_count=min_replica_count)
        self.polling_interval_s = float(polling_interval_s)
        self.cooldown_period_s = float(cooldown_period_s)
        self.activation_threshold = float(activation_threshold)
        self.min_replica_count = int(min_replica_count)
        super().__init__(**hpa)

    def attach(self, capacity_per_replica: np.ndarray, min_replicas: np.ndarray, max_replicas: np.ndarray) -> None:
        """Each service's minReplicaCount is the larger of its own min_replicas and
        `min_replica_count`; its HPA gets minReplicas max(1, that)."""
        lo = np.maximum(np.asarray(min_replicas, np.int64), self.min_replica_count)
        hi = np.asarray(max_replicas, np.int64)
        if lo.shape == hi.shape and (lo > hi).any():
            raise SettingError(f"{WHERE}.min_replica_count", self.min_replica_count,
                               f"exceeds the max_replicas of {int((lo > hi).sum())} service(s) "
                               "(KEDA refuses minReplicaCount > maxReplicaCount)")
        super().attach(capacity_per_replica, lo, hi)
        self._keda_min = lo
        self._last_active = np.full(len(lo), -np.inf)  # nil: never active
        self._next_poll = -np.inf

    def sync(self, now: float, current: np.ndarray, demand: np.ndarray) -> np.ndarray:
        """KEDA's poll (when due), then the HPA's sync (when due) on the counts KEDA left."""
        desired = self._counts(current)
        demand = np.asarray(demand, np.float64)
        if now >= self._next_poll:
            self._next_poll = now + self.polling_interval_s
            desired = self._request_scale(now, desired, demand)
        if now >= self._next_hpa:
            self._next_hpa = now + self.sync_period_s
            desired = self._reconcile(now, desired, demand)
        return desired

    def next_sync(self, now: float) -> float:
        return max(now, min(self._next_poll, self._next_hpa))

    @property
    def name(self) -> str:
        """`keda (down 300 s, cooldown 300 s)`: the HPA's scale-down window, KEDA's cooldown."""
        return f"keda (down {self.down.window_s:g} s, cooldown {self.cooldown_period_s:g} s)"

    def _request_scale(self, now: float, current: np.ndarray, demand: np.ndarray) -> np.ndarray:
        """The scale executor's RequestScale for every service at once."""
        active = demand > self.activation_threshold
        zero = current == 0
        self._last_active[active] = now
        cooled = self._last_active + self.cooldown_period_s < now
        wake = zero & active
        sleep = ~active & ~zero & (self._keda_min == 0) & cooled
        lift = ~active & (current < self._keda_min)
        desired = np.where(wake, np.maximum(self._keda_min, 1), current)
        desired = np.where(lift, self._keda_min, desired)
        return np.where(sleep, 0, desired)
