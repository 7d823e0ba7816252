"""One replay run: trace + cluster + loop -> run directory with Parquet outputs.

A run directory holds jobs.parquet, nodes.parquet, timeline.parquet, run.json (wall time),
config.yaml and, written last, metrics.parquet: a directory without metrics.parquet is an
unfinished run. A rerun into the directory removes metrics.parquet, then the other outputs,
before anything else; a run holds the directory's lock throughout (harness/output.py). The
tables carry their provenance as Parquet metadata (harness/provenance.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
from hydra.utils import to_absolute_path
from omegaconf import DictConfig, OmegaConf

from harness import kernel_cache
from harness.compile_time import compiling
from harness.decisions import DecisionTrace
from harness.dra.writeback import ClaimWriter
from harness.errors import ConfigError, LoopbenchError, TraceError
from harness.generated import trace_file
from harness.kueue.loop import KueueLoop, unknown_queues
from harness.loops.base import conform
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.output import is_complete, start_run, write_parquet, write_text
from harness.provenance import RUN_INFO, provenance, trace_meta, wall_s, write_run_info
from harness.replay_progress import ReplayProgress, estimate
from harness.services import trace as services_trace
from harness.services.buffers import Buffer, CapacityBuffer, Overprovisioning
from harness.services.loop import ReplicaLoop
from harness.services.replicas import HorizontalPodAutoscaler
from harness.services.trace import read_services
from harness.services.workload import compile_services, refuse_unplaceable
from harness.settings import check, check_config, instantiate, number
from harness.sim import Simulation
from harness.summary import readout
from harness.trace import read_trace
from harness.view import Loop
from harness.workload import Workload, compile_workload

DEFAULT_TAIL_S = 86400.0
#: what a run writes besides metrics.parquet (its completion marker, written last)
OUTPUTS = ("jobs.parquet", "nodes.parquet", "timeline.parquet", RUN_INFO, "config.yaml",
           "services.parquet", "services_timeline.parquet",  # these two: a trace with services
           "events.parquet",  # the decision trace (trace_events=true)
           "claims.yaml", "claims.parquet")  # a DRA run's allocations (write_claims=true)


def build(cfg: DictConfig) -> tuple[Simulation, Loop]:
    """Instantiate trace, cluster and loop from a composed config, once its settings are valid."""
    check_config(cfg)
    kernel_cache.drop_stale_once()  # before the first kernel runs: none compiled from old sources
    try:
        cluster = instantiate(cfg.cluster, "cluster", _convert_="all")
    except Exception as exc:
        raise _config_error(exc, "cluster") from None
    path = trace_file(cfg, cluster)
    if cfg.get("import_args") and not Path(path).exists():
        import_trace(cfg)
    service_files = service_paths(cfg)
    table, _ = read_trace(path, allow_empty=True)
    if table.num_rows == 0 and service_files is None:
        raise no_pods(path)
    loop = build_loop(cfg)
    if service_files is None:
        if cfg.get("buffer"):
            raise ConfigError("buffer", f"trace '{cfg.trace.path}' has no services: a buffer keeps room for a "
                                        "service's replicas (buffer=none)")
        if cfg.get("replicas"):
            raise ConfigError("replicas", f"trace '{cfg.trace.path}' has no services: a replica autoscaler scales "
                                          "a service's replicas (replicas=none, or a trace with trace.services)")
        w = compile_workload(table, cluster, path)
    else:
        services, demand, meta = read_services(*service_files)
        buffer = build_buffer(cfg, loop, services)
        w = compile_services(table, services, demand, cluster, path, meta.demand_unit, buffer)
        refuse_unplaceable(w, services, cluster, str(service_files[0]))
    if isinstance(loop, KueueLoop) and cluster.kueue is not None and (unknown := unknown_queues(cluster.kueue, w)):
        raise unknown_queue(unknown[0], w, path, service_files, cluster.name)
    if service_files is not None:  # the replica autoscaler beside the loop, Kueue's gate included
        loop = ReplicaLoop(loop, build_replicas(cfg))
    horizon = cfg.horizon_s if cfg.horizon_s is not None else default_horizon(w)
    stop = bool(cfg.get("stop_when_done", False))
    if stop and service_files is not None:
        raise ConfigError("stop_when_done", "a trace with services never ends by itself (its replicas run on): "
                          "set a horizon_s instead")
    sim = Simulation(w, cluster, seed=int(cfg.seed), horizon_s=float(horizon),
                     timeline_interval_s=float(cfg.timeline_interval_s), stop_when_done=stop,
                     job_backoff=bool(cfg.get("job_backoff", True)))
    return sim, loop


def import_trace(cfg: DictConfig) -> None:
    """A config whose trace is imported (its `import_args`: an experiment's or a scenario's,
    read in place from the public traces) and not made yet: import it first, saying so, so
    that the documented command replays what the published results replay."""
    from harness.importers.cli import run as import_run

    argv = [str(a) for a in cfg.import_args]
    print(f"the trace {cfg.trace.path} is made first: loopbench import {' '.join(argv)}", file=sys.stderr, flush=True)
    try:
        import_run(argv)
    except LoopbenchError as exc:
        raise ConfigError("import_args", f"loopbench import {' '.join(argv)}: {exc}") from None


def service_paths(cfg: DictConfig) -> tuple[str, str] | None:
    """The trace's services and demand files (trace.services, trace.demand: both or neither)."""
    files = {k: cfg.trace.get(k) for k in ("services", "demand")}
    if not any(files.values()):
        return None
    if not all(files.values()):
        missing = next(k for k, v in files.items() if not v)
        raise ConfigError(f"trace.{missing}", "is missing: a trace with services names both its services "
                                              "and its demand file (trace.services, trace.demand)")
    return to_absolute_path(str(files["services"])), to_absolute_path(str(files["demand"]))


