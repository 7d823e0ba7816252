"""Atomic outputs: every file appears whole or not at all, and a run directory is complete
only once its `metrics.parquet` exists (written last), so an interrupted run never looks done.
A report folder is built beside its place and swapped in whole (`atomic_dir`)."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from harness.errors import LoopbenchError

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
        try:
            if exc_type is None:
                os.chmod(self.tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
                os.replace(self.tmp, self.path)
        finally:  # a failed (or interrupted) rename leaves no temp file either
            self.tmp.unlink(missing_ok=True)
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


@contextmanager
def atomic_dir(path: Path, owns: str):
    """Yield an empty sibling folder to fill; on success it replaces `path` whole (what `path`
    held before, stale files included, is removed), on failure it is removed and `path` is left
    as it was. An existing `path` that is not empty must hold `owns` (a file the builder writes):
    a folder that is not a previous build is refused, never deleted.

    POSIX cannot rename a folder onto a non-empty one, so the swap is two renames, through
    `.NAME.old`; a swap interrupted between them is undone by the next call (one builder at a time)."""
    path = Path(os.path.abspath(path))  # a name even for "." (symlinks are not followed)
    new, old = path.with_name(f".{path.name}.new"), path.with_name(f".{path.name}.old")
    if old.exists():  # an interrupted swap: finished (remove the old folder) or not (put it back)
        if path.exists():
            shutil.rmtree(old)
        else:
            old.rename(path)
    if new.exists():  # an interrupted build
        shutil.rmtree(new)
    if path.exists() and not (path / owns).is_file() and (not path.is_dir() or any(path.iterdir())):
        raise LoopbenchError(f"{path}: exists and is not a report (no {owns}); give a new or empty folder")
    new.mkdir(parents=True)
    try:
        yield new
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    if path.exists():
        path.rename(old)
    new.rename(path)
    shutil.rmtree(old, ignore_errors=True)
