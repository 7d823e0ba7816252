"""The compiled kernels' cache on disk (numba's: docs/architecture.md, "Compiled kernels").

A cache file cut short or overwritten (a run killed while numba wrote it, a full disk, a bad
copy) fails every later run, deep inside it, the first time it calls that kernel (an
UnpicklingError or EOFError from numba). So before a command runs kernels, each of the
package's cache files is read as numba reads it, and a kernel whose files do not load has
them removed: it compiles again, once.

numba checks a kernel's cached code against its own source file only, yet a kernel that calls a
kernel of another module compiles that one's code into its own: after an edit of the callee's
module alone, the caller would run the old code, silently. So the cache also records a digest
of every kernel module's source, and when a module changed since, every kernel of the package
is removed from it and compiles again (`drop_stale`: before a replay is built, by `loopbench`'s
commands and by the tests).
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import pickle
from pathlib import Path

#: the package's source folder, as numba names it (the absolute path, links not resolved)
PACKAGE = Path(os.path.abspath(__file__)).parent


def cache_dirs(cache_root: str | None, package: Path = PACKAGE) -> list[Path]:
    """Where numba keeps the kernels of each source folder of the package: its __pycache__, or
    with $NUMBA_CACHE_DIR (`cache_root`) a folder there named by the folder's name and the sha1
    of its path (as numba's cache locator does)."""
    folders = sorted({p.parent for p in package.rglob("*.py")})
    if cache_root:
        return [Path(cache_root) / f"{f.name}_{hashlib.sha1(str(f).encode()).hexdigest()}" for f in folders]
    return [f / "__pycache__" for f in folders]


#: the file, in the package folder's cache, holding the digest of the kernel sources the cache was filled from
DIGEST_FILE = "loopbench-kernel-sources.sha1"


def sources_digest(package: Path = PACKAGE) -> str:
    """sha1 over the package's kernel modules (those importing numba's njit), path and bytes."""
    digest = hashlib.sha1()
    for path in sorted(package.rglob("*.py")):
        text = path.read_bytes()
        if b"from numba import njit" in text:
            digest.update(str(path.relative_to(package)).encode() + b"\0" + text)
    return digest.hexdigest()


def drop_stale(cache_root: str | None, package: Path = PACKAGE) -> list[Path]:
    """When the kernel modules' digest differs from the one the cache recorded, remove every
    kernel's files of the package's cache folders and record the new digest; the files removed.
    A cache that cannot be written (a read-only install) is left as it is."""
    dirs = cache_dirs(cache_root, package)
    record = dirs[0] / DIGEST_FILE  # the package folder's own: checkouts sharing a cache root each keep theirs
    digest = sources_digest(package)
    try:
        if record.is_file() and record.read_text() == digest:
            return []
        removed = []
        for cache_dir in dirs:
            for path in [*cache_dir.glob("*.nbi"), *cache_dir.glob("*.nbc")] if cache_dir.is_dir() else []:
                path.unlink(missing_ok=True)
                removed.append(path)
        record.parent.mkdir(parents=True, exist_ok=True)
        partial = record.with_name(f".{DIGEST_FILE}.{os.getpid()}")
        partial.write_text(digest)
        partial.replace(record)  # whole or not at all: processes starting together may race here
        return removed
    except OSError:
        return []


@functools.cache
def drop_stale_once() -> list[Path]:
    """`drop_stale` for the cache this process uses ($NUMBA_CACHE_DIR), once per process: before
    the first kernel runs is what counts. The files removed by the first call."""
    return drop_stale(os.environ.get("NUMBA_CACHE_DIR"))


def corrupt(cache_dir: Path, numba_version: str) -> list[Path]:
    """The files of every kernel in `cache_dir` whose index (`.nbi`) or data (`.nbc`) numba
    `numba_version` would fail to load; an index of another version numba ignores, as here."""
    bad: list[Path] = []
    for index in sorted(cache_dir.glob("*.nbi")):
        data = sorted(cache_dir.glob(f"{glob.escape(index.stem)}.*.nbc"))
        try:
            with open(index, "rb") as f:
                if pickle.load(f) != numba_version:
                    continue
                _, overloads = pickle.loads(f.read())
            for name in overloads.values():
                pickle.loads((cache_dir / name).read_bytes())
        except FileNotFoundError:  # replaced by another process meanwhile, as numba allows
            continue
        except Exception:  # whatever unpickling garbage raises, it is corruption
            bad += [index, *data]
    return bad


def repair() -> list[Path]:
    """Remove the cache files of every kernel of the package that would not load; the files
    removed."""
    import numba

    removed = []
    for cache_dir in cache_dirs(os.environ.get("NUMBA_CACHE_DIR")):
        if cache_dir.is_dir():
            for path in corrupt(cache_dir, numba.__version__):
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def empty() -> bool:
    """Is no kernel of the package in the cache yet? Then a run compiles each it calls (a first
    run, or the first after a new numba or a moved checkout)."""
    return not any(d.is_dir() and any(d.glob("*.nbi")) for d in cache_dirs(os.environ.get("NUMBA_CACHE_DIR")))
