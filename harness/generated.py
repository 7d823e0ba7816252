"""A trace drawn at run time from the run's seed: each seed its own job mix, arrivals and gang
sizes, so the spread over seeds includes the trace's luck, not only the provider's.

A scenario asks for it with `trace.generated: true`, the generator config as `workload` (a
conf/workload/ preset, its keys overridable: `workload.gangs.n=100`) and the draw's seed as
`trace.seed` (`${seed}`: the run's). `trace.path` names the workload (the runs of one name are
one cell of a report, their seeds pooled), and each draw is cached beside it, keyed by the
generator's full description (seed and every knob), as `STEM.HASH.parquet`: a rerun, or
another loop on the same seed, reads the same file, and changing any knob draws anew.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from hydra.utils import to_absolute_path
from omegaconf import DictConfig

from harness.cluster import Cluster
from harness.errors import ConfigError, LoopbenchError
from harness.generate import SyntheticWorkload
from harness.settings import instantiate
from harness.trace import TraceMeta, write_trace

#: hex digits of the description's SHA-256 in a cached draw's name
HASH_CHARS = 12


def is_generated(cfg: DictConfig) -> bool:
    """Whether the config's trace is drawn at run time (else it is the file at trace.path)."""
    return bool(cfg.trace.get("generated", False))


def trace_file(cfg: DictConfig, cluster: Cluster | None = None) -> str:
    """The trace file a run reads: trace.path, or the cached draw of its workload and seed
    (drawn and written first when missing). Given the run's `cluster`, a workload whose gangs
    could never start in it is refused first, drawn or cached (SyntheticWorkload.check_gangs_fit)."""
    path = Path(to_absolute_path(str(cfg.trace.path)))
    if not is_generated(cfg):
        return str(path)
    if cfg.get("workload") is None:
        raise ConfigError("workload", "a generated trace (trace.generated: true) needs its generator config "
                                      "(a conf/workload/ preset)")
    try:
        workload = instantiate(cfg.workload, "workload", _convert_="all")
    except Exception as exc:  # Hydra wraps the generator's own refusal: say it in one line
        if isinstance(exc.__cause__, LoopbenchError):
            raise exc.__cause__ from None
        raise
    if not isinstance(workload, SyntheticWorkload):
        raise ConfigError("workload", f"{type(workload).__qualname__} is not the synthetic generator "
                                      "(harness.generate.SyntheticWorkload)")
    if workload.services:
        raise ConfigError("workload.services", "a trace drawn at run time has pods only: write services with "
                                               "`loopbench generate` and name the files in trace.services")
    if cluster is not None:
        workload.check_gangs_fit(cluster)
    seed = int(cfg.trace.get("seed", cfg.seed))
    source = workload.describe(seed)
    digest = hashlib.sha256(source.encode()).hexdigest()[:HASH_CHARS]
    out = path.with_name(f"{path.stem}.{digest}.parquet")
    if not out.exists():  # two runs drawing it at once write the same bytes; each renames its own copy
        out.parent.mkdir(parents=True, exist_ok=True)
        meta = TraceMeta(source=source, licence="CC0-1.0", time_origin="trace start",
                         description=f"{path.stem}: drawn at run time from seed {seed}")
        write_trace(workload.table(seed), out, meta)
    return str(out)
