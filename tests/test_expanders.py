"""Expanders as strategy objects (harness/loops/expanders.py): the upstream expander tests that
map onto our options (docs/upstream-cases.md section 3, kubernetes/autoscaler
cluster-autoscaler/expander/...), chains as `--expander=a,b`, and selection from YAML."""

from __future__ import annotations

import numpy as np
import pytest
from hydra.utils import instantiate

from harness.config import compose
from harness.loops.expanders import (
    Chain,
    Expander,
    Filter,
    LeastNodes,
    LeastWaste,
    MostPods,
    Option,
    Price,
    Priority,
    Random,
    Reserved,
    SchedulerPreference,
)
from harness.metrics import nodes_frame
from harness.settings import SettingError, check_config
from tests import scenarios as sc

from .test_settings import CONF


def opt(pool: int, nodes: int = 1, helped: int = 1, price: float = 1.0, waste: float = 0.5, **kw) -> Option:
    return Option(pool, nodes, helped, price, waste, **kw)


def pools(options) -> list[int]:
    return [o.pool for o in options]


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


# ---- upstream: expander/leastnodes/leastnodes_test.go TestLeastNodes ------------------------

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


# ---- upstream: expander/mostpods/mostpods_test.go TestMostPods ------------------------------

def test_most_pods():
    eo0, eo1, eo1b = opt(0, helped=0), opt(1, helped=1), opt(2, helped=1)
    assert MostPods().best_options([eo0]) == [eo0]
    assert MostPods().best_options([eo0, eo1]) == [eo1]
    assert MostPods().best_options([eo0, eo1, eo1b]) == [eo1, eo1b]


# ---- upstream: expander/random/random_test.go TestRandomExpander ----------------------------

def test_random():
    one, two = opt(0), opt(1)
    assert Random().best_option([one], rng()) is one
    assert Random().best_option([one, two], rng()) in (one, two)
    assert Random().best_option([], rng()) is None


def test_the_seeded_stream_moves_once_per_real_choice():
    """Results stay what they were: one draw among the options the filters left, none for one."""
    stream, ref = rng(), rng()
    options = [opt(0, waste=0.1), opt(1, waste=0.3), opt(2, waste=0.1), opt(3, waste=0.1)]
    assert Chain([LeastWaste()]).best_option(options, stream) is [options[0], *options[2:]][int(ref.integers(3))]
    assert Chain([LeastWaste()]).best_option(options[:2], stream) is options[0]
    assert stream.integers(1 << 30) == ref.integers(1 << 30)


# ---- upstream: expander/priority/priority_test.go (an integer per pool for the regexes) -------
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


# ---- upstream: expander/price/price_test.go TestPriceExpander, the steps without node-size
# preference (both node types are equally unfit there, so the price ratio decides) ----------

@pytest.mark.parametrize("case, n1, n2, ng1, ng2, expected", [
    ("First node group is cheaper.", 20.0, 200.0, (2, 2), (1, 2), 0),
    ("Second node group is cheaper", 200.0, 100.0, (2, 2), (1, 2), 1),
    ("Both node groups are equally expensive. However 2 accept two pods.", 200.0, 200.0, (2, 1), (1, 2), 1),
])
def test_price(case, n1, n2, ng1, ng2, expected):
    options = [opt(0, nodes=ng1[0], helped=ng1[1], price=ng1[0] * n1),
               opt(1, nodes=ng2[0], helped=ng2[1], price=ng2[0] * n2)]
    assert pools(Price().best_options(options)) == [expected]


def test_price_is_per_pod_helped():
    """Ours: the dearer option in total wins if each pod it helps costs less."""
    options = [opt(0, nodes=1, helped=1, price=100.0), opt(1, nodes=2, helped=4, price=200.0)]
    assert pools(Price().best_options(options)) == [1]


# ---- upstream: expander/waste/waste_test.go TestLeastWaste, through the autoscaler's estimate --

