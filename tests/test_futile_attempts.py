"""A futile gang attempt taken as its net effect (`Scheduler.futile_gang`) leaves a replay as
running it member by member does, bit for bit: every output table, and on small random
clusters every array, counter and float sum of the simulation, its cluster state, ledger,
accounting and scheduler. The gate keeps the shortcut to where that is provable."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.scheduler.framework as framework
from harness.config import compose
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.replay import build
from harness.scheduler import Scheduler
from harness.scheduler.capacity import WaitsForCapacity
from harness.scheduler.filter import NodeResourcesFit
from harness.scheduler.gang import Atomic, Coscheduling, NoGang
from harness.scheduler.plugin import Plugin
from harness.scheduler.pod_group import GangScheduling
from harness.scheduler.preemption import DefaultPreemption
from harness.scores import (
    FGD,
    BalancedAllocation,
    GpuClustering,
    LeastAllocated,
    MostAllocated,
    RandomScore,
    WeightedSum,
)
from harness.sim import Simulation
from harness.status import PENDING
from harness.workload import compile_workload
from tests import scenarios as sc
from tests.test_pinned_outputs import HORIZON_S, TRACE
from tests.test_unbind_many import assert_same, snapshot


@pytest.fixture
def taken(monkeypatch):
    """The futile attempts taken whole in this test, alone or in runs: [(job, members bound and
    released)]."""
    seen: list[tuple[int, int]] = []
    release, releases_alike = Coscheduling.release_at_once, Coscheduling.releases_alike

    def counted(self, j, plan, frags=None):
        seen.append((j, len(plan)))
        return release(self, j, plan, frags)

    def counted_alike(self, jobs, trips, pods):
        seen.extend((j, len(nodes)) for j, (nodes, _) in zip(jobs.tolist(), trips, strict=True))
        return releases_alike(self, jobs, trips, pods)
    monkeypatch.setattr(Coscheduling, "release_at_once", counted)
    monkeypatch.setattr(Coscheduling, "releases_alike", counted_alike)
    return seen


def replay(loop: str, at_once: bool, monkeypatch) -> tuple[dict[str, pl.DataFrame], int]:
    monkeypatch.setattr(framework, "FUTILE_ATTEMPTS_AT_ONCE", at_once)
    sim, lp = build(compose("config", [f"loop={loop}", f"trace.path={TRACE}", f"horizon_s={HORIZON_S}"]))
    sim.run(lp)
    jobs, nodes = jobs_frame(sim), nodes_frame(sim)
    tables = {"metrics": summary_row(sim, jobs, nodes, {"loop": loop}), "jobs": jobs, "nodes": nodes,
              "timeline": sim.acct.timeline.frame()}
    return tables, sim.n_events


@pytest.mark.parametrize("loop", ["separate", "separate_2026", "separate_karpenter", "separate_provreq"])
def test_every_output_table_is_the_same_with_futile_attempts_taken_whole(loop, taken, monkeypatch):
    """The pinned trace's 72 gangs (all kept to a rack or block) on the default (DRA) cluster,
    released again and again under Coscheduling."""
    member_by_member, events = replay(loop, False, monkeypatch)
    assert not taken
    at_once, events_at_once = replay(loop, True, monkeypatch)
    assert len(taken) > 100  # the path is taken, often
    assert events_at_once == events
    for name, frame in member_by_member.items():
        assert at_once[name].equals(frame, null_equal=True), f"{loop}: {name} differs"


# ---- small random clusters: the whole simulation, bit for bit ---------------------------------
def whole(sim, loop) -> dict:
    """Everything the replay left, as plain values: the simulation, cluster state, ledger and
    accounting (`snapshot`), the scheduler's and its gang plugin's arrays, and the events still
    to run (a cancelled timer is no event; a call's id is not compared, only its order)."""
    out = snapshot(sim)
    del out["sim._heap"]
    live = sorted(e for e in sim._heap if e[1] not in sim._cancelled)
    out["events"] = [(t, getattr(fn, "__name__", repr(fn)), re.sub(" at 0x[0-9a-f]+", "", repr(args)))
                     for t, _, fn, args in live]
    sched = loop.scheduler
    for name in ("tried_at", "next_start", "seen", "said", "booked_for"):
        out[f"scheduler.{name}"] = getattr(sched, name)
    gang = sched.plugins["gang"]
    out["gang.timer_set"] = gang.timer >= 0
    out["gang.denied_until"] = gang.denied_until
    return out


def random_replay(seed_nodes, gangs, racks, at_once, runs_at_once=True, plans_kept=True):
    n_nodes, gpus = seed_nodes
    cl = sc.cluster([sc.node_type("h", gpus=gpus)],
                    [sc.pool("p", "h", min_size=n_nodes, max_size=n_nodes + 2, nodes_per_rack=racks)])
    pods = [{"job_id": f"g{i}", "gpu_count": g, "min_member": m, "submit_s": float(t), "duration_s": float(d),
             "gang_locality": loc}
            for i, (size, m, g, t, d, loc) in enumerate(gangs) for _ in range(size)]
    loop = sc.separate("coscheduling", policy=WeightedSum([LeastAllocated(), BalancedAllocation()]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(framework, "FUTILE_ATTEMPTS_AT_ONCE", at_once)
        patch.setattr(framework, "FUTILE_RUNS_AT_ONCE", runs_at_once)
        patch.setattr(framework, "FUTILE_PLANS_KEPT", plans_kept)
        _, sim = sc.run(sc.trace(pods), cl, loop, horizon_s=4000.0)
    return whole(sim, loop)


gangs = st.lists(st.tuples(st.integers(2, 6), st.integers(2, 6), st.integers(1, 8), st.integers(0, 1200),
                           st.integers(60, 2400), st.sampled_from(["none", "rack"])),
                 min_size=1, max_size=8).map(lambda gs: [(s, min(m, s), g, t, d, loc) for s, m, g, t, d, loc in gs])


@settings(max_examples=40, deadline=None)
@given(nodes=st.tuples(st.integers(1, 4), st.sampled_from([4, 8])), gangs=gangs, racks=st.integers(1, 2))
def test_small_random_clusters_end_bit_for_bit_alike(nodes, gangs, racks):
    """Gangs of 2-6 pods of 1-8 GPUs, some kept to a rack, arriving over 20 min on 1-4 ready
    nodes (of racks of 1-2) that the autoscaler may grow by 2."""
    gangs = [(s, m, min(g, nodes[1]), t, d, loc) for s, m, g, t, d, loc in gangs]
    assert_same(random_replay(nodes, gangs, racks, False), random_replay(nodes, gangs, racks, True))


@settings(max_examples=8, deadline=None)
@given(n_nodes=st.integers(105, 130), lone=st.lists(st.tuples(st.integers(0, 600), st.integers(60, 1800)), max_size=12),
       gangs=st.lists(st.tuples(st.integers(60, 140), st.integers(0, 900), st.sampled_from(["none", "none", "rack"])),
                      min_size=1, max_size=4))
def test_walks_over_more_nodes_than_a_cycle_scores_end_bit_for_bit_alike(n_nodes, lone, gangs):
    """Over 100 ready 1-GPU nodes a cycle scores only the 100 feasible ones its walk finds first
    (nextStartNodeIndex moves with each pod): gangs of 60-140 one-GPU pods beside lone pods that
    come and go, nodes in racks of 64."""
    def replay(at_once: bool) -> dict:
        cl = sc.cluster([sc.node_type("g1", gpus=1, cpu_milli=8000)],
                        [sc.pool("p", "g1", min_size=n_nodes, max_size=n_nodes, nodes_per_rack=64)], autoscaling=False)
        pods = [{"job_id": f"l{i}", "submit_s": float(t), "duration_s": float(d)} for i, (t, d) in enumerate(lone)]
        pods += [{"job_id": f"g{i}", "min_member": size, "submit_s": float(t), "duration_s": 600.0, "gang_locality": loc}
                 for i, (size, t, loc) in enumerate(gangs) for _ in range(size)]
        loop = sc.separate("coscheduling")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(framework, "FUTILE_ATTEMPTS_AT_ONCE", at_once)
            _, sim = sc.run(sc.trace(pods), cl, loop, horizon_s=3000.0)
        return whole(sim, loop)
    assert_same(replay(False), replay(True))


def test_a_futile_attempt_binds_what_fits_on_its_nodes_then_releases(taken):
    """Two ready 8-GPU nodes; a pod of 4 GPUs runs on one. A gang of 4 x 4 GPUs (quorum 4)
    finds room for 1 + 2 = 3 members: its attempt binds 3 (`fits_on`), the 4th fits nowhere,
    and more than 10 % of the quorum is missing, so PostFilter releases the 3 at once. Taken
    whole: the 3 pods' epochs move to 1, the capacity version by 3 (one per release), and the
    nodes end as they were, the gang pending and backed off."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=2, max_size=2)], autoscaling=False)
    pods = [{"job_id": "lone", "gpu_count": 4}] + [{"job_id": "gang", "gpu_count": 4, "min_member": 4,
                                                     "submit_s": 1.0}] * 4
    loop = sc.separate("coscheduling")
    sim = Simulation(compile_workload(sc.trace(pods), cl), cl, seed=0, horizon_s=1.0)
    sim.run(loop)
    gang = int(np.flatnonzero(sim.w.job_min_member > 1)[0])
    assert taken == [(gang, 3)]
    members = sim.w.job_pods[gang]
    assert (sim.pod_status[members] == PENDING).all()
    assert sorted(sim.pod_epoch[members].tolist()) == [0, 1, 1, 1]
    assert sim.state.free_whole[np.flatnonzero(sim.state.ready)].tolist() in ([4, 8], [8, 4])
    assert sim.job_placed[gang] == 0 and sim.job_anchor[gang] == -1
    assert loop.scheduler.tried_at[gang] == sim.state.version
    assert (loop.scheduler.plugins["gang"].timer < 0).all()


# ---- the gate ------------------------------------------------------------------------------
class UserFilter(NodeResourcesFit):
    """A user's Filter plugin (`stateless` only when it says so)."""

    stateless = False


class StatelessUserFilter(NodeResourcesFit):
    stateless = True


class Recording(Plugin):
    """A user's Reserve plugin that records placements."""

    def on_bind(self, state, w, p, n):
        pass


def profile(**kw) -> Scheduler:
    """A profile attached to a small simulation (the gate is decided on attach)."""
    kw.setdefault("gang", Coscheduling())
    policy = kw.pop("policy", LeastAllocated())
    sched = Scheduler(policy, **kw)
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=1, max_size=1)], autoscaling=False)
    sim = Simulation(compile_workload(sc.trace([{}]), cl), cl, seed=0, horizon_s=1.0)
    sched.attach(sim)
    return sched


