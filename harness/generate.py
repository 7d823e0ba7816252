"""Seeded synthetic AI workload: a canonical trace with the separate loops' four failure
modes (topology, reservations, sharing, gangs; conf/cluster/default.yaml).

Four job classes, each with its own arrival process, durations, sizes, queues and priorities:

- ``inference``: shared-GPU pods (one GPU, a share of 250/500 milli on L4 or any model, or a
  MIG-like partition profile on H100), short-ish lives, a strong diurnal cycle. *Sharing*: an
  autoscaler that rounds a share up to a whole device over-buys; shares fragment devices.
- ``training``: single-node multi-GPU jobs (2/4/8 H100). Some claim GPUs in one NVLink domain
  (4-GPU ones also in one NUMA domain; 8-GPU ones also a NIC per GPU), which the PCIe node
  type cannot satisfy although it has enough GPUs. *Topology*.
- ``gangs``: distributed jobs of 2-8 pods of 8 NVLink+NIC GPUs each, all-or-nothing
  (``min_member`` = pod count), kept within one rack or one fabric block, lasting hours,
  arriving in bursts. *Gangs*.
- ``cpu``: a few CPU-only pods.

Every class arrives as a Poisson process whose rate is modulated by a daily cycle and by
random burst windows; the load dips at night well under the committed capacity of the
default cluster. *Reserved capacity*.

Generation is vectorized numpy (a million pods in a few seconds). Each class draws from its
own random stream, derived from the seed and the class name, so the same seed gives a
byte-identical table and changing one class's knobs leaves the other classes untouched.

``n_jobs`` (optional) fixes the total number of jobs, split over the classes in proportion
to their rates; offered load then grows with ``n_jobs / span_s`` (stretch ``span_s`` with
``n_jobs`` to keep the load per node of a bigger cluster comparable).

``services`` (optional) adds inference services (harness/services/trace.py): per service the
replica's shape, capacity, cold start and bounds, and a demand (tokens/s) in windows over
``span_s`` with the arrival shape above: a mean, a daily cycle, and seeded bursts (their
start rate per day, height as a multiplier and mean length), each service from its own
stream; `service_tables(seed)` gives its services and demand tables (None without services).
"""

from __future__ import annotations

import json
import math
import os
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.errors import ConfigError, LoopbenchError, TraceError
from harness.output import written_together
from harness.services.trace import MAX_DEMAND_ROWS, MAX_REPLICAS
from harness.settings import Rule, check, check_config, flag, fraction, grid, instantiate, integer, number, weight
from harness.trace import MAX_CPU_MILLI, MAX_GPUS_PER_POD, MAX_MEMORY_MIB, MAX_TIME_S, SCHEMA

DAY_S = 86400.0
#: how many jobs `loopbench generate` may draw: 100x the scale preset
MAX_JOBS = 100_000_000
#: peak memory of generating one job (the default classes), measured: 0.32 GB for 100,000
#: jobs, 0.68 GB for 400,000
BASE_BYTES, BYTES_PER_JOB = 200e6, 1_200


def _fits_in_memory(jobs: float, key: str) -> None:
    """Refuse a job count whose generation would not fit in this machine's memory, before any
    of it is drawn (a MemoryError after gigabytes were taken tells nothing)."""
    need = BASE_BYTES + BYTES_PER_JOB * jobs
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > ram:
        raise ConfigError(key, f"about {jobs:,.0f} jobs would need about {need / 1e9:,.1f} GB to generate "
                               f"({BYTES_PER_JOB / 1e3:g} kB a job), more than this machine's {ram / 1e9:,.1f} GB: "
                               "fewer jobs")
#: most pods of one gang (members): 16x the largest gang of the published traces (Acme's 1,024 GPUs)
MAX_GANG_MEMBERS = 2048
#: A gang's locality: its members within one rack (of one pool), one fabric block, or anywhere.
LOCALITIES = ["none", "rack", "block"]
#: Resolution of the piecewise-constant arrival intensity.
BIN_S = 60.0
#: Keep generated times readable (millisecond resolution) and stable across platforms.
TIME_DECIMALS = 3


# ---- knobs -----------------------------------------------------------------------------


@dataclass
class JobClass:
    """Knobs every class has: arrivals, durations, tenants."""

    #: mean jobs per hour (before the daily cycle and bursts); 0 disables the class
    rate_per_h: float = 0.0
    #: exactly this many jobs of the class over the span (null: a Poisson count of the rate);
    #: the arrivals still follow the rate's daily cycle and bursts
    n: int | None = None
    #: daily cycle: rate x (1 + amplitude * cos(2 pi (t/day - peak_hour/24)))
    diurnal_amplitude: float = 0.0
    peak_hour: float = 14.0
    #: burst windows: Poisson count per day, exponential length, rate multiplied by burst_factor
    bursts_per_day: float = 0.0
    burst_len_s: float = 1800.0
    burst_factor: float = 1.0
    #: lognormal duration per job, clipped to [min_s, max_s]
    duration_median_s: float = 1800.0
    duration_sigma: float = 1.0
    duration_min_s: float = 60.0
    duration_max_s: float = DAY_S
    #: tenants: name -> {weight, priority}
    queues: dict = field(default_factory=lambda: {"default": {"weight": 1.0, "priority": 0}})


@dataclass
class InferenceClass(JobClass):
    #: share of one GPU -> weight (for the non-partition pods)
    share_milli: dict = field(default_factory=lambda: {250: 0.5, 500: 0.5})
    #: models a share pod asks for; with probability p_any_model it accepts any model
    share_models: list = field(default_factory=lambda: ["L4"])
    p_any_model: float = 0.2
    #: fraction of pods that ask for a MIG-like partition instead of a share
    p_partition: float = 0.25
    partitions: dict = field(default_factory=lambda: {"1g.10gb": 0.5, "2g.20gb": 0.3, "3g.40gb": 0.2})
    partition_models: list = field(default_factory=lambda: ["H100"])
    #: per-pod CPU and memory, uniform in [lo, hi] on a grid of step
    cpu_milli: list = field(default_factory=lambda: [1000, 4000, 500])
    memory_mib: list = field(default_factory=lambda: [4096, 16384, 1024])


