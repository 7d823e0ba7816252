"""Tiny hand-built clusters and traces for golden tests, built in code so each test reads whole."""

from __future__ import annotations

from harness.autoscalers.cluster_autoscaler import ClusterAutoscaler
from harness.autoscalers.expanders import Chain, Price
from harness.autoscalers.karpenter import KarpenterAutoscaler
from harness.autoscalers.scale_down import ScaleDown
from harness.cluster import Cluster
from harness.loops.merged import MergedLoop
from harness.loops.separate import SeparateLoops
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.scheduler import Scheduler
from harness.scheduler.gang import Atomic, Coscheduling, NoGang
from harness.scheduler.pod_group import GangScheduling
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.trace import DEFAULTS, table_from_columns, validate_table
from harness.workload import compile_workload

GPU8 = {"cpu_milli": 64000, "memory_mib": 512000, "gpus": 8, "gpu_model": "H100"}


def node_type(name: str, **kw) -> dict:
    return {"name": name, **GPU8, **kw}


def pool(name: str, node_type: str, boot_s: float = 300.0, **kw) -> dict:
    return {"name": name, "node_type": node_type, "max_size": 4, "boot_delay": {"min_s": boot_s, "max_s": boot_s}, **kw}


def cluster(node_types: list[dict], pools: list[dict], autoscaling: bool = True) -> Cluster:
    return Cluster(node_types=node_types, pools=pools, autoscaling=autoscaling, name="golden")


def trace(pods: list[dict]):
    """One dict per pod; pod_id/job_id default to p<i>/j<i>, resources to one whole GPU."""
    keys = {"cpu_milli": 1000, "memory_mib": 1024, "gpu_count": 1, "gpu_milli": 1000, "submit_s": 0.0,
            "duration_s": 3600.0}
    rows = [{"pod_id": f"p{i}", "job_id": f"j{i}", **keys, **pod} for i, pod in enumerate(pods)]
    names = {k for row in rows for k in row}
    cols = {k: [row.get(k, DEFAULTS.get(k)) for row in rows] for k in names}
    return validate_table(table_from_columns(cols), "<golden>")


#: the gang plugin of each gang mode (conf/loop/scheduler/gang/*.yaml)
GANG = {"none": NoGang, "coscheduling": Coscheduling, "atomic": Atomic, "workload": GangScheduling}


def separate(gang_mode: str = "coscheduling", policy=None, pre_filter=None, **autoscaler) -> SeparateLoops:
    """The separate loops; `pre_filter` a PreFilter plugin of the scheduler (WaitsForCapacity)."""
    autoscaler.setdefault("expander", Chain([Price()]))
    autoscaler.setdefault("scale_down", ScaleDown())
    return SeparateLoops(Scheduler(policy or LeastAllocated(), gang=GANG[gang_mode](), pre_filter=pre_filter),
                         ClusterAutoscaler(**autoscaler))


def karpenter(**settings) -> SeparateLoops:
    """The separate loops with the Karpenter-like autoscaler (its defaults but `settings`)."""
    return SeparateLoops(Scheduler(LeastAllocated(), gang=Coscheduling()), KarpenterAutoscaler(**settings))


def merged(policy=None, **settings) -> MergedLoop:
    return MergedLoop(Scheduler(policy or LeastAllocated(), gang=Atomic()), **settings)


def run(table, cl: Cluster, loop, horizon_s: float, seed: int = 0, stop_when_done: bool = False):
    """Replay and return (metrics row as dict, simulation)."""
    sim = Simulation(compile_workload(table, cl), cl, seed=seed, horizon_s=horizon_s, stop_when_done=stop_when_done)
    sim.run(loop)
    row = summary_row(sim, jobs_frame(sim), nodes_frame(sim), {"loop": getattr(loop, "name", "?")})
    return row.to_dicts()[0], sim


def services(rows: list[dict]):
    """A validated services table (harness/services/trace.py): one dict per service, a whole
    GPU per replica unless given."""
    from harness.services.trace import SERVICE_DEFAULTS, services_from_columns, validate_services

    keys = {"cpu_milli": 1000, "memory_mib": 1024, "gpu_count": 1, "gpu_milli": 1000, "cold_start_s": 0.0}
    rows = [{**keys, **row} for row in rows]
    names = {k for row in rows for k in row}
    cols = {k: [row.get(k, SERVICE_DEFAULTS.get(k)) for row in rows] for k in names}
    return validate_services(services_from_columns(cols), "<golden>")


def demand(windows: dict[str, list[tuple[float, float]]]):
    """A demand table: per service its (start_s, demand) windows."""
    from harness.services.trace import demand_from_columns

    rows = [(s, t, d) for s, ws in windows.items() for t, d in ws]
    return demand_from_columns({"service": [r[0] for r in rows], "start_s": [float(r[1]) for r in rows],
                                "demand": [float(r[2]) for r in rows]})


def service_sim(pods: list[dict], service_rows: list[dict], windows: dict, cl: Cluster, horizon_s: float,
                seed: int = 0, timeline_interval_s: float = 60.0, buffer=None) -> Simulation:
    """A simulation of these pods (possibly none) and services (with a buffer's placeholders)."""
    from harness.services.workload import compile_services
    from harness.trace import SCHEMA

    table = trace(pods) if pods else SCHEMA.empty_table()
    w = compile_services(table, services(service_rows), demand(windows), cl, buffer=buffer)
    return Simulation(w, cl, seed=seed, horizon_s=horizon_s, timeline_interval_s=timeline_interval_s)
