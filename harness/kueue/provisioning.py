"""Kueue's ProvisioningRequest admission check (kueue pkg/controller/admissionchecks/provisioning).

With the check on its ClusterQueues, a workload whose quota Kueue reserved is not yet
admitted: Kueue creates a ProvisioningRequest for it (one per workload, gang or not, of the
ProvisioningRequestConfig's class) and admits it, its pods reaching the scheduler, once the
request is Provisioned. Cluster Autoscaler serves these requests instead of the pending gangs
(harness/autoscalers/provisioning_request.py: one per scan, capacity booked in its own snapshot) and
reports each outcome back here, at the instant it happens, as Kueue's controller watches them.

Outcomes, as upstream's controller maps them to the check's state:
  Provisioned     the check is Ready: the workload is admitted.
  not provisioned Cluster Autoscaler retries the request itself (its own backoff); the
                  workload keeps its quota, the check stays Pending. With the config's
                  `noRetry` parameter (check-capacity only, as upstream) the request is
                  Failed instead:
  Failed          attempt n <= backoffLimitCount: the check is Retry: the workload gives its
                  quota back and is queued again, ordered by that instant, after the
                  retryStrategy's backoff base * 2^(c-1) capped at backoffMaxSeconds, c its
                  requeue count (upstream's requeueState.count, shared with
                  waitForPodsReady; upstream adds a tiny jitter, not drawn); its next
                  reservation creates request n+1. Past the limit the check is Rejected: the
                  workload is deactivated, never admitted.
  BookingExpired  only ever after admission here (Kueue admits at the instant the request is
                  Provisioned): ignored, as upstream.
CapacityRevoked is not modelled: our Cluster Autoscaler never takes back what it Provisioned (a
booked node that never comes up leaves its request Provisioned, harness/autoscalers/provisioning_request.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from harness.autoscalers.provisioning_request import BEST_EFFORT_ATOMIC, CHECK_CAPACITY, ProvisioningRequests
from harness.errors import ConfigError
from harness.settings import check, duration, flag, integer, one_of
from harness.view import WithAutoscaler

if TYPE_CHECKING:
    import numpy as np

    from harness.view import Gate, Loop, SimulationView


class AdmissionLayer(Protocol):
    """What the check drives of the Kueue layer it belongs to (harness/kueue/loop.py's
    `KueueLoop`, which builds the check and so is named here by what the check uses)."""

    name: str
    gate: Gate
    #: per job: evictions so far (the requeue backoff doubles with them), admissions so far
    evictions: np.ndarray
    epoch: np.ndarray

    def admit(self, j: int, now: float) -> None:
        """Job j's checks passed: it reaches the scheduler."""
        ...
    def release(self, j: int) -> None:
        """Job j gives its quota back (evicted, or its admission check failed)."""
        ...
    def requeue(self, j: int, evicted_at: float, epoch: int) -> None:
        """Job j's backoff is over: it queues again, unless it was deleted meanwhile (epoch)."""
        ...


@runtime_checkable
class ServesRequests(Protocol):
    """An autoscaler that may serve ProvisioningRequests (the Cluster-Autoscaler-like one)."""

    provisioning_request: bool  # it does (loop.autoscaler.provisioning_request)
    provreq: ProvisioningRequests


