"""Placement requests (harness/cloud.py `Placement`): a loop asks for nodes in one rack, the
provider picks the slots, and a placement it cannot honour fails or comes back short as a
request beyond stock does. Golden by hand: pool of 4 slots, 2 per rack (racks 0 and 1)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from harness.cloud import Placement
from harness.errors import ConfigError
from harness.sim import Simulation
from harness.view import Provider, SimulationView
from tests import scenarios as sc
from tests.test_merged import replay
from tests.test_provider import gpu_pool, sim_of


def two_racks(**kw) -> dict:
    return gpu_pool(max_size=4, nodes_per_rack=2, **kw)


@pytest.mark.parametrize(("shortage", "atomic", "granted"), [
    ("silent", False, 2), ("error", False, 2), ("error", True, 0), ("silent", True, 0)])
def test_three_nodes_in_one_rack_with_two_free_slots(shortage, atomic, granted):
    """No rack has 3 free slots: best effort yields the 2 of one rack (no slot for a third, not
    even a phantom); all or nothing on an atomic pool yields none."""
    sim = sim_of([two_racks(atomic=True)], shortage=shortage)
    got = sim.provision(0, 3, atomic=atomic, placement=Placement())
    assert len(got) == granted and len(set(sim.state.slot_rack[got].tolist())) <= 1
    assert (sim.state.status != 0).sum() == granted


def test_a_plain_request_spreads_over_racks():
    sim = sim_of([two_racks()])
    assert sim.state.slot_rack[sim.provision(0, 3, atomic=False)].tolist() == [0, 0, 1]


@pytest.mark.parametrize(("compact_rack", "rack"), [("emptiest", 1), ("packed", 0)])
def test_the_provider_picks_the_rack(compact_rack, rack):
    """Slot 0 taken: rack 0 has 1 free slot, rack 1 has 2. One node in one rack: `emptiest`
    serves it from rack 1, `packed` from rack 0 (the fullest that holds it); two nodes: rack 1
    either way (the only one that holds them)."""
    sim = sim_of([two_racks(compact_rack=compact_rack)])
    sim.provision(0, 1, atomic=False)
    (n,) = sim.provision(0, 1, atomic=False, placement=Placement())
    assert sim.state.slot_rack[n] == rack
    sim = sim_of([two_racks(compact_rack=compact_rack)])
    sim.provision(0, 1, atomic=False)
    assert sim.state.slot_rack[sim.provision(0, 2, atomic=False, placement=Placement())].tolist() == [1, 1]


def test_a_request_near_a_node_joins_its_rack_or_fails():
    """Nodes in slots 0 and 2 (racks 0 and 1): one more near slot 2 comes in rack 1 (slot 3);
    then rack 1 is full, so another near slot 2 is refused though rack 0 has room."""
    sim = sim_of([two_racks()])
    sim.provision(0, 1, atomic=False)
    sim.provision(0, 2, atomic=False, placement=Placement())  # rack 1, the emptiest: slots 2, 3
    sim.remove_node(3)
    assert sim.provision(0, 1, atomic=False, placement=Placement(near=2)).tolist() == [3]
    assert len(sim.provision(0, 1, atomic=False, placement=Placement(near=2))) == 0


def test_no_loop_can_name_a_slot():
    """The Provider protocol and the view's `provision` take a placement, never slots: a loop
    that tries is refused (and mypy refuses it before it runs)."""
    sim = sim_of([two_racks()])
    with pytest.raises(TypeError):
        sim.provision(0, 1, atomic=False, slots=np.array([3]))  # type: ignore[call-arg]
    assert "slots" not in inspect.signature(SimulationView.provision).parameters
    assert "slots" not in inspect.signature(Simulation.provision).parameters
    assert not any(name.startswith(("request", "provision")) for name in dir(Provider))
    assert not hasattr(sim.cloud, "request") and not hasattr(sim.cloud, "placed")


def test_a_bad_compact_rack_is_refused_by_key():
    with pytest.raises(ConfigError, match=r"compact_rack: must be one of emptiest, packed, got 'random'"):
        sc.Cluster(node_types=[sc.node_type("h100")], pools=[two_racks()], name="p", compact_rack="random")


def test_the_merged_planner_binds_where_the_provider_put_the_nodes():
    """A pool of 2 racks of 2 with a ready node in slot 0, taken by pod a. Pod b asks for a
    rack: the planner's what-if opens a node in the emptiest rack (slot 2), but asks for a
    placement, and a `packed` provider serves it from rack 0 (slot 1, the fullest rack that
    holds it): b is bound there, not where the plan had it, and runs."""
    cl = sc.cluster([sc.node_type("gpu8")], [sc.pool("a", "gpu8", max_size=4, nodes_per_rack=2, min_size=1,
                                                     compact_rack="packed")])
    table = sc.trace([{"job_id": "a", "gpu_count": 8, "duration_s": 600.0},
                      {"job_id": "b", "gpu_count": 8, "gang_locality": "rack", "submit_s": 1.0,
                       "duration_s": 600.0}])
    row, sim, _ = replay(cl, table, 7200.0)
    assert sim.pod_node.tolist() == [0, 1] and row["pods_done"] == 2
