"""Device taints during a run (KEP-5055): DeviceTaintRules that come and go at given times on
one node slot's device, NoExecute evicting the pods that hold it, tolerations, and a seeded
failure schedule. Numbers by hand on one static node of two GPUs (gpu-0 and gpu-1, its
columns translated), every pod one whole GPU for 3,600 s; the scheduler steps at each event.
An evicted pod's job has failed once: its Job controller creates it again 10 s later (the
pod-failure backoff, harness/job_backoff.py)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.cluster import Cluster
from harness.errors import ConfigError
from tests import scenarios as sc

H = 3600.0
approx = pytest.approx
TOLERATE = {"key": "gpu-health", "operator": "Exists", "effect": "NoExecute"}


def tolerating(**extra) -> dict:
    """A claim template of one GPU whose request tolerates the gpu-health NoExecute taint."""
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
                                                                 "tolerations": [{**TOLERATE, **extra}]}}]}}


def two_gpus(*rules: dict, failures: dict | None = None, slots: int = 1, **claims) -> Cluster:
    """`slots` static nodes of two GPUs; the rules name gpu-0 of slot 0 unless they say."""
    dra: dict = {"taint_rules": [{"slot": 0, "device": "gpu-0", **r} for r in rules], "claims": claims}
    if failures is not None:
        dra["device_failures"] = failures
    return Cluster(node_types=[sc.node_type("two", gpus=2, nvlink_domains=1, numa_domains=1)],
                   pools=[sc.pool("a", "two", min_size=slots, max_size=slots)], autoscaling=False,
                   name="taints", dra=dra)


def taint(effect: str, **kw) -> dict:
    return {"taint": {"key": "gpu-health", "value": "bad", "effect": effect}, **kw}


def test_a_no_execute_device_taint_mid_run_evicts_the_pod_which_restarts_on_the_other_gpu():
    cl = two_gpus(taint("NoExecute", at_s=1000.0))
    row, sim = sc.run(sc.trace([{}]), cl, sc.separate(), horizon_s=2 * H)
    # bound on gpu-0 (first fit) at 0; evicted at 1,000 with 1,000 s of work lost; back after
    # its 10 s backoff, bound on gpu-1 at 1,010 and runs its full 3,600 s: done at 4,610
    assert row["taint_evictions"] == 1 and row["jobs_evicted_by_taint"] == 1
    assert row["taint_evicted_accel_hours_lost"] == approx(1000 / H)
    assert "preemptions" not in row  # no loop here preempts: evictions by taint are their own column
    assert row["device_taints"] == 1 and row["pods_done"] == 1
    assert sim.job_started[0] == 1010.0 and sim.job_finished[0] == 4610.0
    assert row["used_accel_hours"] == approx((1000 + 3600) / H) and row["pending_s_job_backoff"] == 10.0


def test_a_no_schedule_taint_keeps_the_running_pod_and_its_removal_frees_the_device():
    # p0 runs on gpu-0 from 0 and keeps it under the NoSchedule taint (1,000 to 5,000); p1 gets
    # gpu-1 at 2,000; p2, also at 2,000, finds gpu-0 free at 3,600 but tainted, and starts only
    # when the taint goes, at 5,000
    cl = two_gpus(taint("NoSchedule", at_s=1000.0, until_s=5000.0))
    trace = sc.trace([{}, {"submit_s": 2000.0}, {"submit_s": 2000.0}])
    row, sim = sc.run(trace, cl, sc.separate(), horizon_s=4 * H)
    assert row["taint_evictions"] == 0 and row["device_taints"] == 1
    assert sim.job_finished[0] == 3600.0
    assert sim.job_started[1] == 2000.0 and sim.job_started[2] == 5000.0
    assert row["pods_done"] == 3


def test_a_tolerating_claim_gets_the_tainted_device_and_keeps_it():
    # gpu-0 is tainted NoExecute from the start: the plain pod takes gpu-1, the tolerating one
    # gpu-0 (a plain second pod would wait for gpu-1, until 3,600); nobody is evicted
    cl = two_gpus(taint("NoExecute", at_s=0.0), tol=tolerating())
    row, sim = sc.run(sc.trace([{}, {"claim": "tol"}, {}]), cl, sc.separate(), horizon_s=3 * H)
    assert sim.job_started[0] == 0.0 and sim.job_started[1] == 0.0 and sim.job_started[2] == 3600.0
    assert row["taint_evictions"] == 0 and row["pods_done"] == 3


def test_toleration_seconds_delay_the_eviction_from_the_time_the_taint_came():
    cl = two_gpus(taint("NoExecute", at_s=1000.0, until_s=1605.0), tol=tolerating(tolerationSeconds=600))
    row, sim = sc.run(sc.trace([{"claim": "tol"}]), cl, sc.separate(), horizon_s=2 * H)
    # evicted at 1,000 + 600; back after its backoff, at 1,610, the taint gone: runs whole on
    # gpu-0 again, 1,610 to 5,210
    assert row["taint_evictions"] == 1 and row["taint_evicted_accel_hours_lost"] == approx(1600 / H)
    assert sim.job_started[0] == 1610.0 and sim.job_finished[0] == 5210.0


def test_a_taint_gone_before_the_toleration_runs_out_evicts_nobody():
    cl = two_gpus(taint("NoExecute", at_s=1000.0, until_s=1500.0), tol=tolerating(tolerationSeconds=600))
    row, sim = sc.run(sc.trace([{"claim": "tol"}]), cl, sc.separate(), horizon_s=2 * H)
    assert row["taint_evictions"] == 0 and sim.job_finished[0] == 3600.0


def test_the_taint_holds_on_its_slot_only_and_only_from_its_time():
    # two nodes; gpu-0 and gpu-1 of slot 0 tainted NoSchedule at 100: before it, slot 0 takes
    # a pod; after, the next pods go to slot 1 only (two fit there; the third waits)
    cl = two_gpus(taint("NoSchedule", at_s=100.0), taint("NoSchedule", at_s=100.0, device="gpu-1"), slots=2)
    trace = sc.trace([{}] + [{"submit_s": 200.0}] * 3)
    row, sim = sc.run(trace, cl, sc.separate(), horizon_s=3 * H)
    assert sim.state.device_taints[0].tolist() == [1, 1] and not sim.state.device_taints[1].any()
    assert sim.job_started.tolist() == [0.0, 200.0, 200.0, 3800.0]


def test_no_taint_is_in_force_before_its_time():
    cl = two_gpus(taint("NoExecute", at_s=1000.0))
    _, sim = sc.run(sc.trace([{}]), cl, sc.separate(), horizon_s=999.0)
    assert not sim.state.device_taints.any() and sim.taint_eviction.applied == 0


FAILURES = {"rate_per_device_per_day": 2.0, "repair_s": 1800.0}


def test_the_failure_schedule_is_drawn_from_the_seed():
    cl = two_gpus(failures=FAILURES, slots=3)
    slot_type = np.zeros(3, np.int64)
    assert cl.devices is not None and cl.devices.taints is not None
    draw = cl.devices.taints.changes
    a, b, c = draw(slot_type, 7, 86400.0), draw(slot_type, 7, 86400.0), draw(slot_type, 8, 86400.0)
    assert np.array_equal(a.time, b.time) and np.array_equal(a.slot, b.slot) and np.array_equal(a.device, b.device)
    assert len(a.time) != len(c.time) or not np.array_equal(a.time, c.time)
    assert a.on.sum() > 0 and set(a.device.tolist()) <= {0, 1}
    ends = a.time[~a.on]
    assert (np.diff(a.time) >= 0).all() and (ends < 86400.0).all()
    # each failure lasts repair_s: every removal is 1,800 s after its taint came
    assert np.allclose(a.time[~a.on] - a.added[~a.on], 1800.0)


def test_failures_evict_through_the_run_and_the_same_seed_gives_the_same_run():
    cl = two_gpus(failures={**FAILURES, "rate_per_device_per_day": 24.0}, slots=2)
    trace = sc.trace([{"submit_s": 600.0 * i} for i in range(6)])
    rows = [sc.run(trace, cl, sc.separate(), horizon_s=6 * H, seed=s)[0] for s in (1, 1, 2)]
    assert str(rows[0]) == str(rows[1])  # nan == nan does not hold: compared as printed
    assert rows[0]["device_taints"] > 0 and rows[0]["taint_evictions"] > 0
    assert str(rows[0]) != str(rows[2])


@pytest.mark.parametrize(("dra", "where"), [
    ({"taint_rules": [{"at_s": 10, "until_s": 5, **taint("NoExecute")}]}, "cluster.dra.taint_rules[0].until_s"),
    ({"taint_rules": [{"at_s": -1, **taint("NoExecute")}]}, "cluster.dra.taint_rules[0].at_s"),
    ({"taint_rules": [{**taint("NoExecute")}]}, "cluster.dra.taint_rules[0].at_s"),
    ({"taint_rules": [{"at_s": 0, "when": 3, **taint("NoExecute")}]}, "cluster.dra.taint_rules[0].when"),
    ({"taint_rules": [{"at_s": 0, **taint("Sometimes")}]}, "cluster.dra.taint_rules[0].taint.effect"),
    ({"taint_rules": [{"at_s": 0, "taint": {"effect": "NoExecute"}}]}, "cluster.dra.taint_rules[0].taint.key"),
    ({"taint_rules": [{"at_s": 0, "slot": 5, **taint("NoExecute")}]}, "cluster.dra.taint_rules[0].slot"),
    ({"taint_rules": [{"at_s": 0, "device": "gpu-9", **taint("NoExecute")}]}, "cluster.dra.taint_rules[0]"),
    ({"taint_rules": [{"at_s": 0, "node_type": "big", **taint("NoExecute")}]}, "cluster.dra.taint_rules[0].node_type"),
    ({"taint_rules": {"at_s": 0}}, "cluster.dra.taint_rules"),
    ({"device_failures": {"rate_per_device_per_day": 0, "repair_s": 60}},
     "cluster.dra.device_failures.rate_per_device_per_day"),
    ({"device_failures": {"rate_per_device_per_day": 1}}, "cluster.dra.device_failures.repair_s"),
    ({"device_failures": {"rate_per_device_per_day": 1, "repair_s": 60, "effect": "Evict"}},
     "cluster.dra.device_failures.effect"),
    ({"claims": {"t": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "tolerations": [
        {"key": "k", "operator": "Exists", "effect": "Later"}]}}]}}}}, "tolerations[0].effect"),
])
def test_bad_taint_config_is_refused_by_key(dra, where):
    with pytest.raises(ConfigError) as err:
        Cluster(node_types=[sc.node_type("two", gpus=2, nvlink_domains=1, numa_domains=1)],
                pools=[sc.pool("a", "two", min_size=1, max_size=1)], autoscaling=False, name="bad", dra=dra)
    assert where in str(err.value) and "\n" not in str(err.value)


def test_a_node_whose_taints_change_gets_a_stamp_no_state_had_and_a_tainted_fresh_node_none_shared():
    # answers are cached by node-state stamp: a stamp must name the taints as well as the
    # allocation, so a node whose marks change, or a fresh node on a tainted slot, gets a new one
    from harness.state import ClusterState

    st = ClusterState(two_gpus(taint("NoSchedule", at_s=0.0), slots=2))
    assert st.dra is not None and st.device_taints is not None
    seen = set(st.dra_stamp.tolist())
    st.taint_devices(0, np.array([1, 0], np.int64))
    assert int(st.dra_stamp[0]) not in seen
    seen.add(int(st.dra_stamp[0]))
    same = int(st.dra_stamp[0])
    st.taint_devices(0, np.array([1, 0], np.int64))  # no change: the stamp holds
    assert int(st.dra_stamp[0]) == same
    st.dra.reset(*st.device_arrays, st.dra_stamp, 0, 0, st.device_taints)  # a fresh node, tainted slot
    assert int(st.dra_stamp[0]) not in seen | {0}
    st.dra.reset(*st.device_arrays, st.dra_stamp, 1, 0, st.device_taints)  # a fresh node, untainted slot
    assert int(st.dra_stamp[1]) == 0
