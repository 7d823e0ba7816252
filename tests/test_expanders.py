"""Expanders as strategy objects (harness/autoscalers/expanders.py): our own rules around them (the
seeded stream, price per pod helped, chains as `--expander=a,b`, the autoscaler's switches as
chain members) and selection from YAML. The translated upstream expander cases are in
tests/conformance/test_cluster_autoscaler.py."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from harness.autoscalers.expanders import (
    Chain,
    LeastNodes,
    LeastWaste,
    MostPods,
    PlannerPrice,
    Price,
    Priority,
    Random,
    Reserved,
    SchedulerPreference,
    per_gpu_prices,
    pod_prices,
)
from harness.config import compose
from harness.settings import SettingError, check_config
from harness.workload import compile_workload
from tests import scenarios as sc

from .conformance.test_cluster_autoscaler import opt, pools, rng
from .test_settings import CONF


def test_the_seeded_stream_moves_once_per_real_choice():
    """Results stay what they were: one draw among the options the filters left, none for one."""
    stream, ref = rng(), rng()
    options = [opt(0, waste=0.1), opt(1, waste=0.3), opt(2, waste=0.1), opt(3, waste=0.1)]
    assert Chain([LeastWaste()]).best_option(options, stream) is [options[0], *options[2:]][int(ref.integers(3))]
    assert Chain([LeastWaste()]).best_option(options[:2], stream) is options[0]
    assert stream.integers(1 << 30) == ref.integers(1 << 30)


def test_price_weighs_the_pods_helped_by_their_price_not_their_count():
    """Upstream's ratio divides by the pods' price (PodPrice), not their number: one dear pod
    helped (50) for 100 beats four cheap ones (40 in all) for 200, though per pod it costs more."""
    options = [opt(0, nodes=1, helped=1, price=100.0, pod_price=50.0),
               opt(1, nodes=2, helped=4, price=200.0, pod_price=40.0)]
    assert pools(Price().best_options(options)) == [0]


def test_pod_prices_take_the_cheapest_gpu_of_a_model_the_pod_accepts():
    """GPUs are priced per model from the cluster's own price list: the cheapest pool's node price
    less its CPU and memory at GCE's unit prices, per GPU; a pod's price does not depend on the
    pool that would take it. H100: min(90, 55 less 128 cores and 1000 GiB) / 8; L4: 3.2 less
    48 cores and 192 GiB, / 4; a pod that names no model takes the cheaper (L4)."""
    types = [{"name": "nvl", "cpu_milli": 192000, "memory_mib": 2048 * 1024, "gpus": 8, "gpu_model": "H100"},
             {"name": "pcie", "cpu_milli": 128000, "memory_mib": 1000 * 1024, "gpus": 8, "gpu_model": "H100"},
             {"name": "l4", "cpu_milli": 48000, "memory_mib": 192 * 1024, "gpus": 4, "gpu_model": "L4"}]
    cl = sc.cluster(types, [sc.pool("a", "nvl", price_on_demand=90.0), sc.pool("b", "pcie", price_on_demand=55.0),
                            sc.pool("c", "l4", price_on_demand=3.2)])
    h100 = (55.0 - 128 * 0.033174 - 1000 * 0.004446) / 8
    l4 = (3.2 - 48 * 0.033174 - 192 * 0.004446) / 4
    assert per_gpu_prices(cl) == pytest.approx({"H100": h100, "L4": l4})
    w = compile_workload(sc.trace([{"cpu_milli": 2000, "memory_mib": 4096, "gpu_models": ["H100"]},
                                   {"cpu_milli": 2000, "memory_mib": 4096, "gpu_count": 2},
                                   {"cpu_milli": 500, "memory_mib": 512, "gpu_count": 0, "gpu_milli": 0}]), cl)
    base = 2 * 0.033174 + 4 * 0.004446
    assert pod_prices(cl, w) == pytest.approx([base + h100, base + 2 * l4, 0.5 * 0.033174 + 0.5 * 0.004446])


def test_a_chain_is_upstream_s_expander_list():
    """--expander=least-waste,price: waste first, price breaks its tie, random what is left."""
    options = [opt(0, waste=0.2, price=1.0), opt(1, waste=0.1, price=3.0), opt(2, waste=0.1, price=2.0)]
    assert Chain([LeastWaste(), Price()]).best_option(options, rng()).pool == 2
    assert Chain([Price(), LeastWaste()]).best_option(options, rng()).pool == 0


# ---- the autoscaler's switches as chain members --------------------------------------------

def test_reservation_aware_runs_the_chain_behind_the_reserved_filter():
    from harness.autoscalers.cluster_autoscaler import ClusterAutoscaler

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
    ("most_pods", [MostPods]), ("least_nodes", [LeastNodes]), ("planner_price", [PlannerPrice]),
    ("committed_first", [Reserved, LeastWaste]),
])
def test_every_expander_file_builds_its_chain(name, filters):
    assert (CONF / "loop" / "autoscaler" / "expander" / f"{name}.yaml").exists()
    cfg = compose("config", [f"loop/autoscaler/expander={name}"])
    check_config(cfg)
    autoscaler = instantiate(cfg.loop.autoscaler)
    assert [type(f) for f in autoscaler.expander.filters] == filters
    assert isinstance(autoscaler.expander.fallback, Random)


def test_a_chain_from_the_command_line():
    chain = ("loop.autoscaler.expander.filters=[{_target_:harness.autoscalers.expanders.LeastWaste},"
             "{_target_:harness.autoscalers.expanders.Price}]")
    cfg = compose("config", ["loop=separate_reservation", chain])
    check_config(cfg)
    assert [type(f) for f in instantiate(cfg.loop.autoscaler).expander.filters] == [Reserved, LeastWaste, Price]


def test_the_old_word_is_refused_with_the_way_to_pick_one():
    cfg = compose("config", ["loop.autoscaler.expander=price"])
    with pytest.raises(SettingError, match=r"loop.autoscaler.expander = 'price': must be null or an instance of "
                                           r"Expander or a config with a _target_ .*loop/autoscaler/expander=NAME"):
        check_config(cfg)