@pytest.mark.parametrize("kw", [
    {}, {"policy": MostAllocated()}, {"policy": WeightedSum([LeastAllocated(), BalancedAllocation()])},
    {"filter": StatelessUserFilter()}])
def test_the_shortcut_is_taken_for_coscheduling_and_stateless_plugins(kw):
    assert isinstance(profile(**kw).futile_gang, Coscheduling)


@pytest.mark.parametrize("kw", [
    {"gang": NoGang()}, {"gang": Atomic()}, {"gang": GangScheduling()},
    {"post_filter": DefaultPreemption()}, {"pre_filter": WaitsForCapacity()},
    {"policy": FGD()}, {"policy": RandomScore()}, {"policy": GpuClustering()},
    {"policy": WeightedSum([LeastAllocated(), FGD()])},
    {"filter": UserFilter()}, {"recorder": Recording()}],
    ids=["NoGang", "Atomic", "GangScheduling", "preemption", "waits_for_capacity", "FGD", "random",
         "gpu_clustering", "sum_with_FGD", "user_filter", "user_reserve"])
def test_the_shortcut_is_not_taken_outside_its_gate(kw):
    assert profile(**kw).futile_gang is None


def test_the_switch_turns_the_shortcut_off(monkeypatch):
    monkeypatch.setattr(framework, "FUTILE_ATTEMPTS_AT_ONCE", False)
    assert profile().futile_gang is None


