"""What one machine looks like: CPUs, memory, GPUs, how the GPUs split into NVLink and NUMA
domains, whether each GPU has a NIC on its PCIe switch, which MIG-like partition profiles it
offers. Pools (harness/cluster.py) place node types in zones; DRA (harness/dra/translate.py)
publishes a node type's devices as ResourceSlices."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NodeType:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int = 0
    gpu_model: str = ""
    nvlink_domains: int = 1
    numa_domains: int = 1
    nic_per_gpu: bool = False
    partition_profiles: tuple[str, ...] = ()

    def gpu_domains(self, n_domains: int) -> np.ndarray:
        """Domain index of each GPU when the GPUs split evenly into `n_domains` domains."""
        if self.gpus == 0:
            return np.zeros(0, np.int32)
        return (np.arange(self.gpus) * n_domains // self.gpus).astype(np.int32)
