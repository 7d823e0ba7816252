"""Invariants of every loop over random small workloads (hypothesis), and determinism."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.autoscalers.cluster_autoscaler import ClusterAutoscaler
from harness.autoscalers.expanders import Chain, LeastWaste, Priority
from harness.autoscalers.karpenter import KarpenterAutoscaler
from harness.autoscalers.scale_down import ScaleDown
from harness.cluster import Cluster
from harness.loops.separate import SeparateLoops
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.scheduler import Scheduler
from harness.scheduler.gang import Atomic
from harness.scheduler.pod_group import GangScheduling
from harness.scheduler.preemption import DefaultPreemption
from harness.scores import LeastAllocated, MostAllocated
from harness.sim import Simulation
from harness.status import ABSENT, BOOTING, BOUND, PENDING, READY, RUNNING, PendingReason
from harness.workload import LOCALITY_CODE, compile_workload
from tests import scenarios as sc

LOOPS = {
    "separate_none": lambda: sc.separate(gang_mode="none", expander=Chain()),
    "separate_cosched": lambda: sc.separate(gang_mode="coscheduling", expander=Chain([LeastWaste()])),
    "separate_atomic": lambda: sc.separate(gang_mode="atomic", expander=Chain([Priority()]), sharing_aware=True),
    "separate_workload": lambda: SeparateLoops(
        Scheduler(LeastAllocated(), gang=GangScheduling(pop_from_backoff_queue=False),
                  post_filter=DefaultPreemption(min_candidate_nodes_absolute=1)),
        ClusterAutoscaler(scale_down=ScaleDown(), expander=Chain([LeastWaste()]))),
    "separate_provreq": lambda: sc.separate(provisioning_request=True, gang_aware=True, topology_aware=True),
    "merged": lambda: sc.merged(policy=MostAllocated()),
    "separate_preemption": lambda: SeparateLoops(
        Scheduler(LeastAllocated(), post_filter=DefaultPreemption(min_candidate_nodes_absolute=1)),
        ClusterAutoscaler(scale_down=ScaleDown(), expander=Chain([LeastWaste()]))),
    "separate_karpenter": lambda: SeparateLoops(Scheduler(LeastAllocated()), KarpenterAutoscaler(budget_nodes=1.0)),
    "separate_karpenter_aware": lambda: SeparateLoops(Scheduler(MostAllocated(), gang=Atomic()),
                                                      KarpenterAutoscaler(sharing_aware=True, topology_aware=True,
                                                                          max_candidates=2)),
}


def small_cluster(autoscaling: bool, stock: tuple[int | None, int | None] = (3, None), l4_kept: int = 0,
                  name: str = "inv") -> Cluster:
    """Three pools (NVLink, PCIe, L4); `stock` caps pools a and b below their max_size (requests
    come back short), `l4_kept` L4 nodes are the pool's min_size even when autoscaled."""
    return Cluster(
        node_types=[sc.node_type("nvl8", nvlink_domains=1, numa_domains=2, nic_per_gpu=True, partition_profiles=["1g"]),
                    sc.node_type("pcie8", nvlink_domains=4, numa_domains=2),
                    {"name": "l4x4", "cpu_milli": 32000, "memory_mib": 128000, "gpus": 4, "gpu_model": "L4"}],
        pools=[sc.pool("a", "nvl8", block="a", stock=stock[0], atomic=True, committed=1, price_on_demand=10,
                       nodes_per_rack=2, max_size=3, min_size=0 if autoscaling else 3),
               sc.pool("b", "pcie8", block="b", stock=stock[1], price_on_demand=6, max_size=3,
                       min_size=0 if autoscaling else 3),
               sc.pool("c", "l4x4", block="c", boot_s=60, price_on_demand=2, max_size=3,
                       min_size=l4_kept if autoscaling else 3)],
        partition_profiles={"1g": 143}, autoscaling=autoscaling, name=name)


