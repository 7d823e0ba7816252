"""Speed and peak memory of the FGD paper's openb packing run (`loopbench replay
experiment=openb_packing policy=...`: 10.9k pods on the 1,213 openb GPU nodes, one seed), for
the bin-packing baseline and FGD. Skipped when the public traces are not beside the repo."""

from __future__ import annotations

import tempfile

from . import SHARED_TRACES, compose

OPENB = SHARED_TRACES / "alibaba-gpu-v2023"


class Packing:
    params = ["best_fit", "fgd"]
    param_names = ["policy"]
    timeout = 600
    number = 1
    repeat = (3, 5, 20.0)
    warmup_time = 0.0

    def setup(self, policy):
        from hydra.utils import instantiate

        if not (OPENB / "openb_pod_list_default.csv").exists():
            raise NotImplementedError(f"{OPENB} not found (public traces beside the repo)")  # asv: skipped
        self.cfg = compose(["experiment=openb_packing", f"policy={policy}", f"traces_dir={OPENB}"])
        self.runner = instantiate(self.cfg.runner)  # reads the pod and node lists
        self.out = tempfile.TemporaryDirectory()

    def teardown(self, policy):
        if hasattr(self, "out"):  # setup skipped when the traces are absent
            self.out.cleanup()

    def time_run(self, policy):
        self.runner.run(self.cfg, self.out.name)

    def peakmem_run(self, policy):
        self.runner.run(self.cfg, self.out.name)
