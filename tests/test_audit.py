"""The audit of issue 18: no loop reads what a real controller could not know when it decides,
a provider's stock, a pod's run time, a future arrival or when a booting node will be ready.

Three checks, each able to fail:
  types    the surface the simulation hands loops (`SimulationView`, `Provider`, the workload
           view) has none of those, on the objects a real Simulation hands;
  source   every loop module reads the simulation only through `SimulationView` members, the
           provider only through `Provider` members, and no attribute named like the secrets
           (a pool's `stock`, a pod's `duration`, a pool's `boot_delay`, ...);
  runtime  every loop config of conf/loop/ replays a small trace with guards: the provider a
           loop gets has only `Provider` members, a duration read raises, and every pod a loop
           binds has arrived.
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
from harness.replay import build
from harness.status import PENDING
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


def guard(sim) -> list[int]:
    """Install the runtime guards on a built simulation; returns the pods bound, as they are."""
    facade = sim.cloud
    sim.cloud = SimpleNamespace(**{m: getattr(facade, m) for m in PROVIDER})  # no private door either
    bind, bound = sim.bind, []

    def guarded_bind(p, n, gpu_idx, on_state=False):
        assert sim.pod_status[p] == PENDING, f"pod {p} bound while not pending (status {sim.pod_status[p]})"
        bound.append(p)
        bind(p, n, gpu_idx, on_state)

    sim.bind = guarded_bind
    return bound


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("shortage", ["error", "silent"])
def test_every_loop_replays_under_guards(loop, shortage, trace):
    sim, run = tiny_sim(trace, f"loop={loop}", f"cluster.shortage={shortage}")
    bound = guard(sim)
    sim.run(run)
    assert bound, "the guards saw no bind: the audit replay checks nothing"


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
    bound, seen, demand_now = guard(sim), [], sim.replicasets.demand_now

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
