"""What Hydra itself builds or sets from a config, checked before Hydra runs.

Before a task function starts, Hydra instantiates every callback under `hydra.callbacks` (any
`_target_`; hydra/_internal/hydra.py, `Hydra.run`: `compose_config`, then `Callbacks(cfg)`),
hands `hydra.hydra_logging` and `hydra.job_logging` to `logging.config.dictConfig`, which calls
the `()` or `class` each handler, formatter or filter names, and sets `hydra.job.env_set` in the
environment (hydra/core/utils.py, `run_job`). Any config file on the search path may set them
(`# @package _global_`), so loopbench's own check of `_target_`s (harness/settings.py) would
come too late. Here the config is composed first, as Hydra will compose it, and refused unless
each callback is a loopbench component, each logging factory is one of `logging`'s own or a
component, and no config names the plugins ($LOOPBENCH_PLUGINS comes from the environment
loopbench starts in: a config that sets it could allow itself anything).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping

from harness.errors import ConfigError
from harness.settings import PLUGINS, SettingError, check_targets, refusal

#: Hydra's command-line options that read configs from elsewhere than conf/ and the folders of
#: `hydra.searchpath`, or a pickled config: loopbench does not take them
FOREIGN_CONFIG = ("config_path", "config_name", "config_dir", "experimental_rerun")
#: the sections of a logging configuration whose entries name a factory, and the keys naming it
#: (logging.config.dictConfig: `()` a user-defined factory, `class` a handler's or formatter's)
LOGGING_SECTIONS = ("formatters", "filters", "handlers")
FACTORY_KEYS = ("()", "class")


def check(hydra) -> None:
    """Refuse, by key, a callback, a logging factory or a job environment Hydra would act on
    (`hydra`: the `hydra` node of a composed config, or `HydraConfig.get()`)."""
    callbacks = hydra.get("callbacks") or {}
    check_targets(callbacks, "hydra.callbacks")
    for section in ("hydra_logging", "job_logging"):
        for where, factory in _logging_factories(hydra.get(section), f"hydra.{section}"):
            why = None if factory.startswith("logging.") else refusal(factory)
            if why is not None:
                raise SettingError(where, factory, "a logging factory must be one of logging's own "
                                                   f"(logging.StreamHandler, logging.Formatter, ...) or else: {why}")
    env = (hydra.get("job") or {}).get("env_set") or {}
    if PLUGINS in env:
        raise SettingError(f"hydra.job.env_set.{PLUGINS}", env[PLUGINS],
                           f"a config may not name the plugins: set ${PLUGINS} in the environment "
                           "loopbench starts in")


def _logging_factories(config, key: str):
    """(key, factory name) of each `()` or `class` in a dictConfig-style logging configuration."""
    if not isinstance(config, Mapping):
        return
    for section in LOGGING_SECTIONS:
        entries = config.get(section) or {}
        for name, entry in entries.items() if isinstance(entries, Mapping) else ():
            for factory_key in FACTORY_KEYS:
                if isinstance(entry, Mapping) and isinstance(entry.get(factory_key), str):
                    yield f"{key}.{section}.{name}.{factory_key}", entry[factory_key]


def check_before_hydra(config_name: str, argv: list[str]) -> None:
    """Compose the config of a `loopbench replay|compare|generate` command line as Hydra will
    (a sweep's values left out, as Hydra composes a multirun's own config) and `check` it.
    A command line Hydra would refuse is left to Hydra, which says why."""
    from hydra._internal.utils import get_args_parser  # the parser hydra.main reads the command line with
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from harness.config import compose

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            args, _ = get_args_parser().parse_known_args(argv)
        except SystemExit:  # --version, or options argparse refuses: Hydra's own answer
            return
    for option in FOREIGN_CONFIG:
        if getattr(args, option, None):
            flag = "--" + option.replace("_", "-")
            raise ConfigError(flag, "not taken by loopbench: its configs are conf/ ($LOOPBENCH_CONF) and the "
                                    "folders hydra.searchpath=[file://...] adds")
    try:
        overrides = [o.input_line for o in OverridesParser.create().parse_overrides(args.overrides)
                     if o.input_line is not None and not o.is_sweep_override()]
        cfg = compose(config_name, overrides, with_hydra=True)
    except ConfigError:
        raise
    except Exception:  # an override or config Hydra refuses: it says why when it composes
        return
    check(cfg.hydra)