@st.composite
def workloads(draw):
    n_jobs = draw(st.integers(1, 8))
    pods = []
    for j in range(n_jobs):
        kind = draw(st.sampled_from(["share", "partition", "whole", "gang", "cpu", "huge"]))
        submit = float(draw(st.integers(0, 1800)))
        duration = draw(st.one_of(st.none(), st.integers(1, 5400).map(float)))
        base = {"job_id": f"j{j}", "submit_s": submit, "duration_s": duration,
                "priority": draw(st.sampled_from([0, 0, 100]))}  # some jobs may preempt others
        if kind == "share":
            pods.append({**base, "gpu_milli": draw(st.sampled_from([100, 250, 500, 999])),
                         "gpu_models": draw(st.sampled_from([[], ["L4"], ["H100"]]))})
        elif kind == "partition":
            pods.append({**base, "gpu_milli": 0, "gpu_partition": "1g"})
        elif kind == "whole":
            k = draw(st.sampled_from([1, 2, 4, 8]))
            pods.append({**base, "gpu_count": k, "gpus_same_nvlink": draw(st.booleans()),
                         "gpus_same_numa": draw(st.booleans()) and k <= 4, "nic_per_gpu": draw(st.booleans())})
        elif kind == "gang":
            m = draw(st.integers(2, 4))
            loc = draw(st.sampled_from(["none", "rack", "block"]))
            for _ in range(m):
                pods.append({**base, "gpu_count": 8, "min_member": m, "gang_locality": loc,
                             "gpus_same_nvlink": draw(st.booleans()), "duration_s": duration})
        elif kind == "cpu":
            pods.append({**base, "gpu_count": 0, "gpu_milli": 0, "cpu_milli": 4000})
        else:  # no node type can ever hold it: refused, never waited on
            pods.append({**base, "gpu_count": 16})
    for i, pod in enumerate(pods):
        pod["pod_id"] = f"p{i}"
    # members of a gang share one duration draw: take the first
    first = {}
    for pod in pods:
        pod["duration_s"] = first.setdefault(pod["job_id"], pod["duration_s"])
    return sc.trace(pods)


def check_state(sim) -> None:
    """Allocations recomputed from the pods equal capacity minus free, on every node."""
    stt, w = sim.state, sim.w
    assert (stt.cpu_free >= 0).all() and (stt.mem_free >= 0).all()
    assert (stt.gpu_free >= 0).all() and (stt.gpu_free <= 1000).all()
    cpu = np.zeros(stt.n_slots, np.int64)
    gpu = np.zeros(stt.gpu_free.shape, np.int64)
    on = np.flatnonzero(np.isin(sim.pod_status, (BOUND, RUNNING)))
    for p in on:
        n = sim.pod_node[p]
        assert stt.status[n] != ABSENT
        cpu[n] += w.cpu[p]
        gpu[n, sim.pod_gpus[p]] += w.milli[p]
    present = stt.status != ABSENT
    assert (cpu[present] == stt.cpu_cap[present] - stt.cpu_free[present]).all()
    mem = np.bincount(sim.pod_node[on], weights=w.mem[on], minlength=stt.n_slots)
    assert (mem[present] == stt.mem_cap[present] - stt.mem_free[present]).all()
    assert (stt.pods_on == np.bincount(sim.pod_node[on], minlength=stt.n_slots)).all(), "pods per node"
    for n in np.flatnonzero(present):
        k = stt.gpu_cap[n]
        assert (gpu[n, :k] == 1000 - stt.gpu_free[n, :k]).all(), "device over- or under-accounted"
    assert (stt.gpu_used == gpu.sum(axis=1)).all()
    # running totals that metrics read equal the sums they stand for
    ready, booting = stt.status == READY, stt.status == BOOTING
    cap = stt.gpu_cap.astype(np.int64) * 1000
    assert stt.ready_milli == cap[ready].sum() and stt.booting_milli == cap[booting].sum()
    assert stt.alloc_ready_milli == stt.gpu_used[ready].sum()
    assert stt.committed_empty_milli == cap[stt.slot_committed & ~present].sum()
    assert sim.ledger.held_ready == sim.held[ready].sum()
    gang = np.bincount(sim.pod_node[on[sim.ledger.in_gang[on]]], minlength=stt.n_slots)
    assert (sim.gang_pods_on == gang).all(), "gang members per node"
    gpus = np.bincount(sim.pod_node[on], weights=w.gpus[on], minlength=stt.n_slots)
    assert (sim.gpus_on == gpus).all(), "GPUs requested per node"
    assert all(len(sim.pod_gpus[p]) == w.gpus[p] for p in on), "a pod holds as many devices as it asks"
    assert (sim.job_placed == np.bincount(w.job[sim.pod_node >= 0], minlength=w.n_jobs)).all()
    anchored = sim.job_anchor >= 0
    assert (anchored == (sim.job_placed > 0)).all()
    for j in np.flatnonzero(anchored & (w.job_locality != LOCALITY_CODE["none"])):  # one rack/block
        groups = stt.slot_rack if w.job_locality[j] == LOCALITY_CODE["rack"] else stt.slot_block
        placed = sim.pod_node[w.job_pods[j]]
        assert (groups[placed[placed >= 0]] == groups[sim.job_anchor[j]]).all()
    assert sim.ledger.frag_ready == pytest.approx(sim.ledger.frag[ready].sum(), abs=1e-6)
    # a job waiting out its pod-failure backoff is out of the queue, its pending pods say so,
    # and no other pod does; its backoff still runs (its end lets it in, before any step)
    queue = sim.queue
    assert not (queue.holds & queue.deferred).any()
    waiting = (sim.pod_status == PENDING) & queue.deferred[w.job]
    assert (sim.pod_reason[waiting] == PendingReason.JOB_BACKOFF).all()
    assert not ((sim.pod_reason == PendingReason.JOB_BACKOFF) & ~waiting).any()
    assert all(sim.job_backoff.holds(int(j)) for j in np.flatnonzero(queue.deferred))


