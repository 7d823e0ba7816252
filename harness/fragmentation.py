"""GPU fragmentation as the FGD paper (ATC'23) defines it, vectorized over nodes and shapes.

The target workload is the set of most frequent pod shapes covering 95% of pods, each with
its popularity p_m. For node n and shape m, with G_n the idle GPU milli of n:
F_n(m) = G_n if m needs no GPU, m's model is not allowed on n, n lacks the CPU, or n lacks
`gpus` GPUs each with >= m's milli free; otherwise the idle milli on the GPUs whose free milli
is below m's milli. F_n = sum_m p_m F_n(m); a node without GPUs contributes 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from harness.workload import unique_rows

COVERAGE = 0.95


@dataclass(frozen=True)
class TargetWorkload:
    """Typical pod shapes (columns of arrays) and their renormalised popularity."""

    cpu: np.ndarray  # int64 milli
    gpus: np.ndarray  # int32
    milli: np.ndarray  # int32 per GPU
    model_mask: np.ndarray  # int64 allowed-model bits, 0 = any
    popularity: np.ndarray  # float64, sums to 1

    @classmethod
    def from_pods(cls, cpu, gpus, milli, model_mask, coverage: float = COVERAGE) -> TargetWorkload:
        """Count shapes (cpu, milli, gpus, models), keep the most frequent until they cover
        `coverage` of pods, and renormalise their popularity over the kept count."""
        key = np.stack([np.asarray(cpu, np.int64), np.asarray(milli, np.int64),
                        np.asarray(gpus, np.int64), np.asarray(model_mask, np.int64)], axis=1)
        shapes, _, counts = unique_rows(key)
        order = np.lexsort((np.arange(len(counts)), -counts))  # count desc, then key order
        shapes, counts = shapes[order], counts[order]
        covered = np.cumsum(counts) / counts.sum()
        keep = int(np.searchsorted(covered, coverage - 1e-12) + 1)
        shapes, counts = shapes[:keep], counts[:keep]
        return cls(cpu=np.ascontiguousarray(shapes[:, 0]), milli=shapes[:, 1].astype(np.int32),
                   gpus=shapes[:, 2].astype(np.int32), model_mask=np.ascontiguousarray(shapes[:, 3]),
                   popularity=counts / counts.sum())

    def __len__(self) -> int:
        return len(self.popularity)


def node_fragmentation(gpu_free: np.ndarray, gpu_cap: np.ndarray, cpu_free: np.ndarray,
                       model_bit: np.ndarray, target: TargetWorkload) -> np.ndarray:
    """F_n in GPU milli for each row of `gpu_free` (nodes x GPUs; absent GPUs hold 0)."""
    if len(target) == 0:
        return np.zeros(len(gpu_free))
    # one dtype and layout per argument, so the kernel compiles once (GPU milli fits in int32)
    per_shape = fragmentation_by_shape(np.ascontiguousarray(gpu_free, np.int32), np.asarray(cpu_free, np.int64),
                                       np.ascontiguousarray(model_bit, np.int64), target.cpu, target.gpus,
                                       target.milli, target.model_mask)
    f = per_shape @ target.popularity  # numpy's product: its summation order, as before
    return np.where(gpu_cap > 0, f, 0.0)


@njit(cache=True)
def fragmentation_by_shape(gpu_free: np.ndarray, cpu_free: np.ndarray, model_bit: np.ndarray, cpu: np.ndarray,
                           gpus: np.ndarray, milli: np.ndarray, model_mask: np.ndarray) -> np.ndarray:
    """F_n(m) for each node n (row of `gpu_free`) and target shape m, one GPU at a time (numpy
    built nodes x shapes x GPUs arrays): the idle milli on n's GPUs whose free milli is below m's
    milli if m fits n (it needs GPUs, its model is allowed, the CPU is there and enough GPUs each
    have its milli free), else all of n's idle milli."""
    out = np.empty((gpu_free.shape[0], len(milli)), np.int64)
    for n in range(gpu_free.shape[0]):
        idle = np.int64(0)
        for g in range(gpu_free.shape[1]):
            idle += gpu_free[n, g]
        for m in range(len(milli)):
            fit = 0
            leftover = np.int64(0)
            for g in range(gpu_free.shape[1]):
                if gpu_free[n, g] >= milli[m]:
                    fit += 1
                else:
                    leftover += gpu_free[n, g]
            model_ok = model_mask[m] == 0 or (model_mask[m] & model_bit[n]) != 0
            can = gpus[m] > 0 and model_ok and cpu_free[n] >= cpu[m] and fit >= gpus[m]
            out[n, m] = leftover if can else idle
    return out
