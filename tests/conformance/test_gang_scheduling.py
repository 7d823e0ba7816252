"""Conformance: kube-scheduler's own gang scheduling (KEP-4671 GangScheduling, the pod-group
cycle, KEP-5732 topology placement, the backoff queue), harness/scheduler/pod_group.py.

Each test translates one case of kubernetes/kubernetes:
  GS  = pkg/scheduler/framework/plugins/gangscheduling/gangscheduling_test.go (TestPlacementFeasible,
        TestPreEnqueue),
  PGC = pkg/scheduler/schedule_one_podgroup_test.go (TestPodGroupSchedulingAlgorithm),
  PG  = test/integration/scheduler/podgroup/podgroup_test.go (TestPodGroupScheduling),
  TAS = test/integration/scheduler/podgroup/topology_aware_scheduling/tas_test.go
        (TestTopologyAwareSchedulingWithGangPolicy),
  Q   = test/integration/scheduler/podgroup/queueing/queueing_test.go,
  BQ  = pkg/scheduler/backend/queue/backoff_queue.go (calculateBackoffDuration),
  PR  = kubernetes/kubernetes#139859 (PercentageOfPlacementsToScore).
A PodGroup is a job of the trace (min_member = gang minCount; min_member 1 of several pods: the
basic policy). Upstream's scenes are CPU-only: nodes of 4 (or 2) CPUs, pods of 1 CPU, memory in
proportion. "Deleting" a blocking pod is its end (duration_s). See docs/conformance.md, section
Gang scheduling (Workload / PodGroup).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.description import Description
from harness.scheduler import Scheduler
from harness.scheduler.pod_group import GangScheduling, feasible_placements_to_find, group_backoff_s
from harness.scheduler.preemption import DefaultPreemption
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.status import BOUND, PENDING, RUNNING
from harness.workload import compile_workload
from tests.scenarios import cluster, pool, trace

MIB_PER_CPU = 1024


def cpu_node(cpus: int) -> dict:
    return {"name": f"c{cpus}", "cpu_milli": cpus * 1000, "memory_mib": cpus * MIB_PER_CPU, "gpus": 0}


def pod(job: str, cpus: int = 1, min_member: int = 1, **kw) -> dict:
    return {"job_id": job, "min_member": min_member, "cpu_milli": cpus * 1000, "memory_mib": cpus * MIB_PER_CPU,
            "gpu_count": 0, "gpu_milli": 0, **kw}


def gang(job: str, n: int, min_count: int, cpus: int = 1, **kw) -> list[dict]:
    return [pod(job, cpus, min_count, **kw) for _ in range(n)]


def blocker(job: str, cpus: int, until_s: float = 10.0, priority: int = 1000) -> dict:
    """A pod placed first (higher priority) that ends at `until_s` (upstream: deleted)."""
    return pod(job, cpus, priority=priority, duration_s=until_s)


class SchedulerOnly:
    """The scheduler alone, a cycle at every event: upstream's integration tests have no autoscaler."""

    name = "scheduler"

    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler
        self.policy = scheduler.policy

    def attach(self, sim) -> None:
        self.scheduler.attach(sim)

    def next_wakeup(self, now: float) -> float:
        return math.inf

    def step(self, sim, now: float) -> None:
        self.scheduler.cycle(now)

    def idle_ticks(self, start: float, before: float) -> np.ndarray:
        return np.zeros(0)

    def describe(self) -> Description:
        return Description("the scheduler alone")


def replay(pods: list[dict], racks: list[int], cpus: int = 4, horizon_s: float = 100.0, preemption: bool = False,
           **settings):
    """The pods on static nodes of `cpus` CPUs, one rack per entry of `racks` (its node count);
    `preemption`: DefaultPreemption on (with it, a PodGroup preempts as one unit)."""
    cl = cluster([cpu_node(cpus)], [pool(f"rack{i}", f"c{cpus}", min_size=n, max_size=n, nodes_per_rack=n)
                                    for i, n in enumerate(racks)], autoscaling=False)
    sim = Simulation(compile_workload(trace(pods), cl), cl, seed=0, horizon_s=horizon_s)
    plugin = GangScheduling(**settings)
    post_filter = DefaultPreemption() if preemption else None
    sim.run(SchedulerOnly(Scheduler(LeastAllocated(), gang=plugin, post_filter=post_filter)))
    return sim, plugin


