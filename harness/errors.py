"""User-facing errors: each names where the bad input is and which rule it breaks."""

from __future__ import annotations


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
