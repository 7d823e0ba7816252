"""Conformance: scheduler-plugins Coscheduling (Permit, PostFilter, PreFilter, QueueSort).

Each test translates one table-driven case of kubernetes-sigs/scheduler-plugins:
  CT = pkg/coscheduling/coscheduling_test.go (TestPermit, TestPostFilter, TestLess),
  CORE = pkg/coscheduling/core/core_test.go (TestPreFilter, TestPermit).
A PodGroup is a job of the trace (min_member = minMember); "assigned" pods are our bound or
running ones. The scene: fixed 8-GPU nodes and members of 5 GPUs, so one member per node;
the first scheduler cycle runs at t=0. See docs/conformance.md, section Coscheduling.
"""

from __future__ import annotations

import pytest

from harness.errors import TraceError
from harness.scheduler import Scheduler
from harness.scheduler.gang import Coscheduling
from harness.scores import LeastAllocated
from harness.sim import Simulation
from harness.status import BOUND, NOT_ARRIVED, PENDING, RUNNING
from harness.workload import compile_workload
from tests.scenarios import cluster, node_type, pool, trace

MEMBER = {"gpu_count": 5}  # one per 8-GPU node


def cycle(pods: list[dict], nodes: int, gang: Coscheduling | None = None):
    """The pods on `nodes` fixed 8-GPU nodes, after the scheduler's first cycle at t=0."""
    cl = cluster([node_type("g8")], [pool(f"p{i}", "g8", min_size=1, max_size=1) for i in range(nodes)],
                 autoscaling=False)
    sim = Simulation(compile_workload(trace(pods), cl), cl, seed=0, horizon_s=3600.0)
    sched = Scheduler(LeastAllocated(), gang=gang or Coscheduling())
    sched.attach(sim)
    sim.advance_to(0.0)
    sched.cycle(0.0)
    return sim, sched


def group(n: int, min_member: int, job: str = "pg1") -> list[dict]:
    return [{**MEMBER, "job_id": job, "min_member": min_member} for _ in range(n)]


# ---- Permit ------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", [
    "CT TestPermit / pods do not belong to any podGroup",  # Success
    "CORE TestPermit / pod does not belong to any pg",  # PodGroupNotSpecified
])
def test_permit_pods_do_not_belong_to_any_podgroup(case):
    """A pod of no PodGroup is allowed at once. Ours: a lone pod (min_member 1) runs from t=0."""
    sim, _ = cycle([MEMBER], nodes=1)
    assert sim.pod_status.tolist() == [RUNNING] and sim.job_started[0] == 0.0


@pytest.mark.parametrize("case", [
    "CT TestPermit / pods belong to a pg1, but quorum not satisfied",
    "CORE TestPermit / pod belongs to a pg that doesn't have quorum",
])
def test_permit_waits_without_quorum(case):
    """The pod's PodGroup has minMember 2 and nothing assigned: Wait. Upstream's test calls
    Permit alone, so PostFilter is kept out of it here (reject_percentage 100 never rejects):
    the member that found a node is bound and waits, holding its devices; the gang has not
    started."""
    sim, _ = cycle(group(2, 2), nodes=1, gang=Coscheduling(reject_percentage=100))
    assert sim.pod_status.tolist() == [BOUND, PENDING]
    assert sim.state.gpu_used.sum() == 5 * 1000 and sim.job_started[0] != sim.job_started[0]  # NaN


def test_permit_allows_when_min_member_is_one():
    """CT TestPermit / "pods belong to a podGroup, and quorum satisfied": PodGroup pg1 of
    minMember 1 → Success. A 2-pod job of min_member 1: each member is allowed as it binds."""
    sim, _ = cycle(group(2, 1), nodes=2)
    assert sim.pod_status.tolist() == [RUNNING, RUNNING] and sim.job_started[0] == 0.0


def test_permit_allows_all_waiting_members_at_quorum():
    """CORE TestPermit / "pod belongs to a pg that have quorum satisfied": one member
    assigned, minMember 2, Permit of the next → Success (and the waiting sibling is allowed).
    Both members run from t=0."""
    sim, _ = cycle(group(2, 2), nodes=2)
    assert sim.pod_status.tolist() == [RUNNING, RUNNING] and sim.job_started[0] == 0.0