def no_pods(path: str) -> TraceError:
    """A trace without pods replays only beside its services: name them when they are there."""
    beside = [str(p) for p in services_trace.service_paths(path) if p.exists()]
    if len(beside) < 2:
        return TraceError(path, "trace has no rows")
    return TraceError(path, f"trace has no pods, only services (beside it: {beside[0]}, {beside[1]}): replay it with "
                            f"trace.services={beside[0]} trace.demand={beside[1]} and a replica autoscaler "
                            "(replicas=hpa|keda), or +scenario=services_synthetic for the bundled one")


def unknown_queue(queue: str, w: Workload, path: str, service_files: tuple[str, str] | None,
                  cluster: str) -> TraceError:
    """A queue no LocalQueue names, refused in the file that uses it: the pods' trace, else
    the services table (the service's replicas would wait in it)."""
    jobs = np.flatnonzero(w.job_queue == queue)
    rule = f"has no LocalQueue in cluster '{cluster}' (its kueue.local_queues): Kueue cannot admit"
    if service_files is None or (w.job_service[jobs] < 0).any():
        return TraceError(path, f"queue '{queue}' {rule} its jobs", column="queue")
    assert w.services is not None, "a slot's service is a trace's service"
    s = int(w.job_service[jobs[0]])
    return TraceError(service_files[0], f"service '{w.services.name[s]}': queue '{queue}' {rule} its replicas",
                      column="queue", row=s)


def build_replicas(cfg: DictConfig) -> HorizontalPodAutoscaler:
    """The replica autoscaler of a trace with services (`replicas=hpa|keda`)."""
    if not cfg.get("replicas"):
        raise ConfigError("replicas", f"trace '{cfg.trace.path}' has services: choose their replica autoscaler "
                                      "(replicas=hpa or replicas=keda; replicas=none is for traces without)")
    try:
        autoscaler = instantiate(cfg.replicas, "replicas", _convert_="all")
    except Exception as exc:
        raise _config_error(exc, "replicas") from None
    if not isinstance(autoscaler, HorizontalPodAutoscaler):
        kind = f"{type(autoscaler).__module__}.{type(autoscaler).__qualname__}"
        raise ConfigError("replicas", f"{kind} is no replica autoscaler (see harness/services/replicas.py)")
    return autoscaler


def build_buffer(cfg: DictConfig, loop: Loop, services: pa.Table) -> Buffer | None:
    """The services' buffer (`buffer=none|overprovisioning|capacity_buffer`), refused with a loop
    that cannot have it."""
    if not cfg.get("buffer"):
        return None
    try:
        buffer = instantiate(cfg.buffer, "buffer", _convert_="all")
    except Exception as exc:
        raise _config_error(exc, "buffer") from None
    if not isinstance(buffer, Overprovisioning | CapacityBuffer):
        kind = f"{type(buffer).__module__}.{type(buffer).__qualname__}"
        raise ConfigError("buffer", f"{kind} is no buffer (see harness/services/buffers.py)")
    buffer.fit(loop, services)
    return buffer


def default_horizon(w: Workload) -> float:
    """Without horizon_s: a day after the last submission of the trace's pods, and no earlier
    than its services' last demand window start (a services-only trace ends there; its
    placeholders, arriving at 0, are none of the trace's)."""
    pods = w.submit[w.job_of_trace[w.job]]
    end = float(pods.max()) + DEFAULT_TAIL_S if len(pods) else 0.0
    return end if w.services is None else max(end, w.services.last_window_start)


def build_loop(cfg: DictConfig) -> Loop:
    """The loop of a composed config, refused by config key unless it is a `Loop`."""
    try:
        loop = instantiate(cfg.loop, "loop", _convert_="all")
    except Exception as exc:
        raise _config_error(exc, "loop") from None
    name = cfg.loop.get("name")
    conform(loop, Loop, f"loop '{name}'" if name else "loop")
    return loop


