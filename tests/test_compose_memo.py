"""tests/compose_memo.py: a remembered composition is the composition afresh, each caller's own,
and a change to the config folder's files is seen; a remembered YAML load is each caller's own,
and a file that does not load is an error naming it each time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from harness import config
from tests.compose_memo import remembered, remembered_load

ROOT = Path(__file__).resolve().parents[1]


def test_a_remembered_composition_is_each_callers_own_and_follows_the_files(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    monkeypatch.setenv("LOOPBENCH_CONF", str(conf))
    calls = []

    def counted(name, overrides, with_hydra=False):
        calls.append(tuple(overrides))
        return config.compose(name, overrides, with_hydra)

    compose = remembered(counted)
    first = compose("config", ["seed=3"])
    first.seed = 4  # a test changes what it got
    again = compose("config", ["seed=3"])
    assert again.seed == 3 and again is not first and calls == [("seed=3",)]
    assert compose("config", ["seed=5"]).seed == 5 and len(calls) == 2
    text = (conf / "config.yaml").read_text()
    (conf / "config.yaml").write_text(text.replace("timeline_interval_s: 60", "timeline_interval_s: 30"))
    assert compose("config", ["seed=3"]).timeline_interval_s == 30 and len(calls) == 3


def test_a_remembered_yaml_load_is_each_callers_own_and_an_error_names_the_file_every_time(tmp_path):
    calls = []

    def counted(stream):
        calls.append(getattr(stream, "name", "<file>"))
        return OmegaConf.create(yaml.safe_load(stream))

    load = remembered_load(counted)
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("a: {b: 1}\n")
    first = load(good)
    first.a.b = 2  # a caller changes what it got
    with good.open(encoding="utf-8") as f:
        again = load(f)
    assert again == {"a": {"b": 1}} and again is not first and calls == [str(good)]
    bad.write_text("a: [1, 2\nb: 3\n")
    for _ in range(2):
        with pytest.raises(yaml.YAMLError, match=f'in "{bad}", line 1, column 4'):
            load(bad)
    assert calls == [str(good), str(bad), str(bad)]