def status(sim, job: str) -> list[int]:
    return sim.pod_status[sim.w.job_pods[list(sim.w.job_id).index(job)]].tolist()


def started(sim, job: str) -> float:
    return float(sim.job_started[list(sim.w.job_id).index(job)])


def racks_of(sim, job: str) -> set[int]:
    pods = sim.w.job_pods[list(sim.w.job_id).index(job)]
    return set(sim.state.slot_rack[sim.pod_node[pods]].tolist())


# ---- PreEnqueue -----------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["GS TestPreEnqueue / gang pod fails PreEnqueue when quorum is not met",
                                  "GS TestPreEnqueue / gang pod passes PreEnqueue"])
def test_a_gang_enters_the_queue_once_min_count_pods_exist(case):
    """3 x 1 CPU, minCount 3, one 4-CPU node; two pods at t=0, the third at t=5. Until t=5 two
    pods exist (AllPodsCount 2 < 3): PreEnqueue keeps them out of the queue, no pod-group cycle
    runs, nothing is rejected. The third completes the quorum: all bind at t=5."""
    pods = gang("pg1", 2, 3) + gang("pg1", 1, 3, submit_s=5.0)
    sim, plugin = replay(pods, racks=[1])
    assert started(sim, "pg1") == 5.0 and plugin.rejections.sum() == 0
    assert sim.pod_start[sim.w.job_pods[0]].tolist() == [5.0] * 3


# ---- the pod-group cycle ------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["PGC TestPodGroupSchedulingAlgorithm / All pods feasible",
                                  "PG / gang schedules when pod group and resources are available",
                                  "GS TestPlacementFeasible / All pods succeed, minCount met at end"])
def test_a_gang_that_fits_binds_whole_in_one_cycle(case):
    """3 x 1 CPU, minCount 3, one 4-CPU node: all three bound at t=0."""
    sim, plugin = replay(gang("pg1", 3, 3), racks=[1])
    assert status(sim, "pg1") == [RUNNING] * 3 and started(sim, "pg1") == 0.0 and plugin.rejections.sum() == 0


@pytest.mark.parametrize("case", ["PGC TestPodGroupSchedulingAlgorithm / All pods unschedulable",
                                  "PG / gang waits for pod group, then for resources, then schedules",
                                  "GS TestPlacementFeasible / Second pod fails, minCount not satisfiable"])
def test_a_gang_too_big_for_what_is_free_binds_nothing_until_room_frees(case):
    """A 2-CPU blocker until t=10; 3 x 1 CPU, minCount 3 on one 4-CPU node: the group is
    rejected whole (no member bound, none released: the node holds only the blocker), then
    all three bind when the blocker ends."""
    sim, plugin = replay([blocker("b", 2), *gang("pg1", 3, 3)], racks=[1])
    assert status(sim, "pg1") == [RUNNING] * 3 and started(sim, "pg1") == 10.0
    assert plugin.rejections[list(sim.w.job_id).index("pg1")] == 1
    assert sim.acct.job_preemptions.sum() == 0


@pytest.mark.parametrize("case", ["GS TestPlacementFeasible / First pod fails, minCount not satisfiable",
                                  "GS TestPlacementFeasible / More than minCount pods, minCount not satisfiable"])
def test_the_cycle_stops_once_min_count_is_out_of_reach(case):
    """minCount 3 of 3 pods of 3 CPUs on a 4-CPU node (one fits): rejected, nothing bound."""
    sim, _ = replay(gang("pg1", 3, 3, cpus=3), racks=[1], horizon_s=10.0)
    assert status(sim, "pg1") == [PENDING] * 3 and sim.state.cpu_free.sum() == 4000


@pytest.mark.parametrize("case", ["PG / minCount is scheduled, but one pod from a gang remain unschedulable "
                                  "until the blocked resources are released",
                                  "GS TestPlacementFeasible / More than minCount pods, first fails"])
def test_min_count_binds_and_the_rest_waits_for_room(case):
    """A 1-CPU blocker until t=10; 4 pods, minCount 3: three bind at t=0, the fourth when the
    blocker ends (the group's minCount is met by its bound members: it needs only itself)."""
    sim, _ = replay([blocker("b", 1), *gang("pg1", 4, 3)], racks=[1])
    pods = sim.w.job_pods[list(sim.w.job_id).index("pg1")]
    assert sorted(sim.pod_start[pods].tolist()) == [0.0, 0.0, 0.0, 10.0] and started(sim, "pg1") == 0.0


