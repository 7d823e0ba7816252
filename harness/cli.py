"""The `loopbench` command: one subcommand per user task, Hydra for every configurable one.

    loopbench replay [overrides] [-m]     one run (or a Hydra multirun sweep) -> run directory
    loopbench compare [overrides]         one trace through every loop, side-by-side table
    loopbench generate [overrides]        synthetic AI workload -> canonical trace
    loopbench import FORMAT SRC... -o T   public trace -> canonical trace (+ cluster config)
    loopbench packing-report SWEEP... -o results/openb_packing
    loopbench report RUN_OR_SWEEP... -o results/NAME   tables, plots and report.html of replay runs
    loopbench results [NAME...] [--check]  regenerate the canonical experiments' results/

Ctrl-C stops any command (exit status 130).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from harness.errors import LoopbenchError

USAGE = __doc__


def conf_dir() -> Path:
    """The Hydra config folder: $LOOPBENCH_CONF, ./conf, or the one beside the package."""
    env = os.environ.get("LOOPBENCH_CONF")
    if env:
        return Path(env).resolve()
    here = Path.cwd() / "conf"
    if (here / "config.yaml").exists():
        return here.resolve()
    return (Path(__file__).resolve().parent.parent / "conf").resolve()


def compose(config_name: str, overrides: list[str]):
    """Compose a Hydra config outside `hydra.main` (for in-process runs and tests)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=overrides)


def _hydra_app(command: str, task, config_name: str, argv: list[str]) -> None:
    """Run `task(cfg)` as a Hydra application so -m, sweeps and launchers work as usual."""
    import hydra

    failures = []

    def guarded(cfg):
        try:
            return task(cfg)
        except LoopbenchError as exc:  # a clear one-line error, not Hydra's traceback
            print(f"loopbench {command}: error: {exc}", file=sys.stderr)
            failures.append(exc)  # a sweep goes on with its other runs; a remote worker survives

    sys.argv = [f"loopbench-{command}", *argv]
    hydra.main(config_path=str(conf_dir()), config_name=config_name, version_base="1.3")(guarded)()
    if failures:
        raise SystemExit(1)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    try:
        if command == "replay":
            from harness.replay import replay_task

            _hydra_app(command, replay_task, "config", rest)
        elif command == "compare":
            from harness.compare import compare

            compare(rest)
        elif command == "generate":
            from harness.generate import generate_task

            _hydra_app(command, generate_task, "generate", rest)
        elif command == "import":
            from harness.importers.cli import main as import_main

            return import_main(rest)
        elif command == "packing-report":
            from harness.packing import report_main

            return report_main(rest)
        elif command == "report":
            from harness.report import main as report

            return report(rest)
        elif command == "results":
            from harness.results import main as results

            return results(rest)
        else:
            print(f"loopbench: unknown command '{command}'\n{USAGE}", file=sys.stderr)
            return 2
    except LoopbenchError as exc:
        print(f"loopbench {command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: what was written so far is whole (harness/output.py)
        print("loopbench: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
