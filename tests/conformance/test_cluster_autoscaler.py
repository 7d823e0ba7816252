"""Cluster Autoscaler scale-up as upstream: the binpacking estimator, the scale-up orchestrator's
options and cluster-wide limits, the least-waste expander, node-group backoff.

Each test translates one upstream case of kubernetes/autoscaler (cluster-autoscaler/...), named
in its docstring with the inputs and the outcome as upstream states them. Units: upstream's
millicores are our cpu_milli; upstream's memory (bytes or MiB) is our memory_mib, with memory that
never binds upstream (bytes against MiB nodes) given as 1 MiB pods on nodes of thousands of MiB.
docs/conformance.md lists every case considered.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from harness.autoscalers.cluster_autoscaler import MAX_CLUSTER_CORES, MAX_CLUSTER_MEMORY_GIB, ClusterAutoscaler
from harness.autoscalers.expanders import (
    GCE,
    Chain,
    Expander,
    Filter,
    LeastNodes,
    LeastWaste,
    MostPods,
    Option,
    PodPricing,
    Price,
    Priority,
    Random,
    preferred_cpu,
)
from harness.cluster import Cluster
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc

MIB_PER_GIB = 1024


class Chooses(Expander):
    """Upstream's test expander: records the options it is handed (`ExpansionOptions`) and picks
    the one of the pool named (`ExpansionOptionToChoose`)."""

    def __init__(self, pool: int | None = None):
        self.pool, self.seen = pool, []

    def best_option(self, options, rng):
        self.seen = [(o.pool, o.nodes) for o in options]
        return next((o for o in options if o.pool == self.pool), options[0] if options else None)


def cpu_type(name: str, cpu: int, mem: int, gpus: int = 0) -> dict:
    return {"name": name, "cpu_milli": cpu, "memory_mib": mem, "gpus": gpus, "gpu_model": "H100" if gpus else ""}


def setup(types: list[dict], pods: list[dict], full: list[tuple[int, int, int]] | None = None,
          max_size: int = 10, min_size: int = 0, prices: list[float] | None = None, **autoscaler):
    """One pool per node type (`max_size`, `min_size` nodes already there, ready, at `prices`
    an hour, 0 if not given); `full`: per
    pool, (cpu, mem, GPUs) of upstream's `Pods` already bound on its one node; the `pods` (upstream's
    `ExtraPods`) are pending. Returns (sim, autoscaler, pending units in queue order)."""
    prices = prices or [0.0] * len(types)
    pools = [sc.pool(t["name"], t["name"], max_size=max_size, min_size=min_size, price_on_demand=price)
             for t, price in zip(types, prices, strict=True)]
    cl = Cluster(node_types=types, pools=pools, autoscaling=True, name="conformance")
    rows = [{"cpu_milli": 1, "memory_mib": 1, "gpu_count": 0, "gpu_milli": 0, **p} for p in pods]
    sim = Simulation(compile_workload(sc.trace(rows), cl), cl, seed=0, horizon_s=3600.0)
    autoscaler.setdefault("expander", Chooses())
    loop = sc.separate(**autoscaler)
    loop.attach(sim)
    ca = loop.autoscaler
    for p, (cpu, mem, gpus) in enumerate(full or []):
        n = int(np.flatnonzero((sim.state.slot_pool == p) & (sim.state.status != 0))[0])
        sim.state.bind(n, cpu, mem, np.arange(gpus), 1000 if gpus else 0)
    sim.advance_to(0.0)  # the pods arrive, pending
    return sim, ca, ca._pending_units(None)


def granted(sim) -> dict[str, int]:
    """Nodes asked per pool, still booting (upstream's FinalOption)."""
    return dict(Counter(sim.cluster.pools[r.pool].name for r in sim.nodes if np.isnan(r.ready_at)))


# ---- estimator/binpacking_estimator_test.go TestBinpackingEstimate --------------------------

def test_simple_resource_based_binpacking():
    """`simple resource-based binpacking`: template 1000m (350*3-50) / 2000 MiB, 10 pods of 350m
    (1000 B upstream; 1000 MiB here binds the same way) -> 5 nodes, 10 pods."""
    _, ca, units = setup([cpu_type("t", 1000, 2000)], [{"cpu_milli": 350, "memory_mib": 1000}] * 10)
    assert ca._estimate(0, units)[:2] == (5, 10)


def test_limiter_cuts_binpacking():
    """`limiter cuts binpacking`: template 1000m / 5000 MiB, 20 pods of 500m / 1000 B, maxNodes 5
    -> 5 nodes, 10 pods (the limiter is the pool's free slots: max_size 5)."""
    _, ca, units = setup([cpu_type("t", 1000, 5000)], [{"cpu_milli": 500}] * 20, max_size=5)
    assert ca._estimate(0, units)[:2] == (5, 10)


def test_decreasing_ordered_pods_are_processed_first():
    """`decreasing ordered pods are processed first`: template 1000m / 5000 MiB, groups
    [10 x 50m, 10 x 500m] in that order, maxNodes 5 -> 5 nodes, 10 pods, the processed ones the
    500m group (the 50m group alone would open one node)."""
    _, ca, units = setup([cpu_type("t", 1000, 5000)], [{"cpu_milli": 50}] * 10 + [{"cpu_milli": 500}] * 10,
                         max_size=5)
    assert ca._estimate(0, units)[:2] == (5, 10)


def test_fastpath_simple_resource_based_binpacking():
    """`fastpath - simple resource-based binpacking`: as the first case, one equivalence group
    placed at once (ours always packs a group in one vector step) -> 5 nodes, 10 pods."""
    _, ca, units = setup([cpu_type("t", 1000, 2000)], [{"cpu_milli": 350, "memory_mib": 1000}] * 10)
    groups = ca._groups(units, np.array([u[0] for u in units]))
    assert len(groups) == 1 and ca._estimate(0, units, groups)[:2] == (5, 10)


# ---- core/scaleup/orchestrator/orchestrator_test.go ------------------------------------------

def test_will_consider_all_pools_which_fit_two_pods_requiring_gpus():
    """TestWillConsiderAllPoolsWhichFitTwoPodsRequiringGpus: MaxNodesTotal 100; gpu-1/2/4-pool and
    std-pool, one full node each (2000m / 1000 MiB, 1/2/4/0 GPUs); 3 extra pods of 1m / 1 MiB /
    1 GPU; choose gpu-1-pool +3 -> ExpansionOptions {gpu-1 +3, gpu-2 +2, gpu-4 +1}, final gpu-1 +3."""
    types = [cpu_type(f"gpu-{g}-pool", 2000, 1000, g) for g in (1, 2, 4)] + [cpu_type("std-pool", 2000, 1000)]
    sim, ca, _ = setup(types, [{"cpu_milli": 1, "memory_mib": 1, "gpu_count": 1, "gpu_milli": 1000}] * 3,
                       full=[(2000, 1000, 1), (2000, 1000, 2), (2000, 1000, 4), (2000, 1000, 0)], min_size=1,
                       max_nodes_total=100, expander=Chooses(pool=0))
    ca._scale_up(0.0)
    assert sorted(ca.expander.seen) == [(0, 3), (1, 2), (2, 1)]
    assert granted(sim) == {"gpu-1-pool": 3}


def test_will_consider_only_gpu_pool_for_pod_which_does_requires_gpu():
    """TestWillConsiderOnlyGpuPoolForPodWhichDoesRequiresGpu: gpu-pool (1 GPU) and std-pool, both
    full (2000m / 1000 MiB); extra pod 2000m / 1000 MiB / 1 GPU -> options {gpu-pool +1}."""
    types = [cpu_type("gpu-pool", 2000, 1000, 1), cpu_type("std-pool", 2000, 1000)]
    sim, ca, _ = setup(types, [{"cpu_milli": 2000, "memory_mib": 1000, "gpu_count": 1, "gpu_milli": 1000}],
                       full=[(2000, 1000, 1), (2000, 1000, 0)], min_size=1, max_nodes_total=100,
                       expander=Chooses(pool=0))
    ca._scale_up(0.0)
    assert ca.expander.seen == [(0, 1)] and granted(sim) == {"gpu-pool": 1}


def test_will_consider_gpu_and_standard_pool_for_pod_which_does_not_require_gpu():
    """TestWillConsiderGpuAndStandardPoolForPodWhichDoesNotRequireGpu: gpu-pool (1 GPU) and
    std-pool, both full; extra pod 2000m / 1000 MiB, no GPU (tolerates the GPU taint upstream; our
    pools are untainted here); choose std-pool +1 -> options {std-pool +1, gpu-pool +1}."""
    types = [cpu_type("gpu-pool", 2000, 1000, 1), cpu_type("std-pool", 2000, 1000)]
    sim, ca, _ = setup(types, [{"cpu_milli": 2000, "memory_mib": 1000}], full=[(2000, 1000, 1), (2000, 1000, 0)],
                       min_size=1, max_nodes_total=100, expander=Chooses(pool=1))
    ca._scale_up(0.0)
    assert sorted(ca.expander.seen) == [(0, 1), (1, 1)] and granted(sim) == {"std-pool": 1}


class Sees(Filter):
    """Records the options it is handed and keeps them all."""

    def best_options(self, options):
        self.seen = list(options)
        return options


def test_price_expander_skips_the_gpu_pool_for_a_pod_without_gpus():
    """The scenario above under upstream's price expander (price.go gpuUnfitnessOverride: "it
    will never use nodes with expensive GPUs for pods that don't require it"): gpu-pool at 1 an
    hour, std-pool at 2; the pod 2000m / 1000 MiB is priced p = 2 x 0.033174 + 1000/1024 x
    0.004446 (GCE) in both options; 2 ready nodes prefer 1000m, so std-pool's unfitness is 2:
    2 x (2 + s)/(p + s) against gpu-pool's 1000 x (1 + s)/(p + s) -> std-pool +1."""
    types = [cpu_type("gpu-pool", 2000, 1000, 1), cpu_type("std-pool", 2000, 1000)]
    sees = Sees()
    sim, ca, _ = setup(types, [{"cpu_milli": 2000, "memory_mib": 1000}], full=[(2000, 1000, 1), (2000, 1000, 0)],
                       min_size=1, max_nodes_total=100, prices=[1.0, 2.0], expander=Chain([sees, Price()]))
    ca._scale_up(0.0)
    pod = GCE.price(2000, 1000)
    assert [(o.pool, o.pod_price, o.node_cpu, o.gpus, o.cluster_nodes) for o in sorted(sees.seen, key=lambda o: o.pool)] \
        == [(0, pytest.approx(pod), 2000, True, 2), (1, pytest.approx(pod), 2000, False, 2)]
    assert granted(sim) == {"std-pool": 1}


def test_scale_up_ok():
    """TestScaleUpOK: n1 100m / 100 ng1 (p1 80m), n2 1000m / 1000 ng2 (p2 800m); extra p-new 500m;
    choose ng2 +1 -> final ng2 +1 (ng1's template cannot hold 500m)."""
    types = [cpu_type("ng1", 100, 100), cpu_type("ng2", 1000, 1000)]
    sim, ca, _ = setup(types, [{"cpu_milli": 500, "memory_mib": 0}], full=[(80, 0, 0), (800, 0, 0)], min_size=1,
                       expander=Chooses(pool=1))
    ca._scale_up(0.0)
    assert ca.expander.seen == [(1, 1)] and granted(sim) == {"ng2": 1}


LIMIT_NODES = [cpu_type("ng1", 2000, 100), cpu_type("ng2", 4000, 1000)]
LIMIT_PODS = [(1000, 0, 0), (3000, 0, 0)]


def test_scale_up_max_cores_limit_hit():
    """TestScaleUpMaxCoresLimitHit: MaxCoresTotal 9; n1 2000m / 100 ng1 (p1 1000m), n2 4000m / 1000
    ng2 (p2 3000m); extra 2 x 2000m; choose ng1 +2 -> final ng1 +1 (2 + 4 + 2 cores = 8 <= 9)."""
    sim, ca, _ = setup(LIMIT_NODES, [{"cpu_milli": 2000, "memory_mib": 0}] * 2, full=LIMIT_PODS, min_size=1,
                       max_cores_total=9, expander=Chooses(pool=0))
    ca._scale_up(0.0)
    assert (0, 2) in ca.expander.seen and granted(sim) == {"ng1": 1}


def test_scale_up_max_memory_limit_hit():
    """TestScaleUpMaxMemoryLimitHit: MaxMemoryTotal 1300 MiB; n1 2000m / 100 MiB ng1, n2 4000m /
    1000 MiB ng2 (p1 1000m, p2 3000m); extra 3 x 2000m / 100 MiB; choose ng1 +3 -> final ng1 +2."""
    sim, ca, _ = setup(LIMIT_NODES, [{"cpu_milli": 2000, "memory_mib": 100}] * 3, full=LIMIT_PODS, min_size=1,
                       max_memory_total_gib=1300 / MIB_PER_GIB, expander=Chooses(pool=0))
    ca._scale_up(0.0)
    assert (0, 3) in ca.expander.seen and granted(sim) == {"ng1": 2}


def test_scale_up_cap_to_max_total_nodes_limit():
    """TestScaleUpCapToMaxTotalNodesLimit: MaxNodesTotal 3, nodes n1 (ng1) and n2 (ng2) as above;
    extra 3 x 4000m / 100 MiB; choose ng2 +3 -> final ng2 +1."""
    sim, ca, _ = setup(LIMIT_NODES, [{"cpu_milli": 4000, "memory_mib": 100}] * 3, full=LIMIT_PODS, min_size=1,
                       max_nodes_total=3, expander=Chooses(pool=1))
    ca._scale_up(0.0)
    assert ca.expander.seen == [(1, 3)] and granted(sim) == {"ng2": 1}


def test_no_scale_up_max_cores_limit_hit():
    """TestNoScaleUpMaxCoresLimitHit: MaxCoresTotal 7, MaxMemoryTotal 1150 (bytes upstream, MiB
    here: nodes of 100 and 1000); extra 2 x 2000m -> no scale-up, both pods stay unschedulable
    (one more node of either group exceeds the limits)."""
    sim, ca, _ = setup(LIMIT_NODES, [{"cpu_milli": 2000, "memory_mib": 0}] * 2, full=LIMIT_PODS, min_size=1,
                       max_cores_total=7, max_memory_total_gib=1150 / MIB_PER_GIB)
    ca._scale_up(0.0)
    assert ca.expander.seen == [] and granted(sim) == {}


def test_limits_default_to_upstream_s():
    """config/const.go DefaultMaxClusterCores = 5000 * 64, DefaultMaxClusterMemory = 5000 * 64 * 20
    (GiB); flags.go --max-nodes-total 0 (no limit)."""
    ca = ClusterAutoscaler()
    assert (ca.max_nodes_total, ca.max_cores_total, ca.max_memory_total_gib) == (0, 320000, 6400000)
    assert (MAX_CLUSTER_CORES, MAX_CLUSTER_MEMORY_GIB) == (320000, 6400000)


# ---- expander/waste/waste_test.go TestLeastWaste, through the estimate ----------------------

@pytest.mark.parametrize("case, types, chosen", [
    ("one pod, one option", [("balanced", 8000, 16000)], "balanced"),
    ("balanced vs highmem", [("balanced", 8000, 16000), ("highmem", 8000, 32000)], "balanced"),
    ("+ lowcpu", [("balanced", 8000, 16000), ("highmem", 8000, 32000), ("lowcpu", 4000, 16000)], "lowcpu"),
])
def test_least_waste(case, types, chosen):
    """TestLeastWaste: one pod of 500m / 1000 MiB; balanced 8000m / 16000 MiB (waste 15/16 +
    15/16), highmem 8000m / 32000 MiB (15/16 + 31/32), lowcpu 4000m / 16000 MiB (7/8 + 15/16):
    balanced beats highmem, lowcpu beats both. Our default expander is least-waste."""
    sim, ca, units = setup([cpu_type(n, c, m) for n, c, m in types], [{"cpu_milli": 500, "memory_mib": 1000}],
                           expander=None)
    waste = {sim.cluster.pools[p].name: ca._estimate(p, units)[2] for p in range(len(types))}
    expect = {"balanced": 15 / 16 + 15 / 16, "highmem": 15 / 16 + 31 / 32, "lowcpu": 7 / 8 + 15 / 16}
    assert waste == {n: expect[n] for n in waste}
    ca._scale_up(0.0)
    assert granted(sim) == {chosen: 1}


def test_least_waste_keeps_exact_ties_only():
    """waste.go keeps every option whose waste equals the least exactly (`==`), no tolerance."""
    a, b, c = (Option(i, 1, 1, 1.0, w) for i, w in enumerate([0.5, 0.5, 0.5 + 1e-15]))
    assert LeastWaste().best_options([a, b, c]) == [a, b]


def test_least_waste_is_the_default_expander():
    """config/flags/flags.go: --expander defaults to least-waste (since CA 1.33)."""
    chain = ClusterAutoscaler().expander
    assert isinstance(chain, Chain) and [type(f) for f in chain.filters] == [LeastWaste]


# ---- the expanders on options as upstream's tests build them ---------------------------------

def opt(pool: int, nodes: int = 1, helped: int = 1, price: float = 1.0, waste: float = 0.5, **kw) -> Option:
    return Option(pool, nodes, helped, price, waste, **kw)


def pools(options) -> list[int]:
    return [o.pool for o in options]


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


# ---- expander/leastnodes/leastnodes_test.go TestLeastNodes ------------------------

@pytest.mark.parametrize("case, nodes, expected", [
    ("no options", [], []),
    ("no valid options", [0], []),
    ("1 valid option", [2], [0]),
    ("2 valid options, not equal", [2, 1], [1]),
    ("3 valid options, 2 equal", [6, 2, 2], [1, 2]),
    ("3 valid options, all equal", [8, 8, 8], [0, 1, 2]),
    ("6 valid options, 1 invalid option, 3 equal", [23, 0, 5, 8, 5, 5, 22], [2, 4, 5]),
])
def test_least_nodes(case, nodes, expected):
    options = [opt(i, nodes=n) for i, n in enumerate(nodes)]
    assert pools(LeastNodes().best_options(options)) == expected


# ---- expander/mostpods/mostpods_test.go TestMostPods ------------------------------

def test_most_pods():
    eo0, eo1, eo1b = opt(0, helped=0), opt(1, helped=1), opt(2, helped=1)
    assert MostPods().best_options([eo0]) == [eo0]
    assert MostPods().best_options([eo0, eo1]) == [eo1]
    assert MostPods().best_options([eo0, eo1, eo1b]) == [eo1, eo1b]


# ---- expander/random/random_test.go TestRandomExpander ----------------------------

def test_random():
    one, two = opt(0), opt(1)
    assert Random().best_option([one], rng()) is one
    assert Random().best_option([one, two], rng()) in (one, two)
    assert Random().best_option([], rng()) is None


# ---- expander/priority/priority_test.go (an integer per pool for the regexes) -------
# config there: 5: t2.micro, 10: t2.large and t3.large, 50: m4.4xlarge
T2_LARGE, T3_LARGE, T2_MICRO, M4_4XLARGE = (opt(0, priority=10), opt(1, priority=10), opt(2, priority=5),
                                            opt(3, priority=50))


@pytest.mark.parametrize("case, options, expected", [
    ("SelectsSingleMatchingOptionOutOfOne", [T2_LARGE], [T2_LARGE]),
    ("SelectsSingleMatchingOptionOutOfMany", [T2_LARGE, M4_4XLARGE], [M4_4XLARGE]),
    ("DoesNotFallBackToRandomWhenHigherPriorityMatches", [T2_LARGE, opt(9, priority=5)], [T2_LARGE]),
    ("SelectsOneOfTwoMatchingOptionsOutOfMany", [T2_LARGE, T3_LARGE, T2_MICRO], [T2_LARGE, T3_LARGE]),
])
def test_priority(case, options, expected):
    assert Priority().best_options(options) == expected
    assert Chain([Priority()]).best_option(options, rng()) in expected


# ---- expander/price/price_test.go TestPriceExpander ---------------------------------------
# n1 1000m (ng1), n2 4000m (ng2); pods p1 1000m and p2 500m priced 20 and 10, the stabilization
# pod 10: the test's pricing model is 20 per core and nothing for memory, which prices all three
# so. ng1 takes 2 nodes, ng2 1, both help {p1, p2} (pod price 30) unless a step says otherwise.
# The preferred node comes from the test's provider: 2000m or 4000m, i.e. a cluster of 3-6 or
# 7-20 nodes in SimplePreferredNodeProvider's steps.
TEST_PRICING = PodPricing(cpu_per_core=20.0, memory_per_gib=0.0)
PREFERS_2000M, PREFERS_4000M = 3, 7  # cluster sizes whose preferred node has this CPU


P1_P2, P1 = 30.0, 20.0  # the pods helped's price: {p1, p2} or {p1}


def priced(pool: int, nodes: int, node_price: float, pods_price: float, node_cpu: int, cluster_nodes: int,
           gpus: bool = False) -> Option:
    return opt(pool, nodes=nodes, helped=2 if pods_price == P1_P2 else 1, price=nodes * node_price,
               pod_price=pods_price, node_cpu=node_cpu, cluster_nodes=cluster_nodes, gpus=gpus)


def test_price_pricing_model_of_the_test():
    """The test's pod prices (p1 20, p2 10, stabilize 10) are its model's at 20 per core."""
    assert TEST_PRICING.price(1000, 0) == 20 and TEST_PRICING.price(500, 0) == 10
    assert TEST_PRICING.stabilization == 10
    assert [preferred_cpu(PREFERS_2000M), preferred_cpu(PREFERS_4000M)] == [2000, 4000]


@pytest.mark.parametrize("case, n1, n2, ng1, ng2, prefer, expected", [
    # ng1: (2*20+10)/(30+10) x ((2-1)(1-tanh(1/15))+1) = 2.42; ng2: (200+10)/40 x 2 = 10.5
    ("First node group is cheaper.", 20.0, 200.0, (2, P1_P2), (1, P1_P2), PREFERS_2000M, 0),
    # ng1: (100+10)/40 x (3(1-tanh(1/15))+1) = 10.45; ng2: (200+10)/40 x 1 = 5.25
    ("First node group is cheaper, however, the second one is preferred.", 50.0, 200.0, (2, P1_P2), (1, P1_P2),
     PREFERS_4000M, 1),
    # ng1: (1600+10)/40 x (3(1-tanh(79/15))+1) = 40.26; ng2: (8000+10)/40 x 1 = 200.25
    ("First node group is cheaper, the second is preferred but there is lots of nodes to be created.",
     20.0, 200.0, (80, P1_P2), (40, P1_P2), PREFERS_4000M, 0),
    # ng1: (400+10)/40 x 1.93 = 19.8; ng2: (100+10)/40 x 2 = 5.5
    ("Second node group is cheaper", 200.0, 100.0, (2, P1_P2), (1, P1_P2), PREFERS_2000M, 1),
    # ng1 helps p1 only: (400+10)/(20+10) x 1.93 = 26.4; ng2: (200+10)/40 x 2 = 10.5
    ("Both node groups are equally expensive. However 2 accept two pods.", 200.0, 200.0, (2, P1), (1, P1_P2),
     PREFERS_2000M, 1),
])
def test_price(case, n1, n2, ng1, ng2, prefer, expected):
    """expander/price/price_test.go TestPriceExpander, the step commented `case`: node prices n1
    and n2, (node count, pods helped's price) per group, the preferred node's CPU by cluster size."""
    options = [priced(0, ng1[0], n1, ng1[1], 1000, prefer), priced(1, ng2[0], n2, ng2[1], 4000, prefer)]
    assert pools(Price(TEST_PRICING).best_options(options)) == [expected]


def test_price_gpu_unfitness_override():
    """expander/price/price.go gpuUnfitnessOverride (no step of TestPriceExpander has GPUs): a node
    group with GPUs has unfitness 1000 whatever its size, so the "second one is preferred" step
    turns: ng2 (4000m, the preferred size) with GPUs scores (200+10)/40 x 1000 = 5250 against
    ng1's 10.45, and a CPU node group beats a GPU one unless about 1000x cheaper per pod."""
    options = [priced(0, 2, 50.0, P1_P2, 1000, PREFERS_4000M), priced(1, 1, 200.0, P1_P2, 4000, PREFERS_4000M, gpus=True)]
    assert pools(Price(TEST_PRICING).best_options(options)) == [0]


def test_price_gpu_groups_compare_by_price_only():
    """price.go: among node groups with GPUs the override makes every unfitness 1000, so the node
    size no longer counts, only the price ratio with pod prices: ng1 (1000m, far from the
    preferred 4000m) x1 at 25 helping p1 scores 1000 x 35/30 = 1167, ng2 (4000m) x1 at 50 helping
    {p1, p2} 1000 x 60/40 = 1500, so ng1 (without the override ng2 would win, 4.67 vs 1.5)."""
    options = [priced(0, 1, 25.0, P1, 1000, PREFERS_4000M, gpus=True),
               priced(1, 1, 50.0, P1_P2, 4000, PREFERS_4000M, gpus=True)]
    assert pools(Price(TEST_PRICING).best_options(options)) == [0]


def test_price_unfitness_suppressed_by_node_count():
    """price.go supressedUnfitness = (unfitness - 1)(1 - tanh((NodeCount - 1)/15)) + 1, as the
    "lots of nodes to be created" step with n1 at 50: ng1 80 x 50 scores (4000+10)/40 x 1.0001 =
    100.3 against ng2's 200.25, where the unsuppressed unfitness 4 would make it 401."""
    options = [priced(0, 80, 50.0, P1_P2, 1000, PREFERS_4000M), priced(1, 40, 200.0, P1_P2, 4000, PREFERS_4000M)]
    assert pools(Price(TEST_PRICING).best_options(options)) == [0]


@pytest.mark.parametrize("cluster_nodes, cpu", [
    (0, 1000), (2, 1000), (3, 2000), (6, 2000), (7, 4000), (20, 4000), (21, 8000), (60, 8000), (61, 16000),
    (200, 16000), (201, 32000), (10_000, 32000)])
def test_price_preferred_node_by_cluster_size(cluster_nodes, cpu):
    """expander/price/preferred.go SimplePreferredNodeProvider.Node: size <= 2 -> 1 CPU, <= 6 -> 2,
    <= 20 -> 4, <= 60 -> 8, <= 200 -> 16, else 32 (CPU milli; the unfitness reads CPU only)."""
    assert preferred_cpu(cluster_nodes) == cpu


def test_price_gce_pod_price():
    """cloudprovider/gce/gce_price_model.go PodPrice with gce_price_info.go's base prices: CPU
    0.033174 per core-hour, memory 0.004446 per GiB-hour; the stabilization pod (price.go
    priceStabilizationPod, 500m and 500 MiB) at 0.5 x 0.033174 + 500/1024 x 0.004446."""
    assert GCE.price(2000, 4096) == pytest.approx(2 * 0.033174 + 4 * 0.004446)
    assert GCE.stabilization == pytest.approx(0.016587 + 0.00217089844)


# ---- expander/factory/chain_test.go TestChainStrategy_BestOption -------------------
# Options there are strings, filters keep those containing a substring and the fallback takes
# the first such: here each option's pool is the index of its string in NAMES.
NAMES = ["a", "b", "ab", "x", "xa", "xab", "xc", "xaa"]


class Contains(Filter, Expander):  # the test's substring filter-strategy
    def __init__(self, substring: str):
        self.substring = substring

    def best_options(self, options):
        return [o for o in options if self.substring in NAMES[o.pool]]

    def best_option(self, options, rng):
        kept = self.best_options(options)
        return kept[0] if kept else None


@pytest.mark.parametrize("case, filters, fallback, options, expected", [
    ("selects with no filters", [], "a", ["b", "a"], "a"),
    ("filters with one filter", ["a"], "b", ["ab", "b"], "ab"),
    ("filters with multiple filters", ["a", "b"], "x", ["xab", "xa", "x"], "xab"),
    ("selects from multiple after filters", ["x"], "a", ["xc", "xaa", "xab"], "xaa"),
    ("short circuits", ["a", "b"], "x", ["a"], "a"),
])
def test_chain(case, filters, fallback, options, expected):
    chain = Chain([Contains(s) for s in filters], Contains(fallback))
    best = chain.best_option([opt(NAMES.index(n)) for n in options], rng())
    assert NAMES[best.pool] == expected


# ---- utils/backoff/exponential_backoff_test.go ----------------------------------------------

def backoff(initial: float, most: float, reset: float) -> ClusterAutoscaler:
    _, ca, _ = setup([cpu_type("id1", 1000, 1000), cpu_type("id2", 1000, 1000)], [{}],
                     backoff_s=initial, max_backoff_s=most, backoff_reset_s=reset)
    return ca


def backed_off(ca: ClusterAutoscaler, p: int, now: float) -> bool:
    return p not in ca._candidate_pools(now)


M, H = 60.0, 3600.0


def test_backoff_two_keys():
    """TestBackoffTwoKeys: 10 min initial, 1 h max, 3 h reset; backoff id1 at +1 min -> backed
    off at +2 min, not at +11 min; id2 never."""
    ca = backoff(10 * M, H, 3 * H)
    assert not backed_off(ca, 0, 0.0) and not backed_off(ca, 1, 0.0)
    ca.backoff.failed(0, 1 * M)
    assert backed_off(ca, 0, 2 * M) and not backed_off(ca, 1, 0.0)
    assert not backed_off(ca, 0, 11 * M)


def test_max_backoff():
    """TestMaxBackoff: 1 min initial, 3 min max: backed off at 0, not at 1 min; again at 1 min
    (still not over at 3 min); again at 3 min: backed off at 3 min, not at 6 min (capped)."""
    ca = backoff(M, 3 * M, 3 * H)
    ca.backoff.failed(0, 0.0)
    assert backed_off(ca, 0, 0.0) and not backed_off(ca, 0, M)
    ca.backoff.failed(0, M)
    assert backed_off(ca, 0, M) and not backed_off(ca, 0, 3 * M)
    ca.backoff.failed(0, 3 * M)
    assert backed_off(ca, 0, 3 * M) and not backed_off(ca, 0, 6 * M)


def test_backoff_doubles_to_the_max():
    """The default durations (flags.go: 5 min initial, 30 min max) doubling on each failure after
    the last backoff ran out: 5, 10, 20, 30, 30 min."""
    ca = backoff(300.0, 1800.0, 3 * H)
    now, got = 0.0, []
    for _ in range(5):
        ca.backoff.failed(0, now)
        got.append(ca.backoff.until[0] - now)
        now = ca.backoff.until[0] + 10.0
    assert got == [300.0, 600.0, 1200.0, 1800.0, 1800.0]


def test_a_retry_at_the_instant_the_backoff_ends_doubles_it():
    """Ours, not upstream's (it doubles only when `until` is strictly before now, an instant its
    loop never hits exactly): on our 10 s scan grid a pool is asked again exactly when its
    backoff ends, and that retry failing must double the backoff, else a pool that keeps
    failing is probed every 5 min forever: 5, 10, 20, 30 min."""
    ca = backoff(300.0, 1800.0, 3 * H)
    now, got = 0.0, []
    for _ in range(4):
        ca.backoff.failed(0, now)
        got.append(ca.backoff.until[0] - now)
        now = ca.backoff.until[0]
    assert got == [300.0, 600.0, 1200.0, 1800.0]


def test_remove_backoff():
    """TestRemoveBackoff: a removed backoff (a request granted in full, here) starts over at the
    initial duration."""
    ca = backoff(M, 3 * M, 3 * H)
    ca.backoff.failed(0, 0.0)
    ca.backoff.succeeded(0)
    ca.backoff.failed(0, 2 * M)
    assert ca.backoff.until[0] == 3 * M


def test_reset_stale_backoff_data():
    """TestResetStaleBackoffData: 3 h reset: a failure older than 3 h is forgotten, so the next
    backoff is the initial one again; a newer one doubles."""
    ca = backoff(M, 3 * M, 3 * H)
    ca.backoff.failed(0, 0.0)
    ca.backoff.failed(1, H)
    ca.backoff.failed(0, 4 * H)  # id1's failure at 0 is stale at 4 h
    ca.backoff.failed(1, 4 * H)  # id2's at 1 h is not
    assert ca.backoff.until[0] == 4 * H + M and ca.backoff.until[1] == 4 * H + 2 * M
