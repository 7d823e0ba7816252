"""Bad input a run meets outside the corpus's files (tests/test_malformed.py): a config file
that is not YAML, a value built from Python with numpy numbers, a bad `loopbench results
--jobs`, a corrupt cache of compiled kernels. Each is one line naming what and where, never a
traceback; the cache is repaired and the run goes on."""

from __future__ import annotations

import numpy as np
import pytest

from harness import results
from harness.config import compose
from harness.errors import ConfigError
from harness.settings import SettingError
from tests import scenarios as sc
from tests.test_cli import loopbench, one_line_error
from tests.test_kueue import kueue, queue, static_cluster

NOT_YAML = {
    "duplicate_key": ("name: mine\nautoscaling: true\nautoscaling: false\n", 3,
                      "not valid YAML: found duplicate key autoscaling"),
    "tab_indent": ("name: mine\npools:\n\t- {name: a}\n", 3, "not valid YAML: found character '\\t'"),
    "open_bracket": ("name: mine\npools: [{name: a}\n", 3, "not valid YAML: expected ',' or ']'"),
}


def my_cluster(tmp_path, text: str):
    (tmp_path / "cluster").mkdir()
    path = tmp_path / "cluster" / "mine.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", sorted(NOT_YAML))
def test_a_config_file_that_is_not_yaml_is_one_error_naming_file_and_line(case, tmp_path):
    text, line, rule = NOT_YAML[case]
    path = my_cluster(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        compose("config", [f"hydra.searchpath=[file://{tmp_path}]", "cluster=mine"])
    assert err.value.where == f"{path}, line {line}" and rule in err.value.rule, str(err.value)


@pytest.mark.parametrize("command", ["replay", "compare"])
def test_the_command_says_a_duplicate_key_in_one_line(command, tmp_path):
    path = my_cluster(tmp_path, NOT_YAML["duplicate_key"][0])
    r = loopbench(command, f"hydra.searchpath=[file://{tmp_path}]", "cluster=mine", cwd=tmp_path)
    assert one_line_error(r) == (f"loopbench {command}: error: {path}, line 3: not valid YAML: "
                                 "found duplicate key autoscaling")
    assert not list(tmp_path.rglob("*.parquet"))


def test_hydras_own_errors_stay_short(tmp_path):
    r = loopbench("replay", "nosuch=1", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[0] == "Could not override 'nosuch'.", r.stderr


# ---- numbers built from Python show as numbers ---------------------------------------------------

def test_a_numpy_price_shows_as_a_plain_number():
    with pytest.raises(ConfigError) as err:
        sc.cluster([sc.node_type("h8")], [sc.pool("a", "h8", price_on_demand=np.float64("nan"))])
    assert str(err.value).endswith("expected finite float, got nan"), str(err.value)


def test_a_numpy_quota_shows_as_a_plain_number():
    with pytest.raises(ConfigError) as err:
        static_cluster(kueue(queue("q", np.float64(-5.0))))
    assert str(err.value).endswith("got -5.0") and "np." not in str(err.value), str(err.value)


def test_a_numpy_setting_shows_as_a_plain_number():
    with pytest.raises(SettingError) as err:
        sc.separate(scan_interval_s=np.float64(-5.0))
    assert str(err.value).startswith("loop.autoscaler.scan_interval_s = -5.0: must be a number >= 1")


# ---- loopbench results ---------------------------------------------------------------------------

@pytest.mark.parametrize("jobs", ["0", "-3"])
def test_results_refuses_fewer_than_one_job(jobs, tmp_path):
    with pytest.raises(ConfigError) as err:
        results.main(["--jobs", jobs, "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs")])
    assert str(err.value) == f"--jobs: must be an integer >= 1 (concurrent replay processes), got {jobs}"
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()

