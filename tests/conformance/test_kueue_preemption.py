"""Kueue preemption conformance: upstream's own cases, translated.

Upstream: kubernetes-sigs/kueue, pkg/scheduler/preemption/preemption_test.go `TestPreemption`
(the classical, non-fair-sharing preemptor of pkg/scheduler/preemption/preemption.go). Its
ClusterQueues kept as is, cpu in cores, memory in GiB (one resource group): `standalone`
(cpu 6, withinClusterQueue LowerPriority), `c1`/`c2` in cohort `cohort` (cpu 6 and memory 3,
each borrowing up to as much; c1 LowerPriority/LowerPriority, c2 Never/Any),
`preventStarvation` (cpu 6, LowerOrNewerEqualPriority), `lend1`/`lend2` in `cohort-lend` (cpu
6, lending limits 4 and 2; LowerPriority/LowerPriority), and `with_shared_cq`'s `a_standard`,
`b_standard`, `a_best_effort`, `b_best_effort` (cpu 1, 1, 1, 0, borrowing up to 12, 12, 12,
13; borrowWithinCohort LowerPriority with maxPriorityThreshold 0) beside `shared` (cpu 10).
The admitted workloads hold quota (upstream's ReserveQuotaAt), in the order listed (later =
admitted more recently); the incoming one is the head of its queue, and each case asks what
it preempts (`KueuePreemption.targets`, upstream's GetTargets: None = no preemption) given,
as upstream's cases do, the resources its flavor assignment marks Preempt (cpu, and memory
when it asks some).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.kueue.admission import Admission
from harness.kueue.preemption import KueuePreemption
from harness.kueue.queues import parse_kueue

POOLS = ["p"]
LP, ANY, NEVER = "LowerPriority", "Any", "Never"
BWC = {"policy": LP, "max_priority_threshold": 0}


def cq(name, cpu, cohort=None, borrow=None, lend=None, memory=None, within=NEVER, reclaim=NEVER, bwc=None):
    e = {"name": "default", "nominal": {"cpu": cpu, **({} if memory is None else {"memory": memory})}}
    if borrow is not None:
        e["borrowing_limit"] = {"cpu": borrow, **({} if memory is None else {"memory": memory})}
    if lend is not None:
        e["lending_limit"] = {"cpu": lend}
    pre = {"within_cluster_queue": within, "reclaim_within_cohort": reclaim}
    if bwc:
        pre["borrow_within_cohort"] = bwc
    return {"name": name, "cohort": cohort, "flavors": [e], "preemption": pre}


QUEUES = [
    cq("standalone", 6, within=LP),
    cq("c1", 6, "cohort", borrow=6, memory=3, within=LP, reclaim=LP),
    cq("c2", 6, "cohort", borrow=6, memory=3, within=NEVER, reclaim=ANY),
    cq("preventStarvation", 6, within="LowerOrNewerEqualPriority"),
    cq("lend1", 6, "cohort-lend", lend=4, within=LP, reclaim=LP),
    cq("lend2", 6, "cohort-lend", lend=2, within=LP, reclaim=LP),
    cq("a_standard", 1, "with_shared_cq", borrow=12, within=NEVER, reclaim=LP, bwc=BWC),
    cq("b_standard", 1, "with_shared_cq", borrow=12, within=LP, reclaim=ANY, bwc=BWC),
    cq("a_best_effort", 1, "with_shared_cq", borrow=12, within=NEVER, reclaim=LP, bwc=BWC),
    cq("b_best_effort", 0, "with_shared_cq", borrow=13, within=NEVER, reclaim=LP, bwc=BWC),
    cq("shared", 10, "with_shared_cq", within=NEVER),
]
K = parse_kueue({"resource_flavors": [{"name": "default", "pools": POOLS}], "cluster_queues": QUEUES,
                 "local_queues": [{"name": q["name"], "cluster_queue": q["name"]} for q in QUEUES]}, POOLS)
CQ = {c.name: i for i, c in enumerate(K.cluster_queues)}


def preempted(admitted: list[tuple[str, str, float, int]], incoming: tuple[str, float, int],
              incoming_ts: float = 0.0, memory: float = 0.0) -> set[str] | None:
    """What the incoming workload (queue, cores, priority) preempts among the admitted ones
    (name, queue, cores, priority), created at 0 (the incoming one at `incoming_ts`)."""
    names = [a[0] for a in admitted] + ["in"]
    queues = [a[1] for a in admitted] + [incoming[0]]
    cores = [a[2] for a in admitted] + [incoming[1]]
    prio = np.array([a[3] for a in admitted] + [incoming[2]], np.int64)
    request = np.array([[0.0, c * 1000, 0.0] for c in cores])
    request[-1, 2] = memory * 1024
    adm = Admission(K, request, np.ones((len(names), 1), bool), np.array([CQ[q] for q in queues]), prio)
    for j in range(len(admitted)):  # ReserveQuotaAt, in order
        adm.usage[adm.queue_of[j], 0] += adm.request[j]
        adm.flavor[j], adm.admitted_seq[j], adm.queued_ts[j] = 0, j, 0.0
    j = len(admitted)
    adm.push(j, incoming_ts)
    lacking = np.array([False, True, memory > 0])  # upstream's assignment: these resources in mode Preempt
    victims = KueuePreemption(np.zeros(len(names))).targets(adm, j, 0, lacking)
    return {names[v] for v in victims} or None


@pytest.mark.parametrize("case, admitted, incoming, want", [
    ("preempt lowest priority",
     [("low", "standalone", 2, -1), ("mid", "standalone", 2, 0), ("high", "standalone", 2, 1)],
     ("standalone", 2, 1), {"low"}),
    ("preempt multiple",
     [("low", "standalone", 2, -1), ("mid", "standalone", 2, 0), ("high", "standalone", 2, 1)],
     ("standalone", 3, 1), {"low", "mid"}),
    ("no preemption for low priority",
     [("low", "standalone", 3, -1), ("mid", "standalone", 3, 0)], ("standalone", 1, -1), None),
    ("not enough low priority workloads",
     [("low", "standalone", 3, -1), ("mid", "standalone", 3, 0)], ("standalone", 4, 0), None),
    ("some free quota, preempt low priority",
     [("low", "standalone", 1, -1), ("mid", "standalone", 1, 0), ("high", "standalone", 3, 1)],
     ("standalone", 2, 1), {"low"}),
    ("minimal set excludes low priority",
     [("low", "standalone", 1, -1), ("mid", "standalone", 2, 0), ("high", "standalone", 3, 1)],
     ("standalone", 2, 1), {"mid"}),
    ("reclaim quota from borrower",
     [("c1-low", "c1", 3, -1), ("c2-mid", "c2", 3, 0), ("c2-high", "c2", 6, 1)], ("c1", 3, 1), {"c2-mid"}),
    ("no workloads borrowing",
     [("c1-high", "c1", 4, 1), ("c2-low-1", "c2", 4, -1)], ("c1", 4, 1), None),
    ("not enough workloads borrowing",
     [("c1-high", "c1", 4, 1), ("c2-low-1", "c2", 4, -1), ("c2-low-2", "c2", 4, -1)], ("c1", 4, 1), None),
    ("preempting locally and borrowing same resource in cohort",
     [("c1-med", "c1", 4, 0), ("c1-low", "c1", 4, -1), ("c2-low-1", "c2", 4, -1)], ("c1", 4, 1), {"c1-low"}),
    ("do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority",
     [("c1", "c1", 2, 0), ("c2-1", "c2", 4, 0), ("c2-2", "c2", 4, 0)], ("c1", 4, 0), None),
    ("reclaim quota from lender",
     [("lend1-low", "lend1", 3, -1), ("lend2-mid", "lend2", 3, 0), ("lend2-high", "lend2", 4, 1)],
     ("lend1", 3, 1), {"lend2-mid"}),
    ("preempt from all ClusterQueues in cohort-lend",
     [("lend1-low", "lend1", 3, -1), ("lend1-mid", "lend1", 2, 0), ("lend2-low", "lend2", 3, -1),
      ("lend2-mid", "lend2", 4, 0)], ("lend1", 4, 0), {"lend1-low", "lend2-low"}),
    ("cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit",
     [("lend2-low", "lend2", 10, -1)], ("lend1", 9, 0), None),
    ("use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue while borrowing",
     [("a_best_effort_low", "a_best_effort", 10, -1), ("b_best_effort_low", "b_best_effort", 1, -1)],
     ("a_standard", 10, 0), {"a_best_effort_low"}),
    ("use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above "
     "MaxPriorityThreshold, if borrowing is required even after the preemption",
     [("b_standard", "b_standard", 10, 1)], ("a_standard", 10, 2), None),
    ("use BorrowWithinCohort; allow preempting a lower-priority workload with priority above "
     "MaxPriorityThreshold, if borrowing is not required after the preemption",
     [("b_standard", "b_standard", 13, 1)], ("a_standard", 1, 2), {"b_standard"}),
    ("use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same ClusterQueue",
     [("a_standard", "a_standard", 13, 1)], ("a_standard", 1, 2), None),
    ("use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already above nominal",
     [("a_standard_1", "a_standard", 10, 1), ("a_standard_2", "a_standard", 1, 1),
      ("b_standard_1", "b_standard", 1, 1), ("b_standard_2", "b_standard", 1, 2)],
     ("b_standard", 1, 3), {"b_standard_1"}),
    ("use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold",
     [("b_standard_high", "b_standard", 10, 2), ("b_standard_mid", "b_standard", 1, 1),
      ("a_best_effort_low", "a_best_effort", 1, -1), ("a_best_effort_lower", "a_best_effort", 1, -2)],
     ("b_standard", 2, 2), {"b_standard_mid", "a_best_effort_lower"}),
])
def test_preemption(case, admitted, incoming, want):
    """TestPreemption / <case>: the victims upstream wants (None: it preempts nothing)."""
    assert preempted(admitted, incoming) == want


def test_preempt_newer_workloads_with_the_same_priority():
    """TestPreemption / "preempt newer workloads with the same priority": preventStarvation
    (LowerOrNewerEqualPriority) holds wl1 (priority 2), wl3 then wl2 (priority 1, quota
    reserved 1 s apart), 2 cores each; `in` (priority 1, created 15 s before them) preempts the
    newest of the equal-priority ones, wl2. Failed with the equal-priority rule dropped
    (nothing preempted) and with the newest-first order reversed (wl3)."""
    admitted = [("wl1", "preventStarvation", 2, 2), ("wl3", "preventStarvation", 2, 1),
                ("wl2", "preventStarvation", 2, 1)]
    assert preempted(admitted, ("preventStarvation", 2, 1), incoming_ts=-15.0) == {"wl2"}
    # created after them, `in` is not older than any: LowerOrNewerEqualPriority spares them
    assert preempted(admitted, ("preventStarvation", 2, 1), incoming_ts=15.0) is None


def test_preempting_locally_and_borrowing_other_resources_in_cohort_without_cohort_candidates():
    """TestPreemption / "preempting locally and borrowing other resources in cohort, without
    cohort candidates": c1 holds c1-low (4 cores), c2 holds c2-low-1 and c2-high-2 (4 each,
    so c2 borrows 2 cores); `in` (priority 1) asks 4 cores and 5 GiB of c1, whose memory
    nominal is 3: it must borrow memory whatever goes, so reclaiming c2-low-1 (allowed only
    without borrowing) cannot help; the last attempt takes c1's own c1-low, with borrowing.
    """
    admitted = [("c1-low", "c1", 4, -1), ("c2-low-1", "c2", 4, -1), ("c2-high-2", "c2", 4, 1)]
    assert preempted(admitted, ("c1", 4, 1), memory=5) == {"c1-low"}


@pytest.mark.parametrize("edit, where, rule", [
    ({"within_cluster_queue": "Lower"}, "preemption.within_cluster_queue", "must be one of Never, LowerPriority"),
    ({"reclaim_within_cohort": "All"}, "preemption.reclaim_within_cohort", "must be one of Never, LowerPriority, Any"),
    ({"borrow_within_cohort": {"policy": "Any"}}, "preemption.borrow_within_cohort.policy",
     "must be one of Never, LowerPriority"),
    ({"borrow_within_cohort": {"policy": LP}}, "preemption.borrow_within_cohort.policy",
     "LowerPriority needs reclaim_within_cohort other than Never"),
    ({"reclaim_within_cohort": LP, "borrow_within_cohort": {"policy": LP, "max_priority_threshold": 0.5}},
     "preemption.borrow_within_cohort.max_priority_threshold", "must be an integer priority"),
    ({"within": LP}, "preemption", "unknown key 'within'"),
])
def test_preemption_policies_are_validated_as_upstream(edit, where, rule):
    """apis/kueue/v1beta1/clusterqueue_types.go ClusterQueuePreemption: the enums, and the CEL
    rule "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"; refused by key."""
    q = {"name": "q", "cohort": "c", "flavors": [{"name": "default", "nominal": {"cpu": 1}}], "preemption": edit}
    with pytest.raises(ConfigError) as err:
        parse_kueue({"resource_flavors": [{"name": "default", "pools": POOLS}], "cluster_queues": [q],
                     "local_queues": []}, POOLS)
    assert err.value.where == f"cluster.kueue.cluster_queues[0].{where}" and rule in err.value.rule


def test_preemption_defaults_to_never_as_upstream():
    """ClusterQueuePreemption's defaults: every policy Never (no preemption object is made)."""
    k = parse_kueue({"resource_flavors": [{"name": "default", "pools": POOLS}],
                     "cluster_queues": [{"name": "q", "flavors": [{"name": "default", "nominal": {"cpu": 1}}]}],
                     "local_queues": []}, POOLS)
    p = k.cluster_queues[0].preemption
    assert (p.within_cluster_queue, p.reclaim_within_cohort, p.borrow_within_cohort) == (NEVER,) * 3
    assert not p.enabled


