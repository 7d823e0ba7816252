"""What no loop may read of what the simulation hands it: `Sealed`, a field no loop may read at
all (any use raises), and `Unarrived`, the audit's seal on the pods that have not arrived yet."""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from harness.errors import LoopbenchError


class Sealed:
    """Stands in for a secret field (a pod's duration, a service's demand): any use raises."""

    def __init__(self, what: str):
        self._what = what

    def _refuse(self, *_) -> NoReturn:
        raise LoopbenchError(f"a loop may not read {self._what} (no loop knows what a real controller could not)")

    __getitem__ = __array__ = __len__ = __iter__ = _refuse


#: fields of a pod, then of a job, that tell what it will ask for or when it comes
POD_FIELDS = ("pod_id", "submit", "cpu", "mem", "gpus", "milli", "profile_bit", "model_mask", "nvlink", "numa", "nic",
              "shape", "never_fits", "claim", "gpu_milli_total")
JOB_FIELDS = ("job_id", "job_submit", "job_min_member", "job_priority", "job_locality", "job_queue")
SEALED_NAME = "<not arrived>"


def poison(values: np.ndarray) -> np.ndarray:
    """What a sealed row reads: NaN, the largest integer (an index out of range, a request no
    node holds), the flag negated, a name no pod has: a decision that uses it changes or raises."""
    kind = values.dtype.kind
    if kind == "f":
        return np.full_like(values, np.nan)
    if kind == "b":
        return ~values
    if kind in "iu":
        return np.full_like(values, np.iinfo(values.dtype).max)
    return np.full_like(values, SEALED_NAME)


class Unarrived:
    """The audit's seal on the future, cheap enough to replay whole runs under: in the workload
    loops read, every field of a pod that has not arrived (and of its job, until its first pod
    arrives) holds `poison`, in place, and `reveal` puts a pod's true row back as it arrives. A
    loop that reads tomorrow's pods then decides differently from the same replay unsealed, or
    raises. The pods `public` (a service's replica slots, a buffer's pause pods: their shapes
    are configured objects) stay as they are."""

    def __init__(self, w: Any, public: np.ndarray):  # a harness.workload.Workload (a layer above)
        w.gpu_milli_total  # noqa: B018 (cached now, from the true rows, then sealed with them)
        self.w, self.hidden = w, ~public
        self.hidden_jobs = np.bincount(w.job[self.hidden], minlength=w.n_jobs) > 0
        self.truth: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # field: (its array loops read, the truth)
        for names, rows in ((POD_FIELDS, self.hidden), (JOB_FIELDS, self.hidden_jobs)):
            for name in names:
                values = getattr(w, name)
                if values is not None:
                    self.truth[name] = (values, values.copy())
                    values[rows] = poison(values[rows])

    def reveal(self, pods: np.ndarray) -> None:
        """These pods arrive: their rows, and their jobs', read true from now on."""
        pods = pods[self.hidden[pods]]
        if not len(pods):
            return
        jobs = np.unique(self.w.job[pods])
        jobs = jobs[self.hidden_jobs[jobs]]
        for name, (values, truth) in self.truth.items():
            rows = jobs if name.startswith("job_") else pods
            values[rows] = truth[rows]
        self.hidden[pods] = False
        self.hidden_jobs[jobs] = False
