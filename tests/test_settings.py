"""No setting can hang or crash a run: every setting has a rule, declared beside its component
(a class's SETTINGS), a bad one is refused by key, value and rule before anything is built,
from the command line (one line, exit 1) and from Python (the constructors check the same
rules)."""

from __future__ import annotations

import importlib
import inspect
import itertools
import numbers
import pkgutil
import re
import shutil
from pathlib import Path

import pytest
import yaml
from hydra.utils import get_object
from omegaconf import OmegaConf

import harness
from harness.autoscalers.cluster_autoscaler import ClusterAutoscaler
from harness.autoscalers.karpenter import KarpenterAutoscaler
from harness.autoscalers.scale_down import ScaleDown
from harness.config import compose
from harness.errors import ConfigError
from harness.generate import SyntheticWorkload
from harness.loops.merged import MergedLoop
from harness.scheduler import Scheduler
from harness.scheduler.gang import Coscheduling
from harness.scores import FGD, LeastAllocated
from harness.settings import (
    ELSEWHERE,
    Rule,
    SettingError,
    check,
    check_config,
    fraction,
    integer,
    number,
    rule_for,
    rules_of,
    walk,
)
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc
from tests.cli_in_process import Ran
from tests.cli_in_process import loopbench as run_cli

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


def loopbench(*args: str, cwd: Path, conf: Path = CONF) -> Ran:
    """The CLI, in this process, with `conf` as the config folder."""
    return run_cli(*args, cwd=cwd, env={"LOOPBENCH_CONF": str(conf)})


def one_error_line(r: Ran, command: str) -> str:
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert lines[0].startswith(f"loopbench {command}: error: "), lines[0]
    return lines[0].removeprefix(f"loopbench {command}: error: ")


# ---- the command line: the known bad cases; before, each hung, crashed or ran meaning nothing ---

#: override(s) -> the start of the error line: key = value: rule
REPLAY = {
    "timeline_interval_s=0": "timeline_interval_s = 0: must be a number >= 1 (seconds between timeline samples",
    "timeline_interval_s=-60": "timeline_interval_s = -60: must be a number >= 1",
    "loop.autoscaler.scan_interval_s=0": "loop.autoscaler.scan_interval_s = 0: must be a number >= 1 (seconds between "
                                         "autoscaler scans)",
    "loop.autoscaler.scan_interval_s=-1": "loop.autoscaler.scan_interval_s = -1: must be a number >= 1",
    "loop=merged loop.scan_interval_s=0": "loop.scan_interval_s = 0: must be a number >= 1",
    "loop=merged loop.max_node_provision_time_s=0": "loop.max_node_provision_time_s = 0: must be a number > 0",
    "loop=merged loop.backoff_s=-1": "loop.backoff_s = -1: must be a number >= 0",
    "loop=separate_karpenter loop.autoscaler.poll_s=0": "loop.autoscaler.poll_s = 0: must be a number >= 1",
    "loop=separate_karpenter loop.autoscaler.requeue_s=0": "loop.autoscaler.requeue_s = 0: must be a number >= 1",
    "loop.scheduler.gang.timeout_s=0": "loop.scheduler.gang.timeout_s = 0: must be a number >= 1",
    "loop=separate_preemption loop.scheduler.post_filter.min_candidate_nodes_percentage=101":
        "loop.scheduler.post_filter.min_candidate_nodes_percentage = 101: must be an integer in [0, 100]",
    "loop=separate_preemption loop.scheduler.post_filter.min_candidate_nodes_percentage=0 "
    "loop.scheduler.post_filter.min_candidate_nodes_absolute=0":
        "loop.scheduler.post_filter: min_candidate_nodes_percentage and min_candidate_nodes_absolute = 0: they "
        "cannot both be 0",
    "seed=abc": "seed = 'abc': must be an integer >= 0",
    "seed=-1": "seed = -1: must be an integer >= 0",
    "horizon_s=abc": "horizon_s = 'abc': must be null or a number in (0, ",
    "loop.autoscaler.scale_down.utilization_threshold=1.5":
        "loop.autoscaler.scale_down.utilization_threshold = 1.5: must be a number in [0, 1]",
    "experiment=openb_packing runner.target_ratio=0": "runner.target_ratio = 0: must be a number in (0, 10]",
    # refused by the key the user set, not the loop's leaf interpolated from it
    "consolidation=maybe": "consolidation = 'maybe': must be true or false",
    "loop=separate_karpenter consolidation=2": "consolidation = 2: must be true or false",
}


