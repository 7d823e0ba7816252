"""Speed and quality of the openb packing experiment: one run (one seed, 10.9k pods on the
1,213 openb GPU nodes) per policy, each timed with a fresh plugin (cold caches).

    python benchmarks/bench_packing.py [REPEATS] [TRACE_VARIANT]

Goal (the project's performance budget, 2-core machine): <= 2 s per run for the simple scorers,
<= 10 s for FGD (the paper's simulator: ~10 minutes). The `TimePacking` / `TrackPacking`
classes are the same measurements for asv (`track_` values: larger is worse).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from harness import scores
from harness.openb_packing import OpenbPacking

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "alibaba-gpu-v2023"
POLICIES = ["RandomScore", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD"]
SEED = 42


def runner(variant: str = "default") -> OpenbPacking:
    pods = TRACES / f"openb_pod_list_{variant}.csv"
    if not pods.exists():
        raise NotImplementedError(f"{pods} not found (public traces beside the repo)")  # asv: skip
    return OpenbPacking(pods, TRACES / "openb_node_list_gpu_node.csv")


def one_run(r: OpenbPacking, policy: str) -> tuple[float, dict]:
    started = time.perf_counter()
    _, metrics = r.simulate(getattr(scores, policy)(), SEED)
    return time.perf_counter() - started, metrics


class TimePacking:
    params = POLICIES
    param_names = ["policy"]
    timeout = 600  # a fresh checkout compiles the kernels first (tens of seconds, more on a busy machine)

    def setup(self, policy):
        self.r = runner()

    def time_run(self, policy):
        self.r.simulate(getattr(scores, policy)(), SEED)


class TrackPacking:
    params = POLICIES
    param_names = ["policy"]
    timeout = 600  # a fresh checkout compiles the kernels first (tens of seconds, more on a busy machine)

    def setup(self, policy):
        _, self.metrics = one_run(runner(), policy)

    def track_unallocated_pct_at_130(self, policy):
        return 100.0 - self.metrics["alloc_rate_at_130"]

    def track_frag_amount_pct_at_90(self, policy):
        return self.metrics["frag_amount_at_90"]


def main(repeats: int = 5, variant: str = "default") -> int:
    started = time.perf_counter()
    r = runner(variant)
    print(f"load {variant} pod list + node list: {time.perf_counter() - started:.2f} s; "
          f"median of {repeats} runs, seed {SEED}")
    print(f"{'policy':<14} {'median s':>9} {'min s':>7} {'max s':>7} {'alloc@130 %':>12} {'frag@90 %':>10}")
    for policy in POLICIES:
        walls, metrics = [], None
        for _ in range(repeats):
            wall, metrics = one_run(r, policy)
            walls.append(wall)
        print(f"{policy:<14} {statistics.median(walls):9.2f} {min(walls):7.2f} {max(walls):7.2f} "
              f"{metrics['alloc_rate_at_130']:12.2f} {metrics['frag_amount_at_90']:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*(int(a) if i == 0 else a for i, a in enumerate(sys.argv[1:]))))
