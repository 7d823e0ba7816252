"""benchmarks/prototype_compiled_loop.py, the merged loop's event loop compiled whole (a
measurement script, not part of the package): on a small scale trace it runs, and what it leaves
holds together. The kernel runs as plain Python (NUMBA_DISABLE_JIT=1, in a subprocess: no
compile, a few seconds); the compiled run is the same code, which the script's own runs use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.config import compose
from harness.generate import generate_task

REPO = Path(__file__).resolve().parents[1]

# Runs the kernel on the trace and saves what the invariants read (argv: trace, out .npz)
RUN = """
import sys
import numpy as np
sys.path.insert(0, "benchmarks")
import prototype_compiled_loop as m
args = m.inputs(sys.argv[1])
stats, status, node, node_status, cpu_free, mem_free, gpu_free = m.replay(**args)
np.savez(sys.argv[2], stats=stats, status=status, node=node, node_status=node_status, cpu_free=cpu_free,
         mem_free=mem_free, gpu_free=gpu_free, **args)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The scale workload at ~300 pods (bench_scale's span per pod), replayed as plain Python."""
    tmp = tmp_path_factory.mktemp("proto")
    trace = tmp / "scale.parquet"
    generate_task(compose("generate", ["workload=scale", "workload.n_jobs=210", "workload.span_s=780",
                                       f"out={trace}", "check_fits=false"]))
    out = tmp / "run.npz"
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", RUN, str(trace), str(out)], cwd=REPO, env=env, check=True, timeout=120)
    with np.load(out) as f:
        return {k: f[k] for k in f.files}


def _stat(r, name):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import prototype_compiled_loop as m

    return float(r["stats"][m.STATS.index(name)])


def test_every_pod_placed_or_pending_at_the_end(run):
    """Past the last arrival + 24 h every pod arrived: each is done, running, bound or pending
    (none refused on this cluster), and every job placed whole ran to its end here."""
    status = run["status"]
    assert len(status) > 200
    # 0 not arrived, 1 pending, 2 bound, 3 running, 4 done, 5 refused (the script's codes)
    assert set(np.unique(status).tolist()) <= {1, 2, 3, 4}
    assert (status == 4).sum() == len(status), "the scale trace's pods all end within a day of their arrival"
    assert _stat(run, "binds") == len(status), "each pod bound once: nothing is unbound in the prototype"
    assert _stat(run, "jobs_started") == len(run["job_first"])


def test_gpus_cpu_and_memory_never_overcommitted(run):
    """No bind found its devices taken (the kernel counts violations at every bind), and at the
    end every device holds between 0 and 1000 milli free and every node's CPU and memory what it
    has: every pod done, so every present node is back to its capacity."""
    assert _stat(run, "violations") == 0
    ngpu = run["slot_ngpu"]
    gpu = run["gpu_free"][:, :8]
    devices = np.arange(8)[None, :] < ngpu[:, None]
    present = run["node_status"] > 0
    assert ((gpu >= 0) & (gpu <= 1000)).all()
    assert (gpu[present] == np.where(devices[present], 1000, 0)).all()
    assert (run["cpu_free"][present] == run["slot_cpu"][present]).all()
    assert (run["mem_free"][present] == run["slot_mem"][present]).all()


def test_the_accounting_adds_up(run):
    """Used accelerator time is exactly each pod's GPUs x milli x run time (every pod ran once,
    to its end), billed = used + booting + unallocated + gang wait + committed (the split
    docs/model.md gives, the buffer aside), each part never negative, and the running totals
    come back to 0 once every pod is done."""
    used = (run["pod_gpus"] * run["pod_milli"] * run["pod_dur"]).sum()
    assert _stat(run, "used_ms") == pytest.approx(used, rel=1e-12)
    parts = sum(_stat(run, k) for k in ("used_ms", "booting_ms", "unallocated_ms", "gang_wait_ms", "committed_ms"))
    assert _stat(run, "billed_ms") == pytest.approx(parts, rel=1e-12)
    assert min(_stat(run, k) for k in ("booting_ms", "unallocated_ms", "gang_wait_ms", "committed_ms")) >= 0
    # every pod done: no GPU is counted used or waiting for its gang any more
    assert _stat(run, "end_used_milli") == _stat(run, "end_gang_wait_milli") == 0
    assert _stat(run, "nodes_provisioned") >= _stat(run, "nodes_removed")


# The walk, over every ready node and indexed, against kube-scheduler's walk written plainly here
# (findNodesThatPassFilters from nextStartNodeIndex, the next start moved past the nodes checked
# as harness/scheduler/sampling.py's walk_feasible does, then the best score), on random states
WALKS = """
import sys
import numpy as np
sys.path.insert(0, "benchmarks")
import prototype_compiled_loop as m

def reference(g, loc, start, k, ready, groups, arrays, slot_cpu, slot_mem, slot_rank, cpu_free, mem_free, pod):
    n_all = len(ready)
    found, checked, best, best_score = 0, n_all, -1, -1
    for r in range(n_all):
        n = ready[(start + r) % n_all]
        if (g >= 0 and groups[n] != g) or not m.fits(0, n, *arrays):
            continue
        if found == k:
            break
        found, checked = found + 1, r + 1
        s = m.score(cpu_free, mem_free, slot_cpu, slot_mem, n, pod[0], pod[1])
        if s > best_score or (s == best_score and slot_rank[n] < slot_rank[best]):
            best, best_score = n, s
    else:  # no (k+1)-th feasible node: every node was checked
        checked = n_all
    return best, (start + checked) % n_all if n_all else 0

rng = np.random.default_rng(0)
n_slots, n_racks = 300, 20
slot_pool = np.repeat(np.arange(3), 100)
slot_rack = np.arange(n_slots) // 15  # 20 racks of 15
slot_block = slot_pool.copy()
slot_ngpu = np.where(slot_pool == 2, 4, 8)
slot_nvl = np.where(slot_pool == 2, 1, 8)
slot_numa = np.where(slot_pool == 2, 4, 4)
slot_cpu, slot_mem = np.full(n_slots, 192000), np.full(n_slots, 2000000)
slot_rank = rng.permutation(n_slots)
differ = 0
for case in range(int(sys.argv[1])):
    present = rng.random(n_slots) < rng.uniform(0.2, 1.0)
    ready = np.flatnonzero(present)[np.argsort(slot_rank[present])]
    gpu = np.zeros((n_slots, 10), np.int64)
    gpu[:, :8] = rng.choice([0, 1000, 500, 250], size=(n_slots, 8), p=[0.5, 0.3, 0.1, 0.1])
    gpu[:, :8] *= np.arange(8) < slot_ngpu[:, None]
    gpu[:, m.FREE_WHOLE], gpu[:, m.MAX_SHARE] = (gpu[:, :8] == 1000).sum(axis=1), gpu[:, :8].max(axis=1)
    # a few levels of free room: equal scores are common, so the tie-break is exercised
    cpu_free = rng.choice([0, 48000, 96000, 192000], n_slots)
    mem_free = rng.choice([0, 500000, 1000000, 2000000], n_slots)
    pod_pools = rng.integers(1, 8, 1)
    pod_gpus, pod_milli = rng.choice([0, 1, 2, 4, 8], 1), rng.choice([1000, 250, 500], 1)
    pod_milli[pod_gpus != 1] = 1000
    pod_cpu, pod_mem, pod_dom = rng.integers(0, 100000, 1), rng.integers(0, 1000000, 1), rng.integers(0, 3, 1)
    loc = int(rng.integers(0, 3))
    g = -1 if loc == 0 else int(rng.integers(0, n_racks if loc == 1 else 3))
    groups = slot_rack if loc == 1 else slot_block
    if g >= 0:
        nodes = ready[groups[ready] == g]
    else:
        nodes = ready[(pod_pools[0] >> slot_pool[ready]) & 1 == 1]
    k = int(rng.choice([m.num_feasible(len(ready)), 1, 3, 20]))
    start = int(rng.integers(0, max(len(ready), 1)))
    hot = m.hot_rows(slot_pool, slot_cpu, slot_mem, slot_rank, slot_ngpu, slot_nvl, slot_numa, cpu_free, mem_free, gpu)
    pod = (pod_pools[0], pod_cpu[0], pod_mem[0], pod_gpus[0], pod_milli[0], pod_dom[0])
    full = m.walk_step(g, groups, start, k, ready, len(ready), ready, len(ready), slot_rank, hot, *pod)
    indexed = m.walk_step(g, groups, start, k, ready, len(ready), nodes, len(nodes), slot_rank, hot, *pod)
    want = reference(g, loc, start, k, ready, groups, (pod_cpu, pod_mem, pod_gpus, pod_milli, pod_dom, pod_pools,
                     slot_pool, slot_ngpu, slot_nvl, slot_numa, cpu_free, mem_free, gpu), slot_cpu, slot_mem,
                     slot_rank, cpu_free, mem_free, (int(pod_cpu[0]), int(pod_mem[0])))
    differ += full != want or indexed != want
print(differ)
"""


def test_the_walk_indexed_or_not_is_kube_schedulers():
    """On random states (ready nodes, free devices, pods of every kind, starts, groups, k), the
    walk over every ready node and the walk over the pod's pools' or group's ready nodes pick
    the node kube-scheduler's walk picks (the first k feasible nodes from nextStartNodeIndex,
    the best score, ties by the seeded order) and move nextStartNodeIndex as far."""
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", WALKS, "200"], cwd=REPO, env=env, check=True, timeout=120,
                         capture_output=True, text=True)
    assert out.stdout.strip() == "0", f"{out.stdout.strip()} of 200 walks differ from kube-scheduler's"