@dataclass
class TrainingClass(JobClass):
    #: GPUs per pod -> weight
    gpu_counts: dict = field(default_factory=lambda: {2: 0.3, 4: 0.35, 8: 0.35})
    #: GPUs per pod -> probability of a topology claim: GPUs in one NVLink domain, plus one
    #: NUMA domain when gpus <= numa_max_gpus, plus a NIC per GPU when gpus >= nic_min_gpus
    p_topology: dict = field(default_factory=lambda: {2: 0.2, 4: 0.4, 8: 0.6})
    numa_max_gpus: int = 4
    nic_min_gpus: int = 8
    models: list = field(default_factory=lambda: ["H100"])
    cpu_milli_per_gpu: int = 12000
    memory_mib_per_gpu: int = 100000


@dataclass
class GangClass(JobClass):
    gpus_per_pod: int = 8
    #: locality -> weight, and members per gang uniform in [min_members, max_members[locality]]
    locality: dict = field(default_factory=lambda: {"rack": 0.5, "block": 0.5})
    min_members: int = 2
    max_members: dict = field(default_factory=lambda: {"rack": 4, "block": 8, "none": 8})
    #: members of every gang, whatever its locality, uniform on the grid [lo, hi(, step)]
    #: (null: min_members..max_members of its locality): one key a sweep can vary
    members: list | None = None
    #: members -> weight (null: uniform), for size distributions a trace publishes (powers of two)
    member_weights: dict | None = None
    nvlink: bool = True
    nic_per_gpu: bool = True
    models: list = field(default_factory=lambda: ["H100"])
    cpu_milli_per_pod: int = 96000
    memory_mib_per_pod: int = 800000

    def largest(self) -> dict[str, tuple[int, str]]:
        """The largest gang drawn for each locality it draws (weight > 0), with the key under
        `workload.gangs` that sets that size."""
        locs = [loc for loc, w in self.locality.items() if float(w) > 0]
        if self.member_weights is not None:
            drawn = [k for k, w in self.member_weights.items() if float(w) > 0]
            if not drawn:
                return {}
            top = max(drawn, key=int)
            return {loc: (int(top), f"member_weights.{top}") for loc in locs}
        if self.members is not None:
            lo, hi, step = (list(self.members) + [1])[:3]
            return {loc: (int(lo + step * int((hi - lo) // step)), "members") for loc in locs}
        return {loc: (int(self.max_members.get(loc, self.min_members)), f"max_members.{loc}") for loc in locs}


@dataclass
class CpuClass(JobClass):
    cpu_milli: list = field(default_factory=lambda: [1000, 16000, 1000])
    memory_mib: list = field(default_factory=lambda: [2048, 65536, 2048])


@dataclass
class ServiceClass:
    """One inference service: its replica (the pod trace's shape columns), what a replica serves
    and the replica bounds, then its demand: `mean_demand` tokens/s x (1 + diurnal_amplitude x
    cos(2 pi (t/day - peak_hour/24))), times `burst_factor` inside burst windows (a Poisson
    number per day, uniform starts, exponential lengths of mean `burst_len_s`), per `window_s`."""

    cpu_milli: int = 4000
    memory_mib: int = 16384
    gpu_count: int = 1
    gpu_milli: int = 1000
    gpu_partition: str | None = None
    gpu_models: list = field(default_factory=list)
    gpus_same_nvlink: bool = False
    capacity_per_replica: float = 1000.0
    cold_start_s: float = 60.0
    min_replicas: int = 1
    max_replicas: int = 10
    priority: int = 0
    queue: str = "default"
    mean_demand: float = 0.0
    diurnal_amplitude: float = 0.0
    peak_hour: float = 14.0
    bursts_per_day: float = 0.0
    burst_len_s: float = 600.0
    burst_factor: float = 1.0
    window_s: float = BIN_S


#: What the generated services' demand counts.
SERVICE_DEMAND_UNIT = "tokens/s"

CLASSES: dict[str, type[JobClass]] = {
    "inference": InferenceClass,
    "training": TrainingClass,
    "gangs": GangClass,
    "cpu": CpuClass,
}
#: Knobs a description leaves out while null (they came after traces that are bundled).
UNSET = ("n", "members", "member_weights")
#: Short job-id prefix per class.
PREFIX = {"inference": "inf", "training": "trn", "gangs": "gang", "cpu": "cpu"}


def _plain(value):
    """OmegaConf containers -> plain Python (Hydra may pass DictConfig/ListConfig)."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    return value


def _build_class(name: str, cfg: dict | None) -> JobClass:
    cls = CLASSES[name]
    cfg = dict(_plain(cfg) or {})
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise ConfigError(f"workload.{name}", f"unknown key '{unknown[0]}' (known: {', '.join(sorted(known))})")
    obj = cls(**cfg)  # each knob alone is checked by SyntheticWorkload.SETTINGS; here how they relate
    where = f"workload.{name}"
    if not obj.duration_min_s <= obj.duration_median_s <= obj.duration_max_s:
        raise ConfigError(where, "need duration_min_s <= duration_median_s <= duration_max_s")
    if not obj.queues:
        raise ConfigError(f"{where}.queues", "needs at least one queue")
    for q, spec in obj.queues.items():
        if not isinstance(spec, dict) or set(spec) - {"weight", "priority"}:
            raise ConfigError(f"{where}.queues.{q}", "must be {weight: float, priority: int}")
    if isinstance(obj, GangClass):
        unknown = [loc for loc in obj.locality if loc not in LOCALITIES]
        if unknown:
            raise ConfigError(f"{where}.locality", f"unknown locality '{unknown[0]}' (known: {', '.join(LOCALITIES)})")
    if isinstance(obj, GangClass) and obj.member_weights is not None:
        if obj.members is not None:
            raise ConfigError(f"{where}.member_weights", "members already sets the gang sizes: set one or the other")
        bad = [k for k in obj.member_weights if not str(k).isdigit() or not 2 <= int(k) <= MAX_GANG_MEMBERS]
        if bad:
            raise ConfigError(f"{where}.member_weights.{bad[0]}",
                              f"a gang size must be an integer from 2 to {MAX_GANG_MEMBERS:,} pods")
    return obj


def _services_table(services: dict[str, ServiceClass]) -> pa.Table:
    """The services table (harness/services/trace.py) of a workload's services."""
    from harness.services.trace import SERVICES_SCHEMA, services_from_columns

    columns = [n for n in SERVICES_SCHEMA.names if n != "service"]
    return services_from_columns(
        {"service": list(services), **{c: [getattr(v, c) for v in services.values()] for c in columns}})


def _build_services(cfg: dict | None) -> dict[str, ServiceClass]:
    """The services of a workload; a replica shape or bounds the service trace refuses is
    refused here by the key `workload.services.NAME.COLUMN`."""
    from harness.services.trace import validate_services

    cfg = _plain(cfg) or {}
    if not isinstance(cfg, dict):
        raise ConfigError("workload.services", "must be a mapping: service name -> its settings")
    known = {f.name for f in fields(ServiceClass)}
    out = {}
    for name, spec in cfg.items():
        if not isinstance(spec or {}, dict):
            raise ConfigError(f"workload.services.{name}", "must be a mapping of the service's settings")
        spec = dict(spec or {})
        unknown = sorted(set(spec) - known)
        if unknown:
            raise ConfigError(f"workload.services.{name}",
                              f"unknown key '{unknown[0]}' (known: {', '.join(sorted(known))})")
        out[str(name)] = ServiceClass(**spec)
    if out:
        try:
            validate_services(_services_table(out), "workload")
        except TraceError as exc:
            where = "workload.services" + (f".{list(out)[exc.row]}" if exc.row is not None else "")
            raise ConfigError(f"{where}.{exc.column}" if exc.column else where, exc.rule) from None
    return out


def _choice_table(d: dict, where: str) -> tuple[list, np.ndarray]:
    """dict value -> weight as (values, cumulative probabilities)."""
    keys = list(d)
    w = np.array([float(d[k]) for k in keys])
    if len(keys) == 0 or (w < 0).any() or w.sum() <= 0:
        raise ConfigError(where, "needs at least one positive weight")
    return keys, np.cumsum(w / w.sum())


def _choose(rng: np.random.Generator, cum: np.ndarray, n: int) -> np.ndarray:
    """Indices drawn with the cumulative probabilities `cum` (vectorized inverse CDF)."""
    return np.minimum(np.searchsorted(cum, rng.random(n), side="right"), len(cum) - 1)


def _uniform_grid(rng: np.random.Generator, spec: list, n: int, where: str) -> np.ndarray:
    lo, hi, step = (list(spec) + [1])[:3]
    if not 0 <= lo <= hi or step <= 0:
        raise ConfigError(where, "must be [lo, hi, step] with 0 <= lo <= hi and step > 0")
    k = int((hi - lo) // step)
    return (lo + step * rng.integers(0, k + 1, n)).astype(np.int64)


# ---- the generator ---------------------------------------------------------------------


@dataclass
class _Part:
    """Per-pod columns of one class, before ordering (numpy arrays)."""

    cls: int
    job: np.ndarray  # job index within the class
    member: np.ndarray
    min_member: np.ndarray
    submit: np.ndarray
    duration: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    gpus: np.ndarray
    milli: np.ndarray
    partition: np.ndarray  # index into the class's partition names, -1 = none
    partition_names: list
    model: np.ndarray  # index into the class's model names, -1 = any
    model_names: list
    nvlink: np.ndarray
    numa: np.ndarray
    nic: np.ndarray
    locality: np.ndarray  # index into LOCALITIES
    queue: np.ndarray  # index into queue_names
    queue_names: list
    priority: np.ndarray



class SyntheticWorkload:
    """Seeded synthetic AI workload (Hydra `_target_`); `table(seed)` gives a canonical trace."""

    SETTINGS = {
        "span_s": number("seconds over which jobs arrive", gt=0, le=MAX_TIME_S),
        "n_jobs": integer("jobs in total, split over the classes by rate; null = drawn from the rates",
                          ge=0, le=MAX_JOBS, null=True),
        "load": number("arrival rate multiplier of every class (and of fixed job counts)", gt=0, le=1000),
        "*.rate_per_h": number("mean jobs per hour of the class; 0 disables it", ge=0),
        "*.n": integer("jobs of the class over span_s; null = drawn from its rate", ge=0, le=MAX_JOBS, null=True),
        "*.diurnal_amplitude": fraction("depth of the daily cycle of arrivals"),
        "*.peak_hour": number("hour of the day at which arrivals peak", ge=0, le=24),
        "*.bursts_per_day": number("mean burst windows per day", ge=0),
        "*.burst_len_s": number("mean seconds a burst window lasts", gt=0),
        "*.burst_factor": number("arrival rate multiplier within a burst", ge=1),
        "*.duration_median_s": number("median seconds a job runs", gt=0, le=MAX_TIME_S),
        "*.duration_sigma": number("spread of the lognormal job duration", ge=0),
        "*.duration_min_s": number("shortest job, seconds", gt=0, le=MAX_TIME_S),
        "*.duration_max_s": number("longest job, seconds", gt=0, le=MAX_TIME_S),
        "*.queues.*.weight": weight("share of the class's jobs in this queue"),
        "*.queues.*.priority": integer("priority of the queue's pods", ge=-2**31, le=2**31 - 1),
        "*.share_milli.*": weight("weight of this GPU share among the class's share pods"),
        "*.p_any_model": fraction("probability that a share pod accepts any GPU model"),
        "*.p_partition": fraction("probability that a pod asks for a partition profile"),
        "*.partitions.*": weight("weight of this partition profile"),
        "*.cpu_milli": grid("per-pod CPU milli drawn on this grid", MAX_CPU_MILLI),
        "*.memory_mib": grid("per-pod memory MiB drawn on this grid", MAX_MEMORY_MIB),
        "*.gpu_counts.*": weight("weight of this GPU count per pod"),
        "*.p_topology.*": fraction("probability that a pod of this GPU count claims topology"),
        "*.numa_max_gpus": integer("largest pod that also claims one NUMA domain", ge=0, le=MAX_GPUS_PER_POD),
        "*.nic_min_gpus": integer("smallest pod that also claims a NIC per GPU", ge=0, le=MAX_GPUS_PER_POD),
        "*.cpu_milli_per_gpu": integer("CPU milli per GPU of a pod", ge=0, le=MAX_CPU_MILLI),
        "*.memory_mib_per_gpu": integer("memory MiB per GPU of a pod", ge=0, le=MAX_MEMORY_MIB),
        "*.gpus_per_pod": integer("GPUs of each gang pod", ge=0, le=MAX_GPUS_PER_POD),
        "*.locality.*": weight("weight of this gang locality"),
        "*.min_members": integer("fewest pods of a gang", ge=1),
        "*.max_members.*": integer("most pods of a gang of this locality", ge=1),
        "*.members": Rule("grid", "pods of every gang, uniform on [lo, hi] or [lo, hi, step]; null = by locality",
                          lo=2, hi=MAX_GANG_MEMBERS, null=True),
        "*.member_weights.*": weight("weight of this gang size (pods)"),
        "*.nvlink": flag("gang pods claim one NVLink domain"),
        "*.nic_per_gpu": flag("gang pods claim a NIC per GPU"),
        "*.cpu_milli_per_pod": integer("CPU milli of each gang pod", ge=0, le=MAX_CPU_MILLI),
        "*.memory_mib_per_pod": integer("memory MiB of each gang pod", ge=0, le=MAX_MEMORY_MIB),
        # a service's replica and demand (harness/services/trace.py checks how they relate)
        "services.*.cpu_milli": integer("CPU milli of each replica", ge=0, le=MAX_CPU_MILLI),
        "services.*.memory_mib": integer("memory MiB of each replica", ge=0, le=MAX_MEMORY_MIB),
        "services.*.gpu_count": integer("GPUs of each replica", ge=0, le=MAX_GPUS_PER_POD),
        "services.*.gpu_milli": integer("share of each GPU a replica takes (1000 = whole)", ge=0, le=1000),
        "services.*.gpus_same_nvlink": flag("a replica's GPUs in one NVLink domain"),
        "services.*.capacity_per_replica": number("tokens/s one ready replica serves", gt=0),
        "services.*.cold_start_s": number("seconds of image pull and model load before a replica is ready",
                                          ge=0, le=MAX_TIME_S),
        "services.*.min_replicas": integer("fewest replicas of the service", ge=0, le=MAX_REPLICAS),
        "services.*.max_replicas": integer("most replicas of the service", ge=1, le=MAX_REPLICAS),
        "services.*.priority": integer("priority of the service's replica pods", ge=-2**31, le=2**31 - 1),
        "services.*.mean_demand": number("mean tokens/s of the service's demand (before cycle and bursts)", ge=0),
        "services.*.diurnal_amplitude": fraction("depth of the daily cycle of demand"),
        "services.*.peak_hour": number("hour of the day at which demand peaks", ge=0, le=24),
        "services.*.bursts_per_day": number("mean demand bursts per day", ge=0),
        "services.*.burst_len_s": number("mean seconds a demand burst lasts", gt=0),
        "services.*.burst_factor": number("demand multiplier within a burst", ge=1),
        "services.*.window_s": number("seconds of each demand window", ge=1, le=MAX_TIME_S),
    }

    def __init__(
        self,
        span_s: float = DAY_S,
        n_jobs: int | None = None,
        inference: dict | None = None,
        training: dict | None = None,
        gangs: dict | None = None,
        cpu: dict | None = None,
        services: dict | None = None,
        load: float = 1.0,
    ):
        given = {"inference": inference, "training": training, "gangs": gangs, "cpu": cpu}
        check(self, "workload", span_s=span_s, n_jobs=n_jobs, services=services, load=load, **given)
        self.span_s = float(span_s)
        self.n_jobs = None if n_jobs is None else int(n_jobs)
        self.load = float(load)
        self.classes: dict[str, JobClass] = {name: _build_class(name, given[name]) for name in CLASSES}
        self.services: dict[str, ServiceClass] = _build_services(services)
        fixed = [name for name, c in self.classes.items() if c.n is not None]
        if self.n_jobs is not None and fixed:
            raise ConfigError(f"workload.{fixed[0]}.n", "n_jobs already fixes every class's job count: set one or "
                                                        "the other")
        if self.n_jobs and sum(c.rate_per_h for c in self.classes.values()) <= 0:
            raise ConfigError("workload", "n_jobs is set but every class has rate_per_h 0")
        if self.n_jobs is None:  # the mean job count of the rates, bursts included, must fit in memory
            mean = self.load * sum(
                c.n if c.n is not None else self.span_s / 3600.0 * c.rate_per_h
                * (1.0 + (c.burst_factor - 1.0) * c.bursts_per_day * c.burst_len_s / DAY_S)
                for c in self.classes.values())
            if not mean <= MAX_JOBS:
                raise ConfigError("workload", f"the rates draw about {mean:.3g} jobs over span_s, more than "
                                  f"{MAX_JOBS:,}: lower the rates or span_s, or set n_jobs")
            _fits_in_memory(mean, "workload (its rates over span_s)")
        else:
            _fits_in_memory(self.n_jobs * self.load, "workload.n_jobs")
        rows = sum(math.ceil(self.span_s / c.window_s) + 1 for c in self.services.values())
        if rows > MAX_DEMAND_ROWS:
            name, c = min(self.services.items(), key=lambda item: item[1].window_s)
            raise ConfigError(f"workload.services.{name}.window_s", f"{c.window_s:g} s windows over span_s "
                              f"{self.span_s:g} s make {rows:,} demand rows with the other services', more than "
                              f"{MAX_DEMAND_ROWS:,}: wider windows or a shorter span_s")

    # ---- description -----------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """Every knob; the later ones (UNSET) only when set, so a trace drawn before they existed
        keeps its description, byte for byte."""
        services = {"services": {name: asdict(c) for name, c in self.services.items()}} if self.services else {}
        load = {"load": self.load} if self.load != 1.0 else {}
        return {
            "span_s": self.span_s,
            "n_jobs": self.n_jobs,
            **load,
            **{name: {k: v for k, v in asdict(c).items() if not (k in UNSET and v is None)}
               for name, c in self.classes.items()},
            **services,
        }

    def describe(self, seed: int) -> str:
        """The `source` string stored in the trace footer: every knob, so the trace is reproducible."""
        return f"loopbench synthetic generator seed={int(seed)} " + json.dumps(
            self.params(), sort_keys=True, separators=(",", ":"), default=str
        )

    # ---- the cluster it is drawn for ----------------------------------------------------
    def check_gangs_fit(self, cluster) -> None:
        """Refuse, before anything is drawn, a gang size that no domain of its locality could
        ever hold in `cluster`: such a gang never starts under any loop, so a run would measure
        nothing but its wait. The message names the key that sets the size, the size and what
        the domain holds (the generator neither caps nor redraws: a sweep asks for what fits)."""
        c = self.classes["gangs"]
        assert isinstance(c, GangClass)
        if self.n_jobs == 0 or c.n == 0 or (c.n is None and c.rate_per_h == 0):
            return
        largest = c.largest()
        if not largest:
            return
        one = replace(c, members=[2, 2], member_weights=None)
        pod = _assemble([self._gangs(one, 1, np.random.default_rng(0), np.zeros(1))], list(CLASSES)).slice(0, 1)
        room = gang_room(cluster, pod)
        for loc in LOCALITIES:
            if loc in largest and largest[loc][0] > room[loc][0]:
                size, key = largest[loc]
                raise ConfigError(f"workload.gangs.{key}",
                                  f"gangs of {size} pods with locality '{loc}' cannot start in cluster "
                                  f"'{cluster.name}': {room[loc][1]} holds at most {room[loc][0]} of their pods; "
                                  f"draw smaller gangs there or give them a wider locality (workload.gangs.locality)")

    # ---- arrivals ----------------------------------------------------------------------
    def _class_counts(self, rng_by_class: dict[str, np.random.Generator], intensities: dict) -> dict[str, int]:
        """Jobs per class: a fixed count (n, n_jobs) times the load, else a Poisson count of the
        (load-scaled) intensity over the span."""
        if self.n_jobs is None:
            return {
                name: round(c.n * self.load) if c.n is not None else int(rng_by_class[name].poisson(
                    (intensities[name] * self._bin_widths(len(intensities[name]))).sum()))
                for name, c in self.classes.items()
            }
        rates = np.array([c.rate_per_h for c in self.classes.values()], float)
        exact = round(self.n_jobs * self.load) * rates / rates.sum()
        counts = np.floor(exact).astype(np.int64)
        rest = round(self.n_jobs * self.load) - int(counts.sum())
        if rest:  # largest remainder, ties to the earlier class
            order = np.argsort(-(exact - counts), kind="stable")
            counts[order[:rest]] += 1
        return {name: int(k) for name, k in zip(self.classes, counts, strict=True)}

    def _intensity(self, c: JobClass | ServiceClass, base: float, rng: np.random.Generator,
                   bin_s: float = BIN_S) -> np.ndarray:
        """`base` per second in each `bin_s` bin of [0, span_s) times the class's daily cycle and
        burst windows: jobs per second of a job class, demand of a service."""
        n_bins = max(1, math.ceil(self.span_s / bin_s))
        t = (np.arange(n_bins) + 0.5) * bin_s
        lam = np.full(n_bins, float(base))
        if c.diurnal_amplitude:
            lam *= 1.0 + c.diurnal_amplitude * np.cos(2 * np.pi * (t / DAY_S - c.peak_hour / 24.0))
        n_bursts = int(rng.poisson(c.bursts_per_day * self.span_s / DAY_S)) if c.burst_factor > 1 else 0
        if n_bursts:
            start = rng.random(n_bursts) * self.span_s
            end = start + rng.exponential(c.burst_len_s, n_bursts)
            depth = np.zeros(n_bins + 1)
            np.add.at(depth, np.minimum((start // bin_s).astype(np.int64), n_bins), 1.0)
            np.add.at(depth, np.minimum(np.ceil(end / bin_s).astype(np.int64), n_bins), -1.0)
            lam *= 1.0 + (c.burst_factor - 1.0) * np.cumsum(depth)[:n_bins]
        return lam

    def _bin_widths(self, n_bins: int) -> np.ndarray:
        """Seconds of [0, span_s) each intensity bin covers (the last one may be partial)."""
        return np.minimum(BIN_S, self.span_s - np.arange(n_bins) * BIN_S)

    def _arrivals(self, lam: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """n sorted arrival times in [0, span_s), distributed as the piecewise-constant `lam`,
        in whole milliseconds."""
        if n == 0:
            return np.zeros(0)
        width = self._bin_widths(len(lam))
        cum = np.cumsum(lam * width)
        if cum[-1] <= 0:
            cum = np.cumsum(width)
        b = np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], side="right"), len(lam) - 1)
        ms = np.floor((b * BIN_S + rng.random(n) * width[b]) * 10**TIME_DECIMALS)
        ms = np.minimum(ms, math.ceil(self.span_s * 10**TIME_DECIMALS) - 1)
        return np.sort(ms / 10**TIME_DECIMALS)

    @staticmethod
    def _durations(c: JobClass, n: int, rng: np.random.Generator) -> np.ndarray:
        d = c.duration_median_s * np.exp(c.duration_sigma * rng.standard_normal(n))
        return np.round(np.clip(d, c.duration_min_s, c.duration_max_s), TIME_DECIMALS)

    @staticmethod
    def _tenants(c: JobClass, n: int, rng: np.random.Generator, where: str):
        names, cum = _choice_table({q: s.get("weight", 1.0) for q, s in c.queues.items()}, f"{where}.queues")
        q = _choose(rng, cum, n)
        prio = np.array([int(c.queues[k].get("priority", 0)) for k in names], np.int32)[q]
        return q, names, prio

    # ---- classes -----------------------------------------------------------------------
    def _inference(self, c: InferenceClass, n: int, rng, submit) -> _Part:
        where = "workload.inference"
        dur = self._durations(c, n, rng)
        q, qnames, prio = self._tenants(c, n, rng, where)
        part = rng.random(n) < c.p_partition
        pnames, pcum = _choice_table(c.partitions, f"{where}.partitions") if c.p_partition > 0 else ([], None)
        pidx = np.where(part, _choose(rng, pcum, n) if pcum is not None else 0, -1)
        shares, scum = _choice_table(c.share_milli, f"{where}.share_milli")
        share = np.array([int(s) for s in shares], np.int32)[_choose(rng, scum, n)]
        if ((share <= 0) | (share > 1000)).any():
            raise ConfigError(f"{where}.share_milli", "shares must be in (0, 1000]")
        milli = np.where(part, 0, share).astype(np.int32)
        models = list(dict.fromkeys(list(c.share_models) + list(c.partition_models)))
        any_model = rng.random(n) < c.p_any_model
        share_model = models.index(c.share_models[0]) if c.share_models else -1
        part_model = models.index(c.partition_models[0]) if c.partition_models else -1
        model = np.where(any_model, -1, np.where(part, part_model, share_model))
        cpu = _uniform_grid(rng, c.cpu_milli, n, f"{where}.cpu_milli")
        mem = _uniform_grid(rng, c.memory_mib, n, f"{where}.memory_mib")
        false = np.zeros(n, bool)
        return _Part(0, np.arange(n), np.zeros(n, np.int32), np.ones(n, np.int32), submit, dur, cpu, mem,
                     np.ones(n, np.int32), milli, pidx, pnames, model, models, false, false, false,
                     np.zeros(n, np.int8), q, qnames, prio)

    def _training(self, c: TrainingClass, n: int, rng, submit) -> _Part:
        where = "workload.training"
        dur = self._durations(c, n, rng)
        q, qnames, prio = self._tenants(c, n, rng, where)
        counts, ccum = _choice_table(c.gpu_counts, f"{where}.gpu_counts")
        counts_arr = np.array([int(k) for k in counts], np.int32)
        pick = _choose(rng, ccum, n)
        gpus = counts_arr[pick]
        p_topo = np.array([float(c.p_topology.get(k, c.p_topology.get(str(k), 0.0))) for k in counts])
        topo = rng.random(n) < p_topo[pick]
        numa = topo & (gpus <= c.numa_max_gpus)
        nic = topo & (gpus >= c.nic_min_gpus)
        models = list(c.models)
        model = np.full(n, 0 if models else -1)
        return _Part(1, np.arange(n), np.zeros(n, np.int32), np.ones(n, np.int32), submit, dur,
                     gpus.astype(np.int64) * c.cpu_milli_per_gpu, gpus.astype(np.int64) * c.memory_mib_per_gpu,
                     gpus, np.full(n, 1000, np.int32), np.full(n, -1), [], model, models, topo, numa, nic,
                     np.zeros(n, np.int8), q, qnames, prio)

    def _gangs(self, c: GangClass, n: int, rng, submit) -> _Part:
        where = "workload.gangs"
        dur = self._durations(c, n, rng)
        q, qnames, prio = self._tenants(c, n, rng, where)
        locs, lcum = _choice_table(c.locality, f"{where}.locality")
        loc_idx = _choose(rng, lcum, n)
        if c.member_weights is not None:
            sizes, scum = _choice_table(c.member_weights, f"{where}.member_weights")
            size = np.array([int(k) for k in sizes], np.int32)[_choose(rng, scum, n)]
        elif c.members is not None:
            size = _uniform_grid(rng, c.members, n, f"{where}.members").astype(np.int32)
        else:
            hi = np.array([int(c.max_members.get(loc, c.min_members)) for loc in locs])[loc_idx]
            if c.min_members < 1 or (hi < c.min_members).any():
                raise ConfigError(f"{where}.max_members", "need 1 <= min_members <= max_members of every locality")
            size = rng.integers(c.min_members, hi + 1).astype(np.int32)
        loc_code = np.array([LOCALITIES.index(loc) for loc in locs], np.int8)[loc_idx]
        job = np.repeat(np.arange(n), size)
        starts = np.cumsum(size) - size
        member = (np.arange(len(job)) - np.repeat(starts, size)).astype(np.int32)
        m = len(job)
        models = list(c.models)
        ones = np.ones(m, bool)
        return _Part(2, job, member, size[job], submit[job], dur[job],
                     np.full(m, c.cpu_milli_per_pod, np.int64), np.full(m, c.memory_mib_per_pod, np.int64),
                     np.full(m, c.gpus_per_pod, np.int32), np.full(m, 1000, np.int32), np.full(m, -1), [],
                     np.full(m, 0 if models else -1), models, ones & c.nvlink, ~ones, ones & c.nic_per_gpu,
                     loc_code[job], q[job], qnames, prio[job])

    def _cpu(self, c: CpuClass, n: int, rng, submit) -> _Part:
        where = "workload.cpu"
        dur = self._durations(c, n, rng)
        q, qnames, prio = self._tenants(c, n, rng, where)
        cpu = _uniform_grid(rng, c.cpu_milli, n, f"{where}.cpu_milli")
        mem = _uniform_grid(rng, c.memory_mib, n, f"{where}.memory_mib")
        zeros = np.zeros(n, np.int32)
        false = np.zeros(n, bool)
        return _Part(3, np.arange(n), zeros, np.ones(n, np.int32), submit, dur, cpu, mem, zeros, zeros,
                     np.full(n, -1), [], np.full(n, -1), [], false, false, false, np.zeros(n, np.int8),
                     q, qnames, prio)

    # ---- the table ---------------------------------------------------------------------
    def table(self, seed: int = 0) -> pa.Table:
        """The canonical trace for `seed`: same seed and knobs -> byte-identical table."""
        seed = int(seed)
        rngs = {
            name: np.random.default_rng(
                np.random.SeedSequence([seed & 0xFFFFFFFF, seed >> 32, zlib.crc32(name.encode())]))
            for name in self.classes
        }
        lams = {name: self._intensity(c, c.rate_per_h * self.load / 3600.0, rngs[name])
                for name, c in self.classes.items()}
        counts = self._class_counts(rngs, lams)
        makers: dict[str, Callable[..., _Part]] = {
            "inference": self._inference, "training": self._training, "gangs": self._gangs, "cpu": self._cpu}
        parts = []
        for name, c in self.classes.items():
            n = counts[name]
            submit = self._arrivals(lams[name], n, rngs[name])
            parts.append(makers[name](c, n, rngs[name], submit))
        return _assemble(parts, list(self.classes))

    def service_tables(self, seed: int = 0) -> tuple[pa.Table, pa.Table] | None:
        """The services and their demand for `seed` (None without services): windows of each
        service's `window_s` over [0, span_s), then an idle row (0) at span_s."""
        from harness.services.trace import demand_from_columns

        if not self.services:
            return None
        seed = int(seed)
        names, starts, values = [], [], []
        for name, c in self.services.items():  # a few services: each draws from its own stream
            rng = np.random.default_rng(
                np.random.SeedSequence([seed & 0xFFFFFFFF, seed >> 32, zlib.crc32(f"service:{name}".encode())]))
            demand = self._intensity(c, c.mean_demand, rng, c.window_s)
            names.append(np.full(len(demand) + 1, name, dtype=object))
            starts.append(np.r_[np.arange(len(demand)) * c.window_s, self.span_s])
            values.append(np.r_[np.round(demand, TIME_DECIMALS), 0.0])
        demand_table = demand_from_columns({"service": pa.array(np.concatenate(names), pa.string()),
                                            "start_s": np.concatenate(starts), "demand": np.concatenate(values)})
        return _services_table(self.services), demand_table


def _take_strings(names: list, idx: np.ndarray) -> pa.Array:
    """Strings names[idx], null where idx < 0 (vectorized)."""
    dictionary = pa.array([str(s) for s in names] or [""], pa.string())
    return pc.take(dictionary, pa.array(idx, pa.int32(), mask=idx < 0))


def _ids(prefix: pa.Array, number: np.ndarray, width: int) -> pa.Array:
    digits = pc.utf8_lpad(pa.array(number, pa.int64()).cast(pa.string()), width=width, padding="0")
    return pc.binary_join_element_wise(prefix, digits, "")


def _assemble(parts: list[_Part], class_names: list[str]) -> pa.Table:
    """Concatenate the classes, order pods by (submit, class, job, member), number jobs in
    submission order, and build the Arrow columns without a Python loop over pods."""
    cat = lambda attr: np.concatenate([getattr(p, attr) for p in parts])  # noqa: E731
    cls = np.concatenate([np.full(len(p.job), p.cls, np.int8) for p in parts])
    job, member, submit = cat("job"), cat("member"), cat("submit")
    order = np.lexsort((member, job, cls, submit))
    n = len(order)
    cls, job, member, submit = cls[order], job[order], member[order], submit[order]
    # global job number in submission order (first pod of each (class, job) pair)
    key = cls.astype(np.int64) << 40 | job.astype(np.int64)
    new_job = np.r_[True, key[1:] != key[:-1]] if n else np.zeros(0, bool)
    job_no = np.cumsum(new_job) - 1
    n_jobs = int(new_job.sum())
    width = max(6, len(str(max(n_jobs - 1, 0))))
    prefixes = pa.array([PREFIX[c] + "-" for c in class_names], pa.string())
    job_ids = _ids(pc.take(prefixes, pa.array(cls.astype(np.int32))), job_no, width)
    suffixes = pc.utf8_lpad(pa.array(member.astype(np.int64)).cast(pa.string()), width=2, padding="0")
    pod_ids = pc.binary_join_element_wise(job_ids, suffixes, "-")

    def merged_strings(idx_attr: str, names_attr: str) -> pa.Array:
        """One dictionary over all classes' names; per-pod index shifted into it."""
        names: list[str] = []
        idxs = []
        for p in parts:
            local = getattr(p, idx_attr)
            offset = len(names)
            names.extend(getattr(p, names_attr))
            idxs.append(np.where(local < 0, -1, local + offset))
        return _take_strings(names, np.concatenate(idxs)[order]) if n else pa.array([], pa.string())

    model = merged_strings("model", "model_names")
    has_model = model.is_valid().to_numpy(zero_copy_only=False)
    offsets = np.r_[0, np.cumsum(has_model)].astype(np.int32)
    gpu_models = pa.ListArray.from_arrays(pa.array(offsets), model.filter(pa.array(has_model)))
    queue = merged_strings("queue", "queue_names")
    loc = _take_strings(LOCALITIES, cat("locality").astype(np.int64)[order])

    def arr(attr, dtype):
        return pa.array(cat(attr)[order].astype(dtype))

    columns = {
        "pod_id": pod_ids,
        "job_id": job_ids,
        "min_member": arr("min_member", np.int32),
        "submit_s": pa.array(submit.astype(np.float64)),
        "duration_s": arr("duration", np.float64),
        "cpu_milli": arr("cpu", np.int64),
        "memory_mib": arr("mem", np.int64),
        "gpu_count": arr("gpus", np.int32),
        "gpu_milli": arr("milli", np.int32),
        "gpu_partition": merged_strings("partition", "partition_names"),
        "gpu_models": gpu_models,
        "gpus_same_nvlink": arr("nvlink", bool),
        "gpus_same_numa": arr("numa", bool),
        "nic_per_gpu": arr("nic", bool),
        "gang_locality": loc,
        "priority": arr("priority", np.int32),
        "queue": queue,
        "claim": pa.nulls(len(queue), pa.string()),
    }
    return pa.Table.from_arrays([columns[f.name].cast(f.type) for f in SCHEMA], schema=SCHEMA)


# ---- checks and summary ----------------------------------------------------------------


def gpu_hours(table: pa.Table, partition_milli: dict[str, int] | None = None, horizon_s: float | None = None) -> float:
    """GPU-hours requested: GPUs x share x duration (partitions at their profile's share;
    unknown durations run to `horizon_s`, or count 0 without one)."""
    gpus = table.column("gpu_count").to_numpy().astype(np.float64)
    milli = table.column("gpu_milli").to_numpy().astype(np.float64)
    prof = table.column("gpu_partition")
    if prof.null_count < len(prof):
        pm = partition_milli or {}
        names = pc.unique(prof.drop_null()).to_pylist()
        lookup = pa.array(names, pa.string())
        idx = pc.index_in(prof, value_set=lookup).to_numpy(zero_copy_only=False)
        values = np.array([float(pm.get(nm, 0)) for nm in names] + [0.0])
        idx = np.where(np.isnan(idx.astype(float)), len(names), idx).astype(np.int64)
        milli = np.where(prof.is_valid().to_numpy(zero_copy_only=False), values[idx], milli)
    dur = table.column("duration_s")
    submit = table.column("submit_s").to_numpy()
    if horizon_s is None:
        d = dur.fill_null(0.0).to_numpy()
    else:
        d = dur.fill_null(np.inf).to_numpy()
        d = np.minimum(d, np.maximum(horizon_s - submit, 0.0))
    return float((gpus * milli / 1000.0 * d).sum() / 3600.0)


def pods_per_node(node_type, cpu: int, mem: int, gpus: int, nvlink: bool) -> int:
    """How many pods of one shape an empty node of `node_type` holds, by CPU, memory and whole
    GPUs (within one NVLink domain each where the pod claims one); a pod that asks for none of
    them counts as MAX_GANG_MEMBERS."""
    limits = [MAX_GANG_MEMBERS]
    if cpu:
        limits.append(node_type.cpu_milli // cpu)
    if mem:
        limits.append(node_type.memory_mib // mem)
    if gpus:
        per_domain = node_type.gpus // node_type.nvlink_domains if node_type.gpus else 0
        limits.append(node_type.nvlink_domains * (per_domain // gpus) if nvlink else node_type.gpus // gpus)
    return int(min(limits))


def gang_room(cluster, pod: pa.Table) -> dict[str, tuple[int, str]]:
    """Most pods of `pod`'s shape (a one-row trace: a gang member) that one domain of each
    locality could ever hold at once in `cluster`, with which domain that is: the largest rack
    (a pool's nodes_per_rack, or fewer when the pool holds fewer), the largest block (its pools
    together), the whole cluster. A pool counts its most nodes (max_size, or less when its stock
    never allows more, at least min_size) and holds the pods where an empty node of it fits one
    (the replay's own rule: harness.workload.pools_fit, DRA claims and taints included), as
    many a node as `pods_per_node` allows."""
    from harness.workload import compile_workload, pools_fit

    w = compile_workload(pod, cluster)
    fits = pools_fit(cluster, w)[:, 0] & ~w.never_fits[0]
    rack = (0, "no rack")
    blocks: dict[str, int] = {}
    total = 0
    for pool, ok in zip(cluster.pools, fits, strict=True):  # a cluster's few pools, once per check
        nodes = pool.max_size if pool.stock is None else max(pool.min_size, min(pool.max_size, pool.stock))
        per = pods_per_node(cluster.node_types[cluster.type_index(pool.node_type)], int(w.cpu[0]), int(w.mem[0]),
                            int(w.gpus[0]), bool(w.nvlink[0])) if ok else 0
        in_rack = min(pool.nodes_per_rack, nodes) * per
        if in_rack > rack[0]:
            rack = (in_rack, f"its largest rack (pool {pool.name}: {min(pool.nodes_per_rack, nodes)} nodes, "
                             f"{per} such pod{'s' * (per != 1)} a node)")
        blocks[pool.block] = blocks.get(pool.block, 0) + nodes * per
        total += nodes * per
    block = max(blocks.items(), key=lambda kv: kv[1])
    return {"rack": rack, "block": (block[1], f"its largest block ({block[0]})"),
            "none": (total, "the whole cluster (every pool at its most nodes)")}


def summary(table: pa.Table, partition_milli: dict[str, int] | None = None) -> dict[str, Any]:
    job = table.column("job_id")
    minm = table.column("min_member").to_numpy()
    gang_pods = minm > 1
    gangs = len(pc.unique(job.filter(pa.array(gang_pods)))) if gang_pods.any() else 0
    return {
        "pods": table.num_rows,
        "jobs": len(pc.unique(job)),
        "gangs": gangs,
        "gpu_hours": gpu_hours(table, partition_milli),
        "span_h": float(pc.max(table.column("submit_s")).as_py() or 0.0) / 3600.0,
    }


def _instantiate(node, key: str):
    """Hydra instantiate, re-raising our own config errors unwrapped (one clear CLI line)."""
    try:
        return instantiate(node, key, _convert_="all")
    except Exception as exc:
        cause = exc.__cause__
        if isinstance(cause, LoopbenchError):
            raise cause from None
        raise


def generate_task(cfg) -> None:
    """`loopbench generate`: instantiate the workload, check it against the cluster, write it."""
    import time

    from hydra.utils import to_absolute_path

    from harness.trace import TraceMeta, write_trace
    from harness.workload import compile_workload

    t0 = time.perf_counter()
    check_config(cfg)
    workload = _instantiate(cfg.workload, "workload")
    seed = int(cfg.seed)
    cluster = _instantiate(cfg.cluster, "cluster") if cfg.get("cluster") is not None else None
    if cluster is not None and cfg.get("check_fits", True):
        workload.check_gangs_fit(cluster)
    table = workload.table(seed)
    services = workload.service_tables(seed)
    if cluster is not None and cfg.get("check_fits", True) and services is not None:
        _check_replicas_fit(services[0], cluster)
    if cluster is not None and cfg.get("check_fits", True) and table.num_rows:
        never = compile_workload(table, cluster).never_fits
        if never.any():
            row = int(np.flatnonzero(never)[0])
            raise ConfigError(
                "workload",
                f"{int(never.sum())} generated pods fit no node type of cluster '{cluster.name}' "
                f"(first: row {row}, pod {table.column('pod_id')[row].as_py()}); "
                "adjust the workload knobs or pick another cluster (check_fits=false to skip)",
            )
    out = to_absolute_path(str(cfg.out))
    meta = TraceMeta(
        source=workload.describe(seed),
        licence="CC0-1.0",
        time_origin="trace start",
        description="synthetic AI workload: shared-GPU inference, single-node training, multi-node gangs, CPU pods",
    )
    served = ""
    with written_together():
        if services is not None:
            from harness.services.trace import ServicesMeta, write_services

            write_services(services[0], services[1], out, ServicesMeta(meta.source, meta.licence, meta.time_origin,
                                                                       SERVICE_DEMAND_UNIT,
                                                                       "synthetic inference services"))
            served = f", {services[0].num_rows} services ({services[1].num_rows:,} demand windows)"
        write_trace(table, out, meta, allow_empty=services is not None)
    s = summary(table, cluster.partition_profiles if cluster is not None else None)
    print(
        f"wrote {out}: {s['pods']:,} pods, {s['jobs']:,} jobs, {s['gangs']:,} gangs, "
        f"{s['gpu_hours']:,.0f} GPU-hours requested over {s['span_h']:.1f} h of arrivals{served} "
        f"(seed {seed}, {time.perf_counter() - t0:.1f} s)"
    )


def _check_replicas_fit(services: pa.Table, cluster) -> None:
    """Every service's replica fits some node type of `cluster` (as `loopbench generate` checks pods)."""
    from harness.trace import table_from_columns
    from harness.workload import compile_workload

    names = services.column("service")
    shape = ["cpu_milli", "memory_mib", "gpu_count", "gpu_milli", "gpu_partition", "gpu_models", "gpus_same_nvlink"]
    replicas = table_from_columns({"pod_id": names, "job_id": names, "submit_s": [0.0] * len(names),
                                   **{c: services.column(c) for c in shape}})
    never = compile_workload(replicas, cluster).never_fits
    if never.any():
        name = names[int(np.flatnonzero(never)[0])].as_py()
        raise ConfigError(f"workload.services.{name}",
                          f"its replica fits no node type of cluster '{cluster.name}' "
                          "(adjust its shape or pick another cluster; check_fits=false to skip)")