# ---- PostFilter --------------------------------------------------------------------------------

def test_post_filter_pod_does_not_belong_to_any_pod_group():
    """CT TestPostFilter / "pod does not belong to any pod group": Unschedulable, nothing
    else rejected. A lone pod that finds no node stays pending; the pod on the node runs on."""
    sim, _ = cycle([MEMBER, {**MEMBER, "job_id": "lone"}], nodes=1)
    assert sim.pod_status.tolist() == [RUNNING, PENDING]


def test_post_filter_enough_pods_assigned_do_not_reject_all():
    """CT TestPostFilter / "enough pods assigned, do not reject all": minMember 1, one pod
    assigned, the next fails Filter → plain Unschedulable. The assigned member keeps running,
    now and after the wait would have timed out."""
    sim, _ = cycle(group(2, 1), nodes=1)
    assert sim.pod_status.tolist() == [RUNNING, PENDING]
    sim.advance_to(120.0)
    assert sim.pod_status.tolist() == [RUNNING, PENDING]


def test_post_filter_pod_failed_at_filter_phase_reject_all_pods():
    """CT TestPostFilter / "pod failed at filter phase, reject all pods": minMember 2, one pod
    assigned (waiting), the other fails Filter → "PodGroup ns/pg1 gets rejected due to Pod p is
    unschedulable even after PostFilter": the gap (1 of 2, 50 %) exceeds 10 %, so the waiting
    member is released in this cycle, not at the 60 s timeout; the gang is retried when
    capacity next changes."""
    sim, sched = cycle(group(2, 2), nodes=1)
    assert sim.pod_status.tolist() == [PENDING, PENDING]
    assert sim.state.gpu_used.sum() == 0 and sched.tried_at[0] == sim.state.version


def test_wait_on_permit_reject_waiting_pod_stops_its_timeout():
    """kubernetes/kubernetes pkg/scheduler/framework/runtime/framework_test.go, TestWaitOnPermit /
    "Reject Waiting Pod": a waiting pod rejected is Unschedulable at once, and the rejection
    stops its wait (waiting_pods_map.go, waitingPod.Reject stops every plugin's timer).
    Ours: Coscheduling's PostFilter rejects the waiting member at t=0 (the case above); its
    60 s timeout is gone with it: no event is left in the replay, none runs by the horizon."""
    sim, _ = cycle(group(2, 2), nodes=1)
    assert sim.pod_status.tolist() == [PENDING, PENDING]
    assert sim.next_event_time() == float("inf")
    events = sim.n_events  # the arrival
    sim.advance_to(3600.0)
    assert sim.n_events == events


@pytest.mark.parametrize("backoff_s, released", [(1.0, 1), (0.0, 3)], ids=["backoff 1 s", "no backoff"])
def test_pod_group_backoff_time_prevent_pod_falling_into_infinite_scheduling_loop(backoff_s, released):
    """CT TestPodGroupBackoffTime / "prevent pod falling into infinite scheduling loop":
    pg1 of minMember 3 and pods pod1-3, backoff 1 s. Permit(pod1) = Wait; PostFilter(pod2)
    rejects the group and backs it off; PreFilter(pod3) → UnschedulableAndUnresolvable
    "podGroup ns/pg1 failed recently". Ours: on 3 nodes, two taken by lone pods until 0.5 s and
    2 s, one member binds at t=0 (Wait) and the others find no node: released, backed off 1 s.
    At 0.5 s a node frees: the gang is refused, nothing is bound (without the backoff,
    upstream's default, two members bind and are released again: the loop). At 2 s all three
    bind and the gang starts. `released` counts the members released by then (pod epochs)."""
    cl = cluster([node_type("g8")], [pool(f"p{i}", "g8", min_size=1, max_size=1) for i in range(3)],
                 autoscaling=False)
    pods = [{**MEMBER, "job_id": "a", "duration_s": 0.5}, {**MEMBER, "job_id": "b", "duration_s": 2.0}]
    sim = Simulation(compile_workload(trace(pods + group(3, 3)), cl), cl, seed=0, horizon_s=3600.0)
    sched = Scheduler(LeastAllocated(), gang=Coscheduling(backoff_s=backoff_s))
    sched.attach(sim)
    members = sim.w.job_pods[2]
    sim.advance_to(0.0)
    sched.cycle(0.0)
    assert (sim.pod_status[members] == PENDING).all() and sim.pod_epoch[members].sum() == 1
    sim.advance_to(0.5)
    sched.cycle(0.5)
    assert (sim.pod_status[members] == PENDING).all() and sim.pod_epoch[members].sum() == released
    sim.advance_to(2.0)
    sched.cycle(2.0)
    assert (sim.pod_status[members] == RUNNING).all() and sim.job_started[2] == 2.0


