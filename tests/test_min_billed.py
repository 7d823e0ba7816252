"""The least a node is billed for (`min_billed_s`, harness/metrics.py): a node that goes before
its minimum ran out is billed the rest at once, golden by hand."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.metrics import MILLI_HOUR
from harness.status import READY
from tests import scenarios as sc
from tests.test_provider import gpu_pool, sim_of

LATER = [{"submit_s": 9000.0}]  # no pod before the end: nothing is ever used


def test_a_node_dropped_in_the_scan_that_bought_it_is_billed_the_minimum():
    """Asked for and removed at 100 s, min 60 s: 8 GPUs billed (booting) for 60 s, 10 USD/h
    for a minute; nothing else exists, so every billed GPU-second is idle."""
    sim = sim_of([gpu_pool(min_billed_s=60.0)], pods=LATER)
    sim.advance_to(100.0)
    (n,) = sim.provision(0, 1, atomic=False)
    sim.remove_node(int(n))
    sim.advance_to(3600.0)
    tot = sim.acct.totals
    assert tot["billed"] / MILLI_HOUR == pytest.approx(8 * 60 / 3600)
    assert tot["booting"] == tot["billed"] and tot["used"] == 0
    assert tot["cost"] == pytest.approx(10.0 / 60)
    assert sim.acct.idle_by_model.sum(axis=1) == pytest.approx([8 * 60 * 1000, 10.0 / 60])


def test_a_ready_node_removed_early_bills_the_rest_as_unallocated():
    """Boot 30 s, min 600 s, removed (empty, ready) at 100 s: 30 s booting, 70 s unallocated
    while it existed, then the 500 s left of its minimum, unallocated too."""
    sim = sim_of([gpu_pool(boot_delay={"min_s": 30, "max_s": 30}, min_billed_s=600.0)], pods=LATER)
    (n,) = sim.provision(0, 1, atomic=False)
    sim.advance_to(30.0)  # its ready event
    sim.advance_to(100.0)
    assert sim.state.status[n] == READY
    sim.remove_node(int(n))
    sim.advance_to(3600.0)
    tot = sim.acct.totals
    assert tot["billed"] / MILLI_HOUR == pytest.approx(8 * 600 / 3600)
    assert tot["booting"] / MILLI_HOUR == pytest.approx(8 * 30 / 3600)
    assert tot["unallocated"] / MILLI_HOUR == pytest.approx(8 * 570 / 3600)
    assert tot["cost"] == pytest.approx(10.0 * 600 / 3600)


def test_a_node_that_outlived_its_minimum_bills_only_its_life():
    sim = sim_of([gpu_pool(min_billed_s=60.0)], pods=LATER)
    (n,) = sim.provision(0, 1, atomic=False)
    sim.advance_to(1000.0)
    sim.remove_node(int(n))
    sim.advance_to(3600.0)
    assert sim.acct.totals["billed"] / MILLI_HOUR == pytest.approx(8 * 1000 / 3600)


def test_the_rest_stops_at_the_horizon():
    sim = sim_of([gpu_pool(min_billed_s=600.0)], pods=LATER, horizon_s=200.0)
    sim.advance_to(100.0)
    (n,) = sim.provision(0, 1, atomic=False)
    sim.remove_node(int(n))
    sim.acct.finish()
    assert sim.acct.totals["billed"] / MILLI_HOUR == pytest.approx(8 * 100 / 3600)


def test_phantoms_and_committed_slots_bill_no_minimum():
    """A phantom never came up (never billed); a node in a committed slot costs no more than
    the slot, which is billed all along."""
    sim = sim_of([gpu_pool(stock=0, min_billed_s=600.0)], shortage="silent", pods=LATER)
    (n,) = sim.provision(0, 1, atomic=False)
    sim.remove_node(int(n))
    committed = sim_of([gpu_pool(committed=1, price_committed=6.0, min_billed_s=600.0)], pods=LATER)
    (c,) = committed.provision(0, 1, atomic=False)
    committed.remove_node(int(c))
    for s in (sim, committed):
        s.advance_to(3600.0)
    assert sim.acct.totals["billed"] == 0 and sim.acct.totals["cost"] == 0
    assert committed.acct.totals["billed"] / MILLI_HOUR == pytest.approx(8.0)
    assert committed.acct.totals["cost"] == pytest.approx(6.0)


def test_the_pool_minimum_overrides_the_clusters():
    cl = sc.Cluster(node_types=[sc.node_type("h100")], pools=[gpu_pool(), {**gpu_pool(), "name": "b",
                                                                          "min_billed_s": 0}],
                    name="billing", min_billed_s=60.0)
    assert [p.min_billed_s for p in cl.pools] == [60.0, 0.0]


@pytest.mark.parametrize(("where", "value"), [("cluster", -1.0), ("pool", "minute"), ("pool", float("inf"))])
def test_a_bad_minimum_is_refused_by_key(where, value):
    pools = [gpu_pool(min_billed_s=value)] if where == "pool" else [gpu_pool()]
    extra = {"min_billed_s": value} if where == "cluster" else {}
    with pytest.raises(ConfigError, match="min_billed_s"):
        sc.Cluster(node_types=[sc.node_type("h100")], pools=pools, name="billing", **extra)
