"""Cluster and cloud description: node types with their accelerator shape, and node pools.

A node type says what one machine looks like (CPUs, memory, GPUs, how the GPUs split into
NVLink and NUMA domains, whether each GPU has a NIC on its PCIe switch, which MIG-like
partition profiles it offers, its price). A pool is a node type in a zone and block with a
rack layout, size bounds, committed (reserved) slots, pricing, a seeded provisioning delay,
finite stock (fixed, stepped over time, or redrawn every period from a seeded stream), how the
provider answers a request it cannot fill (`shortage`: at once with an error, or silently with
nodes that never come up), whether it honours all-or-nothing requests, which rack it serves a
compact-placement request from (`compact_rack`, harness/cloud.py), and the least time a node
is billed for (`min_billed_s`); each the cluster's unless the pool sets its own.

Node slots are fixed: pool p owns slots [offset_p, offset_p + max_size_p) of every state
array, slot i of a pool sits in rack i // nodes_per_rack, and the first `committed` slots of
a pool are the reserved ones. A static inventory is a cluster whose pools have
min_size == max_size and autoscaling off.
"""

from __future__ import annotations

import numbers
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.dra.layer import DeviceLayer
from harness.errors import ConfigError, finite, shown
from harness.kueue.queues import parse_kueue
from harness.node_type import NodeType
from harness.trace import MAX_CPU_MILLI, MAX_MEMORY_MIB, MAX_TIME_S

#: Taint effects a pool may carry. NoSchedule and NoExecute keep a pod off a node whose taint
#: it does not tolerate (kube-scheduler's TaintToleration Filter); PreferNoSchedule passes the
#: Filter and only lowers TaintToleration's score, which is not modelled.
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
FILTER_EFFECTS = ("NoSchedule", "NoExecute")
#: What a pod that requests GPUs tolerates: ExtendedResourceToleration admission adds the
#: toleration {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}. Pods carry no other.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TOLERATION = (GPU_TAINT_KEY, "NoSchedule")
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
#: kubectl's taint syntax key[=value]:effect; a key is a qualified name with an optional
#: DNS-subdomain prefix (e.g. nvidia.com/gpu), a value a label value
_TAINT = re.compile(rf"(?P<key>([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME})(=({_NAME})?)?:(?P<effect>\w+)")


def _taint(taint, where: str) -> tuple[str, str]:
    """(key, effect) of a taint `key[=value]:effect`, else a ConfigError."""
    m = _TAINT.fullmatch(taint) if isinstance(taint, str) else None
    if m is None or m["effect"] not in TAINT_EFFECTS:
        raise ConfigError(where, f"{shown(taint)}: a taint must read key[=value]:effect, e.g. "
                          f"{GPU_TAINT_KEY}=present:NoSchedule, with effect one of {', '.join(TAINT_EFFECTS)}")
    return m["key"], m["effect"]


@dataclass(frozen=True)
class BootDelay:
    """Provisioning delay in seconds, uniform in [min_s, max_s], drawn from the pool's seeded stream."""

    min_s: float = 300.0
    max_s: float = 300.0


#: How a provider answers a request beyond its stock: `error` returns at once with what it
#: granted (the big clouds' insufficient-capacity error); `silent` accepts every node asked (up
#: to the pool's free slots) but only what stock allows ever comes up: the rest boot forever.
SHORTAGES = ("error", "silent")
#: The rack a compact-placement request is served from: `emptiest`, the rack with the most free
#: slots (the best a loop could hope for); `packed`, the fullest rack that holds the whole
#: request (a provider keeping its empty racks for large groups), else the emptiest.
COMPACT_RACKS = ("emptiest", "packed")


@dataclass(frozen=True)
class StockSteps:
    """Stock that changes at given instants: `stock[i]` from `at_s[i]` on (at_s[0] = 0)."""

    at_s: tuple[float, ...]
    stock: tuple[int, ...]


@dataclass(frozen=True)
class StockDraws:
    """Stock redrawn every `period_s` (from 0), uniform integer in [low, high], from the pool's
    seeded stream: the same seed, the same schedule, whatever the loop does."""

    low: int
    high: int
    period_s: float