def test_preempt_workloads_in_cluster_queue_and_cohort():
    """pkg/scheduler/scheduler_test.go TestSchedule / "preempt workloads in ClusterQueue and
    cohort" (one cycle, `Admission.cycle`): cohort eng, eng-alpha (on-demand 50 borrowing up to
    50, spot 100) and eng-beta (on-demand 50 borrowing up to 10, spot 0 borrowing up to 100;
    reclaimWithinCohort Any, withinClusterQueue LowerPriority). Held: use-all-spot (alpha,
    spot 100), low-1 (beta, on-demand 30, priority -1), low-2 (beta, on-demand 10, priority
    -2), borrower (alpha, on-demand 60). The preemptor (beta, 20) fits no flavor; it preempts
    borrower and low-2, as upstream. Upstream leaves it pending until their eviction ends;
    here it is admitted in the same cycle, on on-demand (fails with it left for the next
    cycle, upstream's timing; the victims go back to their queues' heads)."""
    def fq(name, cpu, borrow):
        return {"name": name, "nominal": {"cpu": cpu}, "borrowing_limit": {"cpu": borrow}}

    section = {"resource_flavors": [{"name": f, "pools": POOLS} for f in ("on-demand", "spot")],
               "cluster_queues": [
                   {"name": "eng-alpha", "cohort": "eng", "queueing_strategy": "StrictFIFO",
                    "flavors": [fq("on-demand", 50, 50), fq("spot", 100, 0)]},
                   {"name": "eng-beta", "cohort": "eng", "queueing_strategy": "StrictFIFO",
                    "flavors": [fq("on-demand", 50, 10), fq("spot", 0, 100)],
                    "preemption": {"reclaim_within_cohort": ANY, "within_cluster_queue": LP}}],
               "local_queues": []}
    k = parse_kueue(section, POOLS)
    names = ["use-all-spot", "low-1", "low-2", "borrower", "preemptor"]
    held = [(0, 1, 100), (1, 0, 30), (1, 0, 10), (0, 0, 60)]  # (queue, flavor, cores)
    request = np.array([[0.0, cpu * 1000, 0.0] for _, _, cpu in held] + [[0.0, 20000.0, 0.0]])
    adm = Admission(k, request, np.ones((5, 2), bool), np.array([0, 1, 1, 0, 1]), np.array([0, -1, -2, 0, 0]))
    adm.preemption = KueuePreemption(np.zeros(5))
    for j, (c, f, _) in enumerate(held):
        adm.usage[c, f] += request[j]
        adm.flavor[j], adm.admitted_seq[j], adm.queued_ts[j] = f, j, 0.0
    adm.n_admitted = adm.preemptible_before = len(held)
    adm.push(4, 0.0)
    admitted, _ = adm.cycle()
    assert {names[v] for v in adm.evicted} == {"borrower", "low-2"}
    assert [(names[j], k.flavor_names[f]) for j, f in admitted] == [("preemptor", "on-demand")]
    assert [key[2] for key in adm.pending[0]] == [3] and [key[2] for key in adm.pending[1]] == [2]


