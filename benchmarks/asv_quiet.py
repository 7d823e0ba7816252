"""Quiet time, tracked per commit: a year of a nearly idle cluster (bench_quiet.py's long trace:
pods at 0, 30 and 365 days on the default cluster, one L4 node that can never go) through
each loop. A loop that scans every 10 s whatever happens takes minutes; one that sleeps
until the next event or time threshold, a fraction of a second."""

from __future__ import annotations

import os
from pathlib import Path

from . import compose
from .bench_quiet import TRACES, write_gap_trace


class QuietYear:
    params = ["separate", "separate_provreq", "separate_karpenter", "merged"]
    param_names = ["loop"]
    timeout = 120  # commits before quiet time was free take ~10 minutes a replay: they time out
    number = 1
    repeat = (3, 5, 30.0)
    warmup_time = 0.0

    def setup_cache(self):
        # written once per commit into asv's cache directory, the benchmarks' working directory
        return str(write_gap_trace(Path(os.path.abspath("quiet_year.parquet")), TRACES["365 d"]))

    def setup(self, trace, loop):
        from harness.replay import build

        cfg = compose([f"loop={loop}"])
        cfg.trace.path = trace
        self.sim, self.loop = build(cfg)

    def time_replay(self, trace, loop):
        self.sim.run(self.loop)
