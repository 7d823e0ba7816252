"""One replay run: trace + cluster + loop -> run directory with Parquet outputs.

A run directory holds jobs.parquet, nodes.parquet, timeline.parquet, run.json (wall time),
config.yaml and, written last, metrics.parquet: a directory without metrics.parquet is an
unfinished run. A rerun into the directory removes metrics.parquet, then the other outputs,
before anything else; a run holds the directory's lock throughout (harness/output.py). The
tables carry their provenance as Parquet metadata (harness/provenance.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import polars as pl
from hydra.utils import instantiate, to_absolute_path
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from harness.errors import ConfigError
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.output import is_complete, start_run, write_parquet, write_text
from harness.provenance import RUN_INFO, provenance, trace_meta, wall_s, write_run_info
from harness.sim import Simulation
from harness.trace import read_trace
from harness.workload import compile_workload

DEFAULT_TAIL_S = 86400.0
#: what a run writes besides metrics.parquet (its completion marker, written last)
OUTPUTS = ("jobs.parquet", "nodes.parquet", "timeline.parquet", RUN_INFO, "config.yaml")


def build(cfg: DictConfig) -> tuple[Simulation, object]:
    """Instantiate trace, cluster and loop from a composed config."""
    path = to_absolute_path(str(cfg.trace.path))
    table, _ = read_trace(path)
    try:
        cluster = instantiate(cfg.cluster, _convert_="all")
        loop = instantiate(cfg.loop, _convert_="all")
    except Exception as exc:  # Hydra wraps constructor errors; surface ours unwrapped
        cause = exc.__cause__ or exc
        if isinstance(cause, ConfigError):
            raise cause from None
        raise ConfigError("config", f"cannot instantiate cluster or loop: {cause}") from None
    w = compile_workload(table, cluster)
    horizon = cfg.horizon_s if cfg.horizon_s is not None else float(w.submit.max()) + DEFAULT_TAIL_S
    if not np.isfinite(horizon) or horizon <= 0:
        raise ConfigError("horizon_s", "must be a positive number of seconds")
    sim = Simulation(w, cluster, seed=int(cfg.seed), horizon_s=float(horizon),
                     timeline_interval_s=float(cfg.timeline_interval_s))
    return sim, loop


class Replay:
    """The time-based replay (the default `runner`)."""

    def run(self, cfg: DictConfig, out_dir: Path, progress: bool = True) -> pl.DataFrame:
        out_dir = Path(out_dir)
        with start_run(out_dir, OUTPUTS):  # first: from now on this directory is this run's, unfinished
            started = time.perf_counter()
            sim, loop = build(cfg)
            meta = provenance(cfg, trace_meta(to_absolute_path(str(cfg.trace.path))))
            sim.acct.timeline.stream_to(out_dir / "timeline.parquet", meta)
            with tqdm(total=round(sim.horizon), unit="sim-s", desc=f"replay {loop.name}", leave=False,
                      disable=None if progress else True) as bar:
                sim.run(loop, progress=lambda t: bar.update(round(t) - bar.n))
            wall = time.perf_counter() - started
            jobs, nodes = jobs_frame(sim), nodes_frame(sim)
            extra = {"loop": loop.name, "seed": int(cfg.seed), "trace": str(cfg.trace.path),
                     "cluster": sim.cluster.name, "policy": loop_policy(loop).name}
            metrics = summary_row(sim, jobs, nodes, extra)
            write_parquet(jobs, out_dir / "jobs.parquet", meta)
            write_parquet(nodes, out_dir / "nodes.parquet", meta)
            sim.acct.timeline.close()
            write_run_info(out_dir, wall)
            write_text(OmegaConf.to_yaml(cfg), out_dir / "config.yaml")
            write_parquet(metrics, out_dir / "metrics.parquet", meta)  # last: marks the run complete
        return metrics


def loop_policy(loop):
    return loop.placer.policy if hasattr(loop, "placer") else loop.scheduler.policy


HEADLINE = ["loop", "idle_accel_hours", "idle_accel_hours_booting", "idle_accel_hours_unallocated",
            "idle_accel_hours_gang_wait", "idle_accel_hours_committed", "accel_utilization", "frag_ratio",
            "gang_latency_p50_s", "gang_latency_p99_s", "gangs_never_started", "cost_usd",
            "nodes_provisioned", "nodes_never_used"]


def replay_task(cfg: DictConfig) -> None:
    """Hydra task of `loopbench replay`: run, write the run directory, print the headline."""
    from hydra.core.hydra_config import HydraConfig

    out_dir = Path(HydraConfig.get().runtime.output_dir)
    config = out_dir / "config.yaml"
    if is_complete(out_dir) and config.exists() and config.read_text() == OmegaConf.to_yaml(cfg):
        # a rerun of an interrupted sweep redoes only the runs that did not finish
        print(f"run directory {out_dir}: already complete with this config, skipped")
        return
    metrics = instantiate(cfg.runner).run(cfg, out_dir)
    cols = [c for c in HEADLINE if c in metrics.columns]
    with pl.Config(tbl_cols=-1, tbl_width_chars=200, float_precision=3):
        print(metrics.select(cols) if cols else metrics)
    wall = wall_s(out_dir)
    if wall is not None:  # apart from the results: it changes from one execution to the next
        print(f"wall time: {wall:.1f} s")
    print(f"run directory: {out_dir}")
