"""tests/compose_memo.py: a remembered composition is the composition afresh, each caller's own,
and a change to the config folder's files is seen."""

from __future__ import annotations

import shutil
from pathlib import Path

from harness import config
from tests.compose_memo import remembered

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
