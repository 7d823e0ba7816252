"""`loopbench compare` with a loop's own setting (`loop.KEY=VALUE`, `+`, `++`): it applies to
every compared loop, so one that only some of them have is refused before any loop runs, naming
the loops without it and the `loops=` of those with it. In-process: composing is all it takes."""

from __future__ import annotations

import pytest

from harness.compare import loop_configs
from harness.config import conf_dir
from harness.errors import ConfigError


@pytest.fixture()
def hydra():
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        yield


@pytest.mark.parametrize("form", ["", "+", "++"])
def test_a_setting_some_loops_lack_is_refused_naming_them_and_the_loops_that_work(form, hydra):
    with pytest.raises(ConfigError) as err:
        loop_configs(["separate", "merged", "separate_topology"], [f"{form}loop.autoscaler.topology_aware=true"])
    assert str(err.value) == ("loop.autoscaler.topology_aware: loop 'merged' has no such setting; "
                              "compare the loops that have it: loops=separate,separate_topology")


def test_the_loops_lacking_it_are_all_named(hydra):
    with pytest.raises(ConfigError, match=r"^loop.scan_interval_s: loops 'separate', 'separate_topology' have "
                                          r"no such setting; compare the loops that have it: loops=merged$"):
        loop_configs(["separate", "merged", "separate_topology"], ["loop.scan_interval_s=20"])


def test_a_new_key_needs_the_part_it_goes_in_in_every_loop(hydra):
    with pytest.raises(ConfigError, match=r"^loop.autoscaler.brand_new: loop 'merged' has no loop.autoscaler to add "
                                          r"it to; compare the loops that have it: loops=separate$"):
        loop_configs(["separate", "merged"], ["++loop.autoscaler.brand_new=1"])


@pytest.mark.parametrize("form", ["", "++"])
def test_a_setting_every_loop_has_applies_to_each(form, hydra):
    configs = loop_configs(["separate", "separate_topology"], [f"{form}loop.autoscaler.topology_aware=true",
                                                               "loop.autoscaler.scan_interval_s=20"])
    assert [(c.loop.autoscaler.topology_aware, c.loop.autoscaler.scan_interval_s) for c in configs.values()] == [
        (True, 20), (True, 20)]


def test_an_earlier_override_can_add_what_a_later_one_sets(hydra):
    """Each loop's own setting is checked against the configs the overrides before it made."""
    plugin = "harness.scheduler.capacity.WaitsForCapacity"
    configs = loop_configs(["separate", "separate_topology"], ["+loop.scheduler.extra={_target_: nothing.Yet}",
                                                               f"loop.scheduler.extra._target_={plugin}"])
    assert [c.loop.scheduler.extra._target_ for c in configs.values()] == [plugin, plugin]
