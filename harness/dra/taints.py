"""Device taints that come and go during a run (KEP-5055): DeviceTaintRules in force from one
time until another, and a seeded schedule of device failures, as a cluster's `dra:` section
gives them:

    dra:
      taint_rules:                      # DeviceTaintRule: a taint on the devices it selects
        - {node_type: TYPE, slot: N, driver: D, device: NAME, at_s: T0, until_s: T1,
           taint: {key: K, value: V, effect: NoSchedule | NoExecute | None}}
      device_failures:                  # each GPU of every node slot fails at random
        {rate_per_device_per_day: R, repair_s: S, key: K, value: V, effect: NoExecute}

A rule selects as upstream's deviceSelector does (every field optional, all must hold): the
node type, one node slot (the node in it, as a rule naming a pool names one node), the driver,
the device's name. A slot is a node's place: a taint on it holds whatever node the slot has
while the rule is in force. Failures are drawn per (slot, GPU) from the run's seed before it
starts, each a rule lasting `repair_s`, so every loop meets the same failures.

Taints are numbered in one catalogue (at most 63 distinct key, value and effect), so which
taints a device carries is one bitmask; `tolerated_bits` and `eviction_delay` say, per option
of a pod's compiled claims, which it tolerates and for how long it may keep a device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.dra.resources import NO_EFFECT, NO_EXECUTE, NO_SCHEDULE, Claim, DeviceRequest, DeviceTaint
from harness.errors import ConfigError
from harness.settings import Rule, SettingError, integer, number

RULE_KEYS = ("node_type", "slot", "driver", "device", "at_s", "until_s", "taint")
TAINT_KEYS = ("key", "value", "effect")
FAILURE_KEYS = ("rate_per_device_per_day", "repair_s", "key", "value", "effect")
EFFECTS = (NO_SCHEDULE, NO_EXECUTE, NO_EFFECT)
MAX_TAINTS = 63  # one bit each in an int64
DEFAULT_FAILURE_KEY = "loopbench.io/device-failed"

_AT = number("seconds from trace start at which the taint comes", ge=0)
_UNTIL = number("seconds from trace start at which the taint goes (null: never)", gt=0, null=True)
_SLOT = integer("the node slot whose devices the rule taints (null: every node)", ge=0, null=True)
_RATE = number("failures of one GPU per day, on average (a Poisson process)", gt=0)
_REPAIR = number("seconds a failed GPU stays tainted before it is repaired", gt=0)


@dataclass(frozen=True)
class TaintRule:
    """A taint on the devices it selects, from `at_s` until `until_s` (inf: never removed):
    per node type, the selected devices' indices (a type absent: none of its devices)."""

    taint: int  # its number in the catalogue
    at_s: float
    until_s: float
    slot: int  # -1: every node of the selected types
    devices: dict[int, np.ndarray]


@dataclass(frozen=True)
class Failures:
    rate_per_day: float
    repair_s: float
    taint: int


@dataclass(frozen=True)
class Changes:
    """Taints coming (`on`) and going on (slot, device)s, in order of time; `added` is when the
    taint came (its timeAdded, from which tolerationSeconds count)."""

    time: np.ndarray
    slot: np.ndarray
    device: np.ndarray
    taint: np.ndarray
    on: np.ndarray
    added: np.ndarray


