"""The first pending pods of each of a few jobs, in one compiled pass.

A run of futile gang attempts (harness/scheduler/framework.py, `Scheduler._futile_run`) binds
and releases the first few pending pods of each gang: listing every pod of the gangs, then
their pending ones and counting those per gang, took a dozen numpy calls per run.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def first_pending(pods_by_job: np.ndarray, job_bounds: np.ndarray, pod_status: np.ndarray, pending_code: int,
                  jobs: np.ndarray, heads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(how many pods of each job are pending, the first heads[k] pending pods of job jobs[k]
    job after job, each in `pods_by_job` order: fewer for a job with fewer pending)."""
    pending = np.zeros(len(jobs), np.int64)
    out = np.empty(heads.sum(), np.int64)
    taken = 0
    for k in range(len(jobs)):
        j = jobs[k]
        for i in range(job_bounds[j], job_bounds[j + 1]):
            p = pods_by_job[i]
            if pod_status[p] == pending_code:
                if pending[k] < heads[k]:
                    out[taken] = p
                    taken += 1
                pending[k] += 1
    return pending, out[:taken]
