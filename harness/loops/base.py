"""What a loop is: the interfaces every loop and autoscaler provides (the narrow surface of the
simulation they may use is harness/view.py's `SimulationView`; how they describe themselves,
harness/description.py).

A loop (conf/loop/*.yaml, built by Hydra from its `_target_`) decides; the simulation
(harness/sim.py) owns the truth and calls the loop: `attach` once, then at each instant with
something due `step`, and in between `next_wakeup` and `idle_ticks` to learn when the loop
next has something to do. `replay`, `compare` and `report` know a loop only through `Loop`:
its `name`, its score `policy` and how reports name and order it (`describe`). An autoscaler
is the half of the separate loops that adds and removes nodes beside the scheduler.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Protocol

from harness.description import Description
from harness.errors import ConfigError
from harness.view import SimulationView

if TYPE_CHECKING:
    import numpy as np

    from harness.scheduler import Scheduler


class Autoscaler(Protocol):
    """The node-adding half of the separate loops (harness/loops/separate.py): it wakes on
    its own cadence beside the scheduler."""

    def attach(self, sim: SimulationView, scheduler: Scheduler) -> None: ...

    @property
    def next_scan(self) -> float:
        """When it next wakes (inf: not until something changes)."""
        ...

    def scan(self, now: float) -> None: ...

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        """As `Loop.idle_ticks`, for its own wake-ups."""
        ...

    def describe(self) -> Description:
        """The separate loops on this autoscaler, for reports (the scheduler adds its switches)."""
        ...


def members(protocol: type) -> list[str]:
    """The members a protocol declares (attributes and methods), in declaration order."""
    declared = [*getattr(protocol, "__annotations__", {}), *vars(protocol)]
    return list(dict.fromkeys(m for m in declared if not m.startswith("_")))


def conform(obj: object, protocol: type, where: str) -> None:
    """Refuse, by the config key `where`, an object that lacks a member of `protocol`, before
    it is used: one line naming what is missing instead of an AttributeError mid-replay.
    Members are looked up without running them (a property may need `attach` first)."""
    missing = []
    for m in members(protocol):
        try:
            inspect.getattr_static(obj, m)
        except AttributeError:
            missing.append(m)
    if missing:
        kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
        raise ConfigError(where, f"{kind} is no {protocol.__name__}: it has no {', '.join(missing)} "
                                 f"(see {protocol.__name__} in {protocol.__module__.replace('.', '/')}.py)")