@dataclass(frozen=True)
class Pool:
    name: str
    node_type: str
    zone: str = "zone-a"
    block: str = "block-a"
    nodes_per_rack: int = 8
    min_size: int = 0
    max_size: int = 0
    committed: int = 0
    price_on_demand: float = 0.0
    price_spot: float | None = None
    spot: bool = False
    price_committed: float | None = None
    boot_delay: BootDelay = field(default_factory=BootDelay)
    stock: int | None = None  # the most the provider ever supplies (None: unlimited)
    stock_varies: StockSteps | StockDraws | None = None  # how stock changes over time (None: fixed)
    shortage: str = "error"  # SHORTAGES
    min_billed_s: float = 60.0  # the least a node of the pool is billed for, however soon it goes
    compact_rack: str = "packed"  # COMPACT_RACKS: the rack a compact-placement request gets
    atomic: bool = False
    priority: int = 0
    taints: tuple[str, ...] = ()

    @property
    def price(self) -> float:
        """Hourly price of a node beyond the committed slots."""
        if self.spot:
            assert self.price_spot is not None, "Cluster() refuses a spot pool without price_spot"
            return float(self.price_spot)
        return float(self.price_on_demand)

    @property
    def committed_price(self) -> float:
        """Hourly price of a committed slot, billed whether a node runs in it or not."""
        return float(self.price_committed if self.price_committed is not None else self.price_on_demand)


def _named(kind: str, cfg: dict, where: str) -> str:
    """`where` with the item's name: what a user looks for in the YAML file."""
    return f"{kind} {shown(cfg['name'])} at {where}" if isinstance(cfg.get("name"), str) else where


def _twice(names: list[str]) -> str:
    """The first name that appears more than once."""
    return next(n for n, k in Counter(names).items() if k > 1)


def _need(cfg: dict, key: str, where: str):
    if key not in cfg:
        raise ConfigError(where, f"missing required key '{key}'")
    return cfg[key]


#: Largest pool accepted; anything above is a unit mistake, and would not fit in memory. A
#: stock is bounded alike: the provider never supplies more nodes than a pool can have.
MAX_POOL_NODES = 1_000_000
#: The most a node-hour may cost (USD); above it is a unit mistake, and a run's cost overflows.
MAX_PRICE = 1_000_000
#: The shortest period of a redrawn stock: each period is a draw, so a tiny one never ends.
MIN_STOCK_PERIOD_S = 1

_TYPES = {"int": (numbers.Integral,), "float": (numbers.Real,), "str": (str,), "bool": (bool, np.bool_)}


def _typed(value, kind: str, where: str, optional: bool = False):
    """`value` if it is a `kind` (no bool passes as a number, a float is finite), else a ConfigError."""
    if not ((value is None and optional) or
            (isinstance(value, _TYPES[kind]) and (kind == "bool" or not isinstance(value, (bool, np.bool_)))
             and (kind != "float" or finite(value)))):
        expected = "finite float" if kind == "float" else kind
        raise ConfigError(where, f"expected {expected}{' or null' if optional else ''}, got {shown(value)}")
    return value


