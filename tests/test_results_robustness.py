"""`loopbench results loops_robustness`: the grid's sweep (one dimension picks a trace with its
cluster), each scenario's import, smaller sweeps with --set, and the openb cluster's provider."""

from __future__ import annotations

import pytest

from harness import results
from harness.errors import ConfigError
from harness.settings import check

GRID = results.BY_NAME["loops_robustness"]


def grid_params(sets=()):
    return results.sweep_params(GRID, results._hydra_config(GRID.name, []), sets)


def test_the_grid_is_5_loops_x_2_scorings_x_2_providers_x_2_scenarios_x_5_seeds():
    params = grid_params()
    values = results._sweep_values(params)
    assert values["loop"] == ["separate", "separate_2026", "separate_2026_priced", "merged", "merged_kueue"]
    assert values["policy"] == ["kube_default", "bin_packing"] and values["++cluster.shortage"] == ["error", "silent"]
    assert values["scenario"] == ["synthetic", "openb_autoscaled"] and values["seed"] == ["0", "1", "2", "3", "4"]
    assert results.sweep_size(params) == 200
    # the loops cost unevenly (the Karpenter-like one most): each of two processes takes a provider
    assert [p[3] for p in results.shards(params, 2, GRID.shard_along)] == ["++cluster.shortage=error",
                                                                           "++cluster.shortage=silent"]
    assert all(p[1] == f"loop={params['loop']}" for p in results.shards(params, 2, GRID.shard_along))


def test_a_scenario_selects_a_trace_with_its_cluster_and_each_is_prepared():
    cfgs = results._each_config(GRID, None, grid_params())
    assert [str(c.trace.path) for c in cfgs] == ["traces/default.parquet",
                                                 "runs/traces/openb_default_from112d_x40.parquet"]
    assert [c.cluster["_target_"] for c in cfgs] == ["harness.cluster.Cluster", "harness.results.openb_cluster"]
    assert [bool(c.get("import_args")) for c in cfgs] == [False, True]  # only openb's trace is imported
    one = results._each_config(GRID, None, grid_params(["scenario=synthetic"]))
    assert [str(c.trace.path) for c in one] == ["traces/default.parquet"]


def test_set_makes_a_smaller_sweep_of_the_same_experiment():
    params = grid_params(["seed=0", "loop=separate,merged", "scenario=synthetic"])
    assert results.sweep_size(params) == 2 * 2 * 2 * 1 * 1
    with pytest.raises(ConfigError, match=r"--set: 'seeds' is not a sweep key of loops_robustness"):
        grid_params(["seeds=0"])
    with pytest.raises(ConfigError, match=r"--set: expected KEY=VALUES .*got 'seed'"):
        grid_params(["seed"])


def test_set_is_refused_with_check(capsys):
    from harness.cli import main

    assert main(["results", "loops_robustness", "--check", "--set", "seed=0"]) == 1
    assert "--set: --check regenerates the committed sweep whole" in capsys.readouterr().err


def test_openb_cluster_passes_the_provider_behaviour_only_when_given(monkeypatch):
    seen = []
    monkeypatch.setattr(results, "Cluster", lambda **kw: seen.append(kw) or kw)
    monkeypatch.setattr(results, "_resolve", lambda p: type("P", (), {"exists": lambda self: True,
                                                                      "__str__": lambda self: "n.csv"})())
    monkeypatch.setattr("harness.importers.cli.openb_cluster_config",
                        lambda path: {"_target_": "x", "name": "openb", "node_types": [], "pools": []})
    results.openb_cluster("n.csv", autoscaled=False)
    results.openb_cluster("n.csv", autoscaled=False, shortage="silent")
    assert [kw.get("shortage") for kw in seen] == [None, "silent"]


def test_the_openb_scenario_makes_stock_scarce_so_the_provider_matters(tmp_path):
    """Each pool's stock is redrawn hourly between half its max_size and all of it; a fraction
    outside [0, 1] is refused naming the key."""
    import pathlib
    nodes = pathlib.Path(__file__).resolve().parents[2] / "shared/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv"
    if not nodes.exists():
        pytest.skip(f"{nodes} absent: the shared openb traces are needed")
    cl = results.openb_cluster(str(nodes), stock_low=0.5, shortage="silent")
    assert all(p.stock_varies is not None and p.stock_varies.low == p.max_size // 2 and p.stock == p.max_size
               and p.stock_varies.period_s == 3600.0 for p in cl.pools)
    assert all(p.stock is None for p in results.openb_cluster(str(nodes)).pools)
    with pytest.raises(ConfigError, match=r"cluster.stock_low"):
        check(results.openb_cluster, "cluster", stock_low=1.5)


def test_the_openb_cluster_queues_one_tenant_on_a_flavor_per_node_model():
    """Kueue's section of the openb cluster (for separate_kueue in the grid): one ClusterQueue
    `default` (openb's queue), a flavor per pool in the pools' order, and as nominal quota all
    that pool may hold, so Kueue never holds back what the cluster could run."""
    cfg = {"node_types": [{"name": "a", "cpu_milli": 96000, "memory_mib": 786432, "gpus": 8},
                          {"name": "b", "cpu_milli": 64000, "memory_mib": 262144}],
           "pools": [{"name": "a", "node_type": "a", "max_size": 3}, {"name": "b", "node_type": "b", "max_size": 2}]}
    k = results.single_tenant_queue(cfg)
    assert k["resource_flavors"] == [{"name": "a", "pools": ["a"]}, {"name": "b", "pools": ["b"]}]
    assert k["local_queues"] == [{"name": "default", "cluster_queue": "default"}]
    (cq,) = k["cluster_queues"]
    assert cq["name"] == "default" and cq["cohort"] is None
    assert cq["flavors"] == [{"name": "a", "nominal": {"gpu": 24, "cpu": 288.0, "memory": 2304.0}},
                             {"name": "b", "nominal": {"gpu": 0, "cpu": 128.0, "memory": 512.0}}]