class DeviceTaints:
    """The taint rules and failures of a DRA cluster, checked against its node types."""

    def __init__(self, raw_rules: object, raw_failures: object, type_names: list[str], device_names: list[tuple],
                 drivers: list[tuple], gpu_devices: list[np.ndarray]):
        self.catalogue: list[DeviceTaint] = []
        self.rules: list[TaintRule] = []
        if raw_rules is not None and not isinstance(raw_rules, list):
            raise ConfigError("cluster.dra.taint_rules", f"expected a list of rules, got {raw_rules!r}")
        for i, raw in enumerate(raw_rules or []):
            self.rules.append(self._rule(raw, f"cluster.dra.taint_rules[{i}]", type_names, device_names, drivers))
        self.failures = None if raw_failures is None else self._failures(raw_failures)
        #: per node type, its GPU devices (the devices that fail), as a padded table
        self.gpu_counts = np.array([len(g) for g in gpu_devices], np.int64)
        self.gpu_table = np.zeros((len(gpu_devices), max([len(g) for g in gpu_devices] + [1])), np.int64)
        for t, g in enumerate(gpu_devices):
            self.gpu_table[t, :len(g)] = g

    def __bool__(self) -> bool:
        return bool(self.rules) or self.failures is not None

    def _number(self, taint: DeviceTaint, where: str) -> int:
        if taint not in self.catalogue:
            if len(self.catalogue) == MAX_TAINTS:
                raise ConfigError(where, f"at most {MAX_TAINTS} distinct taints (key, value, effect) in a cluster")
            self.catalogue.append(taint)
        return self.catalogue.index(taint)

    def _rule(self, raw: object, where: str, type_names: list[str], device_names: list[tuple],
              drivers: list[tuple]) -> TaintRule:
        if not isinstance(raw, dict):
            raise ConfigError(where, f"a taint rule is a mapping with keys {', '.join(RULE_KEYS)}, got {raw!r}")
        _known(raw, RULE_KEYS, where)
        at = _checked(raw, "at_s", _AT, where, required=True)
        until = _checked(raw, "until_s", _UNTIL, where)
        until = np.inf if until is None else float(until)
        if until <= at:
            raise SettingError(f"{where}.until_s", until, f"must be after at_s = {at}")
        taint = raw.get("taint")
        if not isinstance(taint, dict):
            raise ConfigError(f"{where}.taint", f"a taint is a mapping with keys {', '.join(TAINT_KEYS)}, got "
                                                f"{taint!r}")
        number_ = self._number(_taint(taint, f"{where}.taint", TAINT_KEYS), f"{where}.taint")
        types = range(len(type_names))
        if raw.get("node_type") is not None:
            if raw["node_type"] not in type_names:
                raise ConfigError(f"{where}.node_type", f"no such node type (known: {', '.join(type_names)})")
            types = range(type_names.index(raw["node_type"]), type_names.index(raw["node_type"]) + 1)
        slot = _checked(raw, "slot", _SLOT, where)
        devices = {}
        for t in types:
            names = np.array([n.rsplit("/", 1)[1] for n in device_names[t]], dtype=object)
            picked = np.ones(len(names), bool)
            if raw.get("driver") is not None:
                picked &= np.array(drivers[t], dtype=object) == raw["driver"]
            if raw.get("device") is not None:
                picked &= names == raw["device"]
            if picked.any():
                devices[t] = np.flatnonzero(picked)
        if not devices:
            raise ConfigError(where, "selects no device of any node type (check node_type, driver and device)")
        return TaintRule(number_, float(at), until, -1 if slot is None else int(slot), devices)

    def _failures(self, raw: object) -> Failures:
        where = "cluster.dra.device_failures"
        if not isinstance(raw, dict):
            raise ConfigError(where, f"expected a mapping with keys {', '.join(FAILURE_KEYS)}, got {raw!r}")
        _known(raw, FAILURE_KEYS, where)
        rate = _checked(raw, "rate_per_device_per_day", _RATE, where, required=True)
        repair = _checked(raw, "repair_s", _REPAIR, where, required=True)
        taint = _taint({"key": DEFAULT_FAILURE_KEY, "effect": NO_EXECUTE, **raw}, where, FAILURE_KEYS)
        return Failures(float(rate), float(repair), self._number(taint, where))

    def check_slots(self, slot_type: np.ndarray) -> None:
        """Each rule's slot exists and holds a type whose devices it selects."""
        for i, r in enumerate(self.rules):
            if r.slot >= len(slot_type):
                raise SettingError(f"cluster.dra.taint_rules[{i}].slot", r.slot,
                                   f"must be a node slot, below {len(slot_type)} (the pools' max_size summed)")
            if r.slot >= 0 and int(slot_type[r.slot]) not in r.devices:
                raise ConfigError(f"cluster.dra.taint_rules[{i}]", f"selects no device of slot {r.slot}'s node type")

    def changes(self, slot_type: np.ndarray, seed: int, horizon_s: float) -> Changes:
        """Every taint coming and going before the horizon: the rules', and failures drawn from
        the seed (each (slot, GPU) a Poisson process over the horizon, its own draws)."""
        at, until, slot, device, taint = [], [], [], [], []
        for r in self.rules:
            for t, devs in r.devices.items():
                slots = np.flatnonzero(slot_type == t) if r.slot < 0 else np.array([r.slot])[slot_type[r.slot] == t]
                slot.append(np.repeat(slots, len(devs)))
                device.append(np.tile(devs, len(slots)))
                at.append(np.full(len(slot[-1]), r.at_s))
                until.append(np.full(len(slot[-1]), r.until_s))
                taint.append(np.full(len(slot[-1]), r.taint))
        if self.failures is not None:
            f = self.failures
            rng = np.random.default_rng([seed, 5055])
            width = self.gpu_table.shape[1]
            lam = f.rate_per_day * horizon_s / 86400.0
            counts = np.where(np.arange(width) < self.gpu_counts[slot_type][:, None],
                              rng.poisson(lam, size=(len(slot_type), width)), 0)
            s, g = np.nonzero(counts)
            s, g = np.repeat(s, counts[s, g]), np.repeat(g, counts[s, g])
            times = rng.uniform(0.0, horizon_s, len(s))
            slot.append(s)
            device.append(self.gpu_table[slot_type[s], g])
            at.append(times)
            until.append(times + f.repair_s)
            taint.append(np.full(len(s), f.taint))
        a, u, sl, d, k = (np.concatenate(x) if x else np.zeros(0) for x in (at, until, slot, device, taint))
        time = np.r_[a, u]
        order = np.argsort(time, kind="stable")
        order = order[time[order] < horizon_s]
        return Changes(time[order], np.r_[sl, sl][order].astype(np.int64), np.r_[d, d][order].astype(np.int64),
                       np.r_[k, k][order].astype(np.int64), np.r_[np.ones(len(a), bool), np.zeros(len(a), bool)][order],
                       np.r_[a, a][order])


