"""Scale-down skips re-simulating a plan that provably comes out the same (`ScaleDown._simulate`):
over random small clusters and pod churn, every plan with the shortcut equals the plan
simulated afresh, and the runs end with the same metrics."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.autoscalers.cluster_autoscaler import ClusterAutoscaler
from harness.autoscalers.expanders import Chain, Price
from harness.autoscalers.scale_down import ScaleDown
from harness.loops.separate import SeparateLoops
from harness.scheduler import Scheduler
from harness.scheduler.gang import Coscheduling
from harness.scores import LeastAllocated
from tests import scenarios as sc


class Logged(ScaleDown):
    """Records each plan's candidates and outcome; `shortcut=False` always simulates."""

    def __init__(self, shortcut: bool):
        super().__init__(unneeded_time_s=300.0, delay_after_add_s=120.0, unremovable_recheck_s=120.0,
                         simulate_every_scan=True)
        self.shortcut = shortcut
        self.log: list[tuple] = []
        self.simulated = 0

    def _simulate(self, cand, booked_for, limit):
        if not self.shortcut:
            self.memo = None
        memo = self.memo
        found, tried = super()._simulate(cand, booked_for, limit)
        self.simulated += self.memo is not memo
        self.log.append((self.planned_at, cand.tolist(), found.tolist(), tried))
        return found, tried


def replay(pods: list[dict], shortcut: bool):
    cl = sc.cluster([sc.node_type("gpu8"), sc.node_type("gpu4", gpus=4, cpu_milli=32000)],
                    [sc.pool("a", "gpu8", boot_s=60.0, min_size=1, max_size=4, committed=1),
                     sc.pool("b", "gpu4", boot_s=60.0, max_size=4)])
    sd = Logged(shortcut)
    loop = SeparateLoops(Scheduler(LeastAllocated(), gang=Coscheduling()),
                         ClusterAutoscaler(scale_down=sd, expander=Chain([Price()])))
    row, _ = sc.run(sc.trace(pods), cl, loop, horizon_s=4 * 3600.0)
    return row, sd


pod = st.fixed_dictionaries({
    "gpu_count": st.sampled_from([0, 1, 1, 2, 4]),
    "gpu_milli": st.sampled_from([1000, 1000, 500]),
    "cpu_milli": st.sampled_from([1000, 8000, 30000]),
    "submit_s": st.integers(0, 7200).map(float),
    "duration_s": st.integers(60, 3600).map(float),
})


def fix(p: dict) -> dict:
    """A share is one GPU; a CPU pod asks no GPU milli."""
    if p["gpu_count"] != 1:
        p = {**p, "gpu_milli": 1000}
    return {**p, "gpu_milli": 0} if p["gpu_count"] == 0 else p


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pod, min_size=1, max_size=30))
def test_skipped_plans_equal_simulated_ones(pods):
    pods = [fix(p) for p in pods]
    row, fast = replay(pods, shortcut=True)
    slow_row, slow = replay(pods, shortcut=False)
    assert fast.log == slow.log
    assert repr(row) == repr(slow_row)  # NaN-safe


def test_the_shortcut_is_taken():
    # pods coming and going on other nodes than the candidates: some plans are not simulated
    rng = np.random.default_rng(0)
    pods = [fix({"gpu_count": int(rng.choice([1, 2, 4])), "gpu_milli": 1000, "cpu_milli": 1000,
                 "submit_s": float(rng.integers(0, 7200)), "duration_s": float(rng.integers(60, 3600))})
            for _ in range(40)]
    _, fast = replay(pods, shortcut=True)
    _, slow = replay(pods, shortcut=False)
    assert fast.log == slow.log
    assert fast.simulated < slow.simulated == len(slow.log)
