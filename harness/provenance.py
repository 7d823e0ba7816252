"""Where an output came from, and how long it took, kept apart from what it says.

Every table a run writes carries, as Parquet key-value metadata, the loopbench version, the git
commit of the code ("-dirty" when tracked files differ from it, "unknown" without git), the
sha256 of the run's resolved config YAML and the trace's own metadata (its source, licence...).
The wall time is no result: it goes to `run.json` beside the tables, so two identical runs give
byte-identical tables. A report lists its runs' provenance in `provenance.json` (CSV holds no
metadata); that file describes a generation, not results, so `loopbench results --check` skips it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from functools import cache
from importlib import metadata
from pathlib import Path

import pyarrow.parquet as pq
from omegaconf import DictConfig, OmegaConf

from harness.output import COMPLETE_MARKER, write_text

PREFIX = "loopbench."
RUN_INFO = "run.json"
PROVENANCE = "provenance.json"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def version() -> str:
    try:
        return metadata.version("loopbench")
    except metadata.PackageNotFoundError:
        return "unknown"


def git_commit(root: Path) -> str:
    """HEAD of the repository whose top level is `root` (a repository above it is another
    project's), "-dirty" if tracked files changed; "unknown" whenever git cannot tell."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != Path(root).resolve():
            return "unknown"
        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}-dirty" if dirty else head


@cache
def code() -> dict[str, str]:
    """The code's version and commit, asked once per process (a sweep runs many jobs in one)."""
    return {f"{PREFIX}version": version(), f"{PREFIX}git_commit": git_commit(PACKAGE_ROOT)}


def config_sha256(cfg: DictConfig) -> str:
    return hashlib.sha256(OmegaConf.to_yaml(cfg, resolve=True).encode()).hexdigest()


def trace_meta(path: str | Path) -> dict[str, str]:
    """A canonical trace's own metadata (source, licence, time origin, description), read from
    its footer only; the schema's version and documentation say nothing of this trace."""
    md = {k.decode(): v.decode() for k, v in (pq.read_schema(path).metadata or {}).items()}
    schema = {f"{PREFIX}schema_version", f"{PREFIX}doc"}
    return {k[len(PREFIX):]: v for k, v in md.items() if k.startswith(PREFIX) and k not in schema}


def provenance(cfg: DictConfig, trace: dict[str, str]) -> dict[str, str]:
    """The key-value metadata of a run's tables: code, config hash, and `trace` (prefixed)."""
    return {**code(), f"{PREFIX}config_sha256": config_sha256(cfg),
            **{f"{PREFIX}trace.{k}": str(v) for k, v in trace.items()}}


def run_provenance(run_dir: Path) -> dict[str, str]:
    """The provenance a finished run's metrics carry (empty for runs written before it existed)."""
    md = pq.read_schema(Path(run_dir) / COMPLETE_MARKER).metadata or {}
    return {k.decode(): v.decode() for k, v in md.items() if k.startswith(PREFIX.encode())}


def write_run_info(run_dir: Path, wall: float, loop: dict | None = None) -> None:
    """run.json: the wall time, when the run finished and, for a replay, how its `loop`
    describes itself (`Description.as_record`: what reports name and order it by)."""
    info = {"wall_s": wall, "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if loop is not None:
        info["loop"] = loop
    write_text(json.dumps(info, indent=1) + "\n", Path(run_dir) / RUN_INFO)


def run_info(run_dir: Path) -> dict:
    """What the run's run.json says (empty if it wrote none)."""
    path = Path(run_dir) / RUN_INFO
    return json.loads(path.read_text()) if path.exists() else {}


def wall_s(run_dir: Path) -> float | None:
    """The run's wall time in seconds; None if it wrote no run.json."""
    return run_info(run_dir).get("wall_s")


def write_report_provenance(folder: Path, runs: list[tuple[dict, Path]]) -> None:
    """`provenance.json` of a report: the code that built it, then per run (`runs`: the row's
    identity, e.g. variant and seed, and its folder) the provenance of its metrics."""
    rows = [{**ident, **run_provenance(run)} for ident, run in runs]
    write_text(json.dumps({**code(), "runs": rows}, indent=1) + "\n", Path(folder) / PROVENANCE)
