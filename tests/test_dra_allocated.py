"""A pod's devices are remembered by its node's stamp (`DeviceLayer.allocated`): a stamp names a
node's allocation state, device type and taints, so the devices the claims get there are those
`allocation` computes afresh. Checked at every placement of replays that reach the same state
on many nodes (the pinned many-gang trace under the merged and the separate loops, what-ifs
included) and of one whose device taints come and go (a seeded failure schedule)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config import compose
from harness.dra.layer import DeviceLayer, allocation
from harness.replay import build
from tests import scenarios as sc
from tests.test_dra_taints import FAILURES, H, two_gpus
from tests.test_pinned_outputs import TRACE


@pytest.fixture
def compared(monkeypatch):
    """Every `allocated` answer compared with `allocation` on the same row; returns the count
    of answers and of those that were remembered."""
    allocated, seen = DeviceLayer.allocated, {"answers": 0, "remembered": 0}

    def checked(self, arrays, stamp, t, claims, n, marks=None):
        known = len(self._allocated)
        got = allocated(self, arrays, stamp, t, claims, n, marks)
        afresh = allocation(self, arrays, t, claims, n, marks)
        assert np.array_equal(got, afresh) and np.array_equal(got.pairs, afresh.pairs)
        assert got.change == afresh.change and got.typed is afresh.typed
        seen["answers"] += 1
        seen["remembered"] += len(self._allocated) == known
        return got

    monkeypatch.setattr(DeviceLayer, "allocated", checked)
    return seen


@pytest.mark.parametrize("loop", ["merged", "separate"])
def test_devices_remembered_by_stamp_are_the_devices_allocated_afresh(compared, loop):
    sim, lp = build(compose("config", [f"loop={loop}", f"trace.path={TRACE}", "horizon_s=9000"]))
    sim.run(lp)
    assert compared["remembered"] >= 20, compared  # states recur: the remembered answers were used


def test_devices_remembered_by_stamp_follow_device_taints(compared):
    # devices fail and are repaired through the run: a tainted node's state has a stamp of its own
    cl = two_gpus(failures={**FAILURES, "rate_per_device_per_day": 24.0}, slots=2)
    row, _ = sc.run(sc.trace([{"submit_s": 600.0 * i} for i in range(12)]), cl, sc.separate(), horizon_s=8 * H,
                    seed=1)
    assert row["device_taints"] > 0 and compared["remembered"] > 0, compared