def test_min_count_met_by_bound_members_but_no_new_pod_fits_is_rejected():
    """GS TestPlacementFeasible / "minCount already met by scheduled pods" with the cycle's
    "no pods were schedulable": a 1-CPU blocker until t=10, 4 pods of minCount 2 → three bind at
    t=0 (a success: no rejection counted). At t=10 a pod of higher priority takes the freed CPU
    first; the group's last pod, its minCount met by the bound three, finds no node → the
    group is rejected (one rejection), the pod waits."""
    pods = [blocker("b", 1), *gang("pg1", 4, 2), pod("h", 1, priority=1000, submit_s=10.0, duration_s=1e8)]
    sim, plugin = replay(pods, racks=[1], horizon_s=20.0)
    assert sorted(status(sim, "pg1")) == [PENDING, RUNNING, RUNNING, RUNNING]
    assert plugin.rejections[list(sim.w.job_id).index("pg1")] == 1


@pytest.mark.parametrize("case", ["PG / two gangs competing for the same resources shouldn't deadlock",
                                  "PG / two gangs competing for the same resources shouldn't deadlock, reversed"])
def test_two_gangs_competing_for_one_node_do_not_deadlock(case):
    """pg1 and pg2, 3 x 1 CPU each, minCount 3, one 4-CPU node: the group that reached the
    queue first is bound whole, the other binds nothing (upstream: created first; ours: the
    earlier submission)."""
    first, second = ("pg1", "pg2") if "reversed" not in case else ("pg2", "pg1")
    pods = gang(first, 3, 3, submit_s=0.0) + gang(second, 3, 3, submit_s=1.0)
    sim, _ = replay(pods, racks=[1], horizon_s=50.0)
    assert status(sim, first) == [RUNNING] * 3 and status(sim, second) == [PENDING] * 3


def test_a_basic_group_binds_pod_by_pod():
    """PG / "basic group waits for pod group, part of it waits for resources, then schedules":
    a 2-CPU blocker until t=10, a basic group of 3 x 1 CPU: two bind at t=0, the third at t=10."""
    sim, plugin = replay([blocker("b", 2), *gang("pg1", 3, 1)], racks=[1])
    pods = sim.w.job_pods[list(sim.w.job_id).index("pg1")]
    assert sorted(sim.pod_start[pods].tolist()) == [0.0, 0.0, 10.0] and plugin.rejections.sum() == 0


# ---- workload-aware preemption (KEP-5710) ----------------------------------------------------------

def test_a_gang_preempts_as_one_unit():
    """PG / "gang schedules with preemption": a 2-CPU blocker of priority 10, then a gang of 4
    x 1 CPU of priority 100 on one 4-CPU node → all four bound, the blocker evicted."""
    pods = [blocker("b", 2, until_s=1e8, priority=10), *gang("pg1", 4, 4, priority=100, submit_s=1.0)]
    sim, _ = replay(pods, racks=[1], horizon_s=10.0, preemption=True)
    assert status(sim, "pg1") == [RUNNING] * 4 and started(sim, "pg1") == 1.0
    assert status(sim, "b") == [PENDING] and sim.acct.job_preemptions.sum() == 1


def test_a_gang_evicts_every_low_pod_it_needs():
    """PG / "gang schedules with workload-aware preemption": 4 x 1 CPU of priority 10 fill the
    node; a gang of 4 of priority 100 → all four bound, all four low pods evicted."""
    low = [pod(f"low{i}", 1, priority=10, duration_s=1e8) for i in range(4)]
    sim, _ = replay([*low, *gang("pg1", 4, 4, priority=100, submit_s=1.0)], racks=[1], horizon_s=10.0,
                    preemption=True)
    assert status(sim, "pg1") == [RUNNING] * 4
    assert all(status(sim, f"low{i}") == [PENDING] for i in range(4))


