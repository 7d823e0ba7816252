"""`harness.config.compose` remembered for the tests: a thousand compositions, half of them
repeats of one before, took a quarter of the suite's time (Hydra reads and merges every YAML of
the defaults list afresh, ~0.1 s each). A composition is a function of its arguments and the
config folder's files, so it is kept under those (the files by content: a test may rewrite one)
and each caller gets its own copy (tests change the configs they get), unpickled from the kept
bytes (a third of a deep copy's time on an OmegaConf config). Overrides that add a search path
read other folders: those compose afresh."""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from pathlib import Path

from harness import config

_kept: dict[tuple, bytes] = {}


def _folder_digest(root: Path) -> str:
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def remembered(compose: Callable) -> Callable:
    def compose_kept(config_name: str, overrides: list[str], with_hydra: bool = False):
        if any("searchpath" in o for o in overrides):
            return compose(config_name, overrides, with_hydra)
        root = config.conf_dir()
        key = (config_name, tuple(overrides), with_hydra, str(root), _folder_digest(root))
        if key not in _kept:
            _kept[key] = pickle.dumps(compose(config_name, overrides, with_hydra))
        return pickle.loads(_kept[key])

    compose_kept.__doc__ = compose.__doc__
    return compose_kept


def install() -> None:
    """Every later `from harness.config import compose` gets the remembered one."""
    config.compose = remembered(config.compose)