def run_checked(table, loop, autoscaling=True):
    cl = small_cluster(autoscaling)
    sim = Simulation(compile_workload(table, cl), cl, seed=3, horizon_s=4 * 3600.0)
    step = loop.step

    def checked_step(s, now):
        step(s, now)
        check_state(s)

    loop.step = checked_step
    sim.run(loop)
    return summary_row(sim, jobs_frame(sim), nodes_frame(sim), {}).to_dicts()[0], sim


@pytest.mark.parametrize("name", sorted(LOOPS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=workloads(), autoscaling=st.booleans())
def test_invariants_hold_for_every_loop(name, table, autoscaling):
    row, sim = run_checked(table, LOOPS[name](), autoscaling)
    # every pod accounted for
    counted = sum(row[k] for k in ("pods_done", "pods_running", "pods_bound_waiting", "pods_pending",
                                   "pods_refused", "pods_not_arrived"))
    assert counted == row["pods"] == sim.w.n_pods
    arrived = sim.w.submit <= sim.horizon
    assert row["pods_refused"] == int((sim.w.never_fits & arrived).sum())
    # billed accelerator time = used + the idle causes
    causes = sum(row[f"idle_accel_hours_{c}"] for c in ("booting", "unallocated", "gang_wait", "committed"))
    assert row["billed_accel_hours"] == pytest.approx(row["used_accel_hours"] + causes, abs=1e-6)
    assert row["idle_accel_hours"] == pytest.approx(causes, abs=1e-6)
    assert min(row[f"idle_accel_hours_{c}"] for c in ("booting", "unallocated", "gang_wait", "committed")) >= -1e-9
    assert 0.0 <= row["frag_amount"] <= 1.0 and 0.0 <= row["frag_ratio"] <= 1.0 + 1e-9


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_same_config_and_seed_give_identical_metrics(name):
    table = sc.trace(
        [{"job_id": f"j{i}", "gpu_milli": 250 + 100 * (i % 3), "submit_s": 60.0 * i} for i in range(12)]
        + [{"job_id": "g", "min_member": 3, "gpu_count": 8, "submit_s": 100.0} for _ in range(3)])
    a, _ = run_checked(table, LOOPS[name]())
    b, _ = run_checked(table, LOOPS[name]())
    assert a == pytest.approx(b, nan_ok=True)
