"""Score plugins: each maps candidate nodes to scores in [0, 100], higher is better.

A plugin is selected and weighted in config with Hydra `_target_`; the scheduler adds the
weighted scores and takes the best node, ties broken by a seeded node order. A plugin may
also choose which GPUs of the chosen node a pod takes (`pick_devices`); by default the
node's first whole free GPUs, or the best-fitting GPU for a share.
"""

from __future__ import annotations

import numpy as np

from harness.state import ClusterState
from harness.workload import Workload


class ScorePlugin:
    """Base class: `score` returns one float per candidate node index in `nodes`."""

    def __init__(self, weight: float = 1.0):
        self.weight = float(weight)

    def score(self, state: ClusterState, w: Workload, pod: int, nodes: np.ndarray,
              rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def pick_devices(self, state: ClusterState, w: Workload, pod: int, node: int) -> np.ndarray:
        return state.pick_devices(node, int(w.gpus[pod]), int(w.milli[pod]), bool(w.nvlink[pod]), bool(w.numa[pod]))


def _free_fractions(state: ClusterState, w: Workload, pod: int, nodes: np.ndarray) -> np.ndarray:
    """Mean over CPU, memory and GPU of the fraction left free after placing the pod."""
    cpu = (state.cpu_free[nodes] - w.cpu[pod]) / state.cpu_cap[nodes]
    mem = (state.mem_free[nodes] - w.mem[pod]) / state.mem_cap[nodes]
    gcap = state.gpu_cap[nodes].astype(np.float64) * 1000.0
    gfree = state.gpu_free[nodes].sum(axis=1) - w.gpus[pod] * w.milli[pod]
    gpu = np.divide(gfree, gcap, out=np.zeros(len(nodes)), where=gcap > 0)
    has_gpu = gcap > 0
    return np.where(has_gpu, (cpu + mem + gpu) / 3.0, (cpu + mem) / 2.0)


class LeastAllocated(ScorePlugin):
    """kube-scheduler NodeResourcesFit LeastAllocated: spread, prefer the emptiest node."""

    def score(self, state, w, pod, nodes, rng):
        return 100.0 * _free_fractions(state, w, pod, nodes)


class MostAllocated(ScorePlugin):
    """kube-scheduler NodeResourcesFit MostAllocated: bin-pack, prefer the fullest node."""

    def score(self, state, w, pod, nodes, rng):
        return 100.0 * (1.0 - _free_fractions(state, w, pod, nodes))
