"""Replay speed and peak memory: the bundled default trace (traces/default.parquet) through
each loop, as `loopbench replay loop=...` runs it minus the output files."""

from __future__ import annotations

from . import LOOPS, compose


class Replay:
    params = LOOPS
    param_names = ["loop"]
    timeout = 600
    # one replay is seconds long: time single calls, each on a freshly built simulation
    # (asv re-runs setup before every sample), no warm-up calls; at least 3 samples in each
    # of asv's 2 rounds, or `asv compare` cannot call a change significant
    number = 1
    repeat = (3, 5, 30.0)
    warmup_time = 0.0

    def setup(self, loop):
        from harness.replay import build

        self.sim, self.loop = build(compose([f"loop={loop}"]))

    def time_replay(self, loop):
        self.sim.run(self.loop)

    def peakmem_replay(self, loop):
        self.sim.run(self.loop)
