"""Speed of DRA's structured allocator over a fleet: a pod's claims answered on 10,000 nodes at
once (`harness.dra.allocator.allocate`), half of them with devices already taken, for the
claims today's columns make (harness/dra/translate.py): a whole-GPU pair in one NUMA node with
its NICs, a share of one GPU, eight GPUs in one NVLink domain and a MIG partition (the node
type is partitionable: its GPUs publish counters and 96 partition devices beside them). The
compiled search is warmed in setup."""

from __future__ import annotations

import numpy as np

NODES = 10_000
SHAPES = {  # (gpus, milli, profile_bit, model_mask, nvlink, numa, nic)
    "pair_numa_nic": (2, 1000, 0, 0, False, True, True),
    "share": (1, 300, 0, 0, False, False, False),
    "eight_nvlink": (8, 1000, 0, 0, True, False, False),
    "partition_1g": (1, 143, 1, 0, False, False, False),  # bit 1: 1g.10gb, first of the sorted profiles
}


class Allocate:
    params = list(SHAPES)
    param_names = ["claim"]
    number = 1
    repeat = (3, 10, 20.0)

    def setup(self, claim):
        from hydra.utils import instantiate

        from harness.config import compose
        from harness.dra import allocator as al
        from harness.dra import translate as tr

        cluster = instantiate(compose("config", []).cluster, _convert_="all")
        nt = next(t for t in cluster.node_types if t.nic_per_gpu)
        self.al, self.devices = al, al.NodeDevices.of(tr.slices_of(nt, cluster.partition_profiles))
        classes = tr.device_classes()
        names = cluster.models, cluster.profiles
        self.cc = al.compile_claims((tr.claim_of(*names, *SHAPES[claim]),), self.devices, classes)
        self.state = al.DeviceState.fresh(self.devices, NODES)
        one = al.compile_claims((tr.claim_of(*names, 1, 1000, 0, 0, False, False, False),), self.devices, classes)
        busy = np.arange(0, NODES, 2)
        for n, a in zip(busy.tolist(), al.allocate(one, self.devices, self.state, busy)[1], strict=True):
            assert a is not None
            al.commit(one, self.devices, self.state, n, a)
        self.rows = np.arange(NODES)
        al.allocate(self.cc, self.devices, self.state, self.rows[:2])  # compile

    def time_allocate(self, claim):
        self.al.allocate(self.cc, self.devices, self.state, self.rows)