def _one_of(value, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        raise ConfigError(where, f"must be one of {', '.join(choices)}, got {shown(value)}")
    return value


def _min_billed(value, where: str) -> float:
    """A minimum billed time: seconds in [0, MAX_TIME_S] (the big clouds bill per second with a
    one-minute minimum)."""
    seconds = _typed(value, "float", where)
    if not 0 <= seconds <= MAX_TIME_S:
        raise ConfigError(where, f"must be in [0, {MAX_TIME_S:,.0f}] seconds, got {shown(value)}")
    return float(seconds)


def _mapping(value, where: str) -> dict:
    if not isinstance(value, Mapping):
        raise ConfigError(where, f"expected a mapping of keys to values, got {shown(value)}")
    return dict(value)


def _stock(value, where: str) -> tuple[int | None, StockSteps | StockDraws | None]:
    """(the most stock ever allows, how it varies) of a pool's `stock` key: null, an integer,
    a list of {at_s, stock} steps from at_s 0 in increasing order, or {low, high, period_s}."""
    if value is None or isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if value is not None and not 0 <= int(value) <= MAX_POOL_NODES:
            raise ConfigError(where, f"must be null (unlimited) or in [0, {MAX_POOL_NODES:,}], got {value}")
        return None if value is None else int(value), None
    if isinstance(value, Mapping):
        draws = _build(StockDraws, dict(value), where)
        if not 0 <= draws.low <= draws.high:
            raise ConfigError(where, f"need 0 <= low <= high, got {draws.low} and {draws.high}")
        if draws.high > MAX_POOL_NODES:
            raise ConfigError(f"{where}.high", f"must be at most {MAX_POOL_NODES:,}, got {draws.high}")
        if not draws.period_s >= MIN_STOCK_PERIOD_S:
            raise ConfigError(f"{where}.period_s",
                              f"must be at least {MIN_STOCK_PERIOD_S} second, got {shown(draws.period_s)}")
        return draws.high, draws
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ConfigError(where, "expected null, an integer >= 0, a non-empty list of {at_s, stock} steps "
                                 f"or {{low, high, period_s}}, got {shown(value)}")
    steps = [_build(_Step, _mapping(step, f"{where}[{i}]"), f"{where}[{i}]") for i, step in enumerate(value)]
    for i, step in enumerate(steps):
        if not 0 <= step.stock <= MAX_POOL_NODES:
            raise ConfigError(f"{where}[{i}].stock", f"must be in [0, {MAX_POOL_NODES:,}], got {step.stock}")
        if (i == 0 and step.at_s != 0) or (i > 0 and not step.at_s > steps[i - 1].at_s):
            raise ConfigError(f"{where}[{i}].at_s", f"steps start at 0 and increase, got {step.at_s:g}"
                                                    f"{'' if i == 0 else f' after {steps[i - 1].at_s:g}'}")
    return max(s.stock for s in steps), StockSteps(tuple(float(s.at_s) for s in steps), tuple(s.stock for s in steps))


@dataclass(frozen=True)
class _Step:
    """One step of a stock schedule, as written in the YAML."""

    at_s: float
    stock: int


def _build(cls, cfg: dict, where: str):
    known = set(cls.__dataclass_fields__)
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise ConfigError(where, f"unknown key '{unknown[0]}' (known: {', '.join(sorted(known))})")
    for key, value in cfg.items():  # wrong types are refused by key, not met later as a TypeError
        kind, _, optional = str(cls.__dataclass_fields__[key].type).partition(" | ")
        if kind in _TYPES:
            _typed(value, kind, f"{where}.{key}", bool(optional))
    try:
        return cls(**cfg)
    except TypeError as exc:
        raise ConfigError(where, str(exc)) from None


class Cluster:
    """Validated node types and pools; the static part of the cluster (Hydra `_target_`)."""

    def __init__(
        self,
        node_types: list[dict[str, Any]],
        pools: list[dict[str, Any]],
        partition_profiles: dict[str, int] | None = None,
        autoscaling: bool = True,
        name: str = "cluster",
        shortage: str = "error",
        min_billed_s: float = 60.0,
        compact_rack: str = "packed",
        kueue: dict[str, Any] | None = None,
        dra: dict[str, Any] | None = None,
    ):
        self.name = _typed(name, "str", "cluster.name")
        self.shortage = _one_of(shortage, SHORTAGES, "cluster.shortage")
        _min_billed(min_billed_s, "cluster.min_billed_s")
        _one_of(compact_rack, COMPACT_RACKS, "cluster.compact_rack")
        self.autoscaling = bool(_typed(autoscaling, "bool", "cluster.autoscaling"))  # no bool("maybe")
        self.partition_profiles = {}
        for prof, milli in _mapping(partition_profiles or {}, "cluster.partition_profiles").items():
            if not isinstance(milli, numbers.Integral) or isinstance(milli, bool) or not 0 < int(milli) <= 1000:
                raise ConfigError(f"cluster.partition_profiles.{prof}",
                                  f"milli must be in (0, 1000], got {shown(milli)}")
            self.partition_profiles[str(prof)] = int(milli)
        for key, value in (("node_types", node_types), ("pools", pools)):
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise ConfigError(f"cluster.{key}", f"expected a list, got {shown(value)}")
        self.node_types: list[NodeType] = []
        for i, cfg in enumerate(node_types):
            where = f"cluster.node_types[{i}]"
            cfg = _mapping(cfg, where)
            where = _named("node type", cfg, where)
            profiles = cfg.get("partition_profiles", ()) or ()
            if isinstance(profiles, str) or not isinstance(profiles, Sequence):
                raise ConfigError(f"{where}.partition_profiles",
                                  f"expected a list of profile names, got {shown(profiles)}")
            cfg["partition_profiles"] = tuple(profiles)
            nt = _build(NodeType, cfg, where)
            for key, most in (("cpu_milli", MAX_CPU_MILLI), ("memory_mib", MAX_MEMORY_MIB)):  # as a pod's bounds
                if not 0 < getattr(nt, key) <= most:
                    raise ConfigError(f"{where}.{key}", f"must be > 0 and at most {most:,}, got {getattr(nt, key)}")
            if nt.gpus < 0 or nt.gpus > 64:
                raise ConfigError(f"{where}.gpus", f"must be in [0, 64], got {nt.gpus}")
            for key in ("nvlink_domains", "numa_domains"):
                d = getattr(nt, key)
                if d < 1 or (nt.gpus and nt.gpus % d):
                    raise ConfigError(f"{where}.{key}", f"must be >= 1 and divide gpus ({nt.gpus}), got {d}")
            for prof in nt.partition_profiles:
                if prof not in self.partition_profiles:
                    raise ConfigError(f"{where}.partition_profiles",
                                      f"profile '{prof}' is not in cluster.partition_profiles")
            if nt.gpus and not nt.gpu_model:
                raise ConfigError(f"{where}.gpu_model",
                                  f"a node type with GPUs needs a gpu_model, got {shown(nt.gpu_model)}")
            self.node_types.append(nt)
        names = [t.name for t in self.node_types]
        if len(set(names)) != len(names):
            raise ConfigError("cluster.node_types", f"node type names must be unique, got {shown(_twice(names))} twice")
        self.pools: list[Pool] = []
        for i, cfg in enumerate(pools):
            where = f"cluster.pools[{i}]"
            cfg = _mapping(cfg, where)
            _need(cfg, "name", where)
            where = _named("pool", cfg, where)
            if cfg.get("node_type") not in names:
                raise ConfigError(f"{where}.node_type",
                                  f"unknown node type '{cfg.get('node_type')}' (known: {', '.join(names)})")
            cfg["boot_delay"] = _build(BootDelay, _mapping(cfg.get("boot_delay") or {}, f"{where}.boot_delay"),
                                       f"{where}.boot_delay")
            taints = cfg.get("taints") or ()
            if isinstance(taints, str) or not isinstance(taints, Sequence):
                raise ConfigError(f"{where}.taints",
                                  f"expected a list of taints key[=value]:effect, got {shown(taints)}")
            cfg["taints"] = tuple(taints)
            for internal in ("stock_varies",):  # set from `stock`, not written
                if internal in cfg:
                    raise ConfigError(where, f"unknown key '{internal}' (a varying stock is written as `stock`)")
            cfg["stock"], cfg["stock_varies"] = _stock(cfg.get("stock"), f"{where}.stock")
            cfg["shortage"] = _one_of(cfg.get("shortage", shortage), SHORTAGES, f"{where}.shortage")
            cfg["compact_rack"] = _one_of(cfg.get("compact_rack", compact_rack), COMPACT_RACKS,
                                          f"{where}.compact_rack")
            cfg["min_billed_s"] = _min_billed(cfg.get("min_billed_s", min_billed_s), f"{where}.min_billed_s")
            for j, taint in enumerate(cfg["taints"]):
                _taint(taint, f"{where}.taints[{j}]")
            pool = _build(Pool, cfg, where)
            if not 0 <= pool.min_size <= pool.max_size:
                raise ConfigError(where, f"need 0 <= min_size <= max_size, got {pool.min_size} and {pool.max_size}")
            if pool.max_size > MAX_POOL_NODES:
                raise ConfigError(f"{where}.max_size", f"must be at most {MAX_POOL_NODES:,}, got {pool.max_size}")
            for key in ("price_on_demand", "price_spot", "price_committed"):
                if not 0 <= (getattr(pool, key) or 0) <= MAX_PRICE:
                    raise ConfigError(f"{where}.{key}", f"a price must be in [0, {MAX_PRICE:,}] (USD per "
                                      f"node-hour), got {shown(getattr(pool, key))}")
            if not 0 <= pool.committed <= pool.max_size:
                raise ConfigError(f"{where}.committed", f"must be in [0, max_size] = [0, {pool.max_size}], "
                                  f"got {pool.committed}")
            if not 1 <= pool.nodes_per_rack <= MAX_POOL_NODES:
                raise ConfigError(f"{where}.nodes_per_rack",
                                  f"must be >= 1 and at most {MAX_POOL_NODES:,}, got {pool.nodes_per_rack}")
            if not 0 <= pool.boot_delay.min_s <= pool.boot_delay.max_s:
                raise ConfigError(f"{where}.boot_delay", "need 0 <= min_s <= max_s, got "
                                  f"{pool.boot_delay.min_s:g} and {pool.boot_delay.max_s:g}")
            if pool.boot_delay.max_s > MAX_TIME_S:
                raise ConfigError(f"{where}.boot_delay.max_s", f"must be at most {MAX_TIME_S:,.0f} seconds "
                                  f"(10 years), got {shown(pool.boot_delay.max_s)}")
            if pool.spot and pool.price_spot is None:
                raise ConfigError(f"{where}.price_spot", "a spot pool needs price_spot")
            self.pools.append(pool)
        if not self.pools:
            raise ConfigError("cluster.pools", "a cluster needs at least one pool")
        if len({p.name for p in self.pools}) != len(self.pools):
            raise ConfigError("cluster.pools",
                              f"pool names must be unique, got {shown(_twice([p.name for p in self.pools]))} twice")
        # pools x [pods without GPUs, pods with GPUs]: does a taint of the pool repel them?
        taints = [{_taint(t, p.name) for t in p.taints} for p in self.pools]  # checked above
        filtering = [{kv for kv in kvs if kv[1] in FILTER_EFFECTS} for kvs in taints]
        repels = np.array([[bool(f), bool(f - {GPU_TOLERATION})] for f in filtering], bool).reshape(-1, 2)
        #: [pods without GPUs, with GPUs] x pools: a taint of the pool the pod does not
        #: tolerate keeps it off the pool's nodes; None when no pool is tainted
        self.untolerated = repels.T.copy() if repels.any() else None
        self.models = sorted({t.gpu_model for t in self.node_types if t.gpus})
        if len(self.models) > 62:
            raise ConfigError("cluster.node_types", "at most 62 distinct GPU models")
        self.profiles = sorted(self.partition_profiles)
        #: Kueue's queues and quotas (harness/kueue/queues.py), for a loop behind Kueue admission
        self.kueue = None if kueue is None else parse_kueue(kueue, [p.name for p in self.pools])
        #: devices in DRA's terms (harness/dra/layer.py): with it, every GPU pod runs by its claim
        self.devices = None if dra is None else DeviceLayer(self.node_types, self.partition_profiles, dra)
        if self.devices is not None and self.devices.taints:
            self.devices.taints.check_slots(np.repeat([self.type_index(p.node_type) for p in self.pools],
                                                      [p.max_size for p in self.pools]))

    # ---- static per-slot layout ------------------------------------------------------
    def type_index(self, name: str) -> int:
        return [t.name for t in self.node_types].index(name)

    def model_bit(self, model: str) -> int:
        return 1 << self.models.index(model) if model in self.models else 0

    @property
    def n_slots(self) -> int:
        return sum(p.max_size for p in self.pools)

    @property
    def max_gpus(self) -> int:
        return max([t.gpus for t in self.node_types] + [1])