# ---- PreFilter ---------------------------------------------------------------------------------

def test_pre_filter_pod_does_not_belong_to_any_pg():
    """CORE TestPreFilter / "pod does not belong to any pg": success. A lone pod beside
    single-pod groups is scheduled."""
    sim, _ = cycle([MEMBER, {**MEMBER, "job_id": "pg1"}, {**MEMBER, "job_id": "pg2"}], nodes=3)
    assert (sim.pod_status == RUNNING).all()


def test_pre_filter_pod_count_less_than_min_member():
    """CORE TestPreFilter / "pod count less than minMember": PodGroup pg1 of minMember 2 with
    one pod → PreFilter fails, the pod is not scheduled. Ours: pg1's second pod is submitted at
    t=100, so at the t=0 cycle one pod exists and PreFilter refuses it, with room on both
    nodes. A job with fewer pods in all than its min_member is refused when the trace is read."""
    sim, _ = cycle([group(1, 2)[0], {**group(1, 2)[0], "submit_s": 100.0}], nodes=2)
    assert sim.pod_status.tolist() == [PENDING, NOT_ARRIVED]
    with pytest.raises(TraceError, match="min_member.*job has fewer pods than its min_member"):
        trace(group(1, 2))


@pytest.mark.parametrize("case", [
    "CORE TestPreFilter / pod count equal minMember",
    "CORE TestPreFilter / pod count more than minMember",
])
def test_pre_filter_enough_pods_pass(case):
    """PodGroup pg1 of minMember 2 with 3 pods (p1a, p1b, p1c) → success. On 2 nodes two
    members bind, which is quorum: the gang starts, and the third member's failure rejects
    nothing (assigned >= minMember)."""
    sim, _ = cycle(group(3, 2), nodes=2)
    assert sim.pod_status.tolist() == [RUNNING, RUNNING, PENDING] and sim.job_started[0] == 0.0


# ---- QueueSort (Less) --------------------------------------------------------------------------

@pytest.mark.parametrize("case, first, second", [
    ("CT TestLess / p1.priority greater than p2.priority",
     {"priority": 100}, {"priority": 10}),
    ("CT TestLess / equal priority. p1 is added to schedulingQ earlier than p2",
     {"priority": 100, "submit_s": 1.0}, {"priority": 100, "submit_s": 2.0}),
    ("CT TestLess / equal priority. p1 is added to schedulingQ earlier than p2, p1 belongs to pg1",
     {"priority": 100, "submit_s": 1.0, "min_member": 2}, {"priority": 100, "submit_s": 2.0}),
    ("CT TestLess / equal priority and creation time, p1 belongs pg1 and p2 belong to pg2",
     {"priority": 100, "submit_s": 1.0, "min_member": 2}, {"priority": 100, "submit_s": 1.0, "min_member": 2}),
])
def test_less(case, first, second):
    """Less(p1, p2) = true: p1's group is queued ahead of p2's (priority, then the group's
    creation = our submission; on a tie, by name = our job id). Both wait in the queue: there
    is no node."""
    pods = [{**MEMBER, "job_id": "a", **first}] * first.get("min_member", 1)
    pods += [{**MEMBER, "job_id": "b", **second}] * second.get("min_member", 1)
    pods.reverse()  # the trace order is not the queue order
    cl = cluster([node_type("g8")], [pool("p", "g8", max_size=1)], autoscaling=False)
    w = compile_workload(trace(pods), cl)
    sim = Simulation(w, cl, seed=0, horizon_s=3600.0)
    Scheduler(LeastAllocated()).attach(sim)
    sim.advance_to(2.0)
    assert w.job_id[sim.queue.jobs()].tolist() == ["a", "b"]
