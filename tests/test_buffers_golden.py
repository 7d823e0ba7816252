"""Buffers golden tests: warm room kept for a service's replicas, numbers computed by hand below.

Overprovisioning as Cluster Autoscaler's FAQ sets it up ("How can I configure overprovisioning
with Cluster Autoscaler?", kubernetes/autoscaler cluster-autoscaler/FAQ.md): pause pods at
priority -1 that a replica preempts (kube-scheduler's DefaultPreemption), recreated pending, for
which the autoscaler buys a node again.

The cluster: 1-GPU nodes of one pool (boot 300 s, at most 4), one ready from 0 (min_size 1),
the separate loops with DefaultPreemption on (the same loop with and without the buffer). One
service: a whole GPU per replica, 100 units/s each, cold start 120 s, min 1, max 4. Under the
HPA's defaults (a sync every 15 s from 0, target 0.7 x 100 = 70 units/s, tolerance 0.1) demand
0 and then 50 hold one replica (the floor; ceil(50 / 70) = 1), and the burst to 120 at 600 asks ceil(120 / 70) = 2.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.autoscalers.cluster_autoscaler import ClusterAutoscaler
from harness.autoscalers.expanders import Chain, Price
from harness.autoscalers.scale_down import ScaleDown
from harness.errors import ConfigError
from harness.loops.separate import SeparateLoops
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.scheduler import Scheduler
from harness.scheduler.preemption import DefaultPreemption
from harness.scores import LeastAllocated
from harness.services.buffers import CapacityBuffer, Overprovisioning
from harness.services.loop import ReplicaLoop
from harness.services.replicas import HorizontalPodAutoscaler, KedaScaledObject
from harness.status import RUNNING
from tests import scenarios as sc
from tests.test_quiet import bits

SERVICE = {"service": "svc", "capacity_per_replica": 100.0, "min_replicas": 1, "max_replicas": 4,
           "cold_start_s": 120.0}
BURST = [(0.0, 0.0), (300.0, 50.0), (600.0, 120.0)]  # the first replica is ready (120) before demand
HORIZON = 1800.0


def one_gpu_nodes():
    return sc.cluster([sc.node_type("h1", gpus=1)], [sc.pool("p", "h1", boot_s=300.0, min_size=1, max_size=4)])


def preempting_loop() -> SeparateLoops:
    return SeparateLoops(Scheduler(LeastAllocated(), post_filter=DefaultPreemption()),
                         ClusterAutoscaler(scale_down=ScaleDown(), expander=Chain([Price()])))


def replay(buffer):
    sim = sc.service_sim([], [SERVICE], {"svc": BURST}, one_gpu_nodes(), HORIZON, buffer=buffer)
    loop = ReplicaLoop(preempting_loop(), HorizontalPodAutoscaler())
    if buffer is not None:
        buffer.fit(loop.inner, sc.services([SERVICE]))  # as replay does: a CapacityBuffer joins the autoscaler
    sim.run(loop)
    jobs = jobs_frame(sim)
    return sim, jobs, summary_row(sim, jobs, nodes_frame(sim), {}).to_dicts()[0]


def test_without_a_buffer_the_burst_waits_for_a_node_and_a_cold_start():
    """Replica 0 runs on the ready node at 0 (ready at 120). At 600 the HPA creates replica 1:
    no room, nothing of lower priority to preempt; the autoscaler's scan at 600 buys a node,
    ready at 900, the replica is ready at 900 + 120 = 1020. Ready capacity 100 < 120 from 600
    to 1020: unserved (120 - 100) x 420 = 8,400 units, one episode of 420 s. Demand: 50 x 300
    + 120 x 1200 = 159,000 units."""
    _, _, row = replay(None)
    assert row["demand_units"] == 159_000.0
    assert row["demand_unserved_units"] == 8_400.0
    assert row["capacity_episodes"] == 1 and row["time_to_capacity_p99_s"] == 420.0
    assert row["nodes_provisioned"] == 2
    assert "idle_accel_hours_buffer" not in row and "placeholders" not in row


def test_a_buffer_absorbs_a_burst_and_the_autoscaler_restores_it():
    """One placeholder (priority -1). At 0 the replica takes the ready node; the placeholder
    fits nowhere and preempts nothing (no pod below -1): the scan at 0 buys node 1 for it, it
    runs there from 300. At 600 replica 1 fits nowhere, preempts the placeholder on node 1 and
    runs at once: ready at 600 + 120 = 720. Unserved (120 - 100) x 120 = 2,400 units, one
    episode of 120 s (the cold start alone). The placeholder is pending again; the scan at 600
    buys node 2 for it, ready at 900: the buffer is back. The placeholder held a GPU 300 -> 600
    and 900 -> 1800: 1,200 GPU-s idle (`buffer`), not used; one placeholder preemption, no
    job preempted, no work lost; it is no job of jobs.parquet."""
    sim, jobs, row = replay(Overprovisioning(placeholders=1, priority=-1))
    assert row["demand_units"] == 159_000.0
    assert row["demand_unserved_units"] == 2_400.0
    assert row["capacity_episodes"] == 1 and row["time_to_capacity_p99_s"] == 120.0
    assert row["nodes_provisioned"] == 3
    assert row["idle_accel_hours_buffer"] == pytest.approx(1200.0 / 3600.0, abs=1e-12)
    assert row["placeholders"] == 1 and row["placeholder_preemptions"] == 1
    assert row["preemptions"] == 0 and row["preempted_accel_hours_lost"] == 0.0
    assert jobs.height == 0 and row["jobs"] == 0 and row["pods"] == 0  # no trace job: slots and placeholders are not
    pause = sim.w.pods_of(sim.w.job_placeholder.nonzero()[0])
    assert sim.pod_status[pause].tolist() == [RUNNING] and sim.pod_start[pause].tolist() == [900.0]
    # the columns still add up: idle = booting + unallocated + gang_wait + committed + buffer
    parts = sum(row[f"idle_accel_hours_{k}"] for k in ("booting", "unallocated", "gang_wait", "committed", "buffer"))
    assert row["idle_accel_hours"] == pytest.approx(parts, abs=1e-9)
    # used: the replicas alone, 1 GPU x 1800 s + 1 GPU x (1800 - 600) s
    assert row["used_accel_hours"] == pytest.approx(3000.0 / 3600.0, abs=1e-12)


def test_a_capacity_buffer_absorbs_a_burst_and_the_autoscaler_restores_it():
    """A CapacityBuffer of 1 fake pod. The scan at 0 finds the replica bound on the ready node
    and the fake pod fitting nowhere: it buys node 1 (ready at 300), which stays empty, kept
    from scale-down as the fake pod's room. At 600 replica 1 binds to node 1 at once, ready at
    720: unserved 2,400 units, one episode of 120 s, as with placeholders. The scan at 600
    finds the fake pod without room and buys node 2 (ready at 900), empty to the end, never
    scaled down. GPU-s billed: 1800 + 1800 + 1200 = 4,800; used 1800 + 1200 = 3,000; idle
    1,800 = booting 300 + 300 + unallocated 300 (node 1, 300 -> 600) + 900 (node 2, 900 ->
    1800); no placeholder, nothing preempted."""
    _, _, row = replay(CapacityBuffer(replicas=1))
    assert row["demand_units"] == 159_000.0
    assert row["demand_unserved_units"] == 2_400.0
    assert row["capacity_episodes"] == 1 and row["time_to_capacity_p99_s"] == 120.0
    assert row["nodes_provisioned"] == 3 and row["nodes_never_used"] == 1
    assert row["used_accel_hours"] == pytest.approx(3000.0 / 3600.0, abs=1e-12)
    assert row["idle_accel_hours_booting"] == pytest.approx(600.0 / 3600.0, abs=1e-12)
    assert row["idle_accel_hours_unallocated"] == pytest.approx(1200.0 / 3600.0, abs=1e-12)
    assert "idle_accel_hours_buffer" not in row and row["preemptions"] == 0


def test_a_buffer_needs_a_loop_that_preempts():
    """Without DefaultPreemption a placeholder would hold its room for ever: refused by key."""
    with pytest.raises(ConfigError, match="loop.scheduler.post_filter"):
        Overprovisioning().fit(sc.separate(), sc.services([SERVICE]))
    with pytest.raises(ConfigError, match="buffer.priority"):
        Overprovisioning(priority=0).fit(preempting_loop(), sc.services([SERVICE]))


def quiet_run(buffer, quiet: bool):
    """The burst with a demand that falls back at 1200, so scale-down clocks run (a longer
    horizon); quiet=False steps every wake-up."""
    windows = [*BURST, (1200.0, 30.0)]
    sim = sc.service_sim([], [SERVICE], {"svc": windows}, one_gpu_nodes(), 3 * 3600.0 + 5.5, buffer=buffer,
                         timeline_interval_s=45.0)
    loop = ReplicaLoop(preempting_loop(), HorizontalPodAutoscaler())
    if buffer is not None:
        buffer.fit(loop.inner, sc.services([SERVICE]))
    if not quiet:
        loop.inner.idle_ticks = lambda start, before: np.zeros(0)  # type: ignore[method-assign]
    sim.run(loop)
    return summary_row(sim, jobs_frame(sim), nodes_frame(sim), {}), jobs_frame(sim), sim.acct.timeline.frame()


@pytest.mark.parametrize("make", [lambda: Overprovisioning(placeholders=2), lambda: CapacityBuffer(replicas=2),
                                  lambda: CapacityBuffer(replicas=None, percentage=100)])
def test_quiet_ticks_in_bulk_give_exactly_the_results_of_stepping_each(make):
    """tests/test_quiet.py's rule with a buffer: the autoscaler's quiet scans account for the
    buffer's count (a change of it wakes a scan), so bulk and stepped agree bit for bit."""
    for a, b in zip(quiet_run(make(), quiet=True), quiet_run(make(), quiet=False), strict=True):
        assert a.columns == b.columns and bits(a) == bits(b)