def futile_scene(gang_pods: list[dict]):
    """Two ready 8-GPU nodes, one half taken; a gang that cannot fit arrives at t=1."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=2, max_size=2)], autoscaling=False)
    pods = [{"job_id": "lone", "gpu_count": 4}] + [{"job_id": "gang", "min_member": len(gang_pods), "submit_s": 1.0,
                                                     **pod} for pod in gang_pods]
    return Simulation(compile_workload(sc.trace(pods), cl), cl, seed=0, horizon_s=1.0)


def test_a_gang_of_mixed_shapes_runs_member_by_member(taken):
    sim = futile_scene([{"gpu_count": 4}] * 3 + [{"gpu_count": 2}])
    sim.run(sc.separate("coscheduling"))
    assert not taken and sim.pod_epoch.max() == 1  # released, member by member


def test_with_the_decision_trace_on_attempts_run_member_by_member(taken):
    sim = futile_scene([{"gpu_count": 4}] * 4)
    sim.hooks.event.append(lambda *event: None)
    sim.run(sc.separate("coscheduling"))
    assert not taken and sim.pod_epoch.max() == 1


def test_a_gang_that_fits_is_bound_as_ever(taken):
    sim = futile_scene([{"gpu_count": 4}] * 3)
    sim.run(sc.separate("coscheduling"))
    assert not taken and math.isclose(sim.job_started[sim.w.job_min_member > 1][0], 1.0)


# ---- a futile attempt seen before: its round trip replayed, not measured again ------------------
def measuring_every_trip(patch, trips: list[bool]) -> None:
    """Make `bind_then_release` measure every trip's F_n on a trial even when handed those of a
    trip on the same contents (the reference); `trips` records whether each call was handed them."""
    bind_then_release = Simulation.bind_then_release

    def measured(self, plan, frags=None):
        trips.append(frags is not None)
        return bind_then_release(self, plan)
    patch.setattr(Simulation, "bind_then_release", measured)


@settings(max_examples=25, deadline=None)
@given(nodes=st.tuples(st.integers(1, 4), st.sampled_from([4, 8])), gangs=gangs, racks=st.integers(1, 2))
def test_a_round_trip_replayed_ends_as_one_measured_again(nodes, gangs, racks):
    """As `test_small_random_clusters_end_bit_for_bit_alike`, the futile attempts taken whole both
    times: a trip whose nodes hold what they held when it was last measured leaves the
    simulation, cluster state, ledger, accounting and scheduler as measuring it again
    does (`ClusterState.round_trip`, `Ledger.round_trip`)."""
    gangs = [(s, m, min(g, nodes[1]), t, d, loc) for s, m, g, t, d, loc in gangs]
    trips: list[bool] = []
    with pytest.MonkeyPatch.context() as patch:
        measuring_every_trip(patch, trips)
        measured = random_replay(nodes, gangs, racks, True)
    assert_same(measured, random_replay(nodes, gangs, racks, True))


def test_the_pinned_trace_ends_alike_with_round_trips_replayed(monkeypatch):
    """On the default (DRA) cluster: the whole simulation after 2.5 h of the pinned trace through
    the separate loop, trips replayed or measured again on a trial (each attempt on its own
    turn: the runs taken in one step are compared with that below)."""
    monkeypatch.setattr(framework, "FUTILE_RUNS_AT_ONCE", False)

    def run(measuring: bool) -> tuple[dict, list[bool]]:
        trips: list[bool] = []
        with pytest.MonkeyPatch.context() as patch:
            if measuring:
                measuring_every_trip(patch, trips)
            sim, lp = build(compose("config", ["loop=separate", f"trace.path={TRACE}", f"horizon_s={HORIZON_S}"]))
            sim.run(lp)
        return whole(sim, lp), trips
    measured, trips = run(True)
    assert sum(trips) > 100  # trips on contents seen before, often
    replayed, _ = run(False)
    assert_same(measured, replayed)


# ---- a shape that fitted nowhere is not filtered over every node again -----------------------
def test_a_shape_that_fit_nowhere_waits_for_a_node_that_changed(monkeypatch):
    """Two ready 8-GPU nodes, each full with a pod of 8 GPUs (ending at 100 s and 1000 s); a pod
    of 8 GPUs (50 s long) arrives at 0 and fits nowhere. Pods of 4 GPUs arrive at 10 and 20 s (new jobs:
    cycles run, and each also fits nowhere) with no node changed: the attempts of the pods whose
    shape fitted nowhere would change nothing, so no Filter over every node is run for them; at
    100 s a node is free and the 8-GPU pod (first in the queue) takes it. Hand count of the
    Filters over every node (a `select`: Filter, walk and Score in one): one per pod at 0 s
    (a, b bind; the 8-GPU pod fits nowhere), the first 4-GPU pod's at 10 s (fits nowhere; the
    second, at 20 s, is of its shape), the 8-GPU pod's at 100 s, when the freed node alone is
    filtered for it first (`at=`); then, that node full again, it alone for the 4-GPU shape; at
    150 s the 8-GPU pod ends and both 4-GPU pods are swept and bind."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=2, max_size=2)], autoscaling=False)
    pods = [{"job_id": "a", "gpu_count": 8, "duration_s": 100.0}, {"job_id": "b", "gpu_count": 8, "duration_s": 1000.0},
            {"job_id": "big", "gpu_count": 8, "submit_s": 0.0, "duration_s": 50.0},
            {"job_id": "c", "gpu_count": 4, "submit_s": 10.0}, {"job_id": "d", "gpu_count": 4, "submit_s": 20.0}]
    loop = sc.separate("coscheduling")
    sweeps: list[tuple[float, int]] = []  # (time, pod) of each Filter over every usable node
    select = Scheduler.select

    def counted(self, p, allowed):
        sweeps.append((sim.now, int(p)))
        return select(self, p, allowed)
    monkeypatch.setattr(Scheduler, "select", counted)
    sim = Simulation(compile_workload(sc.trace(pods), cl), cl, seed=0, horizon_s=200.0)
    sim.run(loop)
    assert sim.pod_start[2] == 100.0
    # a and b bind at 0 s, the 8-GPU pod fits nowhere; the first 4-GPU pod fits nowhere at 10 s;
    # the 8-GPU pod binds at 100 s; the 4-GPU pods are not swept at 20 or 100 s, but at 150 s,
    # when the 8-GPU pod ends, and both bind there
    assert sweeps == [(0.0, 0), (0.0, 1), (0.0, 2), (10.0, 3), (100.0, 2), (150.0, 3), (150.0, 4)]


