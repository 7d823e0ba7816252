"""`loopbench results inference_bursts`: its sweep (loops x replica autoscaler x scale-down
window x scenario x seeds), each scenario a services trace with its cluster, the Azure one
imported first (read in place from ../shared/traces)."""

from __future__ import annotations

from harness import results
from harness.config import compose

EXP = results.BY_NAME["inference_bursts"]


def params(sets=()):
    return results.sweep_params(EXP, results._hydra_config(EXP.name, []), sets)


def test_the_sweep_is_loops_x_replica_settings_x_scenarios_x_seeds():
    values = results._sweep_values(params())
    assert values["loop"] == ["separate", "separate_all", "merged"]
    assert values["replicas"] == ["hpa", "keda"] and values["replicas.scale_down_stabilization_s"] == ["0", "300"]
    assert values["scenario"] == ["services_synthetic", "azure_llm"] and values["seed"] == ["0", "1", "2"]
    assert results.sweep_size(params()) == 3 * 2 * 2 * 2 * 3


def test_each_scenario_is_a_services_trace_and_only_the_azure_one_is_imported():
    cfgs = results._each_config(EXP, None, params())
    assert [str(c.trace.services) for c in cfgs] == ["traces/services.services.parquet",
                                                     "runs/traces/azure_llm_x8r6.services.parquet"]
    assert [bool(c.get("import_args")) for c in cfgs] == [False, True]
    argv = [str(a) for a in cfgs[1].import_args]
    assert argv[0] == "azure-llm" and argv[-2:] == ["-o", "runs/traces/azure_llm_x8r6.parquet"]
    assert all(a.startswith("../shared/traces/azure-llm-2023/") for a in argv if a.endswith(".csv"))


def test_a_run_of_the_sweep_composes_its_replica_setting():
    cfg = compose("config", ["experiment=inference_bursts", "replicas=keda", "replicas.scale_down_stabilization_s=0"])
    assert cfg.replicas._target_ == "harness.services.replicas.KedaScaledObject"
    assert cfg.replicas.scale_down_stabilization_s == 0 and str(cfg.trace.path) == "traces/services.parquet"
