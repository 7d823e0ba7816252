"""The `loopbench` command: one subcommand per user task, Hydra for every configurable one.

    loopbench replay [overrides] [-m]     one run (or a Hydra multirun sweep) -> run directory
    loopbench compare [loops=a,b] [overrides] [-m]   one trace through several loops, side by side
    loopbench generate [overrides]        synthetic AI workload -> canonical trace
    loopbench import FORMAT SRC... -o T   public trace -> canonical trace (+ cluster config)
    loopbench export kubernetes --cluster C --trace T -o OUT.yaml   cluster + trace -> Nodes, Pods
    loopbench export perfetto RUN -o RUN.trace.json   a run's nodes, pods and decisions -> ui.perfetto.dev
    loopbench explain RUN JOB_OR_POD [--node N]   why a job waited, how a node came and went (events.parquet)
    loopbench packing-report SWEEP... -o results/openb_packing
    loopbench report RUN_OR_SWEEP... -o results/NAME   tables, plots and report.html of replay runs
    loopbench results [NAME...] [--check]  regenerate the canonical experiments' results/

`loopbench replay --help` (or compare, generate) shows a command's config groups and flags;
`--cfg job` prints the config it would run. Ctrl-C stops any command (exit status 130).
"""

from __future__ import annotations

import errno
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

import yaml

from harness.config import catalog, conf_dir, yaml_error
from harness.errors import ConfigError, LoopbenchError, printable

USAGE = __doc__
#: Config groups whose options `--help` lists with one line each.
CATALOG = ("loop", "policy")


def _help_catalog(*groups: str) -> str:
    """`${loopbench.catalog:loop,policy}` in conf/hydra/help: the options on the run's search
    path (conf/, then the folders `hydra.searchpath` adds), `$` escaped for Hydra's template."""
    return catalog(*groups, folders=_search_path()).replace("$", "$$")


def _search_path() -> list[Path] | None:
    """The config folders Hydra composes from, in its order (None outside a Hydra app). A
    `pkg://` entry is the folder of that package; one that cannot be imported is left out,
    as Hydra reports it when a config is asked of it."""
    import importlib.util

    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    folders = []
    for src in HydraConfig.get().runtime.config_sources:
        if src.schema == "file":
            folders.append(Path(src.path))
        elif src.schema == "pkg" and src.provider not in ("hydra", "main"):
            try:
                spec = importlib.util.find_spec(src.path)
            except ImportError:
                spec = None
            if spec is not None and spec.submodule_search_locations:
                folders += [Path(p) for p in spec.submodule_search_locations]
    return folders


def _in_file(exc: LoopbenchError) -> str:
    """An error in the cluster config, prefixed with the YAML file this run composed it from
    (and the command line's overrides of it); any other error as it is."""
    from hydra.core.hydra_config import HydraConfig

    if not (isinstance(exc, ConfigError) and re.search(r"(^|\s)cluster\b", exc.where) and HydraConfig.initialized()):
        return str(exc)
    hc = HydraConfig.get()
    choice = hc.runtime.choices.get("cluster")
    files = [Path(src.path) / "cluster" / f"{choice}.yaml" for src in hc.runtime.config_sources if src.schema == "file"]
    file = next((f for f in files if f.is_file()), None)
    if file is None:
        return str(exc)
    overrides = [o for o in hc.overrides.task if o.lstrip("+~").startswith("cluster.")]
    return f"{file}{' with ' + ' '.join(overrides) if overrides else ''}: {exc}"


def caused_by_interrupt(exc: BaseException) -> bool:
    """Is a KeyboardInterrupt in the exception's chain (its cause or context, all the way)?"""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


def _hydra_app(command: str, task, config_name: str, argv: list[str]) -> None:
    """Run `task(cfg)` as a Hydra application so -m, sweeps and launchers work as usual."""
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.errors import CompactHydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from harness.hydra_builds import check as check_hydra
    from harness.hydra_builds import check_before_hydra

    if not OmegaConf.has_resolver("loopbench.catalog"):
        OmegaConf.register_new_resolver("loopbench.catalog", _help_catalog)
    failures = []

    def guarded(cfg):
        try:
            check_hydra(HydraConfig.get())  # a sweep's job: its own config may set the environment
            return task(cfg)
        except LoopbenchError as exc:  # a clear one-line error, not Hydra's traceback
            print(f"loopbench {command}: error: {printable(_in_file(exc))}", file=sys.stderr)
            failures.append(exc)  # a sweep goes on with its other runs; a remote worker survives
        except Exception as exc:  # numba wraps a Ctrl-C while it compiles or loads a kernel (SystemError...)
            if caused_by_interrupt(exc):
                raise KeyboardInterrupt from exc
            raise

    check_before_hydra(config_name, argv)
    sys.argv = [f"loopbench-{command}", *argv]
    try:
        with _hydra_raises():
            hydra.main(config_path=str(conf_dir()), config_name=config_name, version_base="1.3")(guarded)()
    except yaml.MarkedYAMLError as exc:
        raise yaml_error(exc) from None
    except CompactHydraException as exc:  # Hydra's own short error, as Hydra prints it
        print(*(printable(str(e)) for e in [exc, *([exc.__cause__] if isinstance(exc.__cause__, OmegaConfBaseException)
                                                     else [])]), sep="\n", file=sys.stderr)
        raise SystemExit(1) from None
    finally:  # Hydra ends --help and --cfg with sys.exit: a closed pipe is met here, not at exit
        sys.stdout.flush()
    if failures:
        raise SystemExit(1)


