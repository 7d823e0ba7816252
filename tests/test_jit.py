"""The compiled kernels stay debuggable as Python: a small replay gives exactly the same outputs
(metrics, jobs, nodes, timeline, bit for bit) with the JIT as with NUMBA_DISABLE_JIT=1, which
runs every @njit kernel as plain Python. Each run is a subprocess, as numba reads the switch
when it is first imported. The cluster keeps 150 nodes ready so the scheduler's feasible-node
walk (harness.scheduler.sampling) stops early and wraps round (it runs only above 100 nodes);
its pods take whole GPUs, GPU shares and GPUs in one NVLink (and NUMA) domain, so every branch of
the device kernels (harness.node_devices) runs, and the accounting's (harness.idle_rates) too;
"packer" is a burst of gangs on them (room to grow to 400) under the separate loops with
ProvisioningRequests, which leaves pods pending, so every kernel of the autoscaler's what-if
packer (harness.packer) runs, over those nodes and new ones, several pods to a node (a planted
difference under NUMBA_DISABLE_JIT in `_fits` or in `first_feasible` fails it). "dra" is the
separate loops' replay on the same nodes as a DRA cluster, so the typed allocator's kernels
(harness.dra.allocator: every claim as devices, first fit per node, the stamp cache) run too.
"karpenter" is the burst of "packer" on that DRA cluster under the Karpenter-like autoscaler, so its
what-ifs' kernels (provisioning's and consolidation's first fits with claims, the disruption costs)
run as it launches nodes and consolidates them. Its LeastAllocated profile takes the compiled
placement step (harness/scheduler/placement_step.py: `step_by_rule` in the replays without claims,
`step_by_claims` in "dra" and "karpenter").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

ROOT = Path(__file__).resolve().parents[1]

REPLAY = """
import sys
from harness.metrics import jobs_frame, nodes_frame
from tests import scenarios as sc
from harness.cluster import Cluster
packer = sys.argv[1] in ("packer", "karpenter")  # a burst of gangs (two 4-GPU pods and one other): pods pend, the autoscaler packs
types = [sc.node_type("h8", nvlink_domains=2, numa_domains=4)]
pools = [sc.pool("h", "h8", min_size=150, max_size=400 if packer else 170, boot_s=60.0)]
cl = (Cluster(node_types=types, pools=pools, name="golden", dra={}) if sys.argv[1] in ("dra", "karpenter")
      else sc.cluster(types, pools))
shapes = [{"gpu_count": 1}, {"gpu_count": 8}, {"gpu_milli": 500}, {"gpu_count": 2, "cpu_milli": 8000},
          {"gpu_count": 2, "gpus_same_nvlink": True, "gpus_same_numa": True}, {"gpu_count": 3, "gpus_same_nvlink": True}]
gap, four = (2.0 if packer else 60.0), {"gpu_count": 4}
table = sc.trace([{**(four if packer and i % 3 else shapes[j % 6]), "job_id": f"j{j}", "submit_s": gap * j,
                   "duration_s": 600.0 + 37.0 * (j % 11), "min_member": 3 if packer or j % 5 == 0 else 1}
                  for i in range(399 if packer else 400) for j in [i // 3]])  # jobs of three pods, every fifth a gang
loop = {"merged": sc.merged, "karpenter": sc.karpenter}.get(sys.argv[1], lambda: sc.separate(provisioning_request=packer))()
row, sim = sc.run(table, cl, loop, horizon_s=6 * 3600.0)
out = sys.argv[2]
for name, frame in (("jobs", jobs_frame(sim)), ("nodes", nodes_frame(sim)), ("timeline", sim.acct.timeline.frame())):
    frame.write_parquet(f"{out}/{name}.parquet")
__import__("polars").DataFrame([row]).write_parquet(f"{out}/metrics.parquet")
"""


def replay(loop: str, out: Path, jit: bool) -> dict[str, pl.DataFrame]:
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_DISABLE_JIT": "0" if jit else "1"}
    subprocess.run([sys.executable, "-c", REPLAY, loop, str(out)], cwd=ROOT, env=env, check=True)
    return {t: pl.read_parquet(out / f"{t}.parquet") for t in ("metrics", "jobs", "nodes", "timeline")}


@pytest.mark.parametrize("loop", ["separate", "merged", "packer", "dra", "karpenter"])
def test_jit_and_plain_python_give_the_same_outputs(loop, tmp_path):
    compiled, plain = replay(loop, tmp_path / "jit", True), replay(loop, tmp_path / "python", False)
    assert compiled["metrics"]["pods_done"][0] > 100  # the replay did place pods
    for table in compiled:
        assert_frame_equal(compiled[table], plain[table], check_exact=True)