class ProvisioningCheck:
    """The check as a ProvisioningRequestConfig sets it: `provisioning_class`, `no_retry`
    (its `noRetry` parameter) and its retryStrategy (upstream's defaults: 3 retries, 60 s
    doubling to 1800 s)."""

    SETTINGS = {
        "provisioning_class": one_of((BEST_EFFORT_ATOMIC, CHECK_CAPACITY),
                                     "the ProvisioningRequestConfig's class: scale up for the whole workload "
                                     "at once, or only check the capacity that exists"),
        "no_retry": flag("the config's noRetry parameter: a check-capacity request that does not fit is "
                         "Failed at once instead of retried by the autoscaler"),
        "backoff_limit_count": integer("retries (requests Failed) before the workload is deactivated "
                                       "(upstream: 3)", ge=0),
        "backoff_base_s": duration("seconds before a workload whose request Failed is queued again, doubled "
                                   "at each requeue (upstream: 60)"),
        "backoff_max_s": duration("the longest such backoff (upstream: 1800)"),
    }

    def __init__(self, provisioning_class: str = BEST_EFFORT_ATOMIC, no_retry: bool = False,
                 backoff_limit_count: int = 3, backoff_base_s: float = 60.0, backoff_max_s: float = 1800.0):
        check(self, "loop.admission_check",
              provisioning_class=provisioning_class, no_retry=no_retry, backoff_limit_count=backoff_limit_count,
              backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s)
        if no_retry and provisioning_class != CHECK_CAPACITY:
            raise ConfigError("loop.admission_check.no_retry",
                              f"Cluster Autoscaler reads noRetry for the {CHECK_CAPACITY} class only, "
                              f"not {provisioning_class}")
        self.provisioning_class, self.no_retry = provisioning_class, bool(no_retry)
        self.backoff_limit_count = int(backoff_limit_count)
        self.backoff_base_s, self.backoff_max_s = float(backoff_base_s), float(backoff_max_s)

    def attach(self, layer: AdmissionLayer, inner: Loop, sim: SimulationView) -> None:
        """Hand the requests to the wrapped loop's Cluster Autoscaler, which must serve them."""
        autoscaler = inner.autoscaler if isinstance(inner, WithAutoscaler) else None
        if not isinstance(autoscaler, ServesRequests) or not autoscaler.provisioning_request:
            raise ConfigError("loop.admission_check", f"the ProvisioningRequest check needs an autoscaler that serves "
                                                      f"ProvisioningRequests: loop '{layer.name}' wraps "
                                                      f"{type(inner).__name__} without "
                                                      "loop.inner.autoscaler.provisioning_request: true")
        if not sim.cluster.autoscaling:
            raise ConfigError("loop.admission_check", f"the ProvisioningRequest check needs an autoscaling cluster: "
                                                      f"no Cluster Autoscaler serves requests on '{sim.cluster.name}'")
        self.layer, self.sim = layer, sim
        n = sim.w.n_jobs
        self.attempts = np.zeros(n, np.int64)  # requests created for each workload
        self.reserved_at = np.full(n, np.nan)  # when its quota was last reserved
        self.rejected = np.zeros(n, bool)  # deactivated: the check was Rejected
        self.waiting: list[int] = []  # quota reserved, check Pending: their requests, in creation order
        self.version = 0  # bumps whenever a request is created or settled
        autoscaler.provreq.serve(self)

    # ---- Kueue's side -------------------------------------------------------------------
    def reserve(self, j: int, now: float) -> None:
        """Quota is reserved for workload j: its next ProvisioningRequest is created."""
        self.attempts[j] += 1
        self.reserved_at[j] = now
        self.layer.gate.reserve(j)
        self.waiting.append(j)
        self.version += 1

    # ---- the autoscaler's side (ProvisioningRequests.serve) --------------------------------
    def requests(self) -> list[tuple[int, np.ndarray]]:
        """The open requests, oldest first: (workload, its pods)."""
        return [(j, self.sim.unbound_pods(j)) for j in self.waiting]

    def jobs(self) -> np.ndarray:
        """The workloads whose request is open."""
        return np.array(self.waiting, np.int64)

    def provisioned(self, j: int, now: float) -> None:
        """The check is Ready: workload j is admitted."""
        self._settle(j)
        self.layer.admit(j, now)

    def failed(self, j: int, now: float) -> None:
        """The request Failed: Retry (quota back, requeued after the backoff) or Rejected."""
        self._settle(j)
        self.layer.release(j)
        if self.attempts[j] > self.backoff_limit_count:
            self.rejected[j] = True  # deactivated
            return
        self.layer.evictions[j] += 1
        delay = min(self.backoff_base_s * 2.0 ** (self.layer.evictions[j] - 1), self.backoff_max_s)
        self.sim.at(now + delay, self.layer.requeue, j, now, int(self.layer.epoch[j]))

    def withdraw(self, j: int) -> None:
        """Workload j lost its quota to a preemption: its request, if still open, is dropped."""
        if j in self.waiting:
            self._settle(j)

    def _settle(self, j: int) -> None:
        self.waiting.remove(j)
        self.version += 1
