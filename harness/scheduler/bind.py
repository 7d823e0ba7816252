"""Bind: put a pod on the node its cycle chose, as kube-scheduler's DefaultBinder (here the
simulation's `bind`: the pod holds its devices from now on)."""

from __future__ import annotations

import numpy as np

from harness.scheduler.plugin import Plugin


class DefaultBinder(Plugin):
    def bind(self, p: int, n: int, gpu_idx: np.ndarray, on_state: bool = False) -> None:
        """Bind pod p to node n on these GPUs; `on_state`: the state holds it already (a kept
        trial)."""
        self.sim.bind(p, n, gpu_idx, on_state=on_state)
