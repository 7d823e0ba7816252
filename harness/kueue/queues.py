"""The `kueue:` section of the cluster YAML: ResourceFlavors, ClusterQueues, LocalQueues.

As Kueue's objects, trimmed to what admission reads:

    kueue:
      resource_flavors:               # a flavor is a set of the cluster's pools
        - {name: h100-nvl, pools: [nvl-reserved, nvl-ondemand],
           topology: [block, rack, node]}   # its Topology's levels, top first (optional)
      cluster_queues:
        - name: research
          cohort: shared              # null: borrows and lends nothing
          queueing_strategy: BestEffortFIFO   # or StrictFIFO (Kueue's default: BestEffortFIFO)
          flavors:                    # tried in this order (Kueue's flavor assigner)
            - {name: h100-nvl, nominal: {gpu: 64, cpu: 1024, memory: 8192},
               borrowing_limit: {gpu: 32}, lending_limit: {gpu: 16}}
          preemption:                 # Kueue's ClusterQueuePreemption (all Never by default)
            within_cluster_queue: LowerPriority   # Never | LowerPriority | LowerOrNewerEqualPriority
            reclaim_within_cohort: Any            # Never | LowerPriority | Any
            borrow_within_cohort: {policy: LowerPriority, max_priority_threshold: 0}  # or Never
      local_queues:                   # the trace's `queue` column names a LocalQueue
        - {name: research, cluster_queue: research}

Quotas are per flavor and resource: `gpu` in GPUs (a share counts its fraction), `cpu` in
cores, `memory` in GiB, each at most MAX_QUOTA. A resource a flavor does not list is not covered by it: a job that
requests some cannot use that flavor (Kueue: "cannot borrow resource not listed in
clusterQueue"). A limit left out is no limit: a ClusterQueue may borrow all its cohort
lends, and lends all its nominal quota. Only a ClusterQueue in a cohort may set limits
(Kueue's validation). A flavor's `topology` lists the levels of the Topology it names (Kueue
TAS, harness/kueue/tas.py), a top-down sub-sequence of the cluster's block > rack > node;
without it the flavor has no topology.
`borrow_within_cohort` needs a `reclaim_within_cohort` other than Never (its CEL rule). Bad input
is refused by key, value and rule (harness.errors.ConfigError).
"""

from __future__ import annotations

import numbers
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.errors import ConfigError, finite, shown

#: the resources a quota counts, and the factor from the YAML's unit to the simulation's
#: (GPUs -> GPU milli, cores -> CPU milli, GiB -> MiB)
RESOURCES = ("gpu", "cpu", "memory")
SCALE = np.array([1000.0, 1000.0, 1024.0])
#: The most a quota or limit may be, in the YAML's unit: far beyond any cluster, and small
#: enough that scaled and summed over a cohort it stays a finite, exact float.
MAX_QUOTA = 1_000_000_000
#: Kueue's priorities are int32, as the trace's
PRIORITIES = (-2**31, 2**31 - 1)
STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
#: the topology levels of every cluster, top first: a node's block, its rack, the node
LEVELS = ("block", "rack", "node")
WITHIN_CLUSTER_QUEUE = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM_WITHIN_COHORT = ("Never", "LowerPriority", "Any")
BORROW_WITHIN_COHORT = ("Never", "LowerPriority")


@dataclass(frozen=True)
class Preemption:
    """A ClusterQueue's preemption policies (harness/kueue/preemption.py reads them);
    `max_priority_threshold` None: no bound below the preemptor's own priority."""

    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None

    @property
    def enabled(self) -> bool:
        return (self.within_cluster_queue, self.reclaim_within_cohort, self.borrow_within_cohort) != ("Never",) * 3


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    cohort: str | None
    strict_fifo: bool
    flavors: tuple[int, ...]  # indices into Kueue.flavor_names, in the order they are tried
    preemption: Preemption = Preemption()


@dataclass(frozen=True)
class Kueue:
    """The parsed section. Quota arrays are [cluster queue, flavor, resource] in the
    simulation's units; `covered` says which (flavor, resource) a queue lists; a missing
    limit is inf."""

    flavor_names: tuple[str, ...]
    flavor_pools: np.ndarray  # [flavor, pool] bool
    flavor_levels: tuple[tuple[str, ...], ...]  # each flavor's topology levels, top first (): none
    cluster_queues: tuple[ClusterQueue, ...]
    local_queues: dict[str, int]  # LocalQueue name -> cluster queue index
    nominal: np.ndarray
    covered: np.ndarray
    borrowing_limit: np.ndarray
    lending_limit: np.ndarray

    @property
    def cohort(self) -> np.ndarray:
        """Cohort number of each cluster queue (-1: none)."""
        names = sorted({cq.cohort for cq in self.cluster_queues if cq.cohort is not None})
        return np.array([names.index(cq.cohort) if cq.cohort is not None else -1 for cq in self.cluster_queues],
                        np.int64)


