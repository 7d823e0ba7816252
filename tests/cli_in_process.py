"""The `loopbench` command run inside the test process, as a subprocess would run it: in a given
working folder and environment, with stdout and stderr captured and the exit status returned.

A subprocess costs a fresh interpreter and its imports (1-2 s a command on CI's machine), so the
tests of what a command says and writes run it here; the tests of signals, pipes, process groups
and imports keep real subprocesses. What a command changes in the process (the working folder,
environment, argv, logging handlers, Hydra's global state) is put back afterwards.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Ran:
    """What a command left: as subprocess.CompletedProcess names it."""

    returncode: int
    stdout: str
    stderr: str


def loopbench(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Ran:
    """`loopbench ARGS` in folder `cwd`, with `env` added to the environment."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from harness.cli import main

    saved_env, saved_argv, saved_cwd = dict(os.environ), list(sys.argv), os.getcwd()
    saved_run = HydraConfig.instance().cfg  # a run's config: its working folder resolves relative paths
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    out, err = io.StringIO(), io.StringIO()
    os.environ.update(env or {})
    os.chdir(cwd)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # Hydra ends --help, --cfg and its own errors with sys.exit
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv
        for handler in root.handlers:  # Hydra's handlers of this run (its log file, the captured streams)
            if handler not in saved_handlers:
                handler.close()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = saved_run
    return Ran(code, out.getvalue(), err.getvalue())
