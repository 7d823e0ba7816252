"""Expanders: how the Cluster-Autoscaler-like autoscaler picks one scale-up option.

As Cluster Autoscaler's expander package: each pool that could help becomes an `Option`; a
*filter* keeps the options it finds best (all of them on a tie); a `Chain` runs its filters in
order, stops as soon as one option is left, and lets its *fallback* strategy pick among what
remains (random by default, from the autoscaler's seeded stream, drawn only when more than one
option is left). `--expander=least-waste,price` upstream is, here,

    expander:
      _target_: harness.loops.expanders.Chain
      filters: [{_target_: harness.loops.expanders.LeastWaste}, {_target_: harness.loops.expanders.Price}]

and conf/loop/autoscaler/expander/ holds one file per upstream expander
(`loop/autoscaler/expander=price` on the command line); least-waste is the default, as
upstream's since CA 1.33.
Ties in a float score are kept within TIE (the estimate's sums may round differently).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

#: Float scores closer than this are a tie.
TIE = 1e-12


@dataclass(frozen=True)
class Option:
    """One way to scale up, as the autoscaler sees it: `nodes` new nodes of `pool` that would
    take `helped` pending pods. `price` is their hourly price, the free committed slots they
    would fill (`committed` of them) at 0 if the autoscaler knows of reservations; `waste`
    upstream least-waste's score, (CPU left free)/(CPU) + (memory left free)/(memory) of the
    new nodes once the pods helped are on them; `priority` the pool's."""

    pool: int
    nodes: int
    helped: int
    price: float
    waste: float
    committed: int = 0
    priority: int = 0

    @property
    def unit_price(self) -> float:
        """What each pod helped costs an hour (upstream's price expander, without its pod prices)."""
        return self.price / self.helped


class Filter(ABC):
    """Keeps the options that are best by one criterion, every one of them on a tie."""

    @abstractmethod
    def best_options(self, options: list[Option]) -> list[Option]: ...


class Expander(ABC):
    """Picks one option (None from none); `rng` is the autoscaler's seeded stream."""

    @abstractmethod
    def best_option(self, options: list[Option], rng: np.random.Generator) -> Option | None: ...


def _least(options: list[Option], key) -> list[Option]:
    best = min(map(key, options), default=0.0)
    return [o for o in options if key(o) <= best + TIE]


class LeastWaste(Filter):
    """Least CPU and memory left idle on the new nodes (upstream `least-waste`, its default
    since CA 1.33): `waste` is upstream's (free CPU / CPU + free memory / memory of the new
    nodes over the pods helped), computed from integer sums, so ties are exact as upstream's."""

    def best_options(self, options):
        best = min((o.waste for o in options), default=0.0)
        return [o for o in options if o.waste == best]


class Price(Filter):
    """Cheapest per pod helped (upstream `price`, without its preferred-node-size factor)."""

    def best_options(self, options):
        return _least(options, lambda o: o.unit_price)


class Priority(Filter):
    """The pools of highest `Pool.priority` (upstream `priority`, the integer per pool
    instead of regexes over node-group names; a pool without one has priority 0)."""

    def best_options(self, options):
        best = max((o.priority for o in options), default=0)
        return [o for o in options if o.priority == best]


class MostPods(Filter):
    """The options that take the most pending pods (upstream `most-pods`)."""

    def best_options(self, options):
        best = max((o.helped for o in options), default=0)
        return [o for o in options if o.helped == best]


class LeastNodes(Filter):
    """The options that ask for the fewest nodes (upstream `least-nodes`)."""

    def best_options(self, options):
        asking = [o for o in options if o.nodes > 0]
        best = min((o.nodes for o in asking), default=0)
        return [o for o in asking if o.nodes == best]


class Reserved(Filter):
    """Pools with free committed slots, if any (the autoscaler's `reservation_aware`: a
    reservation is paid whether used or not, so it is filled first)."""

    def best_options(self, options):
        return [o for o in options if o.committed > 0] or options


class Random(Expander):
    """One option at random (upstream `random`, and every chain's fallback). One option is
    returned without a draw, so the stream moves only on a real choice."""

    def best_option(self, options, rng):
        if len(options) <= 1:
            return options[0] if options else None
        return options[int(rng.integers(len(options)))]


class Chain(Expander):
    """Filters in order, as upstream's `--expander=a,b,...`: stops as soon as one option is
    left; the fallback picks among the rest."""

    def __init__(self, filters: list[Filter] | None = None, fallback: Expander | None = None):
        self.filters = list(filters or [])
        self.fallback = fallback or Random()

    def best_option(self, options, rng):
        for f in self.filters:
            options = f.best_options(options)
            if len(options) == 1:
                return options[0]
        return self.fallback.best_option(options, rng)


class SchedulerPreference(Expander):
    """The scheduler's stated preference (the autoscaler's `scheduler_prefers`): the cheapest
    per pod helped, free committed slots at 0, then the first pool; never at random."""

    def best_option(self, options, rng):
        return min(options, key=lambda o: (o.unit_price, o.pool), default=None)