def _config_error(exc: Exception, what: str) -> ConfigError:
    """Hydra wraps constructor errors: ours unwrapped, anything else as one line naming `what`
    could not be built."""
    cause = exc.__cause__ or exc
    return cause if isinstance(cause, ConfigError) else ConfigError(what, f"cannot instantiate: {cause}")


def claim_writer(sim: Simulation) -> ClaimWriter:
    """The listener that writes a DRA run's claims; refused outside a DRA cluster (nothing to write)."""
    if sim.state.dra is None:
        raise ConfigError("write_claims", "needs a DRA cluster (a `dra:` section; `+cluster.dra={}` translates "
                                          "the default one): without one no pod has a ResourceClaim")
    return ClaimWriter(sim)


class Replay:
    """The time-based replay (the default `runner`).

    progress_interval_s: off a terminal, seconds of wall time between two progress lines
    (on one, a bar); `+runner.progress_interval_s=60` for sparser logs.
    """

    SETTINGS = {
        "progress_interval_s": number("wall seconds between two progress lines off a terminal (0: every "
                                      "update); null = 10 s", ge=0, null=True),
    }

    def __init__(self, progress_interval_s: float | None = None):  # None: harness.progress.INTERVAL_S
        check(self, "runner", progress_interval_s=progress_interval_s)
        self.progress_interval_s = progress_interval_s

    def run(self, cfg: DictConfig, out_dir: Path, progress: bool = True) -> pl.DataFrame:
        out_dir = Path(out_dir)
        with start_run(out_dir, OUTPUTS):  # first: from now on this directory is this run's, unfinished
            started = time.perf_counter()
            first_run = kernel_cache.empty()  # before building: it compiles some kernels
            sim, loop = build(cfg)
            note = estimate(sim, loop.name, loop.describe().family, first_run) if progress else ""
            if note:
                print(note, file=sys.stderr, flush=True)
            meta = provenance(cfg, trace_meta(trace_file(cfg)))
            sim.acct.timeline.stream_to(out_dir / "timeline.parquet", meta)
            events = DecisionTrace(sim) if cfg.get("trace_events") else None
            claims = claim_writer(sim) if cfg.get("write_claims") else None
            with compiling() as compile_s, \
                    ReplayProgress(sim, loop.name, self.progress_interval_s, progress, excluded=compile_s) as bar:
                sim.run(loop, progress=bar.step if progress else None)
            wall = time.perf_counter() - started
            jobs, nodes = jobs_frame(sim), nodes_frame(sim)
            extra = {"loop": loop.name, "seed": int(cfg.seed), "trace": str(cfg.trace.path),
                     "cluster": sim.cluster.name, "policy": loop.policy.name}
            if isinstance(loop, ReplicaLoop):
                extra["replicas"] = loop.autoscaler.name
            metrics = summary_row(sim, jobs, nodes, extra)
            if sim.replicasets is not None:
                write_parquet(sim.replicasets.acct.frame(), out_dir / "services.parquet", meta)
                write_parquet(sim.replicasets.acct.timeline(), out_dir / "services_timeline.parquet", meta)
            write_parquet(jobs, out_dir / "jobs.parquet", meta)
            write_parquet(nodes, out_dir / "nodes.parquet", meta)
            if events is not None:
                write_parquet(events.frame(), out_dir / "events.parquet", meta)
            if claims is not None:
                write_text(claims.yaml(), out_dir / "claims.yaml")
                write_parquet(claims.frame(), out_dir / "claims.parquet", meta)
            sim.acct.timeline.close()
            write_run_info(out_dir, wall, loop.describe().as_record())
            write_text(OmegaConf.to_yaml(cfg), out_dir / "config.yaml")
            write_parquet(metrics, out_dir / "metrics.parquet", meta)  # last: marks the run complete
        return metrics


def replay_task(cfg: DictConfig) -> None:
    """Hydra task of `loopbench replay`: run, write the run directory, print the results."""
    from hydra.core.hydra_config import HydraConfig

    out_dir = Path(HydraConfig.get().runtime.output_dir)
    config = out_dir / "config.yaml"
    if is_complete(out_dir) and config.exists() and config.read_text() == OmegaConf.to_yaml(cfg):
        # a rerun of an interrupted sweep redoes only the runs that did not finish
        print(f"run directory {out_dir}: already complete with this config, skipped")
        return
    check_config(cfg)  # before any runner is built
    metrics = instantiate(cfg.runner, "runner").run(cfg, out_dir)
    if "loop" not in metrics.columns:  # other runners' rows: as polars shows them
        print(metrics)
    else:  # the wall time apart from the results: it changes from one execution to the next
        print(readout(metrics.with_columns(wall_s=pl.lit(wall_s(out_dir), pl.Float64))))
    print(f"run directory: {out_dir}")
