"""Services golden tests: tiny hand-built services whose replica counts, unserved demand, time to
capacity, cold starts and warm idle hours are computed by hand below, under upstream's HPA and
KEDA (harness/services/replicas.py, part A) beside the separate loops; then invariants over
random demand, and bulk quiet ticks giving exactly the results of stepping each.

The services tables are built with part B's `services_from_columns` (tests/scenarios.py).
The cluster: one 8-GPU node, ready at 0 (min_size 1, no autoscaling), so a created replica
runs at once and is ready `cold_start_s` later. HPA defaults: a sync every 15 s from 0,
target 0.7 x capacity_per_replica (70 units/s for a capacity of 100), tolerance 0.1.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.services.loop import ReplicaLoop
from harness.services.replicas import HorizontalPodAutoscaler, KedaScaledObject
from harness.status import NOT_ARRIVED, RUNNING
from tests import scenarios as sc
from tests.test_invariants import check_state, small_cluster
from tests.test_quiet import bits

ONE = {"service": "svc", "capacity_per_replica": 100.0, "min_replicas": 1, "max_replicas": 4, "cold_start_s": 120.0}


def one_node():
    return sc.cluster([sc.node_type("h8")], [sc.pool("r", "h8", min_size=1, max_size=1)], autoscaling=False)


def replay(service: dict, windows: list, autoscaler, horizon_s: float):
    """Run and record every creation and deletion as (t, +k or -k)."""
    sim = sc.service_sim([], [service], {"svc": windows}, one_node(), horizon_s)
    changes = []
    create, delete = sim.replicasets.create, sim.replicasets.delete
    sim.replicasets.create = lambda s, k: (changes.append((sim.now, k)), create(s, k))[1]  # type: ignore[method-assign]
    sim.replicasets.delete = lambda s, k: (changes.append((sim.now, -k)), delete(s, k))[1]  # type: ignore[method-assign]
    sim.run(ReplicaLoop(sc.separate(), autoscaler))
    return sim, changes, sim.replicasets.acct.totals()


BURST = [(0.0, 0.0), (300.0, 50.0), (600.0, 200.0)]


def test_a_burst_is_served_late_by_a_cold_start():
    """At 0 the HPA's floor, one replica, is created (ready at 120). At 600 demand jumps to 200:
    ceil(200 / 70) = 3, within the scale-up limit (max(1 + 4 Pods, 2 x 1 Percent) = 5), so two
    more are created at 600 and are ready at 720; until then ready capacity is 100 < 200:
      unserved = (200 - 100) x 120 = 12,000 units, one episode of 120 s (p50 = p99 = 120);
      demand = 50 x 300 + 200 x 600 = 135,000 units;
      warm idle GPUs: 1 x (300 - 120) + (1 - 50/100) x 300 + 0 x 120 + (3 - 2) x 480 = 810 GPU-s.
    From 720, 200 / (70 x 3) = 0.95 is within the tolerance: three stay."""
    sim, changes, tot = replay(ONE, BURST, HorizontalPodAutoscaler(), 1200.0)
    assert changes == [(0.0, 1), (600.0, 2)]
    assert tot["demand_units"] == 135_000.0
    assert tot["demand_unserved_units"] == 12_000.0
    assert tot["demand_unserved_share"] == 12_000.0 / 135_000.0
    assert tot["capacity_episodes"] == 1 and tot["capacity_episodes_open"] == 0
    assert tot["time_to_capacity_p50_s"] == tot["time_to_capacity_p99_s"] == 120.0
    assert tot["cold_starts"] == 3 and tot["replicas_created"] == 3 and tot["replicas_deleted"] == 0
    assert tot["warm_idle_accel_hours"] == pytest.approx(810.0 / 3600.0, abs=1e-12)


@pytest.mark.parametrize(("window_s", "deleted_at"), [(300.0, 1485.0), (0.0, 1200.0)])
def test_a_scale_down_is_held_by_the_stabilization_window(window_s, deleted_at):
    """Demand falls back to 50 at 1200: the proposal is ceil(50 / 70) = 1, but the scale-down
    window keeps the largest proposal of the last 300 s: 3 until the last one, at 1185, is out
    of (t - 300, t], at t = 1485 (with a 0 s window: at 1200). The 100%-per-15 s policy allows
    3 -> 1 at once. Deleted: the two replicas ready at 720 (ready 765 s, 2^39 ns bucket), not
    the one ready at 120 (1365 s, 2^40): ReplicaSet deletes the most recently ready first.
    Warm idle from 1200 (300 s window): (3 - 0.5) x 285 + (1 - 0.5) x 915 = 1170 GPU-s, on top
    of the burst's 810."""
    hpa = HorizontalPodAutoscaler(scale_down_stabilization_s=window_s)
    sim, changes, tot = replay(ONE, [*BURST, (1200.0, 50.0)], hpa, 2400.0)
    assert changes == [(0.0, 1), (600.0, 2), (deleted_at, -2)]
    kept = sim.replicasets.svc.slots(0)[sim.replicasets.created[sim.replicasets.svc.slots(0)]]
    assert sim.replicasets.ready_at[kept].tolist() == [120.0]
    if window_s == 300.0:
        assert tot["warm_idle_accel_hours"] == pytest.approx((810.0 + 1170.0) / 3600.0, abs=1e-12)
        assert tot["demand_units"] == 135_000.0 + 50.0 * 1200 and tot["replicas_deleted"] == 2


