"""Where the Hydra configs live and how to compose one outside `hydra.main` (in-process runs,
experiments, tests), and the one-line catalogue of a config group that `--help` shows.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from harness.errors import ConfigError


def conf_dir() -> Path:
    """The Hydra config folder: $LOOPBENCH_CONF, ./conf, or the one beside the package."""
    env = os.environ.get("LOOPBENCH_CONF")
    if env:
        return Path(env).resolve()
    here = Path.cwd() / "conf"
    if (here / "config.yaml").exists():
        return here.resolve()
    return (Path(__file__).resolve().parent.parent / "conf").resolve()


def compose(config_name: str, overrides: list[str], with_hydra: bool = False):
    """Compose a Hydra config outside `hydra.main` (for in-process runs and tests); `with_hydra`:
    with its `hydra` node, as Hydra composes it for a command."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        try:
            return hydra_compose(config_name=config_name, overrides=overrides, return_hydra_config=with_hydra)
        except yaml.MarkedYAMLError as exc:
            raise yaml_error(exc) from None


def yaml_error(exc: yaml.MarkedYAMLError) -> ConfigError:
    """A config file that is not YAML (a key twice in a mapping, a tab, a bracket left open) by
    file and line, in one line rather than the parser's traceback through Hydra."""
    mark = exc.problem_mark or exc.context_mark
    where = "config" if mark is None else f"{mark.name}, line {mark.line + 1}"
    return ConfigError(where, f"not valid YAML: {exc.problem or exc.context}")


def describe(path: Path) -> str:
    """A config's one-line description: the first comment line of its YAML file."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if text and not text.startswith("@package"):
            return text
    return ""


def catalog(*groups: str, folders: list[Path] | None = None) -> str:
    """The options of config `groups`, one line each (for --help), found in `folders` (the
    search path, default conf/ alone): a name in two folders is the first one's, as Hydra
    picks it."""
    blocks = []
    for group in groups:
        found: dict[str, Path] = {}
        for folder in folders or [conf_dir()]:
            for f in sorted((folder / group).glob("*.yaml")):
                found.setdefault(f.stem, f)
        files = [found[name] for name in sorted(found)]
        width = max((len(f.stem) for f in files), default=0)
        blocks.append("\n".join([f"{group}=NAME, one of:", *(f"  {f.stem:<{width}}  {describe(f)}" for f in files)]))
    return "\n\n".join(blocks)
