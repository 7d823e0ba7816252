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
