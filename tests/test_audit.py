"""The audit: no loop reads what a real controller could not know when it decides, a provider's
stock, a pod's run time, a future arrival (its time or its shape) or when a booting node will be
ready.

Four checks, each able to fail:
  types    the surface the simulation hands loops (`SimulationView`, `Provider`, the workload
           view) has none of those, on the objects a real Simulation hands;
  source   every loop module reads the simulation only through `SimulationView` members, the
           provider only through `Provider` members, and no attribute named like the secrets
           (a pool's `stock`, a pod's `duration`, a pool's `boot_delay`, ...);
  runtime  every loop config of conf/loop/ replays a small trace with guards: the provider a
           loop gets has only `Provider` members, a duration read raises, every pod a loop
           binds has arrived and every pod it asks nodes for has too (or is a configured one:
           a service's replica slot, a buffer's pause pod);
  sealed   every loop config of conf/loop/ replays that trace with the future sealed from its
           first step on (`harness.sealed.Unarrived`: the rows of pods not arrived read poison
           until they arrive, and `idle_ticks` is told no later bound than the instant after its
           start) and decides exactly as unsealed: same metrics, jobs, nodes and timeline. A loop
           that reads tomorrow's pods, or the next event's time, decides otherwise.
Planted look-aheads (a loop that buys for tomorrow's job) fail the runtime and sealed checks.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness.config import compose
from harness.errors import LoopbenchError
from harness.loops.base import members
from harness.loops.separate import SeparateLoops
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.replay import build
from harness.sealed import Unarrived
from harness.status import NOT_ARRIVED, PENDING
from harness.trace import TraceMeta, write_trace
from harness.view import Provider, SimulationView
from harness.workload import Workload
from tests import scenarios as sc

ROOT = Path(__file__).resolve().parents[1]
#: the code loops run: their own modules and what they decide with
LOOP_CODE = sorted([*(ROOT / "harness" / "loops").glob("*.py"), *(ROOT / "harness" / "scheduler").glob("*.py"),
                    *(ROOT / "harness" / "kueue").glob("*.py"),
                    ROOT / "harness" / "whatif.py", ROOT / "harness" / "scores.py", ROOT / "harness" / "filters.py",
                    ROOT / "harness" / "services" / "loop.py", ROOT / "harness" / "services" / "replicas.py"])
#: names of what no loop may read, wherever it is reached from
SECRETS = {"stock", "stock_varies", "available", "duration", "boot_delay", "ready_at", "phantom", "_cloud",
           "_duration", "next_arrival", "arrival_order", "arrival_job", "next_event_time", "_heap"}
PROVIDER = {"free_slots", "free_slots_in_emptiest_rack", "free_committed", "room"}


# ---- types --------------------------------------------------------------------------------
def test_the_provider_protocol_is_free_slots_and_room_only():
    assert set(members(Provider)) == PROVIDER


def test_the_simulation_view_names_no_secret():
    assert not set(members(SimulationView)) & (SECRETS | {"nodes", "horizon", "_cloud"})


def test_the_workload_loops_see_hides_run_times(trace):
    """The workload handed loops is their view of the pods; a run time is the simulation's:
    reading one raises (submit times stay: a pod's creation time is public once it exists)."""
    sim, _ = tiny_sim(trace)
    assert isinstance(sim.w, Workload)
    with pytest.raises(LoopbenchError, match="a pod's duration"):
        np.asarray(sim.w.duration)
    assert np.isfinite(sim._duration).all()


def test_the_provider_handed_to_loops_has_no_stock(trace):
    sim, _ = tiny_sim(trace)
    public = {m for m in dir(sim.cloud) if not m.startswith("_")}
    assert public == PROVIDER


# ---- source -------------------------------------------------------------------------------
def reads(path: Path) -> list[str]:
    """What a module reads that a loop may not: a simulation member outside SimulationView, a
    provider member outside Provider, or an attribute named like a secret."""
    view, found = set(members(SimulationView)), []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        on = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
        if node.attr in SECRETS:
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
        elif on == "sim" and node.attr not in view:
            found.append(f"{path.name}:{node.lineno} sim.{node.attr} (not in SimulationView)")
        elif on == "cloud" and node.attr not in PROVIDER:
            found.append(f"{path.name}:{node.lineno} cloud.{node.attr} (not in Provider)")
    return found


@pytest.mark.parametrize("path", LOOP_CODE, ids=lambda p: p.name)
def test_loop_code_reads_no_secret(path):
    assert reads(path) == []


def test_the_source_check_catches_a_planted_stock_read(tmp_path):
    planted = tmp_path / "peek.py"
    planted.write_text("def f(self, p):\n    return self.sim.cluster.pools[p].stock\n"
                       "def g(sim, p):\n    return sim._cloud, sim.cloud.available(p), sim.nodes[0]\n")
    assert reads(planted) == ["peek.py:2 .stock", "peek.py:4 ._cloud", "peek.py:4 .available",
                              "peek.py:4 sim.nodes (not in SimulationView)"]


# ---- runtime ------------------------------------------------------------------------------
def tiny_sim(trace: Path, *overrides: str):
    return build(compose("config", [f"trace.path={trace}", "horizon_s=7200", *overrides]))


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    """Singles, shares and a gang over an hour, so every loop asks for nodes and binds."""
    path = tmp_path_factory.mktemp("audit") / "audit.parquet"
    gang = {"job_id": "g", "min_member": 2, "gpu_count": 8, "submit_s": 600.0, "duration_s": 1800.0}
    pods = [{"submit_s": 60.0 * i, "duration_s": 900.0, "gpu_count": 1 + i % 4} for i in range(12)]
    pods += [{"gpu_count": 1, "gpu_milli": 500, "submit_s": 300.0}, gang, gang]
    write_trace(sc.trace(pods), path, TraceMeta("audit", "CC0-1.0", "trace start"))
    return path


LOOPS = sorted(p.stem for p in (ROOT / "conf" / "loop").glob("*.yaml"))


def configured(sim) -> np.ndarray:
    """Per pod, is it a configured object's (a service's replica slot, a buffer's pause pod)? Its
    shape is known before it exists, as a Deployment's pod template is."""
    w = sim.w
    return w.job_placeholder[w.job] | (w.job_service[w.job] >= 0)


def guard(sim) -> tuple[list[int], list[int]]:
    """Install the runtime guards on a built simulation; returns the pods bound and the node
    counts asked for, as they come."""
    facade = sim.cloud
    sim.cloud = SimpleNamespace(**{m: getattr(facade, m) for m in PROVIDER})  # no private door either
    bind, bound = sim.bind, []
    provision, asked, known = sim.provision, [], configured(sim)

    def guarded_bind(p, n, gpu_idx, on_state=False):
        assert sim.pod_status[p] == PENDING, f"pod {p} bound while not pending (status {sim.pod_status[p]})"
        bound.append(p)
        bind(p, n, gpu_idx, on_state)

    def guarded_provision(p, count, atomic, placement=None, pods=None, template=True):
        if pods is not None:
            pods = np.asarray(pods, np.int64)
            early = pods[(sim.pod_status[pods] == NOT_ARRIVED) & ~known[pods]]
            assert not len(early), f"nodes asked for pods {early.tolist()} before they arrived"
        asked.append(count)
        return provision(p, count, atomic, placement, pods, template)

    sim.bind, sim.provision = guarded_bind, guarded_provision
    return bound, asked


def seal(sim, loop) -> list[Unarrived]:
    """Seal the future from the loop's first step on: once it attached (where it may tabulate
    every pod), the rows of pods not arrived read poison until they arrive, and its `idle_ticks`
    hears of no later instant than the one after `start` (a bound it may always be given: the
    quiet wake-ups it does not pass, it steps, to the same outcome). Returns the seal, once made."""
    made, w, attach, arrive, idle_ticks = [], sim.w, loop.attach, sim.arrive, loop.idle_ticks

    def attach_then_seal(s):
        attach(s)
        made.append(Unarrived(w, configured(sim)))

    def revealing(j, pods=None):
        made[0].reveal(w.job_pods[j] if pods is None else pods)
        arrive(j, pods)

    loop.attach, sim.arrive = attach_then_seal, revealing
    loop.idle_ticks = lambda start, before: idle_ticks(start, np.nextafter(start, np.inf))
    return made


def outputs(sim) -> list:
    jobs, nodes = jobs_frame(sim), nodes_frame(sim)
    return [summary_row(sim, jobs, nodes, {}), jobs, nodes, sim.acct.timeline.frame()]


def replays_alike(trace: Path, *overrides: str, planted: type | None = None) -> bool:
    """Does the loop decide exactly alike with the future sealed (and under the guards)?"""
    runs = []
    for sealed in (False, True):
        sim, run = tiny_sim(trace, *overrides)
        if planted is not None:
            run.__class__ = planted
        if sealed:
            guard(sim)
            made = seal(sim, run)
        sim.run(run)
        if sealed:  # the run is over: the pods that never arrived read true for the tables
            made[0].reveal(np.arange(sim.w.n_pods))
        runs.append(outputs(sim))
    return all(a.equals(b) for a, b in zip(*runs, strict=True))


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("shortage", ["error", "silent"])
def test_every_loop_replays_under_guards(loop, shortage, trace):
    sim, run = tiny_sim(trace, f"loop={loop}", f"cluster.shortage={shortage}")
    bound, asked = guard(sim)
    sim.run(run)
    assert bound, "the guards saw no bind: the audit replay checks nothing"
    assert asked, "the guards saw no request for nodes: the audit replay checks nothing"


@pytest.mark.parametrize("loop", LOOPS)
def test_every_loop_decides_alike_with_the_future_sealed(loop, trace):
    assert replays_alike(trace, f"loop={loop}")


def test_the_runtime_guards_catch_a_bind_before_arrival_and_a_stock_read(trace):
    sim, run = tiny_sim(trace)
    guard(sim)
    run.attach(sim)
    late = int(np.argmax(sim.w.job_submit[sim.w.job]))  # not arrived at 0
    with pytest.raises(AssertionError, match="bound while not pending"):
        sim.bind(late, 0, np.arange(1))
    with pytest.raises(AttributeError):
        sim.cloud.available(0)  # type: ignore[attr-defined]


def test_the_replica_autoscaler_sees_demand_up_to_now_only(tmp_path):
    """A services trace replayed under the guards: every demand the loops were handed is the
    window holding that instant (the simulation's `demand_now`), and the series itself, in the
    workload loops get, raises when read."""
    from harness.services.trace import ServicesMeta, write_services

    windows = [(0.0, 50.0), (600.0, 400.0), (1800.0, 0.0), (2400.0, 90.0)]
    write_trace(sc.trace([{"submit_s": 60.0}]), tmp_path / "s.parquet", TraceMeta("s", "CC0-1.0", "trace start"))
    write_services(sc.services([{"service": "chat", "max_replicas": 4, "capacity_per_replica": 100.0,
                                 "min_replicas": 0, "cold_start_s": 60.0}]),
                   sc.demand({"chat": windows}), tmp_path / "s", ServicesMeta("s", "CC0-1.0", "trace start", "tokens/s"))
    sim, run = tiny_sim(tmp_path / "s.parquet", f"+trace.services={tmp_path / 's.services.parquet'}",
                        f"+trace.demand={tmp_path / 's.demand.parquet'}", "replicas=keda")
    (bound, _), seen, demand_now = guard(sim), [], sim.replicasets.demand_now

    def watched():
        seen.append((sim.now, demand_now()))
        return seen[-1][1]

    sim.replicasets.demand_now = watched
    sim.run(run)
    assert bound and len(seen) > 100
    starts = np.array([t for t, _ in windows])
    for t, d in seen:
        assert d.tolist() == [windows[int(np.searchsorted(starts, t, side="right")) - 1][1]], f"at {t}"
    with pytest.raises(LoopbenchError, match="a service's demand"):
        sim.w.services.demand_value[-1]


# ---- planted look-aheads ------------------------------------------------------------------
class BuysForTomorrow(SeparateLoops):
    """Reads the shape and time of the next pod to come and buys a node for it a boot ahead."""

    #: what it tells the provider the node is for (the runtime guard's case: the pod to come)
    names_the_pod = False
    bought: frozenset[int] = frozenset()

    def step(self, sim, now):
        super().step(sim, now)
        late = np.flatnonzero(sim.pod_status == NOT_ARRIVED)
        if not len(late):
            return
        p = int(late[np.argmin(sim.w.submit[late])])
        if sim.w.submit[p] - now < 300.0 and p not in self.bought:
            self.bought |= {p}
            pools = sim.cluster.pools
            fits = [i for i, pool in enumerate(pools)
                    if sim.cluster.node_types[sim.cluster.type_index(pool.node_type)].gpus >= sim.w.gpus[p]]
            if fits:
                sim.provision(fits[0], 1, atomic=False, pods=np.array([p]) if self.names_the_pod else None)


class NamesTomorrowsPod(BuysForTomorrow):
    names_the_pod = True


class ActsOnTheNextEvent(SeparateLoops):
    """Takes `idle_ticks`' bound for the next event's time (an arrival's, a pod's end) and buys a
    node when it is near."""

    next_event = np.inf

    def idle_ticks(self, start, before):
        self.next_event = before
        return super().idle_ticks(start, before)

    def step(self, sim, now):
        super().step(sim, now)
        if self.next_event - now < 120.0:
            self.next_event = np.inf
            sim.provision(0, 1, atomic=False)


@pytest.mark.parametrize("planted", [BuysForTomorrow, ActsOnTheNextEvent])
def test_a_planted_look_ahead_fails_the_sealed_check(planted, trace):
    assert replays_alike(trace, "loop=separate")  # the loop it is planted in passes
    assert not replays_alike(trace, "loop=separate", planted=planted)


def test_a_planted_request_for_a_pod_not_arrived_fails_the_runtime_guard(trace):
    sim, run = tiny_sim(trace, "loop=separate")
    run.__class__ = NamesTomorrowsPod
    guard(sim)
    with pytest.raises(AssertionError, match="before they arrived"):
        sim.run(run)


def test_the_seal_reads_poison_until_a_pod_arrives(trace):
    sim, run = tiny_sim(trace)
    w, late = sim.w, int(np.argmax(sim.w.submit))
    true_cpu = int(w.cpu[late])
    made = seal(sim, run)
    run.attach(sim)
    assert np.isnan(w.submit[late]) and np.isnan(w.job_submit[w.job[late]])
    assert w.cpu[late] == np.iinfo(w.cpu.dtype).max and w.gpu_milli_total[late] == np.iinfo(np.int64).max
    made[0].reveal(np.array([late]))
    assert w.cpu[late] == true_cpu and np.isfinite(w.submit[late])
