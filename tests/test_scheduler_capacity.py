"""Exact per-node counts of identical pods, used to prune racks before a gang's trial placement."""

from __future__ import annotations

import numpy as np

from harness.filters import fits_count, groups_that_fit
from harness.sim import Simulation
from harness.workload import compile_workload
from tests import scenarios as sc


def test_fits_count_and_rack_pruning():
    cl = sc.cluster([sc.node_type("gpu8")], [sc.pool("a", "gpu8", nodes_per_rack=2, min_size=4)])
    table = sc.trace([{"gpu_count": 4}, {"gpu_milli": 300}, {"gpu_count": 0, "gpu_milli": 0, "cpu_milli": 30000}]
                     + [{"job_id": "g", "min_member": 3, "gpu_count": 8, "gang_locality": "rack"}] * 3)
    sim = Simulation(compile_workload(table, cl), cl, seed=0, horizon_s=10.0)
    st, w = sim.state, sim.w
    ready = st.ready
    assert fits_count(st, w, 0, ready).tolist() == [2, 2, 2, 2]  # 8 free GPUs / 4
    assert fits_count(st, w, 1, ready).tolist() == [24] * 4  # 8 devices x (1000 milli // 300)
    assert fits_count(st, w, 2, ready).tolist() == [2] * 4  # 64 cores / 30
    # take 4 GPUs on node 0: rack 0 then holds only one more 8-GPU pod, rack 1 two
    st.bind(0, 1000, 1024, np.arange(4), 1000)
    gang = w.job_pods[int(np.flatnonzero(w.job_id == "g")[0])]
    assert fits_count(st, w, int(gang[0]), ready).tolist() == [0, 1, 1, 1]
    assert groups_that_fit(st, w, gang[:2], ready, st.slot_rack).tolist() == [1]
    assert groups_that_fit(st, w, gang, ready, st.slot_rack).tolist() == []
