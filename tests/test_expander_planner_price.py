"""The merged planner's pricing and committed-capacity rules in the separate loops: the
`planner_price` expander (harness/autoscalers/expanders.py PlannerPrice, pricing by
harness/autoscalers/plan_price.py, which the merged planner uses too), `keep_committed`, and the
loop config that has both (conf/loop/separate_priced.yaml); off by default, today's results
unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import instantiate

from harness.autoscalers.cluster_autoscaler import ClusterAutoscaler
from harness.autoscalers.expanders import Chain, LeastWaste, PlannerPrice, Reserved
from harness.config import compose
from harness.metrics import jobs_frame, nodes_frame, summary_row
from harness.replay import build
from harness.settings import SettingError, check_config
from tests import scenarios as sc

ROOT = Path(__file__).resolve().parents[1]
H = 3600.0


def small_and_big(committed: int = 0):
    """Pool small (2-GPU nodes of 8 cores and 64,000 MiB, 3 $/h, `committed` of its 4 slots
    committed) and big (8-GPU nodes of 64 cores and 512,000 MiB, 8 $/h)."""
    gpu2 = sc.node_type("gpu2", cpu_milli=8000, memory_mib=64000, gpus=2)
    return sc.cluster([gpu2, sc.node_type("gpu8")],
                      [sc.pool("small", "gpu2", price_on_demand=3.0, committed=committed),
                       sc.pool("big", "gpu8", price_on_demand=8.0)])


@pytest.mark.parametrize("expander, committed, bought", [
    (LeastWaste, 0, ["small"] * 4),
    (PlannerPrice, 0, ["big"]),
    (PlannerPrice, 4, ["small"] * 4),
])
def test_the_planner_price_buys_what_the_merged_planner_would_not_what_least_waste_would(expander, committed, bought):
    """Eight single-GPU pods (1 core, 1,024 MiB each) pending at 0. Least-waste (CPU and memory
    only): small, 4 nodes, (32 - 8)/32 + (256,000 - 8,192)/256,000 = 0.75 + 0.968 = 1.718; big,
    1 node, (64 - 8)/64 + (512,000 - 8,192)/512,000 = 0.875 + 0.984 = 1.859: four small nodes,
    12 $/h. Planner price: the pods take all the GPUs of either (dominant share 1), and the
    demand (8 GPUs pending) leaves none idle: small 4 x 3 x 1 = 12, big 1 x 8 x 1 = 8: one big
    node. With small's four slots committed they are paid already: (4 - 4) x 3 x 1 = 0: small."""
    cl = small_and_big(committed)
    loop = sc.separate("none", expander=Chain([expander()]))
    row, sim = sc.run(sc.trace([{} for _ in range(8)]), cl, loop, 2 * H)
    assert [cl.pools[n.pool].name for n in sim.nodes] == bought and row["pods_done"] == 8


def test_the_planner_price_counts_the_arrivals_of_its_window_as_demand():
    """Eight single-GPU pods at 0 fill a big node (as above); a ninth arrives at 400, the big node
    full. With `demand_window_s` 600 the eight placed in the last 600 s count as demand beside it
    (9 GPUs): big 8 x (1/8 + 0) = 1 beats small 3 x (1/2 + 0) = 1.5; with 0, only the pending pod
    counts: small 3 x (1/2 + 1/2) = 3 beats big 8 x (1/8 + 7/8) = 8 (the merged planner's golden
    in test_merged.py, the same price)."""
    cl = small_and_big()
    rows = [{} for _ in range(8)] + [{"submit_s": 400.0, "duration_s": 600.0}]
    for window, last in [(600.0, "big"), (0.0, "small")]:
        loop = sc.separate("none", expander=Chain([PlannerPrice(demand_window_s=window)]))
        _, sim = sc.run(sc.trace(rows), cl, loop, 2 * H)
        assert cl.pools[sim.nodes[-1].pool].name == last and sim.nodes[-1].requested_at >= 400.0


@pytest.mark.parametrize("keep, removed", [(False, True), (True, False)])
def test_keep_committed_never_scales_a_committed_node_down(keep, removed):
    """A pod runs 600 s on the one committed node of pool small; idle after, the node is unneeded
    10 min later and removed, unless `keep_committed` (it is billed whether it runs or not)."""
    cl = small_and_big(committed=1)
    loop = sc.separate("none", expander=Chain([LeastWaste()]), keep_committed=keep)
    _, sim = sc.run(sc.trace([{"duration_s": 600.0}]), cl, loop, 2 * H)
    assert len(sim.nodes) == 1 and (sim.nodes[0].removed_at < 2 * H) == removed  # the horizon closes a node's record


def test_the_settings_are_refused_by_their_rule():
    with pytest.raises(SettingError, match="demand_window_s"):
        PlannerPrice(demand_window_s=-1.0)
    with pytest.raises(SettingError, match="keep_committed"):
        ClusterAutoscaler(keep_committed="yes")  # type: ignore[arg-type]
    for bad in ["loop.autoscaler.keep_committed=2", "loop.autoscaler.expander.filters.0.demand_window_s=-5"]:
        with pytest.raises(SettingError, match=bad.split("=")[0].split(".")[-1]):
            check_config(compose("config", ["loop=separate_priced", bad]))


def test_separate_priced_is_the_planner_price_and_keep_committed_and_both_are_off_by_default():
    priced = instantiate(compose("config", ["loop=separate_priced"]).loop.autoscaler)
    assert [type(f) for f in priced.expander.filters] == [PlannerPrice] and priced.keep_committed
    bare = instantiate(compose("config", ["loop=separate"]).loop.autoscaler)
    assert [type(f) for f in bare.expander.filters] == [LeastWaste] and not bare.keep_committed
    first = instantiate(compose("config", ["loop/autoscaler/expander=committed_first"]).loop.autoscaler)
    assert [type(f) for f in first.expander.filters] == [Reserved, LeastWaste]


#: the cluster as it was then: pre-DRA, no minimum billed time, a compact placement on the emptiest rack;
#: and evicted pods pending again at once (no Job controller backoff)
BEFORE_THE_FLIPS = ["cluster.dra=null", "+cluster.min_billed_s=0", "+cluster.compact_rack=emptiest", "job_backoff=false"]


@pytest.mark.parametrize("loop, expected", [
    ("separate", (452.75121666666695, 3257.5311111111105, 74, 109)),
    ("merged", (49.08645951014191, 2522.8388888888917, 24, 136)),
])
def test_bare_separate_and_merged_are_what_they_were_before_the_pricing_was_shared(loop, expected):
    """The bundled trace's first 3 h, to the last bit: idle accelerator hours, cost, nodes
    provisioned and pods done as the commit before harness/autoscalers/plan_price.py left them (a
    deliberate change to either loop updates these)."""
    sim, built = build(compose("config", [f"loop={loop}", f"trace.path={ROOT / 'traces' / 'default.parquet'}",
                                          "horizon_s=10800", *BEFORE_THE_FLIPS]))
    sim.run(built)
    row = summary_row(sim, jobs_frame(sim), nodes_frame(sim), {"loop": loop}).to_dicts()[0]
    assert (row["idle_accel_hours"], row["cost_usd"], row["nodes_provisioned"], row["pods_done"]) == expected
