"""Import speed and peak memory: a synthetic 1M-row Helios `cluster_log.csv` through
`loopbench import helios`, run in a subprocess so its peak RSS is its own.

    python benchmarks/bench_import.py [ROWS]

Goal (the project's performance budget for imports): <= 30 s and <= 1 GiB for 1M rows.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv


def helios_csv(path: Path, rows: int, seed: int = 0) -> None:
    """Rows shaped like Helios: mostly 1-node jobs, some multi-node gangs, a few cancelled."""
    rng = np.random.default_rng(seed)
    nodes = rng.choice([1, 2, 4, 8, 16], size=rows, p=[0.9, 0.05, 0.03, 0.015, 0.005])
    per_node = rng.choice([0, 1, 2, 4, 8], size=rows, p=[0.1, 0.4, 0.15, 0.15, 0.2])
    submit = np.sort(rng.integers(0, 180 * 86400, rows)) + np.datetime64("2020-04-01T00:00:00", "s").astype(np.int64)
    queue = rng.exponential(300, rows).astype(np.int64)
    duration = np.where(rng.random(rows) < 0.05, 0, rng.lognormal(7, 2, rows).astype(np.int64) + 1)

    def dt(seconds: np.ndarray) -> pa.Array:
        return pc.strftime(pa.array(seconds.astype("datetime64[s]")), format="%Y-%m-%d %H:%M:%S")

    table = pa.table({
        "job_id": pc.binary_join_element_wise("job", pa.array(np.arange(rows)).cast(pa.string()), "-"),
        "user": pc.binary_join_element_wise("u", pa.array(rng.integers(0, 500, rows)).cast(pa.string()), ""),
        "vc": pc.binary_join_element_wise("vc", pa.array(rng.integers(0, 30, rows)).cast(pa.string()), ""),
        "gpu_num": per_node * nodes, "cpu_num": np.maximum(per_node, 1) * nodes * 4, "node_num": nodes,
        "state": pa.array(np.where(duration == 0, "CANCELLED", "COMPLETED")),
        "submit_time": dt(submit), "start_time": dt(submit + queue), "end_time": dt(submit + queue + duration),
        "duration": duration, "queue": queue,
    })
    pv.write_csv(table, path, pv.WriteOptions(quoting_style="none"))


def main(rows: int = 1_000_000) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "cluster_log.csv", Path(tmp) / "helios.parquet"
        t0 = time.perf_counter()
        helios_csv(src, rows)
        print(f"generated {rows:,} rows ({src.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "import", "helios", str(src), "-o", str(out)],
                              capture_output=True, text=True)
        wall = time.perf_counter() - t0
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
        print(proc.stdout, end="")
        if proc.returncode:
            print(proc.stderr, file=sys.stderr)
            return proc.returncode
        print(f"import: {wall:.1f} s wall, peak RSS {peak_mib:.0f} MiB (goal <= 30 s, <= 1024 MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*(int(a) for a in sys.argv[1:2])))
