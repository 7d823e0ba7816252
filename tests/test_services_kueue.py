"""Services behind Kueue (harness/kueue/loop.py, harness/services/loop.py): golden replays with
hand-computed numbers, and a service's unknown queue refused.

Upstream: Kueue admits a Deployment's pods through its pod integration, each pod a single-pod
Workload in the LocalQueue its queue-name label names (kubernetes-sigs/kueue
pkg/controller/jobs/deployment/deployment_webhook.go `Default` copies the label into the pod
template; pkg/controller/jobs/pod/pod_controller.go gates each pod with
kueue.x-k8s.io/admission until its Workload is admitted); site/content/en/docs/tasks/run/
deployment.md, "Scaling": "On scale-in, the excess Pods are deleted, and the quota is freed.
On scale-out, new Pods are created, and remain suspended until their corresponding workloads
get admitted."

The cluster: two 8-GPU nodes, ready at 0, no autoscaling (tests/test_kueue.py's
`static_cluster`), so every wait below is Kueue's. One ClusterQueue `q` (BestEffortFIFO, no
cohort) of `gpu` GPUs. The service: one whole GPU per replica, capacity 100 units/s, cold start
120 s, in queue `q`. HPA defaults (a sync every 15 s from 0, target 70 units/s a replica,
tolerance 0.1; the HPA's floor, one replica, created at 0).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.config import compose
from harness.errors import TraceError
from harness.kueue.loop import KueueLoop
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.replay import build
from harness.services.loop import ReplicaLoop
from harness.services.replicas import HorizontalPodAutoscaler, KedaScaledObject
from harness.status import NOT_ARRIVED
from tests import scenarios as sc
from tests.test_kueue import job, kueue, queue, static_cluster
from tests.test_quiet import bits

SVC = {"service": "svc", "capacity_per_replica": 100.0, "min_replicas": 1, "max_replicas": 4, "cold_start_s": 120.0,
       "queue": "q"}


def replay(pods: list[dict], windows: list, gpu: float, horizon_s: float, hpa=None, behind_kueue: bool = True):
    """Run the service beside these pods; return the simulation, its replica changes as
    (t, +k or -k), the service totals and the jobs table by job id."""
    sim = sc.service_sim(pods, [SVC], {"svc": windows}, static_cluster(kueue(queue("q", gpu))), horizon_s)
    changes = []
    create, delete = sim.replicasets.create, sim.replicasets.delete
    sim.replicasets.create = lambda s, k: (changes.append((sim.now, k)), create(s, k))[1]  # type: ignore[method-assign]
    sim.replicasets.delete = lambda s, k: (changes.append((sim.now, -k)), delete(s, k))[1]  # type: ignore[method-assign]
    inner = KueueLoop(sc.separate()) if behind_kueue else sc.separate()
    loop = ReplicaLoop(inner, hpa or HorizontalPodAutoscaler())
    sim.run(loop)
    return sim, loop, changes, sim.replicasets.acct.totals(), by_job(sim)


def by_job(sim) -> dict[str, dict[str, float | None]]:
    """Each job's (replica slots' too: jobs.parquet has the trace's only) submission, first
    admission, start and finish, None for never."""
    times = {"submit_s": sim.w.job_submit, "admitted_s": sim.job_admitted, "start_s": sim.job_started,
             "finish_s": sim.job_finished}
    return {jid: {k: None if np.isnan(v[j]) else float(v[j]) for k, v in times.items()}
            for j, jid in enumerate(sim.w.job_id.tolist())}


@pytest.mark.parametrize("behind_kueue", [True, False])
def test_a_replica_waits_for_quota_a_finishing_batch_job_frees(behind_kueue):
    """Quota: 2 GPUs. At 0 the batch job (1 GPU, 600 s) and replica svc/0 are admitted (2 of
    2 GPUs); svc/0 is ready at 120. Demand jumps from 0 to 120 at 300: ceil(120 / 70) = 2, so
    svc/1 is created at 300 and waits, not admitted (2 of 2 GPUs held), until the batch job
    finishes at 600 and gives its GPU back: admitted and running at 600, ready at 720.
      unserved = (120 - 100) x (720 - 300) = 8,400 units, one episode of 420 s;
      demand = 120 x 900 = 108,000 units;
      warm idle = 1 x 180 + 0 x 420 + (2 - 1.2) x 480 = 564 GPU-s.
    Without Kueue (the control) svc/1 runs at 300, ready at 420: 20 x 120 = 2,400 units
    unserved, an episode of 120 s, warm idle 1 x 180 + (2 - 1.2) x 780 = 804 GPU-s."""
    sim, _, changes, tot, jobs = replay([job("batch", "q", 1, 0.0, 600.0)], [(0.0, 0.0), (300.0, 120.0)],
                                       gpu=2, horizon_s=1200.0, behind_kueue=behind_kueue)
    ready = 720.0 if behind_kueue else 420.0
    assert changes == [(0.0, 1), (300.0, 1)]
    assert jobs["batch"]["admitted_s"] == 0.0 and jobs["batch"]["finish_s"] == 600.0
    assert jobs["svc/1"]["submit_s"] == 300.0 and jobs["svc/1"]["admitted_s"] == ready - 120.0
    assert sim.replicasets.ready_at[sim.replicasets.svc.slots(0)[:2]].tolist() == [120.0, ready]
    assert tot["demand_units"] == 108_000.0
    assert tot["demand_unserved_units"] == 20.0 * (ready - 300.0)
    assert tot["capacity_episodes"] == 1 and tot["time_to_capacity_p99_s"] == ready - 300.0
    assert tot["cold_starts"] == 2
    assert tot["warm_idle_accel_hours"] == pytest.approx((180.0 + 0.8 * (1200.0 - ready)) / 3600.0, abs=1e-12)


def test_a_deleted_replica_gives_its_quota_back_and_loses_nothing():
    """Quota: 2 GPUs; scale-down window 0 s. Demand 120 from 0: the floor svc/0 and, at the
    sync at 0, svc/1 (ceil(120 / 70) = 2) take the 2 GPUs; both ready at 120 (unserved 120 x 120
    = 14,400 units). The batch job (1 GPU, 600 s) arrives at 100 and waits. Demand 50 from 300:
    ceil(50 / 70) = 1, svc/1 is deleted (two alike: the higher slot first); its quota comes
    back and the batch job is admitted at once, at 300, and runs to 900. No preemption, no
    work lost. Demand 120 again from 1200: svc/1 is created anew and admitted at once (svc/0
    holds 1 of 2 GPUs): admitted at 1200, a wait of 0 s, not 1200 s before its creation, and
    ready at 1320 (unserved (120 - 100) x 120 = 2,400 units more: 16,800)."""
    hpa = HorizontalPodAutoscaler(scale_down_stabilization_s=0.0)
    sim, loop, changes, tot, jobs = replay([job("batch", "q", 1, 100.0, 600.0)],
                                           [(0.0, 120.0), (300.0, 50.0), (1200.0, 120.0)], gpu=2,
                                           horizon_s=1500.0, hpa=hpa)
    assert changes == [(0.0, 1), (0.0, 1), (300.0, -1), (1200.0, 1)]
    assert jobs["batch"]["admitted_s"] == jobs["batch"]["start_s"] == 300.0 and jobs["batch"]["finish_s"] == 900.0
    assert jobs["svc/1"]["submit_s"] == jobs["svc/1"]["admitted_s"] == 1200.0
    assert sim.acct.job_preemptions.sum() == 0 and not sim.may_preempt
    assert tot["replicas_deleted"] == 1 and tot["cold_starts"] == 3
    assert tot["demand_unserved_units"] == 16_800.0
    assert loop.inner.adm.usage[0, 0, 0] == 2000  # svc/0 and svc/1, in GPU milli; the batch job is done


def test_a_replica_deleted_while_queued_leaves_its_queue():
    """Quota: 2 GPUs; scale-down window 0 s. The batch job (2 GPUs, 900 s, t = 0) is ahead of
    the floor svc/0 (same priority and time; the lower job first) and takes both GPUs. Demand
    120 from 0: svc/1 is created at 0; both replicas wait. Demand 50 from 300: svc/1 is deleted
    (unscheduled alike: the higher slot first) and leaves Kueue's queue. The batch job ends at
    900: only svc/0 is admitted (1 of 2 GPUs), ready at 1020; the dormant svc/1 is not."""
    hpa = HorizontalPodAutoscaler(scale_down_stabilization_s=0.0)
    sim, loop, changes, tot, jobs = replay([job("batch", "q", 2, 0.0, 900.0)], [(0.0, 120.0), (300.0, 50.0)],
                                           gpu=2, horizon_s=1500.0, hpa=hpa)
    assert changes == [(0.0, 1), (0.0, 1), (300.0, -1)]
    assert jobs["svc/0"]["admitted_s"] == 900.0 and jobs["svc/1"]["admitted_s"] is None
    assert sim.replicasets.ready_at[sim.replicasets.svc.slots(0)[0]] == 1020.0
    assert (sim.pod_status[sim.w.pods_of(sim.replicasets.svc.slots(0)[1:])] == NOT_ARRIVED).all()
    adm = loop.inner.adm
    assert adm.usage[0, 0, 0] == 1000 and not adm.pending[0] and not adm.inadmissible[0]


def test_a_services_queue_without_a_local_queue_is_refused_in_the_services_file(tmp_path):
    """A service whose `queue` no LocalQueue names: refused before the run, naming the
    services file, the column, the service's row and the rule (as a pod's unknown queue is)."""
    from harness.services.trace import ServicesMeta, write_services
    from harness.trace import TraceMeta, write_trace

    write_trace(sc.trace([{"queue": "serving-prod"}]), tmp_path / "t.parquet", TraceMeta("t", "CC0-1.0", "start"))
    services = sc.services([{**SVC, "queue": "serving-prod"}, {**SVC, "service": "lost", "queue": "nowhere"}])
    write_services(services, sc.demand({"svc": [(0.0, 1.0)], "lost": [(0.0, 1.0)]}), tmp_path / "t",
                   ServicesMeta("test", "CC0-1.0", "start", "tokens/s"))
    cfg = compose("config", [f"trace.path={tmp_path / 't.parquet'}", f"+trace.services={tmp_path / 't.services.parquet'}",
                             f"+trace.demand={tmp_path / 't.demand.parquet'}", "replicas=hpa", "loop=separate_kueue"])
    with pytest.raises(TraceError, match=r"t\.services\.parquet, column 'queue', row 1: service 'lost': queue "
                                         r"'nowhere' has no LocalQueue in cluster 'default'"):
        build(cfg)


@pytest.mark.parametrize(("drop_s", "evicted"), [(330.0, [1, 1]), (315.0, [1, 0])])
def test_a_replica_deleted_in_its_requeue_backoff_stays_deleted(drop_s, evicted):
    """waitForPodsReady (timeout 300 s, backoff 60 s x 2^(n-1)), block_admission off. Two batch
    jobs of 8 GPUs (priority 10, ahead of the service's 0) fill both nodes for an hour, so no
    replica can start. Quota 32 GPUs: svc/0 (t = 0) and svc/1 (demand 120 from 15: ceil(120 /
    70) = 2) are admitted at once; their PodsReady timeouts fire at 300 and 315, and an evicted
    one is queued again 60 s later. Demand 0 from `drop_s` (window 0 s): svc/1, the newer, is
    deleted then: at 330, in its backoff (its requeue at 375 must not bring it back); at 315,
    at the instant of its timeout (it is deleted, not evicted). Either way it was admitted once
    and then neither queues nor holds quota: Kueue finishes a deleted pod's workload."""
    hpa = HorizontalPodAutoscaler(scale_down_stabilization_s=0.0)
    pods = [{**job(f"b{i}", "q", 8, 0.0, 3600.0), "priority": 10} for i in (1, 2)]
    sim = sc.service_sim(pods, [SVC], {"svc": [(0.0, 0.0), (15.0, 120.0), (drop_s, 0.0)]},
                         static_cluster(kueue(queue("q", 32))), 600.0)
    loop = ReplicaLoop(KueueLoop(sc.separate(), wait_for_pods_ready=True, block_admission=False), hpa)
    sim.run(loop)
    slots = sim.replicasets.svc.slots(0)[:2]  # svc/0, svc/1: the two ever created
    assert sim.replicasets.created[slots].tolist() == [True, False]
    adm = loop.inner.adm
    assert sim.job_admissions[slots[1]] == 1 and adm.flavor[slots[1]] == -1
    assert all(key[2] != slots[1] for key in adm.pending[0] + adm.inadmissible[0])
    assert loop.inner.evictions[slots].tolist() == evicted
    assert adm.usage[0, 0, 0] == 17_000  # GPU milli: the batch jobs' 16 and svc/0's, admitted again at 360


def run_quiet(quiet: bool):
    """Two services and a batch job behind Kueue on an autoscaling cluster (quota 12 GPUs), KEDA
    (scale to and from zero); quiet ticks in bulk, or each stepped (`quiet` False)."""
    windows = {"svc": [(0.0, 50.0), (700.0, 400.0), (2500.0, 0.0), (6000.0, 150.0)],
               "big": [(0.0, 0.0), (1300.0, 900.0), (4000.0, 20.0)]}
    big = {**SVC, "service": "big", "gpu_count": 2, "min_replicas": 0, "capacity_per_replica": 300.0}
    cl = static_cluster(kueue(queue("q", 12)), autoscaling=True)
    sim = sc.service_sim([job("batch", "q", 4, 100.0, 1800.0)], [SVC, big], windows, cl, 3 * 3600.0 + 5.5,
                         timeline_interval_s=45.0)
    loop = ReplicaLoop(KueueLoop(sc.separate()), KedaScaledObject())
    if not quiet:
        loop.inner.inner.idle_ticks = lambda start, before: np.zeros(0)  # type: ignore[method-assign]
    sim.run(loop)
    acct = sim.replicasets.acct
    return (summary_row(sim, jobs_frame(sim), nodes_frame(sim), {}), jobs_frame(sim), sim.acct.timeline.frame(),
            acct.frame(), acct.timeline())


def test_behind_kueue_quiet_ticks_in_bulk_give_exactly_the_results_of_stepping_each():
    """The replica autoscaler outside, Kueue inside: the quiet stretches the innermost loop
    hands over stop at the next sync, so bulk and stepped replays agree bit for bit."""
    bulk, stepped = run_quiet(quiet=True), run_quiet(quiet=False)
    assert bulk[3]["replicas_created"].sum() > 2  # the services did scale
    for a, b in zip(bulk, stepped, strict=True):
        assert a.columns == b.columns and bits(a) == bits(b)
