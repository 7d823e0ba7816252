"""Policy quality per loop on a pinned small trace (benchmarks/data/small.parquet, committed so
every commit replays the same bytes): lower is better for every value, as asv assumes.

The trace was made with
    loopbench generate seed=2 workload.span_s=21600 workload.gangs.rate_per_h=3 \\
        out=benchmarks/data/small.parquet
(433 pods, 383 jobs, 19 gangs over 6 h of arrivals); replaying it through the three loops
takes a few seconds, done once per commit in `setup_cache`.
"""

from __future__ import annotations

from . import LOOPS, SMALL_TRACE, compose


class Quality:
    params = LOOPS
    param_names = ["loop"]
    timeout = 600

    def setup_cache(self):
        from harness.metrics import jobs_frame, nodes_frame, summary_row
        from harness.replay import build

        rows = {}
        for loop in LOOPS:
            sim, control = build(compose([f"loop={loop}", f"trace.path={SMALL_TRACE}"]))
            sim.run(control)
            rows[loop] = summary_row(sim, jobs_frame(sim), nodes_frame(sim), {}).row(0, named=True)
        return rows

    def track_idle_accel_hours(self, rows, loop):
        return rows[loop]["idle_accel_hours"]

    track_idle_accel_hours.unit = "accelerator-hours"

    def track_gang_p95_start_latency(self, rows, loop):
        return rows[loop]["gang_latency_p95_s"]

    track_gang_p95_start_latency.unit = "s"

    def track_frag_amount(self, rows, loop):
        return 100.0 * rows[loop]["frag_amount"]

    track_frag_amount.unit = "% of ready GPU"
