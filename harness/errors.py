"""User-facing errors: each names where the bad input is and which rule it breaks."""

from __future__ import annotations

import math
import re

import numpy as np

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """A message as the terminal should get it: control characters a user's input carried
    (an ANSI escape in a name) shown escaped, not obeyed; newlines and tabs kept."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def finite(value) -> bool:
    """Whether a real number is finite as a float: an integer too large for one is not (and
    math.isfinite would raise on it)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def shown(value) -> str:
    """A bad value as its message shows it: as written, a numpy number as the number it holds
    (-5.0, not np.float64(-5.0)), in a list or mapping too."""
    return repr(_plain(value))


def _plain(value):
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


class LoopbenchError(Exception):
    """Base class for errors that the CLI reports as one clear line, without a traceback."""


class TraceError(LoopbenchError):
    """A workload trace is malformed: names file, column, row and rule."""

    def __init__(self, file: str, rule: str, column: str | None = None, row: int | None = None):
        self.file, self.column, self.row, self.rule = str(file), column, row, rule
        where = [self.file]
        if column is not None:
            where.append(f"column '{column}'")
        if row is not None:
            where.append(f"row {row}")
        super().__init__(f"{', '.join(where)}: {rule}")


class ConfigError(LoopbenchError):
    """A cluster or loop configuration is invalid: names the config key and the rule."""

    def __init__(self, where: str, rule: str):
        self.where, self.rule = where, rule
        super().__init__(f"{where}: {rule}")