def test_use_second_flavor_when_the_first_has_no_preemption_candidates():
    """pkg/scheduler/scheduler_test.go TestSchedule / "use second flavor when the first has no
    preemption candidates" (other-alpha: on-demand 50, spot 100, withinClusterQueue
    LowerPriority): `admitted` holds on-demand 50; `new` (20, same priority) has no candidate
    on on-demand and is admitted on spot, nothing preempted. Upstream runs it with
    WhenCanPreempt Preempt; here any flavor that fits beats preempting on an earlier one
    (upstream's default, TryNextFlavor)."""
    section = {"resource_flavors": [{"name": f, "pools": POOLS} for f in ("on-demand", "spot")],
               "cluster_queues": [{"name": "other-alpha", "preemption": {"within_cluster_queue": LP},
                                   "flavors": [{"name": "on-demand", "nominal": {"cpu": 50}},
                                               {"name": "spot", "nominal": {"cpu": 100}}]}],
               "local_queues": []}
    k = parse_kueue(section, POOLS)
    adm = Admission(k, np.array([[0.0, 50000, 0], [0.0, 20000, 0]]), np.ones((2, 2), bool), np.zeros(2, np.int64),
                    np.zeros(2, np.int64))
    adm.preemption = KueuePreemption(np.zeros(2))
    adm.usage[0, 0] += adm.request[0]
    adm.flavor[0], adm.admitted_seq[0] = 0, 0
    adm.push(1, 0.0)
    assert adm.cycle()[0] == [(1, 1)] and adm.evicted == []
