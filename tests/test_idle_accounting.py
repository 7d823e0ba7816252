"""The idle GPU milli per price class, kept by per-node deltas (harness/idle_rates.py, from the
nodes the ledger's transitions touched), equals at every step of a replay a full recount of every
slot: billed GPU milli (a node that exists and is no phantom, or a committed slot) less, on a
ready node, what started pods use. Replays that take every transition: gangs bound and released
again and again (Coscheduling), consolidation's evictions (Karpenter), phantoms and committed
slots (a silent provider under the merged loop), placeholders holding room (overprovisioning)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.config import compose
from harness.metrics import Accounting
from harness.replay import build
from harness.status import ABSENT, READY

TRACE = Path(__file__).resolve().parent / "fixtures" / "pinned" / "scale700.parquet"  # many gangs
GANGS = [f"trace.path={TRACE}", "horizon_s=9000"]


def full_recount(acct: Accounting) -> np.ndarray:
    """Every slot's idle GPU milli, summed per class, from the state as it is."""
    sim = acct.sim
    st, ledger = sim.state, sim.ledger
    billed = np.where(((st.status != ABSENT) & ~acct.phantom) | st.slot_committed, acct.slot_milli, 0)
    used = np.where(st.status == READY, st.gpu_used - ledger.held - ledger.buffer_on, 0)
    gpu = acct.slot_class >= 0
    out = np.zeros(len(acct.class_weights), np.int64)
    np.add.at(out, acct.slot_class[gpu], (billed - used)[gpu])
    return out


@pytest.mark.parametrize("overrides", [
    ["loop=separate", *GANGS],
    ["loop=separate_karpenter", *GANGS],
    ["loop=merged", "cluster.shortage=silent", *GANGS],
    ["trace=services", "replicas=hpa", "loop=separate_preemption", "buffer=overprovisioning", "horizon_s=3600"],
], ids=["coscheduling", "karpenter", "silent", "placeholders"])
def test_idle_by_class_is_a_full_recount_at_every_step(overrides, monkeypatch):
    steps = []
    advance = Accounting.advance

    def checked(acct: Accounting, t: float) -> None:  # an event's step recounts the nodes it touched
        advance(acct, t)
        assert acct.idle_by_class().tolist() == full_recount(acct).tolist(), f"at {acct.sim.now} s"
        steps.append(acct.sim.now)

    monkeypatch.setattr(Accounting, "advance", checked)
    sim, loop = build(compose("config", overrides))
    sim.run(loop)
    assert len(steps) > 100
    assert sim.acct.idle_by_model.any()
    if "cluster.shortage=silent" in overrides:
        assert sim.acct.phantom.any()  # the setting did make phantoms
    if "buffer=overprovisioning" in overrides:
        assert sim.ledger.buffer_on.any() or sim.acct.totals["buffer"] > 0  # placeholders held room
