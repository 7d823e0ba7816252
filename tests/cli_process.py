"""The environment of a `loopbench` subprocess in the tests: the system's PATH only, this
checkout first on PYTHONPATH (so a worktree sharing another checkout's venv runs its own code,
from any folder), the project's conf/, and the compiled-kernel cache of the test run
(NUMBA_CACHE_DIR): without it a fresh checkout's subprocesses would compile every kernel
again into the source tree's __pycache__."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def process_env(*front: Path, conf: Path = ROOT / "conf") -> dict[str, str]:
    """The environment, with the folders `front` on PYTHONPATH before this checkout."""
    path = [str(p) for p in front] + [str(ROOT)]
    path += [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {"LOOPBENCH_CONF": str(conf), "PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(path)}
    if "NUMBA_CACHE_DIR" in os.environ:
        env["NUMBA_CACHE_DIR"] = os.environ["NUMBA_CACHE_DIR"]
    return env


ENV = process_env()
