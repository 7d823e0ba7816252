"""Every job of a shipped scenario can be admitted by its cluster's Kueue queues: a flavor of its
ClusterQueue has a pool that holds each of its pods and quota (nominal, or borrowed from its
cohort) for the whole job. A job no flavor can take is never admitted, and a Kueue loop that
never runs it did less work than the loops it is compared with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.config import compose
from harness.kueue.loop import admission_books
from harness.replay import build

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
#: scenario, its extra overrides, the public traces it imports (None: bundled)
SCENARIOS = [("synthetic", [], None), ("two_tenants", [], None), ("services_synthetic", ["replicas=hpa"], None),
             ("openb_autoscaled", [], "alibaba-gpu-v2023"), ("azure_llm", ["replicas=hpa"], "azure-llm-2023"),
             # the largest gangs a shipped scenario draws: 64 servers, 512 GPUs of the one flavor's 1,280
             ("philly_redrawn_m64", ["workload.span_s=86400"], None)]


@pytest.mark.parametrize("scenario, overrides, shared", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_every_job_of_a_shipped_scenario_can_be_admitted(scenario, overrides, shared, tmp_path):
    if shared is not None and not (SHARED / shared).exists():
        pytest.skip(f"{SHARED / shared} is absent (public traces, read in place)")
    imported = [f"trace.path={tmp_path / 't.parquet'}", f"++trace.services={tmp_path / 't.services.parquet'}",
                f"++trace.demand={tmp_path / 't.demand.parquet'}"] if scenario == "azure_llm" else (
        [f"trace.path={tmp_path / 't.parquet'}"] if shared else [])
    cfg = compose("config", [f"+scenario={scenario}", "loop=separate_kueue", *overrides, *imported])
    if cfg.trace.get("generated"):  # drawn into this test's folder, not the checkout's runs/
        cfg = compose("config", [f"+scenario={scenario}", "loop=separate_kueue", *overrides,
                                 f"trace.path={tmp_path / 'drawn.parquet'}"])
    sim, _ = build(cfg)
    adm = admission_books(sim.cluster.kueue, sim.cluster, sim.w)
    never = [j for j in range(sim.w.n_jobs) if adm.assign(j)[0] < 0]
    queues = sorted(set(np.asarray(sim.w.job_queue)[never].tolist()))
    pods = int(np.diff(sim.w.job_bounds)[never].sum()) if never else 0
    assert not never, f"{scenario}: {len(never)} jobs ({pods} pods) of queues {queues} have no flavor that can admit them"
