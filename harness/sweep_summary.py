"""What a sweep says when it ends (`loopbench replay -m`, `compare -m`): a Hydra callback,
named in conf/config.yaml's and conf/compare.yaml's hydra.callbacks."""

from __future__ import annotations

import sys
from pathlib import Path

from hydra.experimental.callback import Callback


class SweepSummary(Callback):
    """The end of a sweep (`replay -m`, `compare -m`, conf's hydra.callbacks) says where its
    runs are and the command that tables them over seeds."""

    def on_multirun_end(self, config, **kwargs) -> None:
        from harness.report import find_runs

        sweep = Path(str(config.hydra.sweep.dir))
        runs = find_runs([sweep]) if sweep.is_dir() else []
        if not runs:
            print(f"loopbench: the sweep in {sweep} finished no run", file=sys.stderr)
            return
        print(f"loopbench: {len(runs)} runs in {sweep}; their tables and plots, mean and spread over "
              f"seeds: loopbench report {sweep} -o {sweep / 'report'}", file=sys.stderr)
