"""Hydra's work remembered for the tests. `harness.config.compose`: a thousand compositions, half
of them repeats of one before, took a quarter of the suite's time (Hydra reads and merges every
YAML of the defaults list afresh, ~0.1 s each). A composition is a function of its arguments and
the config folder's files, so it is kept under those (the files by content: a test may rewrite
one) and each caller gets its own copy (tests change the configs they get), unpickled from the
kept bytes (a third of a deep copy's time on an OmegaConf config). Overrides that add a search
path read other folders: those compose afresh. And each YAML file a composition or a command
reads (`OmegaConf.load`, a third of a composition's time): a function of the file's text, kept
under the text; a file that does not load raises as before, every time."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from collections.abc import Callable
from pathlib import Path

from omegaconf import OmegaConf

from harness import config

_kept: dict[tuple, bytes] = {}
_loaded: dict[str, bytes] = {}


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


def remembered_load(load: Callable) -> Callable:
    def load_kept(file_):
        if hasattr(file_, "read"):
            text, name = file_.read(), getattr(file_, "name", "<file>")
        else:
            name = os.path.abspath(file_)
            with open(name, encoding="utf-8") as f:
                text = f.read()
        if text not in _loaded:
            stream = io.StringIO(text)
            stream.name = name  # type: ignore[attr-defined]  # YAML's errors name the file, as before
            _loaded[text] = pickle.dumps(load(stream))
        return pickle.loads(_loaded[text])

    load_kept.__doc__ = load.__doc__
    return load_kept


def install() -> None:
    """Every later `from harness.config import compose` gets the remembered one, and every
    `OmegaConf.load` (Hydra's included) the remembered load."""
    config.compose = remembered(config.compose)
    OmegaConf.load = staticmethod(remembered_load(OmegaConf.load))  # type: ignore[method-assign]
