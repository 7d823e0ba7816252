"""Expanders: how the Cluster-Autoscaler-like autoscaler picks one scale-up option.

As Cluster Autoscaler's expander package: each pool that could help becomes an `Option`; a
*filter* keeps the options it finds best (all of them on a tie); a `Chain` runs its filters in
order, stops as soon as one option is left, and lets its *fallback* strategy pick among what
remains (random by default, from the autoscaler's seeded stream, drawn only when more than one
option is left). `--expander=least-waste,price` upstream is, here,

    expander:
      _target_: harness.autoscalers.expanders.Chain
      filters: [{_target_: harness.autoscalers.expanders.LeastWaste}, {_target_: harness.autoscalers.expanders.Price}]

and conf/loop/autoscaler/expander/ holds one file per upstream expander
(`loop/autoscaler/expander=price` on the command line); least-waste is the default, as
upstream's since CA 1.33.
Ties in a float score are kept within TIE (the estimate's sums may round differently).

`Price` needs pod prices, which a cluster YAML does not give: `PodPricing` is upstream's GCE
pricing model (cloudprovider/gce/gce_price_model.go `PodPrice`, a pod's theoretical minimum
price on a perfectly matching machine): its CPU and memory requests at GCE's base unit prices,
plus its GPUs at the cheapest per-GPU price this cluster charges for a model the pod accepts
(`pod_prices`). GCE prices GPUs of a pod at one base price since a pod names no GPU model; our
pods may name models and our node prices are the cluster's own, so the per-GPU price comes from
the same price list: a pool's node price less its CPU and memory at the unit prices, per GPU.
A pod's price never depends on the option's pool, as upstream's.

`PlannerPrice` (`loop/autoscaler/expander=planner_price`) is upstream's external expander
(`--expander=grpc --grpc-expander-url=...`, a service the operator runs) pricing each option
as the merged planner prices a plan (harness/autoscalers/plan_price.py): with it the separate
loops can buy as the merged planner would, so a comparison tells the pricing from the merging.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from harness.autoscalers import plan_price
from harness.autoscalers.node_templates import NodeTemplates
from harness.settings import check, duration

if TYPE_CHECKING:
    from harness.cluster import Cluster
    from harness.view import SimulationView
    from harness.workload import Workload

#: Float scores closer than this (relative to the best, if above 1) are a tie.
TIE = 1e-12


@dataclass(frozen=True)
class PodPricing:
    """Unit prices a pod's requests are priced at (upstream's PricingModel.PodPrice), per hour."""

    cpu_per_core: float
    memory_per_gib: float

    def price(self, cpu_milli, mem_mib, gpus=0.0, per_gpu=0.0):
        """The hourly price of these requests (arrays or scalars); `gpus` may be fractional."""
        return cpu_milli / 1000 * self.cpu_per_core + mem_mib / 1024 * self.memory_per_gib + gpus * per_gpu

    @property
    def stabilization(self) -> float:
        """Upstream's priceStabilizationPod, 500m CPU and 500 MiB, at these prices."""
        return float(self.price(500, 500))


#: gce_price_model.go / gce_price_info.go: cpuPricePerHour, memoryPricePerHourPerGb ($/GiB-h)
GCE = PodPricing(cpu_per_core=0.033174, memory_per_gib=0.004446)


def per_gpu_prices(cluster: Cluster, pricing: PodPricing = GCE) -> dict[str, float]:
    """Per GPU model, the cheapest hourly price a GPU of it costs in this cluster: a pool's
    node price (as it bills new nodes) less the node's CPU and memory at the unit prices,
    shared among its GPUs (at least 0)."""
    types = {t.name: t for t in cluster.node_types}
    prices: dict[str, float] = {}
    for pool in cluster.pools:
        t = types[pool.node_type]
        if t.gpus:
            gpu = max(pool.price - float(pricing.price(t.cpu_milli, t.memory_mib)), 0.0) / t.gpus
            prices[t.gpu_model] = min(prices.get(t.gpu_model, np.inf), gpu)
    return prices


def pod_prices(cluster: Cluster, w: Workload, pricing: PodPricing = GCE) -> np.ndarray:
    """Every pod's hourly price in view w (upstream's PodPrice): CPU and memory at the unit
    prices, its GPUs (shares as fractions) at the cheapest per-GPU price of a model it accepts."""
    per_gpu = np.full(w.n_pods, np.inf)
    for model, price in per_gpu_prices(cluster, pricing).items():  # a few models, not pods
        accepts = (w.model_mask == 0) | ((w.model_mask & cluster.model_bit(model)) != 0)
        per_gpu = np.where(accepts, np.minimum(per_gpu, price), per_gpu)
    per_gpu[np.isinf(per_gpu)] = 0.0  # no GPU, or a model no pool has (never helped)
    gpus = w.gpu_milli_total / 1000
    return pricing.price(w.cpu, w.mem, gpus, per_gpu)


def preferred_cpu(cluster_nodes: int) -> int:
    """Upstream's SimplePreferredNodeProvider (expander/price/preferred.go): the preferred node's
    CPU (milli) doubles each time the cluster's node count triples: 1 core up to 2 nodes, then
    2, 4, 8, 16 up to 6, 20, 60, 200 nodes, 32 beyond. (Its memory plays no part: the node
    unfitness is CPU only.)"""
    bounds = [2, 6, 20, 60, 200]
    return 1000 * 2 ** int(np.searchsorted(bounds, cluster_nodes))


