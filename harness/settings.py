"""Every setting of a run and the rule it must meet, checked before anything is built.

A bad setting must not hang a replay (a period of 0 never moves the clock), crash it deep
inside (a seed of 'abc'), or quietly mean something else (a threshold of 2). So each setting
has a rule, beside its reason, and a run is refused by key, value and rule:

    loop.autoscaler.scan_interval_s = 0: must be a number >= 1 (seconds between autoscaler scans)

A component declares its own rules beside it: a class in its `SETTINGS` attribute (a function,
with `@declares`), keyed by the setting's path inside it, `*` standing for any one key (a
queue's name, say); a class also has the rules of its base classes. `check_config` walks a
composed Hydra config before instantiation (`loopbench replay`, every runner, `loopbench
generate`), finding each node's component by importing its `_target_` (one that names
nothing has no rules: instantiating it says why); the constructors call `check(self, ...)`
on what they are given, so a loop built from Python meets the same rules. The top level of a
config (RUN, the component "") has its rules here. A cluster is validated by
harness/cluster.py, against its own node types and pools.

A `_target_` runs code, so before any is imported or built (`check_config`, and `instantiate`,
the one way loopbench builds from a config) each must name a class or function defined in the
harness package or in a module the user named as theirs in $LOOPBENCH_PLUGINS: a config from
elsewhere (a cluster file, a transforms list) cannot make loopbench open or copy a file.
"""

from __future__ import annotations

import inspect
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import TypeVar, cast

from omegaconf import Container, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.errors import ConfigError, finite, shown
from harness.trace import MAX_TIME_S

#: Components validated elsewhere (walked past here): the cluster checks itself.
ELSEWHERE = {"harness.cluster.Cluster": "harness/cluster.py"}


