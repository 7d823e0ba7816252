"""Atomic outputs: every file appears whole or not at all, and a run directory is complete
only once its `metrics.parquet` exists (written last), so an interrupted run never looks done.
A report folder is built beside its place and swapped in whole (`atomic_dir`).

One writer per folder: a run holds its folder's lock (`run_lock`), a report build the lock
beside its folder, so a second process aimed at the same place is refused, naming the holder,
instead of mixing its files with the first's or deleting them. The lock is an flock(2) on a
file holding the holder's pid: the kernel drops it when the holder dies, so the file a killed
run leaves behind is simply taken over."""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import tempfile
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from harness.errors import LoopbenchError

COMPLETE_MARKER = "metrics.parquet"
LOCK = ".loopbench.lock"


def atomic_path(path: Path):
    """Context manager yielding a temp path in the same folder, renamed onto `path` on success."""
    return _AtomicPath(Path(path))


#: while `written_together` runs: the (temp, final) paths written, renamed when it ends
_pending: ContextVar[list[tuple[Path, Path]] | None] = ContextVar("pending", default=None)


@contextmanager
def written_together():
    """Files written atomically inside this block appear all together when it ends, or none
    does (a trace and its services tables: none of them alone looks like a whole output)."""
    pending: list[tuple[Path, Path]] = []
    token = _pending.set(pending)
    try:
        yield
        for tmp, path in pending:
            os.replace(tmp, path)
    finally:
        _pending.reset(token)
        for tmp, _ in pending:
            tmp.unlink(missing_ok=True)


class _AtomicPath:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> Path:
        with _writable(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        os.close(fd)
        self.tmp = Path(tmp)
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        pending = _pending.get()
        kept = False
        try:
            if exc_type is None:
                os.chmod(self.tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
                if pending is None:
                    os.replace(self.tmp, self.path)
                else:
                    pending.append((self.tmp, self.path))
                    kept = True
        finally:  # a failed (or interrupted) write or rename leaves no temp file either
            if not kept:
                self.tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):  # a full disk, a quota: one line naming the output
            raise LoopbenchError(f"{self.path}: cannot write it: {exc.strerror or exc}") from None
        return False


@contextmanager
def _writable(path: Path):
    """An output that cannot be placed (a plain file where a folder must be, no permission) is
    one clear error naming it, not an OSError from deep inside."""
    try:
        yield
    except OSError as exc:
        file = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        why = f"{file} is a file, not a folder" if file else exc.strerror or str(exc)
        raise LoopbenchError(f"{path}: cannot write it: {why}") from None


def write_parquet(df: pl.DataFrame, path: Path, metadata: dict[str, str] | None = None) -> Path:
    """`df` as Parquet with key-value `metadata` in its footer (pyarrow: nothing else, no date,
    so equal frames give equal bytes)."""
    table = df.to_arrow(compat_level=pl.CompatLevel.oldest())  # types every pyarrow writes
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return Path(path)


def write_text(text: str, path: Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def is_complete(run_dir: Path) -> bool:
    return (Path(run_dir) / COMPLETE_MARKER).exists()


@contextmanager
def hold(lock: Path, what: Path):
    """Hold the lock file `lock` (guarding `what`) while in the block; refuse if another holds it.
    The file is removed on release; a holder that locked a file just removed retries on the new."""
    with _writable(what):
        lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
            os.close(fd)
            raise LoopbenchError(f"{what}: in use by {f'process {holder}' if holder else 'another process'} "
                                 f"(lock {lock}); wait for it to finish or write elsewhere") from None
        try:
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} on {platform.node()}\n".encode())
        yield
    finally:
        lock.unlink(missing_ok=True)  # before the release: a waiter then sees a removed file
        os.close(fd)


def run_lock(folder: Path):
    """Context manager holding `folder` (created if needed) for this process."""
    folder = Path(folder)
    return hold(folder / LOCK, folder)


@contextmanager
def start_run(run_dir: Path, outputs: tuple[str, ...]):
    """Hold `run_dir` for a run and make it an unfinished run before the run (re)writes it: the
    completion marker goes first, then the `outputs` of a previous run (possibly of another
    config) and the temp files an interrupted one left, so no reader ever mixes them with this
    run's (the lock guarantees no live writer owns them)."""
    run_dir = Path(run_dir)
    with run_lock(run_dir):
        for name in (COMPLETE_MARKER, *outputs):
            (run_dir / name).unlink(missing_ok=True)
        for stale in run_dir.glob(".*.tmp"):
            stale.unlink()
        yield run_dir


@contextmanager
def atomic_dir(path: Path, owns: str):
    """Yield an empty sibling folder to fill; on success it replaces `path` whole (what `path`
    held before, stale files included, is removed), on failure it is removed and `path` is left
    as it was. An existing `path` that is not empty must hold `owns` (a file the builder writes):
    a folder that is not a previous build is refused, never deleted.

    POSIX cannot rename a folder onto a non-empty one, so the swap is two renames, through
    `.NAME.old`; a swap interrupted between them is undone by the next call. One builder at a
    time: the lock `.NAME.lock` beside `path` refuses a second."""
    path = Path(os.path.abspath(path))  # a name even for "." (symlinks are not followed)
    with hold(path.with_name(f".{path.name}.lock"), path):
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