def _list(value, where: str) -> list:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(where, f"expected a list, got {shown(value)}")
    return list(value)


def _map(value, where: str, known: tuple[str, ...], required: tuple[str, ...] = ()) -> dict:
    if not isinstance(value, Mapping):
        raise ConfigError(where, f"expected a mapping of keys to values, got {shown(value)}")
    unknown = sorted(set(map(str, value)) - set(known))
    if unknown:
        raise ConfigError(where, f"unknown key '{unknown[0]}' (known: {', '.join(known)})")
    for key in required:
        if key not in value:
            raise ConfigError(where, f"missing required key '{key}'")
    return dict(value)


def _name(value, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(where, f"expected a non-empty name, got {shown(value)}")
    return value


def _unique(names: list[str], where: str, what: str) -> None:
    twice = [n for n, k in Counter(names).items() if k > 1]
    if twice:
        raise ConfigError(where, f"{what} names must be unique, got {shown(twice[0])} twice")


def _amounts(value, where: str, allowed: tuple[str, ...]) -> dict[str, float]:
    amounts = _map(value, where, allowed)
    for key, x in amounts.items():
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not (finite(x) and 0 <= float(x) <= MAX_QUOTA):
            raise ConfigError(f"{where}.{key}", f"must be a number >= 0 and at most {MAX_QUOTA:,}, got {shown(x)}")
    return {k: float(v) for k, v in amounts.items()}


def _choice(value, where: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(where, f"must be one of {', '.join(allowed)}, got {shown(value)}")
    return value


def _preemption(cfg, where: str) -> Preemption:
    """A ClusterQueue's `preemption:` block; a key left out is upstream's default, Never."""
    cfg = _map(cfg, where, ("within_cluster_queue", "reclaim_within_cohort", "borrow_within_cohort"))
    within = _choice(cfg.get("within_cluster_queue", "Never"), f"{where}.within_cluster_queue", WITHIN_CLUSTER_QUEUE)
    reclaim = _choice(cfg.get("reclaim_within_cohort", "Never"), f"{where}.reclaim_within_cohort",
                      RECLAIM_WITHIN_COHORT)
    borrow = _map(cfg.get("borrow_within_cohort") or {}, f"{where}.borrow_within_cohort",
                  ("policy", "max_priority_threshold"))
    policy = _choice(borrow.get("policy", "Never"), f"{where}.borrow_within_cohort.policy", BORROW_WITHIN_COHORT)
    threshold = borrow.get("max_priority_threshold")
    lo, hi = PRIORITIES
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, numbers.Integral)
                                  or not lo <= int(threshold) <= hi):
        raise ConfigError(f"{where}.borrow_within_cohort.max_priority_threshold",
                          f"must be an integer priority in [{lo:,}, {hi:,}], got {shown(threshold)}")
    if policy != "Never" and reclaim == "Never":
        raise ConfigError(f"{where}.borrow_within_cohort.policy",
                          f"{policy} needs reclaim_within_cohort other than Never (Kueue's validation)")
    return Preemption(within, reclaim, policy, None if threshold is None else int(threshold))


