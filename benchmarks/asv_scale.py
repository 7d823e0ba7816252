"""Time-based replay with autoscaling at scale, tracked per commit: a 20k-pod `workload=scale`
trace (the generator preset behind benchmarks/bench_scale.py, arrivals spread so the offered
load matches its 1M-pod run) on the 8,000-slot `cluster=scale`, through every loop bench_scale.py
holds to a target: the separate loops (with Cluster Autoscaler, with its ProvisioningRequests, with
the Karpenter-like autoscaler, and with kube-scheduler's own gang scheduling) and the merged loop.
bench_scale.py checks the 100k / 300k / 1M goals; this keeps the trend. $LOOPBENCH_ASV_SCALE_PODS
sets another size: CI's check that every benchmark runs (tests/test_benchmarks.py) takes 2,000."""

from __future__ import annotations

import os
import subprocess
import sys

from . import checkout, compose

PODS = int(os.environ.get("LOOPBENCH_ASV_SCALE_PODS", "20000"))


class ReplayScale:
    params = ["separate", "separate_provreq", "separate_karpenter", "separate_workload", "merged"]
    param_names = ["loop"]
    timeout = 900
    number = 1
    repeat = (2, 3, 60.0)
    warmup_time = 0.0

    def setup_cache(self):
        # generated once per commit (by that commit's generator) into asv's cache directory
        path = os.path.abspath("scale.parquet")
        subprocess.run([sys.executable, "-m", "harness.cli", "generate", "workload=scale",
                        f"workload.n_jobs={int(PODS * 0.7)}", f"workload.span_s={int(PODS * 2.592)}",
                        f"out={path}", "check_fits=false"], cwd=checkout(), check=True, capture_output=True)
        return path

    def setup(self, trace, loop):
        from harness.replay import build

        cfg = compose([f"loop={loop}", "cluster=scale"])
        cfg.trace.path = trace
        self.sim, self.loop = build(cfg)

    def time_replay(self, trace, loop):
        self.sim.run(self.loop)
