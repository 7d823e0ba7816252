"""Preemption's effect on pods and jobs: who goes back to pending, and the work lost.

The scheduler's PostFilter (harness/scheduler/preemption.py), Kueue's preemption, Karpenter's
consolidation and a NoExecute device taint (harness/taint_eviction.py) evict through
`Simulation.evict`; the pods leave their nodes by the simulation's one release path
(`unbind_many`), deleted: their jobs wait out their pod-failure backoff (harness/job_backoff.py)
unless suspended.
"""

from __future__ import annotations

import numpy as np

from harness.status import BOUND, DONE, NOT_ARRIVED, PENDING, RUNNING


def evict(sim, pods: np.ndarray, by_taint: bool = False, deleted: bool = True) -> None:
    """Preempt these bound or running pods: each goes back to pending and restarts from
    scratch. A gang goes whole: every member that has a node or finished goes back, and it
    must gather its quorum again (a job with no pod left on a node starts again: its
    `job_started` becomes its next start). The accelerator work the running (and, in a gang,
    the finished) pods of the trace did is lost, and each job touched counts one preemption
    (`by_taint`: one eviction by a device taint, counted apart). `deleted`: the pods that had a
    node are failures for their Job controller (False: its job was suspended)."""
    w = sim.w
    assert np.isin(sim.pod_status[pods], (BOUND, RUNNING)).all(), "only pods on a node are evicted"
    jobs = np.unique(w.job[pods])
    gang = w.job_min_member[jobs] > 1
    members = w.pods_of(jobs[gang]) if gang.any() else pods[:0]
    singles = pods[~sim.ledger.in_gang[pods]]
    on_node = (sim.pod_status[members] != PENDING) & (sim.pod_status[members] != NOT_ARRIVED)  # or done
    out = np.union1d(members[on_node], singles)
    # a placeholder did no work, and a replica's serving is not lost work (its unserved
    # demand while it cold-starts again is the service metrics'): neither loses any
    work = out[~sim.placeholder[out] & (w.job_service[w.job[out]] < 0)]
    running, done = work[sim.pod_status[work] == RUNNING], work[sim.pod_status[work] == DONE]
    ran = np.r_[sim.now - sim.pod_start[running], sim.pod_end[done] - sim.pod_start[done]]
    gpu_milli = w.gpus[np.r_[running, done]].astype(np.float64) * w.milli[np.r_[running, done]]
    pause = w.job_placeholder[jobs]
    (sim.acct.evicted_by_taint if by_taint else sim.acct.preempted)(jobs[~pause], float(ran @ gpu_milli))
    sim.acct.placeholder_preemptions += int(pause.sum())
    sim.unbind_many(out[sim.pod_status[out] != DONE], deleted)
    if len(done):  # finished members of a preempted gang run again (they left their nodes)
        sim.pod_status[done] = PENDING
        sim.pod_node[done] = -1
        sim.pod_end[done] = sim.pod_start[done] = np.nan
        sim.pod_epoch[done] += 1
        np.subtract.at(sim.job_done, w.job[done], 1)
        np.subtract.at(sim.job_placed, w.job[done], 1)
        np.subtract.at(sim.job_ready_bound, w.job[done], 1)  # it ran: it was bound on a ready node
        for j in np.unique(w.job[done]).tolist():
            if sim.job_placed[j] == 0:
                sim.job_anchor[j] = -1
            sim.queue.push(j)
        sim.acct.set_reasons(done, sim.pending_reasons(w.job[done]))
    sim.job_started[jobs[sim.job_placed[jobs] == 0]] = np.nan  # none of it runs: it starts again