@dataclass(frozen=True)
class Option:
    """One way to scale up, as the autoscaler sees it: `nodes` new nodes of `pool` that would
    take `helped` pending pods, `committed` of them in the pool's free committed slots. `price`
    is their hourly price, the committed ones at 0 if the autoscaler knows of reservations;
    `waste` upstream least-waste's score, (CPU left free)/(CPU) + (memory left free)/(memory)
    of the new nodes once the pods helped are on them; `priority` the pool's. For `Price`:
    `pod_price` the pods helped's summed hourly price (`pod_prices`), `node_cpu` the pool's node
    CPU (milli), `gpus` whether its nodes have GPUs, `cluster_nodes` the cluster's node count.
    For `PlannerPrice`: `node_price` the pool's price of a node beyond its committed slots,
    `taken` the dominant share the pods helped take of the new nodes, `gpu_milli` the new
    nodes' GPU milli (plan_price.taken)."""

    pool: int
    nodes: int
    helped: int
    price: float
    waste: float
    committed: int = 0
    priority: int = 0
    pod_price: float = 0.0
    node_cpu: int = 1000
    gpus: bool = False
    cluster_nodes: int = 0
    node_price: float = 0.0
    taken: float = 0.0
    gpu_milli: float = 0.0

    @property
    def unit_price(self) -> float:
        """What each pod helped costs an hour (the scheduler's stated preference)."""
        return self.price / self.helped


class Filter(ABC):
    """Keeps the options that are best by one criterion, every one of them on a tie."""

    @abstractmethod
    def best_options(self, options: list[Option]) -> list[Option]: ...

    def attach(self, sim: SimulationView) -> None:
        """Called once by the autoscaler with the cluster it scales, which a filter may watch."""
        self.sim = sim


class Expander(ABC):
    """Picks one option (None from none); `rng` is the autoscaler's seeded stream."""

    @abstractmethod
    def best_option(self, options: list[Option], rng: np.random.Generator) -> Option | None: ...

    def attach(self, sim: SimulationView) -> None:
        """Called once by the autoscaler with the cluster it scales, which an expander may watch."""
        self.sim = sim


def _least(options: list[Option], key) -> list[Option]:
    best = min(map(key, options), default=0.0)
    return [o for o in options if key(o) <= best + TIE * max(1.0, abs(best))]


class LeastWaste(Filter):
    """Least CPU and memory left idle on the new nodes (upstream `least-waste`, its default
    since CA 1.33): `waste` is upstream's (free CPU / CPU + free memory / memory of the new
    nodes over the pods helped), computed from integer sums, so ties are exact as upstream's."""

    def best_options(self, options):
        best = min((o.waste for o in options), default=0.0)
        return [o for o in options if o.waste == best]


#: price.go gpuUnfitnessOverride: the unfitness of any node group with GPUs
GPU_UNFITNESS = 1000.0


class Price(Filter):
    """Upstream `price` (expander/price/price.go): least score, where score = unfitness x
    (nodes' price + s) / (pods helped's price + s), s the stabilization pod's price; the
    unfitness is how far the node's CPU is from the preferred node's (max of both ratios),
    suppressed toward 1 as the option asks for more nodes, and 1000 for nodes with GPUs. (Its
    2x for node groups yet to be created does not arise: our pools exist.) `pricing` prices the
    stabilization pod (upstream's tests use their own model)."""

    def __init__(self, pricing: PodPricing = GCE):
        self.pricing = pricing

    def score(self, o: Option) -> float:
        s = self.pricing.stabilization
        preferred = preferred_cpu(o.cluster_nodes)
        unfitness = max(preferred / o.node_cpu, o.node_cpu / preferred)
        suppressed = (unfitness - 1) * (1 - np.tanh((o.nodes - 1) / 15)) + 1
        if o.gpus:
            suppressed = GPU_UNFITNESS
        return float(suppressed * (o.price + s) / (o.pod_price + s))

    def best_options(self, options):
        return _least(options, self.score)


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


class PlannerPrice(Filter):
    """The options the merged planner would find cheapest (upstream's external `grpc`
    expander, as a service pricing them): an option costs its pool's node price for the nodes
    beyond the free committed slots it fills, times the share of them it pays for, what the
    pods helped take (`Option.taken`) plus the GPUs the demand it sees for the pool would leave
    idle (harness/autoscalers/plan_price.py); least cost, then fewest nodes, as the planner.
    The demand is what such a service can watch: the pods pending and those that arrived in
    the last `demand_window_s` (the merged loop's default) and were placed since."""

    SETTINGS = {"demand_window_s": duration("seconds of past arrivals counted as demand for the free GPUs of "
                                            "the nodes an option buys (0: the pending pods only)")}

    def __init__(self, demand_window_s: float = 600.0):
        check(self, "loop.autoscaler.expander.filters", demand_window_s=demand_window_s)
        self.demand_window_s = float(demand_window_s)

    def attach(self, sim: SimulationView) -> None:
        super().attach(sim)
        # a service that watches the cluster learns the node groups' devices as the autoscaler does
        self.templates = NodeTemplates(sim, from_nodes=True)
        self.demand = plan_price.Demand(sim, self.demand_window_s, self.templates)

    def cost(self, o: Option, demand_milli: np.ndarray) -> float:
        """What option o costs an hour, as the merged planner prices a plan."""
        paid = plan_price.share(o.taken, o.gpu_milli, demand_milli[o.pool])
        return plan_price.cost(o.node_price, o.nodes, o.committed, paid)

    def best_options(self, options):
        self.templates.refresh(self.sim.now)
        demand = self.demand.seen_milli(self.sim.now)
        cheapest = _least(options, lambda o: self.cost(o, demand))
        fewest = min((o.nodes for o in cheapest), default=0)
        return [o for o in cheapest if o.nodes == fewest]


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

    def attach(self, sim: SimulationView) -> None:
        super().attach(sim)
        for f in self.filters:
            f.attach(sim)
        self.fallback.attach(sim)

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