# ---- futile attempts one after another in a cycle: taken in one step --------------------------
@pytest.fixture
def runs(monkeypatch):
    """The lengths of the runs of futile attempts taken in one step in this test."""
    seen: list[int] = []
    releases_alike = Coscheduling.releases_alike

    def counted(self, jobs, trips, pods):
        seen.append(len(jobs))
        return releases_alike(self, jobs, trips, pods)
    monkeypatch.setattr(Coscheduling, "releases_alike", counted)
    return seen


def test_a_round_trip_after_another_moves_the_counters_as_each_alone():
    """Hand count: from 0 changes, trips [0, 1] then [1] bind and release 0, 1, 0, 1 then 1, 1:
    six changes, node 0 last changed by the 3rd, node 1 by the 6th; the capacity version moves
    by one per release (2 after the first trip, 3 after the second); the grown nodes are the
    binds' nodes, in order."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=2, max_size=2)], autoscaling=False)
    st = Simulation(compile_workload(sc.trace([{}]), cl), cl, seed=0, horizon_s=1.0).state
    st.take_grown()
    mutations, version = st.mutations, st.version
    versions = st.round_trips([[0, 1], [1]])
    assert versions.tolist() == [version + 2, version + 3] and st.version == version + 3
    assert st.mutations == mutations + 6
    assert st.changed_at[[0, 1]].tolist() == [mutations + 3, mutations + 6]
    assert st.grown == [0, 1, 1]


@settings(max_examples=40, deadline=None)
@given(trips=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=4), min_size=1, max_size=6),
       frag=st.floats(0.0, 1.0))
def test_round_trips_in_one_step_are_round_trips_in_turn(trips, frag):
    """Any trips over four nodes: the state's counters, change stamps and grown nodes, and the
    ledger's noted nodes and running fragmentation sum, as `round_trip` of each in turn leaves
    them (the F_n of each transition made up: a fraction of `frag`); the version after each
    trip as it was then."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=4, max_size=4)], autoscaling=False)
    one, each = (Simulation(compile_workload(sc.trace([{}]), cl), cl, seed=0, horizon_s=1.0) for _ in range(2))
    trips = [(nodes, [frag / (k + 1) for k in range(2 * len(nodes))]) for nodes in trips]
    versions = one.state.round_trips([nodes for nodes, _ in trips])
    one.ledger.round_trips(trips)
    after = []
    for nodes, frags in trips:
        each.state.round_trip(nodes)
        each.ledger.round_trip(nodes, frags)
        after.append(each.state.version)
    assert versions.tolist() == after
    for a, b in ((one.state, each.state), (one.ledger, each.ledger)):
        assert_same({k: v for k, v in vars(a).items() if k not in ("cluster", "state", "target")},
                    {k: v for k, v in vars(b).items() if k not in ("cluster", "state", "target")})