def test_a_gang_preempts_the_least_important_victims_only():
    """PG / "gang schedules with partial workload-aware preemption": the node full with 2 x 1 CPU
    of priority 5 and 2 x 1 CPU of priority 10; a group of minCount 2, 2 x 1 CPU, priority 50
    → it binds, only the two priority-5 pods are evicted (the priority-10 ones are given back)."""
    pods = [*(pod(f"p5-{i}", 1, priority=5, duration_s=1e8) for i in range(2)),
            *(pod(f"p10-{i}", 1, priority=10, duration_s=1e8) for i in range(2)),
            *gang("mid", 2, 2, priority=50, submit_s=1.0)]
    sim, _ = replay(pods, racks=[1], horizon_s=10.0, preemption=True)
    assert status(sim, "mid") == [RUNNING] * 2
    assert [status(sim, f"p5-{i}") for i in range(2)] == [[PENDING]] * 2
    assert [status(sim, f"p10-{i}") for i in range(2)] == [[RUNNING]] * 2


def test_a_gang_preempts_nothing_unless_it_then_fits_whole():
    """Victims are chosen only if the whole group fits once they are gone: a gang of 3 x 3 CPU
    of priority 100 on one 4-CPU node of low pods → nothing is evicted, the gang waits."""
    low = [pod(f"low{i}", 1, priority=10, duration_s=1e8) for i in range(4)]
    sim, _ = replay([*low, *gang("pg1", 3, 3, cpus=3, priority=100, submit_s=1.0)], racks=[1], horizon_s=10.0,
                    preemption=True)
    assert status(sim, "pg1") == [PENDING] * 3 and sim.acct.job_preemptions.sum() == 0


# ---- the backoff queue ----------------------------------------------------------------------------

@pytest.mark.parametrize("attempts, pods, want", [
    (1, 1, 1), (2, 1, 2), (3, 1, 4), (4, 1, 8), (5, 1, 10),  # a pod: 1 s doubling to 10 s
    (5, 4, 16), (6, 4, 20), (9, 4, 20),  # a gang of 4: capped at 10 s x sqrt(4)
    (9, 9, 30),  # a gang of 9: 30 s
])
def test_a_groups_backoff_doubles_to_its_size_scaled_cap(attempts, pods, want):
    """BQ calculateBackoffDuration: min(initial << (count - 1), max x sqrt(entity size))."""
    assert group_backoff_s(attempts, pods, 1.0, 10.0) == pytest.approx(want)


def test_no_backoff_when_the_maximum_is_zero():
    """BQ calculateBackoffDuration / "no backoff": podMaxBackoff 0."""
    assert group_backoff_s(3, 4, 1.0, 0.0) == 0.0


@pytest.mark.parametrize("pop, start", [(True, 0.5), (False, 1.0)])
def test_a_rejected_gang_is_retried_from_the_backoff_queue(pop, start):
    """Q TestPodGroupSequentialQueueing / "Gang scheduling pod group fails scheduling and
    retries without any cluster change", with upstream's default backoff: rejected at t=0, the
    group backs off to t=1 (1 s, aligned to the 1-s window). A blocker ends at t=0.5: with
    SchedulerPopFromBackoffQ the group is popped at once (nothing else waits); without it, it
    waits in the backoff queue until t=1."""
    sim, _ = replay([blocker("b", 2, until_s=0.5), *gang("pg1", 3, 3)], racks=[1], horizon_s=5.0,
                    pop_from_backoff_queue=pop)
    assert started(sim, "pg1") == start


# ---- topology placement (KEP-5732) ------------------------------------------------------------------

def test_a_rack_constrained_gang_goes_to_the_one_rack_with_room():
    """TAS / "gang schedules on a single rack, when only one feasible rack is available":
    2-CPU nodes; rack0 of 3 nodes, rack1 of 2 nodes one of them full (here: its free node
    alone), rack2 of 1 node; 3 x 1 CPU in one rack → rack0."""
    sim, _ = replay(gang("pg1", 3, 3, gang_locality="rack"), racks=[3, 1, 1], cpus=2, horizon_s=10.0)
    assert status(sim, "pg1") == [RUNNING] * 3 and racks_of(sim, "pg1") == {0}


def test_a_rack_constrained_gang_waits_for_room_in_a_rack():
    """TAS / "gang remains pending when resources are consumed by existing pods": one rack of 3
    nodes of 2 CPUs, two of them full until t=10; 3 x 1 CPU in one rack → pending, then bound
    at t=10 when a blocker ends."""
    pods = [blocker("b1", 2), blocker("b2", 2, until_s=1e8), *gang("pg1", 3, 3, gang_locality="rack")]
    sim, _ = replay(pods, racks=[3], cpus=2, horizon_s=20.0)
    assert started(sim, "pg1") == 10.0 and racks_of(sim, "pg1") == {0}