def test_least_waste_through_the_estimate():
    """One pod of 500m / 1000 MiB; balanced 8000m / 16000 MiB, highmem 8000m / 32000 MiB, lowcpu
    4000m / 16000 MiB. Upstream: balanced beats highmem, lowcpu beats both."""
    def chosen(types: list[str]) -> str:
        shapes = {"balanced": (8000, 16000), "highmem": (8000, 32000), "lowcpu": (4000, 16000)}
        cl = sc.cluster([sc.node_type(t, cpu_milli=shapes[t][0], memory_mib=shapes[t][1], gpus=0, gpu_model="")
                         for t in types], [sc.pool(t, t) for t in types])
        table = sc.trace([{"cpu_milli": 500, "memory_mib": 1000, "gpu_count": 0, "gpu_milli": 0}])
        _, sim = sc.run(table, cl, sc.separate(expander=Chain([LeastWaste()])), horizon_s=600.0)
        (pool,) = nodes_frame(sim)["pool"].to_list()
        return pool

    for order in (["balanced", "highmem"], ["highmem", "balanced"]):
        assert chosen(order) == "balanced"
    assert chosen(["balanced", "highmem", "lowcpu"]) == "lowcpu"


# ---- upstream: expander/factory/chain_test.go TestChainStrategy_BestOption -------------------
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


def test_a_chain_is_upstream_s_expander_list():
    """--expander=least-waste,price: waste first, price breaks its tie, random what is left."""
    options = [opt(0, waste=0.2, price=1.0), opt(1, waste=0.1, price=3.0), opt(2, waste=0.1, price=2.0)]
    assert Chain([LeastWaste(), Price()]).best_option(options, rng()).pool == 2
    assert Chain([Price(), LeastWaste()]).best_option(options, rng()).pool == 0


# ---- the autoscaler's switches as chain members --------------------------------------------

def test_reservation_aware_runs_the_chain_behind_the_reserved_filter():
    from harness.loops.cluster_autoscaler import ClusterAutoscaler

    chain = ClusterAutoscaler(expander=Chain([Price()]), reservation_aware=True).expander
    assert [type(f) for f in chain.filters] == [Reserved, Price] and isinstance(chain.fallback, Random)
    assert type(ClusterAutoscaler(expander=Chain([Price()]), scheduler_prefers=True).expander) is SchedulerPreference
    options = [opt(0, price=0.0, committed=0), opt(1, price=5.0, committed=1), opt(2, price=5.0, committed=2)]
    assert Reserved().best_options(options) == options[1:]
    assert Reserved().best_options(options[:1]) == options[:1]  # none reserved: all stay


def test_the_scheduler_s_preference_is_the_cheapest_then_the_first_pool_never_random():
    options = [opt(3, price=4.0, helped=2), opt(1, price=2.0), opt(0, price=6.0, helped=2)]
    stream = rng()
    assert SchedulerPreference().best_option(options, stream).pool == 1  # 4/2 == 2/1 < 6/2: the first pool
    assert stream.integers(1 << 30) == rng().integers(1 << 30)


# ---- YAML: conf/loop/autoscaler/expander, chains, and the old spelling ---------------------

@pytest.mark.parametrize("name, filters", [
    ("random", []), ("least_waste", [LeastWaste]), ("price", [Price]), ("priority", [Priority]),
    ("most_pods", [MostPods]), ("least_nodes", [LeastNodes]),
])
def test_every_expander_file_builds_its_chain(name, filters):
    assert (CONF / "loop" / "autoscaler" / "expander" / f"{name}.yaml").exists()
    cfg = compose("config", [f"loop/autoscaler/expander={name}"])
    check_config(cfg)
    autoscaler = instantiate(cfg.loop.autoscaler)
    assert [type(f) for f in autoscaler.expander.filters] == filters
    assert isinstance(autoscaler.expander.fallback, Random)


def test_a_chain_from_the_command_line():
    chain = ("loop.autoscaler.expander.filters=[{_target_:harness.loops.expanders.LeastWaste},"
             "{_target_:harness.loops.expanders.Price}]")
    cfg = compose("config", ["loop=separate_reservation", chain])
    check_config(cfg)
    assert [type(f) for f in instantiate(cfg.loop.autoscaler).expander.filters] == [Reserved, LeastWaste, Price]


def test_the_old_word_is_refused_with_the_way_to_pick_one():
    cfg = compose("config", ["loop.autoscaler.expander=price"])
    with pytest.raises(SettingError, match=r"loop.autoscaler.expander = 'price': must be null or an instance of "
                                           r"Expander or a config with a _target_ .*loop/autoscaler/expander=NAME"):
        check_config(cfg)
