"""Atomic outputs: every file appears whole or not at all, and a run directory is complete
only once its `metrics.parquet` exists (written last), so an interrupted run never looks done."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import polars as pl

COMPLETE_MARKER = "metrics.parquet"


def atomic_path(path: Path):
    """Context manager yielding a temp path in the same folder, renamed onto `path` on success."""
    return _AtomicPath(Path(path))


class _AtomicPath:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        os.close(fd)
        self.tmp = Path(tmp)
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            os.chmod(self.tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
            os.replace(self.tmp, self.path)
        elif self.tmp.exists():
            self.tmp.unlink()
        return False


def write_parquet(df: pl.DataFrame, path: Path) -> Path:
    with atomic_path(path) as tmp:
        df.write_parquet(tmp)
    return Path(path)


def write_text(text: str, path: Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def is_complete(run_dir: Path) -> bool:
    return (Path(run_dir) / COMPLETE_MARKER).exists()


def start_run(run_dir: Path, outputs: tuple[str, ...]) -> None:
    """Make `run_dir` an unfinished run before a run (re)writes it: the completion marker goes
    first, then the `outputs` of a previous run (possibly of another config) and the temp files
    of an interrupted one, so no reader ever mixes them with this run's."""
    run_dir = Path(run_dir)
    for name in (COMPLETE_MARKER, *outputs):
        (run_dir / name).unlink(missing_ok=True)
    for stale in run_dir.glob(".*.tmp"):
        stale.unlink()