def options_of(claims: tuple[Claim, ...]) -> list[DeviceRequest]:
    """The claims' requests and `firstAvailable` alternatives in the order `compile_claims`
    numbers its options."""
    return [alt for c in claims for r in c.requests for alt in (r.first_available or (r,))]


def tolerated_bits(claims: tuple[Claim, ...], catalogue: list[DeviceTaint]) -> np.ndarray:
    """Per option, the catalogue's taints that do not keep it off a device (bit k): an effect
    None, or a toleration of the option tolerates it (upstream's allTaintsTolerated)."""
    out = np.zeros(len(options_of(claims)), np.int64)
    for o, req in enumerate(options_of(claims)):
        for k, taint in enumerate(catalogue):
            if taint.effect == NO_EFFECT or any(tol.tolerates(taint) for tol in req.tolerations):
                out[o] |= np.int64(1) << k
    return out


def eviction_delay(claims: tuple[Claim, ...], catalogue: list[DeviceTaint]) -> np.ndarray:
    """Per option and catalogue taint, the seconds a pod may keep a device under that taint,
    as upstream's device taint eviction controller reckons it: inf unless NoExecute; else 0
    unless a toleration of effect NoExecute tolerates it, inf if one of those has no
    tolerationSeconds, else the least of theirs (a negative one counts as 0)."""
    options = options_of(claims)
    out = np.full((len(options), len(catalogue)), np.inf)
    for o, req in enumerate(options):
        for k, taint in enumerate(catalogue):
            if taint.effect != NO_EXECUTE:
                continue
            tols = [t for t in req.tolerations if t.effect == NO_EXECUTE and t.tolerates(taint)]
            if not tols:
                out[o, k] = 0.0
            elif all(t.seconds is not None for t in tols):
                out[o, k] = max(min(t.seconds for t in tols if t.seconds is not None), 0)
    return out


def _known(raw: dict, keys: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", f"unknown key (known: {', '.join(keys)})")


def _checked(raw: dict, key: str, rule: Rule, where: str, required: bool = False):
    value = raw.get(key)
    if value is None and required:
        raise ConfigError(f"{where}.{key}", f"required: {rule} ({rule.why})")
    if not rule.allows(value):
        raise SettingError(f"{where}.{key}", value, f"{rule} ({rule.why})")
    return value


def _taint(raw: dict, where: str, keys: tuple[str, ...]) -> DeviceTaint:
    _known(raw, keys, where)
    key, value, effect = raw.get("key"), raw.get("value", ""), raw.get("effect")
    if not isinstance(key, str) or not key:
        raise ConfigError(f"{where}.key", f"a taint's key is a non-empty string, got {key!r}")
    if not isinstance(value, str):
        raise ConfigError(f"{where}.value", f"a taint's value is a string, got {value!r}")
    if effect not in EFFECTS:
        raise ConfigError(f"{where}.effect", f"is one of {', '.join(EFFECTS)}, got {effect!r}")
    return DeviceTaint(key, value, effect)