def test_a_rack_constrained_gang_that_fits_no_rack_stays_pending():
    """TAS / "gang remains pending when no feasible resources are found": racks of 2, 1 and 1
    nodes of 2 CPUs; 3 x 2 CPU in one rack → pending, nothing bound."""
    sim, _ = replay(gang("pg1", 3, 3, cpus=2, gang_locality="rack"), racks=[2, 1, 1], cpus=2, horizon_s=10.0)
    assert status(sim, "pg1") == [PENDING] * 3 and (sim.state.cpu_free == 2000).all()


def test_placements_are_scored_most_allocated_first():
    """TAS / "gang schedules on a single rack, choosing placement with the highest score in
    default placement scoring algorithm": racks of 2, 3 and 1 nodes of 2 CPUs; 3 x 1 CPU →
    rack0 (MostAllocated (0 + 3) / 4 beats 3 / 6; rack2's 2 CPUs cannot hold it; PodGroupPodsCount ties)."""
    sim, _ = replay(gang("pg1", 3, 3, gang_locality="rack"), racks=[2, 3, 1], cpus=2, horizon_s=10.0)
    assert racks_of(sim, "pg1") == {0}


def test_two_gangs_in_turn_each_on_a_rack_of_its_own():
    """TAS / "two gangs schedule consecutively, each on a separate rack": racks of 3 and 2 nodes
    of 2 CPUs; pg1 3 x 2 CPU → rack0; pg2 2 x 1 CPU → rack1 (rack0 is full)."""
    pods = gang("pg1", 3, 3, cpus=2, gang_locality="rack", submit_s=0.0) + \
        gang("pg2", 2, 2, gang_locality="rack", submit_s=1.0)
    sim, _ = replay(pods, racks=[3, 2], cpus=2, horizon_s=10.0)
    assert racks_of(sim, "pg1") == {0} and racks_of(sim, "pg2") == {1}


def test_two_gangs_in_turn_on_the_same_rack():
    """TAS / "two gangs schedule consecutively, both on the same rack": racks of 3 and 1 nodes of
    2 CPUs; pg1 one 2-CPU and one 1-CPU pod → rack0 (rack1 holds 2 CPUs); pg2 3 x 1 CPU → rack0."""
    pods = [pod("pg1", 2, 2, gang_locality="rack"), pod("pg1", 1, 2, gang_locality="rack"),
            *gang("pg2", 3, 3, gang_locality="rack", submit_s=1.0)]
    sim, _ = replay(pods, racks=[3, 1], cpus=2, horizon_s=10.0)
    assert racks_of(sim, "pg1") == {0} and racks_of(sim, "pg2") == {0}


@pytest.mark.parametrize("pct, placements, nodes, want", [
    (0, 50, 5000, 5),  # 10 % at 5,000 nodes: "about 5 of those 50"
    (0, 10, 100, 9),  # 99 % of 10
    (0, 100, 20000, 5),  # never below 5 %
    (0, 3, 10, 3),  # 100 % of a small cluster
    (0, 3, 600, 2),  # 90 % of 3, rounded down
    (0, 1, 10, 1),  # at least one
    (50, 10, 100, 5),  # a configured percentage
])
def test_feasible_placements_to_find(pct, placements, nodes, want):
    """PR PercentageOfPlacementsToScore: max(1, placements x pct / 100), pct adaptive
    max(5, 100 - N x 9 / 500) over the placements' N nodes."""
    assert feasible_placements_to_find(pct, placements, nodes) == want


def test_bound_states_are_never_released():
    """No member is bound and then released: across a run where a gang is rejected again and
    again, no pod is ever unbound (its epoch never bumps)."""
    pods = [blocker("b", 3, until_s=30.0), *gang("pg1", 3, 3), blocker("c", 1, until_s=20.0, priority=0)]
    sim, plugin = replay(pods, racks=[1], horizon_s=60.0)
    assert (sim.pod_epoch == 0).all() and started(sim, "pg1") == 30.0 and BOUND not in status(sim, "pg1")