def parse_kueue(cfg, pools: list[str], where: str = "cluster.kueue") -> Kueue:
    """The validated `kueue:` section of a cluster whose pools are named `pools`."""
    cfg = _map(cfg, where, ("resource_flavors", "cluster_queues", "local_queues"),
               ("resource_flavors", "cluster_queues", "local_queues"))
    flavors: list[str] = []
    flavor_pools = []
    flavor_levels = []
    for i, f in enumerate(_list(cfg["resource_flavors"], f"{where}.resource_flavors")):
        at = f"{where}.resource_flavors[{i}]"
        f = _map(f, at, ("name", "pools", "topology"), ("name", "pools"))
        flavors.append(_name(f["name"], f"{at}.name"))
        members = _list(f["pools"], f"{at}.pools")
        if not members:
            raise ConfigError(f"{at}.pools", "a flavor needs at least one pool")
        for p in members:
            if p not in pools:
                raise ConfigError(f"{at}.pools", f"unknown pool {shown(p)} (known: {', '.join(pools)})")
        flavor_pools.append(np.isin(pools, members))
        flavor_levels.append(_levels(f.get("topology"), f"{at}.topology"))
    _unique(flavors, f"{where}.resource_flavors", "flavor")
    queues = _list(cfg["cluster_queues"], f"{where}.cluster_queues")
    if not queues:
        raise ConfigError(f"{where}.cluster_queues", "Kueue admission needs at least one ClusterQueue")
    shape = (len(queues), len(flavors), len(RESOURCES))
    nominal, covered = np.zeros(shape), np.zeros(shape, bool)
    borrowing, lending = np.full(shape, np.inf), np.full(shape, np.inf)
    cqs = []
    for c, q in enumerate(queues):
        at = f"{where}.cluster_queues[{c}]"
        q = _map(q, at, ("name", "cohort", "queueing_strategy", "flavors", "preemption"), ("name", "flavors"))
        name = _name(q["name"], f"{at}.name")
        cohort = q.get("cohort")
        if cohort is not None:
            cohort = _name(cohort, f"{at}.cohort")
        strategy = q.get("queueing_strategy", "BestEffortFIFO")
        if strategy not in STRATEGIES:
            raise ConfigError(f"{at}.queueing_strategy",
                              f"must be one of {', '.join(STRATEGIES)}, got {shown(strategy)}")
        order = []
        entries = _list(q["flavors"], f"{at}.flavors")
        if not entries:
            raise ConfigError(f"{at}.flavors", "a ClusterQueue needs at least one flavor")
        for k, e in enumerate(entries):
            fat = f"{at}.flavors[{k}]"
            e = _map(e, fat, ("name", "nominal", "borrowing_limit", "lending_limit"), ("name", "nominal"))
            if e["name"] not in flavors:
                raise ConfigError(f"{fat}.name", f"unknown flavor {shown(e['name'])} (known: {', '.join(flavors)})")
            f = flavors.index(e["name"])
            if f in order:
                raise ConfigError(f"{fat}.name", f"flavor {shown(e['name'])} is listed twice")
            order.append(f)
            quota = _amounts(e["nominal"], f"{fat}.nominal", RESOURCES)
            for key in ("borrowing_limit", "lending_limit"):
                if e.get(key) and cohort is None:
                    raise ConfigError(f"{fat}.{key}", "only a ClusterQueue in a cohort borrows or lends")
            borrow = _amounts(e.get("borrowing_limit") or {}, f"{fat}.borrowing_limit", tuple(quota))
            lend = _amounts(e.get("lending_limit") or {}, f"{fat}.lending_limit", tuple(quota))
            for r, res in enumerate(RESOURCES):
                if res in quota:
                    covered[c, f, r] = True
                    nominal[c, f, r] = quota[res] * SCALE[r]
                if res in borrow:
                    borrowing[c, f, r] = borrow[res] * SCALE[r]
                if res in lend:
                    if lend[res] > quota[res]:
                        raise ConfigError(f"{fat}.lending_limit.{res}",
                                          f"must be at most the nominal quota ({quota[res]:g}), got {lend[res]:g}")
                    lending[c, f, r] = lend[res] * SCALE[r]
        preemption = _preemption(q.get("preemption") or {}, f"{at}.preemption")
        cqs.append(ClusterQueue(name, cohort, strategy == "StrictFIFO", tuple(order), preemption))
    names = [cq.name for cq in cqs]
    _unique(names, f"{where}.cluster_queues", "ClusterQueue")
    local: dict[str, int] = {}
    for i, lq in enumerate(_list(cfg["local_queues"], f"{where}.local_queues")):
        at = f"{where}.local_queues[{i}]"
        lq = _map(lq, at, ("name", "cluster_queue"), ("name", "cluster_queue"))
        name = _name(lq["name"], f"{at}.name")
        if name in local:
            raise ConfigError(f"{where}.local_queues", f"LocalQueue names must be unique, got {shown(name)} twice")
        if lq["cluster_queue"] not in names:
            raise ConfigError(f"{at}.cluster_queue",
                              f"unknown ClusterQueue {shown(lq['cluster_queue'])} (known: {', '.join(names)})")
        local[name] = names.index(lq["cluster_queue"])
    return Kueue(tuple(flavors), np.array(flavor_pools, bool).reshape(len(flavors), len(pools)),
                 tuple(flavor_levels), tuple(cqs), local, nominal, covered, borrowing, lending)


def _levels(value, where: str) -> tuple[str, ...]:
    """A flavor's topology levels: distinct names of LEVELS, top first (None: no topology)."""
    if value is None:
        return ()
    levels = _list(value, where)
    if not levels or any(x not in LEVELS for x in levels) or levels != sorted(set(levels), key=LEVELS.index):
        raise ConfigError(where, f"must list distinct levels of {' > '.join(LEVELS)}, top first, got {shown(value)}")
    return tuple(levels)
