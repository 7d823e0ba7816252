"""How reports name and order a loop: the capabilities its config turns on (`Switch`) and its
family (`Description`). Loops and autoscalers describe themselves with these; a run records its
loop's description in run.json, and reports read it back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Switch:
    """A capability a loop's config turns on, as reports name it; `rank` orders switches in
    reports (the ablation's order), `interface` marks a step of the scheduler-autoscaler
    interface (reported after the capabilities)."""

    name: str
    rank: int
    interface: bool = False


# The separate loops' switches, in the ablation's order: the autoscaler's capabilities, one
# at a time, then the interface steps toward the merged loop (conf/loop/separate_*.yaml).
TOPOLOGY = Switch("topology", 0)
GANG = Switch("gang", 1)
SHARING = Switch("sharing", 2)
RESERVATION = Switch("reservation", 3)
PROVISIONING_REQUEST = Switch("ProvisioningRequest", 4)
SCHEDULER_SEES = Switch("scheduler sees in-flight capacity", 5, interface=True)
GANGS_WAIT = Switch("gangs wait for capacity", 6, interface=True)
SCHEDULER_PREFERS = Switch("scheduler prefers provisionable capacity", 7, interface=True)
#: an admission layer in front of the loop (harness/kueue): quotas decide which jobs reach it
KUEUE = Switch("Kueue admission", 8)
# Not a step toward the merged loop: the scheduler's own PostFilter (harness/scheduler/preemption.py).
PREEMPTION = Switch("preemption", 9)
#: kube-scheduler's own gang scheduling (harness/scheduler/pod_group.py) instead of Coscheduling
POD_GROUPS = Switch("PodGroup gang scheduling", 10)
#: the merged planner's pricing as the autoscaler's expander (expander=planner_price)
PLANNER_PRICE = Switch("planner's pricing", 11)
#: committed nodes never scaled down (a min_size on the reservation), apart from `RESERVATION`
KEEP_COMMITTED = Switch("committed nodes kept", 12)
#: in a DRA cluster, an autoscaler that does not simulate claims (before CA 1.35): a capability
#: taken away from today's baseline, named so that it is never read as the baseline
PRE_DRA = Switch("pre-DRA autoscaler (claims unseen)", 13)


@dataclass(frozen=True)
class Description:
    """How reports name and order a loop: its `family` (what it is, e.g. "separate loops"),
    the family's place among others (`rank`, lower first) and the switches its config turns
    on. The `ablation` family is the one each capability is measured against: its variant
    with no switch on is the reports' baseline."""

    family: str
    rank: int
    switches: tuple[Switch, ...] = ()
    ablation: bool = False

    def as_record(self) -> dict[str, Any]:
        """As plain data, for the run's run.json: a report reads it back (`from_record`)
        without rebuilding the loop, so a run stays reportable when a constructor changes."""
        return asdict(self)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Description:
        return cls(family=record["family"], rank=record["rank"], ablation=record["ablation"],
                   switches=tuple(Switch(**s) for s in record["switches"]))