@pytest.fixture(scope="module")
def tiny_trace(tmp_path_factory) -> Path:
    from harness.trace import TraceMeta, write_trace

    path = tmp_path_factory.mktemp("trace") / "tiny.parquet"
    gang = {"job_id": "g", "min_member": 2, "gpu_count": 8}
    write_trace(sc.trace([{}, gang, gang]), path, TraceMeta("test", "CC0-1.0", "trace start"))
    return path


@pytest.mark.parametrize("overrides", sorted(REPLAY))
def test_a_bad_setting_is_one_line_and_exit_1(overrides, tiny_trace, tmp_path):
    r = loopbench("replay", f"trace.path={tiny_trace}", f"hydra.run.dir={tmp_path}/run", *overrides.split(),
                  cwd=tmp_path)
    assert one_error_line(r, "replay").startswith(REPLAY[overrides])
    assert not (tmp_path / "run" / "metrics.parquet").exists()


@pytest.mark.parametrize("override, error", [
    ("seed=abc", "seed = 'abc': must be an integer >= 0"),
    ("workload.gangs.rate_per_h=abc", "workload.gangs.rate_per_h = 'abc': must be a number >= 0"),
    ("workload.span_s=0", "workload.span_s = 0: must be a number in (0, "),
    ("workload.inference.cpu_milli=[4000,1000]", "workload.inference.cpu_milli = [4000, 1000]: must be [lo, hi]"),
    ("workload.gangs.rate_per_h=1e12", "workload: the rates draw about 2.8e+13 jobs over span_s, more than"),
    ("workload.n_jobs=100000000", "workload.n_jobs: about 100,000,000 jobs would need about 120.2 GB"),
    ("workload=services workload.services.chat.window_s=1 workload.span_s=315000000",
     "workload.services.chat.window_s: 1 s windows over span_s 3.15e+08 s make 325,500,003 demand rows"),
])
def test_a_bad_generator_setting_is_one_line_and_exit_1(override, error, tmp_path):
    r = loopbench("generate", *override.split(), f"out={tmp_path}/t.parquet", cwd=tmp_path)
    assert one_error_line(r, "generate").startswith(error)
    assert not (tmp_path / "t.parquet").exists()