@settings(max_examples=40, deadline=None)
@given(nodes=st.tuples(st.integers(1, 4), st.sampled_from([4, 8])), gangs=gangs, racks=st.integers(1, 2))
def test_runs_taken_in_one_step_end_bit_for_bit_as_each_on_its_turn(nodes, gangs, racks):
    """As `test_small_random_clusters_end_bit_for_bit_alike`: futile attempts that follow each
    other in a cycle taken in one step, or each on its own turn through the cycle."""
    gangs = [(s, m, min(g, nodes[1]), t, d, loc) for s, m, g, t, d, loc in gangs]
    assert_same(random_replay(nodes, gangs, racks, True, runs_at_once=False), random_replay(nodes, gangs, racks, True))


@pytest.mark.parametrize("loop", ["separate", "separate_2026", "separate_karpenter", "separate_provreq"])
def test_every_output_table_is_the_same_with_runs_taken_in_one_step(loop, runs, monkeypatch):
    """The pinned trace: every output table, and the events, with futile attempts that follow
    each other taken in one step or each on its own turn."""
    monkeypatch.setattr(framework, "FUTILE_RUNS_AT_ONCE", False)
    each_alone, events = replay(loop, True, monkeypatch)
    assert not runs
    monkeypatch.setattr(framework, "FUTILE_RUNS_AT_ONCE", True)
    in_runs, events_in_runs = replay(loop, True, monkeypatch)
    assert sum(n > 1 for n in runs) > 10  # runs of several gangs, often
    assert events_in_runs == events
    for name, frame in each_alone.items():
        assert in_runs[name].equals(frame, null_equal=True), f"{loop}: {name} differs"


