"""A config's `_target_` runs code: loopbench builds only the package's classes and functions and
those of the modules named in $LOOPBENCH_PLUGINS, and refuses any other by its key before
anything is built, from the command line, a cluster file on a search path, compare's loops and
`import --transforms` alike."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.config import compose
from harness.errors import ConfigError
from harness.hydra_builds import check, check_before_hydra
from harness.importers.cli import main as import_main
from harness.replay import build
from harness.settings import check_config, instantiate
from tests.test_cli import loopbench, one_line_error

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
REFUSED = "not a loopbench component: a _target_ names a class or function of the harness package"


def test_builtins_open_from_the_command_line_opens_nothing(tmp_path):
    opened = tmp_path / "opened"
    r = loopbench("replay", f"trace.path={ROOT / 'traces' / 'default.parquet'}", "+loop.x._target_=builtins.open", f"+loop.x.file={opened}", "+loop.x.mode=w",
                  f"hydra.run.dir={tmp_path}/run", cwd=tmp_path)
    line = one_line_error(r)
    assert line == (f"loopbench replay: error: loop.x._target_ = 'builtins.open': {REFUSED} or of a module named "
                    "in $LOOPBENCH_PLUGINS (comma-separated module names), e.g. LOOPBENCH_PLUGINS=builtins if it "
                    "is your own"), line
    assert not opened.exists()


@pytest.mark.parametrize("override", ["+loop.x._target_=builtins.open", "runner._target_=builtins.open",
                                      "+policy.y={_target_: builtins.open}"])
def test_a_target_anywhere_in_the_config_is_refused_by_its_key(override, tmp_path):
    key = override.lstrip("+").split("=")[0]
    key = key if key.endswith("_target_") else key + "._target_"
    with pytest.raises(ConfigError, match=rf"^{key.replace('.', '[.]')} = 'builtins.open': {REFUSED}"):
        check_config(compose("config", [override]))


def test_a_name_merely_imported_into_the_package_is_refused():
    """`harness.replay.np.save` lies under harness but is numpy's: it would write a file."""
    with pytest.raises(ConfigError, match=r"^runner._target_ = 'harness.replay.np.save': names numpy.save, "
                                          "defined outside them"):
        check_config(compose("config", ["runner._target_=harness.replay.np.save"]))


def test_shutil_copyfile_as_a_cluster_on_a_search_path_copies_nothing(tmp_path):
    source, copy = tmp_path / "source.txt", tmp_path / "copy.txt"
    source.write_text("secret\n")
    (tmp_path / "extra" / "cluster").mkdir(parents=True)
    (tmp_path / "extra" / "cluster" / "shared.yaml").write_text(
        f"_target_: shutil.copyfile\nsrc: {source}\ndst: {copy}\n")
    cfg = compose("config", [f"hydra.searchpath=[file://{tmp_path / 'extra'}]", "cluster=shared"])
    with pytest.raises(ConfigError, match=rf"^cluster._target_ = 'shutil.copyfile': {REFUSED}"):
        build(cfg)
    assert not copy.exists()


def test_compare_refuses_a_blocked_target_before_any_loop_runs(tmp_path):
    from hydra import initialize_config_dir

    from harness.compare import loop_configs
    from harness.config import conf_dir

    opened = tmp_path / "opened"
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"), \
            pytest.raises(ConfigError, match=rf"^loop.x._target_ = 'builtins.open': {REFUSED}"):
        loop_configs(["merged", "separate"], ["+loop.x._target_=builtins.open", f"+loop.x.file={opened}",
                                              "+loop.x.mode=w"])
    assert not opened.exists()