def test_a_cluster_error_names_the_yaml_file_the_pool_and_the_value(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    cluster = yaml.safe_load((CONF / "cluster" / "default.yaml").read_text())
    cluster["pools"][1]["stock"] = -2
    (conf / "cluster" / "broken.yaml").write_text(yaml.safe_dump(cluster))
    r = loopbench("replay", "cluster=broken", f"trace.path={ROOT / 'traces' / 'default.parquet'}",
                  f"hydra.run.dir={tmp_path}/run", cwd=tmp_path, conf=conf)
    assert one_error_line(r, "replay") == (f"{conf / 'cluster' / 'broken.yaml'}: pool 'nvl-ondemand' at "
                                           "cluster.pools[1].stock: must be null (unlimited) or in [0, 1,000,000], got -2")


# ---- Python: the constructors check the same rules ------------------------------------------

def tiny_sim(**kw) -> Simulation:
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8")])
    return Simulation(compile_workload(sc.trace([{}]), cl), cl, **{"seed": 0, "horizon_s": 3600.0, **kw})


@pytest.mark.parametrize("build, error", [
    (lambda: ClusterAutoscaler(scan_interval_s=0), "loop.autoscaler.scan_interval_s = 0: must be a number >= 1"),
    (lambda: ClusterAutoscaler(backoff_s=-1.0), "loop.autoscaler.backoff_s = -1.0: must be a number >= 0"),
    (lambda: ClusterAutoscaler(expander="cheapest"),
     "loop.autoscaler.expander = 'cheapest': must be null or an instance of Expander or a config with a _target_"),
    (lambda: ScaleDown(utilization_threshold=-0.1),
     "scale_down.utilization_threshold = -0.1: must be a number in [0, 1]"),
    (lambda: MergedLoop(Scheduler(LeastAllocated()), scan_interval_s=-10), "loop.scan_interval_s = -10: must be a number >= 1"),
    (lambda: KarpenterAutoscaler(poll_s=0), "loop.autoscaler.poll_s = 0: must be a number >= 1"),
    (lambda: KarpenterAutoscaler(max_candidates=2.5), "loop.autoscaler.max_candidates = 2.5: must be an integer >= 0"),
    (lambda: Coscheduling(timeout_s=0), "loop.scheduler.gang.timeout_s = 0: must be a number >= 1"),
    (lambda: Scheduler(LeastAllocated(), pre_filter="yes"),
     "loop.scheduler.pre_filter = 'yes': must be null or an instance of Plugin or a config with a _target_"),
    (lambda: FGD(coverage=0), "policy.coverage = 0: must be a number in (0, 1]"),
    (lambda: tiny_sim(timeline_interval_s=0), "timeline_interval_s = 0: must be a number >= 1"),
    (lambda: tiny_sim(seed=-1), "seed = -1: must be an integer >= 0"),
    (lambda: SyntheticWorkload(span_s=float("inf")), "workload.span_s = inf: must be a number in (0, "),
    (lambda: SyntheticWorkload(cpu={"duration_sigma": -1}), "workload.cpu.duration_sigma = -1: must be a number >= 0"),
])
def test_a_constructor_refuses_a_bad_setting(build, error):
    with pytest.raises(SettingError) as err:
        build()
    assert str(err.value).startswith(error)


def test_the_generator_refuses_rates_that_would_not_fit_in_memory():
    with pytest.raises(ConfigError, match=r"the rates draw about 8.76e\+09 jobs"):
        SyntheticWorkload(span_s=86400.0 * 365, inference={"rate_per_h": 1e6})
    SyntheticWorkload(span_s=86400.0 * 365, inference={"rate_per_h": 1e3})  # ~10M jobs: allowed


# ---- the rules cover every setting --------------------------------------------------------

def replay_configs():
    """Every loop, policy, cluster, experiment, replica autoscaler, buffer, scenario, setup and
    expander, each with the others at their defaults."""
    for group in ("loop", "policy", "cluster", "experiment", "replicas", "buffer", "+scenario", "+setup"):
        for option in sorted(p.stem for p in (CONF / group.lstrip("+")).glob("*.yaml")):
            yield [f"{group}={option}"]
    for option in sorted(p.stem for p in (CONF / "loop" / "autoscaler" / "expander").glob("*.yaml")):
        yield [f"loop/autoscaler/expander={option}"]


def generate_configs():
    for workload, cluster in itertools.product(*(sorted(p.stem for p in (CONF / g).glob("*.yaml"))
                                                 for g in ("workload", "cluster"))):
        yield [f"workload={workload}", f"cluster={cluster}"]


ALL = ([("config", o) for o in replay_configs()] + [("compare", [])]
       + [("generate", o) for o in generate_configs()])


@pytest.mark.parametrize("name, overrides", ALL, ids=lambda x: x if isinstance(x, str) else " ".join(x))
def test_every_setting_of_every_config_has_a_rule_and_the_defaults_pass(name, overrides):
    """Each value the config sets has a rule, and so has each numeric constructor parameter of
    the components it names (a setting a YAML leaves at its default is still one a user may set)."""
    cfg = compose(name, overrides)
    check_config(cfg)  # the shipped configs are valid
    unruled = [s.key for s in walk(cfg) if s.rule is None and isinstance(s.value, (numbers.Number, bool))]
    assert not unruled, f"settings without a rule in their component's SETTINGS: {unruled}"
    missing = unruled_parameters(set(_targets(OmegaConf.to_container(cfg))))
    assert not missing, f"constructor settings without a rule in their class's SETTINGS: {missing}"


def test_hydra_s_own_settings_are_left_to_hydra():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = hydra_compose("config", ["experiment=loops_synthetic"], return_hydra_config=True)
    check_config(cfg)  # ${now:...} in hydra.run.dir resolves only in a run
    assert not [s for s in walk(cfg) if s.key.startswith("hydra")]


def _targets(node):
    """The `_target_` of every node of a config (as plain containers)."""
    if isinstance(node, dict):
        yield from [node["_target_"]] if "_target_" in node else []
        node = list(node.values())
    for v in node if isinstance(node, list) else []:
        yield from _targets(v)


def unruled_parameters(targets: set[str]) -> list[str]:
    """The numeric constructor parameters of these components that have no rule."""
    missing = []
    for target in sorted(targets - set(ELSEWHERE)):
        for p in inspect.signature(get_object(target)).parameters.values():
            typed = re.search(r"\b(int|float|bool)\b", str(p.annotation))
            numeric = isinstance(p.default, (numbers.Number, bool)) or typed
            # a mapping of numbers (e.g. a policy's resource weights) has a rule for each entry
            if numeric and rule_for(target, (p.name,)) is None and rule_for(target, (p.name, "*")) is None:
                missing.append(f"{target}({p.name})")
    return missing


def test_the_components_no_yaml_names_have_a_rule_for_each_numeric_parameter():
    assert unruled_parameters({"harness.scores.DotProd", "harness.scores.BestFit", "harness.scores.GpuClustering"}) == []


# ---- the rules themselves -------------------------------------------------------------------

@pytest.mark.parametrize("rule, good, bad, text", [
    (number("x", gt=0), [1e-3, 5, 1e300], [0, -1, float("nan"), float("inf"), "1", True, None], "must be a number > 0"),
    (number("x", gt=0, le=10, null=True), [None, 10, 0.5], [0, 10.5], "must be null or a number in (0, 10]"),
    (fraction("x"), [0, 1, 0.5], [-0.01, 1.01], "must be a number in [0, 1]"),
    (integer("x", ge=0), [0, 7, 10**30], [-1, 2.0, 2.5, "3", False], "must be an integer >= 0"),
])
def test_a_rule_says_what_it_allows(rule: Rule, good, bad, text):
    assert all(rule.allows(v) for v in good)
    assert not any(rule.allows(v) for v in bad)
    assert str(rule) == text


def test_an_unknown_component_or_setting_has_no_rule():
    assert rule_for("harness.nope.Nothing", ("weight",)) is None
    assert rule_for("", ("trace", "path")) is None
    assert rule_for("harness.scores.FGD", ("weight",)) is rule_for("harness.scores.ScorePlugin", ("weight",))


def test_a_component_s_rules_are_found_by_its_target_and_by_the_class_itself():
    assert rules_of("harness.scheduler.Scheduler") == rules_of(Scheduler)  # by its public name too
    assert rule_for(Coscheduling, ("timeout_s",)) is Coscheduling.SETTINGS["timeout_s"]
    assert rule_for("", ("seed",)) is not None


def test_check_takes_the_component_not_a_name():
    """A typed name could name nothing and check nothing: check derives it from `self`."""
    with pytest.raises(TypeError, match="pass the component itself"):
        check("harness.scores.FGD", "policy", coverage=0)
    with pytest.raises(SettingError, match=r"^policy.coverage = 0: must be a number in \(0, 1\]"):
        check(FGD(), "policy", coverage=0)


def _components():
    """Every class and function of the package that declares rules (its own SETTINGS)."""
    for info in pkgutil.walk_packages(harness.__path__, "harness."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if ((isinstance(obj, type) or inspect.isfunction(obj)) and obj.__module__ == info.name
                    and "SETTINGS" in vars(obj)):
                yield obj


def test_every_rule_names_a_setting_its_component_takes():
    """A rule keyed by a misspelt setting would check nothing: its first key is a parameter."""
    components = list(_components())
    assert {ScaleDown, Coscheduling, SyntheticWorkload} <= set(components)
    wrong = [f"{c.__qualname__}.SETTINGS[{key!r}]" for c in components for key in c.SETTINGS
             if key.split(".")[0] not in {"*", *inspect.signature(c).parameters}]
    assert not wrong, f"rules of no setting: {wrong}"


@pytest.mark.parametrize("target, error", [
    ("harness.nope.Nothing", "Error loading 'harness.nope.Nothing'"),
    ("harness.scores.Nothing", "Error loading 'harness.scores.Nothing'"),
])
def test_an_unknown_target_is_left_to_hydra_s_error(target, error, tiny_trace, tmp_path):
    """A `_target_` naming nothing has no rules here; instantiating it says what is wrong."""
    overrides = [f"loop.autoscaler._target_={target}"]
    check_config(compose("config", overrides))
    r = loopbench("replay", f"trace.path={tiny_trace}", f"hydra.run.dir={tmp_path}/run", *overrides, cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.startswith(f"loopbench replay: error: loop: cannot instantiate: {error}"), r.stderr


def test_an_integer_written_in_e_notation_says_how_to_write_it():
    """Hydra reads 1e8 as a float: refused as an integer setting, the message says the fix."""
    with pytest.raises(SettingError, match=r"= 100000000\.0: must be null or an integer .*: write it as 100000000$"):
        check_config(compose("generate", ["workload.n_jobs=1e8"]))