def pinned_whole(switch: str, on: bool) -> dict:
    """`whole` after 2.5 h of the pinned trace through the separate loop, with the framework's
    `switch` (a FUTILE_... flag) on or off."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(framework, switch, on)
        sim, lp = build(compose("config", ["loop=separate", f"trace.path={TRACE}", f"horizon_s={HORIZON_S}"]))
        sim.run(lp)
    return whole(sim, lp)


def test_the_pinned_trace_ends_alike_with_runs_taken_in_one_step(runs, monkeypatch):
    """The whole simulation (every array, counter and float sum) after 2.5 h of the pinned trace
    through the separate loop, runs taken in one step or each attempt on its own turn."""
    each_alone = pinned_whole("FUTILE_RUNS_AT_ONCE", False)
    assert not runs
    in_runs = pinned_whole("FUTILE_RUNS_AT_ONCE", True)
    assert sum(n > 1 for n in runs) > 10
    assert_same(each_alone, in_runs)


# ---- a gang class's plan kept while the nodes it depends on are as they were ------------------
@settings(max_examples=40, deadline=None)
@given(nodes=st.tuples(st.integers(1, 4), st.sampled_from([4, 8])), gangs=gangs, racks=st.integers(1, 2))
def test_plans_kept_across_changes_end_bit_for_bit_as_plans_forgotten(nodes, gangs, racks):
    """As `test_small_random_clusters_end_bit_for_bit_alike`: a class's plan kept while none of
    the nodes it depends on changed but by futile round trips, or forgotten at any change."""
    gangs = [(s, m, min(g, nodes[1]), t, d, loc) for s, m, g, t, d, loc in gangs]
    assert_same(random_replay(nodes, gangs, racks, True, plans_kept=False), random_replay(nodes, gangs, racks, True))


@pytest.mark.parametrize("loop", ["separate", "separate_2026", "separate_karpenter", "separate_provreq"])
def test_every_output_table_is_the_same_with_plans_kept(loop, taken, monkeypatch):
    """The pinned trace: every output table, and the events, with plans kept across changes of
    other nodes or forgotten at any change: the same futile attempts, fewer of them tried member
    by member (a run's are taken in one step, the others alone: `release_at_once`)."""
    alone: list[int] = []
    release = Coscheduling.release_at_once

    def counted(self, j, plan, frags=None):
        alone.append(j)
        return release(self, j, plan, frags)
    monkeypatch.setattr(Coscheduling, "release_at_once", counted)
    monkeypatch.setattr(framework, "FUTILE_PLANS_KEPT", False)
    forgotten, events = replay(loop, True, monkeypatch)
    taken_forgotten, alone_forgotten = len(taken), len(alone)
    monkeypatch.setattr(framework, "FUTILE_PLANS_KEPT", True)
    kept, events_kept = replay(loop, True, monkeypatch)
    assert len(taken) == 2 * taken_forgotten  # the same futile attempts
    assert len(alone) - alone_forgotten < alone_forgotten  # fewer first attempts of a class
    assert events_kept == events
    for name, frame in forgotten.items():
        assert kept[name].equals(frame, null_equal=True), f"{loop}: {name} differs"


def test_the_pinned_trace_ends_alike_with_plans_kept(monkeypatch):
    """The whole simulation after 2.5 h of the pinned trace through the separate loop, plans kept
    across changes of other nodes or forgotten at any change."""
    assert_same(pinned_whole("FUTILE_PLANS_KEPT", False), pinned_whole("FUTILE_PLANS_KEPT", True))


class StatelessUserScore(LeastAllocated):
    """A user's stateless Score plugin that does not say it scores the candidates alone."""

    scores_candidates_alone = False


@pytest.mark.parametrize("kw, kept", [
    ({}, True), ({"policy": WeightedSum([LeastAllocated(), BalancedAllocation()])}, True),
    ({"policy": StatelessUserScore()}, False),
    ({"policy": WeightedSum([LeastAllocated(), StatelessUserScore()])}, False)],
    ids=["least_allocated", "sum_of_built_ins", "user_score", "sum_with_user_score"])
def test_plans_are_kept_only_where_every_score_plugin_scores_the_candidates_alone(kw, kept):
    sched = profile(**kw)
    assert isinstance(sched.futile_gang, Coscheduling) and sched.plans_kept is kept


def test_the_switch_forgets_plans_at_any_change(monkeypatch):
    monkeypatch.setattr(framework, "FUTILE_PLANS_KEPT", False)
    assert not profile().plans_kept


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=6), data=st.data())
def test_first_pending_pods_are_the_pending_pods_listed_job_by_job(sizes, data):
    """Jobs of 1-5 pods, each pod pending or not at random, and a number of first pods asked of
    each job: the count of pending pods per job and the first ones asked, job after job, as a
    list of the jobs' pods filtered to the pending ones gives them (what a run of futile
    attempts binds and releases)."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=1, max_size=1)], autoscaling=False)
    pods = [{"job_id": f"j{j}", "min_member": size} for j, size in enumerate(sizes) for _ in range(size)]
    sim = Simulation(compile_workload(sc.trace(pods), cl), cl, seed=0, horizon_s=1.0)
    w = sim.w
    sim.pod_status[:] = np.where(data.draw(st.lists(st.booleans(), min_size=w.n_pods, max_size=w.n_pods)),
                                 PENDING, 0)
    jobs = np.array(data.draw(st.lists(st.integers(0, w.n_jobs - 1), min_size=1, max_size=6)), np.int64)
    heads = np.array(data.draw(st.lists(st.integers(0, 6), min_size=len(jobs), max_size=len(jobs))), np.int64)
    pending, first = sim.first_pending(jobs, heads)
    listed = [w.job_pods[j][sim.pod_status[w.job_pods[j]] == PENDING] for j in jobs.tolist()]
    assert pending.tolist() == [len(p) for p in listed]
    assert first.tolist() == [int(p) for ps, k in zip(listed, heads.tolist(), strict=True) for p in ps[:k]]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(1, 8), pct=st.integers(0, 100), backoff=st.sampled_from([0.0, 30.0]))
def test_futile_after_is_pre_filter_then_releases_after_of_each(data, n, pct, backoff):
    """Random gangs (min_member 1-8, pods arrived, placed, started or not, denied until before or
    after now when there is a backoff) and members bound 0-8: the vector test of a run says of
    each gang what its own turn says, `pre_filter` letting it through and `releases_after`."""

    def ints(lo, hi):
        return np.array(data.draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n)), np.int64)
    min_member = ints(1, 8)
    sim = SimpleNamespace(now=100.0, w=SimpleNamespace(job_min_member=min_member), job_arrived=ints(0, 8),
                          job_placed=ints(0, 1), job_started=np.where(ints(0, 3) == 0, 5.0, np.nan))
    gang = Coscheduling(reject_percentage=pct, backoff_s=backoff)
    gang.sim = sim
    gang.denied_until = np.where(ints(0, 1) == 1, 130.0, -np.inf) if backoff else np.full(n, -np.inf)
    bound = ints(0, 8)
    expected = [gang.pre_filter(j, np.zeros(0, bool), -1) is not None and gang.releases_after(j, int(bound[j]))
                for j in range(n)]
    assert gang.futile_after(np.arange(n), bound).tolist() == expected


def test_a_futile_attempt_on_distinct_nodes_measures_each_release_as_a_trial_does(monkeypatch):
    """Three ready 8-GPU nodes: a 4-GPU pod runs on one, a 2-GPU pod on another. A gang of
    4 x 4 GPUs (quorum 4) finds room for one member on each of those two (4 and 6 GPUs free;
    the empty node is filled by a lone 8-GPU pod first), so its attempt binds 2 members on
    distinct nodes of different contents and is released at once. The F_n its trial hands on
    (the releases' measured once the trial is undone) are those a trial binding then
    releasing them in turn measures (`bind_then_release` without them, the reference)."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("h", "h8", min_size=3, max_size=3)], autoscaling=False)
    pods = [{"job_id": "four", "gpu_count": 4}, {"job_id": "two", "gpu_count": 2},
            {"job_id": "eight", "gpu_count": 8}] + [{"job_id": "gang", "gpu_count": 4, "min_member": 4,
                                                      "submit_s": 1.0}] * 4
    handed: list[tuple[list[float], list[float]]] = []
    bind_then_release = Simulation.bind_then_release

    def measured(self, plan, frags=None):
        again = bind_then_release(self, plan)
        handed.append((frags, again))
        return again
    monkeypatch.setattr(Simulation, "bind_then_release", measured)
    sim = Simulation(compile_workload(sc.trace(pods), cl), cl, seed=0, horizon_s=1.0)
    sim.run(sc.separate("coscheduling"))
    assert len(handed) == 1
    frags, reference = handed[0]
    assert len(frags) == 4 and frags[0] != frags[1], "two members on nodes of different contents"
    assert frags == reference
