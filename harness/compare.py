"""`loopbench compare`: one trace through several loops, printed side by side.

A Hydra app like `loopbench replay` (conf/compare.yaml): `loops=a,b` picks the loops (names
of conf/loop/*.yaml), every other override applies to each loop (a loop's own setting,
`loop.KEY=VALUE`, `+` or `++` too: every loop compared must have the key, or for a new key the
part it goes in, else compare names the loops without it and the `loops=` that would run; -m
does not sweep it), and --help, --cfg job and -m work as for replay. Every loop's config is
composed and checked before the first runs.
Runs land in runs/compare/<timestamp>/<loop>/ (each a normal run directory), with the
side-by-side table beside them as comparison.csv and comparison.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl
from omegaconf import DictConfig, OmegaConf

from harness.errors import ConfigError
from harness.output import run_lock, write_text
from harness.progress import steps
from harness.provenance import wall_s
from harness.replay import Replay
from harness.settings import check_config
from harness.summary import HEADLINE, readout


def hydra_args(argv: list[str]) -> list[str]:
    """`loops=a,b`, the documented form, as the Hydra list `loops=[a,b]` (Hydra would read a
    bare comma list as a sweep); the overrides of a loop's own settings (`loop.KEY=VALUE`),
    which compare.yaml's default loop may not have, as the list `loop_overrides` that each
    loop's config takes in turn; every other argument as given."""
    own = [arg for arg in argv if _key(arg).startswith("loop.")]
    args = [f"loops=[{arg[6:]}]" if arg.startswith("loops=") and not arg[6:].startswith("[") else arg
            for arg in argv if arg not in own]
    if own:
        quoted = ",".join("'" + arg.replace("\\", "\\\\").replace("'", "\\'") + "'" for arg in own)
        args.append(f"loop_overrides=[{quoted}]")
    return args


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def loop_configs(loops: list[str], overrides: list[str]) -> dict[str, DictConfig]:
    """Each loop's replay config, composed with the user's overrides and checked before any
    loop runs: an unknown name, an override a loop does not take or a loop's own setting that
    only some compared loops have is one line, not a failure half-way."""
    if not loops:
        raise ConfigError("loops", "no loop to compare: give loops=a,b (names of conf/loop/*.yaml)")
    twice = next((name for i, name in enumerate(loops) if name in loops[:i]), None)
    if twice is not None:
        raise ConfigError("loops", f"loop '{twice}' is listed twice")
    if "loop" in map(_key, overrides):
        raise ConfigError("loop", "compare runs each of `loops`: pick them with loops=a,b, not loop=")
    own = [o for o in overrides if _key(o).startswith("loop.")]
    others = [o for o in overrides if o not in own]
    composed = _composed(loops, others)
    for i, override in enumerate(own):
        if i:
            composed = _composed(loops, [*others, *own[:i]])
        _every_loop_has(_key(override), composed)
    configs = _composed(loops, overrides)
    for cfg in configs.values():
        check_config(cfg)
    return configs


def _composed(loops: list[str], overrides: list[str]) -> dict[str, DictConfig]:
    """Each loop's config with `overrides`; unknown loop names refused together."""
    from hydra import compose
    from hydra.errors import HydraException, MissingConfigException

    configs: dict[str, DictConfig] = {}
    unknown: list[str] = []
    available: Sequence[str] = []
    for name in loops:
        try:
            configs[name] = compose("config", [*overrides, f"loop={name}"])
        except MissingConfigException as exc:
            if exc.missing_cfg_file != f"loop/{name}":
                raise
            unknown.append(name)
            available = exc.options or []
        except HydraException as exc:
            raise ConfigError(f"loop={name}", " ".join(str(exc).split())) from None
    if unknown:
        names = ", ".join(f"'{n}'" for n in unknown)
        raise ConfigError("loops", f"unknown loop{'s' if len(unknown) > 1 else ''} {names}; "
                                   f"available: {', '.join(available)}")
    return configs


_ABSENT = object()


def _every_loop_has(key: str, configs: dict[str, DictConfig]) -> None:
    """A loop's own setting (plain, + or ++) applies to every compared loop, so each must have
    it, or, for a new key none has, the part it goes in: given to a loop without it, it would
    fail that loop's constructor after the loops before it ran."""
    parent = key.rpartition(".")[0]
    for setting in (key, parent):
        have = [name for name, cfg in configs.items() if OmegaConf.select(
            cfg, setting, default=_ABSENT, throw_on_resolution_failure=False) is not _ABSENT]
        if have:
            break
    lack = [name for name in configs if name not in have]
    if not have or not lack:
        return
    what = "no such setting" if setting == key else f"no {setting} to add it to"
    loops = f"loop{'s' if len(lack) > 1 else ''} {', '.join(repr(n) for n in lack)}"
    raise ConfigError(key, f"{loops} {'have' if len(lack) > 1 else 'has'} {what}; "
                           f"compare the loops that have it: loops={','.join(have)}")


def run_loops(configs: dict[str, DictConfig], out_root: Path) -> pl.DataFrame:
    """Replay each loop into out_root/<loop>/; their metrics rows, in `loops` order."""
    return pl.concat([Replay().run(configs[name], out_root / name) for name in steps(list(configs), "loop", "compare")],
                     how="diagonal_relaxed")


def with_provider(metrics: pl.DataFrame, configs: dict[str, DictConfig]) -> pl.DataFrame:
    """The loops' rows with the provider's behaviour (`cluster.shortage`) each ran under, when
    the clusters say it, so the verdict names the setting it was measured in."""
    shortage = [configs[name].cluster.get("shortage") for name in configs]
    if all(v is None for v in shortage):
        return metrics
    return metrics.with_columns(shortage=pl.Series([str(v or "error") for v in shortage]))


def side_by_side(metrics: pl.DataFrame, columns: list[str] = HEADLINE) -> pl.DataFrame:
    """Metrics as rows, loops as columns."""
    cols = [c for c in columns if c in metrics.columns]
    table = metrics.select(["loop", *cols]).with_columns(pl.col(cols).cast(pl.Float64))
    return table.unpivot(index="loop", variable_name="metric").pivot(on="loop", index="metric", values="value")


def show(metrics: pl.DataFrame, out_root: Path) -> None:
    """The loops' results as replay prints one run's, a verdict per loop against the first;
    the same in comparison.md."""
    write_text(readout(metrics, markdown=True), out_root / "comparison.md")
    print(readout(metrics))
    print(f"runs: {out_root}")


def compare_task(cfg: DictConfig) -> pl.DataFrame:
    """Hydra task of `loopbench compare`: the run directory Hydra made holds one run per loop."""
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    if not OmegaConf.is_list(cfg.loops):
        raise ConfigError("loops", f"expected a list of loop names, got {cfg.loops!r}")
    # the user's overrides, and the config folders they added, go to every loop's config
    overrides = [o for o in hc.overrides.task if _key(o) not in ("loops", "loop_overrides")]
    overrides += [str(o) for o in cfg.loop_overrides]
    overrides += [o for o in hc.overrides.hydra if _key(o) == "hydra.searchpath"]
    configs = loop_configs([str(name) for name in cfg.loops], overrides)
    out_root = Path(hc.runtime.output_dir)
    with run_lock(out_root):  # one compare per folder: another would mix its loops with ours
        metrics = run_loops(configs, out_root)
        table = side_by_side(metrics)
        write_text(table.write_csv(), out_root / "comparison.csv")
        walls = [wall_s(out_root / name) for name in configs]
        show(with_provider(metrics, configs).with_columns(wall_s=pl.Series(walls, dtype=pl.Float64)), out_root)
    return table
