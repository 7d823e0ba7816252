"""Kueue admission conformance: upstream's own cases, translated.

Upstream: kubernetes-sigs/kueue, pkg/scheduler/scheduler_test.go `TestSchedule` (commit
005e97cf). Its ClusterQueues, kept as is (cpu in cores): `sales` (no cohort, StrictFIFO,
flavor default: 50), `eng-alpha` and `eng-beta` in cohort `eng` (flavors on-demand then spot;
alpha: on-demand 50 borrowing limit 50, spot 100 borrowing limit 0; beta: on-demand 50
borrowing limit 10, spot 0 borrowing limit 100, and `model-a` gpu 20 in a second resource
group), `lend-a` and `lend-b` in cohort `lend` (default: 3 lending limit 2; 2 lending limit 2).
A workload is a job of N pods of 1 core (`MakePodSet("one", N)`); one already holding quota
(`ReserveQuota`) is admitted first through the same books. Upstream's second resource group
(`model-a`) is folded into one group here (beta's gpu quota is then listed on model-a only),
which changes no case below. Each case runs one upstream cycle (`Admission.cycle`) unless it
says so; "left" = still pending in its queue, "inadmissible" = set aside (BestEffortFIFO).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.kueue.admission import Admission
from harness.kueue.queues import parse_kueue

POOLS = ["p"]


def fq(name, cpu, borrow=None, lend=None, gpu=None):
    e = {"name": name, "nominal": {"cpu": cpu, **({} if gpu is None else {"gpu": gpu})}}
    if borrow is not None:
        e["borrowing_limit"] = {"cpu": borrow}
    if lend is not None:
        e["lending_limit"] = {"cpu": lend}
    return e


UPSTREAM = {
    "resource_flavors": [{"name": f, "pools": POOLS} for f in ("default", "on-demand", "spot", "model-a")],
    "cluster_queues": [
        {"name": "sales", "queueing_strategy": "StrictFIFO", "flavors": [fq("default", 50)]},
        {"name": "eng-alpha", "cohort": "eng", "queueing_strategy": "StrictFIFO",
         "flavors": [fq("on-demand", 50, borrow=50), fq("spot", 100, borrow=0)]},
        {"name": "eng-beta", "cohort": "eng", "queueing_strategy": "StrictFIFO",
         "flavors": [fq("on-demand", 50, borrow=10), fq("spot", 0, borrow=100), fq("model-a", 0, gpu=20)]},
        {"name": "lend-a", "cohort": "lend", "flavors": [fq("default", 3, lend=2)]},
        {"name": "lend-b", "cohort": "lend", "flavors": [fq("default", 2, lend=2)]},
    ],
    "local_queues": [{"name": q, "cluster_queue": q} for q in ("sales", "eng-alpha", "eng-beta", "lend-a", "lend-b")],
}
K = parse_kueue(UPSTREAM, POOLS)
CQ = {cq.name: c for c, cq in enumerate(K.cluster_queues)}
FLAVOR = {f: i for i, f in enumerate(K.flavor_names)}


def books(jobs: list[tuple[str, float, float]], priority=None) -> Admission:
    """Jobs as (ClusterQueue, cores, GPUs); all can use every flavor."""
    request = np.array([[gpu * 1000, cpu * 1000, 0] for _, cpu, gpu in jobs], float)
    queue_of = np.array([CQ[q] for q, _, _ in jobs])
    prio = np.zeros(len(jobs), np.int64) if priority is None else np.asarray(priority)
    return Admission(K, request, np.ones((len(jobs), len(K.flavor_names)), bool), queue_of, prio)


def holding(adm: Admission, j: int, flavor: str) -> None:
    """Job j already holds quota of `flavor` (upstream's ReserveQuota)."""
    c = int(adm.queue_of[j])
    adm.usage[c, FLAVOR[flavor]] += adm.request[j]
    adm.flavor[j] = FLAVOR[flavor]


def pending(adm: Admission, name: str) -> list[int]:
    return [key[2] for key in adm.pending[CQ[name]]]


def admitted(adm: Admission) -> dict[int, str]:
    return {j: K.flavor_names[f] for j, f in adm.cycle()[0]}


def test_single_cluster_queue_full():
    """TestSchedule / "single clusterQueue full": sales holds 40 of 50; 11 more stay left."""
    adm = books([("sales", 11, 0), ("sales", 40, 0)])
    holding(adm, 1, "default")
    adm.push(0, 0.0)
    assert admitted(adm) == {}
    assert pending(adm, "sales") == [0]  # StrictFIFO: the head stays


def test_admit_in_different_cohorts():
    """TestSchedule / "admit in different cohorts": sales 1 core; eng-alpha 51, borrowing 1."""
    adm = books([("sales", 1, 0), ("eng-alpha", 51, 0)])
    adm.push(0, 0.0)
    adm.push(1, 0.0)
    assert admitted(adm) == {0: "default", 1: "on-demand"}
    assert adm.fit(CQ["eng-alpha"], FLAVOR["on-demand"], np.zeros(3))[0]


def test_admit_in_same_cohort_with_no_borrowing():
    """TestSchedule / "admit in same cohort with no borrowing": 40 and 40 on on-demand."""
    adm = books([("eng-alpha", 40, 0), ("eng-beta", 40, 0)])
    adm.push(0, 0.0)
    adm.push(1, 0.0)
    assert admitted(adm) == {0: "on-demand", 1: "on-demand"}


def test_cannot_borrow_if_cohort_was_assigned_and_would_result_in_overadmission():
    """TestSchedule / "cannot borrow if cohort was assigned and would result in overadmission":
    alpha 45 (no borrowing) goes first; beta's 56 on on-demand (borrowing 6) no longer fits the
    cohort's 100 and stays left, not inadmissible. (The next cycle reassigns it, to spot.)"""
    adm = books([("eng-alpha", 45, 0), ("eng-beta", 56, 0)])
    adm.push(0, 0.0)
    adm.push(1, 0.0)
    assert admitted(adm) == {0: "on-demand"}
    assert pending(adm, "eng-beta") == [1] and adm.inadmissible[CQ["eng-beta"]] == []


def test_can_borrow_if_cohort_was_assigned_and_will_not_result_in_overadmission():
    """TestSchedule / "can borrow if cohort was assigned and will not result in overadmission"."""
    adm = books([("eng-alpha", 45, 0), ("eng-beta", 55, 0)])
    adm.push(0, 0.0)
    adm.push(1, 0.0)
    assert admitted(adm) == {0: "on-demand", 1: "on-demand"}


def test_can_borrow_if_needs_reclaim_from_cohort_in_different_flavor():
    """TestSchedule / "can borrow if needs reclaim from cohort in different flavor": beta holds
    50 on-demand and 1 spot; alpha's 100 fits neither flavor now (it would need to reclaim) and
    is left; beta's 1 more borrows on-demand."""
    adm = books([("eng-alpha", 100, 0), ("eng-beta", 1, 0), ("eng-beta", 50, 0), ("eng-beta", 1, 0)])
    holding(adm, 2, "on-demand")
    holding(adm, 3, "spot")
    adm.push(0, 0.0)
    adm.push(1, 0.0)
    assert admitted(adm) == {1: "on-demand"}
    assert pending(adm, "eng-alpha") == [0]


def test_workload_exceeds_lending_limit_when_borrow_in_cohort():
    """TestSchedule / "workload exceeds lending limit when borrow in cohort": lend-b holds 2;
    3 more would draw 3 on a pool of 2 + 2 lendable, of which 2 are drawn: inadmissible."""
    adm = books([("lend-b", 2, 0), ("lend-b", 3, 0)])
    holding(adm, 0, "default")
    adm.push(1, 0.0)
    assert admitted(adm) == {}
    assert [k[2] for k in adm.inadmissible[CQ["lend-b"]]] == [1]


def test_lending_limit_off_admits_what_the_whole_nominal_quota_allows():
    """TestSchedule / "lendingLimit should not affect assignments when feature disabled": the
    same books without lending limits (a pool of 3 + 2) admit the 3."""
    unlimited = {"lend-a": [fq("default", 3)], "lend-b": [fq("default", 2)]}
    cfg = {**UPSTREAM, "cluster_queues": [{**q, "flavors": unlimited.get(q["name"], q["flavors"])}
                                          for q in UPSTREAM["cluster_queues"]]}
    k = parse_kueue(cfg, POOLS)
    adm = Admission(k, np.array([[0, 2000, 0], [0, 3000, 0]], float), np.ones((2, 4), bool),
                    np.array([CQ["lend-b"]] * 2), np.zeros(2, np.int64))
    holding(adm, 0, "default")
    adm.push(1, 0.0)
    assert {j: k.flavor_names[f] for j, f in adm.cycle()[0]} == {1: "default"}


def test_cannot_borrow_resource_not_listed_in_cluster_queue():
    """TestSchedule / "cannot borrow resource not listed in clusterQueue": alpha lists no gpu."""
    adm = books([("eng-alpha", 0, 1)])
    adm.push(0, 0.0)
    assert admitted(adm) == {}
    assert pending(adm, "eng-alpha") == [0]


def test_not_enough_resources_to_borrow_fallback_to_next_flavor():
    """TestSchedule / "not enough resources to borrow, fallback to next flavor; WhenCanPreempt:
    TryNextFlavor": beta holds 45 on-demand; alpha's 60 would draw 105 of the cohort's 100
    on-demand, so it gets spot."""
    adm = books([("eng-alpha", 60, 0), ("eng-beta", 45, 0)])
    holding(adm, 1, "on-demand")
    adm.push(0, 0.0)
    assert admitted(adm) == {0: "spot"}


def test_queue_orders_by_priority_then_timestamp():
    """pkg/queue (cluster_queue.go queueOrderingFunc): higher priority first, then the older."""
    adm = books([("sales", 1, 0)] * 3, priority=[0, 5, 0])
    adm.push(0, 20.0)
    adm.push(1, 30.0)
    adm.push(2, 10.0)
    assert pending(adm, "sales") == [1, 2, 0]


@pytest.mark.parametrize("key, bad, message", [
    ("borrowing_limit", {"cpu": 1}, "only a ClusterQueue in a cohort borrows or lends"),
    ("lending_limit", {"cpu": 60}, "must be at most the nominal quota"),
])
def test_limits_are_validated_as_upstream(key, bad, message):
    """apis/kueue/v1beta1 clusterqueue_types.go: borrowingLimit/lendingLimit need a cohort, and
    lendingLimit <= nominalQuota (CEL validation rules)."""
    cq = {"name": "x", **({"cohort": "c"} if key == "lending_limit" else {}),
          "flavors": [{"name": "default", "nominal": {"cpu": 50}, key: bad}]}
    with pytest.raises(ConfigError, match=message):
        parse_kueue({**UPSTREAM, "cluster_queues": [cq], "local_queues": []}, POOLS)