def test_in_a_mixed_trace_any_pod_above_the_placeholders_takes_their_room():
    """A batch pod of priority 0 (above the placeholders' -1, as upstream's DefaultPreemption
    would have it) arrives at 400: the placeholder on node 1 (running since 300) is its victim,
    the pod starts at 400, the placeholder is pending again and the scan at 400 buys node 2
    for it. One placeholder preemption, no job preempted; jobs.parquet has the batch job alone."""
    sim = sc.service_sim([{"submit_s": 400.0, "priority": 0}], [SERVICE], {"svc": BURST}, one_gpu_nodes(), HORIZON,
                         buffer=Overprovisioning())
    loop = ReplicaLoop(preempting_loop(), HorizontalPodAutoscaler())
    Overprovisioning().fit(loop.inner, sc.services([SERVICE]))
    sim.run(loop)
    jobs = jobs_frame(sim)
    row = summary_row(sim, jobs, nodes_frame(sim), {}).to_dicts()[0]
    assert jobs["job_id"].to_list() == ["j0"] and jobs["start_s"].to_list() == [400.0]
    assert row["jobs"] == 1 and row["placeholder_preemptions"] == 1 and row["preemptions"] == 0
    assert nodes_frame(sim)["requested_s"].to_list()[:3] == [0.0, 0.0, 400.0]


def test_a_replica_preempted_by_another_service_loses_no_work():
    """One 1-GPU node, no autoscaling. `low` (priority 0, HPA floor 1) runs from 0; `high`
    (priority 100, KEDA, min 0) wakes at its poll at 600 (demand 50 from 590) and its replica
    preempts low's: one preemption, and no work lost (a replica's serving is not lost work:
    low's unserved demand while it waits is the service metrics')."""
    cl = sc.cluster([sc.node_type("h1", gpus=1)], [sc.pool("p", "h1", min_size=1, max_size=1)], autoscaling=False)
    low = {**SERVICE, "service": "low", "priority": 0}
    high = {**SERVICE, "service": "high", "priority": 100, "min_replicas": 0}
    sim = sc.service_sim([], [low, high], {"low": [(0.0, 0.0)], "high": [(0.0, 0.0), (590.0, 50.0)]}, cl, 900.0)
    sim.run(ReplicaLoop(preempting_loop(), KedaScaledObject()))
    assert sim.acct.job_preemptions.sum() == 1 and sim.acct.preempted_lost == 0.0
    assert sim.replicasets.replicas.tolist() == [1, 1] and sim.replicasets.ready.tolist() == [0, 1]