@contextmanager
def _hydra_raises():
    """Hydra prints an error met while it composes the config (a config file that is not YAML:
    its parser's traceback) and exits; with HYDRA_FULL_ERROR=1 it raises it, to be told here."""
    before = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["HYDRA_FULL_ERROR"]
        else:
            os.environ["HYDRA_FULL_ERROR"] = before


def _repair_kernel_cache() -> None:
    """Cache files of the compiled kernels that would fail the run, or run old code, are removed
    before it starts, saying so (harness/kernel_cache.py)."""
    from harness.kernel_cache import drop_stale_once, repair

    if drop_stale_once():
        print("loopbench: the kernel modules changed since the compiled kernels were cached: they compile again",
              file=sys.stderr)
    removed = repair()
    if removed:
        print(f"loopbench: removed {len(removed)} unreadable files of the compiled kernels' cache "
              f"({removed[0].parent}): those kernels compile again", file=sys.stderr)


def _dispatch(command: str, rest: list[str]) -> int:
    if command in ("-h", "--help", "help"):
        print(USAGE + "\n" + catalog(*CATALOG))
    elif command == "replay":
        from harness.replay import replay_task

        _repair_kernel_cache()
        _hydra_app(command, replay_task, "config", rest)
    elif command == "compare":
        from harness.compare import compare_task, hydra_args

        _repair_kernel_cache()
        _hydra_app(command, compare_task, "compare", hydra_args(rest))
    elif command == "generate":
        from harness.generate import generate_task

        _hydra_app(command, generate_task, "generate", rest)
    elif command == "import":
        from harness.importers.cli import main as import_main

        return import_main(rest)
    elif command == "export":
        from harness.exporters.cli import main as export_main

        return export_main(rest)
    elif command == "explain":
        from harness.explain import main as explain

        return explain(rest)
    elif command == "packing-report":
        from harness.openb_packing import report_main

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
    return 0


#: what a disk says when it cannot take more (full, over quota, read-only, failing): one line
DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)


#: how long after a Ctrl-C that a finaliser swallowed it is delivered again: the finaliser and
#: the hook that saw it are done by then
REDELIVERY_S = 0.05


@contextmanager
def _interrupts_kept():
    """A Ctrl-C that lands in an object's finaliser (llvmlite frees compiled code in `__del__`,
    so it happens while numba compiles) is one Python only reports as ignored: the command would
    run on to its end. Such an interrupt is delivered again a moment later, to the code running
    then, and not reported; a command that ends without it all the same (still due, or lost
    again where Python drops exceptions) is interrupted there."""
    import _thread
    import threading

    previous = sys.unraisablehook
    due: list[threading.Timer] = []

    def hook(unraisable):
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            due.append(threading.Timer(REDELIVERY_S, _thread.interrupt_main))
            due[-1].daemon = True
            due[-1].start()
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
        for timer in due:
            timer.cancel()
    if due:  # the command ended, the interrupt not delivered
        raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command, rest = (argv[0], argv[1:]) if argv else ("--help", [])
    try:
        with _interrupts_kept():
            code = _dispatch(command, rest)
        sys.stdout.flush()  # a closed pipe is met here, not in Python's flush at exit
        return code
    except LoopbenchError as exc:
        print(f"loopbench {command}: error: {printable(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: what was written so far is whole (harness/output.py)
        print("loopbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped early (`loopbench --help | head`): nothing to say
        _stdout_to_devnull()
        return 141  # as a shell reports a process that SIGPIPE ended
    except OSError as exc:
        if exc.errno not in DISK_ERRORS:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"loopbench {command}: error: {printable(where)}cannot write: {exc.strerror}", file=sys.stderr)
        return 1


def _stdout_to_devnull() -> None:
    """Python flushes stdout at exit, which would fail on the closed pipe once more."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    raise SystemExit(main())