def test_keda_scales_from_zero_once_demand_passes_the_activation_threshold():
    """KEDA (poll every 30 s, cooldown 300 s, activationThreshold 10), min 0, cold start 60 s.
    Demand 5 from 0 is not above 10: no replica. Demand 100 from 400: the poll at 420 wakes
    the service to max(0, 1) = 1, and the HPA syncing at the same instant asks ceil(100 / 70)
    = 2: two created at 420, ready at 480. Demand 0 from 900: the HPA's 300 s window holds 2
    until its proposals of 2 (the last at 885) are out, at 1185, and then goes to its own
    minReplicas, 1; the poll at 1200 finds the service inactive since its last active poll
    (870) for more than 300 s: 0. Unserved: 5 x 400 + 100 x 80 = 10,000 of 52,000 units, one
    episode 0 -> 480 (the sub-threshold demand counts). Warm idle: (2 - 1) x 420 + 2 x 285 +
    1 x 15 = 1005 GPU-s. Deleted first: the higher slot of two alike."""
    keda = KedaScaledObject(activation_threshold=10.0)
    service = {**ONE, "min_replicas": 0, "cold_start_s": 60.0}
    sim, changes, tot = replay(service, [(0.0, 5.0), (400.0, 100.0), (900.0, 0.0)], keda, 1500.0)
    assert changes == [(420.0, 2), (1185.0, -1), (1200.0, -1)]
    assert tot["demand_units"] == 52_000.0 and tot["demand_unserved_units"] == 10_000.0
    assert tot["capacity_episodes"] == 1 and tot["time_to_capacity_p50_s"] == 480.0
    assert tot["cold_starts"] == 2 and tot["replicas_deleted"] == 2
    assert tot["warm_idle_accel_hours"] == pytest.approx(1005.0 / 3600.0, abs=1e-12)
    assert (sim.pod_status[sim.w.pods_of(sim.replicasets.svc.slots(0))] == NOT_ARRIVED).all()


def test_an_episode_open_at_the_horizon_lasts_to_it():
    """No node can take the replica (it needs 9 GPUs): demand 10 from 0 is never served; the
    episode open at the 600 s horizon counts 600 s."""
    service = {**ONE, "gpu_count": 9}
    _, _, tot = replay(service, [(0.0, 10.0)], HorizontalPodAutoscaler(), 600.0)
    assert tot["capacity_episodes"] == tot["capacity_episodes_open"] == 1
    assert tot["time_to_capacity_p99_s"] == 600.0 and tot["demand_unserved_share"] == 1.0