def test_import_transforms_with_a_blocked_target_is_one_line(tmp_path, capsys):
    opened, steps = tmp_path / "opened", tmp_path / "steps.yaml"
    steps.write_text(f"- _target_: harness.transforms.Compress\n  factor: 2\n"
                     f"- _target_: builtins.open\n  file: {opened}\n  mode: w\n")
    code = import_main(["helios", str(FIX / "helios" / "cluster_log.csv"), "-o", str(tmp_path / "t.parquet"),
                        "--transforms", str(steps)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err, err
    assert err == (f"loopbench import: error: --transforms {steps}: [1]._target_ = 'builtins.open': {REFUSED} "
                   "or of a module named in $LOOPBENCH_PLUGINS (comma-separated module names), e.g. "
                   "LOOPBENCH_PLUGINS=builtins if it is your own\n"), err
    assert not opened.exists() and not (tmp_path / "t.parquet").exists()


def test_a_harness_component_is_built():
    from harness.scores import LeastAllocated

    assert isinstance(instantiate({"_target_": "harness.scores.LeastAllocated"}, "policy"), LeastAllocated)


USER_MODULE = '''
from pathlib import Path
Path(__file__).with_name("imported").touch()  # what importing it did


class Mine:
    def __init__(self, n=1):
        self.n = n
'''


@pytest.fixture()
def user_module(tmp_path, monkeypatch) -> Path:
    """A module of the user's on the path, which leaves a file beside itself when imported."""
    (tmp_path / "my_plugin").mkdir()
    (tmp_path / "my_plugin" / "__init__.py").write_text("")
    (tmp_path / "my_plugin" / "policies.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("my_plugin", "my_plugin.policies"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delenv("LOOPBENCH_PLUGINS", raising=False)
    return tmp_path / "my_plugin" / "imported"


def test_a_module_not_named_as_a_plugin_is_not_even_imported(user_module):
    with pytest.raises(ConfigError, match=r"^policy._target_ = 'my_plugin.policies.Mine': not a loopbench "
                                          r".*e.g. LOOPBENCH_PLUGINS=my_plugin.policies if it is your own$"):
        instantiate({"_target_": "my_plugin.policies.Mine"}, "policy")
    assert not user_module.exists()


@pytest.mark.parametrize("named", ["my_plugin.policies", "my_plugin", "other, my_plugin"])
def test_a_module_named_as_a_plugin_is_built(named, user_module, monkeypatch):
    """A package named covers its modules; the names are comma-separated."""
    monkeypatch.setenv("LOOPBENCH_PLUGINS", named)
    built = instantiate({"_target_": "my_plugin.policies.Mine", "n": 3}, "policy")
    assert type(built).__name__ == "Mine" and built.n == 3 and user_module.exists()


def test_a_prefix_of_a_name_is_not_the_name(user_module, monkeypatch):
    monkeypatch.setenv("LOOPBENCH_PLUGINS", "my_plug")
    with pytest.raises(ConfigError, match="not a loopbench component"):
        instantiate({"_target_": "my_plugin.policies.Mine"}, "policy")
    assert not user_module.exists()


@pytest.mark.parametrize("target, why", [
    ("nowhere_module.Packed", "ModuleNotFoundError: No module named 'nowhere_module'"),
    ("my_plugin.policies.Nope", "AttributeError: module 'my_plugin.policies' has no attribute 'Nope'"),
])
def test_a_named_plugin_that_cannot_be_imported_is_refused_by_the_policy_key(target, why, user_module, monkeypatch):
    """Named but not on the path (or misspelt): one line naming the policy's key (not the loop
    it is built into), what the import said and the fix."""
    monkeypatch.setenv("LOOPBENCH_PLUGINS", f"{target.split('.')[0]}")
    cfg = compose("config", [f"policy._target_={target}"])
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    assert str(err.value) == (f"policy._target_ = '{target}': cannot be imported ({why}): put the folder that holds "
                              "your module on PYTHONPATH (or install it), and check the module and name in the path")


# ---- what Hydra builds itself: callbacks, logging, a job's environment ----------------------------

def shared_config(tmp_path: Path, hydra_yaml: str, cluster: str = "  _target_: harness.cluster.Cluster.default\n"):
    """A cluster config on a search path that also sets Hydra's own keys (`@package _global_`),
    and the file a copy would make."""
    source, copy = tmp_path / "source.txt", tmp_path / "copy.txt"
    source.write_text("secret\n")
    folder = tmp_path / "extra" / "cluster"
    folder.mkdir(parents=True)
    text = hydra_yaml.format(src=source, dst=copy)
    (folder / "shared.yaml").write_text(f"# @package _global_\ndefaults:\n  - default@cluster\n{text}")
    return f"hydra.searchpath=[file://{tmp_path / 'extra'}]", copy


CALLBACK = "hydra:\n  callbacks:\n    x:\n      _target_: shutil.copyfile\n      src: {src}\n      dst: {dst}\n"
LOG_HANDLER = ("hydra:\n  job_logging:\n    version: 1\n    root: {{level: INFO}}\n    handlers:\n      x:\n"
               "        '()': shutil.copyfile\n        src: {src}\n        dst: {dst}\n")
PLUGINS_SET = ("hydra:\n  job:\n    env_set:\n      LOOPBENCH_PLUGINS: shutil\n"
               "trace:\n  x:\n    _target_: shutil.copyfile\n    src: {src}\n    dst: {dst}\n")


def test_a_hydra_callback_from_a_config_file_copies_nothing(tmp_path):
    """Hydra instantiates `hydra.callbacks` before any task runs: a cluster file on a search path
    made it copy a file (and the run went on, with warnings)."""
    searchpath, copy = shared_config(tmp_path, CALLBACK)
    r = loopbench("replay", searchpath, "cluster=shared", f"hydra.run.dir={tmp_path}/run", cwd=tmp_path)
    assert one_line_error(r) == (f"loopbench replay: error: hydra.callbacks.x._target_ = 'shutil.copyfile': "
                                 f"{REFUSED} or of a module named in $LOOPBENCH_PLUGINS (comma-separated module "
                                 "names), e.g. LOOPBENCH_PLUGINS=shutil if it is your own")
    assert not copy.exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize("config", ["config", "compare", "generate"])
def test_a_hydra_callback_from_the_command_line_is_refused_before_hydra_builds_it(config, tmp_path):
    copy = tmp_path / "copy.txt"
    with pytest.raises(ConfigError, match=rf"^hydra.callbacks.x._target_ = 'shutil.copyfile': {REFUSED}"):
        check_before_hydra(config, ["+hydra.callbacks.x._target_=shutil.copyfile", f"+hydra.callbacks.x.src={__file__}",
                                    f"+hydra.callbacks.x.dst={copy}"])
    assert not copy.exists()


def test_a_logging_factory_from_a_config_file_is_refused(tmp_path):
    """logging.config.dictConfig calls the `()` a handler names: it copied a file, then failed
    with a traceback."""
    searchpath, copy = shared_config(tmp_path, LOG_HANDLER)
    with pytest.raises(ConfigError, match=r"^hydra.job_logging.handlers.x.\(\) = 'shutil.copyfile': a logging "
                                          "factory must be one of logging's own"):
        check_before_hydra("config", [searchpath, "cluster=shared"])
    assert not copy.exists()


def test_a_config_may_not_name_the_plugins(tmp_path):
    """`hydra.job.env_set` is set in the environment before the task runs: a config that names
    shutil as a plugin made loopbench build shutil.copyfile."""
    searchpath, copy = shared_config(tmp_path, PLUGINS_SET)
    with pytest.raises(ConfigError) as err:
        check_before_hydra("config", [searchpath, "cluster=shared"])
    assert str(err.value) == ("hydra.job.env_set.LOOPBENCH_PLUGINS = 'shutil': a config may not name the plugins: "
                              "set $LOOPBENCH_PLUGINS in the environment loopbench starts in")


def test_a_sweeps_job_may_not_name_the_plugins_either(tmp_path):
    """A sweep's own config leaves its values out; the job that selects the file is refused
    before anything of it is built, and the sweep's other job runs."""
    searchpath, copy = shared_config(tmp_path, PLUGINS_SET)
    r = loopbench("replay", "-m", searchpath, "cluster=default,shared", "horizon_s=600",
                  f"trace.path={ROOT / 'traces' / 'default.parquet'}", "loop=merged",
                  f"hydra.sweep.dir={tmp_path}/sweep", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "error: hydra.job.env_set.LOOPBENCH_PLUGINS = 'shutil': a config may not name the plugins" in r.stderr
    assert not copy.exists() and (tmp_path / "sweep" / "0" / "metrics.parquet").exists()


@pytest.mark.parametrize("flag", ["--config-dir", "--config-path", "--config-name", "--experimental-rerun"])
def test_hydras_options_that_read_configs_from_elsewhere_are_refused(flag, tmp_path):
    with pytest.raises(ConfigError, match=f"^{flag}: not taken by loopbench"):
        check_before_hydra("config", [flag, str(tmp_path)])


def test_hydras_own_logging_and_loopbenchs_callback_pass():
    cfg = compose("config", ["hydra/job_logging=default", "hydra/hydra_logging=default"], with_hydra=True)
    check(cfg.hydra)  # StreamHandler, FileHandler, Formatter; harness.sweep_summary.SweepSummary