@dataclass(frozen=True)
class Rule:
    """What one setting may be: a number or integer within bounds, a flag, one of a set of
    words, an integer grid [lo, hi, step], or a component (a part with its own `_target_`,
    an instance of class `base` from Python); `why` says what the setting means."""

    kind: str  # "number" | "integer" | "flag" | "choice" | "grid" | "component"
    why: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    null: bool = False
    choices: tuple[str, ...] = ()
    base: type = object

    def allows(self, value) -> bool:
        if value is None:
            return self.null
        if self.kind == "flag":
            return isinstance(value, bool)
        if self.kind == "choice":
            return isinstance(value, str) and value in self.choices
        if self.kind == "component":
            if isinstance(value, Mapping):
                return "_target_" in value
            return isinstance(value, self.base)
        if self.kind == "grid":
            return (isinstance(value, Sequence) and not isinstance(value, str) and len(value) in (2, 3)
                    and all(self._in_bounds(v, integer=True) for v in value)
                    and value[0] <= value[1] and (len(value) == 2 or value[2] > 0))
        return self._in_bounds(value, integer=self.kind == "integer")

    def _in_bounds(self, value, integer: bool) -> bool:
        kind = numbers.Integral if integer else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind) or not finite(value):
            return False
        value = cast(float, value)  # a real number: compares with the float bounds
        lo_ok = self.lo is None or (value > self.lo if self.lo_open else value >= self.lo)
        hi_ok = self.hi is None or (value < self.hi if self.hi_open else value <= self.hi)
        return lo_ok and hi_ok

    def __str__(self) -> str:
        if self.kind == "flag":
            text = "true or false"
        elif self.kind == "choice":
            text = "one of " + ", ".join(self.choices)
        elif self.kind == "component":
            text = f"an instance of {self.base.__name__} or a config with a _target_ that builds one"
        elif self.kind == "grid":
            assert self.lo is not None, "a grid's lower bound is part of its rule"
            text = (f"[lo, hi] or [lo, hi, step] of integers with {_num(self.lo)} <= lo <= hi"
                    f"{'' if self.hi is None else f' <= {_num(self.hi)}'} and step > 0")
        else:
            text = f"{'an integer' if self.kind == 'integer' else 'a number'}{self._bounds()}"
        return f"must be {'null or ' if self.null else ''}{text}"

    def _bounds(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f" in {'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f" {'>' if self.lo_open else '>='} {_num(self.lo)}"
        if self.hi is not None:
            return f" {'<' if self.hi_open else '<='} {_num(self.hi)}"
        return ""


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def number(why: str, *, gt=None, ge=None, le=None, lt=None, null=False) -> Rule:
    return Rule("number", why, lo=ge if gt is None else gt, hi=le if lt is None else lt,
                lo_open=gt is not None, hi_open=lt is not None, null=null)


def integer(why: str, *, ge=None, le=None, null=False) -> Rule:
    return Rule("integer", why, lo=ge, hi=le, null=null)


def flag(why: str) -> Rule:
    return Rule("flag", why)


def one_of(choices: tuple[str, ...], why: str) -> Rule:
    return Rule("choice", why, choices=choices)


def component(base: type, why: str, null: bool = False) -> Rule:
    """A part configured by its own `_target_` node, whose settings have rules of their own."""
    return Rule("component", why, null=null, base=base)


def grid(why: str, hi: int) -> Rule:
    return Rule("grid", why, lo=0, hi=hi)


def fraction(why: str) -> Rule:
    return number(why, ge=0, le=1)


def period(why: str) -> Rule:
    """A period the replay wakes on: from 1 s, as finer ones only multiply its steps (and 0
    would never move the clock)."""
    return number(why, ge=1)


def duration(why: str) -> Rule:
    return number(why, ge=0)


def weight(why: str) -> Rule:
    return number(why, ge=0)


#: a replay ends at most a day after the latest submission a trace may hold
MAX_HORIZON_S = MAX_TIME_S + 86400.0

#: The rules of a config's top level (conf/config.yaml, conf/generate.yaml), the component "".
RUN: dict[str, Rule] = {
    "seed": integer("seeds the random streams: boot delays, tie-breaks, the generator", ge=0),
    "horizon_s": number("seconds from trace start at which the replay ends; null = last submission + 24 h",
                        gt=0, le=MAX_HORIZON_S, null=True),
    "timeline_interval_s": period("seconds between timeline samples; metrics integrate exactly regardless"),
    "stop_when_done": flag("end the replay once every pod of the trace is done or refused (at the latest at "
                           "horizon_s)"),
    "check_fits": flag("check that every generated pod fits some node type of the cluster"),
    "job_backoff": flag("a job's evicted pods come back only after its Job controller's pod-failure backoff "
                        "(10 s doubling per failure to 10 min; false: at once, the older simplification)"),
    "consolidation": flag("every loop that scales down also removes under-used nodes, moving their pods "
                          "(false: only empty nodes are removed)"),
    "trace_events": flag("write the decision trace, events.parquet: one row per pod, job and node event"),
    "write_claims": flag("write a DRA run's allocations: claims.yaml (a ResourceClaim per bound pod's claim, "
                         "allocated) and claims.parquet (one row per allocated device)"),
    "trace.generated": flag("the trace is drawn at run time from `workload` and trace.seed (harness/generated.py)"),
    "trace.seed": integer("seed of the drawn trace's job mix, arrivals and gang sizes", ge=0),
}


class SettingError(ConfigError):
    """A setting that breaks its rule: names the full key, the value and the rule."""

    def __init__(self, key: str, value, rule: str):
        super().__init__(key, rule)
        self.value = value
        self.args = (f"{key} = {shown(value)}: {rule}",)


F = TypeVar("F", bound=Callable)


def declares(rules: dict[str, Rule]) -> Callable[[F], F]:
    """The rules of a function component (a class declares its own in a `SETTINGS` attribute)."""
    def declare(function: F) -> F:
        setattr(function, "SETTINGS", rules)  # noqa: B010 (a function has no declared attributes)
        return function
    return declare


#: The environment variable naming the user's own modules (comma-separated): a config may build
#: their classes and functions, and those of their submodules, beside the package's.
PLUGINS = "LOOPBENCH_PLUGINS"


def plugins() -> tuple[str, ...]:
    """The module names $LOOPBENCH_PLUGINS holds, read at each check (a test or a launcher sets it)."""
    return tuple(name.strip() for name in os.environ.get(PLUGINS, "").split(",") if name.strip())


def _within(name: str, roots: tuple[str, ...]) -> bool:
    return any(name == root or name.startswith(root + ".") for root in roots)


def refusal(target) -> str | None:
    """Why a `_target_` may not be built, None if it may: it must name, by a dotted path under
    harness or a plugin module (nothing else is imported), a class or function defined there,
    not one merely imported into such a module (`harness.replay.np.save`). A harness path that
    names nothing is left to Hydra's instantiate, which says why; a plugin that cannot be
    imported is refused here, by the key that names it (`policy._target_`, not the loop's)."""
    roots = ("harness", *plugins())
    fix = (f"a _target_ names a class or function of the harness package or of a module named in ${PLUGINS} "
           "(comma-separated module names)")
    if isinstance(target, str):
        if not _within(target, roots):
            return (f"not a loopbench component: {fix}, e.g. {PLUGINS}={target.rpartition('.')[0] or target} "
                    "if it is your own")
        try:
            obj = _object(target)
        except Exception as exc:
            if _within(target, ("harness",)):
                return None  # a misspelt component: instantiate says why, by the _target_
            return (f"cannot be imported ({type(exc).__name__}: {str(exc).splitlines()[0]}): put the folder that "
                    "holds your module on PYTHONPATH (or install it), and check the module and name in the path")
    else:
        obj = target
    if not callable(obj):
        return f"names {obj!r}, not a class or function: {fix}"
    module = getattr(obj, "__module__", None)
    if isinstance(module, str) and _within(module, roots):
        return None
    return f"names {module}.{getattr(obj, '__qualname__', obj)}, defined outside them: {fix}"


def _object(path: str):
    """What a dotted path names (its longest importable module, then attributes), found as
    Hydra's instantiate finds it but without logging; the import's own error if it fails."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj = import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise  # the module exists and lacks something it imports
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(f"No module named {parts[0]!r}", name=parts[0])


def check_targets(node, key: str = "") -> None:
    """Every `_target_` under `node` (at config key `key`), as instantiate would read it
    (interpolations resolved), refused by its key unless it may be built."""
    for where, target in targets(node, key):
        why = refusal(target)
        if why is not None:
            raise SettingError(where, target, why)


def targets(node, key: str = ""):
    """(key, target) of each `_target_` under `node`, each container walked once: a container
    reached through an interpolation (`policy: ${policy}`) after the others, so that a target
    is named by the key where it is defined when the walk meets that key too."""
    pending: list[tuple[object, str]] = [(node, key)]
    later: list[tuple[object, str]] = []
    seen: dict[int, object] = {}  # holds what it has seen, so that no id is reused meanwhile
    while pending or later:
        node, key = pending.pop() if pending else later.pop(0)
        if id(node) in seen:
            continue
        seen[id(node)] = node
        if isinstance(node, Mapping):
            items = [k for k in node if not (k == "hydra" and not key)]  # Hydra's own, built by Hydra
        elif isinstance(node, Sequence) and not isinstance(node, str):
            items = list(range(len(node)))
        else:
            continue
        children = []
        for k in items:
            child = f"{key}[{k}]" if isinstance(node, Sequence) else (f"{key}.{k}" if key else str(k))
            value = _resolved(node, k, child)
            if k == "_target_" and isinstance(node, Mapping):
                yield child, value
            elif isinstance(node, Container) and OmegaConf.is_interpolation(node, k):
                later.append((value, child))
            else:
                children.append((value, child))
        pending.extend(reversed(children))  # in the config's order


def instantiate(node, key: str, **kwargs):
    """Hydra's instantiate of the config `node` found at `key`, once every `_target_` under it
    may be built: loopbench builds nothing from a config otherwise."""
    from hydra.utils import instantiate as build

    check_targets(node, key)
    return build(node, **kwargs)


def located(target: str) -> object | None:
    """The class or function a `_target_` names; None if it names none, for Hydra's instantiate
    to say why."""
    module, _, name = target.rpartition(".")
    try:
        return getattr(import_module(module), name) if module else None
    except Exception:  # whatever stops the import, instantiate reports it by the _target_
        return None


@cache
def rules_of(component) -> dict[str, Rule]:
    """The rules of a component (a class or function, the `_target_` naming one, or "" for a
    config's top level) and of its base classes (a plugin's `weight` is ScorePlugin's)."""
    if component == "":
        return RUN
    if isinstance(component, str):
        component = located(component)
    if not isinstance(component, type):
        return getattr(component, "SETTINGS", {}) if inspect.isfunction(component) else {}
    rules: dict[str, Rule] = {}
    for cls in reversed(component.__mro__):
        rules.update(vars(cls).get("SETTINGS", {}))
    return rules


def rule_for(component, path: tuple[str, ...]) -> Rule | None:
    """The rule of the setting at `path` inside `component`, None if it has none."""
    for pattern, rule in rules_of(component).items():
        parts = pattern.split(".")
        if len(parts) == len(path) and all(p in ("*", k) for p, k in zip(parts, path, strict=True)):
            return rule
    return None


def check(component, where: str, **settings) -> None:
    """A constructor's settings, given from Python: `component` is whose they are (`self`, a
    function component itself, or "" for a run's top level), `where` is where a config puts
    them (e.g. "loop.autoscaler"); raises SettingError on the first that breaks its rule."""
    if isinstance(component, str) and component:
        raise TypeError(f"check({component!r}, ...): pass the component itself (self), not a name")
    if not (isinstance(component, str | type) or inspect.isfunction(component)):
        component = type(component)
    _check(walk(settings, component, where))


def check_config(cfg) -> None:
    """Every `_target_` of a composed config (DictConfig or plain mapping), then every setting
    against its rule."""
    check_targets(cfg)
    _check(walk(cfg))


def _check(settings) -> None:
    """The top level's settings first: a component's leaf interpolated from one of them
    (`drain_underutilized: ${consolidation}`) is refused by the key the user set."""
    settings = sorted(settings, key=lambda s: s.component != "")
    for s in settings:
        if s.rule is not None and not s.rule.allows(s.value):
            hint = ""
            if s.rule.kind == "integer" and isinstance(s.value, float) and s.value.is_integer():
                hint = f"; 1e8-style numbers are floats: write it as {int(s.value)}"
            raise SettingError(s.key, s.value, f"{s.rule} ({s.rule.why}){hint}")


@dataclass(frozen=True)
class Setting:
    """One setting met in a config: its component, path inside it, full key, value and rule
    (None: a leaf no rule covers)."""

    component: object
    path: tuple[str, ...]
    key: str
    value: object
    rule: Rule | None


def walk(node, component: object = "", key: str = "", path: tuple[str, ...] = ()):
    """The settings under `node`: each one a rule covers (a whole list, for a grid), and each
    leaf none covers; a cluster is left to harness/cluster.py."""
    if isinstance(node, Mapping):
        if path and "_target_" in node:
            component, path = str(node["_target_"]), ()
        if component in ELSEWHERE:
            return
        items = [k for k in node if not (str(k).startswith("_") and str(k).endswith("_"))
                 and not (k == "hydra" and not key)]  # Hydra's own settings are Hydra's to check
    elif isinstance(node, Sequence) and not isinstance(node, str):
        items = list(range(len(node)))
    else:
        yield Setting(component, path, key, node, None)
        return
    for k in items:
        child = f"{key}[{k}]" if isinstance(node, Sequence) else (f"{key}.{k}" if key else str(k))
        value = _read(node, k, child)
        if value is _DEFINED_ELSEWHERE:
            continue
        rule = rule_for(component, (*path, str(k)))
        if rule is None or rule.kind == "component" and isinstance(value, Mapping) and rule.allows(value):
            yield from walk(value, component, child, (*path, str(k)))
        else:
            yield Setting(component, (*path, str(k)), child, value, rule)


_DEFINED_ELSEWHERE = object()


def _read(node, k, key: str):
    """node[k], resolved; a container interpolated from elsewhere (`policy: ${policy}`)
    is checked where it is defined."""
    value = _resolved(node, k, key)
    if isinstance(value, Container) and isinstance(node, Container) and OmegaConf.is_interpolation(node, k):
        return _DEFINED_ELSEWHERE
    return value


def _resolved(node, k, key: str):
    """node[k], its interpolation resolved; one that fails is refused by its key."""
    if not isinstance(node, Container):
        return node[k]
    try:
        return node[k]
    except OmegaConfBaseException as exc:
        raise ConfigError(key, f"cannot be read: {str(exc).splitlines()[0]}") from None