def test_the_merged_loop_buys_for_the_recommendation_in_one_decision():
    """A replica takes a whole 8-GPU node; one node ready at 0 (min_size 1), up to 8, boot
    300 s; capacity 100 (target 70), cold start 120 s. Demand 0 from 0 (the floor, one
    replica, ready at 120), 560 from 600: the HPA recommends ceil(560 / 70) = 8, but its scale-up policies
    let 1 -> max(1 + 4, 2 x 1) = 5 at 600 and 5 -> min(8, max(9, 10)) = 8 at 615.
    Separate: the autoscaler sees the 4 pending pods at its 600 scan (ready 900, serving
    1020), the 3 of 615 at its 620 scan (ready 920, serving 1040). Unserved: (560 - 100) x
    420 + (560 - 500) x 20 = 194,400 units; one episode 600 -> 1040, 440 s.
    Merged: its 600 scan sees the recommendation, buys 4 nodes for the queued pods and 3 for
    the 3 to come; those created at 615 are planned onto the booting nodes: all 7 run at 900
    and serve at 1020: (560 - 100) x 420 = 193,200 units; 420 s."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("r", "h8", min_size=1, max_size=8)])
    service = {**ONE, "gpu_count": 8, "max_replicas": 8}
    for loop, unserved, episode, bought_at in ((sc.separate(), 194_400.0, 440.0, [600.0] * 4 + [620.0] * 3),
                                               (sc.merged(), 193_200.0, 420.0, [600.0] * 7)):
        sim = sc.service_sim([], [service], {"svc": [(0.0, 0.0), (600.0, 560.0)]}, cl, 1500.0)
        sim.run(ReplicaLoop(loop, HorizontalPodAutoscaler()))
        tot = sim.replicasets.acct.totals()
        assert tot["demand_unserved_units"] == unserved, loop.name
        assert tot["time_to_capacity_p99_s"] == episode and tot["capacity_episodes"] == 1, loop.name
        asked = nodes_frame(sim).get_column("requested_s").drop_nulls().sort().to_list()
        assert asked == [0.0, *bought_at], loop.name


# ---- invariants over random demand --------------------------------------------------------------
@st.composite
def demands(draw):
    """Two services (a whole GPU, two NVLink GPUs), windows of random demand."""
    n = draw(st.integers(1, 12))
    starts = sorted(draw(st.lists(st.integers(0, 7200), min_size=n, max_size=n, unique=True)))
    values = draw(st.lists(st.floats(0.0, 2000.0), min_size=2 * n, max_size=2 * n))
    return {"a": [(float(t), v) for t, v in zip(starts, values[:n], strict=True)],
            "b": [(float(t), v) for t, v in zip(starts, values[n:], strict=True)]}


SERVICES = [{"service": "a", "capacity_per_replica": 300.0, "min_replicas": 1, "max_replicas": 5, "cold_start_s": 45.0},
            {"service": "b", "capacity_per_replica": 500.0, "min_replicas": 0, "max_replicas": 3, "cold_start_s": 200.0,
             "gpu_count": 2, "gpus_same_nvlink": True}]


def check_replicas(sim, floor: np.ndarray) -> None:
    """Every replica slot accounted for: created ones are the service's count and have arrived,
    dormant ones have not; the count within [floor, max]; a ready replica runs."""
    svc = sim.replicasets.svc
    pods = sim.w.pods_by_job[sim.w.job_bounds[svc.slot_job]]
    created = sim.replicasets.created[svc.slot_job]
    per = np.add.reduceat(created.astype(np.int64), svc.slot_bounds[:-1])
    assert (per == sim.replicasets.replicas).all()
    assert ((sim.pod_status[pods] == NOT_ARRIVED) == ~created).all()
    assert (sim.replicasets.replicas >= floor).all() and (sim.replicasets.replicas <= svc.max_replicas).all()
    ready = ~np.isnan(sim.replicasets.ready_at[svc.slot_job])
    assert (sim.pod_status[pods[ready]] == RUNNING).all()
    assert (np.add.reduceat(ready.astype(np.int64), svc.slot_bounds[:-1]) == sim.replicasets.ready).all()


def test_a_new_recommendation_wakes_the_merged_loop_with_no_replica_created():
    """The cluster and service above; scale-up policy 1 Pod per 60 s. Demand 280 from 600:
    the HPA recommends 4 and creates 1 (-> 2); the merged scan at 600 buys a node for it and
    2 for the recommended rest. Demand 560 from 630: the recommendation is 8, but the policy
    allows no replica before 660: no pod arrives, yet the scan at 630 buys the 4 more nodes
    (the recommendation changed: a scan is due, and it is not a quiet one).
    At 700 the demand it prices plans by (GPU milli per pool) counts the replicas created in
    the last 600 s and placed (600, 660: 2 x 8000) and the 8 - 3 recommended but not created
    (5 x 8000), not the one created at 0: 56,000."""
    cl = sc.cluster([sc.node_type("h8")], [sc.pool("r", "h8", min_size=1, max_size=8)])
    service = {**ONE, "gpu_count": 8, "max_replicas": 8}
    sim = sc.service_sim([], [service], {"svc": [(0.0, 0.0), (600.0, 280.0), (630.0, 560.0)]}, cl, 700.0)
    loop = sc.merged()
    sim.run(ReplicaLoop(loop, HorizontalPodAutoscaler(scale_up_policies=[("Pods", 1, 60)])))
    assert nodes_frame(sim).get_column("requested_s").sort().to_list() == [0.0] + [600.0] * 3 + [630.0] * 4
    assert loop._demand(700.0).tolist() == [56_000.0]


LOOPS = {"separate": sc.separate, "merged": sc.merged}


@pytest.mark.parametrize("loop_name", LOOPS)
@pytest.mark.parametrize("keda", [False, True])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows=demands(), autoscaling=st.booleans())
def test_replica_invariants_hold(loop_name, keda, windows, autoscaling):
    cl = small_cluster(autoscaling)
    sim = sc.service_sim([{"submit_s": 100.0, "gpu_count": 4}], SERVICES, windows, cl, 2 * 3600.0)
    autoscaler = KedaScaledObject() if keda else HorizontalPodAutoscaler()
    floor = np.array([1, 0]) if keda else np.array([1, 1])
    loop = ReplicaLoop(LOOPS[loop_name](), autoscaler)
    step = loop.step

    def checked(s, now):
        step(s, now)
        check_state(s)
        check_replicas(s, floor)

    loop.step = checked  # type: ignore[method-assign]
    sim.run(loop)
    tot = sim.replicasets.acct.totals()
    assert 0.0 <= tot["demand_unserved_units"] <= tot["demand_units"] + 1e-6


def run(windows, loop_name: str, quiet: bool):
    cl = small_cluster(True)
    sim = sc.service_sim([{"submit_s": 100.0, "gpu_count": 4}], SERVICES, windows, cl, 3 * 3600.0 + 5.5,
                         timeline_interval_s=45.0)
    loop = ReplicaLoop(LOOPS[loop_name](), KedaScaledObject())
    if not quiet:
        loop.inner.idle_ticks = lambda start, before: np.zeros(0)  # type: ignore[method-assign]
    sim.run(loop)
    acct = sim.replicasets.acct
    return (summary_row(sim, jobs_frame(sim), nodes_frame(sim), {}), jobs_frame(sim), sim.acct.timeline.frame(),
            acct.frame(), acct.timeline())


@pytest.mark.parametrize("loop_name", LOOPS)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows=demands())
def test_quiet_ticks_in_bulk_give_exactly_the_results_of_stepping_each(loop_name, windows):
    for a, b in zip(run(windows, loop_name, quiet=True), run(windows, loop_name, quiet=False), strict=True):
        assert a.columns == b.columns and bits(a) == bits(b)
