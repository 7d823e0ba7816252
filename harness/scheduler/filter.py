"""Filter: which nodes could take a pod now, as one boolean mask over node slots.

kube-scheduler runs each Filter plugin per node; here a plugin answers for every node at
once (or for the few slots `at`), so a cycle never loops over nodes in Python.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from harness.filters import feasible
from harness.state import ClusterState
from harness.workload import Workload


class Filter(Protocol):
    def filter(self, state: ClusterState, w: Workload, pod: int, usable: np.ndarray,
               at: np.ndarray | int | None = None) -> np.ndarray:
        """Mask of the `usable` nodes (or of the slots `at`) that can take `pod`."""
        ...


class NodeResourcesFit:
    """Room for the pod: CPU, memory, GPU model, shares per device, partition profile and
    topology claims (NVLink, NUMA, NIC per GPU), as `harness.filters.feasible` checks them."""

    def filter(self, state, w, pod, usable, at=None):
        return feasible(state, w, pod, usable, at=at)
